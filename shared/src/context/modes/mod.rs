//! Mode packs (issue 44): what `project_audit`, `project_forecast`,
//! `daily_brief_update` and `brain_dump` need beyond the scope's pack,
//! computed by the server so the model reports from it instead of finding it
//! (docs/modes.md).
//!
//! Contract:
//! - [`Mode::of`] says which context types have a mode; [`build_block`]
//!   builds its [`ModeBlock`] from the ontology and, where the mode reads
//!   it, the calendar. It never fails: a source that cannot be read is left
//!   out (and a mode that needs a project has no block without one);
//! - every line names what it is about by kind, name and id (as the project
//!   pack does), so the model can act on it without a listing round;
//! - each block fits [`MODE_PACK_TOKENS`] as [`TokenCounter::Estimate`]
//!   counts its JSON: lines are cut from the longest list first, each list
//!   most important first, and `left_out` says how many were cut;
//! - blocks depend on the clock (overdue, today), so a cached one is served
//!   only within [`MODE_FRESH_MS`] of its build (and, with a project, at the
//!   project's version): see `turn::context::load_pack`.

pub mod audit;
pub mod brief;
pub mod dump;
pub mod forecast;

use crate::calendar::{CalendarService, Zone};
use crate::claims::shown::{Shown, ShownItem};
use crate::context::TokenCounter;
use crate::entities::{Entity, EntityKind, EntityService, PageRequest};
use crate::ids::{ProjectId, UserId};
use crate::session::ContextType;
use crate::tools::ToolScope;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The most a mode block may take, in estimated tokens of its JSON.
pub const MODE_PACK_TOKENS: u64 = 1_500;
/// A cached mode pack is served this long after it was built (the clock
/// moves what is overdue or today; the calendar has no project version).
pub const MODE_FRESH_MS: i64 = 5 * 60_000;
/// Entities of one kind read per project (pages of 100).
pub const MAX_PER_KIND: usize = 500;

/// The context types whose pack carries a computed block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Audit,
    Forecast,
    Brief,
    Dump,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Audit, Mode::Forecast, Mode::Brief, Mode::Dump];

    pub fn of(ct: ContextType) -> Option<Mode> {
        match ct {
            ContextType::ProjectAudit => Some(Mode::Audit),
            ContextType::ProjectForecast => Some(Mode::Forecast),
            ContextType::DailyBriefUpdate => Some(Mode::Brief),
            ContextType::BrainDump => Some(Mode::Dump),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Audit => "audit",
            Mode::Forecast => "forecast",
            Mode::Brief => "brief",
            Mode::Dump => "dump",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// A mode's computed block, as the pack's `mode` field carries it
/// (`{"mode": "audit", ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ModeBlock {
    Audit(audit::AuditBlock),
    Forecast(forecast::ForecastBlock),
    Brief(brief::BriefBlock),
    Dump(dump::DumpBlock),
}

/// What a block is built from.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    pub entities: &'a EntityService,
    pub calendar: Option<&'a CalendarService>,
    /// The zone the request named; else the user's, else UTC.
    pub zone: Option<Zone>,
    pub now: DateTime<Utc>,
}

impl Sources<'_> {
    /// The zone days are read in.
    pub async fn zone(&self, user: &UserId) -> Zone {
        match (self.zone, self.calendar) {
            (Some(z), _) => z,
            (None, Some(cal)) => cal.zone(user, None).await.unwrap_or(Zone::UTC),
            (None, None) => Zone::UTC,
        }
    }
}

/// The block of `mode` in `scope`, fitted to [`MODE_PACK_TOKENS`]; `None`
/// when the mode needs a project and the scope has none.
pub async fn build_block(src: &Sources<'_>, user: &UserId, mode: Mode, scope: &ToolScope) -> Option<ModeBlock> {
    let mut block = match mode {
        Mode::Audit => ModeBlock::Audit(audit::build(src, user, scope.project()?).await),
        Mode::Forecast => ModeBlock::Forecast(forecast::build(src, user, scope.project()?).await),
        Mode::Brief => ModeBlock::Brief(brief::build(src, user, scope.project()).await),
        Mode::Dump => ModeBlock::Dump(dump::build(src, user, scope.project()).await),
    };
    fit(&mut block, MODE_PACK_TOKENS);
    Some(block)
}

