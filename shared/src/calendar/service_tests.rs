//! The calendar's rules over the in-memory store: time zones and DST, all-day
//! dates, instance and "this and following" edits, ownership, bad input.

use super::*;
use crate::entities::store::MemoryEntityStore;
use crate::entities::EntityService;
use crate::ids::{EventId, UserId};
use store::{EventStore, MemoryEventStore};

pub(super) fn svc() -> CalendarService {
    CalendarService::new(MemoryEventStore::new(), EntityService::new(MemoryEntityStore::new()))
}

pub(super) fn user(n: &str) -> UserId {
    UserId::parse(n).unwrap()
}

pub(super) fn new(title: &str, start: &str, tz: &str) -> NewEvent {
    NewEvent {
        title: title.into(),
        start: start.into(),
        end: None,
        duration_minutes: Some(60),
        timezone: Some(tz.into()),
        location: None,
        description: None,
        recurrence: None,
        project_id: None,
        task_id: None,
    }
}

pub(super) fn weekly(title: &str, start: &str, tz: &str) -> NewEvent {
    let rec = RecurrenceInput { rrule: "FREQ=WEEKLY".into(), exdates: vec![], rdates: vec![] };
    NewEvent { recurrence: Some(rec), ..new(title, start, tz) }
}

pub(super) fn q(from: &str, to: &str, tz: &str) -> ListQuery {
    ListQuery { from: from.into(), to: to.into(), timezone: Some(tz.into()), project_id: None }
}

pub(super) async fn starts(s: &CalendarService, u: &UserId, query: ListQuery) -> Vec<String> {
    s.list(u, &query).await.unwrap().events.into_iter().map(|e| e.start).collect()
}

#[tokio::test]
async fn a_weekly_berlin_event_stays_at_nine_across_dst() {
    let (s, u) = (svc(), user("alice"));
    s.create(&u, &weekly("Standup", "2026-03-23T09:00", "Europe/Berlin")).await.unwrap();
    let got = starts(&s, &u, q("2026-03-23", "2026-04-05", "Europe/Berlin")).await;
    assert_eq!(got, vec!["2026-03-23T09:00:00+01:00", "2026-03-30T09:00:00+02:00"]);
    // The same instants read in UTC: the wall clock held, the instant moved.
    let utc = starts(&s, &u, q("2026-03-23", "2026-04-05", "UTC")).await;
    assert_eq!(utc, vec!["2026-03-23T08:00:00Z", "2026-03-30T07:00:00Z"]);
}

#[tokio::test]
async fn an_all_day_event_is_a_date_and_a_late_la_event_lists_on_its_local_day() {
    let (s, u) = (svc(), user("alice"));
    let mut day = new("Holiday", "2026-12-24", "Europe/Berlin");
    day.duration_minutes = None;
    let made = s.create(&u, &day).await.unwrap().event.unwrap();
    assert_eq!((made.start.to_string(), made.end.to_string()), ("2026-12-24".into(), "2026-12-25".into()));
    // Read in Los Angeles it is still the 24th, whole.
    let la = s.list(&u, &q("2026-12-24", "2026-12-24", "America/Los_Angeles")).await.unwrap();
    assert_eq!((la.events[0].start.as_str(), la.events[0].all_day), ("2026-12-24", true));
    assert!(s.list(&u, &q("2026-12-25", "2026-12-25", "America/Los_Angeles")).await.unwrap().events.is_empty());

    let late = NewEvent { duration_minutes: Some(20), ..new("Late call", "2026-06-10T23:30", "America/Los_Angeles") };
    s.create(&u, &late).await.unwrap();
    let on_10th = starts(&s, &u, q("2026-06-10", "2026-06-10", "America/Los_Angeles")).await;
    assert_eq!(on_10th, vec!["2026-06-10T23:30:00-07:00"], "the local day, not the UTC one (the 11th)");
    assert!(starts(&s, &u, q("2026-06-11", "2026-06-11", "America/Los_Angeles")).await.is_empty());
}

