//! Persistence shared by every feature: the table handle and its helpers
//! ([`dynamo`]), the one DynamoDB key scheme (documented here, spelled in
//! [`keys`]), the attribute helpers and [`StoreError`]. It knows no feature:
//! each feature owns its store traits and implements them on the table
//! ([`crate::session::store`], [`crate::frames`], …).
//!
//! # Key scheme (one table, `TABLE_NAME`)
//!
//! Every key starts with the owner's user id, so a request can only ever
//! address its own user's items: another user's session id is not "forbidden",
//! it is simply not there.
//!
//! | item | `pk` | `sk` | GSI1 `gsi1pk` / `gsi1sk` (GSI2 `gsi2pk` / `gsi2sk`: sessions, keys only) |
//! |---|---|---|---|
//! | session | `U#<user>#S#<session>` | `SESSION` | GSI2: `U#<user>#SESSIONS` / `<last_activity_ms, 13 digits>#<session>` (moved when a turn takes the lease) |
//! | message | `U#<user>#S#<session>` | `MSG#<seq, 10 digits>` | — |
//! | message body chunk (a message whose JSON is over 300 000 bytes; ≤ 300 000 bytes each) | `U#<user>#S#<session>` | `BODY#<seq, 10 digits>#<message id>#<chunk, 4 digits>` | — |
//! | tool output chunk (≤ 300 000 bytes each) | `U#<user>#S#<session>` | `OUT#<base64url call id>#<chunk, 4 digits>` | — |
//! | turn record (a turn whose client named a `stream_run_id`) | `U#<user>#S#<session>` | `TURN#<stream_run_id>` | — |
//! | run claim: which session and turn used a `stream_run_id` (TTL `ttl`, 7 days) | `U#<user>#RUN#<stream_run_id>` | `RUN` | — |
//! | rolling summary (current) | `U#<user>#S#<session>` | `MSG~SUMMARY` | — |
//! | rolling summary version (audit) | `U#<user>#S#<session>` | `SUMMARY#<version, 10 digits>` | — |
//! | agent state (one versioned item) | `U#<user>#S#<session>` | `MSG~AGENT_STATE` | — |
//! | context-pack cache (prewarm; TTL `ttl`) | `U#<user>#CACHE` | `<scope>#<project or ->#<entity or ->#<entity kind or ->` | `CACHE#ACTIVE` / `<last_used_ms, 13 digits>#<user>#<sk>` (sparse: cache items only) |
//! | prewarm refresh checkpoint | `PREWARM#SWEEP` | `CHECKPOINT` | — |
//! | plan record: the `AgentPlan`, its status and each step's (one versioned item, see [`crate::plan::store`]) | `U#<user>#S#<session>` | `PLAN#<plan id, UUID v7>` | — |
//! | frame log batch: consecutive frames of a turn, as sent ([`crate::frames`]; TTL `ttl`, 1 day) | `U#<user>#S#<session>` | `FRAMES#<turn id, UUIDv7>#<first frame id, 10 digits>` | — |
//! | budget: the UTC day's tokens and web calls, the running turns' slots, the turns started per clock minute ([`crate::budget`]) | `U#<user>#BUDGET` | `BUDGET` (`day`, `tokens`, `web`, string set `active` of `<expires_ms>\|<turn>`, `m<minutes since the epoch>`: that minute's turns) | — |
//! | budget (old layout, read by nothing, expires by TTL `ttl` within the hour) | `U#<user>#BUDGET` | `MIN#<minutes since the epoch>` | — |
//!
//! | access pattern | operation and key condition |
//! |---|---|
//! | a session by id | `GetItem pk, sk=SESSION` (consistent) |
//! | open a session with its first turn (leased) | `TransactWriteItems`: put session (must not exist; `message_count` 1) + put run claim (must not exist) + put turn record + put user message; a failed condition is read as for "create a session" |
//! | create a session (leased) and claim its first turn's run | `TransactWriteItems`: put session (must not exist) + put run claim (must not exist); on a failed condition one read of each tells our own lost-answer retry (success) from another turn's claim (`DuplicateRun`) |
//! | take the turn lease (and read the session; the session's last activity and `gsi2sk` move here, its one index write per turn) | `UpdateItem pk, sk=SESSION`, condition: exists, active, lease free, expired or already ours; `ReturnValues=ALL_NEW` |
//! | renew the lease | `UpdateItem sk=SESSION SET lease_until`, condition: ours, not deleting |
//! | last N messages, newest first | `Query pk=:pk AND sk BETWEEN "MSG#" AND "MSG$"`, `ScanIndexForward=false`, `Limit=N`; then, per chunked message only, `Query pk AND sk BETWEEN BODY#<seq>#<id>#0000 AND …#<n-1>` |
//! | a turn's read of its log: the current summary, the agent state and the last N messages | `Query pk=:pk AND sk BETWEEN "MSG#" AND "MSG~~"`, `ScanIndexForward=false`, `Limit=N+2` (the summary and the agent state sort right after the messages); chunked bodies as above |
//! | has this `stream_run_id` been seen in this session | `GetItem pk, sk=TURN#<run>` (consistent) |
//! | who used this `stream_run_id`, in any session of the user | `GetItem pk=U#<user>#RUN#<run>, sk=RUN` (consistent) |
//! | a user's sessions, most recently active first (one page) | `Query GSI2 gsi2pk=U#<user>#SESSIONS` (keys), `ScanIndexForward=false`, `Limit`, `ExclusiveStartKey` from the cursor; then `BatchGetItem` of those session items (consistent) |
//! | a page of messages before / after a seq | `Query pk AND sk BETWEEN MSG#… AND MSG#<before-1>` descending / `MSG#<after+1> AND MSG$` ascending |
//! | stop the running turn | `UpdateItem sk=SESSION SET stop_turn = lease_turn`, condition: a live lease (and its turn, when a run id is named) |
//! | has my turn been stopped (polled by the turn, not per token) | `GetItem sk=SESSION`, projection `stop_turn, lease_turn` (consistent) |
//! | delete a session | `UpdateItem status=deleting REMOVE gsi2pk, gsi2sk` (gone from lists and reads at once; every later turn write fails), then consistent `Query pk` pages + `BatchWriteItem` deletes of 25, then the session item last; a retried DELETE resumes, also when the session item is already gone (`NotFound` only for an empty partition); the run claims of its turns stay until their TTL |
//! | start a turn whose client named a `stream_run_id` | `TransactWriteItems`: put turn record (must not exist) + put run claim (must not exist, or be this turn's) + update session stats (we must hold the lease; `message_count` one below the message; not deleting) + put user message (must not exist); refused with the count behind a stored message before it (a plain write cut off), `UpdateItem` moves the count up and the transaction is tried once more |
//! | start a turn whose client named none (it runs under its own id: no claim, no record) | `PutItem` user message (must not exist; ours already: done), then `UpdateItem sk=SESSION` count, scope, title (we must hold the lease; `message_count <= seq`; not deleting); refused, the message is deleted again (`session::store::dynamo::plain`) |
//! | a tool output too large for the log | `PutItem`s of its chunks, then `GetItem sk=SESSION` (alive? else the chunks are deleted again and the write fails); read back by `Query begins_with(sk, OUT#<call>#)` |
//! | store a tool round | the body chunks of large messages (`PutItem`s), then `TransactWriteItems`: put ≤ 9 messages + update session `message_count` (we must hold the lease; not deleting); a cancelled transaction deletes its chunks again |
//! | finish a turn | the body chunks of large messages, then `TransactWriteItems`: put assistant message(s) + update turn record (a named `stream_run_id`'s only) + update session stats and release the lease (we must hold it; not deleting) |
//! | finish a turn under its own id with at most one message | `PutItem` the message (must not exist), then `UpdateItem sk=SESSION` stats + lease release (ours; not deleting); refused, the message is deleted again, unless the session shows this very write done |
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
//! | store a frame log batch (the turn's background writer, one in flight) | `PutItem pk, sk=FRAMES#<turn>#<first>` (`z`: the frames' JSON deflated, [`crate::frames::pack`]; older items hold it as `data`; `written_at`, `ttl`) |
//! | the session's latest turn's frames after id N (resume) | `Query pk AND sk BETWEEN "FRAMES#" AND "FRAMES$"`, `ScanIndexForward=false`, `Limit=25`, consistent; read until the batch holding N+1 or an earlier turn (turn ids sort by start) — beside `GetItem sk=SESSION` (projection `lease_turn, lease_until, status`: the running turn) |
//! | a turn's batches from frame N (follow, retry) | `Query pk AND sk BETWEEN FRAMES#<turn>#<N> AND FRAMES#<turn>#9999999999`, consistent |
//! | admit a turn (beside the lease and the log) | one `UpdateItem sk=BUDGET ADD active :slot, m<minute> 1`, condition: fewer slots than the limit, today's `tokens` under the limit (or another `day`) and `m<minute>` under the limit, `ReturnValues=ALL_NEW` (tokens left, past minutes' counts), `ReturnValuesOnConditionCheckFailure=ALL_OLD` (which budget refused; expired slots are removed and the update tried once more) |
//! | end a turn's budget (after `done`) | `UpdateItem sk=BUDGET DELETE active :slot ADD tokens :n REMOVE m<past minute>…`, condition `day = today` (else `SET day = today, tokens = :n, web = 0`) |
//! | count a web tool call | `UpdateItem sk=BUDGET ADD web 1`, condition `day = today AND web < limit` (another day: `SET day, tokens = 0, web = 1`) |
//! | a user's usage (`GET /me/usage`) | `GetItem sk=BUDGET` (consistent) |
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
//! The calendar (events, series, the user's zone and CalDAV sync token) has
//! one partition per user, `U#<user>#CAL`: see [`crate::calendar::store`].
//! The user's approval settings ("ask first" tools) are one item,
//! `U#<user>#SETTINGS` / `APPROVALS`: see [`crate::approval::settings`].

pub(crate) mod attr;
pub mod aws;
pub mod dynamo;
pub mod gate;
pub mod keys;

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
    /// or claimed by another turn in any session (see [`crate::session::store::SessionLog::run_claim`]).
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
