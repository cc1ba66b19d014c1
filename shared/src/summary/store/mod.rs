//! Rolling summaries: the [`SummaryStore`] trait, [`DynamoSummaryStore`] and
//! the in-memory [`MemorySummaryStore`], which pass one contract suite
//! (`contract`, under the `testkit` feature). In DynamoDB: the current one under `sk=SUMMARY`, and
//! every committed version under `SUMMARY#<version, 10 digits>` for audit
//! (AGENTIC_CHAT_V2_SPEC open question 1).
//!
//! Contract: [`SummaryStore::commit`] is a compare-and-set on the version.
//! Version `n` commits only if the current summary is version `n - 1` (or
//! absent, for 1), and only while the session exists and is not being
//! deleted; otherwise nothing is written. So a newer summary is never
//! overwritten, two concurrent runs for one session commit at most once, and
//! a summary never resurrects a deleted session's partition. Messages are
//! never touched: the summary only moves the watermark the context builder
//! reads from, so a failed or lost summary loses no history.
//!
//! A version's agent-state deltas are committed with it and, when they are
//! still to be applied, marked pending on the current item (the
//! `deltas_pending` attribute). They are applied and the mark cleared in one
//! transaction ([`crate::agent_state::store::AgentStateStore::save_settling`]),
//! so they apply exactly once even if the summarizer dies between the commit
//! and the apply; [`SummaryStore::settle`] clears the mark of deltas that
//! cannot apply. A version never replaces one whose deltas are still pending.
//!
//! Rejected answers are counted per *backlog* (the messages after the
//! current watermark, up to the last one read) in one small item,
//! `sk = SUMMARY~REJECTED` ([`SummaryStore::record_rejection`]): a run that
//! finds `SUMMARY_MAX_ATTEMPTS` rejections for the backlog it would send asks
//! the model nothing, whichever delivery of whichever event it serves, so a
//! model that cannot write the shape costs a bounded number of calls per
//! backlog; new messages make a new backlog. Written with an update (an
//! atomic count) and then checked against the session as the agent state is
//! (`attr::session_alive`; removed again when a delete has begun).

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
mod dynamo;
mod memory;

pub(crate) use dynamo::from_item;
pub use dynamo::{DynamoSummaryStore, SUMMARY_REJECTED_SK};
pub use memory::MemorySummaryStore;

use crate::ids::{SessionId, UserId};
use crate::store::StoreError;
use serde::{Deserialize, Serialize};

/// One summary version, as stored (the `data` attribute holds it as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// 1 for the first summary of a session, then +1 per commit.
    pub version: u64,
    pub text: String,
    /// The last message seq this summary covers: the builder sends only later ones.
    pub through_seq: u64,
    /// The session's last message seq when this summary was made; an event at
    /// or below it has nothing new (redelivery is a no-op).
    pub source_last_seq: u64,
    /// The model that wrote it.
    pub model: String,
    pub created_at: i64,
    /// As the summarizer model returned them (validated), for audit.
    #[serde(default)]
    pub kept_message_ids: Vec<String>,
    #[serde(default)]
    pub dropped_message_ids: Vec<String>,
    /// Proposed agent-state deltas, validated and recorded with the version
    /// that proposed them (see `crate::summary` for how they are applied).
    #[serde(default)]
    pub agent_state_item_updates: Vec<serde_json::Value>,
    #[serde(default)]
    pub agent_state_updates: serde_json::Value,
    /// Whether the deltas still have to be applied (see the module doc). Kept
    /// in the item's `deltas_pending` attribute, which conditions test, so
    /// not in `data`; audit copies never have it.
    #[serde(skip)]
    pub deltas_pending: bool,
}

/// What a summarizer run would summarize: the messages after `after_seq`
/// (the current summary's watermark) through `last_seq`. The same backlog is
/// the same input, so the model's answer to it is the same kind of answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    pub after_seq: u64,
    pub last_seq: u64,
}

impl Backlog {
    fn key(&self) -> String {
        format!("{}..{}", self.after_seq, self.last_seq)
    }
}

/// The rejected answers recorded for a session: for which backlog, how
/// many, and the last reason (given to the model on the next try).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejections {
    pub backlog: Backlog,
    pub attempts: u32,
    pub reason: String,
}

/// How a compare-and-set commit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    Committed,
    /// Another run committed this version (or a later one) first; nothing written.
    Superseded,
}

#[async_trait::async_trait]
pub trait SummaryStore: Send + Sync {
    /// The current summary (consistent read).
    async fn current(&self, user: &UserId, session: &SessionId) -> Result<Option<SessionSummary>, StoreError>;

    /// Commits `summary` as the current one if the current one is
    /// `summary.version - 1`; also records it as an audit version.
    /// `NotFound` if the session is gone or being deleted.
    async fn commit(
        &self,
        user: &UserId,
        session: &SessionId,
        summary: &SessionSummary,
    ) -> Result<CommitOutcome, StoreError>;

    /// Every committed version, oldest first.
    async fn versions(&self, user: &UserId, session: &SessionId) -> Result<Vec<SessionSummary>, StoreError>;

    /// Clears the pending mark of version `version`'s deltas without applying
    /// them (they cannot apply). `false` if they were not pending: settled
    /// already, or `version` is not the current one.
    async fn settle(&self, user: &UserId, session: &SessionId, version: u64) -> Result<bool, StoreError>;

    /// A session of `user` with a live turn lease (a chat turn running
    /// now): `session` itself (consistent read), and with `all_sessions` also
    /// the user's most recently active sessions (the sessions index; a turn
    /// moves its session to the front when it starts). `None`: no turn runs.
    async fn running_turn(
        &self,
        user: &UserId,
        session: &SessionId,
        all_sessions: bool,
    ) -> Result<Option<SessionId>, StoreError>;

    /// The rejected answers recorded for the session (consistent read).
    async fn rejections(&self, user: &UserId, session: &SessionId) -> Result<Option<Rejections>, StoreError>;

    /// Counts one more rejected answer for `backlog` (from 1 again when the
    /// recorded ones were for another backlog) and returns the count.
    /// `NotFound` if the session is gone or being deleted.
    async fn record_rejection(
        &self,
        user: &UserId,
        session: &SessionId,
        backlog: Backlog,
        reason: &str,
    ) -> Result<u32, StoreError>;
}
