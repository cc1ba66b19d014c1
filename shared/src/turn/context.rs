//! Phase 2 of a turn: what the model is asked. The system prompt (with the
//! scope's context pack and the agent state, both read by [`super::start`] in
//! its round trip), the tools offered, and the history cut to the token
//! budget; `context_usage` tells the client what was kept. Nothing here
//! waits on I/O.
//!
//! Also here: which pack a turn reads ([`pack_scope`]) and how
//! ([`load_pack`]: from the prewarm cache when still current). Nothing here
//! fails the turn: a pack that cannot be loaded leaves the prompt without it.

use super::lease::Exit;
use super::start::Started;
use super::TurnDeps;
use crate::agent_state::render;
use crate::calendar::Zone;
use crate::context::cache::ContextCache;
use crate::context::modes::{ModeBlock, Sources, MODE_FRESH_MS};
use crate::context::pack::{build_keyed, ContextPack, PackKey};
use crate::context::{
    build_context, message_tokens, BuiltContext, CalibrationLine, ContextBudget, ContextInput, SummaryRef,
    TokenCalibration, TokenCounter, REPLY_PRIMING,
};
use crate::ids::UserId;
use crate::message::{ChatMessage, Usage};
use crate::model_loop::call_signals::tool_names;
use crate::model_loop::outputs::read_tool_output_definition;
use crate::model_loop::telemetry::Telemetry;
use crate::model_loop::{Counting, TurnScope};
use crate::prompt::{PromptBuilder, PromptInputs};
use crate::session::{ContextType, SessionView};
use crate::sse::{CacheStatus, DebugContext, DebugTokens, EventSink, StreamEvent, Telemetry as Measure};
use crate::tools::ToolScope;
use std::sync::Arc;

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
}

/// How often a cache hit renews the cache's use mark (the prewarm refresh
/// keeps caches used in the last `PREWARM_ACTIVE_WINDOW_MINUTES` warm).
const TOUCH_EVERY_MS: i64 = 60_000;

/// A context pack read for a turn, and the scope (and mode) it was read for.
pub struct LoadedPack {
    pub key: PackKey,
    pub pack: ContextPack,
    pub cache: Option<CacheStatus>,
}

/// The pack the turn's prompt gets: its scope's, with the mode's block in
/// the four modes; `None`: no pack to read (no ontology, or global scope
/// without a mode). The global pack is only the list of projects, which
/// `list_projects` gives the model when it needs them: no turn reads it
/// before the model (it was one request more beside an existing session's
/// first round trip, 0.5 read units even when empty: docs/cost.md).
pub fn pack_scope(deps: &TurnDeps, view: &SessionView) -> Option<PackKey> {
    deps.entities.as_ref()?;
    let scope = ToolScope::from_focus(view.context_type, view.entity_id.as_deref(), view.focus.as_ref());
    let key = PackKey::new(scope, view.context_type);
    (key.scope != ToolScope::Global || key.mode.is_some()).then_some(key)
}

/// The calendar block a turn's prompt gets: the next 7 days in the
/// `calendar` scope; `None` elsewhere or without a calendar (the daily
/// brief's events are in its mode block). Read in the zone the request
/// names, else the user's chosen one, else UTC; the block says which.
pub async fn load_agenda(
    deps: &TurnDeps,
    user: &UserId,
    ct: ContextType,
    zone: Option<Zone>,
    message: &str,
) -> Option<crate::calendar::agenda::Agenda> {
    let cal = deps.calendar.as_ref()?;
    let days = match ct {
        ContextType::Calendar => 7,
        _ => return None,
    };
    crate::calendar::agenda::agenda(cal, user, zone, days, chrono::Utc::now(), message).await
}

