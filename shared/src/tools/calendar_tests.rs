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
    weekly["rrule"] = json!("FREQ=WEEKLY");
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

// ---- issue 40: tools a 1.5 B model can use ----

const BERLIN: &str = "Europe/Berlin";

async fn run_in(reg: &ToolRegistry, user: &str, name: &str, args: Value) -> ToolOutcome {
    let zone = Some(crate::calendar::Zone::parse(BERLIN).unwrap());
    let ctx = ToolContext { user: UserId::parse(user).unwrap(), scope: ToolScope::Global, zone };
    let call = ToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: args.to_string() },
    };
    reg.execute(&ctx, &call).await
}

fn starts(listed: &Value) -> Vec<String> {
    listed["events"].as_array().unwrap().iter().map(|e| e["start"].as_str().unwrap().to_string()).collect()
}

/// "I have a standup every weekday at 9:30, put it in", said on Sunday
/// 6 Dec: the model wrote today's date; the series starts Monday.
#[tokio::test]
async fn a_weekday_series_asked_on_a_sunday_starts_on_monday_and_skips_the_weekend() {
    let reg = registry();
    let args = json!({"title": "Standup", "start": "2026-12-06T09:30", "duration_minutes": 15,
        "repeat": {"every": "weekday"}});
    let made = run_in(&reg, "alice", "create_calendar_event", args).await;
    assert!(made.ok, "{}", made.content);
    let made = content(&made);
    assert_eq!(made["event"]["recurrence"]["rrule"], "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR");
    assert_eq!(made["event"]["start"], "2026-12-07T08:30:00Z", "Monday 09:30 Berlin");
    assert!(made["note"].as_str().unwrap().contains("Mon 7 Dec 09:30"), "{made}");
    assert!(made["done"].as_str().unwrap().contains("Mon 7 Dec"), "{made}");
    let listed = run_in(&reg, "alice", "list_calendar_events", json!({"from": "2026-12-05", "to": "2026-12-13"})).await;
    let days: Vec<String> = starts(&content(&listed)).iter().map(|s| s[..16].to_string()).collect();
    let want: Vec<String> = (7..=11).map(|d| format!("2026-12-{d:02}T09:30")).collect();
    assert_eq!(days, want);

    // Every other Tuesday and Thursday, four times; the raw rule still works.
    let args = json!({"title": "Gym", "start": "2026-12-08T18:00",
        "repeat": {"every": "week", "interval": 2, "on_days": ["thursday", "tuesday"], "count": 4}});
    let gym = content(&run_in(&reg, "alice", "create_calendar_event", args).await);
    assert_eq!(gym["event"]["recurrence"]["rrule"], "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH;COUNT=4", "{gym}");
    let raw = json!({"title": "Review", "start": "2026-12-08T11:00", "rrule": "FREQ=WEEKLY;BYDAY=TU"});
    assert!(run_in(&reg, "alice", "create_calendar_event", raw).await.ok);
    // Both (the local model's call: a right `repeat`, a broken rule):
    // `repeat` is used and the note says the rule was left out.
    let both = json!({"title": "Check-in", "start": "2026-12-07T16:00", "rrule": "FREQ=WEEKLY;BYDAY=MONDAY",
        "repeat": {"every": "week", "interval": 2, "on_days": ["monday"]}});
    let both = run_in(&reg, "alice", "create_calendar_event", both).await;
    assert!(both.ok, "{}", both.content);
    let both = content(&both);
    assert_eq!(both["event"]["recurrence"]["rrule"], "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO", "{both}");
    assert!(both["note"].as_str().unwrap().contains("`rrule` left out"), "{both}");
}

