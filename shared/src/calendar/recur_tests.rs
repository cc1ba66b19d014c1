//! RFC 5545 §3.3.10 as the world writes it, through the service: `UNTIL` in
//! each form clients write it, `COUNT` across a "this and following" split,
//! and a series moved across a DST change (or to another zone) keeping its
//! exceptions on their instances.
//!
//! Expected instants were computed independently with python-dateutil 2.9 /
//! `dateutil.rrule` 4.0 and `zoneinfo` (tzdata), e.g.
//! `rrule(WEEKLY, dtstart=datetime(2026,3,31,10,0,tzinfo=ZoneInfo("Europe/Berlin")))`
//! in an `rruleset` with its `exdate`: each test names the call.

use super::service_tests::{new, q, starts, svc, user, weekly};
use super::*;

fn all_day(title: &str, start: &str, rrule: &str) -> NewEvent {
    let rec = RecurrenceInput { rrule: rrule.into(), exdates: vec![], rdates: vec![] };
    NewEvent { duration_minutes: None, recurrence: Some(rec), ..new(title, start, "Europe/Berlin") }
}

fn series(title: &str, start: &str, rrule: &str) -> NewEvent {
    let rec = RecurrenceInput { rrule: rrule.into(), exdates: vec![], rdates: vec![] };
    NewEvent { recurrence: Some(rec), ..new(title, start, "Europe/Berlin") }
}

#[tokio::test]
async fn an_all_day_series_ends_on_its_date_until_and_can_be_cut_at_a_following_delete() {
    let (s, u) = (svc(), user("alice"));
    // dateutil: [d.date() for d in rrulestr("FREQ=WEEKLY;UNTIL=20260610", dtstart=datetime(2026,5,6))]
    let weeks = ["2026-05-06", "2026-05-13", "2026-05-20", "2026-05-27", "2026-06-03", "2026-06-10"];
    let ev = s.create(&u, &all_day("Weekly all-day", "2026-05-06", "FREQ=WEEKLY;UNTIL=20260610")).await.unwrap();
    let id = ev.event.unwrap().id;
    assert_eq!(starts(&s, &u, q("2026-05-01", "2026-07-31", "Europe/Berlin")).await, weeks);

    // Outlook's form: UNTIL as the UTC instant the last day begins in Berlin
    // (dateutil: rrule(WEEKLY, dtstart=datetime(2026,5,6,tzinfo=Berlin),
    // until=datetime(2026,6,9,22,tzinfo=UTC)) gives the same six days).
    let (s2, u2) = (svc(), user("bob"));
    s2.create(&u2, &all_day("Outlook", "2026-05-06", "FREQ=WEEKLY;UNTIL=20260609T220000Z")).await.unwrap();
    assert_eq!(starts(&s2, &u2, q("2026-05-01", "2026-07-31", "Europe/Berlin")).await, weeks);

    // "This and following" writes a date UNTIL itself, and reads it back.
    let target = Target { instance: Some("2026-05-27".into()), scope: Some(EditScope::Following) };
    s.delete(&u, &id, &target, None).await.unwrap();
    assert_eq!(starts(&s, &u, q("2026-05-01", "2026-07-31", "Europe/Berlin")).await, weeks[..3]);
    assert_eq!(s.get(&u, &id).await.unwrap().recurrence.unwrap().rrule, "FREQ=WEEKLY;UNTIL=20260526");
    // And a change of the following ones splits an all-day series too.
    let target = Target { instance: Some("2026-05-13".into()), scope: Some(EditScope::Following) };
    let c = EventChanges { title: Some("Renamed".into()), ..Default::default() };
    s.update(&u, &id, &target, &c, None).await.unwrap();
    let titles: Vec<_> = s.list(&u, &q("2026-05-01", "2026-07-31", "UTC")).await.unwrap().events;
    let titles: Vec<_> = titles.iter().map(|e| (e.start.as_str(), e.title.as_str())).collect();
    assert_eq!(titles, [("2026-05-06", "Weekly all-day"), ("2026-05-13", "Renamed"), ("2026-05-20", "Renamed")]);
}

