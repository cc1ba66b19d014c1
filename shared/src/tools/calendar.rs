//! The calendar tools: list (recurrences expanded, in the user's zone),
//! create, update and delete (one instance, this and following, or the whole
//! series), and find free time — over [`CalendarService`], the same one the
//! entities API's `/events` routes use. Times the model writes are local
//! times in the user's zone (`2026-12-01T10:00`) or dates for all-day events;
//! the context gives it today's date and the zone. Each write streams an
//! `operation` with a sentence ("Moved Design review to Tue 1 Dec 16:00")
//! and a `calendar_patch`.
//!
//! Made for the smallest model shipped (issue 40): a series is `repeat`
//! fields, not RFC 5545 (the raw `rrule` stays accepted); days are a named
//! `range` the server resolves ([`Days`]); an occurrence is named by its
//! date; an update that changes nothing is refused with what to call
//! instead; a listing is the whole calendar unless a project is asked for,
//! and says what a project filter hid; free time names what is busy.
//!
//! [`CalendarService`]: crate::calendar::CalendarService

use super::call::{to_json, Call};
use super::outcome::{Done, Op, Refusal};
use super::{Tool, ToolName};
use crate::calendar::days::{self, Days};
use crate::calendar::repeat::{self, Repeat};
use crate::calendar::{
    edit, CalendarError, CalendarService, EditScope, EventChanges, EventTime, FreeQuery, ListQuery, NewEvent,
    RecurrenceInput, Target, Written, Zone,
};
use crate::ids::{EventId, ProjectId};
use crate::sse::{OperationAction, OperationStatus, StreamEvent};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const ListCalendarEvents: ToolName = ToolName::of(&ListCalendarEvents);
    pub const CreateCalendarEvent: ToolName = ToolName::of(&CreateCalendarEvent);
    pub const UpdateCalendarEvent: ToolName = ToolName::of(&UpdateCalendarEvent);
    pub const DeleteCalendarEvent: ToolName = ToolName::of(&DeleteCalendarEvent);
    pub const FindFreeTime: ToolName = ToolName::of(&FindFreeTime);
}

/// Every calendar tool, in the order the `calendar` scope offers them.
pub const CALENDAR_TOOLS: &[ToolName] = &[
    ToolName::ListCalendarEvents,
    ToolName::CreateCalendarEvent,
    ToolName::UpdateCalendarEvent,
    ToolName::DeleteCalendarEvent,
    ToolName::FindFreeTime,
];

const ENTITY: &str = "calendar_event";

fn service<'a>(c: &Call<'a>) -> Result<&'a CalendarService, Refusal> {
    c.calendar.ok_or_else(|| Refusal::Args("the calendar is not available here".into()))
}

/// The zone the request named, else `None` (the user's stored zone).
fn zone_name(c: &Call<'_>) -> Option<String> {
    c.zone.map(|z| z.name().to_string())
}

fn event_id(s: &str) -> Result<EventId, Refusal> {
    EventId::parse(s).map_err(|e| Refusal::Calendar(CalendarError::InvalidId(format!("event_id: {e}")), None))
}

/// A read's result, or its refusal with the step it was.
fn read(r: Result<serde_json::Value, CalendarError>, op: Op) -> Result<Done, Refusal> {
    match r {
        Ok(v) => Ok(Done::read(Ok(v), op)),
        Err(e) => Err(Refusal::Calendar(e, Some(op))),
    }
}

/// A write's result: its step with the sentence, then its patch.
fn written(r: Result<Written, CalendarError>, mut op: Op, action: OperationAction) -> Result<Done, Refusal> {
    let w = r.map_err(|e| Refusal::Calendar(e, Some(op.clone())))?;
    op.name = w.title.clone();
    if let Some(ev) = &w.event {
        op.id = Some(ev.id.to_string());
    }
    let event = |status| StreamEvent::Operation {
        action,
        entity_type: ENTITY.into(),
        entity_name: op.name.clone(),
        status,
        entity_id: op.id.clone(),
        summary: Some(w.summary.clone()),
    };
    let result = serde_json::json!({ "done": w.summary, "event": w.event });
    let turn_events = vec![
        event(OperationStatus::Start),
        event(OperationStatus::Success),
        StreamEvent::CalendarPatch { patch: w.patch },
    ];
    Ok(Done { result: Ok(result), ops: vec![], patches: vec![], turn_events })
}

