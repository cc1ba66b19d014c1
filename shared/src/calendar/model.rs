//! The calendar's records: the stored [`CalendarEvent`] (a single event or a
//! series with its overrides), what creates and changes one ([`NewEvent`],
//! [`EventChanges`]), what a listing returns ([`EventInstance`]) and the
//! [`CalendarPatch`] every write streams. Wire format: `docs/calendar.md`.

pub use super::time::{EventTime, Zone};
use crate::ids::{EntityId, EventId, ProjectId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An RFC 5545 recurrence: the `RRULE` value (without `RRULE:`), and the
/// excluded and added starts (in the event's own kind: dates for all-day
/// events, instants otherwise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Recurrence {
    /// e.g. `FREQ=WEEKLY;BYDAY=MO`.
    pub rrule: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exdates: Vec<EventTime>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rdates: Vec<EventTime>,
}

/// One instance of a series changed or cancelled on its own (RFC 5545
/// `RECURRENCE-ID`): `recurrence_id` is the instance's original start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InstanceOverride {
    pub recurrence_id: EventTime,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<EventTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<EventTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Where the event lives on the user's CalDAV server, and the ETag we last
/// saw there (every write is conditioned on it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RemoteRef {
    pub href: String,
    pub etag: String,
}

/// Who organizes an event, from iCalendar `ORGANIZER` (events synced from a
/// calendar server; an event made here names none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Organizer {
    /// The cal-address as the server wrote it (`mailto:bob@example.com`).
    pub address: String,
    /// `CN`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The user themselves (the address names their CalDAV account's
    /// username); `false`: someone else's event, whose changes wait for the
    /// user's yes (docs/chat-protocol.md#approvals).
    #[serde(default)]
    pub own: bool,
}

impl Organizer {
    /// Whether `address` (`mailto:` or not, any case) is `username`'s.
    pub fn names(address: &str, username: &str) -> bool {
        let a = address.trim();
        let a = if a.len() >= 7 && a[..7].eq_ignore_ascii_case("mailto:") { &a[7..] } else { a };
        !username.trim().is_empty() && a.eq_ignore_ascii_case(username.trim())
    }
}

/// A stored event: a single event, or a series (with `recurrence`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CalendarEvent {
    pub id: EventId,
    /// The iCalendar `UID` (the CalDAV server's name for it).
    pub uid: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Dates for an all-day event (`end` exclusive), instants otherwise.
    pub start: EventTime,
    pub end: EventTime,
    /// The zone the event was made in: its wall-clock time recurs there.
    pub timezone: Zone,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrence: Option<Recurrence>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<InstanceOverride>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<ProjectId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<EntityId>,
    /// Bumped by every write; `If-Match` compares against it.
    pub version: u64,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteRef>,
    /// iCalendar `ORGANIZER`, kept and written back as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organizer: Option<Organizer>,
}

impl CalendarEvent {
    pub fn all_day(&self) -> bool {
        self.start.is_date()
    }

    /// Organized by someone other than the user.
    pub fn others(&self) -> bool {
        self.organizer.as_ref().is_some_and(|o| !o.own)
    }
}

/// A recurrence as input: the `RRULE` value and excluded/added starts in the
/// same forms as `start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecurrenceInput {
    /// e.g. `FREQ=WEEKLY;BYDAY=TU` (RFC 5545; `RRULE:` prefix optional).
    pub rrule: String,
    #[serde(default)]
    pub exdates: Vec<String>,
    #[serde(default)]
    pub rdates: Vec<String>,
}

/// `POST /events` and `create_calendar_event`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEvent {
    pub title: String,
    /// `2026-12-01` (all-day), `2026-12-01T10:00` (local time in `timezone`)
    /// or an instant with offset (`2026-12-01T10:00:00+01:00`).
    pub start: String,
    /// Same forms as `start`; or give `duration_minutes`; default: one hour
    /// (one day for all-day events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 525600)]
    pub duration_minutes: Option<u32>,
    /// IANA zone of local times; default: the user's zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrence: Option<RecurrenceInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<ProjectId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<EntityId>,
}

/// Which part of a series a change or delete applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EditScope {
    /// Only the instance named by `instance`.
    Instance,
    /// The instance named by `instance` and every later one: the series is
    /// ended there (and, for a change, a new series starts with the change).
    Following,
    /// The whole event or series.
    Series,
}

