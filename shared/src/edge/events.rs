//! The calendar over HTTP: the entities function's `/events` routes, listed
//! once here ([`routes`], mounted and documented with the others by
//! [`super::entities`]) and run on the [`CalendarService`] the chat's tools
//! use, so rules, versions and patches are the same for both.
//!
//! The contract (`docs/entities.md`, "Events"):
//! - `GET /events?from=&to=&timezone=&project_id=` → [`EventList`] (instances
//!   expanded, in the zone asked for, else the user's stored one, else UTC;
//!   a read never stores the zone).
//! - `GET /events/free?from=&to=&duration_minutes=&…` → [`FreeSlots`].
//! - `GET /events/{event_id}` → the stored [`CalendarEvent`], its version as
//!   `ETag: "7"`.
//! - `POST /events` ([`NewEvent`]) → 201, `PATCH /events/{event_id}`
//!   ([`EventChanges`]) → 200: `{"data": CalendarEvent, "patch": CalendarPatch}`.
//! - `DELETE /events/{event_id}` → 200 `{"data": EventDeleted, "patch"}`.
//! - The target of a `PATCH` or `DELETE` is in the query, the same for both:
//!   `?instance=<the instance's original start, as listed>&scope=instance|following|series`.
//!   `If-Match` (the grammar of the other entities) is the expected version.
//! - Refusals are [`CalendarError`]'s one answer (`super::error`); body and
//!   `If-Match` parsing are the entities API's, with its codes.

use super::entities::Input;
use super::entities_doc::{described_ref, r, route, Op, Param, RouteDoc};
use super::{json, ApiError};
pub use crate::calendar::free::FreeSlots;
use crate::calendar::{
    CalendarError, CalendarEvent, CalendarPatch, CalendarService, EditScope, EventChanges, FreeQuery, ListQuery,
    NewEvent, Target, Written,
};
use crate::ids::{EventId, ProjectId, UserId};
use axum::response::Response;
use http::{header, Method, StatusCode};
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{HeaderBuilder, RefOr};
use utoipa::ToSchema;

/// What `DELETE /events/{event_id}` did: the whole event went (`deleted`),
/// or, for an instance or "this and following" of a series, what remains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventDeleted {
    pub event_id: EventId,
    /// The whole event (or series) is gone.
    pub deleted: bool,
    /// The series as it now is, when only part of it was deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<CalendarEvent>,
}

/// A write's answer: the event it is about and the patch the chat streams.
#[derive(Serialize)]
struct WriteAnswer<T: Serialize> {
    data: T,
    patch: CalendarPatch,
}

const LIST: &[Param] = &[Param::From, Param::To, Param::Timezone, Param::InProject];
const FREE: &[Param] = &[
    Param::From,
    Param::To,
    Param::DurationMinutes,
    Param::Timezone,
    Param::DayStart,
    Param::DayEnd,
    Param::IncludeWeekends,
];
const TARGET: &[Param] = &[Param::Instance, Param::Scope];
/// A read's refusals by the rules of ranges (and the calendar server's failure).
const RANGE: &[&str] = &["end_before_start", "range_too_long", "calendar_server_error"];
/// Free time's refusals: a range's, and one it cannot cover whole.
const FREE_ERRORS: &[&str] = &["end_before_start", "range_too_long", "range_not_covered", "calendar_server_error"];
/// A write's refusals beyond its body's grammar.
const WRITE: &[&str] = &[
    "invalid_time",
    "invalid_timezone",
    "end_before_start",
    "invalid_rrule",
    "link_not_found",
    "calendar_conflict",
    "calendar_server_error",
];
/// An update's and a delete's further refusals: the target.
const TARGETED: &[&str] = &[
    "invalid_time",
    "invalid_timezone",
    "end_before_start",
    "invalid_rrule",
    "not_recurring",
    "missing_field",
    "instance_not_found",
    "calendar_conflict",
    "calendar_server_error",
];

