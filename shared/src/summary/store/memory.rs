//! [`SummaryStore`] in memory: the DynamoDB store's compare-and-set commit,
//! audit versions, pending deltas (shared with the agent-state twin through
//! [`SummaryMarks`]) and rejection counts, without a table.

use super::{Backlog, CommitOutcome, Rejections, SessionSummary, SummaryStore};
use crate::agent_state::store::SummaryMarks;
use crate::ids::{SessionId, UserId};
use crate::store::gate::SessionGate;
use crate::store::StoreError;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

type Key = (UserId, SessionId);

#[derive(Default)]
struct Summaries {
    current: HashMap<Key, SessionSummary>,
    versions: HashMap<Key, BTreeMap<u64, SessionSummary>>,
    rejections: HashMap<Key, Rejections>,
    /// Sessions with a live turn lease, most recent last (`running_turn`).
    running: Vec<Key>,
}

#[derive(Clone)]
pub struct MemorySummaryStore {
    inner: Arc<Mutex<Summaries>>,
    sessions: Arc<dyn SessionGate>,
    marks: SummaryMarks,
}

impl MemorySummaryStore {
    /// `marks`: the agent-state twin's (`MemoryAgentStateStore::summary_marks`),
    /// so settling there clears the pending mark here, as one item does in the table.
    pub fn new(sessions: impl SessionGate + 'static, marks: SummaryMarks) -> Self {
        Self { inner: Arc::default(), sessions: Arc::new(sessions), marks }
    }

    /// Says whether a turn of `session` holds a live lease now (what the
    /// session item's `lease_until` says in the table).
    pub fn set_turn_running(&self, user: &UserId, session: &SessionId, running: bool) {
        let key = (user.clone(), session.clone());
        let mut inner = self.inner.lock().expect("summaries lock");
        inner.running.retain(|k| k != &key);
        if running {
            inner.running.push(key);
        }
    }
}

#[async_trait::async_trait]
impl SummaryStore for MemorySummaryStore {
    async fn current(&self, user: &UserId, session: &SessionId) -> Result<Option<SessionSummary>, StoreError> {
        let key = (user.clone(), session.clone());
        let current = self.inner.lock().expect("summaries lock").current.get(&key).cloned();
        Ok(current.map(|mut s| {
            s.deltas_pending = self.marks.get(user, session).is_some_and(|(_, pending)| pending);
            s
        }))
    }

    async fn commit(
        &self,
        user: &UserId,
        session: &SessionId,
        summary: &SessionSummary,
    ) -> Result<CommitOutcome, StoreError> {
        if !self.sessions.alive(user, session) {
            return Err(StoreError::NotFound);
        }
        let key = (user.clone(), session.clone());
        let mut inner = self.inner.lock().expect("summaries lock");
        let current = inner.current.get(&key).map(|s| s.version);
        let pending = self.marks.get(user, session).is_some_and(|(_, p)| p);
        let follows = match current {
            None => summary.version <= 1,
            Some(v) => summary.version > 1 && v == summary.version - 1 && !pending,
        };
        let audited = inner.versions.get(&key).is_some_and(|v| v.contains_key(&summary.version));
        if !follows || audited {
            return Ok(CommitOutcome::Superseded);
        }
        let mut audit = summary.clone();
        audit.deltas_pending = false;
        inner.versions.entry(key.clone()).or_default().insert(summary.version, audit);
        inner.current.insert(key, summary.clone());
        self.marks.set(user, session, summary.version, summary.deltas_pending);
        Ok(CommitOutcome::Committed)
    }

    async fn versions(&self, user: &UserId, session: &SessionId) -> Result<Vec<SessionSummary>, StoreError> {
        let inner = self.inner.lock().expect("summaries lock");
        let versions = inner.versions.get(&(user.clone(), session.clone()));
        Ok(versions.map(|v| v.values().cloned().collect()).unwrap_or_default())
    }

    async fn settle(&self, user: &UserId, session: &SessionId, version: u64) -> Result<bool, StoreError> {
        Ok(self.marks.settle(user, session, version))
    }

    async fn running_turn(
        &self,
        user: &UserId,
        session: &SessionId,
        all_sessions: bool,
    ) -> Result<Option<SessionId>, StoreError> {
        let inner = self.inner.lock().expect("summaries lock");
        let own = (user.clone(), session.clone());
        if inner.running.contains(&own) {
            return Ok(Some(session.clone()));
        }
        if !all_sessions {
            return Ok(None);
        }
        Ok(inner.running.iter().rev().find(|(u, _)| u == user).map(|(_, s)| s.clone()))
    }

    async fn rejections(&self, user: &UserId, session: &SessionId) -> Result<Option<Rejections>, StoreError> {
        Ok(self.inner.lock().expect("summaries lock").rejections.get(&(user.clone(), session.clone())).cloned())
    }

    async fn record_rejection(
        &self,
        user: &UserId,
        session: &SessionId,
        backlog: Backlog,
        reason: &str,
    ) -> Result<u32, StoreError> {
        let key = (user.clone(), session.clone());
        let mut inner = self.inner.lock().expect("summaries lock");
        if !self.sessions.alive(user, session) {
            inner.rejections.remove(&key);
            return Err(StoreError::NotFound);
        }
        let before = inner.rejections.get(&key).filter(|r| r.backlog == backlog).map_or(0, |r| r.attempts);
        let reason = reason.chars().take(1000).collect();
        inner.rejections.insert(key, Rejections { backlog, attempts: before + 1, reason });
        Ok(before + 1)
    }
}
