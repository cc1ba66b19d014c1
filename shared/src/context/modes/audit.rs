//! `project_audit`: a project's gaps, computed from the ontology (issue 44).
//!
//! - tasks linked to no goal (an edge either way, any relation);
//! - goals (active or draft) linked to no task;
//! - open risks linked to no task, plan or requirement (nothing mitigates them);
//! - overdue work: open tasks and pending milestones past `due_at`, active
//!   goals past `target_at`, most late first;
//! - untouched work: open tasks not updated for [`UNTOUCHED_DAYS`] (and not
//!   already overdue), oldest first;
//! - documents that are not in the project's document tree.
//!
//! Each line names the entity with its id; the model reports them and fixes
//! what the user agrees to with the project tools.

use super::{all_of, as_of, date_of, named, Lines, Sources};
use crate::entities::{Edge, Entity, EntityFields, EntityKind, GoalState, MilestoneState, RiskState, TaskState};
use crate::ids::{EntityId, ProjectId, UserId};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Open work not updated for this long is "untouched".
pub const UNTOUCHED_DAYS: i64 = 21;
const DAY_MS: i64 = 24 * 3600 * 1000;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditBlock {
    /// When it was computed, in the user's zone.
    pub as_of: String,
    /// How much was checked: `12 tasks, 3 goals, …`.
    pub checked: String,
    pub tasks_without_goal: Vec<String>,
    pub goals_without_tasks: Vec<String>,
    pub risks_without_mitigation: Vec<String>,
    pub overdue: Vec<String>,
    pub untouched: Vec<String>,
    pub documents_outside_tree: Vec<String>,
    /// Lines cut to fit the token budget.
    #[serde(default)]
    pub left_out: usize,
}

impl Lines for AuditBlock {
    fn lists(&mut self) -> Vec<&mut Vec<String>> {
        vec![
            &mut self.tasks_without_goal,
            &mut self.goals_without_tasks,
            &mut self.risks_without_mitigation,
            &mut self.overdue,
            &mut self.untouched,
            &mut self.documents_outside_tree,
        ]
    }
    fn left_out(&mut self) -> &mut usize {
        &mut self.left_out
    }
}

/// The project's entities and edges, read in parallel.
struct Read {
    by_kind: Vec<(EntityKind, Vec<Entity>)>,
    edges: Vec<Edge>,
    in_tree: HashSet<EntityId>,
}

impl Read {
    fn of(&self, kind: EntityKind) -> &[Entity] {
        self.by_kind.iter().find(|(k, _)| *k == kind).map(|(_, v)| v.as_slice()).unwrap_or(&[])
    }

    /// Whether `e` has an edge (either way) to an entity of one of `kinds`.
    fn linked_to(&self, e: &Entity, kinds: &[EntityKind]) -> bool {
        self.edges.iter().any(|edge| {
            (edge.from.id == e.id && kinds.contains(&edge.to.kind))
                || (edge.to.id == e.id && kinds.contains(&edge.from.kind))
        })
    }
}

async fn read(src: &Sources<'_>, user: &UserId, project: &ProjectId) -> Read {
    let svc = src.entities;
    let kinds = EntityKind::ALL;
    let (lists, edges, tree) = tokio::join!(
        futures::future::join_all(kinds.map(|k| async move { (k, all_of(svc, user, project, k).await) })),
        svc.edges(user, project, None),
        svc.doc_structure(user, project),
    );
    let mut in_tree = HashSet::new();
    if let Ok(t) = &tree {
        let mut stack: Vec<_> = t.root.iter().collect();
        while let Some(n) = stack.pop() {
            in_tree.insert(n.id.clone());
            stack.extend(n.children.iter());
        }
    }
    Read { by_kind: lists, edges: edges.unwrap_or_default(), in_tree }
}