/// What a change or delete applies to: the whole event, or an instance of a
/// series (its `instance` as listed, the original start).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Target {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// Default: `instance` when an instance is named, else `series`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<EditScope>,
}

/// `PATCH /events/{id}` and `update_calendar_event`: the fields to change.
/// Moving `start` alone keeps the duration. An empty `location` or
/// `description` clears it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventChanges {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 525600)]
    pub duration_minutes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The whole series only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrence: Option<RecurrenceInput>,
}

/// One occurrence as a listing shows it, in the listing's zone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventInstance {
    pub event_id: EventId,
    /// For an instance of a series: its original start, which names it in
    /// an update or delete of this instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<EventTime>,
    pub title: String,
    /// A date (all-day) or the local time with its offset.
    pub start: String,
    pub end: String,
    pub all_day: bool,
    pub recurring: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<ProjectId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<EntityId>,
    pub version: u64,
}

/// A listing over a range, in one zone. Listings are bounded: at most
/// `MAX_INSTANCES`; `truncated` says when more exist. Events that cannot be
/// read or expanded are left out and named in `skipped`; everything else is
/// listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventList {
    pub from: String,
    pub to: String,
    pub timezone: Zone,
    pub events: Vec<EventInstance>,
    pub truncated: bool,
    /// What was left out, and why (absent when nothing was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedEvent>,
}

/// Why an event was left out of a listing, free time or the agenda.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The calendar server's object is not an event we can read (broken
    /// iCalendar, no `DTSTART`, only instances of a series, …).
    Unreadable,
    /// The calendar server's object is larger than we hold.
    TooLarge,
    /// A held event whose recurrence cannot be expanded (e.g. an `RRULE`
    /// the expansion refuses).
    Unexpandable,
}

/// One event left out, named as well as it can be: by `event_id` when we
/// hold it, by the calendar server's `href` when we could not take it in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SkippedEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<EventId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    /// Its `SUMMARY`, when that much could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub reason: SkipReason,
    /// What went wrong, in words.
    pub detail: String,
}

impl SkippedEvent {
    /// The longest `detail` kept: a message quoting a huge value stays short.
    pub const MAX_DETAIL: usize = 300;

    pub fn new(reason: SkipReason, detail: impl Into<String>) -> Self {
        let mut detail: String = detail.into();
        if detail.len() > Self::MAX_DETAIL {
            let cut = (0..=Self::MAX_DETAIL).rev().find(|i| detail.is_char_boundary(*i)).unwrap_or(0);
            detail.truncate(cut);
            detail.push('…');
        }
        SkippedEvent { event_id: None, href: None, title: None, reason, detail }
    }

    /// "“Title” (href …): detail", for a line of text.
    pub fn describe(&self) -> String {
        let name = match (&self.title, &self.event_id, &self.href) {
            (Some(t), _, _) => format!("“{t}”"),
            (None, Some(id), _) => format!("event {id}"),
            (None, None, Some(h)) => h.clone(),
            (None, None, None) => "an event".into(),
        };
        format!("{name}: {}", self.detail)
    }
}

/// One change a write made, as the chat page applies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum CalendarChange {
    /// The event as it now is (created or changed).
    Upsert {
        event: Box<CalendarEvent>,
    },
    Delete {
        event_id: EventId,
    },
}

/// What a calendar write changed: the `calendar_patch` event's payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CalendarPatch {
    pub changes: Vec<CalendarChange>,
}

/// The user's settings (`GET`/`PUT /me/settings` on the stream function):
/// `timezone`, the IANA zone the user chose, which turns without a zone of
/// their own use (the calendar tools, the agenda block, the daily brief).
/// Only this route sets it; a turn's `timezone` is that turn's alone.
/// `null` (or absent): none chosen, such turns use UTC. Wire format:
/// `docs/calendar.md#the-users-zone`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserSettings {
    /// An IANA zone name (`America/New_York`); `null`: none chosen.
    #[serde(default)]
    #[schema(example = "America/New_York")]
    pub timezone: Option<String>,
}

impl UserSettings {
    /// The settings of a stored zone.
    pub fn of(zone: Option<Zone>) -> Self {
        UserSettings { timezone: zone.map(|z| z.name().to_string()) }
    }

    /// The zone named, checked (`invalid_timezone` for a name that is not an
    /// IANA zone); `None` for none.
    pub fn zone(&self) -> Result<Option<Zone>, super::CalendarError> {
        self.timezone.as_deref().map(Zone::parse).transpose()
    }
}
