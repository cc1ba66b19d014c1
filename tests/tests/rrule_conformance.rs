//! Our recurrence expansion (`recur::occurrences`, what every listing uses)
//! against public vectors, instance by instance:
//!
//! - **RFC 5545 §3.8.5.3** (IETF, September 2009): every `RRULE` example,
//!   in the RFC's `America/New_York`, with the instances the RFC lists,
//!   hand-transcribed by `scripts/conformance/rfc5545_examples.py` into
//!   `tests/data/rrule/rfc5545.json` (excerpts © IETF Trust and the authors,
//!   reproduced with attribution under the IETF Trust Legal Provisions). The
//!   expected instants carry the offset the RFC labels them with (EDT/EST).
//! - **python-dateutil 2.9.0.post0**, `tests/test_rrule.py` of its sdist
//!   (Apache-2.0 OR BSD-3-Clause): every test that lists one rule's
//!   instances, extracted by `scripts/conformance/extract_dateutil.py` into
//!   `tests/data/rrule/dateutil.json`. Floating times, run here in UTC.
//!
//! Deliberate differences (7), each checked to be what we do; [`refusal`]
//! has the ones that refuse a rule, docs/calendar.md ("Conformance") the list:
//! 1. `FREQ=MINUTELY` and `FREQ=SECONDLY` (RFC 5545 §3.3.10) are refused
//!    (`invalid_rrule`): a calendar repeats at most hourly. 3 RFC rules, 64
//!    dateutil vectors.
//! 2. `BYEASTER` is dateutil's extension, not RFC 5545: refused. 15 vectors
//!    (6 more are also `MINUTELY`/`SECONDLY`, counted under 1).
//! 3. `BYWEEKNO` with a `FREQ` other than `YEARLY`, `BYYEARDAY` with
//!    `DAILY`/`WEEKLY`/`MONTHLY`, `BYMONTHDAY` with `WEEKLY`: RFC 5545
//!    §3.3.10 says each "MUST NOT" be (dateutil keeps RFC 2445's leniency):
//!    refused. 36 vectors.
//! 4. `UNTIL` before `DTSTART`: refused (dateutil lists nothing; RFC 5545
//!    §3.3.10 has `DTSTART` always the first instance and `UNTIL` bound the
//!    series, which cannot both hold). 1 vector.
//! 5. The RFC's "every 3 hours" listing contradicts its own `UNTIL`
//!    (§3.3.10: inclusive, in UTC; 17:00Z is 13:00 EDT): we follow the rule,
//!    09:00 and 12:00.
//! 6. A floating `UNTIL` in dateutil's rules is given with `Z`: our series
//!    always have a zone, and RFC 5545 §3.3.10 then wants `UNTIL` in UTC.
//! 7. A `DTSTART` the rule does not produce is not an instance (dateutil's,
//!    the crate's and rrule.js's reading; RFC 5545 §3.8.5.3 calls such a set
//!    undefined). The vectors that start off the rule (e.g. dateutil's
//!    `testYearlyByMonth`) pass on that reading.

use chrono::{DateTime, Duration, NaiveDateTime, Utc};
use serde::Deserialize;
use shared::calendar::recur::{check, occurrences};
use shared::calendar::{CalendarEvent, EventTime, Recurrence, Zone};
use shared::ids::EventId;

#[derive(Deserialize)]
struct RfcFile {
    examples: Vec<RfcExample>,
}

