//! The session's persistence, as narrow traits by what the caller does:
//! [`Sessions`] (the sessions API and a turn's first write), [`SessionLog`]
//! (a turn's start, its tool rounds and its end; the run claims; message
//! reads), [`Leases`] (one writer per session), [`StopSignals`] (Stop, asked
//! and polled) and [`ToolOutputs`] (tool outputs too large for the log).
//! [`SessionStore`] is all of them, for the structs that carry one store.
//!
//! Two implementations with one contract ([`contract`], run against both):
//! DynamoDB ([`dynamo`], on the table handle [`crate::store::dynamo::DynamoStore`],
//! with the key scheme of [`crate::store`]) and an in-memory twin
//! ([`memory::MemoryStore`]) for unit tests.
//!
//! The rules every implementation keeps:
//! - one writer per session: a turn's writes need its lease (`LeaseLost`), and
//!   sequence numbers are gap-free, allocated from the session's `message_count`
//!   in the same write that stores the messages;
//! - a `stream_run_id` is claimed once per user (`DuplicateRun`), and a retry
//!   of our own write whose answer was lost succeeds;
//! - a delete wins over a running turn: once it began, the session is gone
//!   from reads and lists and every later write under it fails (`NotFound`).

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
pub mod dynamo;
pub mod memory;

pub use crate::store::dynamo::DynamoStore;
pub use memory::MemoryStore;

use crate::ids::{RunId, SessionId, TurnId, UserId};
use crate::message::{StoredMessage, Usage};
use crate::session::{ContextType, Scope, Session, SessionView, TurnRecord, TurnStatus};
use crate::store::StoreError;

/// Who claimed a `stream_run_id` for this user (any session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunClaim {
    pub session_id: SessionId,
    pub turn_id: TurnId,
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
    /// The turn's scope (`turn::start::scoped_view`: the request's wins over
    /// the stored one, a gap of the old flow); all three replace the stored
    /// ones, an absent `entity_id` or focus removing it.
    pub context_type: ContextType,
    pub entity_id: Option<String>,
    pub focus: Option<serde_json::Value>,
    /// Set on the session only if it has no title yet.
    pub title: Option<String>,
}

impl TurnStart {
    /// Whether the turn runs under a `stream_run_id` its client named: that
    /// run is claimed for the user and has a turn record, so that a retry
    /// finds the first request's turn. A turn whose client named none runs
    /// under its own id (`turn::start`), which no request can repeat: it
    /// writes neither, and starts and ends without a transaction
    /// (`dynamo::plain`).
    pub fn claims_run(&self) -> bool {
        self.turn.run_id.as_str() != self.turn.turn_id.as_str()
    }
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
    /// A scope the turn moved to (`context_shift`): the session stores it in
    /// the same write, replacing its `context_type`, `entity_id` and focus.
    pub scope: Option<Scope>,
}

/// A turn's bookkeeping on its session once its answer is stored: the
/// messages it adds to the count, its tokens, and the lease it gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookkeeping {
    pub turn_id: TurnId,
    pub usage: Usage,
    pub added: u64,
}

impl Bookkeeping {
    /// What the log shows a turn left undone: its closing message (the
    /// assistant message carrying the turn's usage, `turn::finish`) is the
    /// log's last. Whether its lease is still held is the store's to check.
    pub fn left_by(log: &[StoredMessage]) -> Option<Bookkeeping> {
        let last = log.iter().max_by_key(|m| m.seq)?;
        let usage = last.usage.filter(|_| last.role == crate::message::Role::Assistant)?;
        Some(Bookkeeping { turn_id: last.turn_id.clone(), usage, added: 1 })
    }
}

impl TurnEnd {
    /// See [`TurnStart::claims_run`].
    pub fn claims_run(&self) -> bool {
        self.run_id.as_str() != self.turn_id.as_str()
    }
}

/// Where a page of messages starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessagesFrom {
    /// The newest messages (with seq below this one, when given).
    Before(Option<u64>),
    /// The oldest messages with seq above this one.
    After(u64),
}

/// One page of a user's sessions, and the cursor for the next one.
#[derive(Debug, Clone)]
pub struct SessionsPage {
    pub sessions: Vec<SessionView>,
    pub cursor: Option<String>,
}

/// How far a session delete got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteProgress {
    /// Everything is gone.
    Done { items_deleted: usize },
    /// The work budget ran out; the session is invisible and a retry resumes.
    Partial { items_deleted: usize },
}

