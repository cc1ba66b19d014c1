//! [`PlanStore`] over DynamoDB: the item layout is in the module docs above.

use super::PlanStore;
use crate::ids::{SessionId, UserId};
use crate::plan::{PlanRecord, PlanStatus};
use crate::store::attr::{
    backend, cancellation_codes, get_n, get_s, is_conditional, n, s, session_alive, Item, DELETING,
};
use crate::store::keys::{self, SESSION_SK};
use crate::store::StoreError;
use aws_sdk_dynamodb::types::{ConditionCheck, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use tracing::Instrument;

pub const PLAN_PREFIX: &str = "PLAN#";

pub fn plan_sk(plan_id: &str) -> String {
    format!("{PLAN_PREFIX}{plan_id}")
}

/// Items of one `TransactWriteItems` the store uses at most: DynamoDB Local
/// (the test and local stack) refuses more than 10 (AWS allows 100).
const MAX_TRANSACTION_ITEMS: usize = 10;

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

/// The item of `plan` at `version`.
fn plan_item(pk: &str, plan: &PlanRecord, version: u64) -> Result<Item, StoreError> {
    let data = serde_json::to_string(plan).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(Item::from([
        ("pk".to_string(), s(pk)),
        ("sk".to_string(), s(plan_sk(&plan.id))),
        ("kind".to_string(), s("plan")),
        ("version".to_string(), n(version)),
        ("updated_at".to_string(), n(crate::now_ms())),
        ("data".to_string(), s(data)),
    ]))
}

fn decode(item: &Item) -> Result<(PlanRecord, u64), StoreError> {
    let data = get_s(item, "data").ok_or_else(|| StoreError::Corrupt("plan data".into()))?;
    let version = get_n(item, "version").ok_or_else(|| StoreError::Corrupt("plan version".into()))?;
    let plan = serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("plan: {e}")))?;
    Ok((plan, version as u64))
}

/// `old` as the plan `by` supersedes, with the version it was read at.
fn superseded((old, version): &(PlanRecord, u64), by: &PlanRecord) -> (PlanRecord, u64) {
    let mut old = old.clone();
    old.status = PlanStatus::Superseded;
    old.superseded_by = Some(by.id.clone());
    old.updated_at = crate::now_ms();
    (old, *version)
}

fn built(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl DynamoPlanStore {
    /// The items of a create's transaction, in the order its cancellation
    /// codes are read: the new plan, each replaced one (compare-and-set on
    /// its version), the session check last.
    fn create_items(
        &self,
        pk: &str,
        plan: &PlanRecord,
        batch: &[(PlanRecord, u64)],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let new = Put::builder()
            .table_name(&self.table)
            .set_item(Some(plan_item(pk, plan, 1)?))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(built)?;
        let mut items = vec![TransactWriteItem::builder().put(new).build()];
        for r in batch {
            let (old, version) = superseded(r, plan);
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(plan_item(pk, &old, version + 1)?))
                .condition_expression("version = :v")
                .expression_attribute_values(":v", n(version))
                .build()
                .map_err(built)?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        let alive = ConditionCheck::builder()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(SESSION_SK))
            .condition_expression("attribute_exists(pk) AND #st <> :deleting")
            .expression_attribute_names("#st", "status")
            .expression_attribute_values(":deleting", s(DELETING))
            .build()
            .map_err(built)?;
        items.push(TransactWriteItem::builder().condition_check(alive).build());
        Ok(items)
    }
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
        let put =
            self.client.put_item().table_name(&self.table).set_item(Some(plan_item(&pk, plan, expected_version + 1)?));
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

    async fn create(
        &self,
        user: &UserId,
        session: &SessionId,
        plan: &PlanRecord,
        replaced: &[(PlanRecord, u64)],
    ) -> Result<u64, StoreError> {
        let pk = keys::session_pk(user, session);
        // The new plan and the session check take two items; the replaced
        // plans that do not fit beside them (only in sessions from before
        // plans were superseded) are marked first, each compare-and-set: a
        // failure below leaves them superseded by a plan that was not
        // stored, which only means they cannot run any more.
        let room = MAX_TRANSACTION_ITEMS - 2;
        let (extra, batch) = replaced.split_at(replaced.len().saturating_sub(room));
        for r in extra {
            let (old, version) = superseded(r, plan);
            self.save(user, session, &old, version).await?;
        }
        let items = self.create_items(&pk, plan, batch)?;
        let res = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .instrument(tracing::debug_span!(
                "ddb.transact_write_items",
                what = "create_plan",
                replaced = replaced.len()
            ))
            .await;
        match res {
            Ok(_) => Ok(1),
            Err(e) => match cancellation_codes(&e) {
                Some(c) if c.last().map(String::as_str) == Some("ConditionalCheckFailed") => Err(StoreError::NotFound),
                // A replaced plan changed since it was read (or a concurrent
                // transaction touched it): another writer; nothing was written.
                Some(c) if c.iter().any(|c| c == "ConditionalCheckFailed" || c == "TransactionConflict") => {
                    Err(StoreError::LeaseLost)
                }
                _ => Err(backend(e)),
            },
        }
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

    async fn list(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
    ) -> Result<Vec<(PlanRecord, u64)>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
            .expression_attribute_values(":pk", s(keys::session_pk(user, session)))
            .expression_attribute_values(":p", s(PLAN_PREFIX))
            .scan_index_forward(false)
            .limit(limit.clamp(1, 100) as i32)
            .consistent_read(true)
            .send()
            .instrument(tracing::debug_span!("ddb.query", what = "plans"))
            .await
            .map_err(backend)?;
        out.items().iter().map(decode).collect()
    }
}
