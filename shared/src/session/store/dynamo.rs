//! The session stores ([`super`]) over DynamoDB: implemented on the table
//! handle [`DynamoStore`], with the key scheme of [`crate::store`].
//!
//! Every call runs inside a `tracing` span named `ddb.<operation>`. Conditional
//! failures are turned into the domain's errors here and nowhere else.
//!
//! Contract beyond the traits':
//! - A message whose JSON body exceeds [`MESSAGE_INLINE_BYTES`] keeps its item
//!   (key, seq, role, `message_id`, `chunks: n`) and its body goes to `n` chunk
//!   items (`BODY#…`, see [`keys::message_body_prefix`]) written before the
//!   transaction that puts the message; every read returns it whole.
//! - Nothing a turn writes under a session's partition outlives a delete that
//!   began: the turn's transactions require the session not `deleting`; body
//!   chunks are removed again when their message's transaction is cancelled;
//!   tool outputs are checked by one read after writing and removed when the
//!   delete won (see `attr::session_alive`).
//! - A lease or session-create write that DynamoDB applied but whose response
//!   was lost succeeds when retried by the same turn.

mod plain;

use super::{
    Bookkeeping, DeleteProgress, Lease, Leases, MessagesFrom, RunClaim, SessionLog, Sessions, SessionsPage,
    StopSignals, ToolOutputs, TurnEnd, TurnStart,
};
use crate::ids::{MessageId, RunId, SessionId, TurnId, UserId};
use crate::message::StoredMessage;
use crate::session::{ContextType, Session, SessionStatus, SessionView, TurnRecord};
use crate::store::attr::{backend, get_n, get_s, is_conditional, n, s, session_alive, Item, DELETING};
use crate::store::dynamo::{put, utf8_chunks, Commit, DynamoStore, CHUNK_BYTES, CONDITION_FAILED, DELETE_BATCH};
use crate::store::keys::{self, GSI2, MSG_END, MSG_PREFIX, RUN_CLAIM_SK, SESSION_SK};
use crate::store::StoreError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, ReturnValue, TransactWriteItem, Update};
use base64::Engine;
use futures::future::OptionFuture;
use std::collections::HashMap;
use tracing::Instrument;

impl DynamoStore {
    /// One page of a session's items with `sk` in `range`, as read
    /// (`forward: false` reads the newest first).
    pub(crate) async fn query_range(
        &self,
        user: &UserId,
        session: &SessionId,
        (lo, hi): (String, String),
        forward: bool,
        limit: usize,
        what: &'static str,
    ) -> Result<Vec<Item>, StoreError> {
        let pk = keys::session_pk(user, session);
        let page = crate::store::attr::session_page(
            self.client(),
            self.table(),
            pk,
            (lo, hi),
            forward,
            Some(limit),
            None,
            what,
        );
        Ok(page.await?.0)
    }

