//! The session's agent state in DynamoDB: one item, `sk=AGENT_STATE`, under
//! the session's partition, with its version next to it.
//!
//! Contract: [`AgentStateStore::save`] is a compare-and-set, a conditional
//! PutItem: it writes only if the stored version is `expected_version` (or,
//! for 0, if there is no item yet), and the stored version becomes
//! `expected_version + 1`. Two writers that loaded the same version cannot
//! both win: the loser gets [`SaveError::Conflict`] and nothing is written, so
//! it reloads, reapplies its (deterministic) update and saves again. Never
//! last-writer-wins. [`AgentStateStore::clear`] deletes the item (session
//! close or an explicit request); deleting a session removes it with the rest
//! of the partition, and a save to a session that is gone or being deleted
//! fails with `NotFound` and leaves nothing (so a turn still running when its
//! session is deleted cannot bring its state back).
//! [`AgentStateStore::save_settling`] is the same compare-and-set, made in one
//! transaction with settling a summary's pending deltas (see
//! [`crate::store::summary`]): what applies them exactly once.

use super::attr::{backend, n, s, session_alive};
use super::keys::{self, AGENT_STATE_SK};
use super::summary::{cancellation_codes, settle_update};
use super::StoreError;
use crate::agent_state::{AgentState, DeltaError};
use crate::ids::{SessionId, UserId};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use tracing::Instrument;

/// Why a save wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    /// The stored version is not the expected one: someone saved first.
    #[error("the agent state was changed concurrently")]
    Conflict,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why [`update`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    /// The change itself was refused (nothing written).
    #[error(transparent)]
    Delta(#[from] DeltaError),
    /// Still conflicting after every attempt.
    #[error("the agent state kept changing concurrently")]
    Conflict,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Load, change, compare-and-set save; on a conflict, reload and apply
/// `change` again (it must be deterministic over the state it is given), up
/// to `attempts` times. A missing state starts as `AgentState::new(session)`.
/// Returns the saved state and its version.
pub async fn update<S, F>(
    store: &S,
    user: &UserId,
    session: &SessionId,
    attempts: usize,
    mut change: F,
) -> Result<(AgentState, u64), UpdateError>
where
    S: AgentStateStore + ?Sized,
    F: FnMut(&mut AgentState) -> Result<(), DeltaError>,
{
    for _ in 0..attempts.max(1) {
        let (mut state, version) =
            store.load(user, session).await?.unwrap_or_else(|| (AgentState::new(session.to_string()), 0));
        change(&mut state)?;
        match store.save(user, session, &state, version).await {
            Ok(v) => return Ok((state, v)),
            Err(SaveError::Conflict) => continue,
            Err(SaveError::Store(e)) => return Err(e.into()),
        }
    }
    Err(UpdateError::Conflict)
}

#[async_trait::async_trait]
pub trait AgentStateStore: Send + Sync {
    /// The state and its version (consistent read); `None` when never saved
    /// or cleared (save it with `expected_version` 0).
    async fn load(&self, user: &UserId, session: &SessionId) -> Result<Option<(AgentState, u64)>, StoreError>;

    /// Compare-and-set: writes `state` if the stored version is
    /// `expected_version` (0: no item). Returns the new version. `NotFound`
    /// (nothing written) when the session is gone or being deleted.
    async fn save(
        &self,
        user: &UserId,
        session: &SessionId,
        state: &AgentState,
        expected_version: u64,
    ) -> Result<u64, SaveError>;

    /// Deletes the state (a no-op when there is none).
    async fn clear(&self, user: &UserId, session: &SessionId) -> Result<(), StoreError>;

    /// [`save`](Self::save) and, in the same transaction, settle the pending
    /// agent-state deltas of summary version `summary_version` (`state` is
    /// the state with them applied). `Ok(None)`: they were not pending any
    /// more (settled by someone else), nothing written. `Conflict`: the
    /// state changed; reload, reapply, retry.
    async fn save_settling(
        &self,
        user: &UserId,
        session: &SessionId,
        state: &AgentState,
        expected_version: u64,
        summary_version: u64,
    ) -> Result<Option<u64>, SaveError>;
}

#[derive(Clone)]
pub struct DynamoAgentStateStore {
    client: Client,
    table: String,
}

impl DynamoAgentStateStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }
}

/// The compare-and-set write of `state` over `expected_version` (0: no item
/// yet): the one encoding of the item, for [`AgentStateStore::save`] and
/// [`AgentStateStore::save_settling`].
fn put(
    table: &str,
    user: &UserId,
    session: &SessionId,
    state: &AgentState,
    expected_version: u64,
) -> Result<Put, StoreError> {
    let data = serde_json::to_string(state).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let put = Put::builder()
        .table_name(table)
        .item("pk", s(keys::session_pk(user, session)))
        .item("sk", s(AGENT_STATE_SK))
        .item("kind", s("agent_state"))
        .item("version", n(expected_version + 1))
        .item("updated_at", n(crate::now_ms()))
        .item("data", s(data));
    let put = if expected_version == 0 {
        put.condition_expression("attribute_not_exists(pk)")
    } else {
        put.condition_expression("version = :expected").expression_attribute_values(":expected", n(expected_version))
    };
    put.build().map_err(|e| StoreError::Backend(e.to_string()))
}

