//! [`CalendarService`]: every calendar operation as a plain async method, for
//! the entities API's `/events` routes and the chat's calendar tools alike.
//!
//! - Everything is the user's own: another user's event id is `event_not_found`.
//! - A write is checked whole before anything is written; it goes to the
//!   user's calendar server first when they have one (conditioned on the
//!   ETag we last saw: a change made there in between is `calendar_conflict`,
//!   nothing overwritten), then to DynamoDB conditioned on the version read.
//! - Listings are bounded ([`recur::MAX_RANGE_DAYS`], [`recur::MAX_INSTANCES`])
//!   and pull the server's changes first, so events made there appear.
//! - One bad event never fails a read: an event that cannot be expanded, and
//!   a server object the sync could not take in, are left out and named in
//!   `skipped`. Free time counts every occurrence (no listing cap).

use super::error::CalendarError;
use super::free::{self, FreeAndBusy, FreeSlots, Hours};
use super::model::*;
use super::recur::{self, MAX_INSTANCES, MAX_RANGE_DAYS};
use super::remote::{Remote, RemoteCalendar};
use super::store::{EventStore, WriteError};
use super::{edit, sync};
use crate::entities::{EntityKind, EntityService};
use crate::ids::{EventId, ProjectId, UserId};
use chrono::{DateTime, Duration, NaiveTime, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};

#[derive(Clone)]
pub struct CalendarService {
    store: Arc<dyn EventStore>,
    entities: EntityService,
    remote: Option<Arc<dyn Remote>>,
}

/// A listing: a range (`from` inclusive, `to` exclusive; a date `to` means
/// through that day), in a zone, optionally one project's events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// A date or a time (local in `timezone`, or with an offset).
    pub from: String,
    /// Same forms; a date means through the end of that day.
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<crate::ids::ProjectId>,
}

/// `find_free_time`: slots of `duration_minutes` in working hours.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FreeQuery {
    pub from: String,
    pub to: String,
    #[schema(minimum = 5, maximum = 1440)]
    pub duration_minutes: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// Start of the working day, `HH:MM` local; default 09:00.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_start: Option<String>,
    /// End of the working day, `HH:MM` local; default 17:00.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_end: Option<String>,
    #[serde(default)]
    pub include_weekends: bool,
}

/// What a write did: the event it is about (absent when deleted), the patch
/// for the stream, and the change in human words.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The event's title as the user knows it (before a delete, after a change).
    pub title: String,
    pub event: Option<CalendarEvent>,
    pub patch: CalendarPatch,
    pub summary: String,
}

/// Where a turn's zone came from (the agenda block names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneSource {
    /// The turn named it (its client's zone), for this turn only.
    Turn,
    /// The user's chosen zone (`PUT /me/settings`).
    Stored,
    /// Neither: UTC.
    Default,
}

fn conflict(expected: u64) -> impl Fn(WriteError) -> CalendarError {
    move |e| match e {
        WriteError::Conflict { current: Some(c) } => CalendarError::Conflict { expected, current_version: c },
        WriteError::Conflict { current: None } => CalendarError::NotFound,
        WriteError::Store(s) => CalendarError::Store(s),
    }
}

impl CalendarService {
    pub fn new(store: impl EventStore + 'static, entities: EntityService) -> Self {
        CalendarService { store: Arc::new(store), entities, remote: None }
    }

    /// Events of users with a calendar server account are kept in sync with it.
    pub fn with_remote(mut self, remote: Arc<dyn Remote>) -> Self {
        self.remote = Some(remote);
        self
    }

    /// The zone to read times in: the requested one, else the user's stored
    /// one, else UTC.
    pub async fn zone(&self, user: &UserId, requested: Option<&str>) -> Result<Zone, CalendarError> {
        if let Some(z) = requested {
            return Zone::parse(z);
        }
        Ok(self.stored_zone(user).await?.unwrap_or(Zone::UTC))
    }

    /// A turn's zone and where it came from: the zone the turn named (its
    /// client's), else the user's chosen one, else UTC.
    pub async fn turn_zone(&self, user: &UserId, named: Option<Zone>) -> Result<(Zone, ZoneSource), CalendarError> {
        if let Some(z) = named {
            return Ok((z, ZoneSource::Turn));
        }
        Ok(match self.stored_zone(user).await? {
            Some(z) => (z, ZoneSource::Stored),
            None => (Zone::UTC, ZoneSource::Default),
        })
    }