    /// One page of a session's messages with `sk` in `range`, in log order
    /// whichever way it was read (`forward: false` reads the newest first).
    async fn query_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        range: (String, String),
        forward: bool,
        limit: usize,
        what: &'static str,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let items = self.query_range(user, session, range, forward, limit, what).await?;
        let mut msgs = futures::future::try_join_all(items.iter().map(|i| self.message_from_item(i))).await?;
        if !forward {
            msgs.reverse();
        }
        Ok(msgs)
    }

    fn session_key(user: &UserId, session: &SessionId) -> Item {
        Self::key(keys::session_pk(user, session), SESSION_SK.to_string())
    }

    /// Why a conditional write on the session failed: one consistent read, on
    /// the slow path only.
    async fn why_not_leased(&self, user: &UserId, session: &SessionId, turn: &TurnId) -> StoreError {
        match self.get_session(user, session).await {
            Ok(None) => StoreError::NotFound,
            Ok(Some(s)) if s.view.status == SessionStatus::Closed => StoreError::Closed,
            Ok(Some(s)) => match s.lease {
                Some((holder, _)) if &holder == turn => StoreError::LeaseLost,
                Some(_) => StoreError::Busy,
                None => StoreError::LeaseLost,
            },
            Err(e) => e,
        }
    }

    /// Why creating a session failed a condition (one read of each item, on
    /// the slow path only): another turn's claim on the run (`DuplicateRun`),
    /// our own earlier write whose answer was lost (the session, as success),
    /// or an id already taken (`Busy`: a client replaying one).
    async fn why_not_created(
        &self,
        user: &UserId,
        view: &SessionView,
        lease: &Lease,
        run: Option<&RunId>,
    ) -> Result<Session, StoreError> {
        let claim = OptionFuture::from(run.map(|run| self.run_claim(user, run)));
        let (claim, item) = tokio::join!(claim, self.get_session_item(user, &view.id));
        let (claim, item) = (claim.transpose()?.flatten(), item?);
        let ours = RunClaim { session_id: view.id.clone(), turn_id: lease.turn_id.clone() };
        match (claim, item) {
            (Some(c), _) if c != ours => Err(StoreError::DuplicateRun),
            // Ours (no claim: none was asked for), from an attempt whose answer was lost.
            (c, Some(i))
                if (c.is_some() || run.is_none())
                    && get_s(&i, "lease_turn") == Some(lease.turn_id.as_str())
                    && get_s(&i, "status") != Some(DELETING) =>
            {
                session_from_item(user, &i)
            }
            (_, Some(_)) => Err(StoreError::Busy),
            // Ours, but deleted since.
            (_, None) => Err(StoreError::NotFound),
        }
    }

    /// The session, if it exists and is not being deleted (consistent read).
    pub async fn get_session(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError> {
        self.get_session_item(user, session)
            .await?
            .filter(|i| get_s(i, "status") != Some(DELETING))
            .map(|i| session_from_item(user, &i))
            .transpose()
    }

    async fn get_session_item(&self, user: &UserId, session: &SessionId) -> Result<Option<Item>, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "session"))
            .await
            .map_err(backend)?;
        Ok(out.item)
    }

    /// A conditional update of the session item that must find it visible;
    /// answers the updated session, or `NotFound`.
    async fn update_visible_session(
        &self,
        user: &UserId,
        session: &SessionId,
        expr: &str,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<Session, StoreError> {
        let mut req = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .update_expression(expr)
            .condition_expression("attribute_exists(pk) AND #st <> :deleting")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":deleting", s(DELETING))
            .return_values(ReturnValue::AllNew);
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        match req.send().instrument(tracing::debug_span!("ddb.update_item", what = "session")).await {
            Ok(out) => session_from_item(user, &out.attributes.unwrap_or_default()),
            Err(e) if is_conditional(&e) => Err(StoreError::NotFound),
            Err(e) => Err(backend(e)),
        }
    }

    /// The session update of `start_turn`: stats and scope, if we hold the
    /// lease, the count is the one we read and no delete has begun.
    /// The session's side of a turn's start: its count (the user message's
    /// seq), scope and title, under the lease. In the transaction the count
    /// must be the one before the message; alone (`start_turn_plain`) it may
    /// be behind (a start cut off between its two writes) or this very
    /// write's (an attempt whose answer was lost).
    fn start_update(
        &self,
        user: &UserId,
        session: &SessionId,
        start: &TurnStart,
        exact: bool,
    ) -> Result<Update, StoreError> {
        let count = match exact {
            true => "message_count = :expected",
            false => "message_count <= :count",
        };
        let mut update = Update::builder()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .condition_expression(format!("lease_turn = :t AND {count} AND #st <> :deleting"))
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":deleting", s(DELETING))
            .expression_attribute_values(":t", s(start.turn.turn_id.as_str()))
            .expression_attribute_values(":count", n(start.user_message.seq))
            .expression_attribute_values(":ct", s(start.context_type.as_str()));
        if exact {
            update = update.expression_attribute_values(":expected", n(start.user_message.seq - 1));
        }
        // Last activity moved with the lease (`acquire_lease`): not here, so
        // that this write leaves the sessions' index alone.
        let mut set = vec!["message_count = :count", "context_type = :ct"];
        let mut remove = vec![];
        match &start.entity_id {
            Some(e) => {
                set.push("entity_id = :e");
                update = update.expression_attribute_values(":e", s(e.clone()));
            }
            None => remove.push("entity_id"),
        }
        match &start.focus {
            Some(f) => {
                set.push("focus = :f");
                update = update.expression_attribute_values(":f", s(f.to_string()));
            }
            None => remove.push("focus"),
        }
        if let Some(t) = &start.title {
            set.push("title = if_not_exists(title, :title)");
            update = update.expression_attribute_values(":title", s(t.clone()));
        }
        let mut expr = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        update.update_expression(expr).build().map_err(|e| StoreError::Backend(e.to_string()))
    }

    /// A turn's start under a `stream_run_id` its client named: one
    /// transaction (turn record, run claim, session, message).
    async fn start_turn_claimed(
        &self,
        user: &UserId,
        session: &SessionId,
        start: &TurnStart,
    ) -> Result<(), StoreError> {
        let turn_id = &start.turn.turn_id;
        let turn_item = turn_item(user, session, start)?;
        let claim = Put::builder()
            .table_name(self.table())
            .set_item(Some(run_claim_item(user, &start.turn.run_id, session, turn_id)))
            // Ours already: `create_session` claimed it for this very turn.
            .condition_expression("attribute_not_exists(pk) OR (turn_id = :t AND session_id = :s)")
            .expression_attribute_values(":t", s(turn_id.as_str()))
            .expression_attribute_values(":s", s(session.as_str()))
            .build()
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        let writes = MessageWrites::of(user, [&start.user_message])?;
        // Item order matters below: the turn record, the claim, the session.
        let mut items = vec![
            put(self.table(), turn_item, "attribute_not_exists(pk)")?,
            TransactWriteItem::builder().put(claim).build(),
            TransactWriteItem::builder().update(self.start_update(user, session, start, true)?).build(),
        ];
        let first = items.len();
        items.extend(writes.puts(self.table())?);
        let commit = self.commit_messages(&writes, items, first, "start_turn").await?;
        if commit.failed(0) || commit.failed(1) {
            return Err(StoreError::DuplicateRun);
        }
        match commit {
            Commit::Done => Ok(()),
            c if c.any_failed() => Err(self.lost_or_gone(user, session).await),
            Commit::Cancelled(codes) => Err(StoreError::Backend(format!("start_turn cancelled: {codes:?}"))),
        }
    }

    /// Whether a count left behind its log (a plain start or end cut off
    /// between its two writes, [`plain`]) was moved up to the message before
    /// `start`'s: only when that message is stored and we hold the lease.
    async fn count_caught_up(&self, user: &UserId, session: &SessionId, start: &TurnStart) -> Result<bool, StoreError> {
        let before = start.user_message.seq.saturating_sub(1);
        if before == 0 {
            return Ok(false);
        }
        let key = Self::key(keys::session_pk(user, session), keys::message_sk(before));
        let stored = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(key))
            .projection_expression("pk")
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "count_caught_up"))
            .await
            .map_err(backend)?
            .item
            .is_some();
        if !stored {
            return Ok(false);
        }
        let update = Update::builder()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .update_expression("SET message_count = :before")
            .condition_expression("lease_turn = :t AND message_count < :before AND #st <> :deleting")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":deleting", s(DELETING))
            .expression_attribute_values(":t", s(start.turn.turn_id.as_str()))
            .expression_attribute_values(":before", n(before))
            .build()
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        self.update_alone(update, "count_caught_up").await.applied()
    }

    /// The turn record's end: its status, when, and its last message.
    fn turn_end_update(&self, user: &UserId, session: &SessionId, end: &TurnEnd) -> Result<Update, StoreError> {
        let status =
            serde_json::to_value(end.status).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        Update::builder()
            .table_name(self.table())
            .set_key(Some(Self::key(keys::session_pk(user, session), keys::turn_sk(&end.run_id))))
            .update_expression("SET turn_status = :st, ended_at = :now, assistant_seq = :seq")
            .condition_expression("attribute_exists(pk) AND turn_id = :t")
            .expression_attribute_values(":st", s(status))
            .expression_attribute_values(":now", n(crate::now_ms()))
            .expression_attribute_values(":seq", n(end.messages.last().map_or(0, |m| m.seq)))
            .expression_attribute_values(":t", s(end.turn_id.as_str()))
            .build()
            .map_err(|e| StoreError::Backend(e.to_string()))
    }

    /// The session's side of a turn's end, under the lease: `added` more
    /// messages, the tokens, the scope it moved to, and the lease given back.
    fn finish_update(
        &self,
        user: &UserId,
        session: &SessionId,
        end: &TurnEnd,
        added: u64,
    ) -> Result<Update, StoreError> {
        let left = Bookkeeping { turn_id: end.turn_id.clone(), usage: end.usage, added };
        self.bookkeeping_update(user, session, &left, end.scope.as_ref())
    }

    /// The session's side of a turn's end: count, tokens, the scope it moved
    /// to, the lease (and a Stop asked of it) given back; needs the lease.
    pub(super) fn bookkeeping_update(
        &self,
        user: &UserId,
        session: &SessionId,
        end: &Bookkeeping,
        scope: Option<&crate::session::Scope>,
    ) -> Result<Update, StoreError> {
        let added = end.added;
        let (mut set, mut remove) = (
            "SET message_count = message_count + :added, \
             prompt_tokens = prompt_tokens + :pt, completion_tokens = completion_tokens + :ct"
                .to_string(),
            "REMOVE lease_turn, lease_until, stop_turn".to_string(),
        );
        let mut update = Update::builder();
        if let Some(scope) = scope {
            set.push_str(", context_type = :sct");
            update = update.expression_attribute_values(":sct", s(scope.context_type.as_str()));
            for (name, value) in
                [("entity_id", scope.entity_id.clone()), ("focus", scope.focus.as_ref().map(|f| f.to_string()))]
            {
                match value {
                    Some(v) => {
                        set.push_str(&format!(", {name} = :s_{name}"));
                        update = update.expression_attribute_values(format!(":s_{name}"), s(v));
                    }
                    None => remove.push_str(&format!(", {name}")),
                }
            }
        }
        update
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .update_expression(format!("{set} {remove}"))
            .condition_expression("lease_turn = :t AND #st <> :deleting")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":deleting", s(DELETING))
            .expression_attribute_values(":t", s(end.turn_id.as_str()))
            .expression_attribute_values(":added", n(added))
            .expression_attribute_values(":pt", n(end.usage.prompt_tokens))
            .expression_attribute_values(":ct", n(end.usage.completion_tokens))
            .build()
            .map_err(|e| StoreError::Backend(e.to_string()))
    }
}

