//! Free time: the gaps of at least a given length inside working hours, in
//! the user's zone, between the user's busy occurrences. All-day events do
//! not block time (as calendars mark them "free" by default: holidays,
//! birthdays, reminders); every timed occurrence does.

use super::model::{SkippedEvent, Zone};
use chrono::{DateTime, Datelike, Duration, NaiveTime, Utc, Weekday};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The most slots one answer lists.
pub const MAX_SLOTS: usize = 20;

/// One free slot, as local times with their offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FreeSlot {
    pub start: String,
    pub end: String,
    pub minutes: i64,
}

/// `GET /events/free` and `find_free_time`: the free slots, and the events
/// left out of the busy time because they could not be read (absent when
/// none were): time they would take may be shown free.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FreeSlots {
    pub slots: Vec<FreeSlot>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedEvent>,
}

/// Working hours: each day from `start` to `end` local time, weekdays only
/// unless `weekends`.
#[derive(Debug, Clone, Copy)]
pub struct Hours {
    pub start: NaiveTime,
    pub end: NaiveTime,
    pub weekends: bool,
}

/// The free slots of at least `length` in `[from, to)`, given `busy`
/// intervals (any order, may overlap).
pub fn free_slots(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    length: Duration,
    hours: Hours,
    zone: Zone,
    mut busy: Vec<(DateTime<Utc>, DateTime<Utc>)>,
) -> Vec<FreeSlot> {
    busy.sort();
    let mut out = vec![];
    for (open, close) in windows(from, to, hours, zone) {
        if out.len() >= MAX_SLOTS {
            break;
        }
        gaps(open, close, length, &busy, zone, &mut out);
    }
    out.truncate(MAX_SLOTS);
    out
}

/// The working hours of each day of `[from, to)` in `zone`, as instants.
pub fn windows(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    hours: Hours,
    zone: Zone,
) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let mut out = vec![];
    let mut day = zone.local(from).date_naive();
    let last = zone.local(to).date_naive();
    while day <= last {
        let weekend = matches!(day.weekday(), Weekday::Sat | Weekday::Sun);
        if hours.weekends || !weekend {
            let open = zone.instant(day.and_time(hours.start)).unwrap_or_else(|_| zone.day_start(day)).max(from);
            let close = zone.instant(day.and_time(hours.end)).unwrap_or_else(|_| zone.day_start(day)).min(to);
            if open < close {
                out.push((open, close));
            }
        }
        day += Duration::days(1);
    }
    out
}

/// The most busy items one answer names.
pub const MAX_BUSY: usize = 40;

/// A timed occurrence inside the asked working hours: what made the time
/// busy, so "am I free then?" has the conflict in front of the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Busy {
    pub title: String,
    /// Local time with its offset.
    pub start: String,
    pub end: String,
    pub event_id: crate::ids::EventId,
}

/// `find_free_time`'s answer: the free slots and what is busy around them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FreeAndBusy {
    #[serde(flatten)]
    pub free: FreeSlots,
    /// In start order, at most [`MAX_BUSY`].
    pub busy: Vec<Busy>,
}

fn gaps(
    open: DateTime<Utc>,
    close: DateTime<Utc>,
    length: Duration,
    busy: &[(DateTime<Utc>, DateTime<Utc>)],
    zone: Zone,
    out: &mut Vec<FreeSlot>,
) {
    let mut cursor = open;
    let slot = |a: DateTime<Utc>, b: DateTime<Utc>| FreeSlot {
        start: zone.local(a).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        end: zone.local(b).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        minutes: (b - a).num_minutes(),
    };
    for &(s, e) in busy.iter().filter(|(s, e)| *e > open && *s < close) {
        if s - cursor >= length {
            out.push(slot(cursor, s));
        }
        cursor = cursor.max(e);
    }
    if close - cursor >= length {
        out.push(slot(cursor, close));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn gaps_between_busy_times_inside_working_hours() {
        let zone = Zone::parse("Europe/Berlin").unwrap();
        let at = |h, m| zone.0.with_ymd_and_hms(2026, 12, 1, h, m, 0).unwrap().with_timezone(&Utc);
        let hours = Hours {
            start: NaiveTime::from_hms_opt(9, 0, 0).unwrap(),
            end: NaiveTime::from_hms_opt(17, 0, 0).unwrap(),
            weekends: false,
        };
        let busy = vec![(at(10, 0), at(11, 0)), (at(10, 30), at(12, 0)), (at(16, 45), at(18, 0))];
        let slots = free_slots(at(0, 0), at(23, 0), Duration::minutes(30), hours, zone, busy);
        let starts: Vec<_> = slots.iter().map(|s| (s.start.as_str(), s.minutes)).collect();
        assert_eq!(starts, vec![("2026-12-01T09:00:00+01:00", 60), ("2026-12-01T12:00:00+01:00", 285)]);
    }
}