    /// The zone the user chose (`PUT /me/settings`), if any.
    pub async fn stored_zone(&self, user: &UserId) -> Result<Option<Zone>, CalendarError> {
        Ok(self.store.settings(user).await?.zone)
    }

    /// Stores the user's chosen zone (`None`: none; turns without a zone read
    /// UTC). Only the user sets it: a turn's zone is that turn's alone.
    pub async fn set_zone(&self, user: &UserId, zone: Option<Zone>) -> Result<(), CalendarError> {
        let mut s = self.store.settings(user).await?;
        if s.zone != zone {
            s.zone = zone;
            self.store.save_settings(user, &s).await?;
        }
        Ok(())
    }

    async fn remote(&self, user: &UserId) -> Result<Option<Box<dyn RemoteCalendar>>, CalendarError> {
        match &self.remote {
            Some(r) => r.calendar(user).await,
            None => Ok(None),
        }
    }

    /// Pulls the calendar server's changes into the store (no-op without one).
    pub async fn sync(&self, user: &UserId) -> Result<(), CalendarError> {
        match self.remote(user).await? {
            Some(cal) => sync::pull(self.store.as_ref(), user, cal.as_ref()).await,
            None => Ok(()),
        }
    }

    pub async fn get(&self, user: &UserId, id: &EventId) -> Result<CalendarEvent, CalendarError> {
        self.store.get(user, id).await?.ok_or(CalendarError::NotFound)
    }

    /// The occurrences overlapping the range, expanded, in the query's zone.
    pub async fn list(&self, user: &UserId, q: &ListQuery) -> Result<EventList, CalendarError> {
        let zone = self.zone(user, q.timezone.as_deref()).await?;
        let (from, to) = range(&q.from, &q.to, zone)?;
        if let Some(p) = &q.project_id {
            // A project that is not the user's lists nothing; say so rather
            // than answer "no events" (small models fill optional ids with
            // placeholders such as "your_project_id").
            self.entities.get_project(user, p).await.map_err(|_| {
                CalendarError::bad(
                    "link_not_found",
                    format!("project {p} not found: omit project_id to list every event"),
                )
            })?;
        }
        let (events, mut skipped) = self.synced(user).await?;
        let events: Vec<CalendarEvent> =
            events.into_iter().filter(|e| q.project_id.is_none() || e.project_id == q.project_id).collect();
        let found = expand(&events, from, to, zone, MAX_INSTANCES + 1);
        skipped.extend(found.skipped);
        let mut truncated = found.truncated;
        let mut out: Vec<EventInstance> = found.occurrences.into_iter().map(|(ev, o)| instance(ev, o, zone)).collect();
        out.sort_by(|a, b| (start_key(a, zone), &a.title).cmp(&(start_key(b, zone), &b.title)));
        if out.len() > MAX_INSTANCES {
            out.truncate(MAX_INSTANCES);
            truncated = true;
        }
        let show = |t: DateTime<Utc>| EventTime::At(t).display_in(zone);
        Ok(EventList { from: show(from), to: show(to), timezone: zone, events: out, truncated, skipped })
    }

    /// Every event of the user after pulling the server's changes, and the
    /// server's objects the syncs could not take in.
    async fn synced(&self, user: &UserId) -> Result<(Vec<CalendarEvent>, Vec<SkippedEvent>), CalendarError> {
        self.sync(user).await?;
        let events = self.store.list(user).await?;
        let skipped = match self.remote.is_some() {
            true => self.store.settings(user).await?.skipped,
            false => vec![],
        };
        Ok((events, skipped))
    }

