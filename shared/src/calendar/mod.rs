//! The calendar: the user's events (single or recurring, RFC 5545), read and
//! changed by the chat's calendar tools and the entities API's `/events`
//! routes through one [`CalendarService`], optionally kept in sync with the
//! user's CalDAV server. Time-zone rules are in [`time`]; expansion and its
//! bounds in [`recur`]; the stored items in [`store`]. Wire format and rules:
//! `docs/calendar.md`.

pub mod agenda;
pub mod caldav;
pub mod days;
pub mod edit;
pub mod error;
pub mod free;
pub mod gap;
pub mod model;
pub mod recur;
pub mod remote;
pub mod repeat;
pub mod service;
pub mod store;
mod sync;
pub mod time;

pub use error::CalendarError;
pub use model::*;
pub use service::{CalendarService, FreeQuery, ListQuery, Written, ZoneSource};

#[cfg(test)]
mod recur_tests;
#[cfg(test)]
mod service_tests;
