//! A turn's start and end when its client named no `stream_run_id` (the
//! chat page's `useChat` names none): with no run claim and no turn record to
//! keep atomic with the message, the message and the session go as two plain
//! writes (one write unit per KB each) instead of a transaction (two per item
//! per KB: docs/cost.md).
//!
//! Contract, beside the store's ([`super::super`]): the message goes first, so
//! the session never counts a message that is not stored. Between the two
//! writes the session's count is one behind; a start cut off there leaves it
//! so, and the next turn counts from its log (`turn::start`), so nothing is
//! lost and no seq is used twice (a next turn under a `stream_run_id`, whose
//! transaction needs the count right, first moves it up to the log:
//! `count_caught_up`). A turn's end whose answer is one message
//! ([`answer_alone`]) stores the message before `done` and the session's
//! write after it ([`DynamoStore::settle_alone`]): `done` waits for one
//! write; a later turn finding that write not landed does it while taking
//! the lease over ([`DynamoStore::take_over_alone`]), so it applies once.
//! A session write refused (a delete began, or
//! the lease is not ours) takes the message out again: refused, the turn's
//! write leaves nothing, as a transaction's would (but for a crash between
//! the two, which leaves the message: in the log, counted by the next turn,
//! or under a deleted session's key, where nothing reads it).

use super::{session_from_item, DynamoStore, MessageWrite};
use crate::ids::{SessionId, TurnId, UserId};
use crate::message::{Role, StoredMessage};
use crate::session::store::{Bookkeeping, Lease, TurnEnd, TurnStart};
use crate::session::Session;
use crate::store::attr::{backend, get_s, is_conditional, n, s, DELETING};
use crate::store::keys;
use crate::store::StoreError;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::Update;
use futures::future::join_all;
use std::collections::HashMap;
use tracing::Instrument;

impl DynamoStore {
    pub(super) async fn start_turn_plain(
        &self,
        user: &UserId,
        session: &SessionId,
        start: &TurnStart,
    ) -> Result<(), StoreError> {
        let w = MessageWrite::of(user, &start.user_message)?;
        self.put_message(user, session, &w, "start_turn").await?;
        match self.update_alone(self.start_update(user, session, start, false)?, "start_turn").await {
            Sent::Applied => Ok(()),
            Sent::Refused => Err(self.not_counted(user, session, &w).await),
            Sent::Failed(e) => Err(self.after_failure(&w, e).await),
        }
    }

    /// The turn's last message (none: a turn stopped before any text), then
    /// the session's count, tokens and scope, with the lease given back.
    pub(super) async fn finish_turn_plain(
        &self,
        user: &UserId,
        session: &SessionId,
        end: &TurnEnd,
        message: Option<&StoredMessage>,
    ) -> Result<(), StoreError> {
        let w = message.map(|m| MessageWrite::of(user, m)).transpose()?;
        if let Some(w) = &w {
            self.put_message(user, session, w, "finish_turn").await?;
        }
        let update = self.finish_update(user, session, end, w.is_some() as u64)?;
        match (self.update_alone(update, "finish_turn").await, &w) {
            (Sent::Applied, _) => return Ok(()),
            (Sent::Failed(e), Some(w)) => return Err(self.after_failure(w, e).await),
            (Sent::Failed(e), None) => return Err(e.error),
            (Sent::Refused, _) => {}
        }
        // An attempt whose answer was lost gave the lease back already: the
        // session counts the message and no turn holds it.
        match self.get_session(user, session).await? {
            Some(s) if s.lease.is_none() && message.is_none_or(|m| s.view.message_count >= m.seq) => Ok(()),
            _ => match &w {
                Some(w) => Err(self.not_counted(user, session, w).await),
                None => Err(self.lost_or_gone(user, session).await),
            },
        }
    }