/// A message whose JSON body is longer is stored in chunks. Inline bodies
/// keep a transaction of 9 messages + the session under DynamoDB's 4 MB.
pub const MESSAGE_INLINE_BYTES: usize = CHUNK_BYTES;
/// Messages `finish_turn` writes in its own transaction.
const FINISH_MESSAGES: usize = 8;

/// How long a `stream_run_id` claim is kept (the table's TTL on `ttl`).
const RUN_CLAIM_TTL_SECS: i64 = 7 * 24 * 3600;

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

fn session_from_item(user: &UserId, item: &Item) -> Result<Session, StoreError> {
    let id = SessionId::parse(get_s(item, "session_id").ok_or_else(|| corrupt("session_id"))?)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let context_type = get_s(item, "context_type").and_then(ContextType::parse).unwrap_or_default();
    let status = match get_s(item, "status") {
        Some("closed") => SessionStatus::Closed,
        _ => SessionStatus::Active,
    };
    let lease = match (get_s(item, "lease_turn"), get_n(item, "lease_until")) {
        (Some(t), Some(until)) => TurnId::parse(t).ok().map(|t| (t, until)),
        _ => None,
    };
    Ok(Session {
        user_id: user.clone(),
        view: SessionView {
            id,
            title: get_s(item, "title").map(str::to_string),
            context_type,
            entity_id: get_s(item, "entity_id").map(str::to_string),
            focus: get_s(item, "focus").and_then(|f| serde_json::from_str(f).ok()),
            status,
            message_count: get_n(item, "message_count").unwrap_or(0).max(0) as u64,
            created_at: get_n(item, "created_at").unwrap_or(0),
            last_activity_at: get_n(item, "last_activity_at").unwrap_or(0),
        },
        prompt_tokens: get_n(item, "prompt_tokens").unwrap_or(0).max(0) as u64,
        completion_tokens: get_n(item, "completion_tokens").unwrap_or(0).max(0) as u64,
        lease,
    })
}

fn new_session_item(user: &UserId, view: &SessionView, lease: &Lease) -> Item {
    let mut item = DynamoStore::session_key(user, &view.id);
    item.insert("kind".into(), s("session"));
    item.insert("gsi2pk".into(), s(keys::sessions_gsi_pk(user)));
    item.insert("gsi2sk".into(), s(keys::sessions_gsi_sk(view.last_activity_at, &view.id)));
    item.insert("user_id".into(), s(user.as_str()));
    item.insert("session_id".into(), s(view.id.as_str()));
    if let Some(t) = &view.title {
        item.insert("title".into(), s(t.clone()));
    }
    item.insert("context_type".into(), s(view.context_type.as_str()));
    if let Some(e) = &view.entity_id {
        item.insert("entity_id".into(), s(e.clone()));
    }
    if let Some(f) = &view.focus {
        item.insert("focus".into(), s(f.to_string()));
    }
    item.insert("status".into(), s("active"));
    item.insert("message_count".into(), n(view.message_count));
    item.insert("created_at".into(), n(view.created_at));
    item.insert("last_activity_at".into(), n(view.last_activity_at));
    item.insert("prompt_tokens".into(), n(0));
    item.insert("completion_tokens".into(), n(0));
    item.insert("lease_turn".into(), s(lease.turn_id.as_str()));
    item.insert("lease_until".into(), n(lease.until_ms));
    item
}