    /// The names of the user's projects among `ids` (each read once; one
    /// not found, or not the user's, is left out).
    pub async fn project_names<'a>(
        &self,
        user: &UserId,
        ids: impl Iterator<Item = &'a ProjectId>,
    ) -> std::collections::HashMap<ProjectId, String> {
        let mut ids: Vec<&ProjectId> = ids.collect();
        ids.sort_by_key(|p| p.to_string());
        ids.dedup();
        let read = ids.into_iter().map(|p| async move { (p.clone(), self.entities.get_project(user, p).await) });
        futures::future::join_all(read).await.into_iter().filter_map(|(p, r)| r.ok().map(|pr| (p, pr.name))).collect()
    }

    pub async fn create(&self, user: &UserId, input: &NewEvent) -> Result<Written, CalendarError> {
        // The input's own zone wins in `build`: the stored one is read only without it.
        let zone = match input.timezone.as_deref().filter(|z| !z.is_empty()) {
            Some(_) => Zone::UTC,
            None => self.zone(user, None).await?,
        };
        let ev = edit::build(input, zone, crate::now_ms())?;
        self.check_links(user, &ev).await?;
        let ev = self.commit(user, None, ev).await?;
        let summary = format!("Scheduled {} for {}", ev.title, human(ev.start, ev.timezone));
        Ok(Written { title: ev.title.clone(), patch: upserts([&ev]), event: Some(ev), summary })
    }

    async fn check_links(&self, user: &UserId, ev: &CalendarEvent) -> Result<(), CalendarError> {
        let missing = |what: &str| CalendarError::bad("link_not_found", format!("{what} not found"));
        match (&ev.project_id, &ev.task_id) {
            (None, Some(_)) => Err(CalendarError::bad("missing_field", "task_id needs the task's project_id")),
            (Some(p), None) => self.entities.get_project(user, p).await.map(|_| ()).map_err(|_| missing("project")),
            (Some(p), Some(t)) => {
                self.entities.get(user, p, EntityKind::Task, t).await.map(|_| ()).map_err(|_| missing("task"))
            }
            (None, None) => Ok(()),
        }
    }

    /// Writes `new` over `old` (or creates it): the server first, then the store.
    async fn commit(
        &self,
        user: &UserId,
        old: Option<&CalendarEvent>,
        mut new: CalendarEvent,
    ) -> Result<CalendarEvent, CalendarError> {
        if let Some(cal) = self.remote(user).await? {
            // A conflict names the event as the user knows it (its stored
            // title), not as the refused change would have renamed it.
            new.remote = Some(cal.put(&new).await.map_err(|e| match (e, old) {
                (CalendarError::RemoteConflict { .. }, Some(o)) => {
                    CalendarError::RemoteConflict { title: o.title.clone() }
                }
                (e, _) => e,
            })?);
        }
        let expected = old.map(|o| o.version);
        self.store.put(user, &new, expected).await.map_err(conflict(expected.unwrap_or(0)))?;
        Ok(new)
    }

    async fn current(
        &self,
        user: &UserId,
        id: &EventId,
        expected: Option<u64>,
    ) -> Result<CalendarEvent, CalendarError> {
        let ev = self.get(user, id).await?;
        match expected {
            Some(v) if v != ev.version => Err(CalendarError::Conflict { expected: v, current_version: ev.version }),
            _ => Ok(ev),
        }
    }

    /// Changes the event, one instance of it, or an instance and the ones
    /// after it (`target`).
    pub async fn update(
        &self,
        user: &UserId,
        id: &EventId,
        target: &Target,
        c: &EventChanges,
        expected: Option<u64>,
    ) -> Result<Written, CalendarError> {
        self.update_as(user, id, target, c, expected, NoChange::Write).await
    }

    /// [`update`](Self::update), refusing a change that changes nothing
    /// (`no_change`): the chat's tool, whose model once "cancelled" an
    /// occurrence by setting its start to the start it had, then said so.
    pub async fn update_changing(
        &self,
        user: &UserId,
        id: &EventId,
        target: &Target,
        c: &EventChanges,
    ) -> Result<Written, CalendarError> {
        self.update_as(user, id, target, c, None, NoChange::Refuse).await
    }

    async fn update_as(
        &self,
        user: &UserId,
        id: &EventId,
        target: &Target,
        c: &EventChanges,
        expected: Option<u64>,
        no_change: NoChange,
    ) -> Result<Written, CalendarError> {
        let old = self.current(user, id, expected).await?;
        let now = crate::now_ms();
        let bump = |mut e: CalendarEvent| {
            (e.version, e.updated_at) = (old.version + 1, now);
            e
        };
        let (scope, rid) = scope_of(&old, target)?;
        let (changed, extra) = match (scope, rid) {
            (EditScope::Instance, Some(rid)) => (edit::change_instance(&old, rid, c)?, None),
            (EditScope::Following, Some(rid)) if rid > old.start => {
                let tail = edit::split_from(&old, rid, c, now)?;
                (edit::end_before(&old, rid)?.unwrap_or_else(|| old.clone()), Some(tail))
            }
            _ => (edit::change_series(&old, c)?, None),
        };
        if no_change == NoChange::Refuse && (*c == EventChanges::default() || unchanged(&old, &changed, &extra, rid)) {
            return Err(CalendarError::bad(
                "no_change",
                format!(
                    "this changes nothing: {:?} already is so (nothing was written). Give the field that changes \
                     (start, title, …); to cancel an occurrence call delete_calendar_event with its event_id and instance",
                    old.title
                ),
            ));
        }
        let changed = self.commit(user, Some(&old), bump(changed)).await?;
        let tail = match extra {
            Some(t) => Some(self.commit(user, None, t).await?),
            None => None,
        };
        let summary = describe_change(&old, &changed, tail.as_ref(), rid, scope);
        let patch = upserts([Some(&changed), tail.as_ref()].into_iter().flatten());
        let event = tail.unwrap_or(changed);
        Ok(Written { title: event.title.clone(), event: Some(event), patch, summary })
    }

    /// Deletes the event, one instance of it (kept as a cancelled override),
    /// or an instance and the ones after it (the series ends there).
    pub async fn delete(
        &self,
        user: &UserId,
        id: &EventId,
        target: &Target,
        expected: Option<u64>,
    ) -> Result<Written, CalendarError> {
        let old = self.current(user, id, expected).await?;
        let (scope, rid) = scope_of(&old, target)?;
        let kept = match (scope, rid) {
            (EditScope::Instance, Some(rid)) => Some(edit::cancel_instance(&old, rid)),
            (EditScope::Following, Some(rid)) => edit::end_before(&old, rid)?,
            _ => None,
        };
        let when = rid.map(|r| format!(" on {}", human(r, old.timezone))).unwrap_or_default();
        let Some(mut kept) = kept else {
            self.remove(user, &old).await?;
            let patch = CalendarPatch { changes: vec![CalendarChange::Delete { event_id: old.id.clone() }] };
            let summary = format!("Deleted {}", old.title);
            return Ok(Written { title: old.title, event: None, patch, summary });
        };
        (kept.version, kept.updated_at) = (old.version + 1, crate::now_ms());
        let kept = self.commit(user, Some(&old), kept).await?;
        let summary = match scope {
            EditScope::Following => format!("Ended {} before {}", old.title, when.trim_start_matches(" on ")),
            _ => format!("Cancelled {}{when}", old.title),
        };
        Ok(Written { title: old.title, patch: upserts([&kept]), event: Some(kept), summary })
    }

    async fn remove(&self, user: &UserId, old: &CalendarEvent) -> Result<(), CalendarError> {
        if let (Some(cal), Some(r)) = (self.remote(user).await?, &old.remote) {
            cal.delete(r, &old.title).await?;
        }
        self.store.delete(user, &old.id, old.version).await.map_err(conflict(old.version))
    }

    /// Free slots of the asked length inside working hours over the range.
    /// An event that repeats too often to expand whole over the range is
    /// `range_not_covered`, never a partial answer.
    pub async fn free_time(&self, user: &UserId, q: &FreeQuery) -> Result<FreeSlots, CalendarError> {
        self.free_and_busy(user, q).await.map(|f| f.free)
    }

    /// [`free_time`](Self::free_time), and the timed occurrences inside the
    /// asked working hours (what is busy), in start order.
    pub async fn free_and_busy(&self, user: &UserId, q: &FreeQuery) -> Result<FreeAndBusy, CalendarError> {
        let zone = self.zone(user, q.timezone.as_deref()).await?;
        let (from, to) = range(&q.from, &q.to, zone)?;
        let hour = |s: &Option<String>, d: u32| match s {
            Some(s) => NaiveTime::parse_from_str(s, "%H:%M")
                .map_err(|_| CalendarError::bad("invalid_time", format!("{s:?} is not a time of day (HH:MM)"))),
            None => Ok(NaiveTime::from_hms_opt(d, 0, 0).unwrap_or_default()),
        };
        let hours = Hours { start: hour(&q.day_start, 9)?, end: hour(&q.day_end, 17)?, weekends: q.include_weekends };
        if !(5..=1440).contains(&q.duration_minutes) {
            return Err(CalendarError::bad("invalid_value", "duration_minutes must be 5 to 1440"));
        }
        // Every occurrence, not a listing's first MAX_INSTANCES: a busy time
        // past the cap must not read as free.
        let (events, mut skipped) = self.synced(user).await?;
        let found = expand(&events, from, to, zone, usize::MAX);
        if found.truncated {
            return Err(CalendarError::bad(
                "range_not_covered",
                "an event repeats too often in this range to find free time over all of it: ask for a shorter range",
            ));
        }
        skipped.extend(found.skipped);
        let mut timed: Vec<_> = found.occurrences.iter().filter(|(_, o)| !o.start.is_date()).collect();
        timed.sort_by_key(|(_, o)| (o.start.instant(zone), o.title.clone()));
        let spans: Vec<_> = timed.iter().map(|(_, o)| (o.start.instant(zone), o.end.instant(zone))).collect();
        let windows = free::windows(from, to, hours, zone);
        let busy = timed
            .iter()
            .zip(&spans)
            .filter(|(_, (s, e))| windows.iter().any(|(open, close)| s < close && e > open))
            .take(free::MAX_BUSY)
            .map(|((ev, o), _)| free::Busy {
                title: o.title.clone(),
                start: o.start.display_in(zone),
                end: o.end.display_in(zone),
                event_id: ev.id.clone(),
            })
            .collect();
        let slots = free::free_slots(from, to, Duration::minutes(q.duration_minutes.into()), hours, zone, spans);
        Ok(FreeAndBusy { free: FreeSlots { slots, skipped }, busy })
    }
}

