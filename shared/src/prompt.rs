//! System prompts, built fresh for every turn and never stored
//! (BACKEND_FAST_STREAM_SPEC §4.1, §7; AGENTIC_CHAT_V2_SPEC §4.3). Assembled
//! from: base rules, scope rules, the conversation modes (clarify / inform /
//! act), document-first guidance and tool rules when tools are offered, and
//! the context pack as JSON. The scope comes from the request when it names
//! one; the session's stored scope is only the fallback.
//!
//! Two parts, in this order (issue 31): [`SystemPrompt::rules`], the same
//! for every project of a scope, and [`SystemPrompt::context`], what changes
//! per project and per turn (the pack, the calendar block, the agent state),
//! sent as a second system message. A chat template renders the tool
//! definitions right after the first system message, so a model server's
//! prompt cache covers rules and tools across turns and projects, and a new
//! project's first turn computes only its pack and the conversation.

use crate::context::pack::ContextPack;
use crate::session::ContextType;

const BASE_RULES: &str = "You are BuildOS, a fast and direct assistant for the user's projects.\n\
Rules:\n\
- Be fast, direct and concise.\n\
- When the request is ambiguous, ask a single clarifying question.\n\
- Do not invent data, and never claim to have taken an action you did not take.\n\
- Use markdown only when it helps.";

const MODES: &str = "Conversation modes — decide each turn:\n\
- clarify: the user is thinking aloud or exploring; ask, reflect, do not change anything;\n\
- inform: the user wants knowledge or an explanation; answer, do not create entities;\n\
- act: the user asks for a change, explicitly or clearly implied; use the tools.\n\
When unsure, clarify.";

const TOOL_RULES: &str = "Tools:\n\
- Use tools to read and change the user's projects; never claim a change a tool did not confirm.\n\
- Find before you fetch: use the doc_structure, list or search to find ids, then read only what you need.\n\
- Create documents under the right parent in the tree; link entities explicitly (a create never links).\n\
- Calls in one message run in parallel: only batch calls that do not depend on each other.\n\
- A tool error is information: read it, fix the call or tell the user.";

const DOC_FIRST: &str = "Documents first: the doc_structure below is the project's map of durable knowledge \
(research, decisions, specs, notes): one line per document in tree order, its path of titles (parent / child), \
description and length, then its id; never content: read a document to know what it says. For structure, plans or overviews, update documents first; for execution, tasks and plans come \
first. The project's context document is the \"where we left off\" anchor: keep it short, in the user's words.";

// The four modes (issue 44): what the server computed is in the context's
// `mode` block; each scope line says what to do with it.
const AUDIT: &str = "Scope: auditing a project. The context's `mode` block lists the gaps the server found \
(tasks with no goal, goals with no task, unmitigated risks, overdue and untouched work, documents outside the tree), \
each with its id. Report them grouped, most serious first, and propose a fix for each; change nothing until the \
user says yes, then fix what they agreed to with the tools.";

const FORECAST: &str = "Scope: forecasting a project. The context's `mode` block lists what is late, what is due \
when (with the free working time the calendar leaves before each date) and the free time of the coming days. \
Say what will slip and why, from those numbers; suggest what to move or drop.";

const BRIEF: &str = "Scope: the user's daily brief. The context's `mode` block holds today and tomorrow: calendar \
events, overdue and due work across projects, and what changed in the last day. Write one short brief from it: \
today first, then tomorrow, then what changed. Be brief and actionable.";

const DUMP: &str = "Scope: brain dump. Turn the user's loose thoughts (and the `notes` of the context's `mode` \
block) into proposed entities: call propose_entities once with the whole batch (tasks, goals, risks, documents, \
with links between them by ref or to the existing entities listed), and let the user review it. Nothing is \
written until they approve the batch. Without a project in focus, ask which project it belongs to.";

/// What a prompt depends on.
#[derive(Debug, Clone, Default)]
pub struct PromptInputs<'a> {
    pub context_type: ContextType,
    pub entity_id: Option<&'a str>,
    pub project_name: Option<&'a str>,
    /// Tools are offered this turn.
    pub tools: bool,
    pub pack: Option<&'a ContextPack>,
    /// The agent state, rendered as an internal block.
    pub agent_state: Option<&'a str>,
    /// The calendar block (today's date, the zone, the coming events), in
    /// the calendar scope.
    pub agenda: Option<&'a str>,
}

pub struct PromptBuilder;

/// A turn's system prompt: the stable rules, then the per-project context
/// (empty when there is none).
#[derive(Debug, Clone, PartialEq)]
pub struct SystemPrompt {
    pub rules: String,
    pub context: String,
}

impl SystemPrompt {
    /// Both parts as one text (rules first), as a single message would carry them.
    pub fn joined(&self) -> String {
        if self.context.is_empty() {
            self.rules.clone()
        } else {
            format!("{}\n\n{}", self.rules, self.context)
        }
    }
}

impl PromptBuilder {
    /// Both parts as one text; [`PromptBuilder::parts`] keeps them apart.
    pub fn build(inputs: &PromptInputs<'_>) -> String {
        Self::parts(inputs).joined()
    }