#[tokio::test]
async fn editing_one_instance_changes_only_that_instance() {
    let (s, u) = (svc(), user("alice"));
    let ev = s.create(&u, &weekly("Review", "2026-11-02T15:00", "Europe/Berlin")).await.unwrap().event.unwrap();
    let target = Target { instance: Some("2026-11-09T14:00:00Z".into()), scope: None };
    let moved = EventChanges { start: Some("2026-11-09T16:00".into()), ..Default::default() };
    let w = s.update(&u, &ev.id, &target, &moved, None).await.unwrap();
    assert_eq!(w.summary, "Moved Review to Mon 9 Nov 16:00 (this occurrence)");
    let got = starts(&s, &u, q("2026-11-02", "2026-11-22", "Europe/Berlin")).await;
    assert_eq!(got, vec!["2026-11-02T15:00:00+01:00", "2026-11-09T16:00:00+01:00", "2026-11-16T15:00:00+01:00"]);
    let stored = s.get(&u, &ev.id).await.unwrap();
    assert_eq!(stored.overrides.len(), 1, "kept as an override");
    assert_eq!(stored.version, 2);
}

#[tokio::test]
async fn deleting_this_and_following_ends_the_series_there() {
    let (s, u) = (svc(), user("alice"));
    let ev = s.create(&u, &weekly("Gym", "2026-11-02T07:00", "Europe/Berlin")).await.unwrap().event.unwrap();
    let target = Target { instance: Some("2026-11-16T06:00:00Z".into()), scope: Some(EditScope::Following) };
    s.delete(&u, &ev.id, &target, None).await.unwrap();
    let got = starts(&s, &u, q("2026-11-01", "2026-12-31", "Europe/Berlin")).await;
    assert_eq!(got, vec!["2026-11-02T07:00:00+01:00", "2026-11-09T07:00:00+01:00"]);
    // Deleting one instance of what is left keeps the other.
    let one = Target { instance: Some("2026-11-02T06:00:00Z".into()), scope: None };
    s.delete(&u, &ev.id, &one, None).await.unwrap();
    assert_eq!(starts(&s, &u, q("2026-11-01", "2026-12-31", "Europe/Berlin")).await, vec!["2026-11-09T07:00:00+01:00"]);
}

#[tokio::test]
async fn changing_this_and_following_splits_the_series() {
    let (s, u) = (svc(), user("alice"));
    let ev = s.create(&u, &weekly("1:1", "2026-11-02T10:00", "Europe/Berlin")).await.unwrap().event.unwrap();
    let target = Target { instance: Some("2026-11-16T09:00:00Z".into()), scope: Some(EditScope::Following) };
    let c = EventChanges { start: Some("2026-11-17T11:00".into()), ..Default::default() };
    let w = s.update(&u, &ev.id, &target, &c, None).await.unwrap();
    assert_eq!(w.patch.changes.len(), 2, "the ended series and the new one");
    let got = starts(&s, &u, q("2026-11-01", "2026-11-30", "Europe/Berlin")).await;
    assert_eq!(
        got,
        vec![
            "2026-11-02T10:00:00+01:00",
            "2026-11-09T10:00:00+01:00",
            "2026-11-17T11:00:00+01:00",
            "2026-11-24T11:00:00+01:00"
        ]
    );
}

#[tokio::test]
async fn another_users_event_is_not_found_and_untouched() {
    let s = svc();
    let (alice, bob) = (user("alice"), user("bob"));
    let ev = s.create(&alice, &new("Private", "2026-11-02T10:00", "UTC")).await.unwrap().event.unwrap();
    let c = EventChanges { title: Some("hijacked".into()), ..Default::default() };
    assert_eq!(s.get(&bob, &ev.id).await.unwrap_err().code(), "event_not_found");
    assert_eq!(s.update(&bob, &ev.id, &Target::default(), &c, None).await.unwrap_err().code(), "event_not_found");
    assert_eq!(s.delete(&bob, &ev.id, &Target::default(), None).await.unwrap_err().code(), "event_not_found");
    assert!(s.list(&bob, &q("2026-11-01", "2026-11-30", "UTC")).await.unwrap().events.is_empty());
    assert_eq!(s.get(&alice, &ev.id).await.unwrap(), ev);
}

