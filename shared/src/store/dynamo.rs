//! The one table: [`DynamoStore`] is the DynamoDB client and the table name
//! every feature's store works on (each feature implements its own store
//! traits on it, e.g. [`crate::session::store`]), and the DynamoDB helpers
//! they share: the table's creation, transactions whose cancellation is an
//! answer ([`Commit`]), chunk writes, and batched deletes.
//!
//! Every call runs inside a `tracing` span named `ddb.<operation>`.

use super::attr::{backend, s, Item};
use super::keys::{GSI1, GSI2};
use super::StoreError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, DeleteRequest, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, Put, ScalarAttributeType, TransactWriteItem, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use futures::{StreamExt, TryStreamExt};
use std::collections::HashMap;
use tracing::Instrument;

/// The table: a cheap handle (the client is reference-counted).
#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// An item's key.
    pub(crate) fn key(pk: String, sk: String) -> Item {
        HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))])
    }

    /// The key (`pk`, `sk`) of an item or index entry.
    pub(crate) fn key_of(item: &Item) -> Item {
        item.iter().filter(|(k, _)| *k == "pk" || *k == "sk").map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Creates the table with the key scheme's attributes and index, if missing.
    /// Used by tests and the local stack; the SAM template declares the same.
    pub async fn create_table_if_missing(client: &Client, table: &str) -> Result<(), StoreError> {
        match client.describe_table().table_name(table).send().await {
            Ok(out) => {
                let indexes = out.table().map(|t| t.global_secondary_indexes()).unwrap_or_default();
                if indexes.iter().any(|i| i.index_name() == Some(GSI2)) {
                    return Ok(());
                }
                // A table made before the sessions had their own index (a
                // local stack's kept data): add it and move the sessions in.
                return add_sessions_index(client, table).await;
            }
            Err(e) if e.as_service_error().map(|e| e.is_resource_not_found_exception()).unwrap_or(false) => {}
            Err(e) => return Err(backend(e)),
        }
        let (attr, key) = (string_attr, index_key);
        let res = client
            .create_table()
            .table_name(table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr("pk"))
            .attribute_definitions(attr("sk"))
            .attribute_definitions(attr("gsi1pk"))
            .attribute_definitions(attr("gsi1sk"))
            .attribute_definitions(attr("gsi2pk"))
            .attribute_definitions(attr("gsi2sk"))
            .key_schema(key("pk", KeyType::Hash))
            .key_schema(key("sk", KeyType::Range))
            .global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(GSI1)
                    .key_schema(key("gsi1pk", KeyType::Hash))
                    .key_schema(key("gsi1sk", KeyType::Range))
                    .projection(Projection::builder().projection_type(ProjectionType::All).build())
                    .build()
                    .expect("complete"),
            )
            .global_secondary_indexes(sessions_index())
            .send()
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if e.as_service_error().map(|e| e.is_resource_in_use_exception()).unwrap_or(false) => Ok(()),
            Err(e) => Err(backend(e)),
        }
    }
}

fn index_key(n: &str, t: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder().attribute_name(n).key_type(t).build().expect("complete")
}

fn string_attr(n: &str) -> AttributeDefinition {
    AttributeDefinition::builder().attribute_name(n).attribute_type(ScalarAttributeType::S).build().expect("complete")
}

/// [`GSI2`]: the sessions by last activity, keys only.
fn sessions_index() -> GlobalSecondaryIndex {
    GlobalSecondaryIndex::builder()
        .index_name(GSI2)
        .key_schema(index_key("gsi2pk", KeyType::Hash))
        .key_schema(index_key("gsi2sk", KeyType::Range))
        .projection(Projection::builder().projection_type(ProjectionType::KeysOnly).build())
        .build()
        .expect("complete")
}

