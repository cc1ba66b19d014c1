//! Our [`CalendarEvent`] as one iCalendar object (RFC 5545) and back.
//!
//! - One event is one `VCALENDAR` with one `UID`: the series' `VEVENT`
//!   (`RRULE`, `EXDATE`, `RDATE`), then one `VEVENT` per changed instance
//!   (`RECURRENCE-ID` = its original start). A cancelled instance is written as
//!   an `EXDATE` (and so reads back as one).
//! - Times: all-day as `VALUE=DATE`; timed events as local time with
//!   `TZID=<IANA name>` (UTC events as `…Z`), so the wall-clock time recurs in
//!   the event's zone. No `VTIMEZONE` is written: servers and clients resolve
//!   IANA names (Radicale adds the `VTIMEZONE` itself).
//! - `SEQUENCE` is the event's `version`.
//! - `ORGANIZER` (with its `CN`) is read from the series' `VEVENT` and
//!   written back on every `VEVENT` as read; whether it is the user is the
//!   caller's to say (it knows the account): read here, it is someone else.
//! - Read: a `TZID` chrono-tz does not know, and floating times, are read in
//!   the caller's default zone; `DURATION` stands in for a missing `DTEND`.

use super::CaldavError;
use crate::calendar::model::{CalendarEvent, EventTime, InstanceOverride, Organizer, Recurrence, Zone};
use crate::calendar::recur::span;
use crate::ids::EventId;
use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, Utc};
use icalendar::parser::{read_calendar, unfold, Component as Parsed, Property as ParsedProp};
use icalendar::{Calendar, Component, Event, EventLike, Property};

/// Our `PRODID`.
pub const PRODID: &str = "-//agentic-chat//calendar//EN";

/// The iCalendar object of `event` (CRLF lines, folded).
pub fn to_ics(event: &CalendarEvent) -> String {
    let mut cal = Calendar::empty();
    cal.append_property(Property::new("VERSION", "2.0"));
    cal.append_property(Property::new("PRODID", PRODID));
    cal.push(master(event));
    for ov in event.overrides.iter().filter(|o| !o.cancelled) {
        cal.push(instance(event, ov));
    }
    cal.to_string()
}

/// The fields every VEVENT of the event carries.
fn base(event: &CalendarEvent) -> Event {
    let mut ev = Event::new();
    ev.uid(&event.uid);
    ev.timestamp(Utc::now());
    ev.sequence(u32::try_from(event.version).unwrap_or(u32::MAX));
    if let Some(o) = &event.organizer {
        let mut p = Property::new("ORGANIZER", &o.address);
        if let Some(name) = &o.name {
            p.add_parameter("CN", name);
        }
        ev.append_property(p.done());
    }
    ev
}

fn master(event: &CalendarEvent) -> Event {
    let zone = event.timezone;
    let mut ev = base(event);
    ev.summary(&event.title);
    ev.append_property(time_prop("DTSTART", event.start, zone));
    ev.append_property(time_prop("DTEND", event.end, zone));
    if let Some(l) = event.location.as_deref().filter(|l| !l.is_empty()) {
        ev.location(l);
    }
    if let Some(d) = event.description.as_deref().filter(|d| !d.is_empty()) {
        ev.description(d);
    }
    if let Some(rec) = &event.recurrence {
        ev.append_property(Property::new("RRULE", rec.rrule.trim().trim_start_matches("RRULE:")));
        let cancelled = event.overrides.iter().filter(|o| o.cancelled).map(|o| o.recurrence_id);
        for t in rec.exdates.iter().copied().chain(cancelled) {
            ev.append_multi_property(time_prop("EXDATE", t, zone));
        }
        for t in &rec.rdates {
            ev.append_multi_property(time_prop("RDATE", *t, zone));
        }
    }
    ev.done()
}

