//! Rolling summaries in DynamoDB: the current one under `sk=SUMMARY`, and
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

use super::attr::{backend, n, s};
use super::keys::{self, SESSION_SK, SUMMARY_SK};
use super::StoreError;
use crate::ids::{SessionId, UserId};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tracing::Instrument;

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
}

#[derive(Clone)]
pub struct DynamoSummaryStore {
    client: Client,
    table: String,
}

type Item = HashMap<String, AttributeValue>;

fn from_item(item: &Item) -> Result<SessionSummary, StoreError> {
    let data =
        item.get("data").and_then(|v| v.as_s().ok()).ok_or_else(|| StoreError::Corrupt("summary data".into()))?;
    serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("summary: {e}")))
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
        let current = Put::builder()
            .table_name(&self.table)
            .set_item(Some(Self::item(&pk, SUMMARY_SK.to_string(), summary)?))
            .condition_expression(if summary.version <= 1 { "attribute_not_exists(pk)" } else { "version = :prev" });
        let current = if summary.version <= 1 {
            current
        } else {
            current.expression_attribute_values(":prev", n(summary.version - 1))
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
                let codes = match e.as_service_error() {
                    Some(TransactWriteItemsError::TransactionCanceledException(t)) => Some(
                        t.cancellation_reasons()
                            .iter()
                            .map(|r| r.code().unwrap_or("None").to_string())
                            .collect::<Vec<_>>(),
                    ),
                    _ => None,
                };
                match codes {
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
                .expression_attribute_values(":v", s(format!("{SUMMARY_SK}#")))
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
