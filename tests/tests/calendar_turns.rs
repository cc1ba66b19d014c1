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
use shared::session::store::SessionLog;
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

    // The turn's zone was that turn's alone: nothing stored, and the next
    // turn without a zone reads UTC, and says so.
    let alice = UserId::parse("alice").unwrap();
    assert_eq!(calendar(&t).stored_zone(&alice).await.unwrap(), None, "a turn's zone is not stored");
    t.llm.push(Reply::text(&["You have the review."]));
    let sid = turn.session_id().to_string();
    t.turn("alice", json!({"message": "what is on tomorrow?", "session_id": sid})).await;
    let prompt = system_prompt(t.llm.requests().last().unwrap());
    assert!(prompt.contains("time zone UTC (UTC: the user has chosen no zone)"), "{prompt}");
}

async fn settings(t: &TestApp, method: &str, user: &str, body: Option<Value>) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri("/me/settings")
        .header("authorization", format!("Bearer {}", tests::token(user)))
        .body(lambda_http::Body::from(body.map(|b| b.to_string()).unwrap_or_default()))
        .unwrap();
    let resp =
        tests::Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await;
    (resp.status, resp.json.unwrap_or_default())
}

#[tokio::test]
async fn the_users_zone_changes_only_through_the_settings_route() {
    let t = TestApp::new().await;
    let alice = UserId::parse("alice").unwrap();
    assert_eq!(settings(&t, "GET", "alice", None).await, (200, json!({"timezone": null})));
    // A New York setting, then a turn from a machine in UTC (the CLI's zone).
    let set = settings(&t, "PUT", "alice", Some(json!({"timezone": "America/New_York"}))).await;
    assert_eq!(set, (200, json!({"timezone": "America/New_York"})));
    t.llm.push(Reply::text(&["Nothing today."]));
    let turn =
        t.turn("alice", json!({"message": "what is on?", "context_type": "calendar", "timezone": "Etc/UTC"})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let prompt = system_prompt(t.llm.requests().last().unwrap());
    assert!(prompt.contains("time zone Etc/UTC (this turn's zone, from the user's device)"), "{prompt}");
    assert_eq!(calendar(&t).stored_zone(&alice).await.unwrap().map(|z| z.name()), Some("America/New_York"));
    assert_eq!(settings(&t, "GET", "alice", None).await.1, json!({"timezone": "America/New_York"}));
    // A turn without a zone reads the chosen one and names it.
    t.llm.push(Reply::text(&["Nothing today."]));
    t.turn("alice", json!({"message": "and tomorrow?", "context_type": "calendar"})).await;
    let prompt = system_prompt(t.llm.requests().last().unwrap());
    assert!(prompt.contains("time zone America/New_York (the user's chosen zone)"), "{prompt}");
    // A name that is no zone, or a body of another shape: 400, nothing stored.
    let bad = settings(&t, "PUT", "alice", Some(json!({"timezone": "Mars/Olympus"}))).await;
    assert_eq!((bad.0, bad.1["error"]["code"].clone()), (400, json!("invalid_timezone")), "{bad:?}");
    let bad = settings(&t, "PUT", "alice", Some(json!({"zone": "Europe/Berlin"}))).await;
    assert_eq!((bad.0, bad.1["error"]["code"].clone()), (400, json!("invalid_json")), "{bad:?}");
    assert_eq!(settings(&t, "GET", "alice", None).await.1, json!({"timezone": "America/New_York"}));
    assert_eq!(settings(&t, "GET", "bob", None).await.1, json!({"timezone": null}), "alice's zone is hers");
    // Cleared: none chosen again.
    assert_eq!(settings(&t, "PUT", "alice", Some(json!({"timezone": null}))).await, (200, json!({"timezone": null})));
    assert_eq!(calendar(&t).stored_zone(&alice).await.unwrap(), None);
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
    let turn = approve(&t, "mallory", &asked).await;
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
    // The brief reports what changed since yesterday: "created" there is the
    // log's, not a claim of this turn (the check had withdrawn such a brief).
    t.llm.push(Reply::text(&["Today: Late review at 23:59. Overdue: Pay rent. Changed: task “Pay rent” was created."]));
    let body = json!({"message": "brief me", "context_type": "daily_brief_update", "timezone": "Europe/Berlin"});
    let turn = t.turn("alice", body).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    assert!(answer_checks(&turn).is_empty(), "{:?}", answer_checks(&turn));
    assert!(turn.text().contains("was created"), "the brief stands: {}", turn.text());
    let first = t.llm.requests()[0].clone();
    let prompt = system_prompt(&first);
    assert!(prompt.contains(r#""mode":"brief""#), "{prompt}");
    assert!(prompt.contains("23:59–00:00 “Late review”") && prompt.contains("“Tomorrow's thing”"), "{prompt}");
    assert!(!prompt.contains("Later thing"), "only today and tomorrow: {prompt}");
    assert!(prompt.contains(&format!("Home: task “Pay rent”: id {rent} — due ")), "overdue across projects: {prompt}");
    // The brief asked for is the block: no tools (offered them, the local
    // model listed today again and said so instead of the brief).
    assert!(first.get("tools").is_none_or(|t| t.as_array().is_some_and(|a| a.is_empty())), "{:?}", first["tools"]);
    // A day past the block, or something else than the brief, gets the brief's reads.
    for message in ["and what's on next week?", "find the budget document"] {
        t.llm.push(Reply::text(&["Nothing yet."]));
        let later = json!({"message": message, "context_type": "daily_brief_update",
            "timezone": "Europe/Berlin", "session_id": turn.session_id()});
        assert_eq!(t.turn("alice", later).await.error_code(), None);
        let asks =
            |r: &&Value| r["messages"].as_array().is_some_and(|m| m.last().is_some_and(|m| m["content"] == message));
        let request = t.llm.requests().iter().find(asks).cloned().expect("the turn's request");
        let tools: Vec<_> =
            request["tools"].as_array().expect("tools").iter().map(|d| d["function"]["name"].clone()).collect();
        assert!(tools.contains(&json!("list_calendar_events")) && !tools.contains(&json!("create_calendar_event")));
    }
}

// ---- issue 40: the calendar tools as a 1.5 B model used them ----

const BERLIN: &str = "Europe/Berlin";

fn berlin_today() -> chrono::NaiveDate {
    Utc::now().with_timezone(&chrono_tz::Europe::Berlin).date_naive()
}

fn in_calendar(message: &str) -> Value {
    json!({"message": message, "context_type": "calendar", "timezone": BERLIN})
}

/// Each `answer_check` of the turn: its verdict and its mismatches' kinds.
fn answer_checks(turn: &tests::Turn) -> Vec<(Value, Vec<Value>)> {
    let check = |e: &StreamEvent| match e {
        StreamEvent::AnswerCheck { verdict, mismatches } => {
            Some((json!(verdict), mismatches.iter().map(|m| json!(m.kind)).collect()))
        }
        _ => None,
    };
    turn.events.iter().filter_map(check).collect()
}

/// The content of the last tool message the model was sent.
fn last_tool_result(t: &TestApp) -> String {
    let req = t.llm.requests().last().cloned().unwrap();
    let messages = req["messages"].as_array().unwrap().clone();
    let tool = messages.iter().rev().find(|m| m["role"] == "tool").expect("a tool message");
    tool["content"].as_str().unwrap().to_string()
}

fn list_days(from: chrono::NaiveDate, to: chrono::NaiveDate) -> ListQuery {
    ListQuery { from: from.to_string(), to: to.to_string(), timezone: Some(BERLIN.into()), project_id: None }
}

fn new_event(title: &str, start: String, rrule: Option<&str>) -> shared::calendar::NewEvent {
    shared::calendar::NewEvent {
        title: title.into(),
        start,
        end: None,
        duration_minutes: Some(60),
        timezone: Some(BERLIN.into()),
        location: None,
        description: None,
        recurrence: rrule.map(|r| shared::calendar::RecurrenceInput {
            rrule: r.into(),
            exdates: vec![],
            rdates: vec![],
        }),
        project_id: None,
        task_id: None,
    }
}

/// "I have a standup every weekday at 9:30, put it in" — whatever today is
/// (the issue's was a Sunday), the model writes today's date and `repeat`;
/// what is stored is a Monday-to-Friday series at 09:30 in the user's zone.
#[tokio::test]
async fn a_standup_every_weekday_is_stored_as_a_monday_to_friday_series() {
    let t = TestApp::new().await;
    let today = berlin_today();
    t.llm.push(Reply::tool_calls(&[(
        "create_calendar_event",
        json!({"title": "Standup", "start": format!("{today}T09:30"), "duration_minutes": 15,
            "repeat": {"every": "weekday"}}),
    )]));
    t.llm.push(Reply::text(&["Added your standup."]));
    let turn = t.turn("alice", in_calendar("I have a standup every weekday at 9:30, put it in")).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let result = last_tool_result(&t);
    assert!(result.contains("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"), "{result}");

    let alice = UserId::parse("alice").unwrap();
    let listed = calendar(&t).list(&alice, &list_days(today, today + Duration::days(13))).await.unwrap();
    let starts: Vec<_> =
        listed.events.iter().map(|e| chrono::DateTime::parse_from_rfc3339(&e.start).unwrap()).collect();
    assert_eq!(starts.len(), 10, "ten weekdays in two weeks: {starts:?}");
    use chrono::Datelike;
    assert!(starts.iter().all(|s| s.weekday().num_days_from_monday() < 5), "{starts:?}");
    assert!(starts.iter().all(|s| s.format("%H:%M").to_string() == "09:30"), "{starts:?}");
}

/// "Cancel tomorrow's standup only": the model's first try, an update
/// setting the occurrence's start to the start it has, is a tool error
/// naming delete_calendar_event; its delete of that date's occurrence
/// (approved) cancels it alone.
#[tokio::test]
async fn cancelling_one_occurrence_by_a_no_op_update_is_refused_and_the_delete_cancels_it_alone() {
    let t = TestApp::new().await;
    let alice = UserId::parse("alice").unwrap();
    let today = berlin_today();
    let tomorrow = today + Duration::days(1);
    let standup = new_event("Standup", format!("{today}T09:30"), Some("FREQ=DAILY"));
    let ev = calendar(&t).create(&alice, &standup).await.unwrap().event.unwrap();
    let id = ev.id.to_string();
    t.llm.push(Reply::tool_calls(&[(
        "update_calendar_event",
        json!({"event_id": id, "instance": format!("{tomorrow}T09:30"), "start": format!("{tomorrow}T09:30")}),
    )]));
    t.llm.push(Reply::tool_calls(&[(
        "delete_calendar_event",
        json!({"event_id": id, "instance": tomorrow.to_string()}),
    )]));
    let asked = t.turn("alice", in_calendar("Cancel tomorrow's standup only")).await;
    let refused = last_tool_result(&t);
    assert!(refused.contains("no_change") && refused.contains("delete_calendar_event"), "{refused}");
    assert_eq!(calendar(&t).get(&alice, &ev.id).await.unwrap(), ev, "the no-op wrote nothing");

    let approval = asked
        .events
        .iter()
        .find_map(|e| match e {
            StreamEvent::ApprovalRequired { approval_id, .. } => Some(approval_id.clone()),
            _ => None,
        })
        .expect("the delete waits for approval");
    t.llm.push(Reply::text(&["Cancelled tomorrow's standup."]));
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("/sessions/{}/approvals/{approval}", asked.session_id()))
        .header("authorization", format!("Bearer {}", tests::token("alice")))
        .body(lambda_http::Body::from(json!({"approved": true}).to_string()))
        .unwrap();
    let turn =
        tests::Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await;
    assert_eq!(turn.kinds().last(), Some(&"done"));
    let days = calendar(&t).list(&alice, &list_days(today, tomorrow + Duration::days(1))).await.unwrap();
    let on: Vec<_> = days.events.iter().map(|e| e.start[..10].to_string()).collect();
    assert_eq!(on, vec![today.to_string(), (tomorrow + Duration::days(1)).to_string()], "only tomorrow's went");
}

/// "Am I free Friday afternoon?" with a 14:00 meeting: find_free_time's
/// answer puts the meeting in front of the model. "What's on my calendar
/// this week?": the server's week, the whole calendar.
#[tokio::test]
async fn free_time_names_the_conflict_and_this_week_is_the_servers_whole_week() {
    let t = TestApp::new().await;
    let alice = UserId::parse("alice").unwrap();
    let today = berlin_today();
    let (friday, _) = shared::calendar::days::Days::Friday.resolve(today);
    let (monday, sunday) = shared::calendar::days::Days::ThisWeek.resolve(today);
    let cal = calendar(&t);
    cal.create(&alice, &new_event("Budget review", format!("{friday}T14:00"), None)).await.unwrap();
    let entities = EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let new: shared::entities::NewProject = serde_json::from_value(json!({"name": "Launch"})).unwrap();
    let pid = entities.create_project(&alice, new).await.unwrap().data.project.id;
    let linked = shared::calendar::NewEvent {
        project_id: Some(pid),
        ..new_event("Launch prep", format!("{monday}T08:00"), None)
    };
    cal.create(&alice, &linked).await.unwrap();
    cal.create(&alice, &new_event("Brunch", format!("{sunday}T22:00"), None)).await.unwrap();

    t.llm.push(Reply::tool_calls(&[("find_free_time", json!({"range": "friday", "day_start": "12:00"}))]));
    t.llm.push(Reply::text(&["No: you have the budget review at 14:00."]));
    let turn = t.turn("alice", in_calendar("Am I free Friday afternoon?")).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let free: Value = serde_json::from_str(&last_tool_result(&t)).unwrap();
    assert_eq!(free["busy"][0]["title"], "Budget review", "{free}");
    assert!(free["busy"][0]["start"].as_str().unwrap().starts_with(&format!("{friday}T14:00")), "{free}");

    t.llm.push(Reply::tool_calls(&[("list_calendar_events", json!({"range": "this_week"}))]));
    t.llm.push(Reply::text(&["Launch prep and brunch."]));
    let turn = t.turn("alice", in_calendar("What's on my calendar this week?")).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let week: Value = serde_json::from_str(&last_tool_result(&t)).unwrap();
    let titles: Vec<_> = week["events"].as_array().unwrap().iter().map(|e| e["title"].clone()).collect();
    assert!(titles.contains(&json!("Launch prep")) && titles.contains(&json!("Brunch")), "{week}");
    assert!(week["days"].as_str().unwrap().starts_with("this_week: Mon"), "{week}");
}

/// The calendar block carries what the message says in the tools' terms
/// (calendar/spoken): the local model wrote 10:30 for "half past nine" and
/// `until` for "three sessions" with the words in front of it.
#[tokio::test]
async fn the_calendar_block_reads_the_messages_times_and_series_into_values() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["Which days?"]));
    t.turn("alice", in_calendar("put my standup in, half past nine every weekday")).await;
    let prompt = system_prompt(&t.llm.requests()[0]);
    assert!(prompt.contains(shared::calendar::spoken::HEADING), "{prompt}");
    assert!(prompt.contains("- \"half past nine\" = 09:30"), "{prompt}");
    assert!(prompt.contains("- \"every weekday\" = \"repeat\": {\"every\": \"monday_to_friday\"}"), "{prompt}");
    assert!(prompt.contains("- \"the first one\" = \"start\": \""), "{prompt}");
    // No day named: the week's list stays, under the reading.
    let (reading, _) = prompt.split_once("The next 7 days, each with its events:").expect("the week's list");
    assert!(reading.contains(shared::calendar::spoken::HEADING), "{prompt}");

    // A message that names no time, day or series adds nothing.
    t.llm.push(Reply::text(&["Hello."]));
    t.turn("alice", in_calendar("hi there")).await;
    let prompt = system_prompt(t.llm.requests().last().unwrap());
    assert!(!prompt.contains(shared::calendar::spoken::HEADING), "{prompt}");
}