/// The VEVENT of one changed instance: the override over the series' fields.
fn instance(event: &CalendarEvent, ov: &InstanceOverride) -> Event {
    let zone = event.timezone;
    let length = span(event.start, event.end);
    let start = ov.start.unwrap_or(ov.recurrence_id);
    let end = ov.end.unwrap_or_else(|| start.shifted(length));
    let mut ev = base(event);
    ev.append_property(time_prop("RECURRENCE-ID", ov.recurrence_id, zone));
    ev.summary(ov.title.as_deref().unwrap_or(&event.title));
    ev.append_property(time_prop("DTSTART", start, zone));
    ev.append_property(time_prop("DTEND", end, zone));
    let location = ov.location.as_ref().or(event.location.as_ref()).filter(|l| !l.is_empty());
    if let Some(l) = location {
        ev.location(l);
    }
    let description = ov.description.as_ref().or(event.description.as_ref()).filter(|d| !d.is_empty());
    if let Some(d) = description {
        ev.description(d);
    }
    ev.done()
}

/// `NAME;VALUE=DATE:20261201`, `NAME;TZID=Europe/Berlin:20261201T100000`
/// or, in UTC, `NAME:20261201T090000Z`.
fn time_prop(name: &str, t: EventTime, zone: Zone) -> Property {
    match t {
        EventTime::Date(d) => Property::new(name, d.format("%Y%m%d").to_string()).add_parameter("VALUE", "DATE").done(),
        EventTime::At(t) if zone == Zone::UTC => Property::new(name, t.format("%Y%m%dT%H%M%SZ").to_string()),
        EventTime::At(t) => {
            let local = zone.local(t).format("%Y%m%dT%H%M%S").to_string();
            Property::new(name, local).add_parameter("TZID", zone.name()).done()
        }
    }
}

// ---------------------------------------------------------------- read ---

fn invalid(msg: impl Into<String>) -> CaldavError {
    CaldavError::InvalidIcs(msg.into())
}

/// The first `SUMMARY` of an object, read line by line (for naming one we
/// cannot otherwise read); escapes undone as RFC 5545 §3.3.11 says.
pub fn summary_of(ics: &str) -> Option<String> {
    let unfolded = unfold(ics);
    let line = unfolded.lines().find(|l| {
        let name = l.split([':', ';']).next().unwrap_or("");
        name.eq_ignore_ascii_case("SUMMARY")
    })?;
    let value = line.split_once(':')?.1.trim();
    let value = value.replace("\\n", " ").replace("\\N", " ").replace("\\,", ",").replace("\\;", ";");
    let value = value.replace("\\\\", "\\");
    let value: String = value.chars().take(120).collect();
    (!value.is_empty()).then_some(value)
}

/// Reads an iCalendar object (one UID) into an event: a fresh id, version 1,
/// no links, `remote` unset (the caller knows the href and ETag).
pub fn from_ics(ics: &str, default_zone: Zone) -> Result<CalendarEvent, CaldavError> {
    let unfolded = unfold(ics);
    let cal = read_calendar(&unfolded).map_err(|e| invalid(format!("not iCalendar: {e}")))?;
    let events: Vec<&Parsed> = cal.components.iter().filter(|c| c.name == "VEVENT").collect();
    let master = events
        .iter()
        .find(|c| c.find_prop("RECURRENCE-ID").is_none())
        .ok_or_else(|| invalid("no VEVENT without RECURRENCE-ID (a lone instance of someone else's series)"))?;
    let mut event = read_master(master, default_zone)?;
    let length = span(event.start, event.end);
    for c in events.iter().filter(|c| c.find_prop("RECURRENCE-ID").is_some()) {
        if text(c, "UID").as_deref() != Some(event.uid.as_str()) {
            return Err(invalid("more than one UID in one calendar object"));
        }
        let ov = read_instance(c, &event, length, event.timezone)?;
        event.overrides.push(ov);
    }
    Ok(event)
}