#[tokio::test]
async fn bad_input_is_refused_with_nothing_written() {
    let (s, u) = (svc(), user("alice"));
    let bad_zone = new("x", "2026-11-02T10:00", "Mars/Base");
    assert_eq!(s.create(&u, &bad_zone).await.unwrap_err().code(), "invalid_timezone");
    let backwards = NewEvent {
        end: Some("2026-11-02T09:00".into()),
        duration_minutes: None,
        ..new("x", "2026-11-02T10:00", "UTC")
    };
    assert_eq!(s.create(&u, &backwards).await.unwrap_err().code(), "end_before_start");
    for rule in ["FREQ=FORTNIGHTLY", "FREQ=MINUTELY", "nonsense"] {
        let mut e = weekly("x", "2026-11-02T10:00", "UTC");
        e.recurrence.as_mut().unwrap().rrule = rule.into();
        assert_eq!(s.create(&u, &e).await.unwrap_err().code(), "invalid_rrule", "{rule}");
    }
    assert_eq!(s.list(&u, &q("2026-01-01", "2027-06-01", "UTC")).await.unwrap_err().code(), "range_too_long");
    assert_eq!(s.list(&u, &q("2026-06-01", "2026-01-01", "UTC")).await.unwrap_err().code(), "end_before_start");
    assert!(s.list(&u, &q("2026-01-01", "2026-12-31", "UTC")).await.unwrap().events.is_empty(), "nothing written");
}

#[tokio::test]
async fn an_unbounded_series_lists_a_capped_number_and_says_so() {
    let (s, u) = (svc(), user("alice"));
    let mut e = weekly("Hourly ping", "2026-01-01T00:00", "UTC");
    e.recurrence.as_mut().unwrap().rrule = "FREQ=HOURLY".into();
    e.duration_minutes = Some(10);
    s.create(&u, &e).await.unwrap();
    let list = s.list(&u, &q("2026-01-01", "2026-03-01", "UTC")).await.unwrap();
    assert_eq!(list.events.len(), recur::MAX_INSTANCES);
    assert!(list.truncated);
}

#[tokio::test]
async fn a_stale_version_is_a_conflict_and_writes_nothing() {
    let (s, u) = (svc(), user("alice"));
    let ev = s.create(&u, &new("Plan", "2026-11-02T10:00", "UTC")).await.unwrap().event.unwrap();
    let c = EventChanges { title: Some("Plan v2".into()), ..Default::default() };
    s.update(&u, &ev.id, &Target::default(), &c, Some(1)).await.unwrap();
    let e = s.update(&u, &ev.id, &Target::default(), &c, Some(1)).await.unwrap_err();
    assert!(matches!(e, CalendarError::Conflict { expected: 1, current_version: 2 }), "{e:?}");
    assert_eq!(s.delete(&u, &EventId::new(), &Target::default(), None).await.unwrap_err().code(), "event_not_found");
}

#[tokio::test]
async fn free_time_skips_busy_occurrences() {
    let (s, u) = (svc(), user("alice"));
    s.create(&u, &new("Busy", "2026-12-01T10:00", "Europe/Berlin")).await.unwrap();
    let fq = FreeQuery {
        from: "2026-12-01".into(),
        to: "2026-12-01".into(),
        duration_minutes: 120,
        timezone: Some("Europe/Berlin".into()),
        ..Default::default()
    };
    let slots = s.free_time(&u, &fq).await.unwrap().slots;
    let got: Vec<_> = slots.iter().map(|x| (x.start.as_str(), x.end.as_str())).collect();
    assert_eq!(got, vec![("2026-12-01T11:00:00+01:00", "2026-12-01T17:00:00+01:00")]);
}

#[tokio::test]
async fn a_project_filter_naming_no_project_of_the_user_is_refused_not_empty() {
    let (s, u) = (svc(), user("alice"));
    s.create(&u, &new("Standup", "2026-11-02T10:00", "UTC")).await.unwrap();
    let mut query = q("2026-11-02", "2026-11-02", "UTC");
    query.project_id = Some(crate::ids::ProjectId::parse("your_project_id").unwrap());
    assert_eq!(s.list(&u, &query).await.unwrap_err().code(), "link_not_found");
}