fn op(action: OperationAction, name: impl Into<String>, id: Option<String>) -> Op {
    Op { action, entity_type: ENTITY, name: name.into(), id }
}

/// The days a read covers: a named `range`, or `from` and `to`.
struct Span {
    from: String,
    to: String,
    /// "this_week: Mon 30 Nov – Sun 6 Dec 2026", for a named range.
    said: Option<String>,
    one_day: bool,
    /// How an operation line names the days: the range's name (`this_week`,
    /// as the web page's history rebuilds it from the arguments), else `from – to`.
    label: String,
    /// What the call said that the span left out, for the result.
    note: Option<String>,
}

/// The zone the call reads times in (the request's, else the user's).
async fn zone_of(svc: &CalendarService, c: &Call<'_>) -> Result<Zone, Refusal> {
    svc.zone(c.user, zone_name(c).as_deref()).await.map_err(|e| Refusal::Calendar(e, None))
}

async fn span(c: &Call<'_>, range: Option<Days>, from: Option<String>, to: Option<String>) -> Result<Span, Refusal> {
    let both = |f: &Option<String>| f.as_deref().is_some_and(|s| !s.trim().is_empty());
    // A range's name in `from`/`to` ("friday", "tomorrow"): the local model
    // wrote `{from: "friday", to: "friday"}` for "Friday afternoon" and the
    // refused call ended in "what do you mean by friday?". It is the range
    // the model meant, resolved as `range` would be.
    let (range, from, to) = match (range, named(&from), named(&to)) {
        (None, Some(f), t) if t == Some(f) || (t.is_none() && !both(&to)) => (Some(f), None, None),
        (None, f, t) if f.is_some() || t.is_some() => {
            let today = zone_of(service(c)?, c).await?.local(chrono::Utc::now()).date_naive();
            let from = f.map(|d| d.resolve(today).0.to_string()).or(from);
            (None, from, t.map(|d| d.resolve(today).1.to_string()).or(to))
        }
        _ => (range, from, to),
    };
    match (range, both(&from), both(&to)) {
        (Some(r), f, t) => {
            let today = zone_of(service(c)?, c).await?.local(chrono::Utc::now()).date_naive();
            let (first, last) = r.resolve(today);
            let name = serde_json::to_value(r).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            let said = Some(format!("{name}: {}", days::describe((first, last))));
            // Both: the name says the days. The local model sent `range:
            // friday` with `from`/`to` of that afternoon, and the refusal
            // ("not both") ended the turn in a question back to the user.
            let note = (f || t).then(|| format!("`from`/`to` left out: `range` ({name}) says the days"));
            Ok(Span { from: first.to_string(), to: last.to_string(), said, one_day: first == last, label: name, note })
        }
        (None, true, true) => {
            let (from, to) = (from.unwrap_or_default(), to.unwrap_or_default());
            Ok(Span { label: format!("{from} – {to}"), from, to, said: None, one_day: false, note: None })
        }
        (None, _, _) => Err(Refusal::Args(
            "give `range` (today, tomorrow, this_week, next_week, friday, …) or both `from` and `to`".into(),
        )),
    }
}

/// `s` when it names a range of days (`friday`, `this week`, `Next-Week`).
fn named(s: &Option<String>) -> Option<Days> {
    let s = s.as_deref()?.trim().to_ascii_lowercase().replace([' ', '-'], "_");
    serde_json::from_value(Value::String(s)).ok()
}

/// `result` with the named range it covered, so the answer can say it
/// (and what of the call it left out).
fn with_days(mut result: Value, span: &Span) -> Value {
    if let (Some(o), Some(said)) = (result.as_object_mut(), &span.said) {
        o.insert("days".into(), Value::String(said.clone()));
    }
    if let (Some(o), Some(note)) = (result.as_object_mut(), &span.note) {
        o.insert("note".into(), Value::String(note.clone()));
    }
    result
}

/// The `HH:MM` of a local time (`2026-12-11T12:00` gives `12:00`).
fn clock(s: &Option<String>) -> Option<String> {
    let (_, t) = s.as_deref()?.split_once('T')?;
    let hm = t.get(..5)?;
    chrono::NaiveTime::parse_from_str(hm, "%H:%M").ok().map(|_| hm.to_string())
}

