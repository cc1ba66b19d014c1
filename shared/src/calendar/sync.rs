//! Pulling a calendar server's changes into the store: each changed resource
//! replaces the event we hold with the same href (or UID), keeping our id,
//! links and version sequence; one we do not hold is added; removed ones
//! (or, after a full read, ones the server no longer has) are deleted. The
//! sync token is kept for the next pull (RFC 6578).
//!
//! A resource that is not an event we can hold does not stop the pull: it is
//! kept in the settings' `skipped` (by href, until it changes or goes) for
//! listings to name, and a copy we held of it before is dropped, as a full
//! read would.

use super::error::CalendarError;
use super::model::{CalendarEvent, SkippedEvent};
use super::remote::{RemoteCalendar, RemoteChanges};
use super::store::{EventStore, WriteError};
use crate::ids::UserId;

pub async fn pull(store: &dyn EventStore, user: &UserId, cal: &dyn RemoteCalendar) -> Result<(), CalendarError> {
    let mut settings = store.settings(user).await?;
    let changes = cal.changes(settings.sync_token.as_deref()).await?;
    let held = store.list(user).await?;
    let href = |e: &CalendarEvent| e.remote.as_ref().map(|r| r.href.clone());
    for theirs in &changes.changed {
        let ours = held.iter().find(|e| href(e) == href(theirs) || e.uid == theirs.uid);
        if ours.and_then(|o| o.remote.as_ref()) == theirs.remote.as_ref() && ours.is_some() {
            continue;
        }
        ignore_race(store.put(user, &merged(ours, theirs), ours.map(|o| o.version)).await)?;
    }
    let kept: Vec<_> = changes.changed.iter().filter_map(href).collect();
    let unreadable: Vec<String> = changes.skipped.iter().filter_map(|s| s.href.clone()).collect();
    for gone in held.iter().filter(|e| {
        href(e).is_some_and(|h| {
            changes.removed.contains(&h) || unreadable.contains(&h) || (changes.full && !kept.contains(&h))
        })
    }) {
        ignore_race(store.delete(user, &gone.id, gone.version).await)?;
    }
    let skipped = skipped_after(&settings.skipped, &changes);
    if changes.token != settings.sync_token || skipped != settings.skipped {
        (settings.sync_token, settings.skipped) = (changes.token, skipped);
        store.save_settings(user, &settings).await?;
    }
    Ok(())
}

/// The most skipped resources the settings keep (each names itself in a few
/// hundred bytes; the settings are one DynamoDB item).
pub const MAX_SKIPPED_KEPT: usize = 200;

/// The skipped resources after `changes`: a full read replaces them; else a
/// resource that changed, went, or was skipped again drops its old entry.
fn skipped_after(before: &[SkippedEvent], changes: &RemoteChanges) -> Vec<SkippedEvent> {
    let touched = |s: &SkippedEvent| {
        let h = s.href.as_deref();
        changes.full
            || changes.removed.iter().any(|r| Some(r.as_str()) == h)
            || changes.changed.iter().any(|c| c.remote.as_ref().map(|r| r.href.as_str()) == h)
            || changes.skipped.iter().any(|x| x.href.as_deref() == h)
    };
    let mut out: Vec<SkippedEvent> = before.iter().filter(|s| !touched(s)).cloned().collect();
    out.extend(changes.skipped.iter().cloned());
    out.truncate(MAX_SKIPPED_KEPT);
    out
}

/// Their fields under our identity (id, links, version + 1).
fn merged(ours: Option<&CalendarEvent>, theirs: &CalendarEvent) -> CalendarEvent {
    let mut e = theirs.clone();
    if let Some(o) = ours {
        (e.id, e.project_id, e.task_id, e.created_at) =
            (o.id.clone(), o.project_id.clone(), o.task_id.clone(), o.created_at);
        e.version = o.version + 1;
    }
    e
}

/// A concurrent writer got there first: its write stands, the next pull sees
/// the server again.
fn ignore_race(r: Result<(), WriteError>) -> Result<(), CalendarError> {
    match r {
        Ok(()) | Err(WriteError::Conflict { .. }) => Ok(()),
        Err(WriteError::Store(e)) => Err(e.into()),
    }
}
