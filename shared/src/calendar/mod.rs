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
pub mod spoken;
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

/// The user's calendar over the table (and their calendar server, where
/// they have an account).
/// The remote side is on only where accounts are configured
/// (`CALDAV_ACCOUNTS` locally, `CALDAV_ACCOUNTS_SECRET` on AWS); a
/// misconfiguration is logged and the calendar works from DynamoDB alone.
pub fn from_env(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    entities: &crate::entities::EntityService,
) -> CalendarService {
    let cal = CalendarService::new(store::DynamoEventStore::new(dynamo.clone(), table), entities.clone());
    let configured = ["CALDAV_ACCOUNTS", "CALDAV_ACCOUNTS_SECRET"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()));
    if !configured {
        return cal;
    }
    match crate::calendar::caldav::CaldavRemote::from_env() {
        Ok(remote) => cal.with_remote(std::sync::Arc::new(remote)),
        Err(e) => {
            tracing::error!(error = %e, "CalDAV accounts not loaded; events stay in DynamoDB only");
            cal
        }
    }
}
