//! `daily_brief_update`: today and tomorrow across the user's projects (or
//! the focused one) and calendar, in one compact block (issue 44).
//!
//! - the calendar's occurrences of today and tomorrow (in the user's zone);
//! - open tasks and milestones overdue, due today, due tomorrow;
//! - what changed in the last [`CHANGED_HOURS`] hours ("since yesterday's
//!   brief": no record of the last brief is kept, so the window is fixed):
//!   entities created or updated, read only in projects written in it.
//!
//! Lines start with the project's name: the brief spans projects. At most
//! [`BRIEF_PROJECTS`] projects are read (the most recently listed).

use super::{all_of, as_of, date_of, named, Lines, Sources};
use crate::calendar::{ListQuery, Zone};
use crate::entities::{Entity, EntityFields, EntityKind, MilestoneState, Project, TaskState};
use crate::entities::{EntityService, PageRequest};
use crate::ids::{ProjectId, UserId};
use chrono::Duration;
use serde::{Deserialize, Serialize};

pub const BRIEF_PROJECTS: usize = 20;
pub const CHANGED_HOURS: i64 = 24;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BriefBlock {
    pub as_of: String,
    pub events_today: Vec<String>,
    pub events_tomorrow: Vec<String>,
    pub overdue: Vec<String>,
    pub due_today: Vec<String>,
    pub due_tomorrow: Vec<String>,
    /// `since 2026-12-06 09:30`: the start of the `changed` window.
    pub changed_since: String,
    pub changed: Vec<String>,
    /// `no calendar`, or events the calendar could not read; empty when all is well.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub calendar_note: String,
    #[serde(default)]
    pub left_out: usize,
}

impl Lines for BriefBlock {
    fn lists(&mut self) -> Vec<&mut Vec<String>> {
        vec![
            &mut self.events_today,
            &mut self.events_tomorrow,
            &mut self.overdue,
            &mut self.due_today,
            &mut self.due_tomorrow,
            &mut self.changed,
        ]
    }
    fn left_out(&mut self) -> &mut usize {
        &mut self.left_out
    }
}

async fn projects(svc: &EntityService, user: &UserId, focus: Option<&ProjectId>) -> Vec<Project> {
    match focus {
        Some(p) => svc.get_project(user, p).await.ok().into_iter().collect(),
        None => svc
            .list_projects(user, PageRequest { limit: Some(BRIEF_PROJECTS), cursor: None })
            .await
            .map(|p| p.items)
            .unwrap_or_default(),
    }
}

/// A project's entities the brief reads: tasks and milestones always, every
/// kind when the project was written since `since`.
async fn entities_of(svc: &EntityService, user: &UserId, p: &Project, since: i64) -> Vec<Entity> {
    let kinds: Vec<EntityKind> =
        if p.updated_at >= since { EntityKind::ALL.to_vec() } else { vec![EntityKind::Task, EntityKind::Milestone] };
    let lists = futures::future::join_all(kinds.into_iter().map(|k| all_of(svc, user, &p.id, k))).await;
    lists.into_iter().flatten().collect()
}

fn open_due(e: &Entity) -> Option<i64> {
    match &e.fields {
        EntityFields::Task(f) if f.state != TaskState::Done => f.due_at,
        EntityFields::Milestone(f) if matches!(f.state, MilestoneState::Pending | MilestoneState::InProgress) => {
            f.due_at
        }
        _ => None,
    }
}

pub async fn build(src: &Sources<'_>, user: &UserId, focus: Option<&ProjectId>) -> BriefBlock {
    let svc = src.entities;
    let zone = src.zone(user).await;
    let since = (src.now - Duration::hours(CHANGED_HOURS)).timestamp_millis();
    let (projects, events) = tokio::join!(projects(svc, user, focus), events(src, user, zone));
    let read = futures::future::join_all(projects.iter().map(|p| entities_of(svc, user, p, since))).await;
    let today = zone.local(src.now).date_naive();
    let (today_s, tomorrow_s) = (today.to_string(), (today + Duration::days(1)).to_string());
    let mut b = BriefBlock {
        as_of: as_of(src.now, zone),
        changed_since: format!(
            "since {}",
            zone.local(src.now - Duration::hours(CHANGED_HOURS)).format("%Y-%m-%d %H:%M")
        ),
        ..Default::default()
    };
    let mut overdue: Vec<(i64, String)> = Vec::new();
    let mut changed: Vec<(i64, String)> = Vec::new();
    for (p, entities) in projects.iter().zip(&read) {
        for e in entities {
            let line = format!("{}: {}", p.name, named(e));
            if let Some(due) = open_due(e) {
                let day = date_of(due, zone);
                if day < today_s {
                    overdue.push((due, format!("{line} — due {day}")));
                } else if day == today_s {
                    b.due_today.push(line.clone());
                } else if day == tomorrow_s {
                    b.due_tomorrow.push(line.clone());
                }
            }
            if e.updated_at >= since {
                let what = if e.created_at >= since { "created" } else { "updated" };
                changed.push((e.updated_at, format!("{line} — {what}")));
            }
        }
    }
    overdue.sort_by_key(|(d, _)| *d);
    changed.sort_by_key(|(d, _)| -d);
    b.overdue = overdue.into_iter().map(|(_, l)| l).collect();
    b.changed = changed.into_iter().map(|(_, l)| l).collect();
    match events {
        Some((list, note)) => {
            for (day, line) in list {
                if day <= today_s {
                    b.events_today.push(line);
                } else {
                    b.events_tomorrow.push(line);
                }
            }
            b.calendar_note = note;
        }
        None => b.calendar_note = "no calendar could be read".into(),
    }
    b
}

