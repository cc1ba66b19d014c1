//! Calendar turns end to end: the real stream handler, the calendar on
//! DynamoDB Local, and a scripted model calling the calendar tools. The
//! model is told today's date and the user's zone; what it books is judged
//! by the stored event's instant in that zone.

use chrono::{Duration, Utc};
use serde_json::{json, Value};
use shared::calendar::store::DynamoEventStore;
use shared::calendar::{CalendarService, ListQuery};
use shared::entities::store::DynamoEntityStore;
use shared::entities::EntityService;
use shared::ids::UserId;
use shared::sse::{OperationStatus, StreamEvent};
use tests::{Reply, TestApp};

fn calendar(t: &TestApp) -> CalendarService {
    let entities = EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    CalendarService::new(DynamoEventStore::new(t.dynamo.clone(), t.table.clone()), entities)
}

fn tomorrow_in(zone: chrono_tz::Tz) -> String {
    (Utc::now().with_timezone(&zone).date_naive() + Duration::days(1)).to_string()
}

fn system_prompt(req: &Value) -> String {
    tests::system_text(req)
}

#[tokio::test]
async fn a_calendar_turn_books_a_meeting_at_the_local_time_asked() {
    let t = TestApp::new().await;
    let day = tomorrow_in(chrono_tz::America::Los_Angeles);
    let start = format!("{day}T10:00");
    t.llm.push(Reply::tool_calls(&[(
        "create_calendar_event",
        json!({"title": "Team review", "start": start, "duration_minutes": 30}),
    )]));
    t.llm.push(Reply::text(&["Booked."]));
    let body = json!({"message": "schedule a 30-minute review tomorrow at 10", "context_type": "calendar",
        "timezone": "America/Los_Angeles"});
    let turn = t.turn("alice", body).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);

    // The model was told the date and the zone, and offered the calendar tools.
    let first = t.llm.requests()[0].clone();
    let prompt = system_prompt(&first);
    assert!(prompt.contains("time zone America/Los_Angeles"), "{prompt}");
    let tools: Vec<_> = first["tools"].as_array().unwrap().iter().map(|d| d["function"]["name"].clone()).collect();
    assert!(tools.contains(&json!("create_calendar_event")) && tools.contains(&json!("find_free_time")));

    // The stream said it in words and sent the patch.
    let summary = turn.events.iter().find_map(|e| match e {
        StreamEvent::Operation { status: OperationStatus::Success, summary, .. } => summary.clone(),
        _ => None,
    });
    assert!(summary.unwrap().starts_with("Scheduled Team review for "));
    assert!(turn.kinds().contains(&"calendar_patch"));

    // Stored at 10:00 Los Angeles time, whatever the machine's zone.
    let q = ListQuery {
        from: day.clone(),
        to: day.clone(),
        timezone: Some("America/Los_Angeles".into()),
        project_id: None,
    };
    let listed = calendar(&t).list(&UserId::parse("alice").unwrap(), &q).await.unwrap();
    assert_eq!(listed.events.len(), 1);
    assert!(listed.events[0].start.starts_with(&format!("{day}T10:00:00-0")), "{:?}", listed.events[0]);

    // The zone was kept: the next turn without one still reads LA, and its
    // calendar pack lists the meeting.
    t.llm.push(Reply::text(&["You have the review."]));
    let sid = turn.session_id().to_string();
    t.turn("alice", json!({"message": "what is on tomorrow?", "session_id": sid})).await;
    let prompt = system_prompt(t.llm.requests().last().unwrap());
    assert!(prompt.contains("time zone America/Los_Angeles") && prompt.contains("Team review"), "{prompt}");
}

