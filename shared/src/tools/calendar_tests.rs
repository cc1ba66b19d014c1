//! The calendar tools through the registry, over the in-memory stores: what
//! the model sends, what it reads back, and the events a call streams.

use super::*;
use crate::calendar::store::MemoryEventStore;
use crate::calendar::{CalendarPatch, CalendarService};
use crate::entities::store::MemoryEntityStore;
use crate::message::FunctionCall;
use crate::session::ContextType;
use crate::sse::{OperationStatus, StreamEvent};

fn registry() -> ToolRegistry {
    let entities = EntityService::new(MemoryEntityStore::new());
    ToolRegistry::new(entities.clone()).with_calendar(CalendarService::new(MemoryEventStore::new(), entities))
}

async fn run(reg: &ToolRegistry, user: &str, name: &str, args: Value) -> ToolOutcome {
    let ctx = ToolContext { user: UserId::parse(user).unwrap(), scope: ToolScope::Global, zone: None };
    let call = ToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: args.to_string() },
    };
    reg.execute(&ctx, &call).await
}

fn content(o: &ToolOutcome) -> Value {
    serde_json::from_str(&o.content).unwrap()
}

fn patch(o: &ToolOutcome) -> Option<CalendarPatch> {
    o.events().into_iter().find_map(|e| match e {
        StreamEvent::CalendarPatch { patch } => Some(patch),
        _ => None,
    })
}

#[tokio::test]
async fn create_list_move_and_delete_through_the_tools() {
    let reg = registry();
    let made = run(
        &reg,
        "alice",
        "create_calendar_event",
        json!({"title": "Design review", "start": "2026-12-01T15:00", "duration_minutes": 30}),
    )
    .await;
    assert!(made.ok, "{}", made.content);
    let id = content(&made)["event"]["id"].as_str().unwrap().to_string();
    assert_eq!(patch(&made).unwrap().changes.len(), 1);
    let listed = run(&reg, "alice", "list_calendar_events", json!({"from": "2026-12-01", "to": "2026-12-01"})).await;
    assert_eq!(content(&listed)["events"][0]["start"], "2026-12-01T15:00:00Z", "UTC: the user has no zone yet");

    let moved = run(&reg, "alice", "update_calendar_event", json!({"event_id": id, "start": "2026-12-01T16:00"})).await;
    assert!(moved.ok, "{}", moved.content);
    let summary: Vec<_> = moved
        .events()
        .into_iter()
        .filter_map(|e| match e {
            StreamEvent::Operation { status: OperationStatus::Success, summary, .. } => summary,
            _ => None,
        })
        .collect();
    assert_eq!(summary, vec!["Moved Design review to Tue 1 Dec 16:00".to_string()]);
    assert_eq!(content(&moved)["event"]["end"], "2026-12-01T16:30:00Z", "the length is kept");

    let gone = run(&reg, "alice", "delete_calendar_event", json!({"event_id": id})).await;
    assert!(gone.ok);
    let listed = run(&reg, "alice", "list_calendar_events", json!({"from": "2026-12-01", "to": "2026-12-01"})).await;
    assert_eq!(content(&listed)["events"], json!([]));
}