/// The listed occurrences as a line to answer from ("Sun 13 Dec 11:00–12:00
/// Quarterly planning; …"): after a list the local model echoed the
/// question back instead of reading `events`; it copies best from text.
fn in_words(events: &[crate::calendar::EventInstance]) -> String {
    if events.is_empty() {
        return "no events".into();
    }
    let line = |e: &crate::calendar::EventInstance| {
        let (start, end) =
            (chrono::DateTime::parse_from_rfc3339(&e.start), chrono::DateTime::parse_from_rfc3339(&e.end));
        let when = match (start, end) {
            (Ok(s), Ok(en)) if s.date_naive() == en.date_naive() => {
                format!("{}–{}", s.format("%a %-d %b %H:%M"), en.format("%H:%M"))
            }
            (Ok(s), Ok(en)) => format!("{} – {}", s.format("%a %-d %b %H:%M"), en.format("%a %-d %b %H:%M")),
            _ => match chrono::NaiveDate::parse_from_str(&e.start, "%Y-%m-%d") {
                Ok(d) => format!("{} all day", d.format("%a %-d %b")),
                Err(_) => e.start.clone(),
            },
        };
        format!("{when} {}", e.title)
    };
    events.iter().map(line).collect::<Vec<_>>().join("; ")
}

/// `list_calendar_events`: which days, and optionally one project's events.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Days by name, resolved in the user's zone (weeks run Monday–Sunday);
    /// or give `from` and `to`.
    #[serde(default)]
    pub range: Option<Days>,
    /// First day (`2026-12-01`) or time (`2026-12-01T09:00`), the user's zone.
    #[serde(default)]
    pub from: Option<String>,
    /// Last day, included (`2026-12-01` for one day), or an end time.
    #[serde(default)]
    pub to: Option<String>,
    /// Only when the user asks about one project: its id (from list_projects).
    #[serde(default)]
    pub project_id: Option<String>,
}

pub struct ListCalendarEvents;

#[async_trait::async_trait]
impl Tool for ListCalendarEvents {
    type Args = ListArgs;
    const NAME: &'static str = "list_calendar_events";
    const DESCRIPTION: &'static str = "List everything on the user's calendar over some days: give `range` \
        (`today`, `this_week`, `next_week`, `friday`, …) or `from` and `to`. Recurring events come as their \
        occurrences, each with an event_id and an `instance`. Lists the whole calendar: add `project_id` only \
        when the user asks about one project.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: ListArgs) -> Result<Done, Refusal> {
        let svc = service(c)?;
        let span = span(c, a.range, a.from, a.to).await?;
        let project = match a.project_id.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => Some(ProjectId::parse(p).map_err(|e| Refusal::Args(format!("project_id: {e}")))?),
            None => None,
        };
        let op = op(OperationAction::List, format!("calendar {}", span.label), None);
        // The whole calendar is read and the project's part kept here, so
        // the answer can say what the filter hid (issue 40: a model filled
        // in the user's one project and answered "no events this week").
        let q = ListQuery { from: span.from.clone(), to: span.to.clone(), timezone: zone_name(c), project_id: project };
        if let Some(p) = &q.project_id {
            // As the service's own filter: a project not the user's is an
            // error, not "no events" (small models fill in placeholders).
            if c.svc.get_project(c.user, p).await.is_err() {
                let e = CalendarError::bad(
                    "link_not_found",
                    format!("project {p} not found: omit project_id to list every event"),
                );
                return Err(Refusal::Calendar(e, Some(op)));
            }
        }
        let whole = ListQuery { project_id: None, ..q.clone() };
        let mut list = match svc.list(c.user, &whole).await {
            Ok(l) => l,
            Err(e) => return Err(Refusal::Calendar(e, Some(op))),
        };
        let mut hidden = 0;
        if let Some(p) = &q.project_id {
            let before = list.events.len();
            list.events.retain(|e| e.project_id.as_ref() == Some(p));
            hidden = before - list.events.len();
        }
        let mut result = with_days(to_json(&list), &span);
        if let Some(o) = result.as_object_mut() {
            o.insert("agenda".into(), Value::String(in_words(&list.events)));
        }
        if let (Some(o), true) = (result.as_object_mut(), hidden > 0) {
            let note =
                format!("{hidden} other events in these days are not in this project: omit project_id to list them");
            o.insert("not_in_project".into(), Value::String(note));
        }
        Ok(Done::read(Ok(result), op))
    }
}