/// Defect 4: eight one-hour weekday series fill 09:00–17:00; over four
/// months they have more occurrences than a listing shows (500), and free
/// time must still find none (it found 20 slots from 1 April before).
#[tokio::test]
async fn free_time_counts_occurrences_past_the_listing_cap() {
    let (s, u) = (svc(), user("alice"));
    for h in 9..17 {
        let mut e = weekly(&format!("Block {h}"), &format!("2026-01-05T{h:02}:00"), "Europe/Berlin");
        e.recurrence.as_mut().unwrap().rrule = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR".into();
        s.create(&u, &e).await.unwrap();
    }
    let list = s.list(&u, &q("2026-01-05", "2026-04-30", "Europe/Berlin")).await.unwrap();
    assert!(list.truncated, "the listing is capped here: {}", list.events.len());
    let fq = FreeQuery {
        from: "2026-01-05".into(),
        to: "2026-04-30".into(),
        duration_minutes: 30,
        timezone: Some("Europe/Berlin".into()),
        ..Default::default()
    };
    let free = s.free_time(&u, &fq).await.unwrap();
    assert_eq!(free.slots, vec![], "every working hour is busy");
    // The weekend is free, and found past the cap too.
    let weekends = s.free_time(&u, &FreeQuery { include_weekends: true, ..fq }).await.unwrap();
    let last = weekends.slots.last().unwrap();
    assert!(weekends.slots.iter().all(|x| x.minutes == 480), "{:?}", weekends.slots);
    assert_eq!(weekends.slots.len(), free::MAX_SLOTS);
    assert_eq!(weekends.slots[0].start, "2026-01-10T09:00:00+01:00");
    assert_eq!(last.start, "2026-03-15T09:00:00+01:00");
}

/// A rule that repeats too often to expand whole over the range: refused
/// with its code, not answered from part of the range.
#[tokio::test]
async fn free_time_refuses_a_range_it_cannot_cover() {
    let (s, u) = (svc(), user("alice"));
    let mut e = weekly("Pings", "2026-01-05T00:00", "UTC");
    // Hourly, at every minute: 1,440 a day, over the expansion's limit in 46 days.
    let minutes: Vec<String> = (0..60).map(|m| m.to_string()).collect();
    e.recurrence.as_mut().unwrap().rrule = format!("FREQ=HOURLY;BYMINUTE={}", minutes.join(","));
    e.duration_minutes = Some(1);
    s.create(&u, &e).await.unwrap();
    let fq = FreeQuery {
        from: "2026-01-05".into(),
        to: "2026-03-31".into(),
        duration_minutes: 30,
        timezone: Some("UTC".into()),
        ..Default::default()
    };
    assert_eq!(s.free_time(&u, &fq).await.unwrap_err().code(), "range_not_covered");
    let short = FreeQuery { to: "2026-01-06".into(), ..fq };
    assert_eq!(s.free_time(&u, &short).await.unwrap().slots, vec![], "a day of pings is a day busy");
}

/// A held event whose recurrence cannot be expanded (synced from a server
/// that took a rule we refuse) is left out and named; the rest lists.
#[tokio::test]
async fn an_event_that_cannot_be_expanded_is_named_and_the_rest_lists() {
    let store = std::sync::Arc::new(MemoryEventStore::new());
    let s = CalendarService::new(store.clone(), EntityService::new(MemoryEntityStore::new()));
    let u = user("alice");
    let good = s.create(&u, &new("Dentist", "2026-11-02T10:00", "UTC")).await.unwrap().event.unwrap();
    let mut bad = s.create(&u, &weekly("Odd rule", "2026-11-02T12:00", "UTC")).await.unwrap().event.unwrap();
    bad.recurrence.as_mut().unwrap().rrule = "FREQ=YEARLY;BYWEEKNO=60".into();
    bad.version += 1;
    store.put(&u, &bad, Some(bad.version - 1)).await.unwrap();

    let list = s.list(&u, &q("2026-11-01", "2026-11-30", "UTC")).await.unwrap();
    assert_eq!(list.events.iter().map(|e| &e.event_id).collect::<Vec<_>>(), vec![&good.id]);
    assert_eq!(list.skipped.len(), 1, "{:?}", list.skipped);
    let skipped = &list.skipped[0];
    assert_eq!((skipped.event_id.as_ref(), skipped.title.as_deref()), (Some(&bad.id), Some("Odd rule")));
    assert_eq!(skipped.reason, SkipReason::Unexpandable);
    assert!(skipped.detail.contains("BYWEEKNO"), "{}", skipped.detail);

    let fq = FreeQuery {
        from: "2026-11-02".into(),
        to: "2026-11-02".into(),
        duration_minutes: 60,
        timezone: Some("UTC".into()),
        ..Default::default()
    };
    let free = s.free_time(&u, &fq).await.unwrap();
    assert_eq!(free.slots.len(), 2, "around the dentist: {:?}", free.slots);
    assert_eq!(free.skipped, list.skipped);
    let block =
        agenda::agenda(&s, &u, Some(Zone::UTC), 7, "2026-11-01T08:00:00Z".parse().unwrap(), "").await.unwrap().block;
    assert!(block.contains("“Dentist” 10:00–11:00"), "{block}");
    assert!(block.contains("Not shown, could not be read (1 event"), "{block}");
    assert!(block.contains("“Odd rule”: invalid RRULE"), "{block}");
}

