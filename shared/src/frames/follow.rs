//! Reading the log back: a turn's frames after a given id, then the ones
//! still to come, by polling DynamoDB (so any instance can serve it), until
//! `done`. Format-neutral: each wire format encodes the [`StoredFrame`]s.
//!
//! A follow always ends: with the stored `done`; or, when the turn can no
//! longer be running (its lease released or expired) and [`GRACE`] has
//! passed without its `done` being stored (its invocation was cut off, or its
//! frame log failed), with an `error` `stream_interrupted` and a `done`
//! (reason `error`) numbered after the last stored frame; or, without `done`,
//! at the caller's `until` (the client comes back with its last id).

use super::{FrameLog, LatestTurn, StoredFrame, MAX_FRAME_ID, POLL, RESUME_WINDOW};
use crate::ids::{SessionId, TurnId, UserId};
use crate::sse::{DoneReason, StreamEvent};
use crate::store::StoreError;
use futures::stream::BoxStream;
use futures::StreamExt;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long after its lease is gone a turn's last batch may still land (the
/// turn releases the lease before `done`, and stores `done` after sending it).
pub const GRACE: Duration = Duration::from_secs(5);
/// How often a follower that sees no new frame checks the turn's lease.
const LIVENESS_EVERY: Duration = Duration::from_secs(1);
/// Failed reads in a row before a follower gives up.
const READ_ATTEMPTS: u32 = 5;

/// A turn being followed: its id and its frames after the reader's `after`,
/// in order, ids consecutive, ending after `done`.
pub struct Follow {
    pub turn_id: TurnId,
    pub frames: BoxStream<'static, StoredFrame>,
}

/// The session's latest turn after frame `after`, if one is running or
/// finished less than [`RESUME_WINDOW`] ago (and has frames after `after`);
/// `None` otherwise, also for a session that is not this user's, and for an
/// `after` no frame can follow ([`MAX_FRAME_ID`] or more).
pub async fn follow(
    log: Arc<dyn FrameLog>,
    user: &UserId,
    session: &SessionId,
    after: u64,
    until: Instant,
) -> Result<Option<Follow>, StoreError> {
    if after >= MAX_FRAME_ID {
        return Ok(None);
    }
    let (latest, holder) = tokio::join!(log.latest(user, session, after), log.lease_holder(user, session));
    let (latest, holder) = (latest?, holder?);
    let latest = match (latest, holder.clone()) {
        // The running turn has no batch stored yet (its first is on its way).
        (l, Some(running)) if l.as_ref().is_none_or(|l| l.turn_id != running) => LatestTurn::unstored(running),
        (Some(l), _) => l,
        (None, _) => return Ok(None),
    };
    let recent = crate::now_ms() - latest.last_written_at <= RESUME_WINDOW.as_millis() as i64;
    let offered = if latest.done {
        recent && latest.batches.iter().flat_map(|b| &b.frames).any(|f| f.id > after)
    } else {
        // Cut off long ago: nothing to follow any more.
        recent || holder.as_ref() == Some(&latest.turn_id)
    };
    if !offered {
        return Ok(None);
    }
    let latest = match (&holder, latest.done) {
        (None, false) => settled(&log, user, session, latest, until).await?,
        _ => latest,
    };
    Ok(Some(start(log, user, session, latest, after, until)))
}

/// A turn that no longer holds its lease but whose `done` is not stored yet:
/// it finished (its answer is in the history) and its last batch is on its
/// way — it is stored after `done` was sent. Its batches are awaited (at most
/// [`GRACE`] after its last write, and not past `until`) so that its replay
/// is delivered whole: a client that replays a turn first empties the
/// message it has, and would otherwise show it part-way until the last batch
/// landed (the chat page after a reload right after a turn).
async fn settled(
    log: &Arc<dyn FrameLog>,
    user: &UserId,
    session: &SessionId,
    mut latest: LatestTurn,
    until: Instant,
) -> Result<LatestTurn, StoreError> {
    let gone_at = Instant::now()
        + GRACE.saturating_sub(Duration::from_millis((crate::now_ms() - latest.last_written_at).max(0) as u64));
    while !latest.done && Instant::now() < gone_at.min(until) {
        tokio::time::sleep(POLL).await;
        let from = latest.batches.last().map_or(1, |b| b.last_id() + 1);
        let more = log.batches_from(user, session, &latest.turn_id, from).await?;
        if let Some(last) = more.last() {
            latest.done = last.ends_turn();
            latest.last_written_at = last.written_at;
        }
        latest.batches.extend(more);
    }
    Ok(latest)
}