/// A turn's record as written at its start (its end is recorded beside `data`).
fn turn_item(user: &UserId, session: &SessionId, start: &TurnStart) -> Result<Item, StoreError> {
    let mut item = DynamoStore::key(keys::session_pk(user, session), keys::turn_sk(&start.turn.run_id));
    item.insert("kind".into(), s("turn"));
    item.insert("turn_id".into(), s(start.turn.turn_id.as_str()));
    let data = serde_json::to_string(&start.turn).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    item.insert("data".into(), s(data));
    Ok(item)
}

/// The user's claim on `run` for `turn` in `session`, expiring after
/// [`RUN_CLAIM_TTL_SECS`] (a retry comes within minutes).
fn run_claim_item(user: &UserId, run: &RunId, session: &SessionId, turn: &TurnId) -> Item {
    let mut item = DynamoStore::key(keys::run_claim_pk(user, run), RUN_CLAIM_SK.to_string());
    item.insert("kind".into(), s("run_claim"));
    item.insert("session_id".into(), s(session.as_str()));
    item.insert("turn_id".into(), s(turn.as_str()));
    item.insert("ttl".into(), n(crate::now_ms() / 1000 + RUN_CLAIM_TTL_SECS));
    item
}

fn run_claim_from_item(item: &Item) -> Result<RunClaim, StoreError> {
    let session = get_s(item, "session_id").and_then(|v| SessionId::parse(v).ok());
    let turn = get_s(item, "turn_id").and_then(|v| TurnId::parse(v).ok());
    match (session, turn) {
        (Some(session_id), Some(turn_id)) => Ok(RunClaim { session_id, turn_id }),
        _ => Err(corrupt("run claim")),
    }
}

/// What storing one message writes: its item (for the transaction) and, when
/// its body is too large for the item, the body's chunks (written before).
struct MessageWrite {
    item: Item,
    id: MessageId,
    bodies: Vec<Item>,
}

impl MessageWrite {
    fn of(user: &UserId, m: &StoredMessage) -> Result<Self, StoreError> {
        let data = serde_json::to_string(m).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let pk = keys::session_pk(user, &m.session_id);
        let mut item = DynamoStore::key(pk.clone(), keys::message_sk(m.seq));
        item.insert("kind".into(), s("message"));
        item.insert("seq".into(), n(m.seq));
        item.insert(
            "role".into(),
            s(serde_json::to_value(m.role).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()),
        );
        item.insert("turn_id".into(), s(m.turn_id.as_str()));
        let mut bodies = Vec::new();
        if data.len() <= MESSAGE_INLINE_BYTES {
            item.insert("data".into(), s(data));
        } else {
            for (i, chunk) in utf8_chunks(&data, CHUNK_BYTES).enumerate() {
                let mut body = DynamoStore::key(pk.clone(), keys::message_body_sk(m.seq, &m.id, i));
                body.insert("kind".into(), s("message_body"));
                body.insert("data".into(), s(chunk));
                bodies.push(body);
            }
            item.insert("message_id".into(), s(m.id.as_str()));
            item.insert("chunks".into(), n(bodies.len()));
        }
        Ok(MessageWrite { item, id: m.id.clone(), bodies })
    }

    /// The message item as a transaction put that must not overwrite a message.
    fn put(&self, table: &str) -> Result<TransactWriteItem, StoreError> {
        put(table, self.item.clone(), "attribute_not_exists(pk)")
    }
}

/// The messages of one transaction.
struct MessageWrites(Vec<MessageWrite>);

impl MessageWrites {
    fn of<'a>(user: &UserId, messages: impl IntoIterator<Item = &'a StoredMessage>) -> Result<Self, StoreError> {
        Ok(MessageWrites(messages.into_iter().map(|m| MessageWrite::of(user, m)).collect::<Result<_, _>>()?))
    }

    fn puts(&self, table: &str) -> Result<Vec<TransactWriteItem>, StoreError> {
        self.0.iter().map(|w| w.put(table)).collect()
    }

    fn bodies(&self) -> Vec<Item> {
        self.0.iter().flat_map(|w| w.bodies.iter().cloned()).collect()
    }
}

/// Where a message item's body is: inline, or in `chunks` items.
enum Body<'a> {
    Inline(&'a str),
    Chunked { pk: &'a str, seq: u64, id: MessageId, chunks: usize },
}

fn message_body_of(item: &Item) -> Result<Body<'_>, StoreError> {
    if let Some(data) = get_s(item, "data") {
        return Ok(Body::Inline(data));
    }
    let id = get_s(item, "message_id").and_then(|i| MessageId::parse(i).ok()).ok_or_else(|| corrupt("message id"))?;
    Ok(Body::Chunked {
        pk: get_s(item, "pk").ok_or_else(|| corrupt("message pk"))?,
        seq: get_n(item, "seq").filter(|s| *s > 0).ok_or_else(|| corrupt("message seq"))? as u64,
        id,
        chunks: get_n(item, "chunks").filter(|c| *c > 0).ok_or_else(|| corrupt("message data"))? as usize,
    })
}

fn parse_message(data: &str) -> Result<StoredMessage, StoreError> {
    serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("message: {e}")))
}