/// The calendar's routes, in the order the document lists them.
pub fn routes() -> Vec<RouteDoc> {
    use Method as M;
    let one = "/events/{event_id}";
    vec![
        RouteDoc {
            query: LIST,
            errors: RANGE,
            ..route(
                Op::ListEvents,
                M::GET,
                "/events",
                "Occurrences in a range (series expanded)",
                None,
                200,
                r("EventList"),
            )
        },
        RouteDoc {
            query: FREE,
            errors: FREE_ERRORS,
            ..route(Op::FreeTime, M::GET, "/events/free", "Free slots in working hours", None, 200, r("FreeSlots"))
        },
        RouteDoc {
            errors: WRITE,
            ..route(
                Op::CreateEvent,
                M::POST,
                "/events",
                "Create an event or series",
                Some("NewEvent"),
                201,
                write_of(r("CalendarEvent")),
            )
        },
        route(
            Op::GetEvent,
            M::GET,
            one,
            "An event or series as stored (ETag: its version)",
            None,
            200,
            r("CalendarEvent"),
        ),
        RouteDoc {
            query: TARGET,
            errors: TARGETED,
            ..route(
                Op::UpdateEvent,
                M::PATCH,
                one,
                "Change an event, one instance, this and following, or the series (If-Match)",
                Some("EventChanges"),
                200,
                write_of(r("CalendarEvent")),
            )
        },
        RouteDoc {
            query: TARGET,
            errors: TARGETED,
            ..route(
                Op::DeleteEvent,
                M::DELETE,
                one,
                "Delete an event, one instance, this and following, or the series (If-Match)",
                None,
                200,
                write_of(r("EventDeleted")),
            )
        },
    ]
}

fn write_of(data: RefOr<Schema>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .property("data", data)
        .property("patch", r("CalendarPatch"))
        .required("data")
        .required("patch")
        .into()
}

fn string(description: &str) -> RefOr<Schema> {
    ObjectBuilder::new().schema_type(Type::String).description(Some(description)).into()
}

/// The schemas of the calendar's query parameters.
pub(super) fn param_schema(p: Param) -> RefOr<Schema> {
    match p {
        Param::From => string("A date (2026-12-01), a local time in `timezone` (2026-12-01T10:00) or an instant."),
        Param::To => string("Same forms as `from`, after it (at most 366 days); a date means through that day."),
        Param::Timezone => string("IANA zone to read and show times in; default: the user's, else UTC."),
        Param::DurationMinutes => ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(5))
            .maximum(Some(1440))
            .description(Some("The slot length."))
            .into(),
        Param::DayStart => string("Start of the working day, HH:MM local; default 09:00."),
        Param::DayEnd => string("End of the working day, HH:MM local; default 17:00."),
        Param::IncludeWeekends => ObjectBuilder::new()
            .schema_type(Type::Boolean)
            .description(Some("Saturdays and Sundays too; default false."))
            .into(),
        Param::Instance => string(
            "The instance of a series, by its original start as listed (`instance`); a `+` offset is written %2B.",
        ),
        Param::Scope => described_ref(
            "EditScope",
            "`instance` (default when `instance` is given), `following` (needs `instance`), or `series` (default).",
        ),
        other => unreachable!("{other:?} is not a calendar parameter"),
    }
}