pub async fn prepare(deps: &TurnDeps, started: &Started, sink: &mut EventSink) -> Prepared {
    let view = &started.view;
    let scope = TurnScope {
        context_type: view.context_type,
        entity_id: view.entity_id.clone(),
        focus: view.focus.clone(),
        timezone: started.timezone,
    };
    let brief_alone = the_brief_answers(started);
    let noted = voice_notes(started);
    let pack = started.pack.as_ref().map(|p| noted.as_ref().unwrap_or(&p.pack));
    let state_block = started.agent_state.as_ref().map(|(s, _)| render(s)).filter(|r| !r.is_empty());
    let prompt = PromptBuilder::parts(&PromptInputs {
        context_type: view.context_type,
        entity_id: view.entity_id.as_deref(),
        project_name: None,
        tools: deps.tools.is_some() && deps.config.tool_max_rounds > 0 && !brief_alone,
        pack,
        agent_state: state_block.as_deref(),
        agenda: started.agenda.as_ref().map(|a| a.block.as_str()),
    });
    let offered = if brief_alone { vec![] } else { offered_tools(deps, &scope) };
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
            system_prompt: &prompt.rules,
            system_context: Some(&prompt.context),
            summary: started.summary.as_ref().map(|s| SummaryRef { text: &s.text, through_seq: s.through_seq }),
            history: &started.history,
            current: started.answers.as_ref().unwrap_or(&started.user_message),
        },
        &budget,
        &counter,
    );
    let counted = built.tokens_used;
    let mut usage = built.usage();
    usage.tokens_used = line.model_tokens(counted);
    usage.token_budget = deps.context.budget.max_tokens;
    usage.cache = started.pack.as_ref().and_then(|p| p.cache);
    let model_total = usage.tokens_used;
    let _ = sink.send(StreamEvent::ContextUsage(usage)).await;
    let telemetry = Telemetry::current();
    if telemetry.is_on() {
        let made_of = Parts {
            pack,
            agent_state: state_block.as_deref(),
            tools_tokens,
            model_total,
            budget: deps.context.budget.max_tokens,
            context: !prompt.context.is_empty(),
        };
        let _ = sink.send(StreamEvent::DebugContext(debug_context(&built, &counter, &made_of))).await;
        telemetry.record(Measure::ToolSelection {
            context_type: view.context_type,
            scope: ToolScope::from_focus(view.context_type, view.entity_id.as_deref(), view.focus.as_ref())
                .kind()
                .to_string(),
            offered: tool_names(&offered),
        });
        for measured in telemetry.drain() {
            let _ = sink.send(measured).await;
        }
    }
    Prepared { scope, messages: built.messages, offered, counter, tools_tokens, counted, line }
}

/// A brain dump's pack with the notes of the turn's voice-note group
/// ([`crate::context::modes::dump::with_notes`]); `None` elsewhere.
fn voice_notes(started: &Started) -> Option<ContextPack> {
    let loaded = started.pack.as_ref()?;
    let Some(ModeBlock::Dump(block)) = &loaded.pack.mode else { return None };
    let current = started.answers.as_ref().unwrap_or(&started.user_message);
    current.voice_note_group_id.as_ref()?;
    let block = crate::context::modes::dump::with_notes(block.clone(), &started.history, current);
    Some(ContextPack { mode: Some(ModeBlock::Dump(block)), ..loaded.pack.clone() })
}

impl Prepared {
    /// How the loop counts what it asks: with this turn's counter, and
    /// calibrating against the model's count of the first request.
    pub fn counting<'a>(&self, calibration: &'a TokenCalibration) -> RequestCount<'a> {
        RequestCount {
            counter: self.counter,
            line: self.line,
            calibration,
            tools_tokens: self.tools_tokens,
            counted: self.counted,
        }
    }
}

/// The loop's [`Counting`] for a turn (and its plan steps' loops).
pub struct RequestCount<'a> {
    counter: TokenCounter,
    line: CalibrationLine,
    calibration: &'a TokenCalibration,
    /// Our count of the tool definitions, and of the first request's messages.
    tools_tokens: u64,
    counted: u64,
}