#[async_trait::async_trait]
impl Sessions for DynamoStore {
    async fn create_session(
        &self,
        user: &UserId,
        view: &SessionView,
        lease: &Lease,
        run: &RunId,
    ) -> Result<Session, StoreError> {
        let item = new_session_item(user, view, lease);
        let claim = run_claim_item(user, run, &view.id, &lease.turn_id);
        let items = vec![
            put(self.table(), item.clone(), "attribute_not_exists(pk)")?,
            put(self.table(), claim, "attribute_not_exists(pk)")?,
        ];
        match self.transact(items, "create_session").await? {
            Commit::Done => session_from_item(user, &item),
            Commit::Cancelled(codes) if codes.iter().any(|c| c == CONDITION_FAILED) => {
                self.why_not_created(user, view, lease, Some(run)).await
            }
            Commit::Cancelled(codes) => Err(StoreError::Backend(format!("create_session cancelled: {codes:?}"))),
        }
    }

    async fn open_session(
        &self,
        user: &UserId,
        view: &SessionView,
        lease: &Lease,
        start: &TurnStart,
    ) -> Result<(), StoreError> {
        let (run, seq) = (&start.turn.run_id, start.user_message.seq);
        let stored = SessionView {
            message_count: seq,
            last_activity_at: start.user_message.created_at,
            title: view.title.clone().or_else(|| start.title.clone()),
            ..view.clone()
        };
        let writes = MessageWrites::of(user, [&start.user_message])?;
        // Item order matters below: the session, the claim.
        let mut items = vec![put(self.table(), new_session_item(user, &stored, lease), "attribute_not_exists(pk)")?];
        let claimed = start.claims_run().then_some(run);
        if claimed.is_some() {
            items.push(put(
                self.table(),
                run_claim_item(user, run, &view.id, &lease.turn_id),
                "attribute_not_exists(pk)",
            )?);
            items.push(put(self.table(), turn_item(user, &view.id, start)?, "attribute_not_exists(pk)")?);
        }
        let first = items.len();
        items.extend(writes.puts(self.table())?);
        match self.commit_messages(&writes, items, first, "open_session").await? {
            Commit::Done => Ok(()),
            c if c.any_failed() => self.why_not_created(user, view, lease, claimed).await.map(|_| ()),
            Commit::Cancelled(codes) => Err(StoreError::Backend(format!("open_session cancelled: {codes:?}"))),
        }
    }

    async fn session(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError> {
        self.get_session(user, session).await
    }

    async fn list_sessions(
        &self,
        user: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<SessionsPage, StoreError> {
        let gsi_pk = keys::sessions_gsi_pk(user);
        let mut q = self
            .client()
            .query()
            .table_name(self.table())
            .index_name(GSI2)
            .key_condition_expression("gsi2pk = :p")
            .expression_attribute_values(":p", s(gsi_pk.clone()))
            .scan_index_forward(false)
            .limit(limit.clamp(1, 100) as i32);
        if let Some(c) = cursor {
            let start = decode_cursor(c).ok_or(StoreError::NotFound)?;
            // A cursor is only good for the user it was made for.
            if get_s(&start, "gsi2pk") != Some(gsi_pk.as_str()) {
                return Err(StoreError::NotFound);
            }
            q = q.set_exclusive_start_key(Some(start));
        }
        let out =
            q.send().instrument(tracing::debug_span!("ddb.query", what = "list_sessions")).await.map_err(backend)?;
        // The index holds keys only (docs/cost.md): the items are read by key.
        let keys = out.items().iter().map(Self::key_of).collect::<Vec<_>>();
        let items = if keys.is_empty() { Vec::new() } else { self.batch_get(keys, None).await? };
        let sessions = items
            .iter()
            .filter(|i| get_s(i, "status") != Some(DELETING) && i.contains_key("gsi2pk"))
            .map(|i| session_from_item(user, i).map(|s| s.view))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SessionsPage {
            sessions,
            cursor: out.last_evaluated_key.filter(|k| !k.is_empty()).map(|k| encode_cursor(&k)),
        })
    }

    async fn rename_session(&self, user: &UserId, session: &SessionId, title: &str) -> Result<Session, StoreError> {
        self.update_visible_session(
            user,
            session,
            "SET title = :t, title_source = :user",
            vec![(":t", s(title)), (":user", s("user"))],
        )
        .await
    }

    async fn close_session(&self, user: &UserId, session: &SessionId) -> Result<Session, StoreError> {
        self.update_visible_session(user, session, "SET #st = :closed", vec![(":closed", s("closed"))]).await
    }

    async fn delete_session(
        &self,
        user: &UserId,
        session: &SessionId,
        budget: Option<usize>,
    ) -> Result<DeleteProgress, StoreError> {
        // Step 1: invisible at once, and every later write of a turn fails. A
        // session already marked (an interrupted delete) passes the condition
        // too, so a retry resumes; one whose item is gone still has its
        // partition swept (items a retry or a racing writer left behind).
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .update_expression("SET #st = :deleting REMOVE gsi2pk, gsi2sk")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":deleting", s(DELETING))
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "mark_deleting"))
            .await;
        let marked = match res {
            Ok(_) => true,
            Err(e) if is_conditional(&e) => false,
            Err(e) => return Err(backend(e)),
        };
        // Step 2: everything under the session's key but the session item, in
        // batches; the session item goes last so a retry can always find it.
        let pk = keys::session_pk(user, session);
        let mut deleted = 0;
        let mut batches = 0;
        loop {
            if budget.is_some_and(|b| batches >= b) {
                return Ok(DeleteProgress::Partial { items_deleted: deleted });
            }
            let keys = self.delete_page(&pk).await?;
            if keys.is_empty() {
                break;
            }
            deleted += keys.len();
            self.batch_delete(keys).await?;
            batches += 1;
        }
        if !marked {
            return if deleted == 0 {
                Err(StoreError::NotFound)
            } else {
                Ok(DeleteProgress::Done { items_deleted: deleted })
            };
        }
        self.client()
            .delete_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .send()
            .instrument(tracing::debug_span!("ddb.delete_item", what = "session"))
            .await
            .map_err(backend)?;
        Ok(DeleteProgress::Done { items_deleted: deleted + 1 })
    }
}