    pub fn parts(inputs: &PromptInputs<'_>) -> SystemPrompt {
        let scope = match inputs.context_type {
            ContextType::Global => {
                "Scope: global. You are the user's general BuildOS assistant across all of their projects.".to_string()
            }
            ContextType::Project | ContextType::Ontology => {
                let name = inputs.project_name.map(|n| format!(" \"{n}\"")).unwrap_or_default();
                format!(
                    "Scope: project{name}. Answer about this project. If you need a specific document or task \
                     that you have not been given, say which one you need."
                )
            }
            ContextType::Entity => {
                let id = inputs.entity_id.map(|e| format!(" (id {e})")).unwrap_or_default();
                format!(
                    "Scope: a single entity{id}. Keep the answer about it. If you need its content or related \
                     documents and do not have them, say which ones you need."
                )
            }
            ContextType::Calendar => "Scope: calendar. Help the user plan their time. Questions about the coming \
                                      days are answered from the Calendar block below; to book, move or cancel, \
                                      call the calendar tools themselves (never describe a call in your answer), \
                                      with dates taken from its list of days."
                .to_string(),
            ContextType::ProjectCreate => "Scope: creating a new project. Help the user shape it: name, goal, first \
                                           documents and tasks. Ask one question at a time."
                .to_string(),
            ContextType::ProjectAudit => AUDIT.to_string(),
            ContextType::ProjectForecast => FORECAST.to_string(),
            ContextType::DailyBriefUpdate => BRIEF.to_string(),
            ContextType::BrainDump => DUMP.to_string(),
        };
        let mut rules = format!("{BASE_RULES}\n\n{scope}\n\n{MODES}");
        if inputs.tools {
            rules.push_str("\n\n");
            rules.push_str(TOOL_RULES);
        }
        let pack = inputs.pack.filter(|p| !p.is_empty());
        if pack.is_some_and(|p| p.doc_structure.is_some()) {
            rules.push_str("\n\n");
            rules.push_str(DOC_FIRST);
        }
        let mut context: Vec<String> = Vec::new();
        if let Some(pack) = pack {
            context.push(format!("Context (JSON):\n{}", serde_json::to_string(pack).unwrap_or_default()));
        }
        context.extend(inputs.agenda.map(str::to_string));
        context.extend(inputs.agent_state.map(str::to_string));
        SystemPrompt { rules, context: context.join("\n\n") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_says_what_to_do_with_its_block() {
        for (ct, words) in [
            (ContextType::ProjectAudit, "gaps the server found"),
            (ContextType::ProjectForecast, "free working time"),
            (ContextType::DailyBriefUpdate, "today and tomorrow"),
            (ContextType::BrainDump, "propose_entities"),
        ] {
            let p = PromptBuilder::build(&PromptInputs { context_type: ct, ..Default::default() });
            assert!(p.contains("`mode` block") && p.contains(words), "{ct:?}: {p}");
        }
    }

    #[test]
    fn prompt_changes_with_scope() {
        let g = PromptBuilder::build(&PromptInputs { context_type: ContextType::Global, ..Default::default() });
        let e = PromptBuilder::build(&PromptInputs {
            context_type: ContextType::Entity,
            entity_id: Some("task-1"),
            ..Default::default()
        });
        assert!(g.contains("Scope: global"));
        assert!(e.contains("Scope: a single entity (id task-1)"));
        assert!(g.starts_with(BASE_RULES) && e.starts_with(BASE_RULES));
        assert!(g.contains("clarify") && !g.contains("Tools:"), "modes always, tool rules only with tools");
    }

    #[test]
    fn packs_and_tool_rules_join_the_prompt() {
        let pack = ContextPack {
            scope: "project",
            project: Some(serde_json::json!({"id": "p1", "name": "Launch"})),
            doc_structure: Some(
                serde_json::json!({"version": 3, "root": [{"id": "d1", "order": 0, "title": "Spec", "children": []}]}),
            ),
            ..Default::default()
        };
        let p = PromptBuilder::build(&PromptInputs {
            context_type: ContextType::Project,
            tools: true,
            pack: Some(&pack),
            ..Default::default()
        });
        assert!(p.contains("Tools:"));
        assert!(p.contains("Documents first"));
        assert!(p.contains(r#""title":"Spec""#));
        assert!(p.contains(r#""name":"Launch""#));
    }

    #[test]
    fn the_rules_are_the_same_for_every_project_and_the_pack_comes_after() {
        let pack = |id: &str, title: &str| ContextPack {
            scope: "project",
            project: Some(serde_json::json!({"id": id, "name": id})),
            doc_structure: Some(
                serde_json::json!({"version": 1, "root": [{"id": "d1", "order": 0, "title": title, "children": []}]}),
            ),
            ..Default::default()
        };
        let (a, b) = (pack("p1", "Spec"), pack("p2", "Notes"));
        let inputs = |p| PromptInputs {
            context_type: ContextType::Project,
            tools: true,
            pack: Some(p),
            agenda: Some("Calendar: today"),
            ..Default::default()
        };
        let (pa, pb) = (PromptBuilder::parts(&inputs(&a)), PromptBuilder::parts(&inputs(&b)));
        assert_eq!(pa.rules, pb.rules, "nothing per project in the rules");
        assert!(pa.rules.contains("Tools:") && pa.rules.contains("Documents first"));
        assert!(!pa.rules.contains("p1") && !pa.rules.contains("Calendar: today"));
        assert!(pa.context.starts_with("Context (JSON):\n") && pa.context.contains(r#""title":"Spec""#));
        assert!(pa.context.ends_with("Calendar: today"));
        assert_eq!(PromptBuilder::build(&inputs(&a)), format!("{}\n\n{}", pa.rules, pa.context));
        // No pack, no agenda, no state: no context part at all.
        let g = PromptBuilder::parts(&PromptInputs { context_type: ContextType::Global, ..Default::default() });
        assert_eq!(g.context, "");
    }
}