/// "Cancel tomorrow's standup only": the model's update that set the
/// occurrence's start to the start it had is refused, and the refusal names
/// the call that cancels; the occurrence is named by its date.
#[tokio::test]
async fn an_update_that_changes_nothing_is_refused_and_one_occurrence_is_cancelled_by_its_date() {
    let reg = registry();
    let args = json!({"title": "Standup", "start": "2026-12-07T09:30", "repeat": {"every": "weekday"}});
    let ev = content(&run_in(&reg, "alice", "create_calendar_event", args).await)["event"].clone();
    let id = ev["id"].as_str().unwrap();
    for args in [
        json!({"event_id": id, "instance": "2026-12-08T09:30", "start": "2026-12-08T09:30"}),
        json!({"event_id": id, "instance": "2026-12-08", "scope": "instance"}),
        json!({"event_id": id, "title": "Standup"}),
    ] {
        let o = run_in(&reg, "alice", "update_calendar_event", args.clone()).await;
        assert_eq!(o.error_code.as_deref(), Some("no_change"), "{args}: {}", o.content);
        assert!(o.content.contains("delete_calendar_event"), "{}", o.content);
    }
    let listed = |from: &str| json!({"from": from, "to": from});
    let tuesday = content(&run_in(&reg, "alice", "list_calendar_events", listed("2026-12-08")).await);
    assert_eq!(tuesday["events"][0]["version"], 1, "nothing written");

    let gone = run_in(&reg, "alice", "delete_calendar_event", json!({"event_id": id, "instance": "2026-12-08"})).await;
    assert!(gone.ok, "{}", gone.content);
    assert_eq!(content(&gone)["done"], "Cancelled Standup on Tue 8 Dec 09:30");
    let tuesday = content(&run_in(&reg, "alice", "list_calendar_events", listed("2026-12-08")).await);
    assert_eq!(tuesday["events"], json!([]));
    let wednesday = content(&run_in(&reg, "alice", "list_calendar_events", listed("2026-12-09")).await);
    assert_eq!(starts(&wednesday), vec!["2026-12-09T09:30:00+01:00"]);
    // Moving one occurrence by its date changes only it.
    let moved = json!({"event_id": id, "instance": "2026-12-10", "start": "2026-12-10T10:00"});
    let moved = run_in(&reg, "alice", "update_calendar_event", moved).await;
    assert!(moved.ok, "{}", moved.content);
    let week = content(
        &run_in(&reg, "alice", "list_calendar_events", json!({"from": "2026-12-07", "to": "2026-12-11"})).await,
    );
    let times: Vec<String> = starts(&week).iter().map(|s| s[8..16].to_string()).collect();
    assert_eq!(times, ["07T09:30", "09T09:30", "10T10:00", "11T09:30"]);
    let weekend = json!({"event_id": id, "instance": "2026-12-12", "title": "x"});
    let weekend = run_in(&reg, "alice", "update_calendar_event", weekend).await;
    assert_eq!(weekend.error_code.as_deref(), Some("instance_not_found"));
}

/// "What's on my calendar this week?": the server resolves the week
/// (Monday to Sunday, the user's zone) and lists the whole calendar; a
/// project filter says what it left out.
#[tokio::test]
async fn named_ranges_resolve_in_the_users_zone_and_a_project_filter_says_what_it_hid() {
    use crate::calendar::days::Days;
    let entities = EntityService::new(MemoryEntityStore::new());
    let reg = ToolRegistry::new(entities.clone())
        .with_calendar(CalendarService::new(MemoryEventStore::new(), entities.clone()));
    let alice = UserId::parse("alice").unwrap();
    let new: crate::entities::NewProject = serde_json::from_value(json!({"name": "Launch"})).unwrap();
    let pid = entities.create_project(&alice, new).await.unwrap().data.project.id.to_string();
    let zone = crate::calendar::Zone::parse(BERLIN).unwrap();
    let today = zone.local(chrono::Utc::now()).date_naive();
    let (monday, sunday) = Days::ThisWeek.resolve(today);
    let at = |d: chrono::NaiveDate, title: &str| json!({"title": title, "start": format!("{d}T12:00")});
    let mut linked = at(monday, "Launch prep");
    linked["project_id"] = json!(pid);
    for args in [linked, at(sunday, "Brunch"), at(sunday + chrono::Duration::days(1), "Next Monday")] {
        assert!(run_in(&reg, "alice", "create_calendar_event", args).await.ok);
    }
    let titles = |v: &Value| -> Vec<String> {
        v["events"].as_array().unwrap().iter().map(|e| e["title"].as_str().unwrap().to_string()).collect()
    };
    let week = content(&run_in(&reg, "alice", "list_calendar_events", json!({"range": "this_week"})).await);
    assert_eq!(titles(&week), ["Launch prep", "Brunch"], "{week}");
    assert!(week["days"].as_str().unwrap().starts_with("this_week: Mon "), "{week}");
    let next = content(&run_in(&reg, "alice", "list_calendar_events", json!({"range": "next_week"})).await);
    assert_eq!(titles(&next), ["Next Monday"]);

    let project = json!({"range": "this_week", "project_id": pid});
    let project = content(&run_in(&reg, "alice", "list_calendar_events", project).await);
    assert_eq!(titles(&project), ["Launch prep"]);
    assert!(project["not_in_project"].as_str().unwrap().starts_with("1 other events"), "{project}");
    let theirs = json!({"range": "this_week", "project_id": crate::ids::ProjectId::new().to_string()});
    let theirs = run_in(&reg, "alice", "list_calendar_events", theirs).await;
    assert_eq!(theirs.error_code.as_deref(), Some("link_not_found"));

    for bad in [json!({"from": "2026-12-01"}), json!({})] {
        let o = run_in(&reg, "alice", "list_calendar_events", bad.clone()).await;
        assert_eq!(o.error_code.as_deref(), Some("invalid_arguments"), "{bad}");
        assert!(o.content.contains("range"), "{}", o.content);
    }
    let o = run_in(&reg, "alice", "list_calendar_events", json!({"range": "someday"})).await;
    assert_eq!(o.error_code.as_deref(), Some("invalid_arguments"));
}

