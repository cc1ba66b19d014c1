//! Recurrences: checking an `RRULE` and expanding an event into its
//! occurrences over a bounded range. The expansion is the `rrule` crate's
//! (RFC 5545), run on the event's wall clock and placed in its zone by
//! [`gap`], so a series keeps its wall-clock time across DST; all-day series
//! are expanded as dates. Overrides
//! (`RECURRENCE-ID`) then move, change or cancel single instances.
//!
//! Every listing is bounded: a range of at most [`MAX_RANGE_DAYS`] and at
//! most [`MAX_INSTANCES`] occurrences, with `truncated` saying when more exist.

use super::error::CalendarError;
use super::gap;
use super::model::{CalendarEvent, EventTime, InstanceOverride, Recurrence, Zone};
use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use rrule::{Frequency, RRule, RRuleSet, Unvalidated};

mod until;

/// The most occurrences one listing returns.
pub const MAX_INSTANCES: usize = 500;
/// The longest range one listing covers.
pub const MAX_RANGE_DAYS: i64 = 366;

/// One occurrence: its original start (`recurrence_id`, for a series) and
/// what it is after its override.
#[derive(Debug, Clone, PartialEq)]
pub struct Occurrence {
    pub recurrence_id: Option<EventTime>,
    pub start: EventTime,
    pub end: EventTime,
    pub title: String,
    pub location: Option<String>,
    pub description: Option<String>,
}

/// The `RRULE` value without its optional `RRULE:` prefix.
pub fn rule_text(rrule: &str) -> &str {
    let t = rrule.trim();
    t.strip_prefix("RRULE:").unwrap_or(t)
}

/// The series' rule set, anchored at its start's wall-clock time in its
/// zone, floating ([`gap`]: placed in the zone by [`back`]); dates at
/// midnight UTC, read back as dates.
fn rule_set(start: EventTime, zone: Zone, rec: &Recurrence) -> Result<RRuleSet, CalendarError> {
    let set = RRuleSet::new(anchor(start, zone)).rrule(rule(start, zone, &rec.rrule)?);
    let set = rec.exdates.iter().flat_map(|t| exdate_walls(*t, zone)).fold(set, |s, w| s.exdate(w));
    Ok(rec.rdates.iter().fold(set, |s, t| s.rdate(anchor(*t, zone))))
}

/// The `RRULE` alone, read and checked. Its `UNTIL` is read here, not by the
/// `rrule` crate: the crate takes any `UNTIL` without `Z` (a DATE included)
/// as the machine's local time and then refuses it beside a zoned start, so
/// the form RFC 5545 requires for an all-day series was refused ([`until`]).
fn rule(start: EventTime, zone: Zone, rrule: &str) -> Result<RRule, CalendarError> {
    let text = rule_text(rrule);
    let bad = |e: String| CalendarError::bad("invalid_rrule", format!("invalid RRULE {text:?}: {e}"));
    let (rest, until) = until::split(text).map_err(bad)?;
    let rule: RRule<Unvalidated> = rest.parse().map_err(|e: rrule::RRuleError| bad(e.to_string()))?;
    if matches!(rule.get_freq(), Frequency::Secondly | Frequency::Minutely) {
        return Err(bad("a calendar repeats at most hourly".into()));
    }
    let rule = match until {
        Some(u) => {
            let bound = until::bound(u, start, zone).map_err(bad)?;
            // A timed series expands on its floating wall clock ([`gap`]), so
            // its bound is compared there too, as libical does.
            rule.until(match start {
                EventTime::At(_) => gap::floating(bound.with_timezone(&Utc), zone),
                EventTime::Date(_) => bound,
            })
        }
        None => rule,
    };
    rule.validate(anchor(start, zone)).map_err(|e| bad(e.to_string()))
}

fn anchor(t: EventTime, zone: Zone) -> DateTime<rrule::Tz> {
    match t {
        EventTime::Date(d) => rrule::Tz::UTC.from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default()),
        EventTime::At(t) => gap::floating(t, zone),
    }
}

