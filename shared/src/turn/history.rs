//! What a turn reads of its session before the model call: the last N
//! messages, the rolling summary and the agent state, in **one** request
//! (docs/performance.md: one DynamoDB round trip before the model call). The
//! three belong to three features (session, summary, agent state); only the
//! turn needs them together, so the combined read is the turn's: a
//! [`TurnHistory`], over DynamoDB on the table handle (one `Query`: the
//! summary and the agent state sort right after the messages, see
//! [`crate::store::keys::LOG_END`]) and in memory ([`MemoryHistory`]).
//! With the summarizer on, the read is bounded by what the context builder
//! can send ([`TurnHistory::recent_log_bounded`]): a second request follows
//! only when the newest page does not reach down to the summary.

use crate::agent_state::AgentState;
use crate::ids::{SessionId, UserId};
use crate::message::StoredMessage;
use crate::session::store::{MemoryStore, SessionLog};
use crate::store::attr::{get_n, get_s, Item};
use crate::store::dynamo::DynamoStore;
use crate::store::keys::{self, AGENT_STATE_SK, MSG_PREFIX, SUMMARY_SK};
use crate::store::StoreError;
use crate::summary::store::SessionSummary;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A turn's read of its session's log: the newest messages and the items that
/// sort right after them. A summary or agent state that cannot be parsed is an
/// `Err` of its own: the turn goes on without it.
#[derive(Debug)]
pub struct RecentLog {
    /// Oldest first.
    pub messages: Vec<StoredMessage>,
    pub summary: Result<Option<SessionSummary>, StoreError>,
    /// The stored agent state and its version.
    pub agent_state: Result<Option<(AgentState, u64)>, StoreError>,
}

#[async_trait::async_trait]
pub trait TurnHistory: Send + Sync {
    /// The last `limit` messages (oldest first) with the session's current
    /// summary and agent state, in one request.
    async fn recent_log(&self, user: &UserId, session: &SessionId, limit: usize) -> Result<RecentLog, StoreError>;

    /// The same, reading only as far back as the context builder can send:
    /// the newest `first` messages, then — in a second request, only when
    /// those do not reach down to the summary — the older ones the summary
    /// does not cover, up to `limit` in all. Messages the summary covers may
    /// be left unread (the builder never sends them). The default reads
    /// `limit` at once.
    async fn recent_log_bounded(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
        first: usize,
    ) -> Result<RecentLog, StoreError> {
        let _ = first;
        self.recent_log(user, session, limit).await
    }
}

#[async_trait::async_trait]
impl TurnHistory for DynamoStore {
    async fn recent_log(&self, user: &UserId, session: &SessionId, limit: usize) -> Result<RecentLog, StoreError> {
        self.recent_log_bounded(user, session, limit, limit).await
    }

    async fn recent_log_bounded(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
        first: usize,
    ) -> Result<RecentLog, StoreError> {
        let limit = limit.clamp(1, 1000);
        let first = first.clamp(1, limit);
        let range = (MSG_PREFIX.to_string(), keys::LOG_END.to_string());
        // The summary and the agent state come first, when they exist.
        let items = self.query_range(user, session, range, false, first + 2, "recent_log").await?;
        let mut log = RecentLog { messages: Vec::new(), summary: Ok(None), agent_state: Ok(None) };
        let mut messages = Vec::new();
        for item in &items {
            match get_s(item, "sk") {
                Some(SUMMARY_SK) => log.summary = crate::summary::store::from_item(item).map(Some),
                Some(AGENT_STATE_SK) => log.agent_state = crate::agent_state::store::from_item(item).map(Some),
                // Read (and billed) anyway: kept, up to the limit.
                _ if messages.len() < limit => messages.push(item.clone()),
                _ => {}
            }
        }
        let full = items.len() == first + 2;
        if let Some(older) = uncovered_below(&messages, &log, full, limit) {
            let left = limit - messages.len();
            messages.extend(self.query_range(user, session, older, false, left, "recent_log_older").await?);
        }
        log.messages = futures::future::try_join_all(messages.iter().map(|i| self.message_from_item(i))).await?;
        log.messages.reverse();
        Ok(log)
    }
}

/// The range of older messages still to read after a `full` first page
/// (newest first): those between the summary's last and the page's oldest;
/// `None` when the page was not full, holds the limit or reaches the summary.
fn uncovered_below(page: &[Item], log: &RecentLog, full: bool, limit: usize) -> Option<(String, String)> {
    if !full || page.len() >= limit {
        return None;
    }
    let oldest = page.last().and_then(|i| get_n(i, "seq")).filter(|s| *s > 1)? as u64;
    let covered = match &log.summary {
        Ok(Some(s)) => s.through_seq,
        _ => 0,
    };
    (oldest > covered + 1).then(|| (keys::message_sk(covered + 1), keys::message_sk(oldest - 1)))
}