/// `create_calendar_event`: the event, and how it repeats.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateArgs {
    pub title: String,
    /// Local time in the user's zone (`2026-12-01T10:00`), or a date for an all-day event.
    pub start: String,
    /// Same forms as `start`; or give `duration_minutes` (default one hour).
    #[serde(default)]
    pub end: Option<String>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 525600)]
    pub duration_minutes: Option<u32>,
    /// For an event that repeats ("every weekday", "every other Tuesday", "three times").
    #[serde(default)]
    pub repeat: Option<Repeat>,
    /// Or an RFC 5545 rule (`FREQ=WEEKLY;BYDAY=TU`) instead of `repeat`.
    #[serde(default)]
    pub rrule: Option<String>,
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Only when the user named a project (id from list_projects).
    #[serde(default)]
    pub project_id: Option<ProjectId>,
    // No `task_id`: offered one, the local model filled it with a word of
    // the message ("Priya", "yoga") and the refused call ended the turn. An
    // event is tied to a task through the events API.
}

/// The rule of `repeat` or `rrule` for a series starting at `start`.
fn rule_of(
    repeat: Option<&Repeat>,
    rrule: Option<&str>,
    start: &str,
    zone: Zone,
) -> Result<Option<RecurrenceInput>, CalendarError> {
    let rrule = match (repeat, rrule.filter(|r| !r.trim().is_empty())) {
        // Both: `repeat` says it. The local model filled both (a correct
        // `repeat`, a broken `FREQ=WEEKLY;BYDAY=MONDAY`) and a refusal ended
        // the turn; the result's note says the rule was left out.
        (Some(r), _) => r.rrule(EventTime::parse_in(start, zone)?, zone)?,
        (None, Some(r)) => r.to_string(),
        (None, None) => return Ok(None),
    };
    Ok(Some(RecurrenceInput { rrule, exdates: vec![], rdates: vec![] }))
}

/// `new` starting on its series' first instance ([`repeat::first_instance`]),
/// and that start in words when it moved.
fn on_first_instance(mut new: NewEvent, zone: Zone) -> Result<(NewEvent, Option<String>), CalendarError> {
    if new.recurrence.is_none() {
        return Ok((new, None));
    }
    let ev = edit::build(&new, zone, 0)?;
    let first = repeat::first_instance(ev.clone())?;
    one_is_no_series(&first, zone)?;
    if first.start == ev.start {
        return Ok((new, None));
    }
    (new.start, new.end, new.duration_minutes) = (first.start.to_string(), Some(first.end.to_string()), None);
    let moved = format!(
        "{} is not one of its days: the series starts {}",
        ev.start.display_in(zone),
        crate::calendar::service::human(first.start, zone)
    );
    Ok((new, Some(moved)))
}

/// A repeating event that happens once is refused: the local model wrote
/// `until` a few days on for "three sessions in total" (a weekly series of
/// one), and the answer said the series was booked.
fn one_is_no_series(ev: &crate::calendar::CalendarEvent, zone: Zone) -> Result<(), CalendarError> {
    let yearly = ev.recurrence.as_ref().is_some_and(|r| r.rrule.contains("YEARLY"));
    if yearly {
        return Ok(()); // "every other year" has one time in the year looked at.
    }
    let from = ev.start.instant(zone);
    let to = from + chrono::Duration::days(crate::calendar::recur::MAX_RANGE_DAYS);
    let (found, _) = crate::calendar::recur::occurrences(ev, from, to, zone, 2)?;
    if found.len() >= 2 {
        return Ok(());
    }
    Err(CalendarError::bad(
        "invalid_repeat",
        "this repeat happens only once (its `until` is before the second time): for a number of times in all \
         give `count` (\"three sessions\": 3) and no `until`; for one event leave `repeat` out",
    ))
}

pub struct CreateCalendarEvent;

