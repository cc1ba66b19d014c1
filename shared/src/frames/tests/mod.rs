//! The frame logic against the in-memory twin: the recorder's batching and
//! the followers, no DynamoDB. Time is tokio's paused clock: a test that
//! waits on the writer's or the follower's timers advances it instantly, and
//! nothing depends on how fast the machine is.

mod follow;
mod recorder;

use super::{FrameBatch, FrameLog, LatestTurn, MemoryFrameLog};
use crate::ids::{SessionId, TurnId, UserId};
use crate::store::StoreError;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use tokio::sync::{watch, Semaphore};

/// The twin with faults and a gate: appends can be held (one permit each)
/// or failed from a given call on; reads of a turn's batches can fail.
pub(super) struct Faulty {
    pub inner: MemoryFrameLog,
    /// Appends started so far.
    started: watch::Sender<usize>,
    /// When set, each append waits for a permit.
    gate: Option<Semaphore>,
    /// The first append (1-based) that fails, and every one after it.
    fail_from: AtomicUsize,
    in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    /// The next this-many `batches_from` calls fail.
    pub failing_reads: AtomicU32,
}

impl Faulty {
    pub fn new() -> Faulty {
        Faulty {
            inner: MemoryFrameLog::new(),
            started: watch::channel(0).0,
            gate: None,
            fail_from: AtomicUsize::new(usize::MAX),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            failing_reads: AtomicU32::new(0),
        }
    }

    /// Appends wait for [`Self::open`].
    pub fn gated() -> Faulty {
        Faulty { gate: Some(Semaphore::new(0)), ..Faulty::new() }
    }

    pub fn failing_from(n: usize) -> Faulty {
        let f = Faulty::new();
        f.fail_from.store(n, Ordering::SeqCst);
        f
    }

    /// Lets `n` more appends through the gate.
    pub fn open(&self, n: usize) {
        self.gate.as_ref().expect("a gated log").add_permits(n);
    }

    pub fn appends_started(&self) -> usize {
        *self.started.borrow()
    }

    /// Waits (causally, no clock) until `n` appends have started.
    pub async fn until_appends_started(&self, n: usize) {
        let mut rx = self.started.subscribe();
        rx.wait_for(|started| *started >= n).await.expect("the sender lives in self");
    }
}

#[async_trait::async_trait]
impl FrameLog for Faulty {
    async fn append(&self, user: &UserId, session: &SessionId, batch: &FrameBatch) -> Result<(), StoreError> {
        let mut call = 0;
        self.started.send_modify(|n| {
            *n += 1;
            call = *n;
        });
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("never closed").forget();
        }
        let out = if call >= self.fail_from.load(Ordering::SeqCst) {
            Err(StoreError::Backend("injected write failure".into()))
        } else {
            self.inner.append(user, session, batch).await
        };
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        out
    }

    async fn latest(&self, user: &UserId, session: &SessionId, after: u64) -> Result<Option<LatestTurn>, StoreError> {
        self.inner.latest(user, session, after).await
    }

    async fn batches_from(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: &TurnId,
        from: u64,
    ) -> Result<Vec<FrameBatch>, StoreError> {
        let fail = self.failing_reads.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if fail {
            return Err(StoreError::Backend("injected read failure".into()));
        }
        self.inner.batches_from(user, session, turn, from).await
    }

    async fn lease_holder(&self, user: &UserId, session: &SessionId) -> Result<Option<TurnId>, StoreError> {
        self.inner.lease_holder(user, session).await
    }
}

/// A lease that outlives any test.
pub(super) fn live_until() -> i64 {
    crate::now_ms() + 3_600_000
}
