//! System prompts, built fresh for every turn and never stored
//! (BACKEND_FAST_STREAM_SPEC §4.1, §7; AGENTIC_CHAT_V2_SPEC §4.3). Assembled
//! from: base rules, scope rules, the conversation modes (clarify / inform /
//! act), document-first guidance and tool rules when tools are offered, and
//! the context pack as JSON. The scope comes from the request when it names
//! one; the session's stored scope is only the fallback.

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
(research, decisions, specs, notes); nodes carry id, order, title, description and content_length, never \
content. For structure, plans or overviews, update documents first; for execution, tasks and plans come \
first. The project's context document is the \"where we left off\" anchor: keep it short, in the user's words.";

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
    /// the calendar and daily-brief scopes.
    pub agenda: Option<&'a str>,
}

pub struct PromptBuilder;

impl PromptBuilder {
    pub fn build(inputs: &PromptInputs<'_>) -> String {
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
            ContextType::ProjectAudit => "Scope: auditing a project. Look for gaps, risks and stale work.".to_string(),
            ContextType::ProjectForecast => {
                "Scope: forecasting a project. Reason about timelines, dependencies and risks.".to_string()
            }
            ContextType::DailyBriefUpdate => "Scope: the user's daily brief. Be brief and actionable.".to_string(),
            ContextType::BrainDump => "Scope: brain dump. Help the user capture and organise loose thoughts; \
                                       reflect them back structured."
                .to_string(),
        };
        let mut out = format!("{BASE_RULES}\n\n{scope}\n\n{MODES}");
        if inputs.tools {
            out.push_str("\n\n");
            out.push_str(TOOL_RULES);
        }
        if let Some(pack) = inputs.pack.filter(|p| !p.is_empty()) {
            if pack.doc_structure.is_some() {
                out.push_str("\n\n");
                out.push_str(DOC_FIRST);
            }
            out.push_str("\n\nContext (JSON):\n");
            out.push_str(&serde_json::to_string(pack).unwrap_or_default());
        }
        if let Some(agenda) = inputs.agenda {
            out.push_str("\n\n");
            out.push_str(agenda);
        }
        if let Some(state) = inputs.agent_state {
            out.push_str("\n\n");
            out.push_str(state);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