#[async_trait::async_trait]
impl Tool for CreateCalendarEvent {
    type Args = CreateArgs;
    const NAME: &'static str = "create_calendar_event";
    const DESCRIPTION: &'static str = "Put an event on the user's calendar. `start` is the day and the time \
        the user said, local (`2026-12-01T10:00`; \"half past nine\" is T09:30, \"4pm\" T16:00, \"7 in the \
        evening\" T19:00), or a date for an all-day event; give `duration_minutes` or `end` (default one hour). \
        For a repeating event add `repeat`: Monday to Friday `{\"every\": \"monday_to_friday\"}`; every \
        Wednesday `{\"every\": \"week\", \"on_days\": [\"wednesday\"]}`; every other Monday `{\"every\": \
        \"week\", \"interval\": 2, \"on_days\": [\"monday\"]}`; 3 times in all: add `\"count\": 3`. Leave \
        `project_id` out unless the user named a project.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: CreateArgs) -> Result<Done, Refusal> {
        let svc = service(c)?;
        let zone = zone_of(svc, c).await?;
        let op = op(OperationAction::Create, a.title.clone(), None);
        let fail = |e| Refusal::Calendar(e, Some(op.clone()));
        let recurrence = rule_of(a.repeat.as_ref(), a.rrule.as_deref(), &a.start, zone).map_err(fail)?;
        let new = NewEvent {
            title: a.title,
            start: a.start,
            end: a.end,
            duration_minutes: a.duration_minutes,
            timezone: Some(zone.name().to_string()),
            location: a.location,
            description: a.description,
            recurrence,
            project_id: a.project_id,
            task_id: None,
        };
        let (new, moved) = on_first_instance(new, zone).map_err(fail)?;
        let mut done = written(svc.create(c.user, &new).await, op, OperationAction::Create)?;
        let both = a.repeat.is_some() && a.rrule.as_deref().is_some_and(|r| !r.trim().is_empty());
        let left_out = both.then(|| "`rrule` left out: `repeat` says how it repeats".to_string());
        let note: Vec<String> = [moved, left_out].into_iter().flatten().collect();
        if let (Ok(Value::Object(o)), false) = (&mut done.result, note.is_empty()) {
            o.insert("note".into(), Value::String(note.join("; ")));
        }
        Ok(done)
    }
}

/// `update_calendar_event`: which event (and occurrence), and what changes.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateArgs {
    pub event_id: String,
    /// One occurrence of a recurring event: its date (`2026-12-08`) or its `instance` as listed.
    #[serde(default)]
    pub instance: Option<String>,
    /// With `instance`: `instance` (default: only it), `following` (it and later), or `series` (all).
    #[serde(default)]
    pub scope: Option<EditScope>,
    #[serde(default)]
    pub title: Option<String>,
    /// New local start (`2026-12-08T16:00`; a time alone, `16:00`, keeps the day); the
    /// length is kept unless `end` or `duration_minutes` is given.
    #[serde(default)]
    pub start: Option<String>,
    #[serde(default)]
    pub end: Option<String>,
    #[serde(default)]
    pub duration_minutes: Option<u32>,
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// How the whole series repeats from now on (as in create_calendar_event).
    #[serde(default)]
    pub repeat: Option<Repeat>,
    /// Or an RFC 5545 rule instead of `repeat`.
    #[serde(default)]
    pub rrule: Option<String>,
}

pub struct UpdateCalendarEvent;

