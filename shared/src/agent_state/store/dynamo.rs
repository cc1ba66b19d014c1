//! [`AgentStateStore`] over DynamoDB (the item is described above), and the
//! transaction part that settles a summary's pending deltas: it belongs to
//! the write that applies them, so it lives here and the summary store,
//! which depends on this module, uses it too.

use super::{AgentStateStore, SaveError};
use crate::agent_state::AgentState;
use crate::ids::{SessionId, UserId};
use crate::store::attr::{backend, cancellation_codes, n, s, session_alive};
use crate::store::keys::{self, AGENT_STATE_SK, SUMMARY_SK};
use crate::store::StoreError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use tracing::Instrument;

/// The attribute of the current summary item marking its agent-state deltas
/// as still to apply (see [`crate::summary::store`]).
pub(crate) const DELTAS_PENDING: &str = "deltas_pending";

/// The transaction part that settles version `version`'s pending deltas:
/// cancelled (`ConditionalCheckFailed`) unless that version is current and
/// its deltas are pending.
pub(crate) fn settle_update(table: &str, pk: &str, version: u64) -> Result<Update, StoreError> {
    Update::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(SUMMARY_SK))
        .update_expression("REMOVE #pending")
        .condition_expression("version = :v AND attribute_exists(#pending)")
        .expression_attribute_names("#pending", DELTAS_PENDING)
        .expression_attribute_values(":v", n(version))
        .build()
        .map_err(|e| StoreError::Backend(e.to_string()))
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
