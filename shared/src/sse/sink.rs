//! The turn's side of the response body: events in, numbered frames out, over
//! a bounded channel so a slow client can never make a turn buffer without
//! limit.
//!
//! Backpressure is by coalescing, not by blocking the model stream: when the
//! channel is full, `text_delta`s are merged into one pending delta that goes
//! out as soon as there is room ([`EventSink::flush_ready`]). Every other event
//! waits for room, after the pending text, so the order the client sees is the
//! order the turn produced. A send that fails means the client went away.
//!
//! The wire format is chosen once per response ([`WireFormat`]); numbering
//! (the native frame ids) and coalescing are the same for both.

use super::ui::UiEncoder;
use super::{SseEncoder, StreamEvent};
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

/// What the body speaks: our native SSE events, or the AI SDK's UI message
/// stream (`super::ui`) for the assistant message `message_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireFormat {
    Native,
    UiMessageStream { message_id: String },
}

pub struct EventSink {
    tx: mpsc::Sender<Bytes>,
    encoder: SseEncoder,
    /// Set for [`WireFormat::UiMessageStream`]: what goes on the wire.
    ui: Option<UiEncoder>,
    pending_text: String,
    stats: SinkStats,
}

/// What went out, for the turn's metrics.
#[derive(Debug, Clone, Default)]
pub struct SinkStats {
    pub first_frame: Option<std::time::Instant>,
    pub first_text: Option<std::time::Instant>,
    pub tool_calls: u32,
    /// The code of the `error` event, if one was sent.
    pub error_code: Option<String>,
}

impl EventSink {
    /// A sink and the body that streams what it sends.
    pub fn channel() -> (EventSink, SseBody) {
        Self::channel_with(WireFormat::Native)
    }

    /// A sink writing `format`, and its body.
    pub fn channel_with(format: WireFormat) -> (EventSink, SseBody) {
        let (tx, rx) = mpsc::channel(CHANNEL_FRAMES);
        let ui = match format {
            WireFormat::Native => None,
            WireFormat::UiMessageStream { message_id } => Some(UiEncoder::new(message_id)),
        };
        let sink =
            EventSink { tx, encoder: SseEncoder::new(), ui, pending_text: String::new(), stats: SinkStats::default() };
        (sink, SseBody { rx })
    }

    /// Sends an event: text is coalesced when the client is behind; anything
    /// else waits its turn.
    pub async fn send(&mut self, event: StreamEvent) -> Result<(), Disconnected> {
        if let StreamEvent::TextDelta { content } = event {
            return self.text(&content);
        }
        self.flush().await?;
        match &event {
            StreamEvent::ToolCall { .. } => self.stats.tool_calls += 1,
            StreamEvent::Error { code, .. } => self.stats.error_code = Some(code.clone()),
            _ => {}
        }
        let frame = encode(&mut self.encoder, &mut self.ui, &event);
        self.tx.send(frame).await.map_err(|_| Disconnected)?;
        self.stats.first_frame.get_or_insert_with(std::time::Instant::now);
        Ok(())
    }

    pub fn stats(&self) -> &SinkStats {
        &self.stats
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
                let content = std::mem::take(&mut self.pending_text);
                permit.send(encode(&mut self.encoder, &mut self.ui, &StreamEvent::TextDelta { content }));
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(())) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(())) => Err(Disconnected),
        }
    }

    /// Waits for room and sends any pending text.
    pub async fn flush(&mut self) -> Result<(), Disconnected> {
        if self.pending_text.is_empty() {
            return Ok(());
        }
        let permit = self.tx.reserve().await.map_err(|_| Disconnected)?;
        let content = std::mem::take(&mut self.pending_text);
        permit.send(encode(&mut self.encoder, &mut self.ui, &StreamEvent::TextDelta { content }));
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
            self.tx.closed().await;
            return Err(Disconnected);
        }
        self.flush().await
    }

    /// Resolves when the client has gone away.
    pub async fn closed(&self) {
        self.tx.closed().await
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Frames sent so far (the id of the last one).
    pub fn frames_sent(&self) -> u64 {
        self.encoder.last_id()
    }
}

/// One event as the body's bytes; the native frame is numbered either way.
fn encode(native: &mut SseEncoder, ui: &mut Option<UiEncoder>, event: &StreamEvent) -> Bytes {
    let frame = native.encode(event);
    match ui {
        None => frame,
        Some(ui) => ui.encode(event),
    }
}

/// The HTTP body of a streamed turn: each frame is written as soon as it is sent.
pub struct SseBody {
    rx: mpsc::Receiver<Bytes>,
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|f| f.map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
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

    #[tokio::test]
    async fn dropped_body_is_a_disconnect() {
        let (mut sink, body) = EventSink::channel();
        drop(body);
        assert_eq!(sink.send(StreamEvent::error("a", "b", false)).await, Err(Disconnected));
    }
}