#[async_trait::async_trait]
impl Tool for UpdateCalendarEvent {
    type Args = UpdateArgs;
    const NAME: &'static str = "update_calendar_event";
    const DESCRIPTION: &'static str = "Move or change a calendar event. For one occurrence of a recurring \
        event give `instance` (its date, e.g. `2026-12-08`); `scope: following` changes it and later ones, \
        `scope: series` all. To cancel an event or an occurrence use delete_calendar_event, not this.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: UpdateArgs) -> Result<Done, Refusal> {
        let svc = service(c)?;
        let id = event_id(&a.event_id)?;
        // Named by the write's result; a refused call by its id (another
        // user's id reveals no name), without a second read of the event.
        let op = op(OperationAction::Update, id.to_string(), Some(id.to_string()));
        let fail = |e| Refusal::Calendar(e, Some(op.clone()));
        let clocks = (bare_clock(a.start.as_deref()), bare_clock(a.end.as_deref()));
        let needs_event = a.repeat.is_some() || a.rrule.is_some() || clocks.0.is_some() || clocks.1.is_some();
        let ev = if needs_event || a.title.is_some() { Some(svc.get(c.user, &id).await.map_err(fail)?) } else { None };
        if let (Some(ev), Some(title)) = (&ev, a.title.as_deref()) {
            if let Some(e) = title_of_another(svc, c.user, ev, title, a.instance.as_deref()).await {
                return Err(fail(e));
            }
        }
        let (mut start, mut end) = (a.start, a.end);
        if let Some(ev) = &ev {
            // A bare clock time ("16:00", "4pm") keeps the day: the local
            // model moved "my 3pm tomorrow to 4pm" with `start: "16:00"`, was
            // refused (not a date), and gave up.
            let day = occurrence_day(a.instance.as_deref(), ev);
            let at = |t: chrono::NaiveTime| day.and_time(t).format("%Y-%m-%dT%H:%M").to_string();
            start = clocks.0.map(at).or(start);
            end = clocks.1.map(at).or(end);
        }
        let recurrence = match (&a.repeat, &a.rrule, &ev) {
            // `repeat` is read against the series' own start and zone.
            (Some(_), _, Some(ev)) | (_, Some(_), Some(ev)) => {
                let from = start.clone().unwrap_or_else(|| ev.start.to_string());
                rule_of(a.repeat.as_ref(), a.rrule.as_deref(), &from, ev.timezone).map_err(fail)?
            }
            _ => None,
        };
        let target = Target { instance: a.instance, scope: a.scope };
        let changes = EventChanges {
            title: a.title,
            start,
            end,
            duration_minutes: a.duration_minutes,
            timezone: None,
            location: a.location,
            description: a.description,
            recurrence,
        };
        let mut done = svc.update_changing(c.user, &id, &target, &changes).await;
        let mut note = None;
        if let Some((target, why)) = named_again(svc, c.user, &id, &done, &target).await {
            done = svc.update_changing(c.user, &id, &target, &changes).await;
            note = Some(why);
        }
        noted(written(done, op, OperationAction::Update), note)
    }
}

/// What is busy and what is free, in words to answer from ("busy: Fri 11
/// Dec 14:00–15:00 Budget review; free: Fri 11 Dec 12:00–14:00, 15:00–17:00"):
/// the local model answered "could I squeeze it in, or is something there?"
/// with a free slot and never named the meeting in `busy`.
fn free_in_words(found: &crate::calendar::free::FreeAndBusy) -> String {
    let at = |s: &str, f: &str| chrono::DateTime::parse_from_rfc3339(s).map(|t| t.format(f).to_string());
    let span = |start: &str, end: &str| match (at(start, "%a %-d %b %H:%M"), at(end, "%H:%M")) {
        (Ok(a), Ok(b)) => format!("{a}–{b}"),
        _ => format!("{start}–{end}"),
    };
    let busy: Vec<String> = found.busy.iter().map(|b| format!("{} {}", span(&b.start, &b.end), b.title)).collect();
    let free: Vec<String> = found.free.slots.iter().map(|f| span(&f.start, &f.end)).collect();
    let list = |v: Vec<String>| if v.is_empty() { "nothing".to_string() } else { v.join("; ") };
    format!("busy: {}. free: {}.", list(busy), list(free))
}

/// `result` with the call that books the first slot long enough for the
/// length asked: "find an hour and block it" ended, on the local model,
/// after the free time was found, with nothing booked. Only when a length
/// was asked (a plain "am I free?" books nothing).
fn with_booking(mut result: Value, found: &crate::calendar::free::FreeAndBusy, asked: Option<u32>) -> Value {
    if let Some(o) = result.as_object_mut() {
        o.insert("agenda".into(), Value::String(free_in_words(found)));
    }
    let Some(minutes) = asked else { return result };
    let Some(slot) = found.free.slots.iter().find(|s| s.minutes >= i64::from(minutes)) else { return result };
    let start = slot.start.get(..16).unwrap_or(&slot.start);
    if let Some(o) = result.as_object_mut() {
        let call = format!("create_calendar_event {{\"start\": \"{start}\", \"duration_minutes\": {minutes}}}");
        o.insert("to_book_the_first".into(), Value::String(call));
    }
    result
}

