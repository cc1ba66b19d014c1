//! A rule's `UNTIL` (RFC 5545 §3.3.10), read in the series' own terms. The
//! RFC: `UNTIL` bounds the rule inclusively; it is a DATE when `DTSTART` is,
//! and UTC (`…Z`) when `DTSTART` has a zone. Clients also write the other
//! forms; each that names one bound is taken, read as follows:
//!
//! | series | `UNTIL` | the last instance allowed |
//! |---|---|---|
//! | all-day | `20260610` (the RFC's form) | one on that date |
//! | all-day | `20260610T…` floating | one on that date |
//! | all-day | `20260609T220000Z` (Outlook's) | one whose day begins, in the event's zone, by then |
//! | timed | `…T070000Z` (the RFC's form) | one starting by then |
//! | timed | `20260605` | one starting on that date in the event's zone (the whole day: inclusive) |
//! | timed | `20260605T090000` floating | one starting by that wall-clock time in the event's zone; a time the clocks skip or repeat there names no one bound and is refused |

use crate::calendar::time::{EventTime, Zone};
use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};

/// `UNTIL` as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Until {
    Date(NaiveDate),
    Floating(NaiveDateTime),
    Utc(DateTime<Utc>),
}

/// Whether `part` (`KEY=value`) is the rule part `key` (names are
/// case-insensitive in RFC 5545).
pub fn is_part(part: &str, key: &str) -> bool {
    part.trim().split_once('=').is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case(key))
}

/// The rule without its `UNTIL`, and the `UNTIL` read.
pub fn split(rule: &str) -> Result<(String, Option<Until>), String> {
    let (until, rest): (Vec<&str>, Vec<&str>) = rule.split(';').partition(|p| is_part(p, "UNTIL"));
    let value = match until.as_slice() {
        [] => return Ok((rest.join(";"), None)),
        [one] => one.split_once('=').map_or("", |(_, v)| v.trim()),
        _ => return Err("UNTIL is given more than once".into()),
    };
    let parsed = Until::parse(value)
        .ok_or_else(|| format!("UNTIL={value} is not a date (20260610) or a date-time (20260610T090000Z)"))?;
    Ok((rest.join(";"), Some(parsed)))
}

impl Until {
    fn parse(v: &str) -> Option<Until> {
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if !v.is_ascii() {
            return None;
        }
        match v.len() {
            8 if digits(v) => NaiveDate::parse_from_str(v, "%Y%m%d").ok().map(Until::Date),
            15 | 16 if digits(&v[..8]) && digits(&v[9..15]) => {
                let t = NaiveDateTime::parse_from_str(&v[..15], "%Y%m%dT%H%M%S").ok()?;
                match &v[15..] {
                    "" => Some(Until::Floating(t)),
                    "Z" | "z" => Some(Until::Utc(t.and_utc())),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// The bound for the `rrule` crate, in UTC as it requires beside a zoned
/// start: for an all-day series (anchored at midnight UTC) the last date's
/// midnight UTC; for a timed one the last instant allowed.
pub fn bound(u: Until, start: EventTime, zone: Zone) -> Result<DateTime<rrule::Tz>, String> {
    let instant = match (start, u) {
        (EventTime::Date(_), u) => {
            let last = match u {
                Until::Date(d) => d,
                Until::Floating(t) => t.date(),
                // A date's day begins at its midnight in the zone: the last
                // one beginning by `t` is `t`'s own local date.
                Until::Utc(t) => zone.local(t).date_naive(),
            };
            last.and_time(chrono::NaiveTime::MIN).and_utc()
        }
        (EventTime::At(_), Until::Utc(t)) => t,
        (EventTime::At(_), Until::Date(d)) => zone.day_start(d + Duration::days(1)) - Duration::seconds(1),
        (EventTime::At(_), Until::Floating(t)) => match zone.0.from_local_datetime(&t) {
            LocalResult::Single(x) => x.with_timezone(&Utc),
            _ => {
                let t = t.format("%Y%m%dT%H%M%S");
                return Err(format!(
                    "UNTIL={t} is no one instant in {zone} (the clocks skip or repeat it): write it in UTC"
                ));
            }
        },
    };
    Ok(instant.with_timezone(&rrule::Tz::UTC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_clients_write_are_read_and_others_refused() {
        let d = NaiveDate::from_ymd_opt(2026, 6, 10).unwrap();
        let t = d.and_hms_opt(9, 0, 0).unwrap();
        assert_eq!(split("FREQ=WEEKLY;until=20260610").unwrap(), ("FREQ=WEEKLY".into(), Some(Until::Date(d))));
        assert_eq!(split("UNTIL=20260610T090000;FREQ=DAILY").unwrap().1, Some(Until::Floating(t)));
        assert_eq!(split("FREQ=DAILY;UNTIL=20260610T090000Z").unwrap().1, Some(Until::Utc(t.and_utc())));
        assert_eq!(split("FREQ=DAILY;COUNT=3").unwrap(), ("FREQ=DAILY;COUNT=3".into(), None));
        for bad in ["UNTIL=2026-06-10", "UNTIL=20260610T0900", "UNTIL=20261310", "UNTIL=20260610T090000+01", "UNTIL="] {
            assert!(split(bad).is_err(), "{bad}");
        }
    }
}