/// What an update that changes nothing does: written as asked (the
/// entities API's `PATCH`), or refused (the chat's tool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoChange {
    Write,
    Refuse,
}

/// Whether a change left everything as it was: the series, or with an
/// instance the occurrence it names (an override equal to the instance
/// differs in storage only).
fn unchanged(old: &CalendarEvent, new: &CalendarEvent, tail: &Option<CalendarEvent>, rid: Option<EventTime>) -> bool {
    let bare = |e: &CalendarEvent| CalendarEvent { overrides: vec![], ..e.clone() };
    if tail.is_some() || bare(old) != bare(new) {
        return false;
    }
    let length = recur::span(old.start, old.end);
    match rid {
        Some(r) => old.occurrence(r, length) == new.occurrence(r, length),
        None => old.overrides == new.overrides,
    }
}

/// What [`expand`] found: each event's occurrences in the range, whether
/// one had more than the cap, and the events it could not expand.
struct Expanded<'a> {
    occurrences: Vec<(&'a CalendarEvent, recur::Occurrence)>,
    truncated: bool,
    skipped: Vec<SkippedEvent>,
}

/// The occurrences of `events` overlapping `[from, to)`, at most `cap` per
/// event. One whose expansion fails is named, not an error of the whole:
/// events synced from a server carry rules nobody checked here.
fn expand(events: &[CalendarEvent], from: DateTime<Utc>, to: DateTime<Utc>, zone: Zone, cap: usize) -> Expanded<'_> {
    let mut found = Expanded { occurrences: vec![], truncated: false, skipped: vec![] };
    for ev in events {
        match recur::occurrences(ev, from, to, zone, cap) {
            Ok((occ, more)) => {
                found.truncated |= more;
                found.occurrences.extend(occ.into_iter().map(|o| (ev, o)));
            }
            Err(e) => found.skipped.push(SkippedEvent {
                event_id: Some(ev.id.clone()),
                href: ev.remote.as_ref().map(|r| r.href.clone()),
                title: Some(ev.title.clone()),
                ..SkippedEvent::new(SkipReason::Unexpandable, e.to_string())
            }),
        }
    }
    found
}

