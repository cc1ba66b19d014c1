//! The turn's side of the response body: events in, numbered frames out, over
//! a bounded channel so a slow client can never make a turn buffer without
//! limit.
//!
//! Backpressure is by coalescing, not by blocking the model stream: when the
//! channel is full, `text_delta`s are merged into one pending delta that goes
//! out as soon as there is room ([`EventSink::flush_ready`]). Every other event
//! waits for room, after the pending text, so the order the client sees is the
//! order the turn produced. A send that fails means the client went away —
//! unless a [`Tee`] keeps the frames (the frame log, [`crate::frames`]): the
//! client can then come back for them, so the turn goes on without it.
//!
//! The wire format is chosen once per response, by the route that knows its
//! client: it hands the sink a [`FrameEncoder`]. Numbering (the native frame
//! ids, what the tee gets) and coalescing are the same for every format.

use super::{FrameEncoder, NativeEncoder, StreamEvent};
use crate::ids::{SessionId, TurnId};
use bytes::Bytes;
use http_body::{Body, Frame};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Frames buffered between the turn and the HTTP body. Small: a frame is a few
/// hundred bytes, and coalescing absorbs anything beyond this.
pub const CHANNEL_FRAMES: usize = 64;

/// The client is gone: the body was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the client disconnected")]
pub struct Disconnected;

pub struct EventSink {
    tx: mpsc::Sender<Bytes>,
    numbering: Numbering,
    pending_text: String,
    stats: SinkStats,
}

/// The frame counter, the response's encoder, and the tee that gets a copy
/// of each numbered frame.
struct Numbering {
    /// The id of the last frame (ids start at 1).
    last_id: u64,
    wire: Box<dyn FrameEncoder>,
    tee: Option<Box<dyn Tee>>,
}

impl Numbering {
    /// Numbers and encodes the next frame, and gives the tee its copy (the
    /// event itself: a replay re-encodes it in its client's format).
    fn frame(&mut self, event: &StreamEvent) -> Bytes {
        self.last_id += 1;
        if let Some(t) = &mut self.tee {
            t.frame(self.last_id, event);
        }
        self.wire.encode(self.last_id, event)
    }
}

/// Where a copy of every numbered frame goes (the frame log's writer,
/// [`crate::frames::Recorder`]). The sink never waits on it.
#[async_trait::async_trait]
pub trait Tee: Send + Sync {
    /// The turn the frames belong to, once it has started (frames before are
    /// held). With `after`, nothing is stored before it resolves, and
    /// nothing at all when it resolves `false` (a turn refused beside its
    /// start: it stores nothing).
    fn begin(&mut self, session: &SessionId, turn: &TurnId, after: Option<futures::future::BoxFuture<'static, bool>>);
    /// One frame, with its id, exactly as it goes to the client.
    fn frame(&mut self, id: u64, event: &StreamEvent);
    /// Whether the frames are being kept, so a client that went away can
    /// come back for them.
    fn keeps(&self) -> bool;
    /// Waits (bounded) until every frame is stored or given up.
    async fn settle(&mut self);
}

/// What went out, for the turn's metrics.
#[derive(Debug, Clone, Default)]
pub struct SinkStats {
    pub first_frame: Option<std::time::Instant>,
    pub first_text: Option<std::time::Instant>,
    pub tool_calls: u32,
    /// The code of the `error` event, if one was sent.
    pub error_code: Option<String>,
    /// The write steps the stream showed (`operation` ends), in order: what
    /// the turn's answer is checked against
    /// ([`crate::claims`]).
    pub steps: Vec<crate::claims::Step>,
    /// A plan was stored this turn (`plan_created`): the answer describes a
    /// draft, or a replaced one, that no `operation` shows.
    pub planned: bool,
}

impl EventSink {
    /// A sink writing our native frames, and the body that streams what it sends.
    pub fn channel() -> (EventSink, SseBody) {
        Self::channel_with(Box::new(NativeEncoder))
    }

    /// A sink whose frames `wire` spells, and its body.
    pub fn channel_with(wire: Box<dyn FrameEncoder>) -> (EventSink, SseBody) {
        let (tx, rx) = mpsc::channel(CHANNEL_FRAMES);
        (
            EventSink {
                tx,
                numbering: Numbering { last_id: 0, wire, tee: None },
                pending_text: String::new(),
                stats: SinkStats::default(),
            },
            SseBody { rx },
        )
    }

    /// Sends an event: text is coalesced when the client is behind; anything
    /// else waits its turn.
    pub async fn send(&mut self, event: StreamEvent) -> Result<(), Disconnected> {
        if let StreamEvent::TextDelta { content } = event {
            return self.text(&content);
        }
        // Counted before the flush: a step happened whether or not the
        // client is still there to see it.
        match &event {
            StreamEvent::ToolCall { .. } => self.stats.tool_calls += 1,
            StreamEvent::Error { code, .. } => self.stats.error_code = Some(code.clone()),
            StreamEvent::Operation { .. } => self.stats.steps.extend(claim_step(&event)),
            StreamEvent::PlanCreated { .. } => self.stats.planned = true,
            _ => {}
        }
        self.flush().await?;
        let frame = self.numbering.frame(&event);
        if self.tx.send(frame).await.is_err() {
            return self.lost();
        }
        self.stats.first_frame.get_or_insert_with(std::time::Instant::now);
        Ok(())
    }