#[tokio::test]
async fn a_timed_series_reads_a_date_or_floating_until_in_its_own_zone() {
    // Daily 09:00 Berlin from 1 June. dateutil:
    // rrule(DAILY, dtstart=datetime(2026,6,1,9,0,tzinfo=Berlin), until=datetime(2026,6,5,23,59,59,tzinfo=Berlin))
    // (a DATE UNTIL bounds inclusively: the whole day; dateutil's own parser
    // would read it as midnight and drop the 5th) and until=datetime(2026,6,5,9,0,tzinfo=Berlin)
    // (a floating UNTIL is wall-clock time in the event's zone): both 5 days.
    let five = ["2026-06-01T07:00:00Z", "2026-06-02T07:00:00Z", "2026-06-03T07:00:00Z", "2026-06-04T07:00:00Z"];
    let five: Vec<String> = five.iter().map(|s| s.to_string()).chain(["2026-06-05T07:00:00Z".into()]).collect();
    for (rule, want) in [
        ("FREQ=DAILY;UNTIL=20260605", &five[..]),
        ("FREQ=DAILY;UNTIL=20260605T090000", &five[..]),
        ("FREQ=DAILY;UNTIL=20260605T070000Z", &five[..]),
        ("FREQ=DAILY;UNTIL=20260605T065959Z", &five[..4]),
    ] {
        let (s, u) = (svc(), user("alice"));
        s.create(&u, &series("Daily", "2026-06-01T09:00", rule)).await.unwrap_or_else(|e| panic!("{rule}: {e}"));
        assert_eq!(starts(&s, &u, q("2026-05-25", "2026-06-30", "UTC")).await, want, "{rule}");
    }
    // A floating UNTIL the clocks skip or repeat in Berlin names no one instant: refused.
    let (s, u) = (svc(), user("alice"));
    for rule in ["FREQ=DAILY;UNTIL=20260329T023000", "FREQ=DAILY;UNTIL=20261025T023000"] {
        let e = s.create(&u, &series("Daily", "2026-03-20T09:00", rule)).await.unwrap_err();
        assert_eq!(e.code(), "invalid_rrule", "{rule}");
    }
    for bad in ["FREQ=DAILY;UNTIL=2026-06-05", "FREQ=DAILY;UNTIL=20260605T0900", "FREQ=DAILY;UNTIL=1;UNTIL=2"] {
        assert_eq!(s.create(&u, &series("x", "2026-06-01T09:00", bad)).await.unwrap_err().code(), "invalid_rrule");
    }
}

#[tokio::test]
async fn count_with_until_is_refused_on_write_and_a_stored_one_still_lists() {
    let (s, u) = (svc(), user("alice"));
    let both = series("Both", "2026-06-01T09:00", "FREQ=DAILY;COUNT=5;UNTIL=20260620T000000Z");
    assert_eq!(s.create(&u, &both).await.unwrap_err().code(), "invalid_rrule");
    let daily = NewEvent { timezone: Some("UTC".into()), ..series("Daily", "2026-06-01T09:00", "FREQ=DAILY;COUNT=5") };
    let ev = s.create(&u, &daily).await.unwrap().event.unwrap();
    let both = "FREQ=DAILY;UNTIL=20260603T000000Z;COUNT=5";
    let c = EventChanges { recurrence: Some(rule(both)), ..Default::default() };
    assert_eq!(s.update(&u, &ev.id, &Target::default(), &c, None).await.unwrap_err().code(), "invalid_rrule");
    assert_eq!(s.get(&u, &ev.id).await.unwrap(), ev, "nothing written");

    // As a calendar server may hold it: both bounds hold, the first to end
    // it wins. dateutil (which warns but honours both):
    // rrulestr("FREQ=DAILY;COUNT=5;UNTIL=20260603T000000Z", dtstart=datetime(2026,6,1,9,tzinfo=UTC))
    let mut held = ev.clone();
    held.recurrence.as_mut().unwrap().rrule = both.into();
    let (from, to) = service::range("2026-06-01", "2026-06-30", Zone::UTC).unwrap();
    let (got, _) = recur::occurrences(&held, from, to, Zone::UTC, 50).unwrap();
    let got: Vec<String> = got.iter().map(|o| o.start.to_string()).collect();
    assert_eq!(got, ["2026-06-01T09:00:00Z", "2026-06-02T09:00:00Z"]);
    // Renaming such a series writes no rule of ours: allowed.
    let renamed = edit::change_series(&held, &EventChanges { title: Some("Renamed".into()), ..Default::default() });
    assert_eq!(renamed.unwrap().title, "Renamed");
}