/// "Am I free Friday afternoon?" with a 14:00 meeting: the answer has the
/// meeting in `busy`, beside the free slots around it.
#[tokio::test]
async fn free_time_names_the_events_that_make_the_asked_hours_busy() {
    use crate::calendar::days::Days;
    let reg = registry();
    let zone = crate::calendar::Zone::parse(BERLIN).unwrap();
    let (friday, _) = Days::Friday.resolve(zone.local(chrono::Utc::now()).date_naive());
    let meeting = json!({"title": "Budget meeting", "start": format!("{friday}T14:00"), "duration_minutes": 60});
    let morning = json!({"title": "Dentist", "start": format!("{friday}T09:00"), "duration_minutes": 60});
    for args in [meeting, morning] {
        assert!(run_in(&reg, "alice", "create_calendar_event", args).await.ok);
    }
    let asked = json!({"range": "friday", "day_start": "12:00", "day_end": "17:00"});
    let free = run_in(&reg, "alice", "find_free_time", asked).await;
    assert!(free.ok, "{}", free.content);
    let free = content(&free);
    assert_eq!(free["busy"].as_array().unwrap().len(), 1, "the dentist is outside the hours asked: {free}");
    assert_eq!(free["busy"][0]["title"], "Budget meeting");
    assert!(free["busy"][0]["start"].as_str().unwrap().starts_with(&format!("{friday}T14:00")), "{free}");
    let slots: Vec<_> =
        free["slots"].as_array().unwrap().iter().map(|s| s["start"].as_str().unwrap()[11..16].to_string()).collect();
    assert_eq!(slots, ["12:00", "15:00"]);
    assert!(free["days"].as_str().unwrap().starts_with("friday: Fri "), "{free}");
}

/// What the local model got wrong with the first calendar tools (eval,
/// 2026-12-07): it filled an offered `task_id` with a word of the message
/// ("Priya", "yoga") and the refused call ended the turn; it read
/// `every: weekday` as "a day of the week" (Wednesday yoga became Wednesday
/// to Friday). The offered schema has neither; the old word still parses.
#[tokio::test]
async fn create_offers_no_task_id_and_names_monday_to_friday_in_words() {
    let def = ToolName::CreateCalendarEvent.definition();
    let params = &def["function"]["parameters"];
    let text = def.to_string();
    assert!(params["properties"].get("task_id").is_none(), "{params}");
    assert!(text.contains("monday_to_friday") && !text.contains("\"weekday\""), "{text}");
    assert!(text.contains("T09:30"), "the description shows a spoken time as the field's form: {text}");

    let reg = registry();
    for every in ["monday_to_friday", "weekday"] {
        let args = json!({"title": "Standup", "start": "2026-12-07T09:30", "repeat": {"every": every}});
        let made = run_in(&reg, "alice", "create_calendar_event", args).await;
        assert!(made.ok, "{every}: {}", made.content);
        assert_eq!(content(&made)["event"]["recurrence"]["rrule"], "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR");
    }
    let linked = json!({"title": "Yoga", "start": "2026-12-09T19:00", "task_id": "yoga"});
    let refused = run_in(&reg, "alice", "create_calendar_event", linked).await;
    assert!(!refused.ok && refused.content.contains("task_id"), "an unknown field is named: {}", refused.content);
}