/// The range of a query: at most [`MAX_RANGE_DAYS`], `to` after `from`.
pub fn range(from: &str, to: &str, zone: Zone) -> Result<(DateTime<Utc>, DateTime<Utc>), CalendarError> {
    let from_t = EventTime::parse_in(from, zone)?.instant(zone);
    let to_t = match EventTime::parse_in(to, zone)? {
        EventTime::Date(d) => zone.day_start(d + Duration::days(1)),
        EventTime::At(t) => t,
    };
    if to_t <= from_t {
        return Err(CalendarError::bad("end_before_start", format!("`to` ({to}) is not after `from` ({from})")));
    }
    if to_t - from_t > Duration::days(MAX_RANGE_DAYS) {
        return Err(CalendarError::bad("range_too_long", format!("a range covers at most {MAX_RANGE_DAYS} days")));
    }
    Ok((from_t, to_t))
}

/// The scope a target asks for, and the instance it names (checked).
fn scope_of(ev: &CalendarEvent, t: &Target) -> Result<(EditScope, Option<EventTime>), CalendarError> {
    let rid = t.instance.as_deref().map(|i| edit::instance(ev, i)).transpose()?;
    match (t.scope, rid) {
        (Some(EditScope::Series), _) => Ok((EditScope::Series, rid)),
        (Some(s), Some(r)) => Ok((s, Some(r))),
        (Some(_), None) => Err(CalendarError::bad("missing_field", "`instance` names the occurrence to change")),
        (None, Some(r)) => Ok((EditScope::Instance, Some(r))),
        (None, None) => Ok((EditScope::Series, None)),
    }
}

