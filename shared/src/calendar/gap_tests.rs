//! Series whose wall-clock time the clocks skip or repeat at midnight, in
//! the four zones that change at midnight, through the whole service.
//!
//! Expected instants are python-dateutil 2.9.0.post0 (the wall-clock
//! series of `FREQ=DAILY;COUNT=5` from a naive DTSTART) placed by Python's
//! `zoneinfo` with `fold=0` (PEP 495: a skipped time takes the offset before
//! the gap, a repeated one the first), which is RFC 5545 §3.3.5's reading:
//! "If the local time represented is invalid … it is interpreted using the
//! UTC offset before the gap in local times." tzdata 2025b on both sides.

use super::*;
use crate::calendar::store::MemoryEventStore;
use crate::calendar::{CalendarService, EditScope, ListQuery, NewEvent, RecurrenceInput, Target};
use crate::entities::store::MemoryEntityStore;
use crate::entities::EntityService;
use crate::ids::UserId;
use chrono::NaiveDate;

fn svc() -> CalendarService {
    CalendarService::new(MemoryEventStore::new(), EntityService::new(MemoryEntityStore::new()))
}

fn daily(start: &str, zone: &str, rrule: &str) -> NewEvent {
    NewEvent {
        title: "Night shift".into(),
        start: start.into(),
        end: None,
        duration_minutes: Some(15),
        timezone: Some(zone.into()),
        location: None,
        description: None,
        recurrence: Some(RecurrenceInput { rrule: rrule.into(), exdates: vec![], rdates: vec![] }),
        project_id: None,
        task_id: None,
    }
}

async fn utc_starts(s: &CalendarService, u: &UserId, from: &str, to: &str) -> Vec<String> {
    let q = ListQuery { from: from.into(), to: to.into(), timezone: Some("UTC".into()), project_id: None };
    s.list(u, &q).await.unwrap().events.into_iter().map(|e| e.start).collect()
}

/// `(zone, DTSTART, the five instants)`: a gap at midnight in each zone,
/// Havana's repeated midnight hour, and repeated 23:00 hours (Beirut,
/// Cairo, Santiago) which the crate already got right.
const CASES: &[(&str, &str, [&str; 5])] = &[
    (
        "America/Santiago",
        "2026-09-04T00:30",
        [
            "2026-09-04T04:30:00Z",
            "2026-09-05T04:30:00Z",
            "2026-09-06T04:30:00Z",
            "2026-09-07T03:30:00Z",
            "2026-09-08T03:30:00Z",
        ],
    ),
    (
        "America/Havana",
        "2026-03-06T00:30",
        [
            "2026-03-06T05:30:00Z",
            "2026-03-07T05:30:00Z",
            "2026-03-08T05:30:00Z",
            "2026-03-09T04:30:00Z",
            "2026-03-10T04:30:00Z",
        ],
    ),
    (
        "America/Havana",
        "2026-10-30T00:30",
        [
            "2026-10-30T04:30:00Z",
            "2026-10-31T04:30:00Z",
            "2026-11-01T04:30:00Z",
            "2026-11-02T05:30:00Z",
            "2026-11-03T05:30:00Z",
        ],
    ),
    (
        "Asia/Beirut",
        "2026-03-27T00:30",
        [
            "2026-03-26T22:30:00Z",
            "2026-03-27T22:30:00Z",
            "2026-03-28T22:30:00Z",
            "2026-03-29T21:30:00Z",
            "2026-03-30T21:30:00Z",
        ],
    ),
    (
        "Asia/Beirut",
        "2026-10-22T23:30",
        [
            "2026-10-22T20:30:00Z",
            "2026-10-23T20:30:00Z",
            "2026-10-24T20:30:00Z",
            "2026-10-25T21:30:00Z",
            "2026-10-26T21:30:00Z",
        ],
    ),
    (
        "Africa/Cairo",
        "2026-04-22T00:30",
        [
            "2026-04-21T22:30:00Z",
            "2026-04-22T22:30:00Z",
            "2026-04-23T22:30:00Z",
            "2026-04-24T21:30:00Z",
            "2026-04-25T21:30:00Z",
        ],
    ),
    (
        "Africa/Cairo",
        "2026-10-27T23:30",
        [
            "2026-10-27T20:30:00Z",
            "2026-10-28T20:30:00Z",
            "2026-10-29T20:30:00Z",
            "2026-10-30T21:30:00Z",
            "2026-10-31T21:30:00Z",
        ],
    ),
    (
        "America/Santiago",
        "2026-04-02T23:30",
        [
            "2026-04-03T02:30:00Z",
            "2026-04-04T02:30:00Z",
            "2026-04-05T02:30:00Z",
            "2026-04-06T03:30:00Z",
            "2026-04-07T03:30:00Z",
        ],
    ),
];