/// The local model's "Friday afternoon" call: `{from: "friday", to:
/// "friday"}` (refused before: "friday" is not a date) is the range it
/// named; a list answers with its events in words as well as in `events`.
#[tokio::test]
async fn a_days_name_in_from_and_to_is_that_range_and_a_list_says_its_events_in_words() {
    use crate::calendar::days::Days;
    let reg = registry();
    let zone = crate::calendar::Zone::parse(BERLIN).unwrap();
    let today = zone.local(chrono::Utc::now()).date_naive();
    let (friday, _) = Days::Friday.resolve(today);
    let meeting = json!({"title": "Budget review", "start": format!("{friday}T14:00"), "duration_minutes": 60});
    assert!(run_in(&reg, "alice", "create_calendar_event", meeting).await.ok);

    let asked = json!({"from": "friday", "to": "friday", "day_start": "12:00", "duration_minutes": 120});
    let free = run_in(&reg, "alice", "find_free_time", asked).await;
    assert!(free.ok, "{}", free.content);
    let free = content(&free);
    assert_eq!(free["busy"][0]["title"], "Budget review", "{free}");
    assert!(free["days"].as_str().unwrap().starts_with("friday: Fri "), "{free}");

    for asked in [json!({"from": "Friday"}), json!({"from": "today", "to": "friday"})] {
        let listed = run_in(&reg, "alice", "list_calendar_events", asked.clone()).await;
        assert!(listed.ok, "{asked}: {}", listed.content);
        let listed = content(&listed);
        assert_eq!(listed["events"].as_array().unwrap().len(), 1, "{asked}: {listed}");
        let words = listed["agenda"].as_str().unwrap();
        let want = format!("{} 14:00–15:00 Budget review", friday.format("%a %-d %b"));
        assert_eq!(words, want, "{asked}");
    }
    let nothing = json!({"from": "saturday", "to": "saturday"});
    let listed = content(&run_in(&reg, "alice", "list_calendar_events", nothing).await);
    assert_eq!(listed["agenda"], "no events", "the meeting is on Friday: {listed}");
    let garbage = run_in(&reg, "alice", "list_calendar_events", json!({"from": "someday", "to": "later"})).await;
    assert!(!garbage.ok, "a word that names no range is still refused: {}", garbage.content);
}

