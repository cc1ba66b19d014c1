//! Pulling a calendar server's changes into the store: each changed resource
//! replaces the event we hold with the same href (or UID), keeping our id,
//! links and version sequence; one we do not hold is added; removed ones
//! (or, after a full read, ones the server no longer has) are deleted. The
//! sync token is kept for the next pull (RFC 6578).

use super::error::CalendarError;
use super::model::CalendarEvent;
use super::remote::RemoteCalendar;
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
    for gone in held.iter().filter(|e| {
        let h = href(e);
        h.is_some()
            && (changes.removed.contains(h.as_ref().unwrap()) || (changes.full && !kept.contains(h.as_ref().unwrap())))
    }) {
        ignore_race(store.delete(user, &gone.id, gone.version).await)?;
    }
    if changes.token != settings.sync_token {
        settings.sync_token = changes.token;
        store.save_settings(user, &settings).await?;
    }
    Ok(())
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
