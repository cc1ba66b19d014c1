//! `project_forecast`: what is due when, what is late, and what the
//! calendar leaves time for (issue 44).
//!
//! - `late`: open tasks and milestones past their `due_at`, active goals
//!   past `target_at`, most late first;
//! - `coming`: the same kinds with a date still ahead, soonest first, each
//!   with the free working time the calendar leaves before it (within the
//!   [`HORIZON_DAYS`] the free time is read for);
//! - `free_time`: the free working time (09:00–17:00, weekdays, slots of
//!   at least 30 minutes) of the next [`HORIZON_DAYS`] days, one line per
//!   day, from the calendar's own free-time computation
//!   ([`CalendarService::free_time`]); absent without a calendar.
//!
//! [`CalendarService::free_time`]: crate::calendar::CalendarService::free_time

use super::{all_of, as_of, date_of, named, Lines, Sources};
use crate::calendar::{FreeQuery, Zone};
use crate::entities::{Entity, EntityFields, EntityKind, GoalState, MilestoneState, TaskState};
use crate::ids::{ProjectId, UserId};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// Days of free time read, today included.
pub const HORIZON_DAYS: i64 = 14;
const DAY_MS: i64 = 24 * 3600 * 1000;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ForecastBlock {
    pub as_of: String,
    pub late: Vec<String>,
    pub coming: Vec<String>,
    /// Open tasks without a due date (not forecast).
    pub undated_open_tasks: usize,
    /// `Tuesday 2026-12-08: 09:00–12:00, 14:00–17:00 (6 h)`, one per day with free time.
    pub free_time: Vec<String>,
    /// `21.5 h free in working hours over the next 14 days`, or why not known.
    pub free_total: String,
    #[serde(default)]
    pub left_out: usize,
}

impl Lines for ForecastBlock {
    fn lists(&mut self) -> Vec<&mut Vec<String>> {
        vec![&mut self.late, &mut self.coming, &mut self.free_time]
    }
    fn left_out(&mut self) -> &mut usize {
        &mut self.left_out
    }
}

/// An open entity's date (due or target), if it has one and is not finished.
fn open_date(e: &Entity) -> Option<i64> {
    match &e.fields {
        EntityFields::Task(f) if f.state != TaskState::Done => f.due_at,
        EntityFields::Milestone(f) if matches!(f.state, MilestoneState::Pending | MilestoneState::InProgress) => {
            f.due_at
        }
        EntityFields::Goal(f) if f.state == GoalState::Active => f.target_at,
        _ => None,
    }
}

/// A free slot as instants.
type Slot = (DateTime<Utc>, DateTime<Utc>);

pub async fn build(src: &Sources<'_>, user: &UserId, project: &ProjectId) -> ForecastBlock {
    let svc = src.entities;
    let zone = src.zone(user).await;
    let kinds = [EntityKind::Task, EntityKind::Milestone, EntityKind::Goal];
    let (lists, free) = tokio::join!(
        futures::future::join_all(kinds.map(|k| all_of(svc, user, project, k))),
        free_slots(src, user, zone),
    );
    let now = src.now.timestamp_millis();
    let mut b = ForecastBlock { as_of: as_of(src.now, zone), ..Default::default() };
    let mut dated: Vec<(i64, &Entity)> = Vec::new();
    for e in lists.iter().flatten() {
        match open_date(e) {
            Some(d) => dated.push((d, e)),
            None if matches!(&e.fields, EntityFields::Task(f) if f.state != TaskState::Done) => {
                b.undated_open_tasks += 1
            }
            None => {}
        }
    }
    dated.sort_by_key(|(d, _)| *d);
    for (d, e) in dated.iter().filter(|(d, _)| *d < now).rev() {
        let days = (now - d) / DAY_MS;
        b.late.push(format!("{} — due {}, {days} day{} late", named(e), date_of(*d, zone), plural(days)));
    }
    let horizon = src.now + Duration::days(HORIZON_DAYS);
    for (d, e) in dated.iter().filter(|(d, _)| *d >= now) {
        let days = (d - now) / DAY_MS;
        let mut line = format!("{} — due {}, in {days} day{}", named(e), date_of(*d, zone), plural(days));
        if let (Some(slots), Some(due)) = (&free, DateTime::<Utc>::from_timestamp_millis(*d)) {
            if due <= horizon {
                line.push_str(&format!("; {} free before it", hours(minutes_before(slots, due))));
            }
        }
        b.coming.push(line);
    }
    match &free {
        Some(slots) => {
            b.free_time = by_day(slots, zone);
            let total: i64 = slots.iter().map(|(a, z)| (*z - *a).num_minutes()).sum();
            b.free_total = format!("{} free in working hours over the next {HORIZON_DAYS} days", hours(total));
        }
        None => b.free_total = "not known: no calendar could be read".into(),
    }
    b
}