/// `turn`'s frames after `after` (a retried `stream_run_id`: any turn whose
/// frames are still stored); `None` when it has none stored (or none can
/// follow `after`).
pub async fn follow_turn(
    log: Arc<dyn FrameLog>,
    user: &UserId,
    session: &SessionId,
    turn: &TurnId,
    after: u64,
    until: Instant,
) -> Result<Option<Follow>, StoreError> {
    if after >= MAX_FRAME_ID {
        return Ok(None);
    }
    let batches = log.batches_from(user, session, turn, 1).await?;
    let latest = match batches.last() {
        Some(last) => {
            LatestTurn { turn_id: turn.clone(), last_written_at: last.written_at, done: last.ends_turn(), batches }
        }
        // Running, its first batch on its way.
        None if log.lease_holder(user, session).await?.as_ref() == Some(turn) => LatestTurn::unstored(turn.clone()),
        None => return Ok(None),
    };
    Ok(Some(start(log, user, session, latest, after, until)))
}

fn start(
    log: Arc<dyn FrameLog>,
    user: &UserId,
    session: &SessionId,
    latest: LatestTurn,
    after: u64,
    until: Instant,
) -> Follow {
    let mut state = Follower {
        log,
        user: user.clone(),
        session: session.clone(),
        turn: latest.turn_id.clone(),
        next: after + 1,
        stored: 0,
        queue: VecDeque::new(),
        ended: false,
        until,
        checked: None,
        gone_since: None,
        failures: 0,
    };
    // The first batch read may begin anywhere in the turn.
    state.stored = latest.batches.first().map_or(0, |b| b.first_id() - 1);
    state.take(latest.batches);
    let turn_id = latest.turn_id;
    let frames = futures::stream::unfold(state, |mut s| async move { s.next_frame().await.map(|f| (f, s)) });
    Follow { turn_id, frames: frames.boxed() }
}

struct Follower {
    log: Arc<dyn FrameLog>,
    user: UserId,
    session: SessionId,
    turn: TurnId,
    /// The id of the next frame to hand out.
    next: u64,
    /// The last frame id of the stored batches read so far (the next batch
    /// starts right after it, also when the reader's `after` is inside it).
    stored: u64,
    queue: VecDeque<StoredFrame>,
    ended: bool,
    until: Instant,
    /// When the lease was last checked.
    checked: Option<Instant>,
    /// Since when the turn is known not to be running.
    gone_since: Option<Instant>,
    failures: u32,
}

impl Follower {
    /// Takes the batches that continue the stored sequence, and queues
    /// their frames the reader does not have yet.
    fn take(&mut self, batches: Vec<super::FrameBatch>) {
        for b in batches {
            if b.first_id() != self.stored + 1 {
                // Not contiguous (cannot happen with one writer per turn): read again.
                return;
            }
            for f in b.frames {
                self.stored = f.id;
                if f.id == self.next {
                    self.next += 1;
                    self.queue.push_back(f);
                }
            }
        }
    }

    async fn next_frame(&mut self) -> Option<StoredFrame> {
        loop {
            if let Some(f) = self.queue.pop_front() {
                self.ended |= f.is_done();
                return Some(f);
            }
            if self.ended || Instant::now() >= self.until {
                return None;
            }
            match self.log.batches_from(&self.user, &self.session, &self.turn, self.stored + 1).await {
                Ok(batches) => {
                    self.failures = 0;
                    self.take(batches);
                }
                Err(e) => {
                    self.failures += 1;
                    tracing::warn!(error = %e, failures = self.failures, "frame log read failed");
                    if self.failures >= READ_ATTEMPTS {
                        self.close("store_unavailable", "the stream could not be read back; try again", true);
                    }
                }
            }
            if !self.queue.is_empty() {
                continue;
            }
            if self.turn_is_over().await {
                self.close(
                    "stream_interrupted",
                    "the turn ended without finishing its stream; what it saved is in the session's history",
                    false,
                );
                continue;
            }
            tokio::time::sleep(POLL.min(self.until.saturating_duration_since(Instant::now()))).await;
        }
    }

    /// True once the turn has not been running for [`GRACE`] (checked every
    /// [`LIVENESS_EVERY`]).
    async fn turn_is_over(&mut self) -> bool {
        let now = Instant::now();
        if self.gone_since.is_none() && self.checked.is_none_or(|t| now - t >= LIVENESS_EVERY) {
            self.checked = Some(now);
            match self.log.lease_holder(&self.user, &self.session).await {
                Ok(h) if h.as_ref() == Some(&self.turn) => {}
                Ok(_) => self.gone_since = Some(now),
                Err(e) => tracing::warn!(error = %e, "frame log: lease check failed"),
            }
        }
        self.gone_since.is_some_and(|t| now - t >= GRACE)
    }

    /// Ends the follow with `error` and `done`, numbered after the last frame.
    fn close(&mut self, code: &str, message: &str, retryable: bool) {
        let error = StreamEvent::error(code, message, retryable);
        let done = StreamEvent::Done {
            reason: DoneReason::Error,
            session_id: Some(self.session.clone()),
            turn_id: self.turn.clone(),
            usage: None,
            replayed: false,
        };
        for event in [error, done] {
            self.queue.push_back(StoredFrame { id: self.next, event });
            self.next += 1;
        }
    }
}
