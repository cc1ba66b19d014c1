//! Building and changing events, as pure functions over [`CalendarEvent`]:
//! reading input into a checked event, applying [`EventChanges`] to a whole
//! series, to one instance (an override) or to an instance and the ones
//! after it (the series is ended there and a new one starts), and deleting
//! the same three ways. Nothing here touches a store.

use super::error::CalendarError;
use super::model::*;
use super::recur;
use crate::ids::EventId;
use chrono::Duration;

/// Longest title, location and description accepted (characters).
pub const MAX_TITLE: usize = 500;
pub const MAX_TEXT: usize = 20_000;

fn text(what: &str, s: &str, max: usize, required: bool) -> Result<(), CalendarError> {
    if required && s.trim().is_empty() {
        return Err(CalendarError::bad("invalid_value", format!("{what} must not be empty")));
    }
    if s.chars().count() > max {
        return Err(CalendarError::bad("invalid_value", format!("{what} is longer than {max} characters")));
    }
    Ok(())
}

/// The end of an event starting at `start`: `end`, or `duration_minutes`, or
/// `default` after it; never before or at the start, and of the same kind.
fn end_of(
    start: EventTime,
    end: Option<&str>,
    minutes: Option<u32>,
    default: Duration,
    zone: Zone,
) -> Result<EventTime, CalendarError> {
    let end = match (end, minutes) {
        (Some(e), _) => EventTime::parse_in(e, zone)?,
        (None, Some(m)) if start.is_date() => start.shifted(Duration::days((i64::from(m) / 1440).max(1))),
        (None, Some(m)) => start.shifted(Duration::minutes(i64::from(m))),
        (None, None) => start.shifted(default),
    };
    if end.is_date() != start.is_date() {
        return Err(CalendarError::bad("invalid_time", "start and end must both be dates (all-day) or both times"));
    }
    if end <= start {
        return Err(CalendarError::bad("end_before_start", format!("end {end} is not after start {start}")));
    }
    Ok(end)
}

fn default_length(start: EventTime) -> Duration {
    if start.is_date() {
        Duration::days(1)
    } else {
        Duration::hours(1)
    }
}

fn recurrence(input: &RecurrenceInput, start: EventTime, zone: Zone) -> Result<Recurrence, CalendarError> {
    let times = |v: &[String]| v.iter().map(|t| EventTime::parse_in(t, zone)).collect::<Result<Vec<_>, _>>();
    let rec = Recurrence {
        rrule: recur::rule_text(&input.rrule).to_string(),
        exdates: times(&input.exdates)?,
        rdates: times(&input.rdates)?,
    };
    recur::check_new(start, zone, &rec)?;
    Ok(rec)
}

/// A new event from input; `zone` is the user's when the input names none.
pub fn build(input: &NewEvent, zone: Zone, now: i64) -> Result<CalendarEvent, CalendarError> {
    text("title", &input.title, MAX_TITLE, true)?;
    text("location", input.location.as_deref().unwrap_or(""), MAX_TITLE, false)?;
    text("description", input.description.as_deref().unwrap_or(""), MAX_TEXT, false)?;
    let zone = input.timezone.as_deref().map(Zone::parse).transpose()?.unwrap_or(zone);
    let start = EventTime::parse_in(&input.start, zone)?;
    let end = end_of(start, input.end.as_deref(), input.duration_minutes, default_length(start), zone)?;
    let recurrence = input.recurrence.as_ref().map(|r| recurrence(r, start, zone)).transpose()?;
    let id = EventId::new();
    Ok(CalendarEvent {
        uid: format!("{id}@agentic-chat"),
        id,
        title: input.title.trim().to_string(),
        description: input.description.clone().filter(|d| !d.is_empty()),
        location: input.location.clone().filter(|l| !l.is_empty()),
        start,
        end,
        timezone: zone,
        recurrence,
        overrides: vec![],
        project_id: input.project_id.clone(),
        task_id: input.task_id.clone(),
        version: 1,
        created_at: now,
        updated_at: now,
        remote: None,
        organizer: None,
    })
}

fn check_changes(c: &EventChanges) -> Result<(), CalendarError> {
    if let Some(t) = &c.title {
        text("title", t, MAX_TITLE, true)?;
    }
    text("location", c.location.as_deref().unwrap_or(""), MAX_TITLE, false)?;
    text("description", c.description.as_deref().unwrap_or(""), MAX_TEXT, false)
}

/// The new start and end after `c`, from `start`/`end` (moving the start
/// alone keeps the length).
fn moved(
    c: &EventChanges,
    start: EventTime,
    end: EventTime,
    zone: Zone,
) -> Result<(EventTime, EventTime), CalendarError> {
    let new_start = c.start.as_deref().map(|s| EventTime::parse_in(s, zone)).transpose()?.unwrap_or(start);
    if c.start.is_none() && c.end.is_none() && c.duration_minutes.is_none() {
        return Ok((start, end));
    }
    let keep = if new_start.is_date() == start.is_date() { recur::span(start, end) } else { default_length(new_start) };
    let new_end = end_of(new_start, c.end.as_deref(), c.duration_minutes, keep, zone)?;
    Ok((new_start, new_end))
}

