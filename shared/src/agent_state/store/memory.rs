//! [`AgentStateStore`] in memory: the DynamoDB store's compare-and-set, its
//! refusal of sessions being deleted, and the settling of a summary's
//! pending deltas in the same step, without a table.

use super::{AgentStateStore, SaveError};
use crate::agent_state::AgentState;
use crate::ids::{SessionId, UserId};
use crate::store::gate::SessionGate;
use crate::store::StoreError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Key = (UserId, SessionId);

/// The part of each session's current summary that settling reads and
/// writes: its version and whether its deltas are pending. In the table it is
/// the summary item itself; in memory the agent-state twin and the summary
/// twin share this handle (see `MemorySummaryStore::new`).
#[derive(Clone, Default)]
pub struct SummaryMarks(Arc<Mutex<HashMap<Key, (u64, bool)>>>);

impl SummaryMarks {
    /// The current summary's version and pending mark, if there is a summary.
    pub fn get(&self, user: &UserId, session: &SessionId) -> Option<(u64, bool)> {
        self.0.lock().expect("marks lock").get(&(user.clone(), session.clone())).copied()
    }

    pub fn set(&self, user: &UserId, session: &SessionId, version: u64, pending: bool) {
        self.0.lock().expect("marks lock").insert((user.clone(), session.clone()), (version, pending));
    }

    /// Clears version `version`'s pending mark; `false` when it is not the
    /// current version or nothing is pending.
    pub fn settle(&self, user: &UserId, session: &SessionId, version: u64) -> bool {
        let mut marks = self.0.lock().expect("marks lock");
        match marks.get_mut(&(user.clone(), session.clone())) {
            Some((v, pending)) if *v == version && *pending => {
                *pending = false;
                true
            }
            _ => false,
        }
    }
}

#[derive(Clone)]
pub struct MemoryAgentStateStore {
    states: Arc<Mutex<HashMap<Key, (AgentState, u64)>>>,
    sessions: Arc<dyn SessionGate>,
    marks: SummaryMarks,
}

impl MemoryAgentStateStore {
    pub fn new(sessions: impl SessionGate + 'static) -> Self {
        Self { states: Arc::default(), sessions: Arc::new(sessions), marks: SummaryMarks::default() }
    }

    /// The summary marks this twin settles: hand them to the summary twin.
    pub fn summary_marks(&self) -> SummaryMarks {
        self.marks.clone()
    }

    fn version(&self, key: &Key) -> u64 {
        self.states.lock().expect("states lock").get(key).map_or(0, |(_, v)| *v)
    }

    /// The compare-and-set write, then the session check the DynamoDB store
    /// makes after writing (a session being deleted gets no state back).
    fn put(&self, user: &UserId, session: &SessionId, state: &AgentState, expected: u64) -> Result<u64, SaveError> {
        let key = (user.clone(), session.clone());
        let mut states = self.states.lock().expect("states lock");
        if states.get(&key).map_or(0, |(_, v)| *v) != expected {
            return Err(SaveError::Conflict);
        }
        if !self.sessions.alive(user, session) {
            states.remove(&key);
            return Err(SaveError::Store(StoreError::NotFound));
        }
        states.insert(key, (state.clone(), expected + 1));
        Ok(expected + 1)
    }
}

#[async_trait::async_trait]
impl AgentStateStore for MemoryAgentStateStore {
    async fn load(&self, user: &UserId, session: &SessionId) -> Result<Option<(AgentState, u64)>, StoreError> {
        Ok(self.states.lock().expect("states lock").get(&(user.clone(), session.clone())).cloned())
    }

    async fn save(
        &self,
        user: &UserId,
        session: &SessionId,
        state: &AgentState,
        expected_version: u64,
    ) -> Result<u64, SaveError> {
        self.put(user, session, state, expected_version)
    }

    async fn clear(&self, user: &UserId, session: &SessionId) -> Result<(), StoreError> {
        self.states.lock().expect("states lock").remove(&(user.clone(), session.clone()));
        Ok(())
    }

    async fn save_settling(
        &self,
        user: &UserId,
        session: &SessionId,
        state: &AgentState,
        expected_version: u64,
        summary_version: u64,
    ) -> Result<Option<u64>, SaveError> {
        // One transaction in the table: the settle's condition is read first
        // (a settled version writes nothing, whatever the state's version).
        let settleable = self.marks.get(user, session) == Some((summary_version, true));
        if !settleable {
            return Ok(None);
        }
        if self.version(&(user.clone(), session.clone())) != expected_version {
            return Err(SaveError::Conflict);
        }
        self.marks.settle(user, session, summary_version);
        self.put(user, session, state, expected_version).map(Some)
    }
}