/// The in-memory twin: the messages of a [`MemoryStore`], and the summary and
/// agent state a test sets.
pub struct MemoryHistory {
    pub log: Arc<MemoryStore>,
    tails: Mutex<HashMap<(UserId, SessionId), Tail>>,
}

#[derive(Default, Clone)]
struct Tail {
    summary: Option<SessionSummary>,
    agent_state: Option<(AgentState, u64)>,
}

impl MemoryHistory {
    pub fn new(log: Arc<MemoryStore>) -> Self {
        MemoryHistory { log, tails: Mutex::default() }
    }

    pub fn set_summary(&self, user: &UserId, session: &SessionId, summary: SessionSummary) {
        self.tail(user, session, |t| t.summary = Some(summary));
    }

    pub fn set_agent_state(&self, user: &UserId, session: &SessionId, state: AgentState, version: u64) {
        self.tail(user, session, |t| t.agent_state = Some((state, version)));
    }

    fn tail(&self, user: &UserId, session: &SessionId, change: impl FnOnce(&mut Tail)) {
        let mut tails = self.tails.lock().unwrap_or_else(|p| p.into_inner());
        change(tails.entry((user.clone(), session.clone())).or_default());
    }
}

#[async_trait::async_trait]
impl TurnHistory for MemoryHistory {
    async fn recent_log(&self, user: &UserId, session: &SessionId, limit: usize) -> Result<RecentLog, StoreError> {
        let messages = self.log.recent_messages(user, session, limit).await?;
        let tails = self.tails.lock().unwrap_or_else(|p| p.into_inner());
        let tail = tails.get(&(user.clone(), session.clone())).cloned().unwrap_or_default();
        Ok(RecentLog { messages, summary: Ok(tail.summary), agent_state: Ok(tail.agent_state) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TurnId;
    use crate::message::Role;
    use crate::session::store::{Lease, Sessions, TurnStart};
    use crate::session::{ContextType, SessionView, TurnRecord, TurnStatus};

    /// A session whose first turn stored `n` user messages' worth of log.
    async fn session_with(store: &MemoryStore, user: &UserId, n: u64) -> SessionId {
        let view = SessionView::new(ContextType::Global, None, None);
        let turn = TurnId::new();
        let lease = Lease { turn_id: turn.clone(), until_ms: crate::now_ms() + 60_000 };
        let run = crate::ids::RunId::parse(turn.as_str()).unwrap();
        let first = StoredMessage::new(view.id.clone(), 1, turn.clone(), Role::User, Some("m1".into()));
        let record = TurnRecord {
            turn_id: turn.clone(),
            run_id: run,
            status: TurnStatus::Running,
            user_message_seq: 1,
            assistant_message_seq: None,
            started_at: 0,
            ended_at: None,
        };
        let start = TurnStart {
            turn: record,
            user_message: first,
            context_type: ContextType::Global,
            entity_id: None,
            focus: None,
            title: None,
        };
        store.open_session(user, &view, &lease, &start).await.unwrap();
        let rest: Vec<_> = (2..=n)
            .map(|s| StoredMessage::new(view.id.clone(), s, turn.clone(), Role::Assistant, Some(format!("m{s}"))))
            .collect();
        store.append_messages(user, &view.id, &turn, &rest).await.unwrap();
        view.id
    }

    #[tokio::test]
    async fn the_memory_log_read_is_the_newest_messages_with_what_a_test_set() {
        let (store, user) = (Arc::new(MemoryStore::new()), UserId::parse("u-history").unwrap());
        let sid = session_with(&store, &user, 5).await;
        let history = MemoryHistory::new(store);
        let log = history.recent_log(&user, &sid, 3).await.unwrap();
        let seqs: Vec<u64> = log.messages.iter().map(|m| m.seq).collect();
        assert_eq!(seqs, [3, 4, 5]);
        assert!(matches!(log.summary, Ok(None)) && matches!(log.agent_state, Ok(None)));

        history.set_agent_state(&user, &sid, AgentState::new(sid.to_string()), 4);
        let log = history.recent_log(&user, &sid, 10).await.unwrap();
        assert_eq!(log.messages.len(), 5);
        assert_eq!(log.agent_state.unwrap().map(|(_, v)| v), Some(4));
    }
}
