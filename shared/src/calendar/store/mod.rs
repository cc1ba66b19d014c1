//! The calendar's side of the one table: a user's events, their zone
//! preference and their CalDAV sync state, through the [`EventStore`] trait:
//! [`DynamoEventStore`] in the functions, the in-memory [`MemoryEventStore`]
//! in unit tests, one contract suite for both (`contract`, `testkit`).
//!
//! # Key scheme
//!
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | event (`data` = the [`CalendarEvent`] as JSON, `version`, `uid`) | `U#<user>#CAL` | `EV#<event>` |
//! | the user's calendar settings (`zone`, CalDAV `sync_token`) | `U#<user>#CAL` | `SETTINGS` |
//!
//! A user's calendar is one partition: another user's event id addresses
//! nothing. A listing reads the partition (`begins_with(sk, "EV#")`) and
//! expands recurrences in code: a series is one item however far it repeats.
//! Every write is a conditional `PutItem`/`DeleteItem` on `version` (create:
//! `attribute_not_exists`), so two writers never both win.

#[cfg(any(test, feature = "testkit"))]
pub mod contract;
mod dynamo;
mod memory;

pub use dynamo::DynamoEventStore;
pub use memory::MemoryEventStore;

use super::model::{CalendarEvent, SkippedEvent, Zone};
use crate::ids::{EventId, UserId};
use crate::store::StoreError;

/// Why a write wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The stored version is not the expected one (or the event exists on
    /// create, or is gone on update): `current` is what is stored.
    #[error("the event changed concurrently")]
    Conflict { current: Option<u64> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A user's calendar settings.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    /// The zone the user chose (`PUT /me/settings`); a turn's own zone never lands here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<Zone>,
    /// The CalDAV collection's sync token (RFC 6578) after the last sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_token: Option<String>,
    /// The calendar server's objects the syncs could not take in (by href),
    /// named in every listing until they change or go.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedEvent>,
}

#[async_trait::async_trait]
pub trait EventStore: Send + Sync {
    async fn get(&self, user: &UserId, id: &EventId) -> Result<Option<CalendarEvent>, StoreError>;
    /// Every event of the user (series as one record each), by id.
    async fn list(&self, user: &UserId) -> Result<Vec<CalendarEvent>, StoreError>;
    /// Writes `event`: a create when `expected` is `None` (refused if it
    /// exists), else only over the stored `expected` version.
    async fn put(&self, user: &UserId, event: &CalendarEvent, expected: Option<u64>) -> Result<(), WriteError>;
    /// Deletes only over the stored `expected` version.
    async fn delete(&self, user: &UserId, id: &EventId, expected: u64) -> Result<(), WriteError>;
    async fn settings(&self, user: &UserId) -> Result<Settings, StoreError>;
    async fn save_settings(&self, user: &UserId, settings: &Settings) -> Result<(), StoreError>;
}

/// A shared store is a store (a test, or a second service, over the same data).
#[async_trait::async_trait]
impl<T: EventStore + ?Sized> EventStore for std::sync::Arc<T> {
    async fn get(&self, user: &UserId, id: &EventId) -> Result<Option<CalendarEvent>, StoreError> {
        (**self).get(user, id).await
    }
    async fn list(&self, user: &UserId) -> Result<Vec<CalendarEvent>, StoreError> {
        (**self).list(user).await
    }
    async fn put(&self, user: &UserId, event: &CalendarEvent, expected: Option<u64>) -> Result<(), WriteError> {
        (**self).put(user, event, expected).await
    }
    async fn delete(&self, user: &UserId, id: &EventId, expected: u64) -> Result<(), WriteError> {
        (**self).delete(user, id, expected).await
    }
    async fn settings(&self, user: &UserId) -> Result<Settings, StoreError> {
        (**self).settings(user).await
    }
    async fn save_settings(&self, user: &UserId, settings: &Settings) -> Result<(), StoreError> {
        (**self).save_settings(user, settings).await
    }
}

/// The one spelling of the keys.
pub mod keys {
    use crate::ids::{EventId, UserId};
    pub const EVENT_PREFIX: &str = "EV#";
    pub const SETTINGS_SK: &str = "SETTINGS";
    pub fn calendar_pk(user: &UserId) -> String {
        format!("U#{user}#CAL")
    }
    pub fn event_sk(id: &EventId) -> String {
        format!("{EVENT_PREFIX}{id}")
    }
}