fn instance(ev: &CalendarEvent, o: recur::Occurrence, zone: Zone) -> EventInstance {
    EventInstance {
        event_id: ev.id.clone(),
        instance: o.recurrence_id,
        title: o.title,
        start: o.start.display_in(zone),
        end: o.end.display_in(zone),
        all_day: o.start.is_date(),
        recurring: ev.recurrence.is_some(),
        location: o.location,
        description: o.description,
        project_id: ev.project_id.clone(),
        task_id: ev.task_id.clone(),
        version: ev.version,
    }
}

fn start_key(i: &EventInstance, zone: Zone) -> DateTime<Utc> {
    EventTime::parse_stored(&i.start).map(|t| t.instant(zone)).unwrap_or_default()
}

fn upserts<'a>(events: impl IntoIterator<Item = &'a CalendarEvent>) -> CalendarPatch {
    CalendarPatch {
        changes: events.into_iter().map(|e| CalendarChange::Upsert { event: Box::new(e.clone()) }).collect(),
    }
}

/// "Tue 1 Dec 10:00" in the event's zone, or "Tue 1 Dec" for a date.
pub fn human(t: EventTime, zone: Zone) -> String {
    match t {
        EventTime::Date(d) => d.format("%a %-d %b").to_string(),
        EventTime::At(t) => zone.local(t).format("%a %-d %b %H:%M").to_string(),
    }
}

fn describe_change(
    old: &CalendarEvent,
    new: &CalendarEvent,
    tail: Option<&CalendarEvent>,
    rid: Option<EventTime>,
    scope: EditScope,
) -> String {
    let zone = new.timezone;
    let (moved_to, title) = match (scope, rid, tail) {
        (EditScope::Instance, Some(r), _) => {
            let o = new.occurrence(r, recur::span(new.start, new.end));
            (o.as_ref().map(|o| o.start).filter(|s| *s != r), o.map(|o| o.title).unwrap_or_default())
        }
        (_, _, Some(t)) => (Some(t.start).filter(|s| Some(*s) != rid), t.title.clone()),
        _ => (Some(new.start).filter(|s| *s != old.start), new.title.clone()),
    };
    let which = match scope {
        EditScope::Instance => " (this occurrence)",
        EditScope::Following => " (this and following)",
        EditScope::Series if old.recurrence.is_some() => " (every occurrence)",
        EditScope::Series => "",
    };
    match moved_to {
        Some(s) => format!("Moved {title} to {}{which}", human(s, zone)),
        None => format!("Changed {title}{which}"),
    }
}