/// The local model's `find_free_time {range: friday, from: "…T12:00", to:
/// "…T17:00"}` was refused "not both" and the turn ended in a question:
/// the range says the days, the times in `from`/`to` the hours looked at.
#[tokio::test]
async fn a_range_beside_from_and_to_is_the_days_and_their_times_the_hours() {
    use crate::calendar::days::Days;
    let reg = registry();
    let zone = crate::calendar::Zone::parse(BERLIN).unwrap();
    let today = zone.local(chrono::Utc::now()).date_naive();
    let (friday, _) = Days::Friday.resolve(today);
    let morning = json!({"title": "Standup", "start": format!("{friday}T09:00"), "duration_minutes": 30});
    let meeting = json!({"title": "Budget review", "start": format!("{friday}T14:00"), "duration_minutes": 60});
    for ev in [morning, meeting] {
        assert!(run_in(&reg, "alice", "create_calendar_event", ev).await.ok);
    }
    let asked = json!({"range": "friday", "from": format!("{friday}T12:00"), "to": format!("{friday}T17:00"),
                       "duration_minutes": 120});
    let free = run_in(&reg, "alice", "find_free_time", asked).await;
    assert!(free.ok, "{}", free.content);
    let free = content(&free);
    let busy: Vec<&str> = free["busy"].as_array().unwrap().iter().map(|b| b["title"].as_str().unwrap()).collect();
    assert_eq!(busy, ["Budget review"], "the morning standup is outside the asked hours: {free}");
    assert!(free["note"].as_str().unwrap().contains("`range` (friday) says the days"), "{free}");
    // A length was asked: the call that books the first slot it fits is in the answer.
    let book = format!("create_calendar_event {{\"start\": \"{friday}T12:00\", \"duration_minutes\": 120}}");
    assert_eq!(free["to_book_the_first"], json!(book), "{free}");
    let plain = content(&run_in(&reg, "alice", "find_free_time", json!({"range": "friday"})).await);
    assert!(plain.get("to_book_the_first").is_none(), "no length asked, nothing to book: {plain}");
    // Busy and free in words, the meeting named.
    let day = friday.format("%a %-d %b");
    let want = format!("busy: {day} 14:00–15:00 Budget review. free: {day} 12:00–14:00; {day} 15:00–17:00.");
    assert_eq!(free["agenda"], json!(want), "{free}");

    let listed = run_in(&reg, "alice", "list_calendar_events", json!({"range": "friday", "from": "2020-01-01"})).await;
    assert!(listed.ok, "{}", listed.content);
    assert_eq!(content(&listed)["events"].as_array().unwrap().len(), 2, "{}", listed.content);
}

/// The local model moved "my 3pm tomorrow to 4pm" with `start: "16:00"` and
/// was refused (not a date): a time alone keeps the event's day, or the
/// named occurrence's.
#[tokio::test]
async fn a_time_alone_in_an_update_keeps_the_day() {
    let reg = registry();
    let zone = crate::calendar::Zone::parse(BERLIN).unwrap();
    let tomorrow = zone.local(chrono::Utc::now()).date_naive() + chrono::Duration::days(1);
    let made = json!({"title": "Design review", "start": format!("{tomorrow}T15:00"), "duration_minutes": 60});
    let made = content(&run_in(&reg, "alice", "create_calendar_event", made).await);
    let id = made["event"]["id"].as_str().unwrap().to_string();
    for (said, want) in [("16:00", "16:00"), ("4:30 p.m.", "16:30"), ("9am", "09:00")] {
        let moved = run_in(&reg, "alice", "update_calendar_event", json!({"event_id": id, "start": said})).await;
        assert!(moved.ok, "{said}: {}", moved.content);
        let start = local(zone, content(&moved)["event"]["start"].as_str().unwrap());
        assert_eq!(start, format!("{tomorrow}T{want}"), "{said}");
    }
    // One occurrence of a daily series, named by its date.
    let series = json!({"title": "Standup", "start": format!("{tomorrow}T09:30"), "duration_minutes": 15,
                        "repeat": {"every": "day"}});
    let series = content(&run_in(&reg, "alice", "create_calendar_event", series).await);
    let sid = series["event"]["id"].as_str().unwrap().to_string();
    let day_after = tomorrow + chrono::Duration::days(1);
    let one = json!({"event_id": sid, "instance": day_after.to_string(), "start": "11:00"});
    let one = run_in(&reg, "alice", "update_calendar_event", one).await;
    assert!(one.ok, "{}", one.content);
    let listed = json!({"from": day_after.to_string(), "to": day_after.to_string()});
    let listed = content(&run_in(&reg, "alice", "list_calendar_events", listed).await);
    let standup: Vec<&str> = listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["title"] == "Standup")
        .map(|e| e["start"].as_str().unwrap())
        .collect();
    assert_eq!(standup.len(), 1, "{listed}");
    assert_eq!(local(zone, standup[0]), format!("{day_after}T11:00"), "{standup:?}");
    // Not a time: still refused, saying what a time is.
    let bad = run_in(&reg, "alice", "update_calendar_event", json!({"event_id": id, "start": "soonish"})).await;
    assert!(!bad.ok && bad.content.contains("invalid_time"), "{}", bad.content);
}