#[async_trait::async_trait]
impl SessionLog for DynamoStore {
    async fn run_claim(&self, user: &UserId, run: &RunId) -> Result<Option<RunClaim>, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(Self::key(keys::run_claim_pk(user, run), RUN_CLAIM_SK.to_string())))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "run_claim"))
            .await
            .map_err(backend)?;
        out.item.as_ref().map(run_claim_from_item).transpose()
    }

    async fn turn_by_run(
        &self,
        user: &UserId,
        session: &SessionId,
        run: &RunId,
    ) -> Result<Option<TurnRecord>, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(Self::key(keys::session_pk(user, session), keys::turn_sk(run))))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "turn"))
            .await
            .map_err(backend)?;
        match out.item {
            None => Ok(None),
            Some(item) => {
                let data = get_s(&item, "data").ok_or_else(|| corrupt("turn data"))?;
                let mut turn: TurnRecord =
                    serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("turn: {e}")))?;
                // `data` is written once at start; the end is recorded beside it.
                if let Some(st) = get_s(&item, "turn_status") {
                    turn.status = serde_json::from_value(serde_json::Value::String(st.to_string()))
                        .map_err(|e| StoreError::Corrupt(format!("turn status: {e}")))?;
                    turn.ended_at = get_n(&item, "ended_at");
                    turn.assistant_message_seq = get_n(&item, "assistant_seq").filter(|s| *s > 0).map(|s| s as u64);
                }
                Ok(Some(turn))
            }
        }
    }

    async fn start_turn(&self, user: &UserId, session: &SessionId, start: &TurnStart) -> Result<(), StoreError> {
        if !start.claims_run() {
            return self.start_turn_plain(user, session, start).await;
        }
        match self.start_turn_claimed(user, session, start).await {
            // A plain write cut off left the count behind the log (`plain`):
            // moved up to the log, the transaction is tried once more.
            Err(StoreError::LeaseLost) if self.count_caught_up(user, session, start).await? => {
                self.start_turn_claimed(user, session, start).await
            }
            done => done,
        }
    }

    async fn append_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: &TurnId,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError> {
        // A tool round writes no turn record and no claim: its messages and
        // the session's count go as plain writes (`plain`), run claimed or
        // not, at half a transaction's write units (docs/cost.md).
        self.append_plain(user, session, turn, messages).await
    }

    async fn finish_turn(&self, user: &UserId, session: &SessionId, end: &TurnEnd) -> Result<(), StoreError> {
        // DynamoDB Local caps a transaction at 10 items: the turn record, the
        // session and 8 messages. Earlier ones (a cut-off round with many
        // calls) go first, as a tool round would.
        let (earlier, closing) = end.messages.split_at(end.messages.len().saturating_sub(FINISH_MESSAGES));
        if !earlier.is_empty() {
            self.append_messages(user, session, &end.turn_id, earlier).await?;
        }
        if !end.claims_run() && closing.len() <= 1 {
            return self.finish_turn_plain(user, session, end, closing.first()).await;
        }
        let writes = MessageWrites::of(user, closing)?;
        let mut items = writes.puts(self.table())?;
        // Only a run the client named has a turn record (`TurnStart::claims_run`).
        if end.claims_run() {
            items.push(TransactWriteItem::builder().update(self.turn_end_update(user, session, end)?).build());
        }
        let session_update = self.finish_update(user, session, end, closing.len() as u64)?;
        items.push(TransactWriteItem::builder().update(session_update).build());
        match self.commit_messages(&writes, items, 0, "finish_turn").await? {
            Commit::Done => Ok(()),
            c if c.any_failed() => Err(self.lost_or_gone(user, session).await),
            Commit::Cancelled(codes) => Err(StoreError::Backend(format!("finish_turn cancelled: {codes:?}"))),
        }
    }

    async fn store_answer(
        &self,
        user: &UserId,
        session: &SessionId,
        end: &TurnEnd,
    ) -> Result<Option<Bookkeeping>, StoreError> {
        match end.messages.as_slice() {
            [answer] if self::plain::answer_alone(end, answer) => {
                self.store_answer_alone(user, session, end, answer).await
            }
            _ => self.finish_turn(user, session, end).await.map(|()| None),
        }
    }

    async fn settle_turn(&self, user: &UserId, session: &SessionId, left: &Bookkeeping) -> Result<(), StoreError> {
        self.settle_alone(user, session, left).await
    }

    async fn recent_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let limit = limit.clamp(1, 1000);
        self.query_messages(
            user,
            session,
            (MSG_PREFIX.to_string(), MSG_END.to_string()),
            false,
            limit,
            "recent_messages",
        )
        .await
    }

    async fn messages_page(
        &self,
        user: &UserId,
        session: &SessionId,
        from: MessagesFrom,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let (lo, hi, forward) = match from {
            MessagesFrom::Before(None) => (MSG_PREFIX.to_string(), MSG_END.to_string(), false),
            MessagesFrom::Before(Some(0)) => return Ok(vec![]),
            MessagesFrom::Before(Some(b)) => (MSG_PREFIX.to_string(), keys::message_sk(b - 1), false),
            MessagesFrom::After(a) => (keys::message_sk(a.saturating_add(1)), MSG_END.to_string(), true),
        };
        self.query_messages(user, session, (lo, hi), forward, limit.clamp(1, 200), "messages_page").await
    }
}

