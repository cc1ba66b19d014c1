//! `get_buildos_overview`: the product explains itself. It answers "what can
//! you do?" and "how do I …?" from a help text generated from the tables the
//! code runs on, so it cannot drift from them:
//! - every tool of [`ToolName::ALL`], by its name and the description the
//!   model itself reads, and whether it needs a project or waits for the
//!   user's yes ([`super::ASKABLE`], the deletes);
//! - a line per scope (global, project, entity) and per conversation type,
//!   listing what [`ToolScope::offered_in`] offers there;
//! - the approvals (`approval::policy`), the budgets
//!   ([`BudgetKind`]) and the calendar ([`CALENDAR_TOOLS`]).
//!
//! Offered in the global scope. Without a topic (or `all`) it answers in a
//! page a small model reads whole: what the assistant does, in words, when
//! it asks first, and the budgets; `tools`, `scopes` and `calendar` give the
//! long lists. All sections at once were 13 000 characters, approvals near
//! the end: the local model answered "how do I get you to ask me before
//! deleting?" with a tool name it saw at the top.

use super::call::Call;
use super::outcome::{Done, Refusal};
use super::scope::ToolScope;
use super::{Tool, ToolName, CALENDAR_TOOLS};
use crate::budget::BudgetKind;
use crate::ids::{EntityId, ProjectId};
use crate::session::ContextType;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::fmt::Write;
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const GetBuildosOverview: ToolName = ToolName::of(&GetBuildosOverview);
}

/// A section of the overview.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Topic {
    All,
    Tools,
    Scopes,
    Approvals,
    Budgets,
    Calendar,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OverviewArgs {
    /// One section only (default: all).
    #[serde(default)]
    pub topic: Option<Topic>,
}

pub struct GetBuildosOverview;

#[async_trait::async_trait]
impl Tool for GetBuildosOverview {
    type Args = OverviewArgs;
    const NAME: &'static str = "get_buildos_overview";
    const DESCRIPTION: &'static str = "How this product works: what you can do here, when it asks the user \
        first, budgets (topic all, the default); every tool (topic tools), where each is offered (scopes), the \
        calendar. Call it when the user asks what you can do or how to do something, instead of guessing.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, _: &Call<'_>, a: OverviewArgs) -> Result<Done, Refusal> {
        let topic = a.topic.unwrap_or(Topic::All);
        Ok(Done::quiet(Ok(json!({ "topic": topic, "overview": overview(topic) }))))
    }
}

/// Every conversation type, in the order the overview lists them.
pub const CONTEXT_TYPES: &[ContextType] = &[
    ContextType::Global,
    ContextType::Project,
    ContextType::Entity,
    ContextType::Calendar,
    ContextType::ProjectCreate,
    ContextType::ProjectAudit,
    ContextType::ProjectForecast,
    ContextType::DailyBriefUpdate,
    ContextType::Ontology,
    ContextType::BrainDump,
];

/// What a conversation type is for (exhaustive: a new type must say it).
fn purpose(c: ContextType) -> &'static str {
    match c {
        ContextType::Global => "the whole workspace, no project in focus",
        ContextType::Project => "one project",
        ContextType::Entity => "one task, document, goal or other entity of a project",
        ContextType::Calendar => "the user's calendar",
        ContextType::ProjectCreate => "starting a new project from the user's words",
        ContextType::ProjectAudit => "reviewing a project",
        ContextType::ProjectForecast => "forecasting a project",
        ContextType::DailyBriefUpdate => "the day's brief: agenda and free time",
        ContextType::Ontology => "a project's structure",
        ContextType::BrainDump => "capturing loose thoughts",
    }
}

/// The scope a conversation type usually runs in: a project for the
/// in-project types, an entity for `entity`, else the workspace.
fn typical_scope(c: ContextType) -> ToolScope {
    let project = ProjectId::parse("00000000-0000-4000-8000-000000000000").expect("a valid id");
    match c {
        ContextType::Entity => {
            let entity = EntityId::parse("00000000-0000-4000-8000-000000000001").expect("a valid id");
            ToolScope::Entity { project, kind: None, entity }
        }
        c if c.in_project() => ToolScope::Project { project },
        _ => ToolScope::Global,
    }
}

