//! The frame log in memory: [`DynamoFrameLog`](super::DynamoFrameLog)'s twin
//! for unit tests, so the writer and the followers can be tested without
//! DynamoDB. The contract suite ([`super::contract`]) runs against both.
//!
//! Faithful where the logic depends on it: items are keyed by the same
//! partition and sort key strings ([`keys::session_pk`], [`keys::frames_sk`]),
//! so turns sort by their (UUIDv7) id and batches by their zero-padded first
//! frame id exactly as DynamoDB sorts them; a put replaces an item with the
//! same key; a range whose bounds are reversed fails as DynamoDB's does. The
//! session's lease is the three fields [`FrameLog::lease_holder`] reads
//! (`lease_turn`, `lease_until`, `status`), set by the test. Not modelled:
//! TTL expiry, paging, throttling (wrap the twin to inject failures).

use super::{FrameBatch, FrameLog, LatestTurn, MAX_FRAME_ID};
use crate::ids::{SessionId, TurnId, UserId};
use crate::store::keys::{self, FRAMES_END, FRAMES_PREFIX};
use crate::store::StoreError;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// The session item's lease fields, as stored.
#[derive(Debug, Clone, Default)]
struct LeaseFields {
    turn: Option<String>,
    until_ms: Option<i64>,
    deleting: bool,
}

#[derive(Default)]
struct Tables {
    /// `pk` → `sk` → batch.
    frames: HashMap<String, BTreeMap<String, FrameBatch>>,
    /// `pk` → the session item's lease fields (absent: no session item).
    leases: HashMap<String, LeaseFields>,
}

/// The in-memory frame log.
#[derive(Default)]
pub struct MemoryFrameLog {
    tables: Mutex<Tables>,
}

impl MemoryFrameLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// `turn` holds the session's lease until `until_ms` (ms since the epoch).
    pub fn set_lease(&self, user: &UserId, session: &SessionId, turn: &TurnId, until_ms: i64) {
        let mut t = self.lock();
        let lease = t.leases.entry(keys::session_pk(user, session)).or_default();
        lease.turn = Some(turn.to_string());
        lease.until_ms = Some(until_ms);
    }

    /// The lease is released: the session item stays, without a holder.
    pub fn release_lease(&self, user: &UserId, session: &SessionId) {
        let mut t = self.lock();
        let lease = t.leases.entry(keys::session_pk(user, session)).or_default();
        lease.turn = None;
        lease.until_ms = None;
    }

    /// The session is being deleted (`status = DELETING`).
    pub fn mark_deleting(&self, user: &UserId, session: &SessionId) {
        self.lock().leases.entry(keys::session_pk(user, session)).or_default().deleting = true;
    }

    /// Every stored batch of the session, in key order (tests' view).
    pub fn stored(&self, user: &UserId, session: &SessionId) -> Vec<FrameBatch> {
        let t = self.lock();
        t.frames.get(&keys::session_pk(user, session)).map(|p| p.values().cloned().collect()).unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        // A test that panicked while holding the lock has already failed.
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The partition's items with `lo <= sk <= hi`, ascending (a `BETWEEN`
    /// query), not yet decoded (see [`checked`]).
    fn range(&self, pk: &str, lo: &str, hi: &str) -> Result<Vec<FrameBatch>, StoreError> {
        if lo > hi {
            return Err(StoreError::Backend("ValidationException: invalid KeyConditionExpression".into()));
        }
        let t = self.lock();
        let Some(partition) = t.frames.get(pk) else { return Ok(Vec::new()) };
        Ok(partition.range(lo.to_string()..=hi.to_string()).map(|(_, b)| b.clone()).collect())
    }
}

/// What the DynamoDB reader refuses to decode (an empty batch), refused here
/// too, and only when a read reaches it, as there.
fn checked(batch: FrameBatch) -> Result<FrameBatch, StoreError> {
    if batch.frames.is_empty() {
        return Err(StoreError::Corrupt("frame batch: empty".into()));
    }
    Ok(batch)
}

#[async_trait::async_trait]
impl FrameLog for MemoryFrameLog {
    async fn append(&self, user: &UserId, session: &SessionId, batch: &FrameBatch) -> Result<(), StoreError> {
        let sk = keys::frames_sk(&batch.turn_id, batch.first_id());
        self.lock().frames.entry(keys::session_pk(user, session)).or_default().insert(sk, batch.clone());
        Ok(())
    }

    async fn latest(&self, user: &UserId, session: &SessionId, after: u64) -> Result<Option<LatestTurn>, StoreError> {
        let items = self.range(&keys::session_pk(user, session), FRAMES_PREFIX, FRAMES_END)?;
        let mut newest_first = items.into_iter().rev().map(checked);
        let Some(last) = newest_first.next().transpose()? else { return Ok(None) };
        let mut latest = LatestTurn {
            turn_id: last.turn_id.clone(),
            batches: Vec::new(),
            last_written_at: last.written_at,
            done: last.ends_turn(),
        };
        // The same walk as DynamoDB's: back from the last batch to the one
        // holding `after + 1`, or to the start of the turn.
        for batch in std::iter::once(Ok(last)).chain(newest_first) {
            let batch = batch?;
            if batch.turn_id != latest.turn_id {
                break;
            }
            let reaches = batch.first_id().saturating_sub(1) <= after;
            latest.batches.push(batch);
            if reaches {
                break;
            }
        }
        latest.batches.reverse();
        Ok(Some(latest))
    }

    async fn batches_from(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: &TurnId,
        from: u64,
    ) -> Result<Vec<FrameBatch>, StoreError> {
        let (lo, hi) = (keys::frames_sk(turn, from), keys::frames_sk(turn, MAX_FRAME_ID));
        self.range(&keys::session_pk(user, session), &lo, &hi)?.into_iter().map(checked).collect()
    }

    async fn lease_holder(&self, user: &UserId, session: &SessionId) -> Result<Option<TurnId>, StoreError> {
        let t = self.lock();
        let Some(lease) = t.leases.get(&keys::session_pk(user, session)) else { return Ok(None) };
        let live = !lease.deleting && lease.until_ms.is_some_and(|until| until >= crate::now_ms());
        Ok(lease.turn.as_deref().filter(|_| live).and_then(|t| TurnId::parse(t).ok()))
    }
}