#[async_trait::async_trait]
impl Leases for DynamoStore {
    async fn acquire_lease(&self, user: &UserId, session: &SessionId, lease: &Lease) -> Result<Session, StoreError> {
        let now = crate::now_ms();
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            // The session's last activity moves here, once a turn: the one
            // write of the turn that moves it in the sessions' index.
            .update_expression("SET lease_turn = :t, lease_until = :u, last_activity_at = :now, gsi2sk = :g")
            // `lease_turn = :t`: our own write again, whose answer was lost.
            .condition_expression(
                "attribute_exists(pk) AND #st = :active \
                 AND (attribute_not_exists(lease_until) OR lease_until < :now OR lease_turn = :t)",
            )
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":t", s(lease.turn_id.as_str()))
            .expression_attribute_values(":u", n(lease.until_ms))
            .expression_attribute_values(":now", n(now))
            .expression_attribute_values(":g", s(keys::sessions_gsi_sk(now, session)))
            .expression_attribute_values(":active", s("active"))
            .return_values(ReturnValue::AllNew)
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "acquire_lease"))
            .await;
        match res {
            Ok(out) => session_from_item(user, &out.attributes.unwrap_or_default()),
            Err(e) if is_conditional(&e) => Err(match self.why_not_leased(user, session, &lease.turn_id).await {
                // Not ours and not someone else's: it expired between the two reads.
                StoreError::LeaseLost => StoreError::Busy,
                other => other,
            }),
            Err(e) => Err(backend(e)),
        }
    }

    async fn renew_lease(&self, user: &UserId, session: &SessionId, lease: &Lease) -> Result<(), StoreError> {
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .update_expression("SET lease_until = :u")
            // A delete that began takes the session from its turn.
            .condition_expression("lease_turn = :t AND #st <> :deleting")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":deleting", s(DELETING))
            .expression_attribute_values(":t", s(lease.turn_id.as_str()))
            .expression_attribute_values(":u", n(lease.until_ms))
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "renew_lease"))
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_conditional(&e) => Err(StoreError::LeaseLost),
            Err(e) => Err(backend(e)),
        }
    }

    async fn take_over_lease(
        &self,
        user: &UserId,
        session: &SessionId,
        lease: &Lease,
        ended: &Bookkeeping,
    ) -> Result<Session, StoreError> {
        self.take_over_alone(user, session, lease, ended).await
    }

    async fn release_lease(&self, user: &UserId, session: &SessionId, turn: &TurnId) -> Result<(), StoreError> {
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .update_expression("REMOVE lease_turn, lease_until")
            .condition_expression("lease_turn = :t")
            .expression_attribute_values(":t", s(turn.as_str()))
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "release_lease"))
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if is_conditional(&e) => Ok(()),
            Err(e) => Err(backend(e)),
        }
    }
}

#[async_trait::async_trait]
impl StopSignals for DynamoStore {
    async fn request_stop(
        &self,
        user: &UserId,
        session: &SessionId,
        run: Option<&RunId>,
    ) -> Result<Option<TurnId>, StoreError> {
        let Some(current) = self.get_session(user, session).await? else { return Err(StoreError::NotFound) };
        let Some((turn, until)) = current.lease else { return Ok(None) };
        if until < crate::now_ms() {
            return Ok(None);
        }
        // A turn under its own id has no turn record (`TurnStart::claims_run`).
        if let Some(run) = run.filter(|r| r.as_str() != turn.as_str()) {
            match self.turn_by_run(user, session, run).await? {
                Some(t) if t.turn_id == turn => {}
                _ => return Ok(None),
            }
        }
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .update_expression("SET stop_turn = :t")
            .condition_expression("lease_turn = :t AND lease_until >= :now")
            .expression_attribute_values(":t", s(turn.as_str()))
            .expression_attribute_values(":now", n(crate::now_ms()))
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "request_stop"))
            .await;
        match res {
            Ok(_) => Ok(Some(turn)),
            // The turn ended between the read and the write.
            Err(e) if is_conditional(&e) => Ok(None),
            Err(e) => Err(backend(e)),
        }
    }

    async fn stop_requested(&self, user: &UserId, session: &SessionId, turn: &TurnId) -> Result<bool, StoreError> {
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .projection_expression("stop_turn")
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "stop_requested"))
            .await
            .map_err(backend)?;
        Ok(out.item.as_ref().and_then(|i| get_s(i, "stop_turn")) == Some(turn.as_str()))
    }
}

#[async_trait::async_trait]
impl ToolOutputs for DynamoStore {
    async fn put_tool_output(
        &self,
        user: &UserId,
        session: &SessionId,
        call_id: &str,
        content: &str,
    ) -> Result<(), StoreError> {
        let prefix = keys::tool_output_prefix(call_id);
        let pk = keys::session_pk(user, session);
        let chunks: Vec<&str> = utf8_chunks(content, CHUNK_BYTES).collect();
        let items: Vec<Item> = chunks
            .iter()
            .enumerate()
            .map(|(i, chunk)| {
                let mut item = Self::key(pk.clone(), format!("{prefix}{i:04}"));
                item.insert("kind".into(), s("tool_output"));
                item.insert("data".into(), s(*chunk));
                if i == 0 {
                    // A later output under the same call id overwrites from
                    // chunk 0 but may be shorter: the count says where it ends.
                    item.insert("chunks".into(), n(chunks.len()));
                }
                item
            })
            .collect();
        self.put_items(&items).await?;
        // Checked after writing: see `session_alive`.
        if session_alive(self.client(), self.table(), &pk).await? {
            return Ok(());
        }
        self.forget(&items).await;
        Err(StoreError::NotFound)
    }

