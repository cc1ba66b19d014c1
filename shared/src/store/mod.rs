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
//! | message body chunk (a message whose JSON is over 300 000 bytes; ≤ 300 000 bytes each) | `U#<user>#S#<session>` | `BODY#<seq, 10 digits>#<message id>#<chunk, 4 digits>` | — |
//! | tool output chunk (≤ 300 000 bytes each) | `U#<user>#S#<session>` | `OUT#<base64url call id>#<chunk, 4 digits>` | — |
//! | turn record | `U#<user>#S#<session>` | `TURN#<stream_run_id>` | — |
//! | run claim: which session and turn used a `stream_run_id` (TTL `ttl`, 7 days) | `U#<user>#RUN#<stream_run_id>` | `RUN` | — |
//! | rolling summary (current) | `U#<user>#S#<session>` | `MSG~SUMMARY` | — |
//! | rolling summary version (audit) | `U#<user>#S#<session>` | `SUMMARY#<version, 10 digits>` | — |
//! | agent state (one versioned item) | `U#<user>#S#<session>` | `MSG~AGENT_STATE` | — |
//! | context-pack cache (prewarm; TTL `ttl`) | `U#<user>#CACHE` | `<scope>#<project or ->#<entity or ->#<entity kind or ->` | `CACHE#ACTIVE` / `<last_used_ms, 13 digits>#<user>#<sk>` (sparse: cache items only) |
//! | prewarm refresh checkpoint | `PREWARM#SWEEP` | `CHECKPOINT` | — |
//! | plan record: the `AgentPlan`, its status and each step's (one versioned item, see [`crate::plan::store`]) | `U#<user>#S#<session>` | `PLAN#<plan id, UUID v7>` | — |
//! | frame log batch: consecutive frames of a turn, as sent ([`crate::frames`]; TTL `ttl`, 1 day) | `U#<user>#S#<session>` | `FRAMES#<turn id, UUIDv7>#<first frame id, 10 digits>` | — |
//!
//! | access pattern | operation and key condition |
//! |---|---|
//! | a session by id | `GetItem pk, sk=SESSION` (consistent) |
//! | open a session with its first turn (leased) | `TransactWriteItems`: put session (must not exist; `message_count` 1) + put run claim (must not exist) + put turn record + put user message; a failed condition is read as for "create a session" |
//! | create a session (leased) and claim its first turn's run | `TransactWriteItems`: put session (must not exist) + put run claim (must not exist); on a failed condition one read of each tells our own lost-answer retry (success) from another turn's claim (`DuplicateRun`) |
//! | take the turn lease (and read the session) | `UpdateItem pk, sk=SESSION`, condition: exists, active, lease free, expired or already ours; `ReturnValues=ALL_NEW` |
//! | renew the lease | `UpdateItem sk=SESSION SET lease_until`, condition: ours, not deleting |
//! | last N messages, newest first | `Query pk=:pk AND sk BETWEEN "MSG#" AND "MSG$"`, `ScanIndexForward=false`, `Limit=N`; then, per chunked message only, `Query pk AND sk BETWEEN BODY#<seq>#<id>#0000 AND …#<n-1>` |
//! | a turn's read of its log: the current summary, the agent state and the last N messages | `Query pk=:pk AND sk BETWEEN "MSG#" AND "MSG~~"`, `ScanIndexForward=false`, `Limit=N+2` (the summary and the agent state sort right after the messages); chunked bodies as above |
//! | has this `stream_run_id` been seen in this session | `GetItem pk, sk=TURN#<run>` (consistent) |
//! | who used this `stream_run_id`, in any session of the user | `GetItem pk=U#<user>#RUN#<run>, sk=RUN` (consistent) |
//! | a user's sessions, most recently active first (one page) | `Query GSI1 gsi1pk=U#<user>#SESSIONS`, `ScanIndexForward=false`, `Limit`, `ExclusiveStartKey` from the cursor |
//! | a page of messages before / after a seq | `Query pk AND sk BETWEEN MSG#… AND MSG#<before-1>` descending / `MSG#<after+1> AND MSG$` ascending |
//! | stop the running turn | `UpdateItem sk=SESSION SET stop_turn = lease_turn`, condition: a live lease (and its turn, when a run id is named) |
//! | has my turn been stopped (polled by the turn, not per token) | `GetItem sk=SESSION`, projection `stop_turn, lease_turn` (consistent) |
//! | delete a session | `UpdateItem status=deleting REMOVE gsi1pk, gsi1sk` (gone from lists and reads at once; every later turn write fails), then consistent `Query pk` pages + `BatchWriteItem` deletes of 25, then the session item last; a retried DELETE resumes, also when the session item is already gone (`NotFound` only for an empty partition); the run claims of its turns stay until their TTL |
//! | start a turn | `TransactWriteItems`: put turn record (must not exist) + put run claim (must not exist, or be this turn's) + update session stats (we must hold the lease; not deleting) + put user message (must not exist) |
//! | a tool output too large for the log | `PutItem`s of its chunks, then `GetItem sk=SESSION` (alive? else the chunks are deleted again and the write fails); read back by `Query begins_with(sk, OUT#<call>#)` |
//! | store a tool round | the body chunks of large messages (`PutItem`s), then `TransactWriteItems`: put ≤ 9 messages + update session `message_count` (we must hold the lease; not deleting); a cancelled transaction deletes its chunks again |
//! | finish a turn | the body chunks of large messages, then `TransactWriteItems`: put assistant message(s) + update turn record + update session stats and release the lease (we must hold it; not deleting) |
//! | the current rolling summary | `GetItem pk, sk=MSG~SUMMARY` (consistent) |
//! | commit a summary (compare-and-set) | `TransactWriteItems`: put `MSG~SUMMARY` (condition `version = n-1 AND attribute_not_exists(deltas_pending)`, or not exists for 1; `deltas_pending = true` when its agent-state deltas are still to apply) + put `SUMMARY#<n, 10 digits>` (must not exist; audit copy) + condition check `SESSION` (exists, not deleting) |
//! | apply a summary's pending agent-state deltas | `TransactWriteItems`: put `MSG~AGENT_STATE` (compare-and-set as below) + update `MSG~SUMMARY` `REMOVE deltas_pending` (condition `version = n AND attribute_exists(deltas_pending)`); without the put when they cannot apply |
//! | a session's summary versions (audit) | `Query pk AND begins_with(sk, "SUMMARY#")` |
//! | the agent state and its version | `GetItem pk, sk=MSG~AGENT_STATE` (consistent) |
//! | save the agent state (compare-and-set) | `PutItem pk, sk=MSG~AGENT_STATE`, `version = n+1`, condition `version = n` (or not exists for 0); then `GetItem sk=SESSION` (alive? else deleted again, `NotFound`) |
//! | clear the agent state (session closed) | `DeleteItem pk, sk=MSG~AGENT_STATE` |
//! | a cached context pack and its project version | `GetItem pk=U#<user>#CACHE, sk=<scope key>` (see [`crate::context::cache`]) |
//! | store a context pack | `PutItem`, condition: missing or `version <= :built_from` |
//! | save a plan (compare-and-set) | `PutItem pk, sk=PLAN#<id>`, `version = n+1`, condition `version = n` (or not exists for 0); then `GetItem sk=SESSION` (alive? else deleted again, `NotFound`) |
//! | a plan by id | `GetItem pk, sk=PLAN#<id>` (consistent) |
//! | the session's plans, newest first (its current plan: `Limit=1`; approve, confirm, continue act on it only while open) | `Query pk AND begins_with(sk, "PLAN#")`, `ScanIndexForward=false`, `Limit`, consistent |
//! | create a plan, superseding the open ones (one current plan per session) | `TransactWriteItems`: put `PLAN#<new>` (must not exist) + put each open `PLAN#<old>` as `superseded` (condition `version = n`) + condition check `SESSION` (exists, not deleting); at most 8 replaced plans per transaction (DynamoDB Local's limit is 10 items), more are saved one by one first |
//! | store a frame log batch (the turn's background writer, one in flight) | `PutItem pk, sk=FRAMES#<turn>#<first>` (`data`: the frames' JSON, `written_at`, `ttl`) |
//! | the session's latest turn's frames after id N (resume) | `Query pk AND sk BETWEEN "FRAMES#" AND "FRAMES$"`, `ScanIndexForward=false`, `Limit=25`, consistent; read until the batch holding N+1 or an earlier turn (turn ids sort by start) — beside `GetItem sk=SESSION` (projection `lease_turn, lease_until, status`: the running turn) |
//! | a turn's batches from frame N (follow, retry) | `Query pk AND sk BETWEEN FRAMES#<turn>#<N> AND FRAMES#<turn>#9999999999`, consistent |
//! | caches used in the last N minutes, oldest first (scheduled refresh) | `Query GSI1 gsi1pk=CACHE#ACTIVE AND gsi1sk BETWEEN <checkpoint or now-N> AND <now>`, pages of `Limit` |
//!
//! Message sequence numbers are gap-free and allocated by the lease holder from
//! the session's `message_count`, so stats and messages always agree: they
//! change in the same transaction. A message body is stored as one JSON
//! attribute (`data`) next to the key attributes; a body too large for the
//! 400 KB item limit goes to chunk items instead (the message item then holds
//! `message_id` and `chunks: n`), written before the transaction that puts the
//! message. Chunks sort before `MSG#`, so message queries count messages.
//!
//! A delete wins over a running turn: once the session is marked `deleting`,
//! every write a turn, the summarizer or the agent state makes under the
//! partition fails. Writes inside a transaction check the session item there;
//! the others check it right after writing (body chunks by their message's
//! transaction, tool outputs and the agent state by one read) and remove what
//! they wrote when the delete began. The mark comes before the sweep, so
//! whatever such a check saw as alive, the sweep finds. (A writer that dies
//! between its write and its check can leave an item behind; a repeated
//! DELETE sweeps it.) The exception is the frame log: its batches are plain
//! puts, unchecked, so a batch a turn writes after the sweep (until the turn
//! stops at its next lease renewal) is left until its TTL (1 day).
//!
//! A `stream_run_id` is claimed once per user (`RUN` item, in the transaction
//! that creates the session or starts the turn), so a retried first turn
//! cannot create a second session; the claim expires after 7 days.
//!
//! The ontology (projects, entities, edges, document content, the document
//! tree) has its own partitions, `U#<user>#P#<project>`: see [`crate::entities::store`].