/// `c` applied to the whole event (or series). Moving a series' start (or
/// zone) moves its exceptions and overrides with it, so they still name
/// their instances: by the change of wall-clock time in the event's zone
/// (whole days for an all-day series), as its instances move ([`follow`]).
pub fn change_series(ev: &CalendarEvent, c: &EventChanges) -> Result<CalendarEvent, CalendarError> {
    check_changes(c)?;
    let old = ev;
    let mut ev = ev.clone();
    if let Some(z) = &c.timezone {
        ev.timezone = Zone::parse(z)?;
    }
    let (start, end) = moved(c, ev.start, ev.end, ev.timezone)?;
    if start.is_date() != ev.start.is_date() && ev.recurrence.is_some() {
        return Err(CalendarError::bad("invalid_time", "a series cannot change between all-day and timed"));
    }
    let from = (old.start, old.timezone);
    let to = (start, ev.timezone);
    if let Some(rec) = &mut ev.recurrence {
        rec.exdates.iter_mut().chain(rec.rdates.iter_mut()).for_each(|t| *t = follow(*t, from, to));
        ev.overrides.iter_mut().for_each(|o| o.recurrence_id = follow(o.recurrence_id, from, to));
    }
    (ev.start, ev.end) = (start, end);
    if let Some(r) = &c.recurrence {
        ev.recurrence = Some(recurrence(r, ev.start, ev.timezone)?);
    } else if let Some(rec) = &ev.recurrence {
        recur::check(ev.start, ev.timezone, rec)?;
    }
    apply_text(&mut ev.title, &mut ev.location, &mut ev.description, c);
    Ok(ev)
}

/// Where `t`, an instance of a series starting at `from`, lands when the
/// series starts at `to` instead: its local date and time in the old zone,
/// moved by as much as the start's, read in the new zone. A fixed duration
/// would not do: across a DST change (or to another zone) the instances
/// keep their wall-clock time and their instants move by another amount.
fn follow(t: EventTime, from: (EventTime, Zone), to: (EventTime, Zone)) -> EventTime {
    match (t, from.0, to.0) {
        (EventTime::Date(d), EventTime::Date(a), EventTime::Date(b)) => EventTime::Date(d + (b - a)),
        (EventTime::At(t), EventTime::At(a), EventTime::At(b)) => {
            let wall = |t, z: Zone| z.local(t).naive_local();
            let local = wall(t, from.1) + (wall(b, to.1) - wall(a, from.1));
            EventTime::At(as_expanded(local, to.1))
        }
        _ => t,
    }
}

/// The instant the expansion gives a wall-clock time in `zone` (the `rrule`
/// crate's rule: a repeated time is its earlier reading, a skipped one is
/// that long after the day's start).
fn as_expanded(local: chrono::NaiveDateTime, zone: Zone) -> chrono::DateTime<chrono::Utc> {
    zone.instant(local)
        .unwrap_or_else(|_| zone.day_start(local.date()) + (local - local.date().and_time(chrono::NaiveTime::MIN)))
}

fn apply_text(title: &mut String, location: &mut Option<String>, description: &mut Option<String>, c: &EventChanges) {
    if let Some(t) = &c.title {
        *title = t.trim().to_string();
    }
    if let Some(l) = &c.location {
        *location = Some(l.clone()).filter(|l| !l.is_empty());
    }
    if let Some(d) = &c.description {
        *description = Some(d.clone()).filter(|d| !d.is_empty());
    }
}

/// The instance `rid` of the series, checked to exist. For a timed series a
/// date names the one instance that day (a model says "tomorrow's standup"
/// and knows the date, not the listed start).
pub fn instance(ev: &CalendarEvent, rid: &str) -> Result<EventTime, CalendarError> {
    let t = EventTime::parse_in(rid, ev.timezone)?;
    if ev.recurrence.is_none() {
        return Err(CalendarError::bad("not_recurring", "this event does not repeat: change it without `instance`"));
    }
    let t = match (t, ev.start) {
        (EventTime::Date(d), EventTime::At(_)) => instance_on(ev, d, rid)?,
        _ => t,
    };
    match ev.has_instance(t)? {
        true => Ok(t),
        false => Err(CalendarError::NoSuchInstance(rid.to_string())),
    }
}

/// The one instance of a timed series originally on `day` (in its zone).
fn instance_on(ev: &CalendarEvent, day: chrono::NaiveDate, rid: &str) -> Result<EventTime, CalendarError> {
    let (from, to) = recur::day_range(day, ev.timezone);
    let mut on_day = ev.clone();
    // Cancelled and moved ones are still the day's instances to name.
    on_day.overrides.clear();
    let (found, _) = recur::occurrences(&on_day, from, to, ev.timezone, 3)?;
    let starts: Vec<EventTime> =
        found.into_iter().filter_map(|o| o.recurrence_id).filter(|r| r.instant(ev.timezone) >= from).collect();
    match starts.as_slice() {
        [one] => Ok(*one),
        [] => Err(CalendarError::NoSuchInstance(rid.to_string())),
        _ => Err(CalendarError::bad(
            "ambiguous_instance",
            format!("the series happens more than once on {day}: give `instance` as listed (its start time)"),
        )),
    }
}

