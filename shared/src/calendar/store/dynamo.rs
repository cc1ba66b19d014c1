//! [`EventStore`] over DynamoDB (the items are described in the module above).

use super::keys::{calendar_pk, event_sk, EVENT_PREFIX, SETTINGS_SK};
use super::{EventStore, Settings, WriteError};
use crate::calendar::model::CalendarEvent;
use crate::ids::{EventId, UserId};
use crate::store::attr::{backend, get_n, get_s, is_conditional, n, s, Item};
use crate::store::StoreError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;

#[derive(Clone)]
pub struct DynamoEventStore {
    client: Client,
    table: String,
}

impl DynamoEventStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    /// The version a failed condition found: from the item the failure
    /// returned, else read. DynamoDB returns it (`ALL_OLD`); DynamoDB Local
    /// does not, and a conflict must not read as "gone" there.
    async fn found(&self, user: &UserId, id: &EventId, old: Option<&Item>) -> Result<Option<u64>, StoreError> {
        match current_version(old) {
            Some(v) => Ok(Some(v)),
            None => Ok(self.get(user, id).await?.map(|e| e.version)),
        }
    }
}

fn from_item(item: &Item) -> Result<CalendarEvent, StoreError> {
    let data = get_s(item, "data").ok_or_else(|| StoreError::Corrupt("event without data".into()))?;
    serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("event: {e}")))
}

fn to_item(user: &UserId, event: &CalendarEvent) -> Result<Item, StoreError> {
    let data = serde_json::to_string(event).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(HashMap::from([
        ("pk".to_string(), s(calendar_pk(user))),
        ("sk".to_string(), s(event_sk(&event.id))),
        ("kind".to_string(), s("event")),
        ("version".to_string(), n(event.version)),
        ("uid".to_string(), s(&event.uid)),
        ("data".to_string(), s(data)),
    ]))
}

/// The version a failed condition found (from the returned old item).
fn current_version(old: Option<&Item>) -> Option<u64> {
    old.and_then(|i| get_n(i, "version")).map(|v| v as u64)
}

#[async_trait::async_trait]
impl EventStore for DynamoEventStore {
    async fn get(&self, user: &UserId, id: &EventId) -> Result<Option<CalendarEvent>, StoreError> {
        let out = (self.client.get_item().table_name(&self.table))
            .key("pk", s(calendar_pk(user)))
            .key("sk", s(event_sk(id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        out.item.as_ref().map(from_item).transpose()
    }

    async fn list(&self, user: &UserId) -> Result<Vec<CalendarEvent>, StoreError> {
        let mut events = vec![];
        let mut start = None;
        loop {
            let out = (self.client.query().table_name(&self.table))
                .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
                .expression_attribute_values(":pk", s(calendar_pk(user)))
                .expression_attribute_values(":p", s(EVENT_PREFIX))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(backend)?;
            for item in out.items() {
                events.push(from_item(item)?);
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(events);
            }
        }
    }

    async fn put(&self, user: &UserId, event: &CalendarEvent, expected: Option<u64>) -> Result<(), WriteError> {
        let req = (self.client.put_item().table_name(&self.table))
            .set_item(Some(to_item(user, event)?))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let req = match expected {
            None => req.condition_expression("attribute_not_exists(pk)"),
            Some(v) => req.condition_expression("version = :v").expression_attribute_values(":v", n(v)),
        };
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e) if is_conditional(&e) => {
                let old = match e.as_service_error() {
                    Some(PutItemError::ConditionalCheckFailedException(c)) => c.item(),
                    _ => None,
                };
                Err(WriteError::Conflict { current: self.found(user, &event.id, old).await? })
            }
            Err(e) => Err(backend(e).into()),
        }
    }

    async fn delete(&self, user: &UserId, id: &EventId, expected: u64) -> Result<(), WriteError> {
        let req = (self.client.delete_item().table_name(&self.table))
            .key("pk", s(calendar_pk(user)))
            .key("sk", s(event_sk(id)))
            .condition_expression("version = :v")
            .expression_attribute_values(":v", n(expected))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e) if is_conditional(&e) => {
                let old = match e.as_service_error() {
                    Some(DeleteItemError::ConditionalCheckFailedException(c)) => c.item(),
                    _ => None,
                };
                Err(WriteError::Conflict { current: self.found(user, id, old).await? })
            }
            Err(e) => Err(backend(e).into()),
        }
    }

    async fn settings(&self, user: &UserId) -> Result<Settings, StoreError> {
        let out = (self.client.get_item().table_name(&self.table))
            .key("pk", s(calendar_pk(user)))
            .key("sk", s(SETTINGS_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        let Some(data) = out.item.as_ref().and_then(|i| get_s(i, "data")) else { return Ok(Settings::default()) };
        serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("calendar settings: {e}")))
    }

    async fn save_settings(&self, user: &UserId, settings: &Settings) -> Result<(), StoreError> {
        let data = serde_json::to_string(settings).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        (self.client.put_item().table_name(&self.table))
            .item("pk", s(calendar_pk(user)))
            .item("sk", s(SETTINGS_SK))
            .item("kind", s("calendar_settings"))
            .item("data", s(data))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }
}
