//! [`SummaryStore`] over DynamoDB (the items are described above).

use super::{Backlog, CommitOutcome, Rejections, SessionSummary, SummaryStore};
use crate::agent_state::store::{settle_update, DELTAS_PENDING};
use crate::ids::{SessionId, UserId};
use crate::store::attr::{backend, cancellation_codes, get_n, get_s, is_conditional, n, s, session_alive, DELETING};
use crate::store::dynamo::DynamoStore;
use crate::store::keys::{self, SESSION_SK, SUMMARY_SK};
use crate::store::StoreError;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, ReturnValue, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use tracing::Instrument;

/// How many of a user's most recently active sessions
/// [`SummaryStore::running_turn`] looks at: a turn bumps its session to the
/// front of the index as it starts, so a running one is among the first.
const RECENT_SESSIONS: i32 = 10;

/// The key of the rejected-answers count. Outside every range the turn and
/// the summarizer read (`MSG#`…`MSG~~`, `SUMMARY#`): only a delete sweeps it.
pub const SUMMARY_REJECTED_SK: &str = "SUMMARY~REJECTED";

#[derive(Clone)]
pub struct DynamoSummaryStore {
    client: Client,
    table: String,
}

type Item = HashMap<String, AttributeValue>;

pub(crate) fn from_item(item: &Item) -> Result<SessionSummary, StoreError> {
    let data =
        item.get("data").and_then(|v| v.as_s().ok()).ok_or_else(|| StoreError::Corrupt("summary data".into()))?;
    let mut summary: SessionSummary =
        serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("summary: {e}")))?;
    summary.deltas_pending = item.get(DELTAS_PENDING).and_then(|v| v.as_bool().ok()).copied().unwrap_or(false);
    Ok(summary)
}

impl DynamoSummaryStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    fn item(pk: &str, sk: String, summary: &SessionSummary) -> Result<Item, StoreError> {
        let data = serde_json::to_string(summary).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(HashMap::from([
            ("pk".to_string(), s(pk)),
            ("sk".to_string(), s(sk)),
            ("kind".to_string(), s("summary")),
            ("version".to_string(), n(summary.version)),
            ("through_seq".to_string(), n(summary.through_seq)),
            ("data".to_string(), s(data)),
        ]))
    }
}