pub(crate) fn from_item(item: &HashMap<String, AttributeValue>) -> Result<(AgentState, u64), StoreError> {
    let data =
        item.get("data").and_then(|v| v.as_s().ok()).ok_or_else(|| StoreError::Corrupt("agent state data".into()))?;
    let version = item
        .get("version")
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| StoreError::Corrupt("agent state version".into()))?;
    let state = serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("agent state: {e}")))?;
    Ok((state, version))
}

impl DynamoAgentStateStore {
    /// Removes the state we just saved to a session being deleted, best effort
    /// (only our version: a later save's writer removes its own).
    async fn forget(&self, pk: &str, version: u64) {
        let res = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(AGENT_STATE_SK))
            .condition_expression("version = :v")
            .expression_attribute_values(":v", n(version))
            .send()
            .instrument(tracing::debug_span!("ddb.delete_item", what = "agent_state"))
            .await;
        if let Err(e) = res {
            if !e.as_service_error().is_some_and(|se| se.is_conditional_check_failed_exception()) {
                tracing::warn!(error = %backend(e), "agent state of a deleted session not removed");
            }
        }
    }
}

#[async_trait::async_trait]
impl AgentStateStore for DynamoAgentStateStore {
    async fn load(&self, user: &UserId, session: &SessionId) -> Result<Option<(AgentState, u64)>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(keys::session_pk(user, session)))
            .key("sk", s(AGENT_STATE_SK))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "agent_state"))
            .await
            .map_err(backend)?;
        out.item.as_ref().map(from_item).transpose()
    }

    async fn save(
        &self,
        user: &UserId,
        session: &SessionId,
        state: &AgentState,
        expected_version: u64,
    ) -> Result<u64, SaveError> {
        let version = expected_version + 1;
        let pk = keys::session_pk(user, session);
        let p = put(&self.table, user, session, state, expected_version)?;
        let req = self
            .client
            .put_item()
            .table_name(p.table_name)
            .set_item(Some(p.item))
            .set_condition_expression(p.condition_expression)
            .set_expression_attribute_values(p.expression_attribute_values);
        match req.send().instrument(tracing::debug_span!("ddb.put_item", what = "agent_state")).await {
            Ok(_) => {}
            Err(e) if e.as_service_error().is_some_and(|se| se.is_conditional_check_failed_exception()) => {
                return Err(SaveError::Conflict)
            }
            Err(e) => return Err(SaveError::Store(backend(e))),
        }
        // Checked after writing, not in a transaction with a check on the
        // session item: that would cost twice the write capacity, and would
        // conflict with `finish_turn`, which writes the session item at the
        // same moment (see `attr::session_alive` for why after is enough).
        if session_alive(&self.client, &self.table, &pk).await? {
            return Ok(version);
        }
        self.forget(&pk, version).await;
        Err(SaveError::Store(StoreError::NotFound))
    }

    async fn clear(&self, user: &UserId, session: &SessionId) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(keys::session_pk(user, session)))
            .key("sk", s(AGENT_STATE_SK))
            .send()
            .instrument(tracing::debug_span!("ddb.delete_item", what = "agent_state"))
            .await
            .map_err(backend)?;
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
        let state_put = put(&self.table, user, session, state, expected_version)?;
        let settle = settle_update(&self.table, &keys::session_pk(user, session), summary_version)?;
        let res = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(state_put).build())
            .transact_items(TransactWriteItem::builder().update(settle).build())
            .send()
            .instrument(tracing::debug_span!("ddb.transact_write_items", what = "agent_state_settling"))
            .await;
        match res {
            Ok(_) => {
                // As in `save`: a session being deleted gets no state back.
                let pk = keys::session_pk(user, session);
                if session_alive(&self.client, &self.table, &pk).await? {
                    return Ok(Some(expected_version + 1));
                }
                self.forget(&pk, expected_version + 1).await;
                Err(SaveError::Store(StoreError::NotFound))
            }
            Err(e) => match cancellation_codes(&e) {
                // Settled already: whatever the state's version, nothing to apply.
                Some(c) if c.get(1).map(String::as_str) == Some("ConditionalCheckFailed") => Ok(None),
                Some(c) if c.iter().any(|c| c == "ConditionalCheckFailed" || c == "TransactionConflict") => {
                    Err(SaveError::Conflict)
                }
                _ => Err(SaveError::Store(backend(e))),
            },
        }
    }
}