#[derive(Deserialize)]
struct RfcExample {
    title: String,
    dtstart: String,
    zone: String,
    rrule: String,
    exdates: Vec<String>,
    complete: bool,
    expected: Vec<String>,
    expected_by_rule: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct DateutilFile {
    vectors: Vec<Vector>,
    skipped: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Vector {
    name: String,
    dtstart: String,
    rrule: String,
    exdates: Vec<String>,
    rdates: Vec<String>,
    expected: Vec<String>,
}

/// Why we refuse a rule dateutil expands (differences 1 to 4 above), if we do.
fn refusal(rule: &str, dtstart: &str) -> Option<&'static str> {
    let part = |k: &str| rule.split(';').find_map(|p| p.strip_prefix(k));
    let freq = part("FREQ=")?;
    let until = part("UNTIL=").and_then(|u| NaiveDateTime::parse_from_str(u, "%Y%m%dT%H%M%SZ").ok());
    let start = NaiveDateTime::parse_from_str(dtstart, "%Y-%m-%dT%H:%M:%S").ok()?;
    if matches!(freq, "MINUTELY" | "SECONDLY") {
        Some("1: denser than hourly")
    } else if part("BYEASTER=").is_some() {
        Some("2: BYEASTER is not RFC 5545")
    } else if (part("BYWEEKNO=").is_some() && freq != "YEARLY")
        || (part("BYYEARDAY=").is_some() && matches!(freq, "DAILY" | "WEEKLY" | "MONTHLY"))
        || (part("BYMONTHDAY=").is_some() && freq == "WEEKLY")
    {
        Some("3: a BY part RFC 5545 forbids with this FREQ")
    } else if until.is_some_and(|u| u < start) {
        Some("4: UNTIL before DTSTART")
    } else {
        None
    }
}

/// A series as the service stores it: `start` in `zone`, one minute long.
fn series(
    start: DateTime<Utc>,
    zone: Zone,
    rrule: &str,
    exdates: Vec<EventTime>,
    rdates: Vec<EventTime>,
) -> CalendarEvent {
    let at = EventTime::At(start);
    serde_json::from_value(serde_json::json!({
        "id": EventId::new(), "uid": "conformance", "title": "vector",
        "start": at, "end": EventTime::At(start + Duration::minutes(1)), "timezone": zone,
        "recurrence": Recurrence { rrule: rrule.into(), exdates, rdates },
        "version": 1, "created_at": 0, "updated_at": 0,
    }))
    .unwrap()
}

/// Our instances of `ev` from its start to `to`, as instants.
fn expand(ev: &CalendarEvent, to: DateTime<Utc>) -> Result<Vec<DateTime<Utc>>, String> {
    let from = ev.start.instant(Zone::UTC);
    let (occ, truncated) = occurrences(ev, from, to, ev.timezone, 100_000).map_err(|e| e.to_string())?;
    assert!(!truncated, "{}: truncated", ev.title);
    Ok(occ.iter().map(|o| o.start.instant(Zone::UTC)).collect())
}

fn refused(ev: &CalendarEvent) -> bool {
    let rec = ev.recurrence.as_ref().unwrap();
    matches!(check(ev.start, ev.timezone, rec), Err(e) if e.code() == "invalid_rrule")
}

fn local(s: &str, zone: Zone) -> DateTime<Utc> {
    zone.instant(NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").unwrap()).unwrap()
}

fn instant(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// Compares ours with `want`: all of it (`complete`, looking a further
/// three years for instances too many) or its prefix.
fn compare(ev: &CalendarEvent, want: &[DateTime<Utc>], complete: bool) -> Result<(), String> {
    let last = want.last().copied().unwrap_or(ev.start.instant(Zone::UTC));
    let to = if complete { last + Duration::days(3 * 366) } else { last + Duration::seconds(1) };
    let got = expand(ev, to)?;
    if got == want {
        return Ok(());
    }
    let at = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(got.len().min(want.len()));
    Err(format!(
        "{} instances, want {}; first difference at #{at}: {:?} vs {:?}",
        got.len(),
        want.len(),
        got.get(at),
        want.get(at)
    ))
}

#[test]
fn every_rrule_example_of_rfc_5545() {
    let file: RfcFile = serde_json::from_str(include_str!("../data/rrule/rfc5545.json")).unwrap();
    let (mut passed, mut refusals, mut by_rule, mut failures) = (0, 0, 0, vec![]);
    for ex in &file.examples {
        let zone = Zone::parse(&ex.zone).unwrap();
        let exdates = ex.exdates.iter().map(|t| EventTime::At(local(t, zone))).collect();
        let ev = series(local(&ex.dtstart, zone), zone, &ex.rrule, exdates, vec![]);
        if ex.rrule.contains("FREQ=MINUTELY") {
            assert!(refused(&ev), "{}: MINUTELY is refused by design", ex.title);
            refusals += 1;
            continue;
        }
        let listing: Vec<_> = ex.expected.iter().map(|t| instant(t)).collect();
        let want: Vec<_> =
            ex.expected_by_rule.as_ref().map_or(listing.clone(), |w| w.iter().map(|t| instant(t)).collect());
        match compare(&ev, &want, ex.complete) {
            Ok(()) if want != listing => by_rule += 1,
            Ok(()) => passed += 1,
            Err(e) => failures.push(format!("{} ({}): {e}", ex.title, ex.rrule)),
        }
    }
    println!(
        "RFC 5545 §3.8.5.3: {} rules; {passed} as listed, {by_rule} by the rule where the listing contradicts it, {refusals} refused by design, {} failed",
        file.examples.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!((passed, by_rule, refusals), (38, 1, 3), "the counts docs/calendar.md gives");
}

#[test]
fn python_dateutil_test_vectors() {
    let file: DateutilFile = serde_json::from_str(include_str!("../data/rrule/dateutil.json")).unwrap();
    let (mut passed, mut refusals, mut failures) = (0, std::collections::BTreeMap::new(), vec![]);
    for v in &file.vectors {
        let at = |t: &String| EventTime::At(local(t, Zone::UTC));
        let ev = series(
            local(&v.dtstart, Zone::UTC),
            Zone::UTC,
            &v.rrule,
            v.exdates.iter().map(at).collect(),
            v.rdates.iter().map(at).collect(),
        );
        if let Some(why) = refusal(&v.rrule, &v.dtstart) {
            assert!(refused(&ev), "{} ({}): should be refused, difference {why}", v.name, v.rrule);
            *refusals.entry(why).or_insert(0) += 1;
            continue;
        }
        let want: Vec<_> = v.expected.iter().map(|t| local(t, Zone::UTC)).collect();
        match compare(&ev, &want, true) {
            Ok(()) => passed += 1,
            Err(e) => failures.push(format!("{} ({} from {}): {e}", v.name, v.rrule, v.dtstart)),
        }
    }
    println!(
        "python-dateutil: {} vectors; {passed} passed, refused by design {refusals:?}, {} failed; {} test methods are not vectors",
        file.vectors.len(),
        failures.len(),
        file.skipped.len()
    );
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));
    let refused: Vec<usize> = refusals.values().copied().collect();
    assert_eq!((passed, refused), (131, vec![64, 15, 36, 1]), "the counts docs/calendar.md gives");
}
