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