    /// A tool round's messages (a running turn's, under its lease): each a
    /// conditional `PutItem`, sent together, then the session's count moved
    /// up to the last of them. Set, not added, so that a write sent again
    /// after a lost answer counts once; `<=`, so that a count left behind by
    /// a cut-off write is repaired. Refused, the messages this call stored
    /// are taken out again (a round sent again after its turn ended finds
    /// its messages stored and leaves them); cut off between the two, the count stays behind the log and
    /// the next turn counts from the log (as after a start cut off). A round
    /// cut off part-way may leave a call without its result or a result
    /// without its call: the context builder sends neither alone
    /// (`context`'s contract).
    pub(super) async fn append_plain(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: &TurnId,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError> {
        let Some(last) = messages.iter().map(|m| m.seq).max() else { return Ok(()) };
        let writes = messages.iter().map(|m| MessageWrite::of(user, m)).collect::<Result<Vec<_>, _>>()?;
        let puts = join_all(writes.iter().map(|w| self.put_message_new(user, session, w, "append_messages"))).await;
        // Only what this call stored is taken out again: a message found
        // stored is an earlier write's (a retried round), and stays.
        let (mut stored, mut failed) = (Vec::new(), None);
        for (w, put) in writes.iter().zip(puts) {
            match put {
                Ok(true) => stored.push(w),
                Ok(false) => {}
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if let Some(e) = failed {
            self.take_out(&stored).await;
            return Err(e);
        }
        let update = Update::builder()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .update_expression("SET message_count = :last")
            .condition_expression("lease_turn = :t AND message_count <= :last AND #st <> :deleting")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":deleting", s(DELETING))
            .expression_attribute_values(":t", s(turn.as_str()))
            .expression_attribute_values(":last", n(last))
            .build()
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        match self.update_alone(update, "append_messages").await {
            Sent::Applied => Ok(()),
            Sent::Refused => {
                let why = self.lost_or_gone(user, session).await;
                self.take_out(&stored).await;
                Err(why)
            }
            Sent::Failed(f) => {
                if f.refused_whole {
                    self.take_out(&stored).await;
                }
                Err(f.error)
            }
        }
    }

    /// Messages stored by a write that was then refused: their items and
    /// bodies removed, so that the refused write leaves nothing.
    async fn take_out(&self, writes: &[&MessageWrite]) {
        let items: Vec<_> = writes.iter().map(|w| w.item.clone()).collect();
        self.forget(&items).await;
        for w in writes {
            self.forget(&w.bodies).await;
        }
    }

    /// The answer alone, before `done`; the session's write is left for
    /// after it (`settle_alone`).
    pub(super) async fn store_answer_alone(
        &self,
        user: &UserId,
        session: &SessionId,
        end: &TurnEnd,
        answer: &StoredMessage,
    ) -> Result<Option<Bookkeeping>, StoreError> {
        let w = MessageWrite::of(user, answer)?;
        self.put_message(user, session, &w, "finish_turn").await?;
        Ok(Some(Bookkeeping { turn_id: end.turn_id.clone(), usage: end.usage, added: 1 }))
    }

    /// A turn's bookkeeping after its `done`. Refused: a later turn took the
    /// lease over and did it, or a delete began; either way nothing is left.
    pub(super) async fn settle_alone(
        &self,
        user: &UserId,
        session: &SessionId,
        left: &Bookkeeping,
    ) -> Result<(), StoreError> {
        let update = self.bookkeeping_update(user, session, left, None)?;
        if !self.update_alone(update, "settle_turn").await.applied()? {
            tracing::info!(turn = %left.turn_id, "turn's bookkeeping done by the next turn, or the session is going");
        }
        Ok(())
    }

    /// `ended`'s bookkeeping and `lease` granted, in one write conditional on
    /// `ended` still holding the lease (its own `settle_alone` then finds
    /// it gone: applied once).
    pub(super) async fn take_over_alone(
        &self,
        user: &UserId,
        session: &SessionId,
        lease: &Lease,
        ended: &Bookkeeping,
    ) -> Result<Session, StoreError> {
        let now = crate::now_ms();
        let res = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(Self::session_key(user, session)))
            .update_expression(
                "SET lease_turn = :t, lease_until = :u, last_activity_at = :now, gsi2sk = :g, \
                 message_count = message_count + :added, prompt_tokens = prompt_tokens + :pt, \
                 completion_tokens = completion_tokens + :ct REMOVE stop_turn",
            )
            .condition_expression("#st = :active AND lease_turn = :old")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":t", s(lease.turn_id.as_str()))
            .expression_attribute_values(":old", s(ended.turn_id.as_str()))
            .expression_attribute_values(":u", n(lease.until_ms))
            .expression_attribute_values(":now", n(now))
            .expression_attribute_values(":g", s(keys::sessions_gsi_sk(now, session)))
            .expression_attribute_values(":active", s("active"))
            .expression_attribute_values(":added", n(ended.added))
            .expression_attribute_values(":pt", n(ended.usage.prompt_tokens))
            .expression_attribute_values(":ct", n(ended.usage.completion_tokens))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "take_over_lease"))
            .await;
        match res {
            Ok(out) => session_from_item(user, &out.attributes.unwrap_or_default()),
            Err(e) if is_conditional(&e) => Err(crate::store::StoreError::Busy),
            Err(e) => Err(backend(e)),
        }
    }

    /// Why the session did not count a message just stored (a delete began,
    /// or the lease is not ours); the message is taken out again, so that the
    /// refused write leaves nothing, as a transaction would.
    async fn not_counted(&self, user: &UserId, session: &SessionId, w: &MessageWrite) -> StoreError {
        let why = self.lost_or_gone(user, session).await;
        self.forget(std::slice::from_ref(&w.item)).await;
        self.forget(&w.bodies).await;
        why
    }

    /// One message alone: its body's chunks, then its item, which must not
    /// overwrite another message. Our own earlier attempt, whose answer was
    /// lost, counts as done.
    async fn put_message(
        &self,
        user: &UserId,
        session: &SessionId,
        w: &MessageWrite,
        what: &'static str,
    ) -> Result<(), StoreError> {
        self.put_message_new(user, session, w, what).await.map(|_| ())
    }

    /// [`Self::put_message`]; `Ok(true)`: this call stored it, `Ok(false)`:
    /// it was stored already, by an earlier write (not ours to take out).
    async fn put_message_new(
        &self,
        user: &UserId,
        session: &SessionId,
        w: &MessageWrite,
        what: &'static str,
    ) -> Result<bool, StoreError> {
        if let Err(e) = self.put_items(&w.bodies).await {
            self.forget(&w.bodies).await;
            return Err(e);
        }
        let res = self
            .client()
            .put_item()
            .table_name(self.table())
            .set_item(Some(w.item.clone()))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .instrument(tracing::debug_span!("ddb.put_item", what))
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) if is_conditional(&e) => {
                if self.stored_as(w).await {
                    return Ok(false);
                }
                self.forget(&w.bodies).await;
                Err(self.lost_or_gone(user, session).await)
            }
            // Unknown outcome: the chunks may belong to a stored message.
            Err(e) => Err(backend(e)),
        }
    }

    /// The session write failed (the SDK gave up): refused whole (DynamoDB
    /// answered 4xx, throttles included), the message is taken out, as a
    /// transaction would have stored nothing; of unknown outcome (a 5xx, a
    /// timeout, a lost connection: the count may have moved) it stays, and
    /// the next turn counts from the log.
    async fn after_failure(&self, w: &MessageWrite, failed: Failed) -> StoreError {
        if failed.refused_whole {
            self.forget(std::slice::from_ref(&w.item)).await;
            self.forget(&w.bodies).await;
        }
        failed.error
    }

    /// A transaction's `Update` sent alone.
    pub(super) async fn update_alone(&self, u: Update, what: &'static str) -> Sent {
        let res = self
            .client()
            .update_item()
            .table_name(u.table_name())
            .set_key(Some(u.key().clone()))
            .update_expression(u.update_expression())
            .set_condition_expression(u.condition_expression().map(str::to_string))
            .set_expression_attribute_names(u.expression_attribute_names().cloned())
            .set_expression_attribute_values(u.expression_attribute_values().cloned())
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what))
            .await;
        match res {
            Ok(_) => Sent::Applied,
            Err(e) if is_conditional(&e) => Sent::Refused,
            Err(e) => {
                let refused_whole = matches!(&e, SdkError::ServiceError(c) if c.raw().status().is_client_error());
                Sent::Failed(Failed { refused_whole, error: backend(e) })
            }
        }
    }
}

