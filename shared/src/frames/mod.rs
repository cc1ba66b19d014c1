//! The frame log: every frame of a running turn, kept in DynamoDB so that a
//! client that lost its stream can come back for the rest (`GET
//! /sessions/{id}/stream`, docs/sessions.md), from any instance, and so that a
//! retried `stream_run_id` follows the first request's turn
//! ([`crate::turn::retry`]).
//!
//! Contract:
//! - what is stored is what the client was sent: the turn's [`EventSink`](crate::sse::EventSink)
//!   hands each numbered frame (its id and its native [`StreamEvent`], text
//!   deltas as coalesced for the client) to a [`Recorder`], so a replay
//!   re-encoded by any wire format is the live stream, id for id;
//! - off the hot path: the sink never waits on the log; a background writer
//!   stores the frames in batches, one item per batch (at most every
//!   [`FLUSH_EVERY`], or [`FLUSH_FRAMES`] frames, or once the batch
//!   [packs](pack) to [`FLUSH_PACKED_BYTES`], or at `done`), one write in
//!   flight at a time, so batches land in order and contiguous;
//! - the turn awaits the last batch (the one with `done`) after sending `done`
//!   and before its body ends, at most [`SETTLE_WAIT`];
//! - a failed write never fails the turn: it is logged and the writer stops
//!   for that turn (no later batch, so the log never has a gap); a follower
//!   then ends with `error` `stream_interrupted` + `done` once the turn is
//!   over;
//! - frames before the turn knows its session (`agent_state`) are held and
//!   written with the first batch; a request that never starts a turn (refused,
//!   a retry) writes nothing;
//! - items expire [`FRAMES_TTL_SECS`] after their write (TTL on `ttl`); a
//!   finished turn is offered to `GET /sessions/{id}/stream` for
//!   [`RESUME_WINDOW`] after its `done` was stored, and to a retried
//!   `stream_run_id` as long as its frames last.
//!
//! Keys (the table in [`crate::store`]): `pk = U#<user>#S#<session>`, `sk =
//! FRAMES#<turn id>#<first frame id, 10 digits>`. Turn ids are UUIDv7, so
//! they sort by start time: the session's latest turn is the first item of a
//! descending Query on `FRAMES#`.

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
mod dynamo;
mod follow;
#[cfg(any(test, feature = "testkit"))]
mod memory;
mod recorder;
#[cfg(test)]
mod tests;

pub use dynamo::DynamoFrameLog;
pub use follow::{follow, follow_turn, Follow};
#[cfg(any(test, feature = "testkit"))]
pub use memory::MemoryFrameLog;
pub use recorder::Recorder;

use crate::ids::{SessionId, TurnId, UserId};
use crate::sse::StreamEvent;
use crate::store::StoreError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Stored frames expire this long after their write.
pub const FRAMES_TTL_SECS: i64 = 24 * 3600;
/// How long a finished turn is offered to `GET /sessions/{id}/stream`
/// after its `done` was stored: a client that lost the stream just before
/// `done` still gets it; later, the session's history has the answer.
pub const RESUME_WINDOW: Duration = Duration::from_secs(60);
/// The longest a frame waits in the writer before its batch is written, by
/// default (`FRAME_FLUSH_MS`): 250 ms, from `bench --mode cost`
/// (docs/cost.md#the-frame-logs-batch-interval): a batch is billed per KB, so
/// a batch is written as soon as it fills its KB ([`FLUSH_PACKED_BYTES`]) and
/// otherwise waits up to this long for more frames to share the write. (It
/// was 50 ms while a replay right after a turn could show the answer
/// part-way: a finished turn's replay now waits for its last batch,
/// [`follow`].)
pub const FLUSH_EVERY: Duration = Duration::from_millis(250);
/// A batch is written as soon as its frames [pack](pack) to this many bytes:
/// with its keys and other attributes (~180 bytes) the item is then just
/// under DynamoDB's 1 KB write unit; waiting longer would bill a second one.
pub const FLUSH_PACKED_BYTES: usize = 800;
/// A batch is written as soon as it holds this many frames.
pub const FLUSH_FRAMES: usize = 64;
/// A batch's JSON is kept under this (DynamoDB items stop at 400 KB).
pub const BATCH_BYTES: usize = 300_000;
/// The longest a turn waits for its last batch after `done`.
pub const SETTLE_WAIT: Duration = Duration::from_secs(3);
/// How often a follower looks for new frames.
pub const POLL: Duration = Duration::from_millis(100);
/// The largest frame id a turn can have: the sort key spells the id in ten
/// digits (`keys::frames_sk`). A reader's `after` at or past it has nothing
/// to follow, and every `after + 1` below is taken only under it, so the end
/// of the id space (a client's `Last-Event-ID: 18446744073709551615`) never
/// overflows (a panic in debug builds, a wrap to 0 in release).
pub const MAX_FRAME_ID: u64 = 9_999_999_999;