/// The findings that need no clock: open risks nothing mitigates, and
/// documents outside the tree.
fn loose_ends(read: &Read, b: &mut AuditBlock) {
    let mitigations = [EntityKind::Task, EntityKind::Plan, EntityKind::Requirement];
    for r in read.of(EntityKind::Risk) {
        let EntityFields::Risk(f) = &r.fields else { continue };
        if f.state == RiskState::Open && !read.linked_to(r, &mitigations) {
            let impact =
                f.impact.and_then(|i| serde_json::to_value(i).ok()).and_then(|v| v.as_str().map(str::to_owned));
            b.risks_without_mitigation.push(match impact {
                Some(i) => format!("{} — impact {i}", named(r)),
                None => named(r),
            });
        }
    }
    for d in read.of(EntityKind::Document) {
        if !read.in_tree.contains(&d.id) {
            b.documents_outside_tree.push(named(d));
        }
    }
}

pub async fn build(src: &Sources<'_>, user: &UserId, project: &ProjectId) -> AuditBlock {
    let (read, zone) = tokio::join!(read(src, user, project), src.zone(user));
    let now = src.now.timestamp_millis();
    let day = |ms: i64| date_of(ms, zone);
    let mut b = AuditBlock { as_of: as_of(src.now, zone), ..Default::default() };
    b.checked = read
        .by_kind
        .iter()
        .map(|(k, v)| format!("{} {}", v.len(), if v.len() == 1 { k.as_str() } else { k.plural() }))
        .collect::<Vec<_>>()
        .join(", ");
    // (how late in ms, line): most late first.
    let mut overdue: Vec<(i64, String)> = Vec::new();
    let mut untouched: Vec<(i64, String)> = Vec::new();
    let late = |due: i64, e: &Entity| {
        let days = (now - due) / DAY_MS;
        (now - due, format!("{} — due {}, {days} day{} late", named(e), day(due), if days == 1 { "" } else { "s" }))
    };
    for t in read.of(EntityKind::Task) {
        let EntityFields::Task(f) = &t.fields else { continue };
        if f.state == TaskState::Done {
            continue;
        }
        if !read.linked_to(t, &[EntityKind::Goal]) {
            b.tasks_without_goal.push(named(t));
        }
        match f.due_at {
            Some(due) if due < now => overdue.push(late(due, t)),
            _ if now - t.updated_at >= UNTOUCHED_DAYS * DAY_MS => {
                let state = serde_json::to_value(f.state).ok().and_then(|v| v.as_str().map(str::to_owned));
                let days = (now - t.updated_at) / DAY_MS;
                let line = format!(
                    "{} — {}, untouched since {} ({days} days)",
                    named(t),
                    state.unwrap_or_default(),
                    day(t.updated_at)
                );
                untouched.push((now - t.updated_at, line));
            }
            _ => {}
        }
    }
    for g in read.of(EntityKind::Goal) {
        let EntityFields::Goal(f) = &g.fields else { continue };
        if matches!(f.state, GoalState::Active | GoalState::Draft) && !read.linked_to(g, &[EntityKind::Task]) {
            b.goals_without_tasks.push(named(g));
        }
        if let Some(due) = f.target_at.filter(|d| *d < now && f.state == GoalState::Active) {
            overdue.push(late(due, g));
        }
    }
    for m in read.of(EntityKind::Milestone) {
        let EntityFields::Milestone(f) = &m.fields else { continue };
        let open = matches!(f.state, MilestoneState::Pending | MilestoneState::InProgress);
        if let Some(due) = f.due_at.filter(|d| *d < now && open) {
            overdue.push(late(due, m));
        }
    }
    loose_ends(&read, &mut b);
    overdue.sort_by_key(|o| std::cmp::Reverse(o.0));
    untouched.sort_by_key(|u| std::cmp::Reverse(u.0));
    b.overdue = overdue.into_iter().map(|(_, l)| l).collect();
    b.untouched = untouched.into_iter().map(|(_, l)| l).collect();
    b
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{entity, link, project, sources};
    use super::*;
    use crate::context::modes::{build_block, Mode, ModeBlock};
    use crate::tools::ToolScope;
    use chrono::Duration;
    use serde_json::json;

    #[tokio::test]
    async fn the_audit_names_each_gap_with_its_id() {
        let (svc, u, p) = project().await;
        let now = chrono::Utc::now();
        let past = (now - Duration::days(3)).timestamp_millis();
        let linked_task = entity(&svc, &u, &p, EntityKind::Task, json!({"title": "Write the post"})).await;
        let lonely_task = entity(&svc, &u, &p, EntityKind::Task, json!({"title": "Fix the footer"})).await;
        let late_task = entity(&svc, &u, &p, EntityKind::Task, json!({"title": "Send invoices", "due_at": past})).await;
        let done =
            entity(&svc, &u, &p, EntityKind::Task, json!({"title": "Old", "state": "done", "due_at": past})).await;
        let goal = entity(&svc, &u, &p, EntityKind::Goal, json!({"name": "Grow readership"})).await;
        let empty_goal = entity(&svc, &u, &p, EntityKind::Goal, json!({"name": "Hire a designer"})).await;
        let risk = entity(&svc, &u, &p, EntityKind::Risk, json!({"title": "Server costs", "impact": "high"})).await;
        let covered = entity(&svc, &u, &p, EntityKind::Risk, json!({"title": "Churn"})).await;
        let milestone =
            entity(&svc, &u, &p, EntityKind::Milestone, json!({"title": "Beta", "due_at": past - 86_400_000})).await;
        link(&svc, &u, &p, (EntityKind::Task, &linked_task), (EntityKind::Goal, &goal)).await;
        link(&svc, &u, &p, (EntityKind::Task, &late_task), (EntityKind::Goal, &goal)).await;
        link(&svc, &u, &p, (EntityKind::Task, &lonely_task), (EntityKind::Risk, &covered)).await;
        let src = sources(&svc, now);
        let Some(ModeBlock::Audit(b)) =
            build_block(&src, &u, Mode::Audit, &ToolScope::Project { project: p.clone() }).await
        else {
            panic!("an audit block")
        };
        assert_eq!(b.tasks_without_goal, [format!("task “Fix the footer”: id {lonely_task}")]);
        assert_eq!(b.goals_without_tasks, [format!("goal “Hire a designer”: id {empty_goal}")]);
        assert_eq!(b.risks_without_mitigation, [format!("risk “Server costs”: id {risk} — impact high")]);
        assert_eq!(b.overdue.len(), 2, "{:?}", b.overdue);
        assert!(b.overdue[0].starts_with(&format!("milestone “Beta”: id {milestone} — due ")), "most late first");
        assert!(b.overdue[0].ends_with("4 days late"), "{:?}", b.overdue);
        assert!(b.overdue[1].starts_with(&format!("task “Send invoices”: id {late_task}")));
        assert!(!b.overdue.iter().chain(&b.tasks_without_goal).any(|l| l.contains(&done.to_string())), "done is done");
        assert!(b.untouched.is_empty() && b.documents_outside_tree.is_empty());
        assert!(b.checked.contains("4 tasks") && b.checked.contains("2 goals"), "{}", b.checked);
        // Three weeks on, the open tasks that were not late are untouched.
        let later = sources(&svc, now + Duration::days(UNTOUCHED_DAYS + 1));
        let Some(ModeBlock::Audit(b)) = build_block(&later, &u, Mode::Audit, &ToolScope::Project { project: p }).await
        else {
            panic!()
        };
        assert_eq!(b.untouched.len(), 2, "{:?}", b.untouched);
        assert!(b.untouched.iter().all(|l| l.contains(" — todo, untouched since ")), "{:?}", b.untouched);
    }

    #[tokio::test]
    async fn the_audit_needs_a_project() {
        let (svc, u, _) = project().await;
        assert!(build_block(&sources(&svc, chrono::Utc::now()), &u, Mode::Audit, &ToolScope::Global).await.is_none());
    }
}