/// An update whose `title` is another event's, near the one its id names:
/// the local model moved "my 3pm" with the 12:00 lunch's id and the 3pm's
/// title, and the lunch became a second "Design review" at 16:00. Refused,
/// naming both ids; a title no nearby event has is a rename, and runs.
async fn title_of_another(
    svc: &CalendarService,
    user: &crate::ids::UserId,
    ev: &crate::calendar::CalendarEvent,
    title: &str,
    instance: Option<&str>,
) -> Option<CalendarError> {
    let same = |a: &str, b: &str| a.trim().eq_ignore_ascii_case(b.trim());
    if same(&ev.title, title) {
        return None;
    }
    let day = occurrence_day(instance, ev);
    let q = ListQuery {
        from: (day - chrono::Duration::days(1)).to_string(),
        to: (day + chrono::Duration::days(1)).to_string(),
        timezone: Some(ev.timezone.name().to_string()),
        project_id: None,
    };
    let other =
        svc.list(user, &q).await.ok()?.events.into_iter().find(|o| o.event_id != ev.id && same(&o.title, title))?;
    Some(CalendarError::bad(
        "title_of_another_event",
        format!(
            "event_id {} is “{}”, not “{title}”; “{title}” is event_id {} (starts {}). To change “{title}”, call \
             again with its event_id; give `title` only to rename an event",
            ev.id, ev.title, other.event_id, other.start
        ),
    ))
}

/// A write refused for the `instance` it named, named again as the model
/// meant it, with the note saying how: a date and time that starts no
/// occurrence names the occurrence of its day (the local model named it by
/// its new time, `instance: "2026-12-08T11:00"`; two that day stay
/// ambiguous); the event's own day on an event that does not repeat names
/// the event (the local model, asked to drop Friday's one-off review, sent
/// `instance: "2026-12-11"` four times, refused each time).
async fn named_again(
    svc: &CalendarService,
    user: &crate::ids::UserId,
    id: &EventId,
    done: &Result<Written, CalendarError>,
    target: &Target,
) -> Option<(Target, String)> {
    let code = done.as_ref().err()?.code();
    let instance = target.instance.as_deref()?;
    let day = instance.get(..10)?;
    if code == "instance_not_found" && instance.contains('T') {
        let note = format!("no occurrence starts at the `instance` given: the one of {day} was changed");
        return Some((Target { instance: Some(day.to_string()), scope: target.scope }, note));
    }
    if code != "not_recurring" {
        return None;
    }
    let ev = svc.get(user, id).await.ok()?;
    let own = ev.timezone.local(ev.start.instant(ev.timezone)).date_naive().to_string();
    let note = "the event does not repeat: `instance` left out (it named the event's own day)".to_string();
    (own == day).then_some((Target { instance: None, scope: None }, note))
}

/// `done` with a note on how its event was named.
fn noted(done: Result<Done, Refusal>, note: Option<String>) -> Result<Done, Refusal> {
    let mut done = done?;
    if let (Ok(Value::Object(o)), Some(note)) = (&mut done.result, note) {
        o.insert("note".into(), Value::String(note));
    }
    Ok(done)
}

/// `16:00`, `9:30`, `4pm`, `4:30 p.m.`: a time of day with no date.
fn bare_clock(s: Option<&str>) -> Option<chrono::NaiveTime> {
    let s = s?.trim().to_ascii_lowercase().replace('.', "");
    let (digits, pm) = match (s.strip_suffix("pm"), s.strip_suffix("am")) {
        (Some(d), _) => (d.trim().to_string(), Some(true)),
        (_, Some(d)) => (d.trim().to_string(), Some(false)),
        _ => (s.clone(), None),
    };
    let t = ["%H:%M", "%H:%M:%S"].iter().find_map(|f| chrono::NaiveTime::parse_from_str(&digits, f).ok());
    let t = match (t, pm) {
        (Some(t), None) => return Some(t),
        (Some(t), Some(_)) => t,
        (None, Some(_)) => chrono::NaiveTime::from_hms_opt(digits.parse().ok()?, 0, 0)?,
        (None, None) => return None,
    };
    use chrono::Timelike;
    let h = t.hour() % 12 + if pm == Some(true) { 12 } else { 0 };
    t.with_hour(h)
}

