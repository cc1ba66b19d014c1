//! Persistence: the [`Store`] trait the turn is written against, and the one
//! DynamoDB key scheme ([`dynamo`] implements it).
//!
//! # Key scheme (one table, `TABLE_NAME`)
//!
//! Every key starts with the owner's user id, so a request can only ever
//! address its own user's items: another user's session id is not "forbidden",
//! it is simply not there.
//!
//! | item | `pk` | `sk` | GSI1 `gsi1pk` / `gsi1sk` |
//! |---|---|---|---|
//! | session | `U#<user>#S#<session>` | `SESSION` | `U#<user>#SESSIONS` / `<last_activity_ms, 13 digits>#<session>` |
//! | message | `U#<user>#S#<session>` | `MSG#<seq, 10 digits>` | — |
//! | turn record | `U#<user>#S#<session>` | `TURN#<stream_run_id>` | — |
//!
//! | access pattern | operation and key condition |
//! |---|---|
//! | a session by id | `GetItem pk, sk=SESSION` (consistent) |
//! | take the turn lease (and read the session) | `UpdateItem pk, sk=SESSION`, condition: exists, active, lease free or expired; `ReturnValues=ALL_NEW` |
//! | last N messages, newest first | `Query pk=:pk AND sk BETWEEN "MSG#" AND "MSG$"`, `ScanIndexForward=false`, `Limit=N` |
//! | has this `stream_run_id` been seen | `GetItem pk, sk=TURN#<run>` (consistent) |
//! | a user's sessions, most recently active first | `Query GSI1 gsi1pk=U#<user>#SESSIONS`, `ScanIndexForward=false` |
//! | start a turn | `TransactWriteItems`: put turn record (must not exist) + put user message (must not exist) + update session stats (we must hold the lease) |
//! | finish a turn | `TransactWriteItems`: put assistant message(s) + update turn record + update session stats and release the lease (we must hold it) |
//!
//! Message sequence numbers are gap-free and allocated by the lease holder from
//! the session's `message_count`, so stats and messages always agree: they
//! change in the same transaction. Message bodies are stored as one JSON
//! attribute (`data`) next to the key attributes; a message is one item.
//!
//! The ontology (projects, entities, edges, document content, the document
//! tree) has its own partitions, `U#<user>#P#<project>`: see [`entities`].

pub mod dynamo;
pub mod entities;
pub mod keys;

use crate::ids::{RunId, SessionId, TurnId, UserId};
use crate::message::{StoredMessage, Usage};
use crate::session::{ContextType, Session, SessionView, TurnRecord, TurnStatus};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    /// Another turn holds the session's lease.
    #[error("the session is busy with another turn")]
    Busy,
    #[error("the session is closed")]
    Closed,
    /// This `stream_run_id` was already used in this session.
    #[error("this stream_run_id was already used")]
    DuplicateRun,
    /// Our lease expired and someone else took the session; nothing was written.
    #[error("the session lease was lost")]
    LeaseLost,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Backend(String),
}

impl StoreError {
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::NotFound => "session_not_found",
            StoreError::Busy => "session_busy",
            StoreError::Closed => "session_closed",
            StoreError::DuplicateRun => "duplicate_run",
            StoreError::LeaseLost => "session_lease_lost",
            StoreError::Corrupt(_) => "store_corrupt",
            StoreError::Backend(_) => "store_unavailable",
        }
    }
}

/// The lease a turn takes on its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub turn_id: TurnId,
    pub until_ms: i64,
}

/// What a turn changes on the session when its user message lands.
#[derive(Debug, Clone)]
pub struct TurnStart {
    pub turn: TurnRecord,
    pub user_message: StoredMessage,
    /// The request's scope wins over the stored one (a gap of the old flow).
    pub context_type: ContextType,
    pub entity_id: Option<String>,
    pub focus: Option<serde_json::Value>,
    /// Set on the session only if it has no title yet.
    pub title: Option<String>,
}

/// What a turn writes when it ends.
#[derive(Debug, Clone)]
pub struct TurnEnd {
    pub turn_id: TurnId,
    pub run_id: RunId,
    pub status: TurnStatus,
    /// Assistant (and later tool) messages, in order, seqs continuing the log.
    pub messages: Vec<StoredMessage>,
    pub usage: Usage,
}

#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// Creates a new session already leased to `lease.turn_id`.
    async fn create_session(&self, user: &UserId, view: &SessionView, lease: &Lease) -> Result<Session, StoreError>;

    /// Takes the lease on an existing session and returns it as it now is.
    /// `NotFound`, `Busy` or `Closed` when it cannot.
    async fn acquire_lease(&self, user: &UserId, session: &SessionId, lease: &Lease) -> Result<Session, StoreError>;

    /// Extends our lease; `LeaseLost` if it is no longer ours.
    async fn renew_lease(&self, user: &UserId, session: &SessionId, lease: &Lease) -> Result<(), StoreError>;

    /// Gives the lease back without writing anything else (for turns that end
    /// before their first write). A lease that is no longer ours is left alone.
    async fn release_lease(&self, user: &UserId, session: &SessionId, turn: &TurnId) -> Result<(), StoreError>;

    /// The last `limit` messages, oldest first.
    async fn recent_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;

    async fn turn_by_run(
        &self,
        user: &UserId,
        session: &SessionId,
        run: &RunId,
    ) -> Result<Option<TurnRecord>, StoreError>;

    /// Atomically: the turn record (`DuplicateRun` if the run id exists), the
    /// user message, and the session's stats and scope. Requires the lease.
    async fn start_turn(&self, user: &UserId, session: &SessionId, start: &TurnStart) -> Result<(), StoreError>;

    /// Atomically: the turn's remaining messages, its record's final status, the
    /// session's stats, and the lease released. Requires the lease.
    async fn finish_turn(&self, user: &UserId, session: &SessionId, end: &TurnEnd) -> Result<(), StoreError>;
}