fn names(tools: &[ToolName]) -> String {
    tools.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
}

/// A section: its topic, its text, and whether `all` holds it.
type Section = (Topic, fn() -> String, bool);

/// The overview's text, or one section of it.
pub fn overview(topic: Topic) -> String {
    // Which sections `all` holds: the short ones.
    let sections: [Section; 6] = [
        (Topic::All, summary, true),
        (Topic::Approvals, approvals, true),
        (Topic::Budgets, budgets, true),
        (Topic::Scopes, scopes, false),
        (Topic::Tools, tools, false),
        (Topic::Calendar, calendar, false),
    ];
    let mut out = String::from(
        "An assistant over the user's projects (tasks, documents, goals, plans, milestones, risks, \
         requirements and how they link) and calendar. It reads and changes them only through the tools \
         below, as the user, and shows each step.\n",
    );
    for (t, section, in_all) in sections {
        if topic == t || (topic == Topic::All && in_all) {
            out.push('\n');
            out.push_str(&section());
        }
    }
    out
}

/// When the assistant asks first, and what it does, in the user's words:
/// asking first on top (the local model answers from the top).
fn summary() -> String {
    format!(
        "## Asking first\n\
         Deleting always asks the user first ({}): a card shows the change in words, with Approve and Deny. \
         Any other change can be made to ask first too, in Settings → Approvals (creating, renaming, linking, \
         moving, calendar changes).\n\
         ## What you can do here\n\
         - Projects: start one from a description, rename it, search across all of them.\n\
         - In a project: tasks, documents (a tree), goals, plans, milestones, risks and requirements — create, \
         rename, change state, delete, link (a task supports a goal), move documents, reorganize in one step, \
         read a document and answer from it; plans of several steps that run on their own.\n\
         - Calendar: what is on today, this week or any day; book events and recurring series (every weekday, \
         every other week, with an end or a number of times); move or cancel one occurrence; find free time.\n\
         - The web: read a page whose address the user gives, and search it where a search provider is set up.\n\
         - Modes: a daily brief, a project audit, a forecast, a brain dump turned into tasks for review.\n\
         More: topic tools (every tool), scopes (where each is offered), calendar.\n",
        names(&[ToolName::DeleteEntity, ToolName::DeleteCalendarEvent]),
    )
}

fn scopes() -> String {
    let mut s = String::from("## Scopes: where a conversation stands, and the tools offered there\n");
    for c in [ContextType::Global, ContextType::Project, ContextType::Entity] {
        let scope = typical_scope(c);
        let _ = writeln!(s, "- scope {}: {}", scope.kind(), names(&scope.offered()));
    }
    s.push_str("Conversation types:\n");
    for &c in CONTEXT_TYPES {
        let offered = typical_scope(c).offered_in(c);
        let _ = writeln!(s, "- {} ({}): {}", c.as_str(), purpose(c), names(&offered));
    }
    s.push_str(
        "A tool that is not offered may still run where its needs are met: the project tools need a project \
         in focus and always act on it.\n",
    );
    s
}

fn tools() -> String {
    let mut s = String::from("## Tools\n");
    for &t in ToolName::ALL {
        let mut notes = vec![];
        if t.needs_project() {
            notes.push("needs a project");
        }
        if t == ToolName::DeleteEntity || t == ToolName::DeleteCalendarEvent {
            notes.push("always asks the user first");
        } else if super::ASKABLE.contains(&t) {
            notes.push("the user may set it to ask first");
        }
        let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
        let _ = writeln!(s, "- {}{notes}: {}", t.as_str(), t.description());
    }
    s
}