fn rule(rrule: &str) -> RecurrenceInput {
    RecurrenceInput { rrule: rrule.into(), exdates: vec![], rdates: vec![] }
}

/// The listing's `(start, title)` pairs in UTC.
async fn listed(s: &CalendarService, u: &crate::ids::UserId, from: &str, to: &str, tz: &str) -> Vec<(String, String)> {
    let got = s.list(u, &q(from, to, tz)).await.unwrap().events;
    got.into_iter().map(|e| (e.start, e.title)).collect()
}

#[tokio::test]
async fn a_following_split_of_a_count_series_counts_rule_dates_not_exdates_or_rdates() {
    // Weekly 09:00 Berlin from Tue 6 Jan, COUNT=10. dateutil:
    // list(rrule(WEEKLY, count=10, dtstart=datetime(2026,1,6,9,0,tzinfo=Berlin))), in UTC:
    let rule_dates = [
        "2026-01-06T08:00:00Z",
        "2026-01-13T08:00:00Z",
        "2026-01-20T08:00:00Z",
        "2026-01-27T08:00:00Z",
        "2026-02-03T08:00:00Z",
        "2026-02-10T08:00:00Z",
        "2026-02-17T08:00:00Z",
        "2026-02-24T08:00:00Z",
        "2026-03-03T08:00:00Z",
        "2026-03-10T08:00:00Z",
    ];
    let split = Target { instance: Some(rule_dates[6].into()), scope: Some(EditScope::Following) };
    let c = EventChanges { title: Some("Later".into()), ..Default::default() };
    let title = |i: usize| if i >= 6 { "Later" } else { "Weekly" };

    // An EXDATE before the split (the 3rd): RFC 5545 counts it in COUNT all the same.
    let (s, u) = (svc(), user("alice"));
    let mut input = series("Weekly", "2026-01-06T09:00", "FREQ=WEEKLY;COUNT=10");
    input.recurrence.as_mut().unwrap().exdates = vec!["2026-01-20T09:00".into()];
    let ev = s.create(&u, &input).await.unwrap().event.unwrap();
    let w = s.update(&u, &ev.id, &split, &c, None).await.unwrap();
    assert_eq!(w.event.unwrap().recurrence.unwrap().rrule, "FREQ=WEEKLY;COUNT=4");
    let want: Vec<_> = rule_dates
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(i, d)| (d.to_string(), title(i).to_string()))
        .collect();
    assert_eq!(listed(&s, &u, "2026-01-01", "2026-06-30", "UTC").await, want);

    // An RDATE before the split (Thu 8 Jan): not one of the rule's instances.
    let (s, u) = (svc(), user("alice"));
    let mut input = series("Weekly", "2026-01-06T09:00", "FREQ=WEEKLY;COUNT=10");
    input.recurrence.as_mut().unwrap().rdates = vec!["2026-01-08T09:00".into()];
    let ev = s.create(&u, &input).await.unwrap().event.unwrap();
    s.update(&u, &ev.id, &split, &c, None).await.unwrap();
    let mut want: Vec<_> = rule_dates.iter().enumerate().map(|(i, d)| (d.to_string(), title(i).to_string())).collect();
    want.insert(1, ("2026-01-08T08:00:00Z".into(), "Weekly".into()));
    assert_eq!(listed(&s, &u, "2026-01-01", "2026-06-30", "UTC").await, want);
}