/// Adds [`GSI2`] to a table made without it and moves each session's listing
/// keys from `gsi1` to it (a scan: for local tables, never on AWS, where the
/// template declares the index).
async fn add_sessions_index(client: &Client, table: &str) -> Result<(), StoreError> {
    use aws_sdk_dynamodb::types::{CreateGlobalSecondaryIndexAction, GlobalSecondaryIndexUpdate};
    let idx = sessions_index();
    let create = CreateGlobalSecondaryIndexAction::builder()
        .index_name(GSI2)
        .set_key_schema(Some(idx.key_schema().to_vec()))
        .set_projection(idx.projection().cloned())
        .build()
        .expect("complete");
    client
        .update_table()
        .table_name(table)
        .attribute_definitions(string_attr("gsi2pk"))
        .attribute_definitions(string_attr("gsi2sk"))
        .global_secondary_index_updates(GlobalSecondaryIndexUpdate::builder().create(create).build())
        .send()
        .await
        .map_err(backend)?;
    wait_for_index(client, table).await?;
    let mut pages = client
        .scan()
        .table_name(table)
        .filter_expression("kind = :k AND attribute_exists(gsi1pk)")
        .expression_attribute_values(":k", s("session"))
        .into_paginator()
        .items()
        .send();
    while let Some(item) = pages.next().await {
        let item = item.map_err(backend)?;
        let mut tries = 0;
        loop {
            let moved = client
                .update_item()
                .table_name(table)
                .set_key(Some(DynamoStore::key_of(&item)))
                .update_expression("SET gsi2pk = gsi1pk, gsi2sk = gsi1sk REMOVE gsi1pk, gsi1sk")
                .send()
                .await;
            match moved {
                Ok(_) => break,
                // DynamoDB Local alters its SQLite table for a new index
                // after UpdateTable has answered (and says ACTIVE): until
                // then a write that fills the index's keys fails with
                // InternalFailure ("no column named indexKey_2"), past the
                // SDK's own three tries on a busy machine.
                Err(e) if tries < 40 && e.raw_response().is_some_and(|r| r.status().as_u16() >= 500) => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50 * tries.min(10))).await;
                }
                Err(e) => return Err(backend(e)),
            }
        }
    }
    Ok(())
}

/// Waits until the table's [`GSI2`] is no longer being created (on AWS it
/// backfills for a while; writes go on meanwhile, but the listing would miss
/// sessions). Bounded: a table that stays CREATING is an error.
async fn wait_for_index(client: &Client, table: &str) -> Result<(), StoreError> {
    use aws_sdk_dynamodb::types::IndexStatus;
    for attempt in 0..600u64 {
        let desc = client.describe_table().table_name(table).send().await.map_err(backend)?;
        let creating = desc
            .table()
            .map(|t| t.global_secondary_indexes())
            .unwrap_or_default()
            .iter()
            .any(|i| i.index_name() == Some(GSI2) && i.index_status() == Some(&IndexStatus::Creating));
        if !creating {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100 * (attempt + 1).min(10))).await;
    }
    Err(StoreError::Backend(format!("index {GSI2} of {table} still being created")))
}

/// Bytes of text per chunk item (tool outputs, message bodies), well under the
/// 400 KB item limit.
pub(crate) const CHUNK_BYTES: usize = 300_000;

/// Chunk items written at once (each up to [`CHUNK_BYTES`]).
const CHUNK_WRITES_IN_FLIGHT: usize = 4;

/// Items deleted per `BatchWriteItem` (DynamoDB's limit).
pub(crate) const DELETE_BATCH: usize = 25;

/// Splits text into pieces of at most `max` bytes, never inside a character.
pub(crate) fn utf8_chunks(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(max);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (head, tail) = rest.split_at(end);
        rest = tail;
        Some(head)
    })
}

/// A transaction put of `item` under `condition`.
pub(crate) fn put(table: &str, item: Item, condition: &str) -> Result<TransactWriteItem, StoreError> {
    let p = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression(condition)
        .build()
        .map_err(|e| StoreError::Backend(e.to_string()))?;
    Ok(TransactWriteItem::builder().put(p).build())
}

/// How a transaction that reached DynamoDB ended.
pub(crate) enum Commit {
    Done,
    /// Cancelled, so nothing was written: each item's reason code, in item
    /// order (empty when the server gives none; old DynamoDB Local builds).
    Cancelled(Vec<String>),
}

impl Commit {
    /// Whether item `i`'s condition failed.
    pub(crate) fn failed(&self, i: usize) -> bool {
        matches!(self, Commit::Cancelled(codes) if codes.get(i).map(String::as_str) == Some(CONDITION_FAILED))
    }

    pub(crate) fn any_failed(&self) -> bool {
        matches!(self, Commit::Cancelled(codes) if codes.iter().any(|c| c == CONDITION_FAILED))
    }
}

pub(crate) const CONDITION_FAILED: &str = "ConditionalCheckFailed";

