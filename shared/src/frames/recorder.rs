//! The turn's side of the frame log: a [`Tee`] that hands each frame to a
//! background writer over an unbounded channel (the sink never waits), and the
//! writer, which stores them in batches, one write in flight at a time.

use super::{
    pack, FrameBatch, FrameLog, StoredFrame, BATCH_BYTES, FLUSH_EVERY, FLUSH_FRAMES, FLUSH_PACKED_BYTES, SETTLE_WAIT,
};
use crate::ids::{SessionId, TurnId, UserId};
use crate::sse::{StreamEvent, Tee};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// One turn's recorder: holds the frames until the turn has begun, then
/// feeds its writer.
pub struct Recorder {
    log: Arc<dyn FrameLog>,
    user: UserId,
    /// Frames before [`Tee::begin`].
    held: Vec<StoredFrame>,
    writer: Option<Writer>,
    /// The longest a frame waits in the writer ([`FLUSH_EVERY`] by default).
    every: std::time::Duration,
}

struct Writer {
    tx: Option<mpsc::UnboundedSender<StoredFrame>>,
    /// Cleared when a write failed: the turn's log ends there.
    healthy: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Recorder {
    pub fn new(log: Arc<dyn FrameLog>, user: UserId) -> Recorder {
        Recorder { log, user, held: Vec::new(), writer: None, every: FLUSH_EVERY }
    }

    /// Batches written at most `every` after their first frame
    /// (`FRAME_FLUSH_MS`; the trade-off is in docs/cost.md).
    pub fn every(mut self, every: std::time::Duration) -> Recorder {
        self.every = every;
        self
    }
}

#[async_trait::async_trait]
impl Tee for Recorder {
    fn begin(&mut self, session: &SessionId, turn: &TurnId, after: Option<futures::future::BoxFuture<'static, bool>>) {
        if self.writer.is_some() {
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        for frame in self.held.drain(..) {
            let _ = tx.send(frame);
        }
        let healthy = Arc::new(AtomicBool::new(true));
        let key = Key { log: self.log.clone(), user: self.user.clone(), session: session.clone(), turn: turn.clone() };
        let (every, writing) = (self.every, healthy.clone());
        let task = tokio::spawn(async move {
            let go = match after {
                Some(go) => go.await,
                None => true,
            };
            // Refused: the frames are dropped with the channel unread.
            if go {
                write(key, rx, writing, every).await;
            }
        });
        self.writer = Some(Writer { tx: Some(tx), healthy, task });
    }

    fn frame(&mut self, id: u64, event: &StreamEvent) {
        let frame = StoredFrame { id, event: event.clone() };
        match &self.writer {
            None => self.held.push(frame),
            Some(w) => {
                if let Some(tx) = &w.tx {
                    let _ = tx.send(frame);
                }
            }
        }
    }

    fn keeps(&self) -> bool {
        self.writer.as_ref().is_some_and(|w| w.healthy.load(Ordering::Relaxed))
    }

    async fn settle(&mut self) {
        let Some(w) = &mut self.writer else { return };
        // Closing the channel tells the writer to write what it holds and end.
        w.tx = None;
        if tokio::time::timeout(SETTLE_WAIT, &mut w.task).await.is_err() {
            tracing::error!(
                "the frame log's last batch was not stored in time; this turn cannot be resumed to its end"
            );
        }
    }
}

/// Where the writer's batches go.
struct Key {
    log: Arc<dyn FrameLog>,
    user: UserId,
    session: SessionId,
    turn: TurnId,
}

/// The writer: a batch starts with the first frame that arrives and is
/// written `every` later, at [`FLUSH_FRAMES`] frames, once it packs to
/// [`FLUSH_PACKED_BYTES`], at `done`, or when the channel closes, whichever
/// comes first. A failed write stops it.
async fn write(
    key: Key,
    mut rx: mpsc::UnboundedReceiver<StoredFrame>,
    healthy: Arc<AtomicBool>,
    every: std::time::Duration,
) {
    let mut next: Option<StoredFrame> = None;
    loop {
        let first = match next.take() {
            Some(f) => f,
            None => match rx.recv().await {
                Some(f) => f,
                None => return,
            },
        };
        let due = tokio::time::Instant::now() + every;
        let mut bytes = frame_bytes(&first);
        let mut frames = vec![first];
        let mut full = Full::default();
        while frames.len() < FLUSH_FRAMES
            && !frames.last().is_some_and(StoredFrame::is_done)
            && !full.is(&frames, bytes)
        {
            let frame = tokio::select! {
                f = rx.recv() => match f { Some(f) => f, None => break },
                _ = tokio::time::sleep_until(due) => break,
            };
            let size = frame_bytes(&frame);
            if bytes + size > BATCH_BYTES {
                next = Some(frame);
                break;
            }
            bytes += size;
            frames.push(frame);
        }
        if bytes > BATCH_BYTES {
            tracing::error!(bytes, "a frame too large for the frame log; this turn cannot be resumed past it");
            healthy.store(false, Ordering::Relaxed);
            return;
        }
        let batch = FrameBatch { turn_id: key.turn.clone(), frames, written_at: crate::now_ms() };
        if let Err(e) = key.log.append(&key.user, &key.session, &batch).await {
            tracing::error!(error = %e, "frame log write failed; this turn cannot be resumed past it");
            healthy.store(false, Ordering::Relaxed);
            return;
        }
    }
}

/// Whether a batch fills its write unit: packed to [`FLUSH_PACKED_BYTES`].
/// Packing is tried only once the JSON is twice that (these frames pack 3–5:1,
/// so a smaller batch does not fill it) and then every
/// [`PROBE_EVERY`] bytes of JSON, so that a batch is packed a few times, not
/// at every frame, and overshoots the unit by a frame or two at most.
#[derive(Default)]
struct Full {
    probed_at: usize,
}

/// JSON bytes between two packings of a growing batch.
const PROBE_EVERY: usize = 256;

impl Full {
    fn is(&mut self, frames: &[StoredFrame], bytes: usize) -> bool {
        if bytes < 2 * FLUSH_PACKED_BYTES || bytes < self.probed_at + PROBE_EVERY {
            return false;
        }
        self.probed_at = bytes;
        pack(frames).len() >= FLUSH_PACKED_BYTES
    }
}

/// The frame's share of a batch's JSON.
fn frame_bytes(frame: &StoredFrame) -> usize {
    serde_json::to_string(frame).map_or(usize::MAX / 2, |j| j.len() + 1)
}
