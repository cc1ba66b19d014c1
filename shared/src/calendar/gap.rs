//! Wall-clock times of a series and the instants they name (RFC 5545
//! §3.3.5). A timed series recurs on its zone's wall clock, so it is
//! expanded as *floating* local times (UTC standing in for "no zone") and
//! each is then [`place`]d in the zone: a time the clocks skip is read with
//! the offset before the gap (00:30 on the day Santiago skips 00:00→01:00 is
//! 00:30 −04, i.e. 01:30 −03), a time they repeat is the first of the two.
//!
//! Why not expand in the zone itself: the `rrule` crate (0.14,
//! `iter/utils.rs`, `add_time_to_date`) makes each instance with
//! `date.and_time(time).and_local_timezone(tz).single()` and, when that is
//! not a single instant, retries as *local midnight* + the time of day,
//! again with `.single()?`. In a zone whose clocks change at midnight
//! (Santiago, Havana, Beirut, Cairo) midnight itself is skipped or repeated
//! on that day, so both fail and the iterator silently drops the instance
//! (`rrule_iter.rs`: `let Some(dt) = … else { continue }`), while `COUNT`
//! goes on counting: a daily `COUNT=5` loses the day of the change and
//! gains one at the end. Expanding floating times leaves the crate nothing
//! to resolve; the placing, with RFC 5545's rule, is ours.

use super::time::Zone;
use chrono::{DateTime, Duration, NaiveDateTime, Offset, TimeZone, Utc};

/// The wall-clock time of `t` in `zone`, as the floating time the crate
/// expands.
pub fn floating(t: DateTime<Utc>, zone: Zone) -> DateTime<rrule::Tz> {
    wall(t.with_timezone(&zone.0).naive_local())
}

/// A floating wall-clock time as the crate takes it.
pub fn wall(w: NaiveDateTime) -> DateTime<rrule::Tz> {
    rrule::Tz::UTC.from_utc_datetime(&w)
}

/// The instant the wall-clock time `w` names in `zone` (RFC 5545 §3.3.5):
/// the first of a repeated time; a skipped time read with the offset in
/// force just before the gap.
pub fn place(w: NaiveDateTime, zone: Zone) -> DateTime<Utc> {
    if let Some(t) = zone.0.from_local_datetime(&w).earliest() {
        return t.with_timezone(&Utc);
    }
    // In a gap: the last wall time before it has the offset before it. Gaps
    // are at most a day long (Samoa skipped 30 Dec 2011), hence 49 steps.
    (1..=49)
        .find_map(|k| zone.0.from_local_datetime(&(w - Duration::minutes(30 * k))).latest())
        .map(|before| Utc.from_utc_datetime(&(w - Duration::seconds(before.offset().fix().local_minus_utc().into()))))
        .unwrap_or_else(|| Utc.from_utc_datetime(&w))
}

/// Every wall-clock time that [`place`] puts at `t`: its own local time,
/// and also the skipped time it stands for when `t` lies just after a gap
/// (both 00:30 and 01:30 on Santiago's day of change are 04:30Z). None for
/// the second pass of a repeated hour, which no wall-clock time names.
pub fn walls(t: DateTime<Utc>, zone: Zone) -> Vec<NaiveDateTime> {
    let mut out: Vec<NaiveDateTime> = [t, t - Duration::hours(25)]
        .iter()
        .map(|p| {
            t.naive_utc()
                + Duration::seconds(zone.0.offset_from_utc_datetime(&p.naive_utc()).fix().local_minus_utc().into())
        })
        .filter(|w| place(*w, zone) == t)
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
#[path = "gap_tests.rs"]
mod tests;