fn plural(n: i64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `6 h`, `1.5 h`.
fn hours(minutes: i64) -> String {
    let h = minutes as f64 / 60.0;
    if minutes % 60 == 0 {
        format!("{} h", minutes / 60)
    } else {
        format!("{h:.1} h")
    }
}

/// Free working time from now over the horizon, or `None` without a calendar.
async fn free_slots(src: &Sources<'_>, user: &UserId, zone: Zone) -> Option<Vec<Slot>> {
    let cal = src.calendar?;
    let local = zone.local(src.now);
    let q = FreeQuery {
        from: local.format("%Y-%m-%dT%H:%M").to_string(),
        to: (local.date_naive() + Duration::days(HORIZON_DAYS - 1)).to_string(),
        duration_minutes: 30,
        timezone: Some(zone.name().into()),
        ..Default::default()
    };
    match cal.free_time(user, &q).await {
        Ok(free) => Some(
            free.slots
                .iter()
                .filter_map(|s| {
                    let a = DateTime::parse_from_rfc3339(&s.start).ok()?.with_timezone(&Utc);
                    let z = DateTime::parse_from_rfc3339(&s.end).ok()?.with_timezone(&Utc);
                    Some((a, z))
                })
                .collect(),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "forecast: free time not read");
            None
        }
    }
}

fn minutes_before(slots: &[Slot], due: DateTime<Utc>) -> i64 {
    slots.iter().filter(|(a, _)| *a < due).map(|(a, z)| ((*z).min(due) - *a).num_minutes()).sum()
}

fn by_day(slots: &[Slot], zone: Zone) -> Vec<String> {
    let mut out: Vec<(chrono::NaiveDate, Vec<String>, i64)> = Vec::new();
    for (a, z) in slots {
        let (la, lz) = (zone.local(*a), zone.local(*z));
        let span = format!("{}–{}", la.format("%H:%M"), lz.format("%H:%M"));
        let minutes = (*z - *a).num_minutes();
        match out.last_mut() {
            Some((d, spans, total)) if *d == la.date_naive() => {
                spans.push(span);
                *total += minutes;
            }
            _ => out.push((la.date_naive(), vec![span], minutes)),
        }
    }
    out.into_iter()
        .map(|(d, spans, total)| format!("{}: {} ({})", d.format("%A %Y-%m-%d"), spans.join(", "), hours(total)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{entity, project, sources};
    use super::*;
    use crate::calendar::store::MemoryEventStore;
    use crate::calendar::{CalendarService, NewEvent};
    use crate::context::modes::{build_block, Mode, ModeBlock};
    use crate::tools::ToolScope;
    use chrono::TimeZone;
    use serde_json::json;

    #[tokio::test]
    async fn the_forecast_orders_dates_and_counts_the_free_time_before_each() {
        let (svc, u, p) = project().await;
        // Monday 2026-12-07 08:00 UTC.
        let now = Utc.with_ymd_and_hms(2026, 12, 7, 8, 0, 0).unwrap();
        let at = |d: u32, h: u32| Utc.with_ymd_and_hms(2026, 12, d, h, 0, 0).unwrap().timestamp_millis();
        let late = entity(&svc, &u, &p, EntityKind::Task, json!({"title": "Send invoices", "due_at": at(4, 12)})).await;
        let beta = entity(&svc, &u, &p, EntityKind::Milestone, json!({"title": "Beta", "due_at": at(9, 9)})).await;
        let launch = entity(&svc, &u, &p, EntityKind::Goal, json!({"name": "Launch", "target_at": at(8, 17)})).await;
        entity(&svc, &u, &p, EntityKind::Task, json!({"title": "Someday"})).await;
        entity(&svc, &u, &p, EntityKind::Task, json!({"title": "Done", "state": "done", "due_at": at(1, 9)})).await;
        let cal = CalendarService::new(MemoryEventStore::new(), svc.clone());
        // Monday 10:00–16:00 busy: 09:00–10:00 and 16:00–17:00 free that day.
        let busy: NewEvent = serde_json::from_value(json!({"title": "Workshop", "start": "2026-12-07T10:00",
            "end": "2026-12-07T16:00", "timezone": "UTC"}))
        .unwrap();
        cal.create(&u, &busy).await.unwrap();
        let src = Sources { calendar: Some(&cal), ..sources(&svc, now) };
        let Some(ModeBlock::Forecast(b)) =
            build_block(&src, &u, Mode::Forecast, &ToolScope::Project { project: p }).await
        else {
            panic!("a forecast block")
        };
        assert_eq!(b.late, [format!("task “Send invoices”: id {late} — due 2026-12-04, 2 days late")]);
        // Monday: 09:00–10:00 and 16:00–17:00 (2 h); Tuesday 8 h to 17:00;
        // before Wednesday 09:00 that is 10 h.
        assert_eq!(
            b.coming,
            [
                format!("goal “Launch”: id {launch} — due 2026-12-08, in 1 day; 10 h free before it"),
                format!("milestone “Beta”: id {beta} — due 2026-12-09, in 2 days; 10 h free before it"),
            ]
        );
        assert_eq!(b.undated_open_tasks, 1);
        assert_eq!(b.free_time[0], "Monday 2026-12-07: 09:00–10:00, 16:00–17:00 (2 h)");
        assert_eq!(b.free_time[1], "Tuesday 2026-12-08: 09:00–17:00 (8 h)");
        // Two weeks from Monday: 10 weekdays, one of them 6 h busy.
        assert_eq!(b.free_total, "74 h free in working hours over the next 14 days");
    }
}