/// After a successful list the local model answered with the question
/// itself; such an answer is asked again once (`no_answer`) and the real
/// answer stands, the echo kept in the log out of context.
#[tokio::test]
async fn an_answer_that_only_repeats_the_question_after_a_read_is_asked_again() {
    let t = TestApp::new().await;
    let day = berlin_today() + Duration::days(1);
    calendar(&t)
        .create(&UserId::parse("alice").unwrap(), &new_event("Dentist", format!("{day}T09:00"), None))
        .await
        .unwrap();
    t.llm.push(Reply::tool_calls(&[("list_calendar_events", json!({"range": "tomorrow"}))]));
    t.llm.push(Reply::text(&["What is on my calendar?"]));
    t.llm.push(Reply::text(&["Tomorrow you have the Dentist at 09:00."]));
    // No days named: nothing the block showed for it to leave out (below: `left_out`).
    let turn = t.turn("alice", in_calendar("What is on my calendar?")).await;
    let checks = answer_checks(&turn);
    assert_eq!(checks, [(json!("asked_again"), vec![json!("no_answer")])], "{:?}", turn.kinds());
    let requests = t.llm.requests();
    assert_eq!(requests.len(), 3, "asked once more");
    let note = requests[2]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string();
    assert!(note.contains("repeated the user's question"), "{note}");
    assert!(requests[2]["tools"].as_array().is_none_or(|t| t.is_empty()), "no tools the second time");

    // The app's own block said back is no answer, tools or not.
    t.llm.push(Reply::text(&["The next 7 days, each with its events:\n- Monday: no events"]));
    t.llm.push(Reply::text(&["Tomorrow: the Dentist at 09:00."]));
    let before = t.llm.request_count();
    let parroted = t.turn("alice", in_calendar("anything coming up?")).await;
    assert!(parroted.kinds().contains(&"answer_check"), "{:?}", parroted.kinds());
    assert_eq!(t.llm.request_count() - before, 2, "asked again once");

    // A true answer after a read is not asked again.
    t.llm.push(Reply::tool_calls(&[("list_calendar_events", json!({"range": "tomorrow"}))]));
    t.llm.push(Reply::text(&["Just the Dentist at 09:00."]));
    let before = t.llm.request_count();
    let ok = t.turn("alice", in_calendar("What is on my calendar tomorrow?")).await;
    assert!(!ok.kinds().contains(&"answer_check"), "{:?}", ok.kinds());
    assert_eq!(t.llm.request_count() - before, 2);
}