#[async_trait::async_trait]
impl SummaryStore for DynamoSummaryStore {
    async fn current(&self, user: &UserId, session: &SessionId) -> Result<Option<SessionSummary>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(keys::session_pk(user, session)))
            .key("sk", s(SUMMARY_SK))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "summary"))
            .await
            .map_err(backend)?;
        out.item.as_ref().map(from_item).transpose()
    }

    async fn commit(
        &self,
        user: &UserId,
        session: &SessionId,
        summary: &SessionSummary,
    ) -> Result<CommitOutcome, StoreError> {
        let pk = keys::session_pk(user, session);
        let mut item = Self::item(&pk, SUMMARY_SK.to_string(), summary)?;
        if summary.deltas_pending {
            item.insert(DELTAS_PENDING.to_string(), AttributeValue::Bool(true));
        }
        let current = Put::builder().table_name(&self.table).set_item(Some(item));
        let current = if summary.version <= 1 {
            current.condition_expression("attribute_not_exists(pk)")
        } else {
            // The previous version must be settled: its deltas are never lost under a newer one.
            current
                .condition_expression("version = :prev AND attribute_not_exists(#pending)")
                .expression_attribute_names("#pending", DELTAS_PENDING)
                .expression_attribute_values(":prev", n(summary.version - 1))
        };
        let audit = Put::builder()
            .table_name(&self.table)
            .set_item(Some(Self::item(&pk, keys::summary_version_sk(summary.version), summary)?))
            .condition_expression("attribute_not_exists(pk)");
        let alive = ConditionCheck::builder()
            .table_name(&self.table)
            .key("pk", s(pk.clone()))
            .key("sk", s(SESSION_SK))
            .condition_expression("attribute_exists(pk) AND #st <> :deleting")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":deleting", s("deleting"));
        let built = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Backend(e.to_string());
        let res = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(current.build().map_err(built)?).build())
            .transact_items(TransactWriteItem::builder().put(audit.build().map_err(built)?).build())
            .transact_items(TransactWriteItem::builder().condition_check(alive.build().map_err(built)?).build())
            .send()
            .instrument(tracing::debug_span!("ddb.transact_write_items", what = "commit_summary"))
            .await;
        match res {
            Ok(_) => Ok(CommitOutcome::Committed),
            Err(e) => {
                match cancellation_codes(&e) {
                    Some(c) if c.get(2).map(String::as_str) == Some("ConditionalCheckFailed") => {
                        Err(StoreError::NotFound)
                    }
                    Some(c) if c.iter().any(|c| c == "ConditionalCheckFailed") => Ok(CommitOutcome::Superseded),
                    // A concurrent transaction on the same items: the other run wins.
                    Some(c) if c.iter().any(|c| c == "TransactionConflict") => Ok(CommitOutcome::Superseded),
                    _ => Err(backend(e)),
                }
            }
        }
    }

    async fn settle(&self, user: &UserId, session: &SessionId, version: u64) -> Result<bool, StoreError> {
        let update = settle_update(&self.table, &keys::session_pk(user, session), version)?;
        let res = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(update).build())
            .send()
            .instrument(tracing::debug_span!("ddb.transact_write_items", what = "settle_summary_deltas"))
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) => match cancellation_codes(&e) {
                Some(c) if c.iter().any(|c| c == "ConditionalCheckFailed") => Ok(false),
                _ => Err(backend(e)),
            },
        }
    }

    async fn running_turn(
        &self,
        user: &UserId,
        session: &SessionId,
        all_sessions: bool,
    ) -> Result<Option<SessionId>, StoreError> {
        let now = crate::now_ms();
        let live = |item: &Item| {
            get_n(item, "lease_until").is_some_and(|u| u > now) && get_s(item, "status") != Some(DELETING)
        };
        let own = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(keys::session_pk(user, session)))
            .key("sk", s(SESSION_SK))
            .projection_expression("lease_until, #st")
            .expression_attribute_names("#st", "status")
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "session_lease"))
            .await
            .map_err(backend)?;
        if own.item.as_ref().is_some_and(live) {
            return Ok(Some(session.clone()));
        }
        if !all_sessions {
            return Ok(None);
        }
        let recent = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(keys::GSI2)
            .key_condition_expression("gsi2pk = :p")
            .expression_attribute_values(":p", s(keys::sessions_gsi_pk(user)))
            .scan_index_forward(false)
            .limit(RECENT_SESSIONS)
            .send()
            .instrument(tracing::debug_span!("ddb.query", what = "sessions_leases"))
            .await
            .map_err(backend)?;
        // The sessions' index holds keys only: their leases are read by key.
        let keys: Vec<Item> = recent.items().iter().map(DynamoStore::key_of).collect();
        if keys.is_empty() {
            return Ok(None);
        }
        let table = DynamoStore::new(self.client.clone(), self.table.clone());
        let items = table.batch_get(keys, Some("session_id, lease_until, #st")).await?;
        Ok(items.iter().filter(|i| live(i)).find_map(|i| SessionId::parse(get_s(i, "session_id")?).ok()))
    }

    async fn rejections(&self, user: &UserId, session: &SessionId) -> Result<Option<Rejections>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(keys::session_pk(user, session)))
            .key("sk", s(SUMMARY_REJECTED_SK))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "summary_rejections"))
            .await
            .map_err(backend)?;
        let Some(item) = out.item else { return Ok(None) };
        let backlog = get_s(&item, "backlog").and_then(|b| {
            let (a, l) = b.split_once("..")?;
            Some(Backlog { after_seq: a.parse().ok()?, last_seq: l.parse().ok()? })
        });
        let backlog = backlog.ok_or_else(|| StoreError::Corrupt("summary rejections backlog".into()))?;
        Ok(Some(Rejections {
            backlog,
            attempts: get_n(&item, "attempts").unwrap_or(0).clamp(0, u32::MAX as i64) as u32,
            reason: get_s(&item, "reason").unwrap_or_default().to_string(),
        }))
    }

    async fn record_rejection(
        &self,
        user: &UserId,
        session: &SessionId,
        backlog: Backlog,
        reason: &str,
    ) -> Result<u32, StoreError> {
        let pk = keys::session_pk(user, session);
        // Reasons quote the answer; the item stays small.
        let reason: String = reason.chars().take(1000).collect();
        // One more for the same backlog, atomically (a redelivery overlapping
        // a slow run counts both); another backlog starts again at 1.
        let counted = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(SUMMARY_REJECTED_SK))
            .update_expression("SET backlog = :b, reason = :r, at_ms = :t, kind = :k ADD attempts :one")
            .condition_expression("attribute_not_exists(pk) OR backlog = :b")
            .expression_attribute_values(":b", s(backlog.key()))
            .expression_attribute_values(":r", s(&reason))
            .expression_attribute_values(":t", n(crate::now_ms()))
            .expression_attribute_values(":k", s("summary_rejections"))
            .expression_attribute_values(":one", n(1))
            .return_values(ReturnValue::AllNew)
            .send()
            .instrument(tracing::debug_span!("ddb.update_item", what = "summary_rejection"))
            .await;
        let attempts = match counted {
            Ok(out) => out.attributes.as_ref().and_then(|a| get_n(a, "attempts")).unwrap_or(1),
            Err(e) if is_conditional(&e) => {
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .item("pk", s(&pk))
                    .item("sk", s(SUMMARY_REJECTED_SK))
                    .item("kind", s("summary_rejections"))
                    .item("backlog", s(backlog.key()))
                    .item("reason", s(&reason))
                    .item("at_ms", n(crate::now_ms()))
                    .item("attempts", n(1))
                    .send()
                    .instrument(tracing::debug_span!("ddb.put_item", what = "summary_rejection"))
                    .await
                    .map_err(backend)?;
                1
            }
            Err(e) => return Err(backend(e)),
        };
        if !session_alive(&self.client, &self.table, &pk).await? {
            let _ = self
                .client
                .delete_item()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .key("sk", s(SUMMARY_REJECTED_SK))
                .send()
                .await;
            return Err(StoreError::NotFound);
        }
        Ok(attempts.clamp(1, u32::MAX as i64) as u32)
    }

    async fn versions(&self, user: &UserId, session: &SessionId) -> Result<Vec<SessionSummary>, StoreError> {
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :v)")
                .expression_attribute_values(":pk", s(keys::session_pk(user, session)))
                .expression_attribute_values(":v", s(keys::SUMMARY_VERSION_PREFIX))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .instrument(tracing::debug_span!("ddb.query", what = "summary_versions"))
                .await
                .map_err(backend)?;
            for item in page.items() {
                out.push(from_item(item)?);
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }
}