/// `c` applied to the one instance `rid`: kept as an override.
pub fn change_instance(ev: &CalendarEvent, rid: EventTime, c: &EventChanges) -> Result<CalendarEvent, CalendarError> {
    check_changes(c)?;
    if c.recurrence.is_some() || c.timezone.is_some() {
        return Err(CalendarError::bad("invalid_value", "recurrence and timezone change with the whole series"));
    }
    let length = recur::span(ev.start, ev.end);
    let Some(now) = ev.occurrence(rid, length) else {
        return Err(CalendarError::NoSuchInstance(rid.to_string()));
    };
    let (start, end) = moved(c, now.start, now.end, ev.timezone)?;
    let mut ev = ev.clone();
    let at = match ev.overrides.iter().position(|o| o.recurrence_id == rid) {
        Some(i) => i,
        None => {
            ev.overrides.push(InstanceOverride::new(rid));
            ev.overrides.len() - 1
        }
    };
    let o = &mut ev.overrides[at];
    let (mut title, mut location, mut description) = (now.title, now.location, now.description);
    apply_text(&mut title, &mut location, &mut description, c);
    o.start = (start != rid).then_some(start);
    o.end = (end != rid.shifted(length)).then_some(end);
    o.title = (title != ev.title).then_some(title);
    o.location = (location != ev.location).then(|| location.unwrap_or_default());
    o.description = (description != ev.description).then(|| description.unwrap_or_default());
    ev.overrides.sort_by_key(|o| o.recurrence_id);
    Ok(ev)
}

impl InstanceOverride {
    pub fn new(rid: EventTime) -> Self {
        InstanceOverride {
            recurrence_id: rid,
            cancelled: false,
            title: None,
            start: None,
            end: None,
            location: None,
            description: None,
        }
    }
}

/// The instance `rid` cancelled (kept as a cancelled override).
pub fn cancel_instance(ev: &CalendarEvent, rid: EventTime) -> CalendarEvent {
    let mut ev = ev.clone();
    ev.overrides.retain(|o| o.recurrence_id != rid);
    ev.overrides.push(InstanceOverride { cancelled: true, ..InstanceOverride::new(rid) });
    ev.overrides.sort_by_key(|o| o.recurrence_id);
    ev
}

/// The series ended just before instance `rid` (`None`: nothing would be
/// left, delete the whole series). Overrides and exceptions from `rid` on go.
pub fn end_before(ev: &CalendarEvent, rid: EventTime) -> Result<Option<CalendarEvent>, CalendarError> {
    if rid <= ev.start {
        return Ok(None);
    }
    let mut ev = ev.clone();
    let Some(rec) = &mut ev.recurrence else { return Ok(None) };
    let until = match rid {
        EventTime::Date(d) => (d - Duration::days(1)).format("%Y%m%d").to_string(),
        EventTime::At(t) => (t - Duration::seconds(1)).format("%Y%m%dT%H%M%SZ").to_string(),
    };
    let kept: Vec<&str> =
        rec.rrule.split(';').filter(|p| !p.starts_with("UNTIL=") && !p.starts_with("COUNT=")).collect();
    rec.rrule = format!("{};UNTIL={until}", kept.join(";"));
    rec.exdates.retain(|t| *t < rid);
    rec.rdates.retain(|t| *t < rid);
    ev.overrides.retain(|o| o.recurrence_id < rid);
    recur::check(ev.start, ev.timezone, rec)?;
    Ok(Some(ev))
}

/// The part of the series from instance `rid` on, as a new series with `c`
/// applied: its own id and UID; overrides and exceptions from `rid` on move
/// to it. A `COUNT` becomes the instances that were left.
pub fn split_from(
    ev: &CalendarEvent,
    rid: EventTime,
    c: &EventChanges,
    now: i64,
) -> Result<CalendarEvent, CalendarError> {
    let mut tail = ev.clone();
    let id = EventId::new();
    (tail.uid, tail.id) = (format!("{id}@agentic-chat"), id);
    let length = recur::span(ev.start, ev.end);
    (tail.start, tail.end) = (rid, rid.shifted(length));
    (tail.version, tail.created_at, tail.updated_at, tail.remote) = (1, now, now, None);
    tail.overrides.retain(|o| o.recurrence_id >= rid);
    if let Some(rec) = &mut tail.recurrence {
        rec.exdates.retain(|t| *t >= rid);
        rec.rdates.retain(|t| *t >= rid);
        let before = ev.rule_instances_before(rid)?;
        rec.rrule = rec
            .rrule
            .split(';')
            .map(|p| match p.strip_prefix("COUNT=").and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => format!("COUNT={}", n.saturating_sub(before).max(1)),
                None => p.to_string(),
            })
            .collect::<Vec<_>>()
            .join(";");
    }
    change_series(&tail, c)
}