/// Each day the message names comes with its events on its line, read as far
/// as the days named (up to a month on), beyond the block's seven days: the
/// local model answered "what is on tomorrow?" with the whole week.
#[tokio::test]
async fn a_day_the_message_names_comes_with_its_events() {
    let t = TestApp::new().await;
    let alice = UserId::parse("alice").unwrap();
    let (tomorrow, later) = (berlin_today() + Duration::days(1), berlin_today() + Duration::days(9));
    for (title, day) in [("Dentist", tomorrow), ("Board dinner", tomorrow + Duration::days(2)), ("Offsite", later)] {
        calendar(&t).create(&alice, &new_event(title, format!("{day}T10:00"), None)).await.unwrap();
    }
    t.llm.push(Reply::text(&["The Dentist."]));
    t.turn("alice", in_calendar("what's on tomorrow?")).await;
    let prompt = system_prompt(&t.llm.requests()[0]);
    let line = prompt.lines().find(|l| l.starts_with("- \"tomorrow\" = ")).unwrap_or_else(|| panic!("{prompt}"));
    assert!(line.contains("; on the calendar then: “Dentist” 10:00–11:00 (event_id "), "{line}");
    assert!(!line.contains("Board dinner") && !line.contains("Offsite"), "{line}");

    t.llm.push(Reply::text(&["The offsite."]));
    t.turn("alice", in_calendar(&format!("and on {later}?"))).await;
    let prompt = system_prompt(t.llm.requests().last().unwrap());
    let line =
        prompt.lines().find(|l| l.starts_with(&format!("- \"{later}\" = "))).unwrap_or_else(|| panic!("{prompt}"));
    assert!(line.contains("“Offsite” 10:00–11:00"), "a day beyond the block's week is read too: {line}");
    // A message that names its days gets their lines, not the week's list.
    assert!(!prompt.contains("The next 7 days, each with its events:"), "{prompt}");

    // A time said with a day names what starts then: "my 10am tomorrow".
    t.llm.push(Reply::text(&["Which time?"]));
    t.turn("alice", in_calendar("move my 10am tomorrow to 11")).await;
    let prompt = system_prompt(t.llm.requests().last().unwrap());
    let line = prompt.lines().find(|l| l.starts_with("- \"10am\" = 10:00")).unwrap_or_else(|| panic!("{prompt}"));
    assert!(line.contains("; starting then: “Dentist” 10:00–11:00 (event_id "), "{line}");
    let eleven = prompt.lines().find(|l| l.starts_with("- \"to 11\" = ")).unwrap_or_else(|| panic!("{prompt}"));
    assert!(!eleven.contains("starting then"), "nothing starts at 11: {eleven}");
    // The new start, and on its line the event to move.
    let moved = prompt.lines().find(|l| l.starts_with("- \"the new time\" = ")).unwrap_or_else(|| panic!("{prompt}"));
    let want = format!("\"start\": \"{tomorrow}T11:00\"");
    assert!(
        moved.contains(&want) && moved.contains("; the event to move: “Dentist” 10:00–11:00 (event_id "),
        "{moved}"
    );
}

