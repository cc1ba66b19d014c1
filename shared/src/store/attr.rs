//! The small DynamoDB attribute and error helpers every store module uses:
//! one copy, so a change to how errors are reported reaches every table access.

use super::StoreError;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(crate) fn get_s<'a>(item: &'a Item, k: &str) -> Option<&'a str> {
    item.get(k).and_then(|v| v.as_s().ok()).map(String::as_str)
}

pub(crate) fn get_n(item: &Item, k: &str) -> Option<i64> {
    item.get(k).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok())
}

/// A failed call as a [`StoreError::Backend`], with the service's code and message.
pub(crate) fn backend<E: ProvideErrorMetadata + std::fmt::Debug, R: std::fmt::Debug>(e: SdkError<E, R>) -> StoreError {
    let detail = match e.as_service_error() {
        Some(se) => format!("{}: {}", se.code().unwrap_or("unknown"), se.message().unwrap_or("")),
        None => format!("{e:?}"),
    };
    StoreError::Backend(detail)
}

pub(crate) fn is_conditional<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> bool {
    e.as_service_error().and_then(|se| se.code()) == Some("ConditionalCheckFailedException")
}

/// The status of a session whose delete has begun: invisible to every read,
/// and every write under its partition fails.
pub(crate) const DELETING: &str = "deleting";

/// Whether the session item exists and no delete has begun (one small
/// consistent read). Writes that cannot condition on the session item (a
/// plain `PutItem` of another item) call this *after* writing: a delete marks
/// the session before it sweeps, so a write this read saw as alive is found by
/// the sweep, and a write that sees the mark removes itself.
pub(crate) async fn session_alive(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
) -> Result<bool, StoreError> {
    use tracing::Instrument;
    let out = client
        .get_item()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(super::keys::SESSION_SK))
        .projection_expression("#st")
        .expression_attribute_names("#st", "status")
        .consistent_read(true)
        .send()
        .instrument(tracing::debug_span!("ddb.get_item", what = "session_alive"))
        .await
        .map_err(backend)?;
    Ok(out.item.is_some_and(|i| get_s(&i, "status") != Some(DELETING)))
}

/// One page of a session's items with `sk` in `lo..=hi` (`forward: false`
/// reads the newest first), consistent, and the key the next page starts
/// from. The one range query under the message pages, the turn's log read and
/// the frame log.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn session_page(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: String,
    (lo, hi): (String, String),
    forward: bool,
    limit: Option<usize>,
    start: Option<Item>,
    what: &'static str,
) -> Result<(Vec<Item>, Option<Item>), StoreError> {
    use tracing::Instrument;
    let out = client
        .query()
        .table_name(table)
        .key_condition_expression("pk = :pk AND sk BETWEEN :a AND :b")
        .expression_attribute_values(":pk", s(pk))
        .expression_attribute_values(":a", s(lo))
        .expression_attribute_values(":b", s(hi))
        .scan_index_forward(forward)
        .set_limit(limit.map(|l| l as i32))
        .consistent_read(true)
        .set_exclusive_start_key(start)
        .send()
        .instrument(tracing::debug_span!("ddb.query", what))
        .await
        .map_err(backend)?;
    Ok((out.items.unwrap_or_default(), out.last_evaluated_key))
}

/// The cancellation reason codes of a cancelled transaction, one per item in
/// order (`"None"` for an item that was fine); `None` for any other error.
/// Every feature store that writes in transactions reads its conditions here.
pub(crate) fn cancellation_codes<R>(
    e: &SdkError<aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError, R>,
) -> Option<Vec<String>> {
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
    match e.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(t)) => {
            Some(t.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None").to_string()).collect())
        }
        _ => None,
    }
}