#[tokio::test]
async fn a_daily_series_keeps_the_day_whose_midnight_the_clocks_skip_or_repeat() {
    let s = svc();
    for (i, (zone, start, want)) in CASES.iter().enumerate() {
        let u = UserId::parse(format!("user{i}")).unwrap();
        s.create(&u, &daily(start, zone, "FREQ=DAILY;COUNT=5")).await.unwrap();
        let got = utc_starts(&s, &u, "2026-01-01", "2026-12-31").await;
        assert_eq!(got, want.to_vec(), "{zone} from {start}");
    }
}

#[tokio::test]
async fn the_skipped_instance_can_be_named_cancelled_and_split_at() {
    let (s, u) = (svc(), UserId::parse("alice").unwrap());
    let ev = s.create(&u, &daily("2026-09-04T00:30", "America/Santiago", "FREQ=DAILY;COUNT=5")).await.unwrap();
    let id = ev.event.unwrap().id;
    // 6 Sep 00:30 is 04:30Z, as is 01:30 −03 the same day: one instance.
    let gap = Target { instance: Some("2026-09-06T04:30:00Z".into()), scope: None };
    s.delete(&u, &id, &gap, None).await.unwrap();
    let got = utc_starts(&s, &u, "2026-09-01", "2026-09-30").await;
    assert_eq!(got, ["2026-09-04T04:30:00Z", "2026-09-05T04:30:00Z", "2026-09-07T03:30:00Z", "2026-09-08T03:30:00Z"]);
    // Ending the series at the 7th keeps the three before it (COUNT=3).
    let following = Target { instance: Some("2026-09-07T03:30:00Z".into()), scope: Some(EditScope::Following) };
    s.delete(&u, &id, &following, None).await.unwrap();
    let got = utc_starts(&s, &u, "2026-09-01", "2026-09-30").await;
    assert_eq!(got, ["2026-09-04T04:30:00Z", "2026-09-05T04:30:00Z"]);
}

#[tokio::test]
async fn an_hourly_series_through_a_gap_lists_each_instant_once() {
    // 23:00, 00:00 (skipped: 04:00Z, which is also 01:00 −03), 01:00, 02:00.
    let (s, u) = (svc(), UserId::parse("alice").unwrap());
    s.create(&u, &daily("2026-09-05T23:00", "America/Santiago", "FREQ=HOURLY;COUNT=4")).await.unwrap();
    let got = utc_starts(&s, &u, "2026-09-05", "2026-09-07").await;
    assert_eq!(got, ["2026-09-06T03:00:00Z", "2026-09-06T04:00:00Z", "2026-09-06T05:00:00Z"]);
}

fn santiago() -> Zone {
    Zone::parse("America/Santiago").unwrap()
}

fn at(d: u32, h: u32, m: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2026, 9, d).unwrap().and_hms_opt(h, m, 0).unwrap()
}

#[test]
fn a_skipped_time_takes_the_offset_before_the_gap_and_a_repeated_one_the_first() {
    let utc = |w: NaiveDateTime| Utc.from_utc_datetime(&w);
    assert_eq!(place(at(6, 0, 30), santiago()), utc(at(6, 4, 30)), "00:30 −04");
    assert_eq!(place(at(6, 1, 30), santiago()), utc(at(6, 4, 30)), "01:30 −03");
    assert_eq!(place(at(5, 23, 59), santiago()), utc(at(6, 3, 59)));
    assert_eq!(walls(utc(at(6, 4, 30)), santiago()), [at(6, 1, 30), at(6, 0, 30)]);
    assert_eq!(walls(utc(at(6, 5, 30)), santiago()), [at(6, 2, 30)], "past the gap's length: one");
    let havana = Zone::parse("America/Havana").unwrap();
    let nov = |h, m| NaiveDate::from_ymd_opt(2026, 11, 1).unwrap().and_hms_opt(h, m, 0).unwrap();
    assert_eq!(place(nov(0, 30), havana), utc(nov(4, 30)), "the first 00:30, −04");
    assert!(walls(utc(nov(5, 30)), havana).is_empty(), "the second 00:30 is no wall time's");
}

#[tokio::test]
async fn until_in_utc_or_floating_bounds_the_wall_clock_series() {
    let (s, u) = (svc(), UserId::parse("alice").unwrap());
    // UNTIL 04:30Z is 01:30 −03 on the 6th: the 00:30 placed there is in.
    s.create(&u, &daily("2026-09-04T00:30", "America/Santiago", "FREQ=DAILY;UNTIL=20260906T043000Z")).await.unwrap();
    let got = utc_starts(&s, &u, "2026-09-01", "2026-09-30").await;
    assert_eq!(got, ["2026-09-04T04:30:00Z", "2026-09-05T04:30:00Z", "2026-09-06T04:30:00Z"]);
    // RFC 5545 §3.3.10 wants UTC beside a zoned DTSTART; clients also write
    // a floating UNTIL, read on the series' wall clock (`recur/until.rs`).
    let u2 = UserId::parse("bob").unwrap();
    s.create(&u2, &daily("2026-09-04T00:30", "America/Santiago", "FREQ=DAILY;UNTIL=20260906T043000")).await.unwrap();
    assert_eq!(utc_starts(&s, &u2, "2026-09-01", "2026-09-30").await, got);
}