/// The local model answered "find an hour and block it" with "use the
/// `create_calendar_event` function with …": a described call is withdrawn
/// and the model asked again with the tools, once; the booking happens.
#[tokio::test]
async fn an_answer_that_describes_a_call_is_asked_again_with_the_tools() {
    let t = TestApp::new().await;
    let day = berlin_today() + Duration::days(1);
    t.llm.push(Reply::text(&["To block the hour, use the `create_calendar_event` function with start 10:30."]));
    t.llm.push(Reply::tool_calls(&[(
        "create_calendar_event",
        json!({"title": "Interview prep", "start": format!("{day}T10:30"), "duration_minutes": 60}),
    )]));
    t.llm.push(Reply::text(&["Booked Interview prep for 10:30."]));
    let turn = t.turn("alice", in_calendar("block an hour tomorrow at 10:30 for interview prep")).await;
    let checks: Vec<Value> = turn
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::AnswerCheck { verdict, mismatches } => Some(json!([verdict, mismatches[0].kind])),
            _ => None,
        })
        .collect();
    assert_eq!(checks, [json!(["asked_again", "no_answer"])], "{:?}", turn.kinds());
    let requests = t.llm.requests();
    assert_eq!(requests.len(), 3, "asked again once, then the answer");
    let last = requests[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(last["content"].as_str().unwrap().contains("described a call to create_calendar_event"), "{last}");
    assert!(requests[1]["tools"].as_array().is_some_and(|t| !t.is_empty()), "asked again with the tools");
    let stored = calendar(&t).list(&UserId::parse("alice").unwrap(), &list_days(day, day)).await.unwrap();
    assert_eq!(stored.events.len(), 1, "booked");

    // Asked a question, a described booking is asked again in words, without
    // the tools: a read never turns into a write.
    t.llm.push(Reply::text(&["To book the next meeting, call the `create_calendar_event` function with start 10:00."]));
    t.llm.push(Reply::text(&["You have Interview prep tomorrow at 10:30."]));
    let before = t.llm.request_count();
    t.turn("bob", in_calendar("which meetings are coming up?")).await;
    let again = t.llm.requests()[before + 1].clone();
    assert!(again["tools"].as_array().is_none_or(|t| t.is_empty()), "asked again without tools: {again}");
    let note = again["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string();
    assert!(note.contains("described a tool call instead of answering"), "{note}");
    let bobs = calendar(&t).list(&UserId::parse("bob").unwrap(), &list_days(day, day)).await.unwrap();
    assert!(bobs.events.is_empty(), "nothing booked");

    // Said twice, it is not asked a third time: the answer stands.
    t.llm.push(Reply::text(&["Use create_calendar_event with the title."]));
    t.llm.push(Reply::text(&["Use create_calendar_event with the title, again."]));
    let before = t.llm.request_count();
    t.turn("alice", in_calendar("book it")).await;
    assert_eq!(t.llm.request_count() - before, 2, "one nudge a turn");
}

/// An approval's answer continues the turn with the calendar block read for
/// the message it answers: without it the continuation's prompt had the
/// week's list and the local model copied it as its answer.
#[tokio::test]
async fn the_turn_an_approval_continues_reads_the_message_it_answers() {
    let t = TestApp::new().await;
    let alice = UserId::parse("alice").unwrap();
    let tomorrow = berlin_today() + Duration::days(1);
    let ev = calendar(&t).create(&alice, &new_event("Dentist", format!("{tomorrow}T09:00"), None)).await.unwrap();
    let id = ev.event.unwrap().id.to_string();
    t.llm.push(Reply::tool_calls(&[("delete_calendar_event", json!({"event_id": id}))]));
    t.llm.push(Reply::text(&["Cancelled the dentist."]));
    let asked = t.turn("alice", in_calendar("cancel tomorrow's dentist")).await;
    let turn = approve(&t, "alice", &asked).await;
    assert_eq!(turn.kinds().last(), Some(&"done"));
    let prompt = system_prompt(t.llm.requests().last().unwrap());
    assert!(prompt.lines().any(|l| l.starts_with("- \"tomorrow\" = ")), "the continuation reads the message: {prompt}");
    assert!(!prompt.contains("The next 7 days, each with its events:"), "{prompt}");
}

/// The local model's refused call ("this repeat happens only once … give
/// `count`") was followed by an answer explaining the fix, not by the fixed
/// call: asked again with the tools, once, it makes it.
#[tokio::test]
async fn an_answer_that_gives_up_after_a_refused_call_is_asked_to_make_it_again() {
    let t = TestApp::new().await;
    let (wednesday, _) = shared::calendar::days::Days::Wednesday.resolve(berlin_today() + Duration::days(1));
    let start = format!("{wednesday}T19:00");
    let until = (wednesday + Duration::days(3)).to_string();
    t.llm.push(Reply::tool_calls(&[(
        "create_calendar_event",
        json!({"title": "Yoga", "start": start, "repeat": {"every": "week", "until": until}}),
    )]));
    t.llm.push(Reply::text(&["I see the error. You can do this by giving a count of three."]));
    t.llm.push(Reply::tool_calls(&[(
        "create_calendar_event",
        json!({"title": "Yoga", "start": start, "repeat": {"every": "week", "count": 3}}),
    )]));
    t.llm.push(Reply::text(&["Booked three yoga sessions."]));
    // No number said (a number said mends the call before it runs: below).
    let turn = t.turn("alice", in_calendar("sign me up for yoga wednesdays at 7pm")).await;
    assert!(turn.kinds().contains(&"answer_check"), "{:?}", turn.kinds());
    let requests = t.llm.requests();
    assert_eq!(requests.len(), 4, "the refused call, the gave-up answer, the retry, the answer");
    let note = requests[2]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string();
    assert!(note.contains("Your call to create_calendar_event was refused: this repeat happens only once"), "{note}");
    let alice = UserId::parse("alice").unwrap();
    let stored = calendar(&t).list(&alice, &list_days(wednesday, wednesday + Duration::days(20))).await.unwrap();
    assert_eq!(stored.events.len(), 3, "the fixed call booked the series");
}

/// "Six lessons": the local model wrote an `until` of its own (one to nine
/// occurrences) and, refused, wrote it again. With a number of times said
/// and no end date, the call takes the user's count in place of `until`
/// before it runs; the stored call is the one that ran. A one-off loses a
/// `repeat` nobody asked for.
#[tokio::test]
async fn what_the_user_said_of_a_series_mends_the_models_repeat() {
    let t = TestApp::new().await;
    let (thursday, _) = shared::calendar::days::Days::Thursday.resolve(berlin_today() + Duration::days(1));
    let made_up = (thursday + Duration::days(6)).to_string();
    let repeat = json!({"every": "week", "on_days": ["thursday"], "until": made_up});
    let start = format!("{thursday}T16:30");
    t.llm.push(Reply::tool_calls(&[(
        "create_calendar_event",
        json!({"title": "Piano", "start": start, "repeat": repeat}),
    )]));
    t.llm.push(Reply::text(&["Six piano lessons are in."]));
    let turn =
        t.turn("alice", in_calendar("Put piano lessons in for Thursday afternoons at half four, six lessons.")).await;
    assert_eq!(t.llm.request_count(), 2, "{:?}", turn.kinds());
    let alice = UserId::parse("alice").unwrap();
    let stored = calendar(&t).list(&alice, &list_days(thursday, thursday + Duration::days(70))).await.unwrap();
    assert_eq!(stored.events.len(), 6, "{:?}", stored.events);
    let sent = t.llm.requests()[1]["messages"].as_array().unwrap().clone();
    let call = sent.iter().find_map(|m| m["tool_calls"].as_array().and_then(|c| c.first()).cloned()).unwrap();
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["repeat"], json!({"every": "week", "on_days": ["thursday"], "count": 6}), "the call as it ran");

    // An end date said: the model's `until` stands.
    let until = (thursday + Duration::days(14)).to_string();
    let repeat = json!({"every": "week", "on_days": ["thursday"], "until": until});
    t.llm.push(Reply::tool_calls(&[(
        "create_calendar_event",
        json!({"title": "Choir", "start": start, "repeat": repeat}),
    )]));
    t.llm.push(Reply::text(&["Choir is in."]));
    let said = format!("Choir on Thursdays at half four until {}", (thursday + Duration::days(14)).format("%B %-d"));
    t.turn("alice", in_calendar(&said)).await;
    let choir = calendar(&t).list(&alice, &list_days(thursday, thursday + Duration::days(70))).await.unwrap();
    assert_eq!(choir.events.iter().filter(|e| e.title == "Choir").count(), 3, "{:?}", choir.events);

    // One day and no word of repeating: the local model booked "a dentist
    // appointment next Wednesday at 10am" weekly; the call runs without it.
    let (wednesday, _) = shared::calendar::days::Days::Wednesday.resolve(berlin_today() + Duration::days(1));
    let weekly = json!({"title": "Dentist", "start": format!("{wednesday}T10:00"), "repeat": {"every": "week"}});
    t.llm.push(Reply::tool_calls(&[("create_calendar_event", weekly)]));
    t.llm.push(Reply::text(&["The dentist is in."]));
    t.turn("alice", in_calendar("Put a dentist appointment in for next Wednesday at 10am.")).await;
    let dentist = calendar(&t).list(&alice, &list_days(wednesday, wednesday + Duration::days(30))).await.unwrap();
    assert_eq!(dentist.events.iter().filter(|e| e.title == "Dentist").count(), 1, "{:?}", dentist.events);
}