/// Whether a turn's end may store its answer before `done` and the rest
/// after: one assistant message carrying the usage (what a later turn reads
/// as the turn's end: [`Bookkeeping::left_by`]), no run claim (its turn
/// record is atomic with the answer) and no scope moved (the session's
/// write must carry it).
pub(super) fn answer_alone(end: &TurnEnd, answer: &StoredMessage) -> bool {
    !end.claims_run() && end.scope.is_none() && answer.role == Role::Assistant && answer.usage.is_some()
}

/// How a write sent alone ended.
pub(super) enum Sent {
    Applied,
    /// Its condition failed.
    Refused,
    Failed(Failed),
}

pub(super) struct Failed {
    /// DynamoDB refused it whole (4xx): it did not apply.
    refused_whole: bool,
    error: StoreError,
}

impl Sent {
    /// `Ok(true)` applied, `Ok(false)` its condition failed.
    pub(super) fn applied(self) -> Result<bool, StoreError> {
        match self {
            Sent::Applied => Ok(true),
            Sent::Refused => Ok(false),
            Sent::Failed(f) => Err(f.error),
        }
    }
}

/// The id of the message an item holds, inline (`data`) or chunked (`message_id`).
pub(super) fn message_id_of(item: &HashMap<String, aws_sdk_dynamodb::types::AttributeValue>) -> Option<String> {
    if let Some(id) = get_s(item, "message_id") {
        return Some(id.to_string());
    }
    let data: serde_json::Value = serde_json::from_str(get_s(item, "data")?).ok()?;
    data.get("id").and_then(|v| v.as_str()).map(str::to_string)
}