/// An excluded start as the floating times that name it.
fn exdate_walls(t: EventTime, zone: Zone) -> Vec<DateTime<rrule::Tz>> {
    match t {
        EventTime::Date(_) => vec![anchor(t, zone)],
        EventTime::At(t) => gap::walls(t, zone).into_iter().map(gap::wall).collect(),
    }
}

fn back(t: DateTime<rrule::Tz>, all_day: bool, zone: Zone) -> EventTime {
    if all_day {
        EventTime::Date(t.date_naive())
    } else {
        EventTime::At(gap::place(t.naive_utc(), zone))
    }
}

/// Checks a recurrence for an event starting at `start` in `zone`: the rule
/// parses, is not denser than hourly, and its dates are of the event's kind.
/// This is what a stored or synced series must pass to be listed.
pub fn check(start: EventTime, zone: Zone, rec: &Recurrence) -> Result<(), CalendarError> {
    if rec.exdates.iter().chain(&rec.rdates).any(|t| t.is_date() != start.is_date()) {
        return Err(CalendarError::bad(
            "invalid_rrule",
            "exdates and rdates must be dates for an all-day event, times otherwise",
        ));
    }
    rule_set(start, zone, rec).map(|_| ())
}

/// [`check`], and what RFC 5545 forbids of a rule we write: `COUNT` and
/// `UNTIL` together. (A calendar server's rule with both is still listed,
/// each bound holding, as python-dateutil reads it.)
pub fn check_new(start: EventTime, zone: Zone, rec: &Recurrence) -> Result<(), CalendarError> {
    check(start, zone, rec)?;
    let parts = |k: &str| rule_text(&rec.rrule).split(';').filter(|p| until::is_part(p, k)).count();
    if parts("COUNT") > 0 && parts("UNTIL") > 0 {
        return Err(CalendarError::bad(
            "invalid_rrule",
            format!("invalid RRULE {:?}: COUNT and UNTIL must not both be given (RFC 5545 §3.3.10)", rec.rrule),
        ));
    }
    Ok(())
}

/// The occurrences of `event` overlapping `[from, to)`, at most `cap`, and
/// whether more exist. All-day occurrences are placed in `view` (the
/// listing's zone): a date is that day there.
pub fn occurrences(
    event: &CalendarEvent,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    view: Zone,
    cap: usize,
) -> Result<(Vec<Occurrence>, bool), CalendarError> {
    let overlaps = |s: &EventTime, e: &EventTime| s.instant(view) < to && e.instant(view) > from;
    let Some(rec) = &event.recurrence else {
        let one = Occurrence::plain(event, None, event.start, event.end);
        return Ok((overlaps(&one.start, &one.end).then_some(one).into_iter().collect(), false));
    };
    let length = span(event.start, event.end);
    let all_day = event.all_day();
    // Widened by a day each way: an all-day date is read in `view`, whose
    // offset from UTC is under a day.
    let after = anchor(EventTime::At(from - length - Duration::days(1)), event.timezone);
    let before = anchor(EventTime::At(to + Duration::days(1)), event.timezone);
    let result = rule_set(event.start, event.timezone, rec)?.after(after).before(before).all(u16::MAX);
    let mut truncated = result.limited;
    let mut out = vec![];
    let mut seen = vec![];
    for rid in result.dates.into_iter().map(|t| back(t, all_day, event.timezone)) {
        if seen.contains(&rid) {
            continue; // two wall times placed at one instant (a gap): one instance
        }
        seen.push(rid);
        if let Some(o) = event.occurrence(rid, length) {
            if overlaps(&o.start, &o.end) {
                out.push(o);
            }
        }
    }
    // Instances moved into the range from outside it.
    for o in event.overrides.iter().filter(|o| !o.cancelled && !seen.contains(&o.recurrence_id)) {
        if let Some(occ) = event.occurrence(o.recurrence_id, length).filter(|x| overlaps(&x.start, &x.end)) {
            out.push(occ);
        }
    }
    out.sort_by_key(|o| (o.start.instant(view), o.recurrence_id));
    if out.len() > cap {
        out.truncate(cap);
        truncated = true;
    }
    Ok((out, truncated))
}