/// The `ETag` of `GET /events/{event_id}`.
pub(super) fn etag_header() -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::String).pattern(Some(r#"^"[0-9]{1,19}"$"#)))
        .description(Some("The event's version, quoted: send it back as `If-Match`."))
        .build()
}

/// The service call of the calendar route `op`.
pub(super) async fn run(op: Op, svc: &CalendarService, user: &UserId, req: &Input) -> Result<Response, ApiError> {
    let id = || event_id(&req.segs[0]);
    match op {
        Op::ListEvents => Ok(json(StatusCode::OK, &svc.list(user, &list_query(req)?).await?)),
        Op::FreeTime => Ok(json(StatusCode::OK, &svc.free_time(user, &free_query(req)?).await?)),
        Op::GetEvent => {
            let ev = svc.get(user, &id()?).await?;
            let mut resp = json(StatusCode::OK, &ev);
            let tag = header::HeaderValue::from_str(&format!("\"{}\"", ev.version)).expect("digits are a header value");
            resp.headers_mut().insert(header::ETAG, tag);
            Ok(resp)
        }
        Op::CreateEvent => {
            let new: NewEvent = super::entities::body(req).map_err(|e| ApiError::from(&e))?;
            check_minutes(new.duration_minutes)?;
            written(StatusCode::CREATED, svc.create(user, &new).await?)
        }
        Op::UpdateEvent => {
            let id = id()?;
            let changes: EventChanges = super::entities::body(req).map_err(|e| ApiError::from(&e))?;
            check_minutes(changes.duration_minutes)?;
            let expected = super::entities::if_match(req).map_err(|e| ApiError::from(&e))?;
            written(StatusCode::OK, svc.update(user, &id, &target(req)?, &changes, expected).await?)
        }
        Op::DeleteEvent => {
            let id = id()?;
            let expected = super::entities::if_match(req).map_err(|e| ApiError::from(&e))?;
            let w = svc.delete(user, &id, &target(req)?, expected).await?;
            let data = EventDeleted { event_id: id, deleted: w.event.is_none(), event: w.event };
            Ok(json(StatusCode::OK, &WriteAnswer { data, patch: w.patch }))
        }
        _ => unreachable!("{op:?} is not a calendar route"),
    }
}

fn written(status: StatusCode, w: Written) -> Result<Response, ApiError> {
    let data = w.event.ok_or_else(|| ApiError::from(CalendarError::NotFound))?;
    Ok(json(status, &WriteAnswer { data, patch: w.patch }))
}

fn event_id(s: &str) -> Result<EventId, CalendarError> {
    EventId::parse(s).map_err(|e| CalendarError::InvalidId(e.to_string()))
}

/// The bounds the document states for `duration_minutes` (`NewEvent`,
/// `EventChanges`): 1 minute to a year.
fn check_minutes(m: Option<u32>) -> Result<(), CalendarError> {
    match m {
        Some(m) if !(1..=525_600).contains(&m) => {
            Err(CalendarError::bad("invalid_value", "duration_minutes must be 1 to 525600"))
        }
        _ => Ok(()),
    }
}

fn required(req: &Input, name: &str) -> Result<String, CalendarError> {
    req.q.get(name).cloned().ok_or_else(|| CalendarError::bad("missing_field", format!("`{name}` is required")))
}

fn list_query(req: &Input) -> Result<ListQuery, CalendarError> {
    let project_id = req.q.get("project_id").map(ProjectId::parse).transpose();
    Ok(ListQuery {
        from: required(req, "from")?,
        to: required(req, "to")?,
        timezone: req.q.get("timezone").cloned(),
        project_id: project_id.map_err(|e| CalendarError::InvalidId(e.to_string()))?,
    })
}

fn free_query(req: &Input) -> Result<FreeQuery, CalendarError> {
    let minutes = req.q.number("duration_minutes", 1440).map_err(|m| CalendarError::bad("invalid_value", m))?;
    let minutes = minutes.ok_or_else(|| CalendarError::bad("missing_field", "`duration_minutes` is required"))?;
    let include_weekends = match req.q.get("include_weekends").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(CalendarError::bad("invalid_value", "`include_weekends` is true or false")),
    };
    Ok(FreeQuery {
        from: required(req, "from")?,
        to: required(req, "to")?,
        duration_minutes: minutes as u32,
        timezone: req.q.get("timezone").cloned(),
        day_start: req.q.get("day_start").cloned(),
        day_end: req.q.get("day_end").cloned(),
        include_weekends,
    })
}

/// `?instance=&scope=`: what a change or delete applies to.
fn target(req: &Input) -> Result<Target, CalendarError> {
    let scope = match req.q.get("scope").map(String::as_str) {
        None => None,
        Some("instance") => Some(EditScope::Instance),
        Some("following") => Some(EditScope::Following),
        Some("series") => Some(EditScope::Series),
        Some(other) => {
            return Err(CalendarError::bad(
                "invalid_value",
                format!("scope {other:?}: expected instance, following or series"),
            ))
        }
    };
    Ok(Target { instance: req.q.get("instance").cloned(), scope })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::entities_doc::{code_status, routes as all_routes};
    use crate::store::StoreError;

    /// Every calendar refusal is listed in the document with the status it
    /// is answered with, and on some `/events` route.
    #[test]
    fn every_calendar_error_is_documented_with_its_status() {
        let mut errors = vec![
            CalendarError::NotFound,
            CalendarError::NoSuchInstance("x".into()),
            CalendarError::InvalidId("x".into()),
            CalendarError::Conflict { expected: 1, current_version: 2 },
            CalendarError::RemoteConflict { title: "x".into() },
            CalendarError::Remote("x".into()),
            CalendarError::Store(StoreError::Backend("x".into())),
            CalendarError::Store(StoreError::Corrupt("x".into())),
        ];
        for code in [
            "invalid_time",
            "invalid_timezone",
            "end_before_start",
            "invalid_rrule",
            "range_too_long",
            "range_not_covered",
            "invalid_value",
            "missing_field",
            "not_recurring",
            "link_not_found",
        ] {
            errors.push(CalendarError::bad(code, "x"));
        }
        let events: Vec<RouteDoc> = all_routes().into_iter().filter(|r| r.op.is_event()).collect();
        for e in errors {
            let answer = ApiError::from(e);
            assert_eq!(code_status(&answer.code), Some(answer.status.as_u16()), "{answer:?}");
            assert!(events.iter().any(|r| r.error_codes().contains(&answer.code.as_str())), "{answer:?}");
        }
    }
}