/// One frame of a turn, as the client was sent it: its SSE `id` and its
/// event (the native event, not the wire bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredFrame {
    pub id: u64,
    pub event: StreamEvent,
}

/// The stored form of a batch's frames: their JSON array, deflated (raw
/// deflate). A batch is mostly text deltas repeating the same keys, so it
/// packs to a fifth to a third of its JSON, and DynamoDB bills a write per
/// KB of item.
pub fn pack(frames: &[StoredFrame]) -> Vec<u8> {
    let json = serde_json::to_vec(frames).expect("frames serialize");
    miniz_oxide::deflate::compress_to_vec(&json, PACK_LEVEL)
}

/// The frames of a [`pack`]ed batch.
pub fn unpack(packed: &[u8]) -> Result<Vec<StoredFrame>, String> {
    // No batch's JSON is larger than BATCH_BYTES: a larger one is corrupt.
    let json = miniz_oxide::inflate::decompress_to_vec_with_limit(packed, BATCH_BYTES + 1)
        .map_err(|e| format!("inflate: {e}"))?;
    serde_json::from_slice(&json).map_err(|e| e.to_string())
}

/// Deflate's level for [`pack`]: 6, zlib's default (1 packs text deltas ~15%
/// larger; a batch is a few KB, so the time is microseconds either way).
const PACK_LEVEL: u8 = 6;

impl StoredFrame {
    pub fn is_done(&self) -> bool {
        matches!(self.event, StreamEvent::Done { .. })
    }
}

/// One item of the log: consecutive frames of one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameBatch {
    pub turn_id: TurnId,
    /// Never empty; ids consecutive.
    pub frames: Vec<StoredFrame>,
    /// When it was written (ms since the epoch).
    pub written_at: i64,
}

impl FrameBatch {
    pub fn first_id(&self) -> u64 {
        self.frames.first().map_or(0, |f| f.id)
    }

    pub fn last_id(&self) -> u64 {
        self.frames.last().map_or(0, |f| f.id)
    }

    pub fn ends_turn(&self) -> bool {
        self.frames.last().is_some_and(StoredFrame::is_done)
    }
}

/// The session's latest turn in the log, as far as a reader asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct LatestTurn {
    pub turn_id: TurnId,
    /// The batches holding frames after the reader's `after`, oldest first
    /// (the first may also hold earlier frames).
    pub batches: Vec<FrameBatch>,
    /// The turn's last batch: when it was written and whether it ends the turn.
    pub last_written_at: i64,
    pub done: bool,
}

impl LatestTurn {
    /// A running turn with no batch stored yet.
    pub fn unstored(turn_id: TurnId) -> LatestTurn {
        LatestTurn { turn_id, batches: Vec::new(), last_written_at: crate::now_ms(), done: false }
    }
}

/// Where the frame log lives: [`DynamoFrameLog`]; in tests, its in-memory
/// twin (`MemoryFrameLog`, feature `testkit`). Both are held to one contract
/// suite (`frames::contract`: `cargo test -p shared`, and
/// `tests/tests/contract_frames.rs` on DynamoDB Local).
#[async_trait::async_trait]
pub trait FrameLog: Send + Sync {
    /// Stores one batch (a plain put: the writer is the turn's only one).
    async fn append(&self, user: &UserId, session: &SessionId, batch: &FrameBatch) -> Result<(), StoreError>;

    /// The session's latest turn with its batches after frame `after`;
    /// `None` when the session (of this user) has no frames.
    async fn latest(&self, user: &UserId, session: &SessionId, after: u64) -> Result<Option<LatestTurn>, StoreError>;

    /// The batches of `turn` starting at frame `from` or later, oldest first
    /// (consistent read).
    async fn batches_from(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: &TurnId,
        from: u64,
    ) -> Result<Vec<FrameBatch>, StoreError>;

    /// The turn that may still be running: the one holding the session's
    /// lease, while the lease has not expired.
    async fn lease_holder(&self, user: &UserId, session: &SessionId) -> Result<Option<TurnId>, StoreError>;
}