/// The length of an event, as a duration (whole days for dates).
pub fn span(start: EventTime, end: EventTime) -> Duration {
    match (start, end) {
        (EventTime::Date(a), EventTime::Date(b)) => Duration::days((b - a).num_days()),
        (a, b) => b.instant(Zone::UTC) - a.instant(Zone::UTC),
    }
}

impl Occurrence {
    fn plain(event: &CalendarEvent, rid: Option<EventTime>, start: EventTime, end: EventTime) -> Occurrence {
        Occurrence {
            recurrence_id: rid,
            start,
            end,
            title: event.title.clone(),
            location: event.location.clone(),
            description: event.description.clone(),
        }
    }

    fn overridden(mut self, o: &InstanceOverride) -> Occurrence {
        let length = span(self.start, self.end);
        if let Some(s) = o.start {
            self.start = s;
            self.end = s.shifted(length);
        }
        if let Some(e) = o.end {
            self.end = e;
        }
        if let Some(t) = &o.title {
            self.title = t.clone();
        }
        if o.location.is_some() {
            self.location = o.location.clone().filter(|l| !l.is_empty());
        }
        if o.description.is_some() {
            self.description = o.description.clone().filter(|d| !d.is_empty());
        }
        self
    }
}

impl CalendarEvent {
    /// The instance of this series that originally starts at `rid`, as its
    /// override leaves it; `None` when that instance is cancelled.
    pub fn occurrence(&self, rid: EventTime, length: Duration) -> Option<Occurrence> {
        let o = Occurrence::plain(self, Some(rid), rid, rid.shifted(length));
        match self.overrides.iter().find(|o| o.recurrence_id == rid) {
            Some(ov) if ov.cancelled => None,
            Some(ov) => Some(o.overridden(ov)),
            None => Some(o),
        }
    }

    /// Whether the series has an instance originally starting at `rid`
    /// (cancelled ones included).
    pub fn has_instance(&self, rid: EventTime) -> Result<bool, CalendarError> {
        let Some(rec) = &self.recurrence else { return Ok(false) };
        let at = anchor(rid, self.timezone);
        let set = rule_set(self.start, self.timezone, rec)?;
        // A day each way: a wall time in a gap is placed up to hours away.
        let hit = set.after(at - Duration::days(1)).before(at + Duration::days(1)).all(u16::MAX);
        Ok(hit.dates.into_iter().any(|t| back(t, self.all_day(), self.timezone) == rid))
    }
}

impl CalendarEvent {
    /// How many instances the rule alone generates before `rid` (for a
    /// `COUNT` split): RFC 5545's `COUNT` counts them before `EXDATE`
    /// removes any, and `RDATE`s are not among them.
    pub fn rule_instances_before(&self, rid: EventTime) -> Result<usize, CalendarError> {
        let Some(rec) = &self.recurrence else { return Ok(0) };
        let set = RRuleSet::new(anchor(self.start, self.timezone)).rrule(rule(self.start, self.timezone, &rec.rrule)?);
        // Placed instances, not floating ones, are compared: around a gap
        // the two orders can differ ([`gap`]).
        let upto = anchor(rid, self.timezone) + Duration::days(1);
        let dates = set.before(upto).all(u16::MAX).dates;
        Ok(dates.into_iter().filter(|t| back(*t, self.all_day(), self.timezone) < rid).count())
    }
}

/// The day `d` as a range of instants in `zone`.
pub fn day_range(d: NaiveDate, zone: Zone) -> (DateTime<Utc>, DateTime<Utc>) {
    (zone.day_start(d), zone.day_start(d + Duration::days(1)))
}