/// An RFC 3339 instant as a local time in `zone` (`2026-12-08T16:00`).
fn local(zone: crate::calendar::Zone, instant: &str) -> String {
    let t = chrono::DateTime::parse_from_rfc3339(instant).unwrap().to_utc();
    zone.local(t).format("%Y-%m-%dT%H:%M").to_string()
}

/// "Three sessions in total" became `until` a few days on: a weekly series
/// of one, booked and reported as a series. Refused, saying to use `count`.
#[tokio::test]
async fn a_repeat_that_happens_once_is_refused_and_a_count_is_taken() {
    let reg = registry();
    let zone = crate::calendar::Zone::parse(BERLIN).unwrap();
    let today = zone.local(chrono::Utc::now()).date_naive();
    let (wednesday, _) = crate::calendar::days::Days::Wednesday.resolve(today + chrono::Duration::days(1));
    let start = format!("{wednesday}T19:00");
    let until = (wednesday + chrono::Duration::days(4)).to_string();
    let once = json!({"title": "Yoga", "start": start,
                      "repeat": {"every": "week", "on_days": ["wednesday"], "until": until}});
    let refused = run_in(&reg, "alice", "create_calendar_event", once).await;
    assert!(!refused.ok && refused.content.contains("count"), "{}", refused.content);
    let three =
        json!({"title": "Yoga", "start": start, "repeat": {"every": "week", "on_days": ["wednesday"], "count": 3}});
    let made = run_in(&reg, "alice", "create_calendar_event", three).await;
    assert!(made.ok, "{}", made.content);
    let listed = json!({"from": wednesday.to_string(), "to": (wednesday + chrono::Duration::days(30)).to_string()});
    let listed = content(&run_in(&reg, "alice", "list_calendar_events", listed).await);
    assert_eq!(listed["events"].as_array().unwrap().len(), 3, "{listed}");
    // Every other year happens once in the year looked at, and is a series.
    let biennial = json!({"title": "Reunion", "start": start, "repeat": {"every": "year", "interval": 2}});
    assert!(run_in(&reg, "alice", "create_calendar_event", biennial).await.ok);
}

/// The local model named the occurrence to move by its new time
/// (`instance: "…T11:00"`, the standup being at 09:30): the day names it.
#[tokio::test]
async fn an_instance_named_by_a_time_it_does_not_start_at_is_found_by_its_day() {
    let reg = registry();
    let zone = crate::calendar::Zone::parse(BERLIN).unwrap();
    let tomorrow = zone.local(chrono::Utc::now()).date_naive() + chrono::Duration::days(1);
    let series = json!({"title": "Standup", "start": format!("{tomorrow}T09:30"), "duration_minutes": 15,
                        "repeat": {"every": "day"}});
    let series = content(&run_in(&reg, "alice", "create_calendar_event", series).await);
    let id = series["event"]["id"].as_str().unwrap().to_string();
    let day_after = tomorrow + chrono::Duration::days(1);
    let moved =
        json!({"event_id": id, "instance": format!("{day_after}T11:00"), "start": format!("{day_after}T11:00")});
    let moved = run_in(&reg, "alice", "update_calendar_event", moved).await;
    assert!(moved.ok, "{}", moved.content);
    assert!(content(&moved)["note"].as_str().unwrap().contains(&day_after.to_string()), "{}", moved.content);
    let third = day_after + chrono::Duration::days(1);
    let gone = json!({"event_id": id, "instance": format!("{third}T08:30:00Z")});
    let gone = run_in(&reg, "alice", "delete_calendar_event", gone).await;
    assert!(gone.ok, "a listed instance in UTC still names it: {}", gone.content);
    let listed = json!({"from": tomorrow.to_string(), "to": third.to_string()});
    let listed = content(&run_in(&reg, "alice", "list_calendar_events", listed).await);
    let starts: Vec<String> =
        listed["events"].as_array().unwrap().iter().map(|e| local(zone, e["start"].as_str().unwrap())).collect();
    assert_eq!(starts, [format!("{tomorrow}T09:30"), format!("{day_after}T11:00")], "{listed}");
}

