//! Plan records in DynamoDB: one item per plan under the session's partition,
//! `sk = PLAN#<plan id>` (UUID v7, so plans sort by creation), the
//! [`PlanRecord`] as JSON in `data` beside a `version`.
//!
//! Contract: [`PlanStore::save`] is a compare-and-set on `version` (0: the item
//! must not exist), so two writers of one plan cannot both win; a plan saved
//! to a session that is gone or being deleted is removed again and the save
//! fails with `NotFound` (checked after the write, as the agent state does:
//! see `attr::session_alive`). Deleting the session removes its plans with the
//! rest of the partition.

use super::attr::{backend, get_n, get_s, is_conditional, n, s, session_alive};
use super::keys;
use super::StoreError;
use crate::ids::{SessionId, UserId};
use crate::plan::PlanRecord;
use aws_sdk_dynamodb::Client;
use tracing::Instrument;

pub const PLAN_PREFIX: &str = "PLAN#";

pub fn plan_sk(plan_id: &str) -> String {
    format!("{PLAN_PREFIX}{plan_id}")
}

/// How many of the newest plans [`PlanStore::latest_open`] looks through.
const OPEN_LOOKBACK: i32 = 10;

#[async_trait::async_trait]
pub trait PlanStore: Send + Sync {
    /// Writes `plan` if its stored version is `expected_version` (0: new).
    /// Returns the new version; `LeaseLost` when someone else saved first.
    async fn save(
        &self,
        user: &UserId,
        session: &SessionId,
        plan: &PlanRecord,
        expected_version: u64,
    ) -> Result<u64, StoreError>;

    /// A plan and its version (consistent read).
    async fn load(
        &self,
        user: &UserId,
        session: &SessionId,
        plan_id: &str,
    ) -> Result<Option<(PlanRecord, u64)>, StoreError>;

    /// The newest plan of the session that can still be acted on
    /// ([`crate::plan::PlanStatus::is_open`]), with its version.
    async fn latest_open(&self, user: &UserId, session: &SessionId) -> Result<Option<(PlanRecord, u64)>, StoreError>;
}

#[derive(Clone)]
pub struct DynamoPlanStore {
    client: Client,
    table: String,
}

impl DynamoPlanStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }
}

fn decode(item: &super::attr::Item) -> Result<(PlanRecord, u64), StoreError> {
    let data = get_s(item, "data").ok_or_else(|| StoreError::Corrupt("plan data".into()))?;
    let version = get_n(item, "version").ok_or_else(|| StoreError::Corrupt("plan version".into()))?;
    let plan = serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("plan: {e}")))?;
    Ok((plan, version as u64))
}

#[async_trait::async_trait]
impl PlanStore for DynamoPlanStore {
    async fn save(
        &self,
        user: &UserId,
        session: &SessionId,
        plan: &PlanRecord,
        expected_version: u64,
    ) -> Result<u64, StoreError> {
        let pk = keys::session_pk(user, session);
        let data = serde_json::to_string(plan).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(&pk))
            .item("sk", s(plan_sk(&plan.id)))
            .item("kind", s("plan"))
            .item("version", n(expected_version + 1))
            .item("updated_at", n(crate::now_ms()))
            .item("data", s(data));
        let put = if expected_version == 0 {
            put.condition_expression("attribute_not_exists(pk)")
        } else {
            put.condition_expression("version = :v").expression_attribute_values(":v", n(expected_version))
        };
        match put.send().instrument(tracing::debug_span!("ddb.put_item", what = "plan")).await {
            Ok(_) => {}
            Err(e) if is_conditional(&e) => return Err(StoreError::LeaseLost),
            Err(e) => return Err(backend(e)),
        }
        if session_alive(&self.client, &self.table, &pk).await? {
            return Ok(expected_version + 1);
        }
        let _ = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(plan_sk(&plan.id)))
            .send()
            .await;
        Err(StoreError::NotFound)
    }

    async fn load(
        &self,
        user: &UserId,
        session: &SessionId,
        plan_id: &str,
    ) -> Result<Option<(PlanRecord, u64)>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(keys::session_pk(user, session)))
            .key("sk", s(plan_sk(plan_id)))
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.get_item", what = "plan"))
            .await
            .map_err(backend)?;
        out.item.as_ref().map(decode).transpose()
    }

    async fn latest_open(&self, user: &UserId, session: &SessionId) -> Result<Option<(PlanRecord, u64)>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
            .expression_attribute_values(":pk", s(keys::session_pk(user, session)))
            .expression_attribute_values(":p", s(PLAN_PREFIX))
            .scan_index_forward(false)
            .limit(OPEN_LOOKBACK)
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.query", what = "plans"))
            .await
            .map_err(backend)?;
        for item in out.items() {
            let (plan, version) = decode(item)?;
            if plan.status.is_open() {
                return Ok(Some((plan, version)));
            }
        }
        Ok(None)
    }
}