    async fn tool_output(
        &self,
        user: &UserId,
        session: &SessionId,
        call_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let mut out = String::new();
        let (mut found, mut taken, mut expected) = (false, 0usize, usize::MAX);
        let mut start = None;
        loop {
            let out_page = self
                .client()
                .query()
                .table_name(self.table())
                .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
                .expression_attribute_values(":pk", s(keys::session_pk(user, session)))
                .expression_attribute_values(":p", s(keys::tool_output_prefix(call_id)))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .instrument(tracing::debug_span!("ddb.query", what = "tool_output"))
                .await
                .map_err(backend)?;
            for item in out_page.items.unwrap_or_default() {
                if !found {
                    // Stored before the count was kept: every chunk is this output's.
                    expected = get_n(&item, "chunks").map_or(usize::MAX, |c| c as usize);
                }
                found = true;
                if taken < expected {
                    out.push_str(get_s(&item, "data").unwrap_or_default());
                    taken += 1;
                }
            }
            match out_page.last_evaluated_key {
                Some(k) if !k.is_empty() && taken < expected => start = Some(k),
                _ => break,
            }
        }
        Ok(found.then_some(out))
    }
}

impl DynamoStore {
    /// A message from its item; a chunked body costs one more read (paged
    /// when over 1 MB), inline ones none.
    pub(crate) async fn message_from_item(&self, item: &Item) -> Result<StoredMessage, StoreError> {
        let (pk, seq, id, chunks) = match message_body_of(item)? {
            Body::Inline(data) => return parse_message(data),
            Body::Chunked { pk, seq, id, chunks } => (pk, seq, id, chunks),
        };
        let mut data = String::new();
        let mut read = 0;
        let mut start = None;
        loop {
            let page = self
                .client()
                .query()
                .table_name(self.table())
                .key_condition_expression("pk = :pk AND sk BETWEEN :a AND :b")
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":a", s(keys::message_body_sk(seq, &id, 0)))
                .expression_attribute_values(":b", s(keys::message_body_sk(seq, &id, chunks - 1)))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .instrument(tracing::debug_span!("ddb.query", what = "message_body"))
                .await
                .map_err(backend)?;
            for chunk in page.items() {
                data.push_str(get_s(chunk, "data").ok_or_else(|| corrupt("message body chunk"))?);
                read += 1;
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => break,
            }
        }
        if read != chunks {
            return Err(StoreError::Corrupt(format!("message {seq}: {read} of {chunks} body chunks")));
        }
        parse_message(&data)
    }

    /// A transaction that puts messages (theirs are the items from `first`
    /// on): the body chunks of the large ones go first, and are removed again
    /// when the transaction is cancelled. Its session guard is the check that
    /// no delete has begun, so chunks it did not commit are never left under a
    /// deleted session. Kept: the chunks of a message already stored with the
    /// same id (this very write, committed by an earlier attempt whose answer
    /// was lost), and all chunks after an unknown outcome (a backend error:
    /// they may belong to a committed message; unreferenced ones are never read).
    async fn commit_messages(
        &self,
        writes: &MessageWrites,
        items: Vec<TransactWriteItem>,
        first: usize,
        what: &'static str,
    ) -> Result<Commit, StoreError> {
        let bodies = writes.bodies();
        if let Err(e) = self.put_items(&bodies).await {
            self.forget(&bodies).await;
            return Err(e);
        }
        let commit = self.transact(items, what).await?;
        if let Commit::Cancelled(_) = commit {
            for (i, w) in writes.0.iter().enumerate().filter(|(_, w)| !w.bodies.is_empty()) {
                let ours_stored = commit.failed(first + i) && self.stored_as(w).await;
                if !ours_stored {
                    self.forget(&w.bodies).await;
                }
            }
        }
        Ok(commit)
    }

    /// Whether the message item `w` would write is stored with `w`'s id
    /// (inline or chunked)
    /// (false when unsure: the caller then removes chunks nothing references).
    async fn stored_as(&self, w: &MessageWrite) -> bool {
        let key = ["pk", "sk"].map(|k| (k.to_string(), w.item[k].clone()));
        let out = self
            .client()
            .get_item()
            .table_name(self.table())
            .set_key(Some(HashMap::from(key)))
            .projection_expression("message_id, #d")
            .expression_attribute_names("#d", "data")
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "message_id"))
            .await;
        let item = out.ok().and_then(|o| o.item);
        item.and_then(|i| plain::message_id_of(&i)).as_deref() == Some(w.id.as_str())
    }

    /// Why a turn's write on the session failed its condition: the session
    /// is gone or being deleted (`NotFound`), or the lease is not ours.
    async fn lost_or_gone(&self, user: &UserId, session: &SessionId) -> StoreError {
        match self.get_session(user, session).await {
            Ok(None) => StoreError::NotFound,
            Ok(Some(_)) => StoreError::LeaseLost,
            Err(e) => e,
        }
    }

    /// The keys of up to one batch of items under `pk`, the session item
    /// excepted. Consistent, so the sweep sees every write that landed before
    /// the session was marked.
    async fn delete_page(&self, pk: &str) -> Result<Vec<Item>, StoreError> {
        let out = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(pk))
            .projection_expression("pk, sk")
            .limit(DELETE_BATCH as i32 + 1)
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.query", what = "delete_page"))
            .await
            .map_err(backend)?;
        Ok(out
            .items
            .unwrap_or_default()
            .into_iter()
            .filter(|i| get_s(i, "sk") != Some(SESSION_SK))
            .take(DELETE_BATCH)
            .collect())
    }
}

/// Cursors are the last evaluated key, as base64url JSON: opaque to clients,
/// checked against the caller on the way back in.
fn encode_cursor(key: &Item) -> String {
    let map: std::collections::BTreeMap<&str, &str> =
        key.iter().filter_map(|(k, v)| v.as_s().ok().map(|v| (k.as_str(), v.as_str()))).collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&map).unwrap_or_default())
}

fn decode_cursor(c: &str) -> Option<Item> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(c).ok()?;
    let map: std::collections::BTreeMap<String, String> = serde_json::from_slice(&bytes).ok()?;
    Some(map.into_iter().map(|(k, v)| (k, s(v))).collect())
}
