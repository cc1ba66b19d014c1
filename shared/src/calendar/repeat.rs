//! Recurrence as a few structured fields ([`Repeat`]: `every`, `interval`,
//! `on_days`, `until`, `count`) for whoever does not write RFC 5545 — the
//! smallest model the product ships above all. The server turns it into the
//! `RRULE` the event stores and syncs ([`Repeat::rrule`]); the raw rule stays
//! accepted beside it. A series starts on its first instance
//! ([`first_instance`]): "every weekday" asked on a Sunday starts on Monday.

use super::error::CalendarError;
use super::model::{CalendarEvent, EventTime, Zone};
use super::recur;
use chrono::{Duration, NaiveDate};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How often a series repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Every {
    Day,
    /// Monday to Friday. Named so on the wire because a small model read
    /// `weekday` as "a day of the week" (yoga on Wednesdays became Wednesday
    /// to Friday); `weekday` stays accepted.
    #[serde(rename = "monday_to_friday", alias = "weekday")]
    Weekday,
    Week,
    Month,
    Year,
}

/// A day of the week (`on_days`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Day {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Day {
    /// The RFC 5545 `BYDAY` code.
    fn code(self) -> &'static str {
        match self {
            Day::Monday => "MO",
            Day::Tuesday => "TU",
            Day::Wednesday => "WE",
            Day::Thursday => "TH",
            Day::Friday => "FR",
            Day::Saturday => "SA",
            Day::Sunday => "SU",
        }
    }
}

/// `repeat`: a series in plain fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    pub every: Every,
    /// Every `interval`-th day/week/month/year (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 99)]
    pub interval: Option<u32>,
    /// With `every: week`: the days (default: the start's day).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_days: Vec<Day>,
    /// How many times it happens in all ("three sessions": 3, "six lessons": 6).
    // Before `until` (the schema's order is the fields'): the local model
    // wrote an `until` it made up for "six lessons" with `until` listed first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 999)]
    pub count: Option<u32>,
    /// Only when the user names an end date, instead of `count`: the last
    /// day it may happen (YYYY-MM-DD), the user's zone.
    // No example date in the description: the local model copied the one
    // there was (2027-03-31) in place of "three sessions".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

fn bad(message: impl Into<String>) -> CalendarError {
    CalendarError::bad("invalid_repeat", message)
}

impl Repeat {
    /// The `RRULE` value for a series starting at `start` in `zone`. `until`
    /// is a whole day: a timed series' `UNTIL` is that day's last second in
    /// `zone`, in UTC (RFC 5545 §3.3.10 wants UTC beside a zoned start); an
    /// all-day series' is the date.
    pub fn rrule(&self, start: EventTime, zone: Zone) -> Result<String, CalendarError> {
        let mut parts = vec![match self.every {
            Every::Day => "FREQ=DAILY",
            Every::Weekday | Every::Week => "FREQ=WEEKLY",
            Every::Month => "FREQ=MONTHLY",
            Every::Year => "FREQ=YEARLY",
        }
        .to_string()];
        match self.interval {
            Some(0) | Some(100..) => return Err(bad("interval is 1 to 99 (2: every other one)")),
            Some(n) if n > 1 => parts.push(format!("INTERVAL={n}")),
            _ => {}
        }
        match (self.every, self.on_days.is_empty()) {
            (Every::Weekday, _) if self.on_days.iter().any(|d| matches!(d, Day::Saturday | Day::Sunday)) => {
                return Err(bad(
                    "every: monday_to_friday is Monday to Friday: for other days use every: week with on_days",
                ))
            }
            (Every::Weekday, _) => parts.push("BYDAY=MO,TU,WE,TH,FR".into()),
            (Every::Week, false) => {
                let mut days = self.on_days.clone();
                days.sort_by_key(|d| *d as u8);
                days.dedup();
                parts.push(format!("BYDAY={}", days.iter().map(|d| d.code()).collect::<Vec<_>>().join(",")));
            }
            (_, false) => return Err(bad("on_days goes with every: week (e.g. every: week, on_days: [monday])")),
            (_, true) => {}
        }
        match (&self.until, self.count) {
            (Some(_), Some(_)) => return Err(bad("give until or count, not both")),
            (Some(u), None) => parts.push(format!("UNTIL={}", until(u, start, zone)?)),
            (None, Some(0) | Some(1000..)) => return Err(bad("count is 1 to 999")),
            (None, Some(n)) => parts.push(format!("COUNT={n}")),
            (None, None) => {}
        }
        Ok(parts.join(";"))
    }
}

