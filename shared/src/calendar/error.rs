//! Why a calendar operation was refused. Each error has a stable machine
//! `code`; the edge maps them to HTTP once (`crate::edge::error`), tools show
//! `{"error": {"code", "message"}}`. In every case but `Store` and `Remote`,
//! nothing was written.

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum CalendarError {
    /// Missing, deleted, or another user's: indistinguishable on purpose.
    #[error("event not found")]
    NotFound,
    /// The id names a series but no instance of it starts at `instance`.
    #[error("the event has no instance starting at {0}")]
    NoSuchInstance(String),
    #[error("{0}")]
    InvalidId(String),
    /// Refused input: `invalid_time`, `invalid_timezone`, `end_before_start`,
    /// `invalid_rrule`, `range_too_long`, `invalid_value`, `missing_field`, …
    #[error("{message}")]
    BadInput { code: &'static str, message: String },
    /// The caller's expected version is stale.
    #[error("version conflict: expected {expected}, current is {current_version}")]
    Conflict { expected: u64, current_version: u64 },
    /// The CalDAV copy changed elsewhere since we read it: nothing was
    /// overwritten; read again and retry.
    #[error("{title:?} was changed in the calendar server since it was read; nothing was overwritten")]
    RemoteConflict { title: String },
    /// The CalDAV server failed or refused (not a conflict).
    #[error("calendar server: {0}")]
    Remote(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CalendarError {
    pub fn bad(code: &'static str, message: impl Into<String>) -> Self {
        CalendarError::BadInput { code, message: message.into() }
    }

    /// The stable machine code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            CalendarError::NotFound => "event_not_found",
            CalendarError::NoSuchInstance(_) => "instance_not_found",
            CalendarError::InvalidId(_) => "invalid_id",
            CalendarError::BadInput { code, .. } => code,
            CalendarError::Conflict { .. } => "version_conflict",
            CalendarError::RemoteConflict { .. } => "calendar_conflict",
            CalendarError::Remote(_) => "calendar_server_error",
            CalendarError::Store(_) => "store_error",
        }
    }
}