/// A block's lists of lines, for [`fit`].
pub trait Lines {
    fn lists(&mut self) -> Vec<&mut Vec<String>>;
    fn left_out(&mut self) -> &mut usize;
}

impl ModeBlock {
    fn lines(&mut self) -> &mut dyn Lines {
        match self {
            ModeBlock::Audit(b) => b,
            ModeBlock::Forecast(b) => b,
            ModeBlock::Brief(b) => b,
            ModeBlock::Dump(b) => b,
        }
    }
}

impl ModeBlock {
    /// What an answer to the mode's question must name ([`crate::claims::shown`]):
    /// the audit's findings, the forecast's late and next items, the brief's
    /// today. The local model answered "What is late, and what comes next?"
    /// with "I can't assist" and the brief with a question back, each with
    /// the answer in its block. `None` for a dump, or when the block is empty.
    pub fn shown(&self) -> Option<Shown> {
        let (source, asked, lists): (&str, &str, Vec<&Vec<String>>) = match self {
            ModeBlock::Audit(b) => (
                "the audit",
                "the project's gaps",
                vec![
                    &b.tasks_without_goal,
                    &b.goals_without_tasks,
                    &b.risks_without_mitigation,
                    &b.overdue,
                    &b.untouched,
                    &b.documents_outside_tree,
                ],
            ),
            ModeBlock::Forecast(b) => ("the forecast", "what is late and what comes next", vec![&b.late, &b.coming]),
            ModeBlock::Brief(b) => ("the brief", "today", vec![&b.events_today, &b.overdue, &b.due_today]),
            ModeBlock::Dump(_) => return None,
        };
        let items: Vec<ShownItem> = lists.into_iter().flatten().filter_map(|l| shown_item(l)).collect();
        (!items.is_empty()).then(|| Shown { source: source.into(), asked: asked.into(), items })
    }

    /// The titles of changes the block reports as made before this turn (the
    /// brief's "changed since"): an answer that says "task “Pay the rent”
    /// created" reports the log, it claims nothing of this turn. The claims
    /// check had withdrawn a right brief for it, and asked again, the local
    /// model left the day's event out.
    pub fn reported(&self) -> Vec<String> {
        match self {
            ModeBlock::Brief(b) => b.changed.iter().filter_map(|l| shown_item(l)).map(|i| i.title).collect(),
            _ => vec![],
        }
    }
}

/// A block line as an item an answer names: its title (the first “…”), and
/// the line without ids (`milestone “Beta” — due 2026-12-04, 3 days late`).
fn shown_item(line: &str) -> Option<ShownItem> {
    let (_, rest) = line.split_once('“')?;
    let (title, _) = rest.split_once('”')?;
    let mut plain = line.to_string();
    for tag in [": event_id ", ": id "] {
        while let Some(at) = plain.find(tag) {
            let end = plain[at + tag.len()..].find([' ', ',', ';']).map_or(plain.len(), |e| at + tag.len() + e);
            plain.replace_range(at..end, "");
        }
    }
    Some(ShownItem { title: title.to_string(), project: None, line: plain })
}

/// Cuts lines, the last of the longest list first, until the block's JSON
/// is at most `budget` estimated tokens (or nothing is left to cut).
pub fn fit(block: &mut ModeBlock, budget: u64) {
    let tokens = |b: &ModeBlock| TokenCounter::Estimate.count(&serde_json::to_string(b).unwrap_or_default());
    while tokens(block) > budget {
        let lines = block.lines();
        let Some(longest) = lines.lists().into_iter().filter(|l| !l.is_empty()).max_by_key(|l| l.len()) else {
            return;
        };
        longest.pop();
        *lines.left_out() += 1;
    }
}

/// Every entity of `kind` in the project, up to [`MAX_PER_KIND`]; what
/// cannot be read is left out (the block says less, the turn goes on).
pub async fn all_of(svc: &EntityService, user: &UserId, project: &ProjectId, kind: EntityKind) -> Vec<Entity> {
    let mut out = Vec::new();
    let mut cursor = None;
    while out.len() < MAX_PER_KIND {
        match svc.list(user, project, kind, PageRequest { limit: Some(100), cursor }).await {
            Ok(page) => {
                out.extend(page.items);
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, kind = kind.as_str(), "mode pack: entities not listed");
                break;
            }
        }
    }
    out.truncate(MAX_PER_KIND);
    out
}