#[tokio::test]
async fn another_users_event_id_in_a_tool_call_is_not_found_and_untouched() {
    let t = TestApp::new().await;
    let cal = calendar(&t);
    let alice = UserId::parse("alice").unwrap();
    let new = shared::calendar::NewEvent {
        title: "Private".into(),
        start: "2026-12-01T10:00".into(),
        end: None,
        duration_minutes: None,
        timezone: Some("UTC".into()),
        location: None,
        description: None,
        recurrence: None,
        project_id: None,
        task_id: None,
    };
    let ev = cal.create(&alice, &new).await.unwrap().event.unwrap();
    t.llm.push(Reply::tool_calls(&[("delete_calendar_event", json!({"event_id": ev.id.to_string()}))]));
    t.llm.push(Reply::text(&["I could not."]));
    let asked = t.turn("mallory", json!({"message": "delete it", "context_type": "calendar"})).await;
    // A delete waits for the user's yes (docs/chat-protocol.md#approvals): mallory gives it.
    let approval = asked
        .events
        .iter()
        .find_map(|e| match e {
            StreamEvent::ApprovalRequired { approval_id, .. } => Some(approval_id.clone()),
            _ => None,
        })
        .expect("the delete waits for approval");
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("/sessions/{}/approvals/{approval}", asked.session_id()))
        .header("authorization", format!("Bearer {}", tests::token("mallory")))
        .body(lambda_http::Body::from(json!({"approved": true}).to_string()))
        .unwrap();
    let turn =
        tests::Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await;
    let result = turn.events.iter().find_map(|e| match e {
        StreamEvent::ToolResult { ok, preview, .. } => Some((*ok, preview.clone())),
        _ => None,
    });
    let (ok, preview) = result.expect("a tool result");
    assert!(!ok && preview.contains("event_not_found"), "{preview}");
    assert_eq!(cal.get(&alice, &ev.id).await.unwrap(), ev, "nothing written");
    assert_eq!(turn.kinds().last(), Some(&"done"));
}

/// The daily brief (docs/modes.md): today's and tomorrow's events and the
/// work due across projects reach the prompt in its mode block; only the
/// reading tools are offered.
#[tokio::test]
async fn the_daily_brief_gets_today_and_tomorrow_and_only_the_reading_tools() {
    let t = TestApp::new().await;
    let zone = chrono_tz::Europe::Berlin;
    let today = Utc::now().with_timezone(&zone).date_naive();
    let alice = UserId::parse("alice").unwrap();
    let at = |day: chrono::NaiveDate, title: &str| shared::calendar::NewEvent {
        title: title.into(),
        start: format!("{day}T23:59"),
        end: None,
        duration_minutes: Some(1),
        timezone: Some("Europe/Berlin".into()),
        location: None,
        description: None,
        recurrence: None,
        project_id: None,
        task_id: None,
    };
    calendar(&t).create(&alice, &at(today, "Late review")).await.unwrap();
    calendar(&t).create(&alice, &at(today + Duration::days(1), "Tomorrow's thing")).await.unwrap();
    calendar(&t).create(&alice, &at(today + Duration::days(2), "Later thing")).await.unwrap();
    let entities = EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let new = shared::entities::NewProject {
        name: "Home".into(),
        description: None,
        state: Default::default(),
        context: None,
    };
    let home = entities.create_project(&alice, new).await.unwrap().data.project.id;
    let Value::Object(f) = json!({"title": "Pay rent", "due_at": (Utc::now() - Duration::days(1)).timestamp_millis()})
    else {
        unreachable!()
    };
    let fields = shared::entities::EntityFields::from_object(shared::entities::EntityKind::Task, f).unwrap();
    let rent = entities.create(&alice, &home, shared::entities::CreateEntity::new(fields)).await.unwrap().data.id;
    t.llm.push(Reply::text(&["Your day."]));
    let body = json!({"message": "brief me", "context_type": "daily_brief_update", "timezone": "Europe/Berlin"});
    let turn = t.turn("alice", body).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let first = t.llm.requests()[0].clone();
    let prompt = system_prompt(&first);
    assert!(prompt.contains(r#""mode":"brief""#), "{prompt}");
    assert!(prompt.contains("23:59–00:00 “Late review”") && prompt.contains("“Tomorrow's thing”"), "{prompt}");
    assert!(!prompt.contains("Later thing"), "only today and tomorrow: {prompt}");
    assert!(prompt.contains(&format!("Home: task “Pay rent”: id {rent} — due ")), "overdue across projects: {prompt}");
    let tools: Vec<_> = first["tools"].as_array().unwrap().iter().map(|d| d["function"]["name"].clone()).collect();
    assert!(tools.contains(&json!("list_calendar_events")) && !tools.contains(&json!("create_calendar_event")));
}
