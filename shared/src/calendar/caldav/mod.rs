//! Sync with a CalDAV server (RFC 4791, RFC 6578): a user's optional account
//! ([`accounts`]), the protocol client ([`client`]) with its XML ([`xml`]),
//! the mapping between our events and iCalendar VEVENTs ([`ical`]), and the
//! calendar's [`Remote`](crate::calendar::remote::Remote) seam over them
//! ([`remote`]: [`CaldavRemote`]).
//!
//! Every write is conditional on the ETag last read; a change made on the
//! server in between is a [`CaldavError::Conflict`], never an overwrite.

pub mod accounts;
pub mod client;
pub mod ical;
pub mod remote;
pub mod xml;

pub use accounts::{accounts_from_env, CaldavAccount, CaldavAccounts, EnvAccounts, SecretsExtensionAccounts};
pub use client::{canonical_href, event_href, CaldavClient, CalendarInfo, Precondition, Resource, SyncChanges};
pub use ical::{from_ics, to_ics};
pub use remote::{CaldavCalendar, CaldavRemote};

/// What went wrong talking to a CalDAV server (or finding the account).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaldavError {
    /// The server refused the account's credentials (401).
    #[error("the CalDAV server refused the account's credentials")]
    Unauthorized,
    /// The credentials are fine but this resource is not theirs (403).
    #[error("the CalDAV server forbids access to {0}")]
    Forbidden(String),
    #[error("not found on the CalDAV server: {0}")]
    NotFound(String),
    /// The resource changed (or appeared) on the server since it was read:
    /// nothing was written.
    #[error("{href} was changed on the CalDAV server since it was read; nothing was written")]
    Conflict { href: String },
    /// The server answered something that is not CalDAV as we know it.
    #[error("CalDAV protocol error: {0}")]
    Protocol(String),
    /// Any other unexpected HTTP status.
    #[error("the CalDAV server answered HTTP {0}")]
    Http(u16),
    /// The server could not be reached or the answer not read.
    #[error("could not reach the CalDAV server: {0}")]
    Transport(String),
    /// An iCalendar object we cannot read as an event.
    #[error("not an event we can read: {0}")]
    InvalidIcs(String),
    /// A malformed account (URL, JSON, secret).
    #[error("CalDAV account configuration: {0}")]
    Config(String),
}
