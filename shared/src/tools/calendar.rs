//! The calendar tools: list (recurrences expanded, in the user's zone),
//! create, update and delete (one instance, this and following, or the whole
//! series), and find free time — over [`CalendarService`], the same one the
//! entities API's `/events` routes use. Times the model writes are local
//! times in the user's zone (`2026-12-01T10:00`) or dates for all-day events;
//! the context gives it today's date and the zone. Each write streams an
//! `operation` with a sentence ("Moved Design review to Tue 1 Dec 16:00")
//! and a `calendar_patch`.
//!
//! [`CalendarService`]: crate::calendar::CalendarService

use super::call::{to_json, Call};
use super::outcome::{Done, Op, Refusal};
use super::{Tool, ToolName};
use crate::calendar::{
    CalendarError, CalendarService, EditScope, EventChanges, FreeQuery, ListQuery, NewEvent, RecurrenceInput, Target,
    Written,
};
use crate::ids::{EventId, ProjectId};
use crate::sse::{OperationAction, OperationStatus, StreamEvent};
use serde::Deserialize;
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

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// First day (`2026-12-01`) or time (`2026-12-01T09:00`), the user's zone.
    pub from: String,
    /// Last day, included (`2026-12-01` for one day), or an end time.
    pub to: String,
    /// Only the events linked to this project id (omit for every event).
    #[serde(default)]
    pub project_id: Option<String>,
}

pub struct ListCalendarEvents;

#[async_trait::async_trait]
impl Tool for ListCalendarEvents {
    type Args = ListArgs;
    const NAME: &'static str = "list_calendar_events";
    const DESCRIPTION: &'static str = "List the user's calendar events between two days (recurring events as \
        their occurrences), in the user's time zone. Each has an event_id, and for a recurring one an `instance` \
        naming that occurrence.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: ListArgs) -> Result<Done, Refusal> {
        let svc = service(c)?;
        let project_id = match a.project_id.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => Some(ProjectId::parse(p).map_err(|e| Refusal::Args(format!("project_id: {e}")))?),
            None => None,
        };
        let q = ListQuery { from: a.from.clone(), to: a.to.clone(), timezone: zone_name(c), project_id };
        let op = op(OperationAction::List, format!("calendar {} – {}", a.from, a.to), None);
        read(svc.list(c.user, &q).await.map(|l| to_json(&l)), op)
    }
}

pub struct CreateCalendarEvent;

#[async_trait::async_trait]
impl Tool for CreateCalendarEvent {
    type Args = NewEvent;
    const NAME: &'static str = "create_calendar_event";
    const DESCRIPTION: &'static str = "Put an event on the user's calendar. `start` is a local time in the \
        user's zone (`2026-12-01T10:00`) or a date for an all-day event; give `duration_minutes` or `end` \
        (default one hour). Repeat it with `recurrence.rrule` (RFC 5545, e.g. `FREQ=WEEKLY;BYDAY=TU`). Leave \
        `project_id` and `task_id` out unless the user named a project (ids from `list_projects`).";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, mut a: NewEvent) -> Result<Done, Refusal> {
        a.timezone = a.timezone.filter(|z| !z.is_empty()).or_else(|| zone_name(c));
        let op = op(OperationAction::Create, a.title.clone(), None);
        written(service(c)?.create(c.user, &a).await, op, OperationAction::Create)
    }
}

/// `update_calendar_event`: which event (and occurrence), and what changes.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateArgs {
    pub event_id: String,
    /// The occurrence of a recurring event, as listed (`instance`).
    #[serde(default)]
    pub instance: Option<String>,
    /// With `instance`: `instance` (default), `following`, or `series`.
    #[serde(default)]
    pub scope: Option<EditScope>,
    #[serde(default)]
    pub title: Option<String>,
    /// New local start; the length is kept unless `end` or `duration_minutes` is given.
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
    #[serde(default)]
    pub recurrence: Option<RecurrenceInput>,
}

pub struct UpdateCalendarEvent;

#[async_trait::async_trait]
impl Tool for UpdateCalendarEvent {
    type Args = UpdateArgs;
    const NAME: &'static str = "update_calendar_event";
    const DESCRIPTION: &'static str = "Change or move a calendar event. For a recurring event, name the \
        occurrence with `instance` (from list_calendar_events) to change only it, or add `scope`: \
        `following` (it and later ones) or `series` (all).";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: UpdateArgs) -> Result<Done, Refusal> {
        let svc = service(c)?;
        let id = event_id(&a.event_id)?;
        let target = Target { instance: a.instance, scope: a.scope };
        let changes = EventChanges {
            title: a.title,
            start: a.start,
            end: a.end,
            duration_minutes: a.duration_minutes,
            timezone: None,
            location: a.location,
            description: a.description,
            recurrence: a.recurrence,
        };
        // Named by the write's result; a refused call by its id (another
        // user's id reveals no name), without a second read of the event.
        let name = id.to_string();
        let op = op(OperationAction::Update, name, Some(id.to_string()));
        written(svc.update(c.user, &id, &target, &changes, None).await, op, OperationAction::Update)
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    pub event_id: String,
    /// The occurrence of a recurring event, as listed (`instance`).
    #[serde(default)]
    pub instance: Option<String>,
    /// With `instance`: `instance` (default), `following` (ends the series there), or `series`.
    #[serde(default)]
    pub scope: Option<EditScope>,
}

pub struct DeleteCalendarEvent;

#[async_trait::async_trait]
impl Tool for DeleteCalendarEvent {
    type Args = DeleteArgs;
    const NAME: &'static str = "delete_calendar_event";
    const DESCRIPTION: &'static str = "Delete a calendar event: the whole event, or with `instance` one \
        occurrence of a recurring event (`scope: following` ends the series there).";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: DeleteArgs) -> Result<Done, Refusal> {
        let svc = service(c)?;
        let id = event_id(&a.event_id)?;
        // Named by the write's result; a refused call by its id (another
        // user's id reveals no name), without a second read of the event.
        let name = id.to_string();
        let op = op(OperationAction::Delete, name, Some(id.to_string()));
        let target = Target { instance: a.instance, scope: a.scope };
        written(svc.delete(c.user, &id, &target, None).await, op, OperationAction::Delete)
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FreeArgs {
    /// First day (`2026-12-01`).
    pub from: String,
    /// Last day, included.
    pub to: String,
    #[schema(minimum = 5, maximum = 1440)]
    pub duration_minutes: u32,
    /// Working day start, `HH:MM` (default 09:00).
    #[serde(default)]
    pub day_start: Option<String>,
    /// Working day end, `HH:MM` (default 17:00).
    #[serde(default)]
    pub day_end: Option<String>,
    #[serde(default)]
    pub include_weekends: bool,
}

pub struct FindFreeTime;

#[async_trait::async_trait]
impl Tool for FindFreeTime {
    type Args = FreeArgs;
    const NAME: &'static str = "find_free_time";
    const DESCRIPTION: &'static str = "Find free slots of at least `duration_minutes` in the user's working \
        hours between two days, around their calendar events.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: FreeArgs) -> Result<Done, Refusal> {
        let svc = service(c)?;
        let op = op(OperationAction::Search, format!("free {} min, {} – {}", a.duration_minutes, a.from, a.to), None);
        let q = FreeQuery {
            from: a.from,
            to: a.to,
            duration_minutes: a.duration_minutes,
            timezone: zone_name(c),
            day_start: a.day_start,
            day_end: a.day_end,
            include_weekends: a.include_weekends,
        };
        read(svc.free_time(c.user, &q).await.map(|s| to_json(&s)), op)
    }
}