impl DynamoStore {
    /// Sends a transaction; a cancellation is an answer, not an error.
    pub(crate) async fn transact(
        &self,
        items: Vec<TransactWriteItem>,
        what: &'static str,
    ) -> Result<Commit, StoreError> {
        let res = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .instrument(tracing::debug_span!("ddb.transact_write_items", what))
            .await;
        match res {
            Ok(_) => Ok(Commit::Done),
            Err(e) => match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(t)) => Ok(Commit::Cancelled(
                    t.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None").to_string()).collect(),
                )),
                _ => Err(backend(e)),
            },
        }
    }

    /// Plain `PutItem`s, a few at a time: for chunk items, which are confirmed
    /// after writing (by their message's transaction, or [`super::attr::session_alive`])
    /// rather than in a transaction with a check on the session item: that is
    /// as safe (a delete marks the session before it sweeps), costs half the
    /// write capacity on every chunk byte, and does not conflict with the
    /// turn's own writes to the session item.
    pub(crate) async fn put_items(&self, items: &[Item]) -> Result<(), StoreError> {
        futures::stream::iter(items.iter().cloned())
            .map(|item| async move {
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(item))
                    .send()
                    .instrument(tracing::debug_span!("ddb.put_item", what = "chunk"))
                    .await
                    .map(|_| ())
                    .map_err(backend)
            })
            .buffer_unordered(CHUNK_WRITES_IN_FLIGHT)
            .try_collect()
            .await
    }

    /// The items at `keys` (consistent reads, at most 100 keys), in the
    /// order of `keys`; a key with no item is left out. `projection` (with
    /// `#st` standing for `status`) narrows what is read.
    pub(crate) async fn batch_get(&self, keys: Vec<Item>, projection: Option<&str>) -> Result<Vec<Item>, StoreError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let wanted = keys.clone();
        let mut found: Vec<Item> = Vec::with_capacity(keys.len());
        let mut pending = keys;
        let mut delay = std::time::Duration::from_millis(20);
        for _ in 0..8 {
            if pending.is_empty() {
                break;
            }
            let mut ka = KeysAndAttributes::builder().set_keys(Some(pending)).consistent_read(true);
            if let Some(p) = projection {
                ka = ka.projection_expression(format!("pk, sk, {p}"));
                if p.contains("#st") {
                    ka = ka.expression_attribute_names("#st", "status");
                }
            }
            let out = self
                .client
                .batch_get_item()
                .request_items(self.table.clone(), ka.build().map_err(|e| StoreError::Backend(e.to_string()))?)
                .send()
                .instrument(tracing::debug_span!("ddb.batch_get_item"))
                .await
                .map_err(backend)?;
            found.extend(out.responses.and_then(|mut r| r.remove(&self.table)).unwrap_or_default());
            pending = out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)).map(|k| k.keys).unwrap_or_default();
            if !pending.is_empty() {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
        if !pending.is_empty() {
            return Err(StoreError::Backend("batch_get_item: keys left unprocessed".into()));
        }
        let at = |i: &Item, k: &str| i.get(k).and_then(|v| v.as_s().ok()).cloned();
        let mut by_key: HashMap<(Option<String>, Option<String>), Item> =
            found.into_iter().map(|i| ((at(&i, "pk"), at(&i, "sk")), i)).collect();
        Ok(wanted.iter().filter_map(|k| by_key.remove(&(at(k, "pk"), at(k, "sk")))).collect())
    }

    /// Deletes the given items by key, best effort (a failure is logged).
    pub(crate) async fn forget(&self, items: &[Item]) {
        let keys: Vec<Item> = items
            .iter()
            .map(|i| i.iter().filter(|(k, _)| *k == "pk" || *k == "sk").map(|(k, v)| (k.clone(), v.clone())).collect())
            .collect();
        for batch in keys.chunks(DELETE_BATCH) {
            if let Err(e) = self.batch_delete(batch.to_vec()).await {
                tracing::warn!(error = %e, "uncommitted chunks not removed");
            }
        }
    }

    /// One `BatchWriteItem` of deletes, retrying unprocessed items with backoff.
    pub(crate) async fn batch_delete(&self, keys: Vec<Item>) -> Result<(), StoreError> {
        let mut pending: Vec<WriteRequest> = keys
            .into_iter()
            .map(|k| {
                WriteRequest::builder()
                    .delete_request(DeleteRequest::builder().set_key(Some(k)).build().expect("key set"))
                    .build()
            })
            .collect();
        let mut delay = std::time::Duration::from_millis(20);
        for _ in 0..8 {
            let out = self
                .client
                .batch_write_item()
                .request_items(self.table.clone(), pending)
                .send()
                .instrument(tracing::debug_span!("ddb.batch_write_item", what = "delete"))
                .await
                .map_err(backend)?;
            pending = out.unprocessed_items.unwrap_or_default().remove(&self.table).unwrap_or_default();
            if pending.is_empty() {
                return Ok(());
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(std::time::Duration::from_secs(1));
        }
        Err(StoreError::Backend(format!("{} deletes stayed unprocessed after retries", pending.len())))
    }
}