fn read_master(c: &Parsed, default_zone: Zone) -> Result<CalendarEvent, CaldavError> {
    let uid = text(c, "UID").ok_or_else(|| invalid("a VEVENT without UID"))?;
    let dtstart = c.find_prop("DTSTART").ok_or_else(|| invalid("a VEVENT without DTSTART"))?;
    let (start, tz) = read_time(dtstart, default_zone)?;
    let rrule = text(c, "RRULE");
    // A UTC series recurs in UTC; a single UTC event is shown in the user's zone.
    let zone =
        tz.unwrap_or(if rrule.is_some() && matches!(start, EventTime::At(_)) { Zone::UTC } else { default_zone });
    let end = read_end(c, start, zone)?;
    let recurrence = match rrule {
        Some(rrule) => {
            Some(Recurrence { rrule, exdates: read_all(c, "EXDATE", zone)?, rdates: read_all(c, "RDATE", zone)? })
        }
        None => None,
    };
    let now = Utc::now().timestamp_millis();
    Ok(CalendarEvent {
        id: EventId::new(),
        uid,
        title: text(c, "SUMMARY").unwrap_or_default(),
        description: text(c, "DESCRIPTION"),
        location: text(c, "LOCATION"),
        start,
        end,
        timezone: zone,
        recurrence,
        overrides: Vec::new(),
        project_id: None,
        task_id: None,
        version: 1,
        created_at: now,
        updated_at: now,
        remote: None,
        organizer: read_organizer(c),
    })
}

/// `ORGANIZER;CN=Bob:mailto:bob@example.com`, not (yet) known to be the user.
fn read_organizer(c: &Parsed) -> Option<Organizer> {
    let p = c.find_prop("ORGANIZER")?;
    let address = p.val.as_str().trim().to_string();
    let name = param(p, "CN").map(|n| n.trim_matches('"').to_string()).filter(|n| !n.is_empty());
    (!address.is_empty()).then_some(Organizer { address, name, own: false })
}

/// An instance VEVENT as an override: only what differs from the series.
fn read_instance(
    c: &Parsed,
    event: &CalendarEvent,
    length: Duration,
    zone: Zone,
) -> Result<InstanceOverride, CaldavError> {
    let rid = read_time(c.find_prop("RECURRENCE-ID").expect("filtered on it"), zone)?.0;
    let cancelled = text(c, "STATUS").is_some_and(|s| s.eq_ignore_ascii_case("CANCELLED"));
    let start = match c.find_prop("DTSTART") {
        Some(p) => read_time(p, zone)?.0,
        None => rid,
    };
    let end = match (c.find_prop("DTEND"), c.find_prop("DURATION")) {
        (None, None) => start.shifted(length),
        _ => read_end(c, start, zone)?,
    };
    // `Some("")` clears a field the series has (recur.rs reads it so).
    let differs = |ours: &Option<String>, theirs: Option<String>| -> Option<String> {
        let theirs = theirs.unwrap_or_default();
        (ours.as_deref().unwrap_or("") != theirs).then_some(theirs)
    };
    Ok(InstanceOverride {
        recurrence_id: rid,
        cancelled,
        title: text(c, "SUMMARY").filter(|t| *t != event.title),
        start: (start != rid).then_some(start),
        end: (end != start.shifted(length)).then_some(end),
        location: differs(&event.location, text(c, "LOCATION")),
        description: differs(&event.description, text(c, "DESCRIPTION")),
    })
}

/// `DTEND`, else `DTSTART + DURATION`, else RFC 5545's default (one day for
/// a date, no length for a time).
fn read_end(c: &Parsed, start: EventTime, zone: Zone) -> Result<EventTime, CaldavError> {
    if let Some(p) = c.find_prop("DTEND") {
        return Ok(read_time(p, zone)?.0);
    }
    if let Some(d) = text(c, "DURATION") {
        let d = parse_duration(&d).ok_or_else(|| invalid(format!("bad DURATION {d:?}")))?;
        return Ok(start.shifted(d));
    }
    Ok(match start {
        EventTime::Date(_) => start.shifted(Duration::days(1)),
        EventTime::At(_) => start,
    })
}