/// `task “Write the post”: id …`, as the project pack names entities.
pub fn named(e: &Entity) -> String {
    format!("{} “{}”: id {}", e.kind().as_str(), e.fields.name(), e.id)
}

/// The local date of an epoch-milliseconds time, `YYYY-MM-DD`.
pub fn date_of(ms: i64, zone: Zone) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map(|t| zone.local(t).date_naive().to_string()).unwrap_or_default()
}

/// `Monday 2026-12-07, 09:30 Europe/Berlin`: when the block was computed.
pub fn as_of(now: DateTime<Utc>, zone: Zone) -> String {
    format!("{} {}", zone.local(now).format("%A %Y-%m-%d, %H:%M"), zone.name())
}

#[cfg(test)]
pub(crate) mod testkit;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_cuts_the_longest_list_first_and_counts_what_it_cut() {
        let mut block = ModeBlock::Dump(dump::DumpBlock {
            project: None,
            existing: (0..200).map(|i| format!("task “Task number {i}”: id t{i}")).collect(),
            notes: vec!["call the venue".into(), "book the band".into()],
            left_out: 0,
        });
        fit(&mut block, 400);
        let ModeBlock::Dump(b) = &block else { unreachable!() };
        let json = serde_json::to_string(&block).unwrap();
        assert!(TokenCounter::Estimate.count(&json) <= 400, "{json}");
        assert_eq!(b.notes.len(), 2, "the short list is kept");
        assert_eq!(b.existing.len() + b.left_out, 200);
        assert!(b.left_out > 0 && b.existing[0].contains("Task number 0"), "cut from the end");
    }

    /// The forecast's late and next items, the brief's today, without ids:
    /// what the answer must name. A dump shows nothing to name.
    #[test]
    fn a_blocks_answer_is_its_items_named_without_ids() {
        let forecast = ModeBlock::Forecast(forecast::ForecastBlock {
            as_of: "Monday".into(),
            late: vec!["milestone “Beta release”: id m1 — due 2026-12-04, 3 days late".into()],
            coming: vec!["milestone “Public launch”: id m2 — due 2026-12-17, in 10 days; 30 h free before it".into()],
            undated_open_tasks: 0,
            free_time: vec!["Tuesday 2026-12-08: 09:00–17:00 (8 h)".into()],
            free_total: "8 h".into(),
            left_out: 0,
        });
        let shown = forecast.shown().unwrap();
        let lines: Vec<&str> = shown.items.iter().map(|i| i.line.as_str()).collect();
        assert_eq!(
            lines,
            [
                "milestone “Beta release” — due 2026-12-04, 3 days late",
                "milestone “Public launch” — due 2026-12-17, in 10 days; 30 h free before it"
            ]
        );
        assert_eq!(shown.items[1].title, "Public launch");
        let brief = ModeBlock::Brief(brief::BriefBlock {
            as_of: "Monday".into(),
            events_today: vec!["23:30–23:45 “Standup”: event_id e1".into()],
            events_tomorrow: vec!["09:00 “Dentist”: event_id e2".into()],
            overdue: vec![],
            due_today: vec!["Home: task “Pay the rent”: id t1".into()],
            due_tomorrow: vec![],
            changed_since: String::new(),
            changed: vec![],
            calendar_note: String::new(),
            left_out: 0,
        });
        let titles: Vec<String> = brief.shown().unwrap().items.into_iter().map(|i| i.title).collect();
        assert_eq!(titles, ["Standup", "Pay the rent"], "today's, not tomorrow's");
        let dump = ModeBlock::Dump(dump::DumpBlock { project: None, existing: vec![], notes: vec![], left_out: 0 });
        assert_eq!(dump.shown(), None);
    }

    #[test]
    fn only_the_four_modes_have_blocks() {
        let with: Vec<ContextType> = [
            ContextType::Global,
            ContextType::Project,
            ContextType::ProjectAudit,
            ContextType::ProjectForecast,
            ContextType::DailyBriefUpdate,
            ContextType::BrainDump,
            ContextType::Calendar,
        ]
        .into_iter()
        .filter(|c| Mode::of(*c).is_some())
        .collect();
        assert_eq!(
            with,
            [
                ContextType::ProjectAudit,
                ContextType::ProjectForecast,
                ContextType::DailyBriefUpdate,
                ContextType::BrainDump
            ]
        );
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m.as_str()), Some(m));
        }
    }
}