/// `user` says yes to the call `asked` waits for (docs/chat-protocol.md#approvals): the turn that goes on.
async fn approve(t: &TestApp, user: &str, asked: &tests::Turn) -> tests::Turn {
    let approval = asked
        .events
        .iter()
        .find_map(|e| match e {
            StreamEvent::ApprovalRequired { approval_id, .. } => Some(approval_id.clone()),
            _ => None,
        })
        .expect("the call waits for approval");
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("/sessions/{}/approvals/{approval}", asked.session_id()))
        .header("authorization", format!("Bearer {}", tests::token(user)))
        .body(lambda_http::Body::from(json!({"approved": true}).to_string()))
        .unwrap();
    tests::Turn::read(shared::edge::stream::handle_stream(&t.app, lambda_http::Request::from(req)).await).await
}

/// The local model listed the wrong day and answered "I see no events on
/// December 16" with “Offsite” on that day's line: an answer to a question
/// that leaves out the events the block shows for the days asked about is
/// asked again once, without tools, with those events (`left_out`); an
/// answer that names them stands.
#[tokio::test]
async fn an_answer_that_leaves_out_the_asked_days_events_is_asked_again_with_them() {
    let t = TestApp::new().await;
    let alice = UserId::parse("alice").unwrap();
    let day = berlin_today() + Duration::days(9);
    calendar(&t).create(&alice, &new_event("Offsite", format!("{day}T10:00"), None)).await.unwrap();
    calendar(&t)
        .create(&alice, &new_event("Dentist", format!("{}T09:00", day + Duration::days(1)), None))
        .await
        .unwrap();
    let asked = format!("What have I got on {}?", day.format("%B %-d"));
    t.llm.push(Reply::tool_calls(&[("list_calendar_events", json!({"range": "friday"}))]));
    t.llm.push(Reply::text(&[&format!("I see no events on {}.", day.format("%B %-d"))]));
    t.llm.push(Reply::text(&["On that day you have the Offsite from 10:00 to 11:00."]));
    let turn = t.turn("alice", in_calendar(&asked)).await;
    let checks = answer_checks(&turn);
    assert_eq!(checks, [(json!("asked_again"), vec![json!("left_out")])], "{:?}", turn.kinds());
    let requests = t.llm.requests();
    assert_eq!(requests.len(), 3, "asked once more");
    let note = requests[2]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string();
    assert!(note.contains(&format!("“Offsite” {} 10:00–11:00", day.format("%a %-d %b"))), "{note}");
    assert!(!note.contains("Dentist") && !note.contains("event_id"), "only the asked day, in words: {note}");
    assert!(requests[2]["tools"].as_array().is_none_or(|t| t.is_empty()), "no tools the second time");
    assert!(turn.text().contains("Offsite"), "{}", turn.text());

    // The stored log: the first answer out of context with its mismatch, the second standing.
    let sid = shared::ids::SessionId::parse(turn.session_id()).unwrap();
    let log = t.store().recent_messages(&alice, &sid, 100).await.unwrap();
    let answers: Vec<_> =
        log.iter().filter(|m| m.role == shared::message::Role::Assistant && m.content.is_some()).collect();
    assert_eq!(answers.len(), 2, "{log:?}");
    assert!(!answers[0].include_in_context && answers[1].include_in_context);
    let first = &answers[0].claim_mismatches[0];
    assert_eq!((json!(first.kind), first.entity_name.as_deref()), (json!("left_out"), Some("Offsite")));

    // The question said back, after a read of its days: the events first (`left_out`), not the echo's note.
    t.llm.push(Reply::text(&[&format!("Is there anything on {}?", day.format("%B %-d"))]));
    t.llm.push(Reply::text(&["The offsite, 10:00 to 11:00."]));
    let echoed = t.turn("alice", in_calendar(&format!("Is there anything on {}?", day.format("%B %-d")))).await;
    assert_eq!(answer_checks(&echoed), [(json!("asked_again"), vec![json!("left_out")])], "{:?}", echoed.kinds());
    assert!(echoed.text().contains("offsite"), "{}", echoed.text());

    // An answer that names the day's event is not asked again.
    t.llm.push(Reply::text(&["Just the offsite, at 10."]));
    let before = t.llm.request_count();
    let ok = t.turn("alice", in_calendar(&asked)).await;
    assert!(!ok.kinds().contains(&"answer_check"), "{:?}", ok.kinds());
    assert_eq!(t.llm.request_count() - before, 1);
}