impl Counting for RequestCount<'_> {
    fn estimate(&self, messages: &[ChatMessage], reply: &str, tools: bool) -> Usage {
        let counted = messages.iter().map(|m| message_tokens(m, &self.counter)).sum::<u64>() + REPLY_PRIMING;
        let prompt = if tools { self.line.model_tokens(counted) } else { counted };
        let completion = self.counter.count(reply);
        Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
    }

    fn calibrate(&self, prompt_tokens: u64) {
        // The first request is exactly what the context phase counted.
        self.calibration.observe(self.tools_tokens, self.counted, prompt_tokens);
    }
}

/// What the system prompt and request were made of, beside the messages.
struct Parts<'a> {
    pack: Option<&'a ContextPack>,
    agent_state: Option<&'a str>,
    tools_tokens: u64,
    model_total: u64,
    budget: u64,
    /// The prompt's per-project part went as a second system message.
    context: bool,
}

/// The dev-only account of the context (`debug_context`): the builder's
/// kept, dropped and summarized seqs, and where the tokens went. The built
/// messages are: the system prompt (rules, then its per-project part when
/// there is one: both counted as `system_prompt`), the summary when used, the kept history,
/// the current message last.
fn debug_context(built: &BuiltContext, counter: &TokenCounter, parts: &Parts<'_>) -> DebugContext {
    let tokens: Vec<u64> = built.messages.iter().map(|m| message_tokens(m, counter)).collect();
    let at = |i: usize| tokens.get(i).copied().unwrap_or(0);
    // The rules, then the per-project context (when there is any), then the summary.
    let context = usize::from(parts.context);
    let summary = if built.summary_used { at(1 + context) } else { 0 };
    let fixed = 1 + context + usize::from(built.summary_used);
    let history = tokens.iter().skip(fixed).take(tokens.len().saturating_sub(fixed + 1)).sum();
    let pack_json = parts.pack.filter(|p| !p.is_empty()).map(|p| serde_json::to_string(p).unwrap_or_default());
    DebugContext {
        kept: built.kept.clone(),
        dropped: built.dropped.clone(),
        summarized: built.summarized.clone(),
        summary_used: built.summary_used,
        within_budget: built.within_budget,
        chars_used: built.chars_used,
        tokens: DebugTokens {
            system_prompt: at(0) + if parts.context { at(1) } else { 0 },
            pack: pack_json.as_deref().map_or(0, |j| counter.count(j)),
            agent_state: parts.agent_state.map_or(0, |a| counter.count(a)),
            summary,
            history,
            current: tokens.last().copied().unwrap_or(0),
            tools: parts.tools_tokens,
            counted_total: built.tokens_used + parts.tools_tokens,
            model_total: parts.model_total,
            budget: parts.budget,
        },
        pack_scope: parts.pack.map(|p| p.scope.to_string()),
    }
}

/// Whether the daily brief's block is the whole answer: a brief asked for
/// ("Brief me for today"), or a question of today and tomorrow, with no
/// change asked. Such a turn offers no tools: offered them, the local model
/// listed today's calendar the block already held, said "I have listed the
/// events for today" and had to be asked again. A message naming a later day
/// or a clock time, or asking a change, gets the brief's tools.
fn the_brief_answers(started: &Started) -> bool {
    let message = started.answers.as_ref().unwrap_or(&started.user_message).content.as_deref().unwrap_or_default();
    if started.view.context_type != crate::session::ContextType::DailyBriefUpdate
        || message.trim().is_empty()
        || crate::claims::echo::asks_for_a_change(message)
    {
        return false;
    }
    // The block's days in the request's zone (the brief reads its days there too).
    let now = started.timezone.unwrap_or(Zone::UTC).local(chrono::Utc::now()).naive_local();
    let tomorrow = now.date() + chrono::Duration::days(1);
    let reading = crate::calendar::spoken::read(message, now);
    let within = reading.iter().all(|r| r.at.is_none() && r.days.is_none_or(|(_, last)| last <= tomorrow));
    // It asks for the brief, or of the block's days; "find the budget doc"
    // asks neither and keeps the tools.
    let lower = message.to_lowercase();
    let asks_the_brief = ["brief", "agenda", "summar", "my day", "catch me up"].iter().any(|w| lower.contains(w));
    within && (asks_the_brief || reading.iter().any(|r| r.days.is_some()))
}