/// Sessions as a whole: made (with a turn's lease), read, listed, renamed,
/// closed, deleted.
#[async_trait::async_trait]
pub trait Sessions: Send + Sync {
    /// Creates a new session already leased to `lease.turn_id`, claiming `run` for the user in the
    /// same transaction. `DuplicateRun` when another turn already claimed `run`; a retry of our
    /// own write (claim and session already ours) is Ok; a session id already taken is `Busy`.
    async fn create_session(
        &self,
        user: &UserId,
        view: &SessionView,
        lease: &Lease,
        run: &RunId,
    ) -> Result<Session, StoreError>;

    /// Creates a new session with its first turn started, in one
    /// transaction: the session (leased to `lease.turn_id`, counting the user
    /// message), the user's claim on the run id, the turn record and the user
    /// message. `DuplicateRun` when another turn already claimed the run id; a
    /// retry of our own write (claim and session already ours) is Ok.
    async fn open_session(
        &self,
        user: &UserId,
        view: &SessionView,
        lease: &Lease,
        start: &TurnStart,
    ) -> Result<(), StoreError>;

    /// The session as the client may see it: `None` when missing, another
    /// user's, or being deleted.
    async fn session(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError>;

    /// One page of the user's sessions, most recently active first. `cursor` is
    /// opaque to clients; a cursor of another user's is refused as `NotFound`.
    async fn list_sessions(
        &self,
        user: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<SessionsPage, StoreError>;

    /// Sets a title the user chose; it is never overwritten by a generated one.
    async fn rename_session(&self, user: &UserId, session: &SessionId, title: &str) -> Result<Session, StoreError>;

    /// Marks the session closed; later turns are refused with `session_closed`.
    async fn close_session(&self, user: &UserId, session: &SessionId) -> Result<Session, StoreError>;

    /// Deletes the session and everything under its key, at most `budget`
    /// batches of 25 this call (`None`: all). The session disappears from
    /// lists and reads at the first call, and every later write of a turn to
    /// it fails; a later call resumes, also when only the session item is
    /// already gone. `NotFound` only when nothing at all is under the key.
    async fn delete_session(
        &self,
        user: &UserId,
        session: &SessionId,
        budget: Option<usize>,
    ) -> Result<DeleteProgress, StoreError>;
}

/// A session's log: its turns (start, tool rounds, end), the user's run
/// claims, and its messages read back.
#[async_trait::async_trait]
pub trait SessionLog: Send + Sync {
    /// The claim on `run` for this user, if any (consistent read).
    async fn run_claim(&self, user: &UserId, run: &RunId) -> Result<Option<RunClaim>, StoreError>;

    async fn turn_by_run(
        &self,
        user: &UserId,
        session: &SessionId,
        run: &RunId,
    ) -> Result<Option<TurnRecord>, StoreError>;

    /// Atomically: the turn record (`DuplicateRun` if the run id exists in
    /// this session), the user's claim on the run id (`DuplicateRun` if
    /// another turn holds it, in any session), the user message, and the
    /// session's stats and scope. Requires the lease and the message count the
    /// user message's seq continues (else `LeaseLost`), and a session no delete
    /// has begun on (`NotFound`).
    async fn start_turn(&self, user: &UserId, session: &SessionId, start: &TurnStart) -> Result<(), StoreError>;

    /// Appends messages of a running turn (a tool round: the assistant's calls
    /// and their results), with the session's count (over DynamoDB as plain
    /// writes, messages first: `dynamo::plain`). Requires the lease
    /// (`LeaseLost`) and a session no delete has begun on (`NotFound`);
    /// refused, it leaves nothing.
    async fn append_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: &TurnId,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError>;

    /// Atomically: the turn's remaining messages, its record's final status, the
    /// session's stats, and the lease released. Requires the lease (`LeaseLost`)
    /// and a session no delete has begun on (`NotFound`).
    async fn finish_turn(&self, user: &UserId, session: &SessionId, end: &TurnEnd) -> Result<(), StoreError>;

    /// Stores what the turn's `done` promises: its messages, and what must be
    /// atomic with them (a claimed run's turn record, a scope it moved to).
    /// `Ok(Some(b))`: the session's bookkeeping — its count, tokens, the
    /// lease given back — is left for [`SessionLog::settle_turn`] after
    /// `done` (a later turn can do it: [`Leases::take_over_lease`]); `Ok(None)`:
    /// all of [`SessionLog::finish_turn`] is done. The default is the latter.
    async fn store_answer(
        &self,
        user: &UserId,
        session: &SessionId,
        end: &TurnEnd,
    ) -> Result<Option<Bookkeeping>, StoreError> {
        self.finish_turn(user, session, end).await.map(|()| None)
    }

    /// The bookkeeping [`SessionLog::store_answer`] left: applied once, by
    /// this or by the turn that took the lease over (then `Ok` too: a
    /// refused condition means it is done or the session is being deleted).
    async fn settle_turn(&self, user: &UserId, session: &SessionId, left: &Bookkeeping) -> Result<(), StoreError> {
        let _ = (user, session, left);
        Ok(())
    }

    /// The last `limit` messages, oldest first.
    async fn recent_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;

    /// Up to `limit` messages, in chronological order.
    async fn messages_page(
        &self,
        user: &UserId,
        session: &SessionId,
        from: MessagesFrom,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;
}

/// The turn lease: one writer per session.
#[async_trait::async_trait]
pub trait Leases: Send + Sync {
    /// Takes the lease on an existing session and returns it as it now is.
    /// `NotFound`, `Busy` or `Closed` when it cannot. A lease this turn
    /// already holds is taken again (a retried write whose answer was lost).
    async fn acquire_lease(&self, user: &UserId, session: &SessionId, lease: &Lease) -> Result<Session, StoreError>;

    /// Extends our lease; `LeaseLost` if it is no longer ours or the session
    /// is being deleted.
    async fn renew_lease(&self, user: &UserId, session: &SessionId, lease: &Lease) -> Result<(), StoreError>;

    /// Gives the lease back without writing anything else (for turns that end
    /// before their first write). A lease that is no longer ours is left alone.
    async fn release_lease(&self, user: &UserId, session: &SessionId, turn: &TurnId) -> Result<(), StoreError>;

    /// Takes the lease over from the turn `ended` names, whose answer is
    /// stored (its closing message is the log's last) but whose bookkeeping
    /// ([`SessionLog::settle_turn`]) has not landed: applies that
    /// bookkeeping and grants `lease` in one conditional write. `Busy` when
    /// that turn no longer holds the lease. The default (a store whose
    /// turn ends are atomic never leaves one): `Busy`.
    async fn take_over_lease(
        &self,
        user: &UserId,
        session: &SessionId,
        lease: &Lease,
        ended: &Bookkeeping,
    ) -> Result<Session, StoreError> {
        let _ = (user, session, lease, ended);
        Err(StoreError::Busy)
    }
}

/// Stop: asked by the client, polled by the running turn.
#[async_trait::async_trait]
pub trait StopSignals: Send + Sync {
    /// Asks the running turn to stop: the turn whose lease is live, and only if
    /// it is the one `run` names when given. `Ok(None)`: no such running turn.
    async fn request_stop(
        &self,
        user: &UserId,
        session: &SessionId,
        run: Option<&RunId>,
    ) -> Result<Option<TurnId>, StoreError>;

    /// Whether `turn` was asked to stop (one small consistent read). The ask
    /// ends with the turn (its `finish_turn`).
    async fn stop_requested(&self, user: &UserId, session: &SessionId, turn: &TurnId) -> Result<bool, StoreError>;
}

/// Tool outputs too large for the log, kept whole beside it.
#[async_trait::async_trait]
pub trait ToolOutputs: Send + Sync {
    /// Stores a tool's whole output apart from the log (under the session's
    /// key, so deleting the session removes it); a later output under the same
    /// call id replaces it. `NotFound`, with nothing left behind, when the
    /// session is gone or being deleted.
    async fn put_tool_output(
        &self,
        user: &UserId,
        session: &SessionId,
        call_id: &str,
        content: &str,
    ) -> Result<(), StoreError>;

    /// A tool output stored apart, whole.
    async fn tool_output(
        &self,
        user: &UserId,
        session: &SessionId,
        call_id: &str,
    ) -> Result<Option<String>, StoreError>;
}

/// Every session store at once, for the structs that carry one store for
/// several callers (a function's dependencies); a function takes the narrow
/// trait it uses.
pub trait SessionStore: Sessions + SessionLog + Leases + StopSignals + ToolOutputs {}

impl<T: Sessions + SessionLog + Leases + StopSignals + ToolOutputs> SessionStore for T {}
