//! System prompts, built fresh for every turn and never stored
//! (BACKEND_FAST_STREAM_SPEC §4.1, §7). The scope comes from the request when
//! it names one; the session's stored scope is only the fallback.

use crate::session::ContextType;

const BASE_RULES: &str = "You are BuildOS, a fast and direct assistant for the user's projects.\n\
Rules:\n\
- Be fast, direct and concise.\n\
- When the request is ambiguous, ask a single clarifying question.\n\
- Do not invent data, and never claim to have taken an action you did not take.\n\
- Use markdown only when it helps.";

/// What a prompt depends on. Feature flags join here as later phases land.
#[derive(Debug, Clone, Default)]
pub struct PromptInputs<'a> {
    pub context_type: ContextType,
    pub entity_id: Option<&'a str>,
    pub project_name: Option<&'a str>,
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
            ContextType::Calendar => "Scope: calendar. Help the user plan their time.".to_string(),
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
        format!("{BASE_RULES}\n\n{scope}")
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
    }
}
