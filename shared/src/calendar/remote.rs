//! The seam to a user's calendar server. [`Remote`] finds the user's
//! calendar (none without an account: events then live only in DynamoDB);
//! [`RemoteCalendar`] writes an event there conditioned on the ETag we last
//! saw (a change made elsewhere in between is [`CalendarError::RemoteConflict`],
//! never an overwrite) and reports what changed there since a sync token.
//! The CalDAV implementation is [`super::caldav`].

use super::error::CalendarError;
use super::model::{CalendarEvent, RemoteRef, SkippedEvent};
use crate::ids::UserId;

/// What changed on the server since a sync token.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteChanges {
    /// Each changed resource read into an event: `remote` set (href, ETag),
    /// `uid` from the resource; id, version and links are the puller's to
    /// fill (a fresh id and version 1 until matched to one we hold).
    pub changed: Vec<CalendarEvent>,
    pub removed: Vec<String>,
    /// Changed resources that are not events we can hold, by href, with why:
    /// the sync goes on past them and listings name them.
    pub skipped: Vec<SkippedEvent>,
    /// Whether this is the whole collection (no usable token): events we
    /// hold with an href not in `changed` are gone from the server.
    pub full: bool,
    pub token: Option<String>,
}

#[async_trait::async_trait]
pub trait RemoteCalendar: Send + Sync {
    /// Creates (`event.remote` is `None`) or replaces the event; returns where
    /// it now is and its new ETag.
    async fn put(&self, event: &CalendarEvent) -> Result<RemoteRef, CalendarError>;
    /// Deletes it, if the ETag still matches.
    async fn delete(&self, remote: &RemoteRef, title: &str) -> Result<(), CalendarError>;
    async fn changes(&self, token: Option<&str>) -> Result<RemoteChanges, CalendarError>;
}

#[async_trait::async_trait]
pub trait Remote: Send + Sync {
    /// The user's calendar on their server, if they have an account.
    async fn calendar(&self, user: &UserId) -> Result<Option<Box<dyn RemoteCalendar>>, CalendarError>;
}