/// A property's value (text already unescaped by the parser), trimmed.
fn text(c: &Parsed, name: &str) -> Option<String> {
    let v = c.find_prop(name)?.val.as_str().trim();
    (!v.is_empty()).then(|| v.to_string())
}

fn param<'p>(p: &'p ParsedProp<'_>, key: &str) -> Option<&'p str> {
    p.params.iter().find(|x| x.key.as_str().eq_ignore_ascii_case(key)).and_then(|x| x.val.as_ref()).map(|v| v.as_str())
}

/// One date or date-time property: its time, and its zone when it names one
/// chrono-tz knows.
fn read_time(p: &ParsedProp<'_>, zone: Zone) -> Result<(EventTime, Option<Zone>), CaldavError> {
    let v = p.val.as_str().trim();
    let v = v.split(',').next().unwrap_or(v).split('/').next().unwrap_or(v); // lists, PERIODs: the first start
    let tz = param(p, "TZID").and_then(known_zone);
    Ok((parse_value(v, tz.unwrap_or(zone))?, tz))
}

/// Every value of every `name` property (`EXDATE`, `RDATE`: lists allowed).
fn read_all(c: &Parsed, name: &str, zone: Zone) -> Result<Vec<EventTime>, CaldavError> {
    let mut out = Vec::new();
    for p in c.properties.iter().filter(|p| p.name == name) {
        let tz = param(p, "TZID").and_then(known_zone).unwrap_or(zone);
        for v in p.val.as_str().split(',').map(str::trim).filter(|v| !v.is_empty()) {
            out.push(parse_value(v.split('/').next().unwrap_or(v), tz)?);
        }
    }
    Ok(out)
}

/// `20261201` (a date), `20261201T090000Z` (UTC), `20261201T100000` (local in `zone`).
fn parse_value(v: &str, zone: Zone) -> Result<EventTime, CaldavError> {
    if let Ok(d) = NaiveDate::parse_from_str(v, "%Y%m%d") {
        return Ok(EventTime::Date(d));
    }
    if let Some(utc) = v.strip_suffix('Z') {
        let t = NaiveDateTime::parse_from_str(utc, "%Y%m%dT%H%M%S").map_err(|_| invalid(format!("bad time {v:?}")))?;
        return Ok(EventTime::At(DateTime::<Utc>::from_naive_utc_and_offset(t, Utc)));
    }
    let local = NaiveDateTime::parse_from_str(v, "%Y%m%dT%H%M%S").map_err(|_| invalid(format!("bad time {v:?}")))?;
    // A local time in the DST gap is not an error here: another client wrote
    // it; RFC 5545 §3.3.5 reads it with the offset from before the gap.
    let t = zone.instant(local).unwrap_or_else(|_| zone.instant(local + Duration::hours(1)).unwrap_or(local.and_utc()));
    Ok(EventTime::At(t))
}

/// A `TZID` as an IANA zone; some clients prefix it (`/mozilla.org/…/Europe/Berlin`).
fn known_zone(tzid: &str) -> Option<Zone> {
    let tzid = tzid.trim_matches('"');
    Zone::parse(tzid).ok().or_else(|| {
        let parts: Vec<&str> = tzid.split('/').collect();
        (1..parts.len()).find_map(|i| Zone::parse(&parts[i..].join("/")).ok())
    })
}