pub(crate) mod attr;
pub mod dynamo;
pub mod gate;
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
    /// This `stream_run_id` was already used by this user: in this session,
    /// or claimed by another turn in any session (see [`Store::run_claim`]).
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

/// A turn's read of its session's log (one request, [`Store::recent_log`]):
/// the newest messages and the items that sort right after them. A summary
/// or agent state that cannot be parsed is an `Err` of its own: the turn goes
/// on without it.
#[derive(Debug)]
pub struct RecentLog {
    /// Oldest first.
    pub messages: Vec<StoredMessage>,
    pub summary: Result<Option<crate::summary::store::SessionSummary>, StoreError>,
    /// The stored agent state and its version.
    pub agent_state: Result<Option<(crate::agent_state::AgentState, u64)>, StoreError>,
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
    pub scope: Option<crate::sse::Focus>,
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

#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// Creates a new session already leased to `lease.turn_id`, claiming `run` for the user in the
    /// same transaction. `DuplicateRun` when another turn already claimed `run`; a retry of our
    /// own write (claim and session already ours) is Ok.
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

    /// The claim on `run` for this user, if any (consistent read).
    async fn run_claim(&self, user: &UserId, run: &RunId) -> Result<Option<RunClaim>, StoreError>;

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

    /// The last `limit` messages, oldest first.
    async fn recent_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;