/// A question naming its days comes with their events for the answer check
/// (`claims::shown`): the project's only when the message names it; none for
/// a change asked for or a clock time said.
#[tokio::test]
async fn a_question_naming_days_shows_their_events_for_the_answer_to_name() {
    let entities = EntityService::new(crate::entities::store::MemoryEntityStore::new());
    let s = CalendarService::new(MemoryEventStore::new(), entities.clone());
    let u = user("alice");
    let launch: crate::entities::NewProject = serde_json::from_value(serde_json::json!({"name": "Launch"})).unwrap();
    let pid = entities.create_project(&u, launch).await.unwrap().data.project.id;
    let rehearsal = NewEvent { project_id: Some(pid), ..new("Launch rehearsal", "2026-12-08T10:00", "Europe/Berlin") };
    s.create(&u, &rehearsal).await.unwrap();
    s.create(&u, &new("Dentist", "2026-12-08T15:00", "Europe/Berlin")).await.unwrap();
    s.create(&u, &new("Offsite", "2026-12-16T10:00", "Europe/Berlin")).await.unwrap();
    let now = "2026-12-07T09:00:00Z".parse().unwrap();
    let berlin = Some(Zone::parse("Europe/Berlin").unwrap());
    let shown = |m: &'static str| {
        let s = &s;
        let u = &u;
        async move { agenda::agenda(s, u, berlin, 7, now, m).await.unwrap().shown }
    };
    let titles = |s: Option<crate::claims::shown::Shown>| -> Vec<String> {
        s.map(|s| s.items.into_iter().map(|i| i.title).collect()).unwrap_or_default()
    };
    let date = shown("What have I got on December 16?").await.unwrap();
    assert_eq!(date.items.len(), 1);
    assert_eq!(date.items[0].line, "“Offsite” Wed 16 Dec 10:00–11:00", "{date:?}");
    assert!(date.asked.contains("Wednesday 16 December"), "{}", date.asked);
    let few = titles(shown("Give me a rundown of everything I have coming up over the next few days.").await);
    assert_eq!(few, ["Launch rehearsal", "Dentist"]);
    let project = shown("Only the Launch project: what's coming up in the next few days?").await.unwrap();
    assert_eq!(
        project.items.iter().map(|i| i.line.as_str()).collect::<Vec<_>>(),
        ["“Launch rehearsal” Tue 8 Dec 10:00–11:00 (project “Launch”)"]
    );
    assert_eq!(titles(shown("Is anything on Wednesday next week?").await), ["Offsite"]);
    // A change is the claims check's; a time said is about that hour; no day named, nothing shown.
    assert_eq!(shown("Cancel everything tomorrow.").await, None);
    assert_eq!(shown("Am I free tomorrow at 3pm?").await, None);
    assert_eq!(shown("How does the calendar work?").await, None);
}

/// An occurrence's `instance` in the block is its local start, as the tools
/// read it: the local model copied the UTC form's `Z` into a new `start`.
#[tokio::test]
async fn the_block_names_an_occurrence_by_its_local_start() {
    let (s, u) = (svc(), user("alice"));
    s.create(&u, &weekly("Standup", "2026-12-01T09:30", "Europe/Berlin")).await.unwrap();
    let berlin = Some(Zone::parse("Europe/Berlin").unwrap());
    let now = "2026-12-07T09:00:00Z".parse().unwrap();
    let block = agenda::agenda(&s, &u, berlin, 7, now, "").await.unwrap().block;
    assert!(block.contains(", instance 2026-12-08T09:30)"), "{block}");
    assert!(!block.contains("08:30:00Z"), "{block}");
}