/// An RFC 5545 `DURATION` (`P1D`, `PT1H30M`, `P2W`, `-PT15M`).
fn parse_duration(s: &str) -> Option<Duration> {
    let (sign, rest) = match s.trim().strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, s.trim().trim_start_matches('+')),
    };
    let rest = rest.strip_prefix('P')?;
    let (mut total, mut num, mut in_time) = (Duration::zero(), String::new(), false);
    for ch in rest.chars() {
        match ch {
            'T' => in_time = true,
            '0'..='9' => num.push(ch),
            unit => {
                let n: i64 = std::mem::take(&mut num).parse().ok()?;
                total += match (unit, in_time) {
                    ('W', false) => Duration::weeks(n),
                    ('D', false) => Duration::days(n),
                    ('H', true) => Duration::hours(n),
                    ('M', true) => Duration::minutes(n),
                    ('S', true) => Duration::seconds(n),
                    _ => return None,
                };
            }
        }
    }
    num.is_empty().then_some(total * sign)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn berlin() -> Zone {
        Zone::parse("Europe/Berlin").unwrap()
    }

    fn at(s: &str) -> EventTime {
        EventTime::parse_stored(s).unwrap()
    }

    /// Weekly on Mondays 09:00 Berlin from 2026-03-16 (across the DST change
    /// of 2026-03-29), one instance excluded, one moved and renamed, one
    /// cancelled.
    fn weekly() -> CalendarEvent {
        let mut e = from_ics(
            "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:w1\r\nDTSTART:20260316T080000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
            berlin(),
        )
        .unwrap();
        e.title = "Standup, daily; really\nweekly".into();
        e.location = Some("Room 1".into());
        e.end = at("2026-03-16T08:30:00Z");
        e.timezone = berlin();
        e.version = 3;
        e.organizer =
            Some(Organizer { address: "mailto:bob@example.com".into(), name: Some("Bob Smith".into()), own: false });
        e.recurrence = Some(Recurrence {
            rrule: "FREQ=WEEKLY;BYDAY=MO;COUNT=10".into(),
            exdates: vec![at("2026-03-23T08:00:00Z")],
            rdates: vec![],
        });
        e.overrides = vec![
            InstanceOverride {
                recurrence_id: at("2026-03-30T07:00:00Z"),
                cancelled: false,
                title: Some("Standup (moved)".into()),
                start: Some(at("2026-03-30T08:00:00Z")),
                end: None,
                location: Some(String::new()),
                description: None,
            },
            InstanceOverride {
                recurrence_id: at("2026-04-06T07:00:00Z"),
                cancelled: true,
                title: None,
                start: None,
                end: None,
                location: None,
                description: None,
            },
        ];
        e
    }

    #[test]
    fn a_weekly_series_is_written_in_its_zone() {
        let ics = to_ics(&weekly());
        let unfolded = unfold(&ics);
        for line in [
            "DTSTART;TZID=Europe/Berlin:20260316T090000",
            "DTEND;TZID=Europe/Berlin:20260316T093000",
            "RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=10",
            "EXDATE;TZID=Europe/Berlin:20260323T090000",
            "EXDATE;TZID=Europe/Berlin:20260406T090000",
            "RECURRENCE-ID;TZID=Europe/Berlin:20260330T090000",
            "DTSTART;TZID=Europe/Berlin:20260330T100000",
            "SUMMARY:Standup\\, daily\\; really\\nweekly",
            "SEQUENCE:3",
            "ORGANIZER;CN=Bob Smith:mailto:bob@example.com",
        ] {
            assert!(unfolded.contains(&format!("{line}\r\n")), "{line} missing in:\n{ics}");
        }
        assert!(!ics.contains("VTIMEZONE"));
    }

    #[test]
    fn a_weekly_series_reads_back_the_same() {
        let ours = weekly();
        let back = from_ics(&to_ics(&ours), Zone::UTC).unwrap();
        let mut expected = ours.clone();
        // A cancelled instance travels as an EXDATE.
        expected.overrides.retain(|o| !o.cancelled);
        expected.recurrence.as_mut().unwrap().exdates.push(at("2026-04-06T07:00:00Z"));
        let same_identity = CalendarEvent {
            id: expected.id.clone(),
            version: expected.version,
            created_at: expected.created_at,
            updated_at: expected.updated_at,
            ..back
        };
        assert_eq!(same_identity, expected);
    }

    #[test]
    fn all_day_and_utc_events() {
        let mut e = weekly();
        (e.recurrence, e.overrides) = (None, vec![]);
        (e.start, e.end) = (
            EventTime::Date(NaiveDate::from_ymd_opt(2026, 12, 24).unwrap()),
            EventTime::Date(NaiveDate::from_ymd_opt(2026, 12, 26).unwrap()),
        );
        let ics = to_ics(&e);
        assert!(
            ics.contains("DTSTART;VALUE=DATE:20261224\r\n") && ics.contains("DTEND;VALUE=DATE:20261226\r\n"),
            "{ics}"
        );
        let back = from_ics(&ics, Zone::UTC).unwrap();
        assert_eq!((back.start, back.end), (e.start, e.end));

        (e.start, e.end, e.timezone) = (at("2026-12-24T23:30:00Z"), at("2026-12-25T00:30:00Z"), Zone::UTC);
        let ics = to_ics(&e);
        assert!(ics.contains("DTSTART:20261224T233000Z\r\n"), "{ics}");
        let back = from_ics(&ics, berlin()).unwrap();
        assert_eq!(
            (back.start, back.end, back.timezone),
            (e.start, e.end, berlin()),
            "a single UTC event shows in the user's zone"
        );
    }

    #[test]
    fn other_clients_forms_are_read() {
        let ics = "BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:x@example.com\n\
DTSTART;TZID=/mozilla.org/20070129_1/America/Los_Angeles:20261201T233000\nDURATION:PT1H30M\n\
RRULE:FREQ=DAILY;COUNT=5\nEXDATE;TZID=America/Los_Angeles:20261202T233000,20261203T233000\n\
SUMMARY:Late \n call\nEND:VEVENT\nBEGIN:VEVENT\nUID:x@example.com\nRECURRENCE-ID;TZID=America/Los_Angeles:20261204T233000\n\
DTSTART;TZID=America/Los_Angeles:20261204T233000\nSTATUS:CANCELLED\nSUMMARY:Late call\nEND:VEVENT\nEND:VCALENDAR\n";
        let e = from_ics(ics, Zone::UTC).unwrap();
        assert_eq!(e.timezone.name(), "America/Los_Angeles");
        assert_eq!(e.title, "Late call", "folded lines are unfolded");
        assert_eq!(e.start, at("2026-12-02T07:30:00Z"));
        assert_eq!(e.end, at("2026-12-02T09:00:00Z"));
        assert_eq!(
            e.recurrence.as_ref().unwrap().exdates,
            vec![at("2026-12-03T07:30:00Z"), at("2026-12-04T07:30:00Z")]
        );
        assert_eq!(e.overrides.len(), 1);
        let ov = &e.overrides[0];
        assert!(ov.cancelled && ov.start.is_none() && ov.end.is_none() && ov.title.is_none());
    }

    #[test]
    fn objects_we_cannot_hold_are_refused() {
        let lone = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:a\nRECURRENCE-ID:20260101T000000Z\nDTSTART:20260101T000000Z\nEND:VEVENT\nEND:VCALENDAR\n";
        assert!(matches!(from_ics(lone, Zone::UTC), Err(CaldavError::InvalidIcs(_))));
        assert!(matches!(from_ics("garbage", Zone::UTC), Err(CaldavError::InvalidIcs(_))));
        let no_start = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:a\nEND:VEVENT\nEND:VCALENDAR\n";
        assert!(matches!(from_ics(no_start, Zone::UTC), Err(CaldavError::InvalidIcs(_))));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("PT1H30M"), Some(Duration::minutes(90)));
        assert_eq!(parse_duration("P1W2D"), Some(Duration::days(9)));
        assert_eq!(parse_duration("-PT15M"), Some(Duration::minutes(-15)));
        assert_eq!(parse_duration("P1Y"), None);
        assert_eq!(parse_duration("PT5"), None);
    }
}