    /// The last `limit` messages with the session's current summary and
    /// agent state, in one request (they sort right after the messages).
    async fn recent_log(&self, user: &UserId, session: &SessionId, limit: usize) -> Result<RecentLog, StoreError>;

    async fn turn_by_run(
        &self,
        user: &UserId,
        session: &SessionId,
        run: &RunId,
    ) -> Result<Option<TurnRecord>, StoreError>;

    /// Atomically: the turn record (`DuplicateRun` if the run id exists in
    /// this session), the user's claim on the run id (`DuplicateRun` if
    /// another turn holds it, in any session), the user message, and the
    /// session's stats and scope. Requires the lease and a session no delete
    /// has begun on (`NotFound`).
    async fn start_turn(&self, user: &UserId, session: &SessionId, start: &TurnStart) -> Result<(), StoreError>;

    /// Appends messages of a running turn (a tool round: the assistant's calls
    /// and their results), with the session's count, in transactions of at most
    /// 9 messages. Requires the lease (`LeaseLost`) and a session no delete has
    /// begun on (`NotFound`).
    async fn append_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: &TurnId,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError>;

    /// Stores a tool's whole output apart from the log (chunked under the
    /// session's key, so deleting the session removes it). `NotFound`, with
    /// nothing left behind, when the session is gone or being deleted.
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

    /// Atomically: the turn's remaining messages, its record's final status, the
    /// session's stats, and the lease released. Requires the lease (`LeaseLost`)
    /// and a session no delete has begun on (`NotFound`).
    async fn finish_turn(&self, user: &UserId, session: &SessionId, end: &TurnEnd) -> Result<(), StoreError>;

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

    /// Up to `limit` messages, in chronological order.
    async fn messages_page(
        &self,
        user: &UserId,
        session: &SessionId,
        from: MessagesFrom,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError>;

    /// Sets a title the user chose; it is never overwritten by a generated one.
    async fn rename_session(&self, user: &UserId, session: &SessionId, title: &str) -> Result<Session, StoreError>;

    /// Marks the session closed; later turns are refused with `session_closed`.
    async fn close_session(&self, user: &UserId, session: &SessionId) -> Result<Session, StoreError>;

    /// Asks the running turn to stop: the turn whose lease is live, and only if
    /// it is the one `run` names when given. `Ok(None)`: no such running turn.
    async fn request_stop(
        &self,
        user: &UserId,
        session: &SessionId,
        run: Option<&RunId>,
    ) -> Result<Option<TurnId>, StoreError>;

    /// Whether `turn` was asked to stop (one small consistent read).
    async fn stop_requested(&self, user: &UserId, session: &SessionId, turn: &TurnId) -> Result<bool, StoreError>;

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