/// Today's and tomorrow's occurrences as (local start day, line), and the
/// note naming what the calendar could not read.
async fn events(src: &Sources<'_>, user: &UserId, zone: Zone) -> Option<(Vec<(String, String)>, String)> {
    let cal = src.calendar?;
    let today = zone.local(src.now).date_naive();
    let q = ListQuery {
        from: today.to_string(),
        to: (today + Duration::days(1)).to_string(),
        timezone: Some(zone.name().into()),
        project_id: None,
    };
    let list = cal.list(user, &q).await.map_err(|e| tracing::warn!(error = %e, "brief: calendar not read")).ok()?;
    let lines = list
        .events
        .iter()
        .map(|e| {
            let when = match (e.all_day, e.start.get(11..16), e.end.get(11..16)) {
                (false, Some(a), Some(z)) => format!("{a}–{z}"),
                _ => "all day".to_string(),
            };
            let day = e.start.get(..10).unwrap_or_default().to_string();
            (day, format!("{when} “{}”: event_id {}", e.title, e.event_id))
        })
        .collect();
    Some((lines, crate::calendar::agenda::skipped_line(&list.skipped).trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{entity, named_project, project, sources};
    use super::*;
    use crate::calendar::store::MemoryEventStore;
    use crate::calendar::{CalendarService, NewEvent};
    use crate::context::modes::{build_block, Mode, ModeBlock};
    use crate::tools::ToolScope;
    use chrono::Utc;
    use serde_json::json;

    #[tokio::test]
    async fn the_brief_spans_projects_and_the_calendar_for_today_and_tomorrow() {
        let (svc, u, launch) = project().await;
        let home = named_project(&svc, &u, "Home").await;
        let now = Utc::now();
        let zone = Zone::UTC;
        let today = zone.local(now).date_naive();
        let at = |days: i64, h: u32| {
            zone.day_start(today + Duration::days(days)).timestamp_millis() + i64::from(h) * 3_600_000
        };
        let late =
            entity(&svc, &u, &launch, EntityKind::Task, json!({"title": "Send invoices", "due_at": at(-2, 9)})).await;
        let due = entity(&svc, &u, &home, EntityKind::Task, json!({"title": "Pay rent", "due_at": at(0, 23)})).await;
        let next =
            entity(&svc, &u, &launch, EntityKind::Milestone, json!({"title": "Beta", "due_at": at(1, 12)})).await;
        entity(&svc, &u, &home, EntityKind::Task, json!({"title": "Later", "due_at": at(5, 9)})).await;
        let cal = CalendarService::new(MemoryEventStore::new(), svc.clone());
        for (title, day, h) in [("Standup", 0, "09:00"), ("Dentist", 1, "14:00"), ("Far", 3, "09:00")] {
            let start = format!("{}T{h}", today + Duration::days(day));
            let ev: NewEvent =
                serde_json::from_value(json!({"title": title, "start": start, "timezone": "UTC"})).unwrap();
            cal.create(&u, &ev).await.unwrap();
        }
        let src = Sources { calendar: Some(&cal), ..sources(&svc, now) };
        let Some(ModeBlock::Brief(b)) = build_block(&src, &u, Mode::Brief, &ToolScope::Global).await else {
            panic!("a brief block")
        };
        assert_eq!(b.overdue, [format!("Launch: task “Send invoices”: id {late} — due {}", today - Duration::days(2))]);
        assert_eq!(b.due_today, [format!("Home: task “Pay rent”: id {due}")]);
        assert_eq!(b.due_tomorrow, [format!("Launch: milestone “Beta”: id {next}")]);
        assert_eq!(b.events_today.len(), 1, "{:?}", b.events_today);
        assert!(b.events_today[0].starts_with("09:00–10:00 “Standup”: event_id "), "{:?}", b.events_today);
        assert!(b.events_tomorrow.len() == 1 && b.events_tomorrow[0].starts_with("14:00–15:00 “Dentist”"));
        // Everything here was made just now: each is "created", newest first.
        assert!(
            b.changed.iter().any(|l| l == &format!("Home: task “Pay rent”: id {due} — created")),
            "{:?}",
            b.changed
        );
        assert!(b.changed.iter().all(|l| l.ends_with(" — created")));
        assert!(b.calendar_note.is_empty());
        // A day later nothing is new; focused on Home, only Home's work shows.
        let tomorrow = sources(&svc, now + Duration::days(2));
        let Some(ModeBlock::Brief(b)) =
            build_block(&tomorrow, &u, Mode::Brief, &ToolScope::Project { project: home }).await
        else {
            panic!()
        };
        assert!(b.changed.is_empty(), "{:?}", b.changed);
        assert_eq!(b.overdue, [format!("Home: task “Pay rent”: id {due} — due {today}")]);
        assert_eq!(b.calendar_note, "no calendar could be read");
    }
}