/// The tools offered in every round but the last: the same definitions each
/// time, and they take part of the model's context like the messages do.
fn offered_tools(deps: &TurnDeps, scope: &TurnScope) -> Vec<serde_json::Value> {
    match &deps.tools {
        Some(t) if deps.config.tool_max_rounds > 0 => {
            let mut defs = t.offered(scope);
            defs.push(read_tool_output_definition());
            if deps.plans.is_some() {
                defs.extend(crate::planner::definitions(scope, &defs));
            }
            defs
        }
        _ => vec![],
    }
}

/// The turn's context pack: from the prewarm cache when it was built from the
/// project's current version (the cache read and the version read go out
/// together), else built now and written back. Global packs carry no version,
/// so they are always built (one query). A mode's pack is also served only
/// within [`MODE_FRESH_MS`] of its build (it reads the clock and the
/// calendar), global ones too. The cache's use mark is written beside the
/// model call, not before it ([`Exit::defer`]), at most once a minute.
pub async fn load_pack(deps: &TurnDeps, user: &UserId, key: PackKey, zone: Option<Zone>, exit: &Exit) -> LoadedPack {
    let Some(service) = &deps.entities else {
        return LoadedPack { key, pack: ContextPack::default(), cache: None };
    };
    let src = Sources { entities: service, calendar: deps.calendar.as_ref(), zone, now: chrono::Utc::now() };
    let (pack, cache) = match &deps.cache {
        Some(cache) if key.scope.project().is_some() || key.mode.is_some() => {
            cached_pack(&src, cache, user, &key, exit).await
        }
        _ => (build_keyed(&src, user, &key).await, None),
    };
    LoadedPack { key, pack, cache }
}

async fn cached_pack(
    src: &Sources<'_>,
    cache: &Arc<dyn ContextCache>,
    user: &UserId,
    key: &PackKey,
    exit: &Exit,
) -> (ContextPack, Option<CacheStatus>) {
    let current = futures::future::OptionFuture::from(key.scope.project().map(|p| src.entities.get_project(user, p)));
    let (cached, current) = tokio::join!(cache.cached(user, key), current);
    let current = match current {
        Some(Ok(p)) => p.version,
        // Not the user's (any more), or gone: never serve a cache for it.
        Some(Err(_)) => return (build_keyed(src, user, key).await, None),
        None => 0,
    };
    if let Ok(Some(hit)) = cached {
        let fresh = key.mode.is_none() || crate::now_ms() - hit.built_at < MODE_FRESH_MS;
        if hit.version == current && fresh {
            // The prewarm schedule reads the use mark in minutes: marking
            // every turn would only add a write per turn.
            if crate::now_ms() - hit.last_used >= TOUCH_EVERY_MS {
                let (cache, user, key) = (cache.clone(), user.clone(), key.clone());
                exit.defer(tokio::spawn(async move {
                    let _ = cache.touch_key(&user, &key).await;
                }));
            }
            return (hit.pack, Some(CacheStatus::Hit));
        }
    }
    let started = std::time::Instant::now();
    let pack = build_keyed(src, user, key).await;
    let build_ms = started.elapsed().as_millis() as u64;
    if pack.version.is_some() || key.scope.project().is_none() {
        if let Err(e) = cache.put(user, key, &pack, build_ms).await {
            tracing::warn!(error = %e, "context pack not cached");
        }
    }
    (pack, Some(CacheStatus::Miss))
}
