//! The [`EventStore`] contract, written once and run against both
//! implementations: the in-memory twin in `cargo test -p shared --lib`, the
//! DynamoDB store against DynamoDB Local (`tests/tests/contract_features.rs`).

use super::{EventStore, Settings, WriteError};
use crate::calendar::model::{CalendarEvent, EventTime, Recurrence, SkipReason, SkippedEvent, Zone};
use crate::ids::{EventId, UserId};
use crate::store::gate::fresh_user;

/// A weekly series told apart by `title`.
pub fn event(title: &str) -> CalendarEvent {
    let start = EventTime::parse_stored("2026-03-02T08:00:00Z").unwrap();
    let id = EventId::new();
    CalendarEvent {
        uid: format!("{id}@contract"),
        id,
        title: title.into(),
        description: None,
        location: Some("Room 1".into()),
        end: start.shifted(chrono::Duration::hours(1)),
        start,
        timezone: Zone::parse("Europe/Berlin").unwrap(),
        recurrence: Some(Recurrence { rrule: "FREQ=WEEKLY".into(), exdates: vec![], rdates: vec![] }),
        overrides: vec![],
        project_id: None,
        task_id: None,
        version: 1,
        created_at: 1,
        updated_at: 1,
        remote: None,
        organizer: None,
    }
}

pub async fn writes_are_compare_and_set(store: &dyn EventStore) {
    let u = fresh_user();
    let mut e = event("standup");
    store.put(&u, &e, None).await.unwrap();
    assert!(matches!(store.put(&u, &e, None).await, Err(WriteError::Conflict { current: Some(1) })), "exists");
    e.version = 2;
    e.title = "daily standup".into();
    store.put(&u, &e, Some(1)).await.unwrap();
    let mut stale = e.clone();
    stale.title = "lost".into();
    assert!(matches!(store.put(&u, &stale, Some(1)).await, Err(WriteError::Conflict { current: Some(2) })));
    assert_eq!(store.get(&u, &e.id).await.unwrap(), Some(e.clone()), "the winner's write, whole");
    assert!(matches!(store.delete(&u, &e.id, 1).await, Err(WriteError::Conflict { current: Some(2) })));
    store.delete(&u, &e.id, 2).await.unwrap();
    assert_eq!(store.get(&u, &e.id).await.unwrap(), None);
    assert!(matches!(store.delete(&u, &e.id, 2).await, Err(WriteError::Conflict { current: None })), "gone");
    assert!(matches!(store.put(&u, &e, Some(2)).await, Err(WriteError::Conflict { current: None })), "no revival");
}

pub async fn events_are_the_users_own(store: &dyn EventStore) {
    let (alice, bob): (UserId, UserId) = (fresh_user(), fresh_user());
    let mine = event("mine");
    store.put(&alice, &mine, None).await.unwrap();
    assert_eq!(store.get(&bob, &mine.id).await.unwrap(), None);
    assert!(store.list(&bob).await.unwrap().is_empty());
    assert!(matches!(store.delete(&bob, &mine.id, 1).await, Err(WriteError::Conflict { current: None })));
    assert!(matches!(store.put(&bob, &mine, Some(1)).await, Err(WriteError::Conflict { current: None })));
    assert_eq!(store.list(&alice).await.unwrap(), vec![mine]);
}

pub async fn lists_every_event_and_keeps_settings(store: &dyn EventStore) {
    let u = fresh_user();
    let mut all: Vec<_> = (0..30).map(|i| event(&format!("e{i}"))).collect();
    for e in &all {
        store.put(&u, e, None).await.unwrap();
    }
    let mut listed = store.list(&u).await.unwrap();
    listed.sort_by(|a, b| a.id.cmp(&b.id));
    all.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(listed, all);
    assert_eq!(store.settings(&u).await.unwrap(), Settings::default());
    let skipped = SkippedEvent {
        href: Some("/u/cal/x.ics".into()),
        title: Some("Board".into()),
        ..SkippedEvent::new(SkipReason::Unreadable, "a VEVENT without DTSTART")
    };
    let s = Settings {
        zone: Some(Zone::parse("America/Los_Angeles").unwrap()),
        sync_token: Some("t1".into()),
        skipped: vec![skipped],
    };
    store.save_settings(&u, &s).await.unwrap();
    assert_eq!(store.settings(&u).await.unwrap(), s);
    assert_eq!(store.list(&u).await.unwrap().len(), 30, "settings are not events");
}

/// The contract's cases as `#[tokio::test]`s over `$setup().await`.
#[macro_export]
macro_rules! event_store_contract {
    ($setup:path) => {
        #[tokio::test]
        async fn event_writes_are_compare_and_set() {
            $crate::calendar::store::contract::writes_are_compare_and_set(&$setup().await).await;
        }
        #[tokio::test]
        async fn events_are_the_users_own() {
            $crate::calendar::store::contract::events_are_the_users_own(&$setup().await).await;
        }
        #[tokio::test]
        async fn event_lists_are_whole_and_settings_kept() {
            $crate::calendar::store::contract::lists_every_event_and_keeps_settings(&$setup().await).await;
        }
    };
}

#[cfg(test)]
mod memory {
    async fn store() -> super::super::MemoryEventStore {
        super::super::MemoryEventStore::new()
    }
    crate::event_store_contract!(store);
}