    pub fn stats(&self) -> &SinkStats {
        &self.stats
    }

    /// Copies every frame from now on to `tee` (before the first frame).
    pub fn tee(&mut self, tee: Box<dyn Tee>) {
        self.numbering.tee = Some(tee);
    }

    /// Tells the tee which turn its frames belong to; with `after`, to
    /// store them once it resolves `true` (none when `false`).
    pub fn begin_log(
        &mut self,
        session: &SessionId,
        turn: &TurnId,
        after: Option<futures::future::BoxFuture<'static, bool>>,
    ) {
        if let Some(t) = &mut self.numbering.tee {
            t.begin(session, turn, after);
        }
    }

    /// Waits until the tee has stored every frame (after `done`: the body
    /// must not end before, Lambda freezes then).
    pub async fn settle_log(&mut self) {
        if let Some(t) = &mut self.numbering.tee {
            t.settle().await;
        }
    }

    fn kept(&self) -> bool {
        self.numbering.tee.as_ref().is_some_and(|t| t.keeps())
    }

    /// The client is gone: the frame still counts when the tee keeps it.
    fn lost(&self) -> Result<(), Disconnected> {
        if self.kept() {
            Ok(())
        } else {
            Err(Disconnected)
        }
    }

    /// Queues a text delta without waiting.
    pub fn text(&mut self, content: &str) -> Result<(), Disconnected> {
        if !content.is_empty() {
            self.stats.first_text.get_or_insert_with(std::time::Instant::now);
        }
        self.pending_text.push_str(content);
        self.try_flush()
    }

    fn try_flush(&mut self) -> Result<(), Disconnected> {
        if self.pending_text.is_empty() {
            return Ok(());
        }
        match self.tx.try_reserve() {
            Ok(permit) => {
                permit.send(pending_frame(&mut self.numbering, &mut self.pending_text));
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(())) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(())) => {
                self.lost()?;
                pending_frame(&mut self.numbering, &mut self.pending_text);
                Ok(())
            }
        }
    }

    /// Waits for room and sends any pending text.
    pub async fn flush(&mut self) -> Result<(), Disconnected> {
        if self.pending_text.is_empty() {
            return Ok(());
        }
        match self.tx.reserve().await {
            Ok(permit) => permit.send(pending_frame(&mut self.numbering, &mut self.pending_text)),
            Err(_) => {
                self.lost()?;
                pending_frame(&mut self.numbering, &mut self.pending_text);
            }
        }
        Ok(())
    }

    pub fn has_pending(&self) -> bool {
        !self.pending_text.is_empty()
    }

    /// What the sink does while the turn waits on something else: sends any
    /// pending text as soon as there is room, and otherwise resolves only with
    /// `Err` when the client goes away. For `select!` loops, so text is never
    /// held back while the model is quiet and a disconnect is seen at once.
    pub async fn idle(&mut self) -> Result<(), Disconnected> {
        if self.pending_text.is_empty() {
            self.closed().await;
            return Err(Disconnected);
        }
        self.flush().await
    }

    /// Resolves when the client has gone away (never while the tee keeps the
    /// frames: the client can come back).
    pub async fn closed(&self) {
        self.tx.closed().await;
        if self.kept() {
            std::future::pending::<()>().await;
        }
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed() && !self.kept()
    }

    /// Frames sent so far (the id of the last one).
    pub fn frames_sent(&self) -> u64 {
        self.numbering.last_id
    }
}

/// The pending text as the next frame (the fields apart, so a channel permit
/// can be held meanwhile).
fn pending_frame(numbering: &mut Numbering, pending: &mut String) -> Bytes {
    let content = std::mem::take(pending);
    numbering.frame(&StreamEvent::TextDelta { content })
}

/// The HTTP body of a streamed turn: each frame is written as soon as it is sent.
pub struct SseBody {
    rx: mpsc::Receiver<Bytes>,
}

impl SseBody {
    /// A body of frames encoded elsewhere (a replay of the frame log).
    pub fn from_frames(rx: mpsc::Receiver<Bytes>) -> SseBody {
        SseBody { rx }
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|f| f.map(|b| Ok(Frame::data(b))))
    }
}

