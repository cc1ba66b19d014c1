//! Phase 2 of a turn: what the model is asked. The scope's context pack (from
//! the prewarm cache when still current), the session's agent state, the
//! system prompt, the tools offered, and the history cut to the token budget;
//! `context_usage` tells the client what was kept.
//!
//! Nothing here fails the turn: a pack or agent state that cannot be loaded
//! leaves the prompt without it.

use super::start::Started;
use super::tools::{read_tool_output_definition, TurnScope};
use super::TurnDeps;
use crate::agent_state::{render, AgentState};
use crate::context::pack::{build_pack, ContextPack};
use crate::context::{build_context, CalibrationLine, ContextBudget, ContextInput, SummaryRef, TokenCounter};
use crate::entities::EntityService;
use crate::ids::{SessionId, UserId};
use crate::message::ChatMessage;
use crate::prompt::{PromptBuilder, PromptInputs};
use crate::sse::{CacheStatus, EventSink, StreamEvent};
use crate::store::cache::ContextCache;
use crate::tools::ToolScope;

/// The model's first request, and what counting it needs later.
pub struct Prepared {
    pub scope: TurnScope,
    pub messages: Vec<ChatMessage>,
    /// Tool definitions offered in every round but the last.
    pub offered: Vec<serde_json::Value>,
    pub counter: TokenCounter,
    /// Our count of the tool definitions, and of the first request's messages.
    pub tools_tokens: u64,
    pub counted: u64,
    /// Our counts to the model's tokens, as learnt so far.
    pub line: CalibrationLine,
    /// The agent state and its stored version; `None`: not kept this turn.
    pub agent_state: Option<(AgentState, u64)>,
}

pub async fn prepare(deps: &TurnDeps, user: &UserId, started: &Started, sink: &mut EventSink) -> Prepared {
    let view = &started.view;
    let scope =
        TurnScope { context_type: view.context_type, entity_id: view.entity_id.clone(), focus: view.focus.clone() };
    let pack_scope = ToolScope::from_focus(view.context_type, view.entity_id.as_deref(), view.focus.as_ref());
    let pack = async {
        match &deps.entities {
            Some(service) => Some(load_pack(service, deps.cache.as_deref(), user, &pack_scope).await),
            None => None,
        }
    };
    let (pack, agent_state) = tokio::join!(pack, load_agent_state(deps, user, &view.id));
    let (pack, cache_status) = pack.map_or((None, None), |(p, c)| (Some(p), c));
    let state_block = agent_state.as_ref().map(|(s, _)| render(s)).filter(|r| !r.is_empty());
    let prompt = PromptBuilder::build(&PromptInputs {
        context_type: view.context_type,
        entity_id: view.entity_id.as_deref(),
        project_name: None,
        tools: deps.tools.is_some() && deps.config.tool_max_rounds > 0,
        pack: pack.as_ref(),
        agent_state: state_block.as_deref(),
    });
    let offered = offered_tools(deps, &scope);
    let counter = deps.counter.get();
    let tools_tokens = if offered.is_empty() {
        0
    } else {
        counter.count(&serde_json::to_string(&offered).expect("JSON values serialize"))
    };
    // CONTEXT_MAX_TOKENS is in the model's tokens, tool definitions included;
    // the builder counts messages in ours.
    let line = deps.counter.calibration().line(tools_tokens);
    let budget =
        ContextBudget { max_tokens: line.counted_budget(deps.context.budget.max_tokens), ..deps.context.budget };
    let built = build_context(
        &ContextInput {
            system_prompt: &prompt,
            summary: started.summary.as_ref().map(|s| SummaryRef { text: &s.text, through_seq: s.through_seq }),
            history: &started.history,
            current: &started.user_message,
        },
        &budget,
        &counter,
    );
    let counted = built.tokens_used;
    let mut usage = built.usage();
    usage.tokens_used = line.model_tokens(counted);
    usage.token_budget = deps.context.budget.max_tokens;
    usage.cache = cache_status;
    let _ = sink.send(StreamEvent::ContextUsage(usage)).await;
    Prepared { scope, messages: built.messages, offered, counter, tools_tokens, counted, line, agent_state }
}

/// The tools offered in every round but the last: the same definitions each
/// time, and they take part of the model's context like the messages do.
fn offered_tools(deps: &TurnDeps, scope: &TurnScope) -> Vec<serde_json::Value> {
    match &deps.tools {
        Some(t) if deps.config.tool_max_rounds > 0 => {
            let mut defs = t.offered(scope);
            defs.push(read_tool_output_definition());
            defs
        }
        _ => vec![],
    }
}

async fn load_agent_state(deps: &TurnDeps, user: &UserId, sid: &SessionId) -> Option<(AgentState, u64)> {
    let store = deps.agent_state.as_ref()?;
    match store.load(user, sid).await {
        Ok(Some(found)) => Some(found),
        Ok(None) => Some((AgentState::new(sid.to_string()), 0)),
        Err(e) => {
            tracing::warn!(error = %e, "agent state not loaded");
            None
        }
    }
}

/// The turn's context pack: from the prewarm cache when it was built from the
/// project's current version (the cache read and the version read go out
/// together), else built now and written back. Global packs carry no version,
/// so they are always built (one query).
async fn load_pack(
    service: &EntityService,
    cache: Option<&dyn ContextCache>,
    user: &UserId,
    scope: &ToolScope,
) -> (ContextPack, Option<CacheStatus>) {
    let (Some(cache), Some(project)) = (cache, scope.project()) else {
        return (build_pack(service, user, scope).await, None);
    };
    let (cached, current) = tokio::join!(cache.cached_pack(user, scope), service.get_project(user, project));
    let current = match current {
        Ok(p) => p.version,
        // Not the user's (any more), or gone: never serve a cache for it.
        Err(_) => return (build_pack(service, user, scope).await, None),
    };
    if let Ok(Some((pack, version))) = cached {
        if version == current {
            let _ = cache.touch(user, scope).await;
            return (pack, Some(CacheStatus::Hit));
        }
    }
    let started = std::time::Instant::now();
    let pack = build_pack(service, user, scope).await;
    let build_ms = started.elapsed().as_millis() as u64;
    if pack.version.is_some() {
        if let Err(e) = cache.put_pack(user, scope, &pack, build_ms).await {
            tracing::warn!(error = %e, "context pack not cached");
        }
    }
    (pack, Some(CacheStatus::Miss))
}