#[tokio::test]
async fn moving_a_series_across_dst_keeps_its_exception_and_override_on_their_instances() {
    // Weekly 09:00 Berlin from Tue 17 Mar (CET), Tue 7 Apr excluded, Tue 14
    // Apr renamed; moved to start Tue 31 Mar 10:00 (CEST): +14 days +1 hour
    // of wall-clock time, 14 days of UTC. The exception and override follow:
    // to 21 Apr and 28 Apr at 10:00. dateutil: an rruleset of
    // rrule(WEEKLY, dtstart=datetime(2026,3,31,10,0,tzinfo=Berlin)) with
    // exdate(datetime(2026,4,21,10,0,tzinfo=Berlin)), between 1 Mar and 10 Jun:
    let want = [
        "2026-03-31T10:00:00+02:00",
        "2026-04-07T10:00:00+02:00",
        "2026-04-14T10:00:00+02:00",
        "2026-04-28T10:00:00+02:00",
        "2026-05-05T10:00:00+02:00",
        "2026-05-12T10:00:00+02:00",
        "2026-05-19T10:00:00+02:00",
        "2026-05-26T10:00:00+02:00",
        "2026-06-02T10:00:00+02:00",
        "2026-06-09T10:00:00+02:00",
    ];
    let (s, u) = (svc(), user("alice"));
    let mut input = weekly("Review", "2026-03-17T09:00", "Europe/Berlin");
    input.recurrence.as_mut().unwrap().exdates = vec!["2026-04-07T09:00".into()];
    let ev = s.create(&u, &input).await.unwrap().event.unwrap();
    let one = Target { instance: Some("2026-04-14T07:00:00Z".into()), scope: None };
    let rename = EventChanges { title: Some("Review (guest)".into()), ..Default::default() };
    s.update(&u, &ev.id, &one, &rename, None).await.unwrap();
    let to = EventChanges { start: Some("2026-03-31T10:00".into()), ..Default::default() };
    s.update(&u, &ev.id, &Target::default(), &to, None).await.unwrap();
    let got = listed(&s, &u, "2026-03-01", "2026-06-09", "Europe/Berlin").await;
    let listed_starts: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(listed_starts, want);
    let renamed: Vec<&str> = got.iter().filter(|(_, t)| t == "Review (guest)").map(|(s, _)| s.as_str()).collect();
    assert_eq!(renamed, ["2026-04-28T10:00:00+02:00"]);

    // Moved to New York at 10:00 there from 31 Mar: the exception follows to
    // 21 Apr 10:00 New York. dateutil: the same rruleset with
    // tzinfo=ZoneInfo("America/New_York"), in UTC:
    let to_ny = EventChanges {
        timezone: Some("America/New_York".into()),
        start: Some("2026-03-31T10:00".into()),
        ..Default::default()
    };
    let (s, u) = (svc(), user("bob"));
    let ev = s.create(&u, &input).await.unwrap().event.unwrap();
    s.update(&u, &ev.id, &Target::default(), &to_ny, None).await.unwrap();
    let got = starts(&s, &u, q("2026-03-01", "2026-04-30", "UTC")).await;
    assert_eq!(got, ["2026-03-31T14:00:00Z", "2026-04-07T14:00:00Z", "2026-04-14T14:00:00Z", "2026-04-28T14:00:00Z"]);

    // An all-day series moves by whole days, whatever the clocks do.
    // dateutil: rruleset of rrule(WEEKLY, dtstart=datetime(2026,3,31)), exdate(datetime(2026,4,21)).
    let (s, u) = (svc(), user("carol"));
    let mut day = all_day("Bins", "2026-03-17", "FREQ=WEEKLY");
    day.recurrence.as_mut().unwrap().exdates = vec!["2026-04-07".into()];
    let ev = s.create(&u, &day).await.unwrap().event.unwrap();
    let to = EventChanges { start: Some("2026-03-31".into()), ..Default::default() };
    s.update(&u, &ev.id, &Target::default(), &to, None).await.unwrap();
    let got = starts(&s, &u, q("2026-03-01", "2026-04-30", "Europe/Berlin")).await;
    assert_eq!(got, ["2026-03-31", "2026-04-07", "2026-04-14", "2026-04-28"]);
}