/// The write step an event ends, if it ends one: what the turn's answer is
/// checked against ([`crate::claims`]).
pub fn claim_step(event: &StreamEvent) -> Option<crate::claims::Step> {
    use super::{OperationAction, OperationStatus};
    let StreamEvent::Operation { action, entity_type, entity_name, status, .. } = event else { return None };
    let committed = match status {
        OperationStatus::Success => true,
        OperationStatus::Error => false,
        OperationStatus::Start => return None,
    };
    matches!(action, OperationAction::Create | OperationAction::Update | OperationAction::Delete).then(|| {
        crate::claims::Step { action: *action, entity_type: entity_type.clone(), name: entity_name.clone(), committed }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn steps_are_the_ends_of_write_operations() {
        use crate::sse::OperationAction::{Create, Delete, Update};
        use crate::sse::OperationStatus;
        let op = |action, status| StreamEvent::Operation {
            action,
            entity_type: "task".into(),
            entity_name: "Buy milk".into(),
            status,
            entity_id: None,
            summary: None,
        };
        assert_eq!(claim_step(&op(Create, OperationStatus::Start)), None);
        assert_eq!(claim_step(&op(crate::sse::OperationAction::Read, OperationStatus::Success)), None);
        let s = claim_step(&op(Delete, OperationStatus::Error)).unwrap();
        assert_eq!((s.action, s.name.as_str(), s.committed), (Delete, "Buy milk", false));
        assert!(claim_step(&op(Update, OperationStatus::Success)).unwrap().committed);
    }

    use super::*;
    use crate::sse::SseDecoder;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn slow_client_gets_coalesced_text_in_order() {
        let (mut sink, mut body) = EventSink::channel();
        // The client reads nothing until the turn has produced 3x the channel.
        for i in 0..(CHANNEL_FRAMES * 3) {
            sink.text(&format!("{i},")).unwrap();
        }
        let reader = tokio::spawn(async move {
            let mut wire = Vec::new();
            while let Some(f) = body.frame().await {
                wire.extend_from_slice(f.unwrap().data_ref().unwrap());
            }
            wire
        });
        sink.send(StreamEvent::error("x", "y", false)).await.unwrap();
        drop(sink);
        let wire = reader.await.unwrap();
        let frames = SseDecoder::new().feed(&wire).unwrap();
        // At most CHANNEL_FRAMES text frames plus one coalesced remainder and the error.
        assert!(frames.len() <= CHANNEL_FRAMES + 2, "{} frames", frames.len());
        let mut text = String::new();
        for f in &frames[..frames.len() - 1] {
            if let StreamEvent::TextDelta { content } = serde_json::from_str(&f.data).unwrap() {
                text.push_str(&content);
            }
        }
        let expected: String = (0..CHANNEL_FRAMES * 3).map(|i| format!("{i},")).collect();
        assert_eq!(text, expected);
        assert_eq!(frames.last().unwrap().event.as_deref(), Some("error"));
        let ids: Vec<u64> = frames.iter().map(|f| f.id.as_ref().unwrap().parse().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1));
    }

    /// A tee that keeps what it is given.
    struct Keep(std::sync::Arc<std::sync::Mutex<Vec<(u64, StreamEvent)>>>, bool);

    #[async_trait::async_trait]
    impl Tee for Keep {
        fn begin(&mut self, _: &SessionId, _: &TurnId, _: Option<futures::future::BoxFuture<'static, bool>>) {
            self.1 = true;
        }
        fn frame(&mut self, id: u64, event: &StreamEvent) {
            self.0.lock().unwrap().push((id, event.clone()));
        }
        fn keeps(&self) -> bool {
            self.1
        }
        async fn settle(&mut self) {}
    }

    #[tokio::test]
    async fn the_tee_gets_every_frame_as_sent_and_keeps_the_turn_going_without_its_client() {
        let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (mut sink, mut body) = EventSink::channel();
        sink.tee(Box::new(Keep(kept.clone(), false)));
        sink.send(StreamEvent::error("a", "before the turn began", false)).await.unwrap();
        sink.begin_log(&SessionId::new(), &TurnId::new(), None);
        for i in 0..(CHANNEL_FRAMES * 2) {
            sink.text(&format!("{i},")).unwrap();
        }
        let mut wire = Vec::new();
        while let Ok(Some(f)) = tokio::time::timeout(std::time::Duration::from_millis(50), body.frame()).await {
            wire.extend_from_slice(f.unwrap().data_ref().unwrap());
        }
        drop(body);
        // The client is gone, and the frames still count.
        assert_eq!(sink.send(StreamEvent::error("b", "after", false)).await, Ok(()));
        assert!(!sink.is_closed());
        let sent = SseDecoder::new().feed(&wire).unwrap();
        let kept = kept.lock().unwrap().clone();
        // Every frame sent, then the text still pending and the error, numbered on.
        assert_eq!(kept.len(), sent.len() + 2);
        for ((id, event), f) in kept.iter().zip(&sent) {
            assert_eq!(f.id.as_deref(), Some(id.to_string().as_str()));
            assert_eq!(&serde_json::from_str::<StreamEvent>(&f.data).unwrap(), event, "coalesced text as sent");
        }
        let ids: Vec<u64> = kept.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, (1..=kept.len() as u64).collect::<Vec<_>>());
        let text: String = kept
            .iter()
            .filter_map(|(_, e)| match e {
                StreamEvent::TextDelta { content } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, (0..CHANNEL_FRAMES * 2).map(|i| format!("{i},")).collect::<String>());
    }

    #[tokio::test]
    async fn dropped_body_is_a_disconnect() {
        let (mut sink, body) = EventSink::channel();
        drop(body);
        assert_eq!(sink.send(StreamEvent::error("a", "b", false)).await, Err(Disconnected));
    }
}