/// "Drop Friday's budget review": the local model sent `instance` with the
/// one-off event's own date four times, refused each time (`not_recurring`).
/// The event's own day names the event; another day is still refused.
#[tokio::test]
async fn an_instance_naming_a_one_off_events_own_day_names_the_event() {
    let reg = registry();
    let zone = crate::calendar::Zone::parse(BERLIN).unwrap();
    let friday = zone.local(chrono::Utc::now()).date_naive() + chrono::Duration::days(3);
    let review = json!({"title": "Budget review", "start": format!("{friday}T14:00")});
    let review = content(&run_in(&reg, "alice", "create_calendar_event", review).await);
    let id = review["event"]["id"].as_str().unwrap().to_string();

    let other_day = json!({"event_id": id, "instance": (friday + chrono::Duration::days(1)).to_string()});
    let refused = run_in(&reg, "alice", "delete_calendar_event", other_day).await;
    assert_eq!(refused.error_code.as_deref(), Some("not_recurring"), "{}", refused.content);

    let moved = json!({"event_id": id, "instance": format!("{friday}T14:00"), "start": format!("{friday}T15:00")});
    let moved = run_in(&reg, "alice", "update_calendar_event", moved).await;
    assert!(moved.ok, "{}", moved.content);
    assert!(content(&moved)["note"].as_str().unwrap().contains("does not repeat"), "{}", moved.content);

    let gone =
        run_in(&reg, "alice", "delete_calendar_event", json!({"event_id": id, "instance": friday.to_string()})).await;
    assert!(gone.ok, "{}", gone.content);
    let listed = json!({"from": friday.to_string(), "to": friday.to_string()});
    let listed = content(&run_in(&reg, "alice", "list_calendar_events", listed).await);
    assert_eq!(listed["events"], json!([]), "{listed}");
}

/// "Move my 3pm tomorrow to 4pm": the local model sent the lunch's id with
/// the 3pm's title, and the lunch became a second "Design review". A title
/// that is another nearby event's is refused naming both ids; a new title is
/// a rename.
#[tokio::test]
async fn an_update_with_another_events_title_is_refused_naming_both_ids() {
    let reg = registry();
    let zone = crate::calendar::Zone::parse(BERLIN).unwrap();
    let tomorrow = zone.local(chrono::Utc::now()).date_naive() + chrono::Duration::days(1);
    let make = |title: &str, at: &str| json!({"title": title, "start": format!("{tomorrow}T{at}")});
    let review = content(&run_in(&reg, "alice", "create_calendar_event", make("Design review", "15:00")).await);
    let lunch = content(&run_in(&reg, "alice", "create_calendar_event", make("Lunch", "12:00")).await);
    let (review, lunch) = (review["event"]["id"].as_str().unwrap(), lunch["event"]["id"].as_str().unwrap());

    let wrong = json!({"event_id": lunch, "title": "design review", "start": format!("{tomorrow}T16:00")});
    let refused = run_in(&reg, "alice", "update_calendar_event", wrong).await;
    assert_eq!(refused.error_code.as_deref(), Some("title_of_another_event"), "{}", refused.content);
    assert!(refused.content.contains(review) && refused.content.contains(lunch), "{}", refused.content);

    let right = json!({"event_id": review, "title": "Design review", "start": format!("{tomorrow}T16:00")});
    assert!(run_in(&reg, "alice", "update_calendar_event", right).await.ok);
    let renamed =
        run_in(&reg, "alice", "update_calendar_event", json!({"event_id": lunch, "title": "Team lunch"})).await;
    assert!(renamed.ok, "{}", renamed.content);
    let listed = json!({"from": tomorrow.to_string(), "to": tomorrow.to_string()});
    let listed = content(&run_in(&reg, "alice", "list_calendar_events", listed).await);
    let got: Vec<(String, String)> = listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["title"].as_str().unwrap().to_string(), local(zone, e["start"].as_str().unwrap())))
        .collect();
    assert_eq!(
        got,
        [
            ("Team lunch".to_string(), format!("{tomorrow}T12:00")),
            ("Design review".to_string(), format!("{tomorrow}T16:00"))
        ]
    );
}