fn approvals() -> String {
    format!(
        "## Approvals\nSome calls wait for the user's yes: the card shows the change in words and the user \
         approves or denies it; a denial's reason reaches you. Always: {}. Also: several update_entity calls \
         in one round; a calendar change to more than one occurrence of a series, or to an event someone \
         else organizes. The user may set any of these to ask first (Settings, GET/PUT /me/approvals): {}. \
         An approval expires; an expired or denied call does not run.\n",
        names(&[ToolName::DeleteEntity, ToolName::DeleteCalendarEvent]),
        names(super::ASKABLE),
    )
}

/// What each budget limits (exhaustive: a new budget must say it).
fn budget_meaning(b: BudgetKind) -> &'static str {
    match b {
        BudgetKind::TokensPerDay => "the model's tokens per user per day",
        BudgetKind::TurnsPerMinute => "the turns a user starts per minute",
        BudgetKind::ConcurrentTurns => "the turns one user runs at once",
        BudgetKind::WebCallsPerDay => "web_search and web_visit calls per user per day",
    }
}

fn budgets() -> String {
    let mut s = String::from("## Budgets\n");
    for b in
        [BudgetKind::TokensPerDay, BudgetKind::TurnsPerMinute, BudgetKind::ConcurrentTurns, BudgetKind::WebCallsPerDay]
    {
        let _ = writeln!(s, "- {}: {}", b.as_str(), budget_meaning(b));
    }
    s.push_str(
        "A spent budget ends the turn (or refuses the web call) with quota_exceeded and when to try again; \
         GET /me/budget shows what is left.\n",
    );
    s
}

fn calendar() -> String {
    let mut s = String::from(
        "## Calendar\nIn a calendar conversation (and the daily brief) the calendar tools are offered. Times \
         are read and shown in the user's zone: a date (2026-12-10) is all day, a local time \
         (2026-12-10T17:00) is in that zone. Events may link to a project.\n",
    );
    for &t in CALENDAR_TOOLS {
        let _ = writeln!(s, "- {}: {}", t.as_str(), t.description());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool added to the registry is in the overview, in the words the model reads about it.
    #[test]
    fn every_registered_tool_has_its_line() {
        let text = overview(Topic::Tools);
        for &t in ToolName::ALL {
            assert!(!t.description().trim().is_empty(), "{t:?} has no description");
            let line = text.lines().find(|l| l.starts_with(&format!("- {}", t.as_str())));
            let line = line.unwrap_or_else(|| panic!("{t:?} is not in the overview"));
            assert!(line.ends_with(t.description()), "{line}");
        }
    }

    #[test]
    fn every_scope_and_conversation_type_has_a_line_with_what_it_offers() {
        let text = overview(Topic::Scopes);
        for kind in ["global", "project", "entity"] {
            assert!(text.lines().any(|l| l.starts_with(&format!("- scope {kind}: "))), "scope {kind}: {text}");
        }
        for &c in CONTEXT_TYPES {
            let line = text.lines().find(|l| l.starts_with(&format!("- {} (", c.as_str())));
            let line = line.unwrap_or_else(|| panic!("{c:?} has no line"));
            for t in typical_scope(c).offered_in(c) {
                assert!(line.contains(t.as_str()), "{line} lacks {t:?}");
            }
        }
    }

    #[test]
    fn the_sections_say_what_the_code_does() {
        let text = overview(Topic::All);
        for t in crate::tools::ASKABLE {
            assert!(overview(Topic::Approvals).contains(t.as_str()), "{t:?}");
        }
        assert!(text.contains("tokens_per_day") && text.contains("web_calls_per_day"));
        assert!(overview(Topic::Calendar).contains("list_calendar_events"));
        assert!(!overview(Topic::Budgets).contains("## Tools"), "a topic is one section");
        // `all` is what a small model reads whole: asking first near the top,
        // the long lists by topic only.
        assert!(text.len() < 4_000, "{} characters", text.len());
        assert!(!text.contains("## Tools") && !text.contains("## Scopes"));
        let asks = text.find("## Asking first").expect("asking first");
        assert!(text[asks..].contains("delete_entity") && text[asks..].contains("Settings"));
        assert!(ToolScope::Global.offered().contains(&ToolName::GetBuildosOverview), "offered in the global scope");
    }
}