#[tokio::test]
async fn refusals_are_tool_errors_the_model_reads() {
    let reg = registry();
    let bad = run(
        &reg,
        "alice",
        "create_calendar_event",
        json!({"title": "x", "start": "2026-12-01T10:00", "end": "2026-12-01T09:00"}),
    )
    .await;
    assert_eq!((bad.ok, bad.error_code.as_deref()), (false, Some("end_before_start")));
    let ops: Vec<_> = bad
        .operations
        .iter()
        .map(|e| match e {
            StreamEvent::Operation { status, .. } => *status,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(ops, vec![OperationStatus::Start, OperationStatus::Error]);
    let made = run(&reg, "alice", "create_calendar_event", json!({"title": "Mine", "start": "2026-12-01T10:00"})).await;
    let id = content(&made)["event"]["id"].as_str().unwrap().to_string();
    for (tool, args) in [
        ("update_calendar_event", json!({"event_id": id, "title": "Theirs"})),
        ("delete_calendar_event", json!({"event_id": id})),
    ] {
        let o = run(&reg, "bob", tool, args).await;
        assert_eq!(o.error_code.as_deref(), Some("event_not_found"), "{tool}");
    }
    let listed = run(&reg, "alice", "list_calendar_events", json!({"from": "2026-12-01", "to": "2026-12-01"})).await;
    assert_eq!(content(&listed)["events"][0]["title"], "Mine", "bob changed nothing");
    let o = run(&reg, "alice", "list_calendar_events", json!({"from": "2026-01-01", "to": "2027-12-31"})).await;
    assert_eq!(o.error_code.as_deref(), Some("range_too_long"));
}

#[test]
fn the_calendar_scope_offers_the_calendar_tools_and_only_with_a_calendar() {
    let offered = ToolScope::Global.offered_in(ContextType::Calendar);
    for t in CALENDAR_TOOLS {
        assert!(offered.contains(t), "{t:?}");
    }
    let brief = ToolScope::Global.offered_in(ContextType::DailyBriefUpdate);
    assert!(brief.contains(&ToolName::ListCalendarEvents) && !brief.contains(&ToolName::CreateCalendarEvent));
    let without = ToolRegistry::new(EntityService::new(MemoryEntityStore::new()));
    assert!(CALENDAR_TOOLS.iter().all(|t| !without.has(*t)));
    assert!(CALENDAR_TOOLS.iter().all(|t| registry().has(*t)));
}

/// An event whose recurrence cannot be expanded (synced from a server that
/// took a rule we refuse): the tools answer with the rest and name it.
#[tokio::test]
async fn the_tools_answer_with_the_rest_and_name_what_they_skipped() {
    use crate::calendar::store::EventStore;
    let store = std::sync::Arc::new(MemoryEventStore::new());
    let entities = EntityService::new(MemoryEntityStore::new());
    let reg = ToolRegistry::new(entities.clone()).with_calendar(CalendarService::new(store.clone(), entities));
    let make = |title: &str, start: &str| json!({"title": title, "start": start, "duration_minutes": 60});
    assert!(run(&reg, "alice", "create_calendar_event", make("Dentist", "2026-12-01T10:00")).await.ok);
    let mut weekly = make("Odd rule", "2026-12-01T12:00");
    weekly["recurrence"] = json!({"rrule": "FREQ=WEEKLY"});
    let odd = content(&run(&reg, "alice", "create_calendar_event", weekly).await)["event"].clone();
    let u = UserId::parse("alice").unwrap();
    let mut bad: crate::calendar::CalendarEvent = serde_json::from_value(odd).unwrap();
    bad.recurrence.as_mut().unwrap().rrule = "FREQ=YEARLY;BYWEEKNO=60".into();
    store.put(&u, &bad, Some(bad.version)).await.unwrap();

    let listed = run(&reg, "alice", "list_calendar_events", json!({"from": "2026-12-01", "to": "2026-12-01"})).await;
    assert!(listed.ok, "{}", listed.content);
    let listed = content(&listed);
    assert_eq!(listed["events"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["events"][0]["title"], "Dentist");
    assert_eq!(listed["skipped"][0]["title"], "Odd rule", "{listed}");
    assert_eq!(listed["skipped"][0]["reason"], "unexpandable");
    assert_eq!(listed["skipped"][0]["event_id"], json!(bad.id));

    let free = json!({"from": "2026-12-01", "to": "2026-12-01", "duration_minutes": 60});
    let free = run(&reg, "alice", "find_free_time", free).await;
    assert!(free.ok, "{}", free.content);
    let free = content(&free);
    assert_eq!(free["slots"][0]["end"], "2026-12-01T10:00:00Z", "{free}");
    assert_eq!(free["skipped"], listed["skipped"]);
}