/// The local day of the occurrence an update names (`instance`: its date or
/// its listed start), else of the event's start.
fn occurrence_day(instance: Option<&str>, ev: &crate::calendar::CalendarEvent) -> chrono::NaiveDate {
    let named = instance.and_then(|i| i.get(..10)).and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok());
    named.unwrap_or_else(|| ev.timezone.local(ev.start.instant(ev.timezone)).date_naive())
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    pub event_id: String,
    /// One occurrence of a recurring event: its date (`2026-12-08`) or its `instance` as listed.
    #[serde(default)]
    pub instance: Option<String>,
    /// With `instance`: `instance` (default: only it), `following` (it and later: ends the series), or `series`.
    #[serde(default)]
    pub scope: Option<EditScope>,
}

pub struct DeleteCalendarEvent;

#[async_trait::async_trait]
impl Tool for DeleteCalendarEvent {
    type Args = DeleteArgs;
    const NAME: &'static str = "delete_calendar_event";
    const DESCRIPTION: &'static str = "Delete or cancel a calendar event. To cancel only one occurrence of a \
        recurring event (\"just tomorrow's\"), give `instance`: its date (`2026-12-08`); without `instance` \
        the whole event goes.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: DeleteArgs) -> Result<Done, Refusal> {
        let svc = service(c)?;
        let id = event_id(&a.event_id)?;
        // Named by the write's result; a refused call by its id (another
        // user's id reveals no name), without a second read of the event.
        let name = id.to_string();
        let op = op(OperationAction::Delete, name, Some(id.to_string()));
        let target = Target { instance: a.instance, scope: a.scope };
        let mut done = svc.delete(c.user, &id, &target, None).await;
        let mut note = None;
        if let Some((target, why)) = named_again(svc, c.user, &id, &done, &target).await {
            done = svc.delete(c.user, &id, &target, None).await;
            note = Some(why);
        }
        noted(written(done, op, OperationAction::Delete), note)
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FreeArgs {
    /// Days by name, resolved in the user's zone; or give `from` and `to`.
    #[serde(default)]
    pub range: Option<Days>,
    /// First day (`2026-12-01`).
    #[serde(default)]
    pub from: Option<String>,
    /// Last day, included.
    #[serde(default)]
    pub to: Option<String>,
    /// The shortest slot wanted (default 30).
    #[serde(default)]
    #[schema(minimum = 5, maximum = 1440)]
    pub duration_minutes: Option<u32>,
    /// Start of the hours looked at, `HH:MM` (default 09:00; `12:00` for an afternoon).
    #[serde(default)]
    pub day_start: Option<String>,
    /// End of the hours looked at, `HH:MM` (default 17:00).
    #[serde(default)]
    pub day_end: Option<String>,
    /// Weekends too (a single named day is looked at whatever day it is).
    #[serde(default)]
    pub include_weekends: bool,
}

pub struct FindFreeTime;

#[async_trait::async_trait]
impl Tool for FindFreeTime {
    type Args = FreeArgs;
    const NAME: &'static str = "find_free_time";
    const DESCRIPTION: &'static str = "Is the user free? Gives the free slots in the asked hours (default \
        09:00–17:00) over some days (`range`, e.g. `friday`, or `from` and `to`), and `busy`: the events \
        already in those hours. Any event in `busy` means that time is not free.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: FreeArgs) -> Result<Done, Refusal> {
        let svc = service(c)?;
        // A named day with times in `from`/`to` ("friday", 12:00 to 17:00):
        // the times are the hours looked at.
        let (day_start, day_end) = match a.range {
            Some(_) => (a.day_start.or(clock(&a.from)), a.day_end.or(clock(&a.to))),
            None => (a.day_start, a.day_end),
        };
        let span = span(c, a.range, a.from, a.to).await?;
        let minutes = a.duration_minutes.unwrap_or(30);
        let op = op(OperationAction::Search, format!("free {minutes} min, {}", span.label), None);
        let q = FreeQuery {
            from: span.from.clone(),
            to: span.to.clone(),
            duration_minutes: minutes,
            timezone: zone_name(c),
            day_start,
            day_end,
            include_weekends: a.include_weekends || (span.said.is_some() && span.one_day),
        };
        let asked = a.duration_minutes;
        read(svc.free_and_busy(c.user, &q).await.map(|s| with_booking(with_days(to_json(&s), &span), &s, asked)), op)
    }
}