/// `until` as an `UNTIL` value: its day's end in `zone` (UTC) for a timed
/// series, the date for an all-day one. A time given is read as its day.
fn until(u: &str, start: EventTime, zone: Zone) -> Result<String, CalendarError> {
    let day: NaiveDate = match EventTime::parse_in(u, zone) {
        Ok(EventTime::Date(d)) => d,
        Ok(EventTime::At(t)) => zone.local(t).date_naive(),
        Err(_) => return Err(bad(format!("until {u:?} is not a date (2027-03-31)"))),
    };
    if day < zone.local(start.instant(zone)).date_naive() {
        return Err(bad(format!("until {u} is before the start")));
    }
    Ok(match start {
        EventTime::Date(_) => day.format("%Y%m%d").to_string(),
        EventTime::At(_) => {
            (zone.day_start(day + Duration::days(1)) - Duration::seconds(1)).format("%Y%m%dT%H%M%SZ").to_string()
        }
    })
}

/// The series moved to start on its first instance when its start is not
/// one (a weekday series asked on a Sunday): RFC 5545 counts `DTSTART` as
/// an instance whatever the rule says (Apple's and Google's calendars show
/// it), while the expansion here does not; starting on the first instance
/// gives one series both readings agree on. The length is kept.
pub fn first_instance(mut ev: CalendarEvent) -> Result<CalendarEvent, CalendarError> {
    if ev.recurrence.is_none() || ev.has_instance(ev.start)? {
        return Ok(ev);
    }
    let from = ev.start.instant(ev.timezone);
    let to = from + Duration::days(recur::MAX_RANGE_DAYS);
    let (found, _) = recur::occurrences(&ev, from, to, ev.timezone, 1)?;
    let Some(first) = found.into_iter().next().and_then(|o| o.recurrence_id) else {
        return Err(bad("the series has no instance in the year after its start: check the days and until"));
    };
    let length = recur::span(ev.start, ev.end);
    (ev.start, ev.end) = (first, first.shifted(length));
    Ok(ev)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repeat(every: Every) -> Repeat {
        Repeat { every, interval: None, on_days: vec![], until: None, count: None }
    }

    #[test]
    fn plain_fields_become_the_rules_rfc_5545_spells() {
        let zone = Zone::parse("Europe/Berlin").unwrap();
        let at = EventTime::parse_in("2026-12-07T09:30", zone).unwrap();
        let day = EventTime::parse_in("2026-12-07", zone).unwrap();
        let rule = |r: Repeat, s| r.rrule(s, zone).unwrap();
        assert_eq!(rule(repeat(Every::Weekday), at), "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR");
        assert_eq!(rule(repeat(Every::Day), at), "FREQ=DAILY");
        let biweekly = Repeat { interval: Some(2), on_days: vec![Day::Thursday, Day::Tuesday], ..repeat(Every::Week) };
        assert_eq!(rule(biweekly, at), "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH");
        let monthly = Repeat { count: Some(6), ..repeat(Every::Month) };
        assert_eq!(rule(monthly, at), "FREQ=MONTHLY;COUNT=6");
        // The last day, whole, in Berlin (UTC+1 in winter): 22:59:59Z.
        let until = Repeat { until: Some("2027-01-29".into()), ..repeat(Every::Week) };
        assert_eq!(rule(until.clone(), at), "FREQ=WEEKLY;UNTIL=20270129T225959Z");
        assert_eq!(rule(until, day), "FREQ=WEEKLY;UNTIL=20270129");
        assert_eq!(rule(repeat(Every::Year), day), "FREQ=YEARLY");
    }

    #[test]
    fn what_cannot_be_a_rule_is_refused_with_what_to_send() {
        let zone = Zone::UTC;
        let at = EventTime::parse_in("2026-12-07T09:30", zone).unwrap();
        let refused = |r: Repeat| r.rrule(at, zone).unwrap_err();
        let e = refused(Repeat { on_days: vec![Day::Monday], ..repeat(Every::Day) });
        assert!(e.to_string().contains("every: week"), "{e}");
        assert_eq!(e.code(), "invalid_repeat");
        let e = refused(Repeat { until: Some("2027-01-01".into()), count: Some(3), ..repeat(Every::Day) });
        assert!(e.to_string().contains("not both"), "{e}");
        assert!(refused(Repeat { until: Some("2026-12-01".into()), ..repeat(Every::Day) })
            .to_string()
            .contains("before"));
        assert!(refused(Repeat { until: Some("next friday".into()), ..repeat(Every::Day) })
            .to_string()
            .contains("date"));
        refused(Repeat { interval: Some(0), ..repeat(Every::Day) });
        refused(Repeat { count: Some(0), ..repeat(Every::Day) });
        refused(Repeat { on_days: vec![Day::Sunday], ..repeat(Every::Weekday) });
    }
}
