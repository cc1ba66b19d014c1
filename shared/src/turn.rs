//! One chat turn, as a plain async function over a [`Store`], an [`Llm`] and an
//! [`EventSink`] (BACKEND_FAST_STREAM_SPEC §5).
//!
//! Contract:
//! - `agent_state: thinking` is on the wire before any I/O (the edge sends it);
//! - the session is resolved (leased) while the last N messages load, in parallel;
//! - the user message is persisted concurrently with the model call;
//! - every stream ends with `done`, `error` first when something failed, and
//!   all persistence finishes before `done` (Lambda freezes once the body ends);
//! - a model error, the client going away, or the invocation's deadline keep
//!   the partial text in an assistant message marked with what happened;
//! - one writer per session (the lease); a repeated `stream_run_id` never
//!   stores a second user message.

use crate::agent_state::{observe_tool_result, render, AgentState, ToolObservation};
use crate::config::Config;
use crate::context::pack::{build_pack, ContextPack};
use crate::context::{
    build_context, message_tokens, ContextBudget, ContextConfig, ContextInput, SummaryRef, TokenCalibration,
    TokenCounter, REPLY_PRIMING,
};
use crate::entities::EntityPatch;
use crate::entities::EntityService;
use crate::ids::{EntityId, InvalidId, RunId, SessionId, TurnId, UserId};
use crate::llm::{ChatRequest, Llm, LlmError, LlmEvent, ToolCallAccumulator};
use crate::message::{MessageError, Role, StoredMessage, ToolCall, Usage};
use crate::metrics::{Record, Unit};
use crate::prompt::{PromptBuilder, PromptInputs};
use crate::session::{title_from_message, ContextType, SessionStatus, SessionView, TurnRecord, TurnStatus};
use crate::sse::CacheStatus;
use crate::sse::{AgentActivity, DoneReason, EventSink, Focus, SinkStats, StreamEvent};
use crate::store::agent_state::{AgentStateStore, SaveError};
use crate::store::cache::ContextCache;
use crate::store::summary::SummaryStore;
use crate::store::{Lease, Store, StoreError, TurnEnd, TurnStart};
use crate::summary::{publish_bounded, TurnCompleted, TurnEvents};
use crate::tools::ToolScope;
use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The body of `POST` to the stream function (BACKEND_FAST_STREAM_SPEC §3).
/// Unknown fields are ignored so older and newer clients keep working.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TurnRequest {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    #[serde(default, rename = "projectFocus", alias = "project_focus", skip_serializing_if = "Option::is_none")]
    pub project_focus: Option<serde_json::Value>,
    /// A string or a number; either way the idempotency key of this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_run_id: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_note_group_id: Option<String>,
}

/// Why a request was refused before any streaming (HTTP 400, nothing written).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadTurn {
    #[error("the body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("`message` is required and must not be empty")]
    EmptyMessage,
    #[error("`message` is {size} bytes; the limit is {limit}")]
    MessageTooLarge { size: usize, limit: usize },
    #[error("unknown context_type {0:?}")]
    UnknownContextType(String),
    #[error("{0}")]
    InvalidId(#[from] InvalidId),
    #[error("`stream_run_id` must be a string or a number")]
    InvalidRunId,
}

impl BadTurn {
    pub fn code(&self) -> &'static str {
        match self {
            BadTurn::InvalidJson(_) => "invalid_json",
            BadTurn::EmptyMessage => "missing_message",
            BadTurn::MessageTooLarge { .. } => "message_too_large",
            BadTurn::UnknownContextType(_) => "unknown_context_type",
            BadTurn::InvalidId(_) => "invalid_id",
            BadTurn::InvalidRunId => "invalid_stream_run_id",
        }
    }
}

/// A request that passed validation: everything the turn needs, typed.
#[derive(Debug, Clone)]
pub struct ValidTurn {
    pub message: String,
    pub session_id: Option<SessionId>,
    /// `None`: keep the session's scope (or `global` for a new session).
    pub context_type: Option<ContextType>,
    pub entity_id: Option<String>,
    pub focus: Option<serde_json::Value>,
    pub run_id: Option<RunId>,
}

impl ValidTurn {
    /// Validates a raw body. Cheap and pure, so it runs before the stream opens.
    pub fn parse(body: &[u8], max_message_bytes: usize) -> Result<ValidTurn, BadTurn> {
        // The body limit is generous beside the message limit (focus metadata),
        // but bounded, so a huge body is refused before it is parsed.
        if body.len() > max_message_bytes.saturating_mul(2) + 64 * 1024 {
            return Err(BadTurn::MessageTooLarge { size: body.len(), limit: max_message_bytes });
        }
        let req: TurnRequest = serde_json::from_slice(body).map_err(|e| BadTurn::InvalidJson(e.to_string()))?;
        if req.message.trim().is_empty() {
            return Err(BadTurn::EmptyMessage);
        }
        if req.message.len() > max_message_bytes {
            return Err(BadTurn::MessageTooLarge { size: req.message.len(), limit: max_message_bytes });
        }
        let context_type = match req.context_type.as_deref() {
            None => None,
            Some(c) => Some(ContextType::parse(c).ok_or_else(|| BadTurn::UnknownContextType(c.to_string()))?),
        };
        let run_id = match req.stream_run_id {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(RunId::parse(s)?),
            Some(serde_json::Value::Number(n)) => Some(RunId::parse(n.to_string())?),
            Some(_) => return Err(BadTurn::InvalidRunId),
        };
        let entity_id = match req.entity_id {
            Some(e) if !e.trim().is_empty() => Some(EntityId::parse(e)?.into()),
            _ => None,
        };
        Ok(ValidTurn {
            message: req.message,
            session_id: req.session_id.filter(|s| !s.is_empty()).map(SessionId::parse).transpose()?,
            context_type,
            entity_id,
            focus: req.project_focus,
            run_id,
        })
    }
}

/// What a turn runs on. Shared by every concurrent turn of the process.
#[derive(Clone)]
pub struct TurnDeps {
    pub store: Arc<dyn Store>,
    pub llm: Arc<dyn Llm>,
    pub config: Arc<Config>,
    /// The tools offered to the model; `None`: a talk-only turn.
    pub tools: Option<Arc<dyn TurnTools>>,
    /// The ontology, for context packs; `None`: no pack.
    pub entities: Option<EntityService>,
    /// Prewarmed context packs; `None`: packs are built every turn.
    pub cache: Option<Arc<dyn ContextCache>>,
    /// The session's agent state (AGENT_STATE_SPEC); `None`: not kept.
    pub agent_state: Option<Arc<dyn AgentStateStore>>,
    /// Budgets of the context window.
    pub context: Arc<ContextConfig>,
    pub counter: TokenCounterCell,
    pub summaries: Arc<dyn SummaryStore>,
    /// Where turn-end events go (the summarizer's queue), and the longest a
    /// turn waits for the send before leaving it in the background.
    pub events: Arc<dyn TurnEvents>,
    pub event_wait: Duration,
}

/// The token counter. The default estimate needs no loading; an opt-in BPE is
/// loaded off the hot path: parsing its vocabulary takes a moment once per
/// process, so it loads on its own thread at start, and a turn that comes
/// before it is ready counts with the estimate rather than wait.
/// With it, the process's [`TokenCalibration`] against the model.
#[derive(Clone)]
pub struct TokenCounterCell(Arc<std::sync::OnceLock<TokenCounter>>, Arc<TokenCalibration>);

impl TokenCounterCell {
    pub fn load(context: &ContextConfig, model: &str) -> Result<TokenCounterCell, crate::config::ConfigError> {
        let cell = TokenCounterCell(Arc::new(std::sync::OnceLock::new()), Arc::new(TokenCalibration::new()));
        if TokenCounter::encoding(&context.tokenizer, model)?.is_none() {
            let _ = cell.0.set(TokenCounter::Estimate);
            return Ok(cell);
        }
        let (ctx, model, slot) = (context.clone(), model.to_string(), cell.0.clone());
        std::thread::spawn(move || match ctx.counter(&model) {
            Ok(c) => {
                let _ = slot.set(c);
            }
            Err(e) => {
                tracing::error!(error = %e, "tokenizer not loaded; estimating");
                let _ = slot.set(TokenCounter::Estimate);
            }
        });
        Ok(cell)
    }

    /// The loaded counter, or the estimate while it loads.
    pub fn get(&self) -> TokenCounter {
        self.0.get().copied().unwrap_or(TokenCounter::Estimate)
    }

    /// What the model's tokenizer makes of this counter's counts.
    pub fn calibration(&self) -> &TokenCalibration {
        &self.1
    }
}

/// Where a turn runs, as tools see it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnScope {
    pub context_type: ContextType,
    pub entity_id: Option<String>,
    /// The client's focus metadata (`projectFocus`), e.g. `{"projectId": "…"}`.
    pub focus: Option<serde_json::Value>,
}

/// What one tool call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    pub ok: bool,
    /// The whole result, as the tool message's content (what the model reads).
    pub content: String,
    /// A bounded preview for the `tool_result` event.
    pub preview: String,
    /// `operation` and `entity_patch` events, in the order they happened.
    pub events: Vec<StreamEvent>,
}

impl ToolRun {
    pub fn failed(why: &str) -> ToolRun {
        ToolRun {
            ok: false,
            content: serde_json::json!({"ok": false, "error": why}).to_string(),
            preview: why.to_string(),
            events: vec![],
        }
    }
}

/// What the turn needs from tools: the set offered in a scope, and running a
/// call (a call outside the offered set still runs when the scope allows it).
/// Failures are results the model can read, never errors of the turn.
#[async_trait::async_trait]
pub trait TurnTools: Send + Sync {
    /// OpenAI `tools` entries for this scope.
    fn offered(&self, scope: &TurnScope) -> Vec<serde_json::Value>;
    async fn run(&self, user: &UserId, scope: &TurnScope, call: &ToolCall) -> ToolRun;
}

/// How the model part of a turn ended.
enum Outcome {
    Complete,
    /// The client went away (or, later, pressed Stop).
    Stopped,
    Failed {
        code: &'static str,
        message: String,
        retryable: bool,
    },
}

/// The opening event, sent by the edge before any I/O.
pub fn thinking() -> StreamEvent {
    StreamEvent::AgentState { state: AgentActivity::Thinking, details: Some("Thinking…".into()) }
}

/// Runs one turn to its `done`. `deadline` is when the invocation will be
/// killed; the turn stops `DEADLINE_MARGIN_MS` before it.
pub async fn run_turn(
    deps: TurnDeps,
    user: UserId,
    turn: ValidTurn,
    started: std::time::Instant,
    deadline: Instant,
    mut sink: EventSink,
) {
    let turn_id = TurnId::new();
    let span = tracing::info_span!("turn", user_id = %user, turn_id = %turn_id, session_id = tracing::field::Empty);
    async move {
        let mut completed = None;
        let done = match run(&deps, &user, &turn, &turn_id, deadline, &mut sink, &mut completed).await {
            Ok(done) => done,
            Err((session_id, err)) => {
                tracing::warn!(code = err.code(), error = %err, "turn refused");
                let retryable = matches!(err, StoreError::Busy | StoreError::Backend(_));
                let _ = sink.send(StreamEvent::error(err.code(), err.to_string(), retryable)).await;
                StreamEvent::Done { reason: DoneReason::Error, session_id, turn_id: turn_id.clone(), usage: None }
            }
        };
        let usage = match &done {
            StreamEvent::Done { usage, .. } => *usage,
            _ => None,
        };
        let _ = sink.send(done).await;
        // The turn-end event goes out after `done`, while the body is still
        // open: the client has its answer (everything it needs is stored)
        // and the invocation lasts until the send is through or its bounded
        // wait is over (docs/performance.md, finding 2). Lambda freezes the
        // process once the body ends, so it cannot go after that.
        if let Some(event) = completed {
            publish_bounded(deps.events.clone(), event, deps.event_wait).await;
        }
        turn_metrics(sink.stats(), started, usage, &turn_id).emit();
    }
    .instrument(span)
    .await
}

/// The turn as users pay for it, in EMF: time to first byte and to first
/// token from the handler's entry, total time, tokens, tool calls, errors.
fn turn_metrics(stats: &SinkStats, started: std::time::Instant, usage: Option<Usage>, turn_id: &TurnId) -> Record {
    let ms = |t: std::time::Instant| t.saturating_duration_since(started).as_secs_f64() * 1000.0;
    let mut r = Record::new("stream").property("turn_id", turn_id.to_string());
    if let Some(t) = stats.first_frame {
        r = r.metric("TimeToFirstByte", ms(t), Unit::Milliseconds);
    }
    if let Some(t) = stats.first_text {
        r = r.metric("TimeToFirstToken", ms(t), Unit::Milliseconds);
    }
    r = r.metric("TurnDuration", ms(std::time::Instant::now()), Unit::Milliseconds);
    if let Some(u) = usage {
        r = r.metric("TokensIn", u.prompt_tokens as f64, Unit::Count).metric(
            "TokensOut",
            u.completion_tokens as f64,
            Unit::Count,
        );
    }
    r = r.metric("ToolCalls", stats.tool_calls as f64, Unit::Count);
    if let Some(code) = &stats.error_code {
        // A second record: errors by code need the code as a dimension.
        Record::new("stream").dimension("code", code).metric("Errors", 1.0, Unit::Count).emit();
        r = r.property("error_code", code.clone());
    }
    r
}

type Refused = (Option<SessionId>, StoreError);

/// The turn up to (not including) its final `done`; `Err` when it was refused
/// before the model was called, with nothing written.
async fn run(
    deps: &TurnDeps,
    user: &UserId,
    turn: &ValidTurn,
    turn_id: &TurnId,
    deadline: Instant,
    sink: &mut EventSink,
    completed: &mut Option<TurnCompleted>,
) -> Result<StreamEvent, Refused> {
    let cfg = &deps.config;
    let store = &deps.store;
    let lease = Lease { turn_id: turn_id.clone(), until_ms: crate::now_ms() + cfg.session_lease.as_millis() as i64 };
    let run_id =
        turn.run_id.clone().unwrap_or_else(|| RunId::parse(turn_id.as_str()).expect("turn ids are valid run ids"));

    // Resolve the session: one round trip for a new one; for an existing one the
    // lease, the last N messages and the idempotency check go out together.
    let (session, history, summary) = match &turn.session_id {
        None => {
            let now = crate::now_ms();
            let view = SessionView {
                id: SessionId::new(),
                title: None,
                context_type: turn.context_type.unwrap_or_default(),
                entity_id: turn.entity_id.clone(),
                focus: turn.focus.clone(),
                status: SessionStatus::Active,
                message_count: 0,
                created_at: now,
                last_activity_at: now,
            };
            let s = store.create_session(user, &view, &lease, &run_id).await.map_err(|e| (None, e))?;
            (s, Vec::new(), None)
        }
        Some(sid) => {
            let seen = async {
                match &turn.run_id {
                    Some(run) => store.turn_by_run(user, sid, run).await,
                    None => Ok(None),
                }
            };
            let (leased, history, seen, summary) = tokio::join!(
                store.acquire_lease(user, sid, &lease),
                store.recent_messages(user, sid, cfg.history_limit.unwrap_or_else(|| deps.context.load_limit())),
                seen,
                deps.summaries.current(user, sid)
            );
            // Without its summary the turn still works, with a shorter memory.
            let summary = summary.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "summary not loaded");
                None
            });
            let refuse = |e| (Some(sid.clone()), e);
            let session = leased.map_err(refuse)?;
            let release = || async {
                let _ = store.release_lease(user, sid, turn_id).await;
            };
            match seen {
                Ok(Some(_previous)) => {
                    release().await;
                    return Err(refuse(StoreError::DuplicateRun));
                }
                Ok(None) => {}
                Err(e) => {
                    release().await;
                    return Err(refuse(e));
                }
            }
            match history {
                Ok(h) => (session, h, summary),
                Err(e) => {
                    release().await;
                    return Err(refuse(e));
                }
            }
        }
    };
    let sid = session.view.id.clone();
    tracing::Span::current().record("session_id", tracing::field::display(&sid));
    tracing::info!(
        history = history.len(),
        ms_left = deadline.saturating_duration_since(Instant::now()).as_millis() as u64,
        "session resolved"
    );

    // The request's scope wins over the stored one.
    let context_type = turn.context_type.unwrap_or(session.view.context_type);
    let entity_id = if turn.context_type.is_some() {
        turn.entity_id.clone()
    } else {
        turn.entity_id.clone().or(session.view.entity_id.clone())
    };
    let mut view = session.view.clone();
    view.context_type = context_type;
    view.entity_id = entity_id.clone();
    if turn.focus.is_some() {
        view.focus = turn.focus.clone();
    }
    if sink.send(StreamEvent::Session { session: view.clone() }).await.is_err() {
        let _ = store.release_lease(user, &sid, turn_id).await;
        return Ok(done(DoneReason::Stopped, &sid, turn_id, None));
    }
    // A gap of the old flow: the event was defined but never sent. A new
    // session has no earlier focus, so it never "changes".
    let previous = Focus::of(&session.view);
    let current = Focus::of(&view);
    if session.view.message_count > 0 && previous != current {
        let _ = sink.send(StreamEvent::FocusChanged { previous, current }).await;
    }

    let now = crate::now_ms();
    let user_seq = session.view.message_count + 1;
    let user_message = StoredMessage {
        created_at: now,
        ..StoredMessage::new(sid.clone(), user_seq, turn_id.clone(), Role::User, Some(turn.message.clone()))
    };
    let start = TurnStart {
        turn: TurnRecord {
            turn_id: turn_id.clone(),
            run_id: run_id.clone(),
            status: TurnStatus::Running,
            user_message_seq: user_seq,
            assistant_message_seq: None,
            started_at: now,
            ended_at: None,
        },
        user_message: user_message.clone(),
        context_type,
        entity_id: entity_id.clone(),
        focus: turn.focus.clone(),
        title: session.view.title.is_none().then(|| title_from_message(&turn.message)).flatten(),
    };
    // Persist the user message while the model works.
    let persist_user = {
        let store = store.clone();
        let user = user.clone();
        let sid = sid.clone();
        tokio::spawn(async move { store.start_turn(&user, &sid, &start).await })
    };

    // The lease outlives a long answer by being renewed; losing it, or a Stop,
    // ends the turn.
    let watch = watch_turn(store.clone(), user.clone(), sid.clone(), turn_id.clone(), cfg);

    let scope = TurnScope { context_type, entity_id: entity_id.clone(), focus: view.focus.clone() };
    let agent_state = async {
        match &deps.agent_state {
            Some(store) => match store.load(user, &sid).await {
                Ok(Some((state, version))) => Some((state, version)),
                Ok(None) => Some((AgentState::new(sid.to_string()), 0)),
                Err(e) => {
                    tracing::warn!(error = %e, "agent state not loaded");
                    None
                }
            },
            None => None,
        }
    };
    let pack_scope = ToolScope::from_focus(context_type, entity_id.as_deref(), view.focus.as_ref());
    let pack = async {
        match &deps.entities {
            Some(service) => Some(load_pack(service, deps.cache.as_deref(), user, &pack_scope).await),
            None => None,
        }
    };
    let (pack, mut agent_state) = tokio::join!(pack, agent_state);
    let mut state_observed = false;
    let (pack, cache_status) = match pack {
        Some((p, c)) => (Some(p), c),
        None => (None, None),
    };
    let state_block = agent_state.as_ref().map(|(s, _)| render(s)).filter(|r| !r.is_empty());

    let prompt = PromptBuilder::build(&PromptInputs {
        context_type,
        entity_id: entity_id.as_deref(),
        project_name: None,
        tools: deps.tools.is_some() && cfg.tool_max_rounds > 0,
        pack: pack.as_ref(),
        agent_state: state_block.as_deref(),
    });
    // The tools offered in every round but the last: the same definitions each
    // time, and they take part of the model's context like the messages do.
    let offered = match &deps.tools {
        Some(t) if cfg.tool_max_rounds > 0 => {
            let mut defs = t.offered(&scope);
            defs.push(read_tool_output_definition());
            defs
        }
        _ => vec![],
    };
    let counter = deps.counter.get();
    let calibration = deps.counter.calibration();
    let tools_tokens = if offered.is_empty() {
        0
    } else {
        counter.count(&serde_json::to_string(&offered).expect("JSON values serialize"))
    };
    // CONTEXT_MAX_TOKENS is in the model's tokens, tool definitions included;
    // the builder counts messages in ours.
    let line = calibration.line(tools_tokens);
    let budget =
        ContextBudget { max_tokens: line.counted_budget(deps.context.budget.max_tokens), ..deps.context.budget };
    let built = build_context(
        &ContextInput {
            system_prompt: &prompt,
            summary: summary.as_ref().map(|s| SummaryRef { text: &s.text, through_seq: s.through_seq }),
            history: &history,
            current: &user_message,
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
    let mut messages = built.messages;

    // Keep the margin to persist and end cleanly, but never more than a tenth
    // of the time there is: a short-timeout function would otherwise stop at once.
    let left = deadline.saturating_duration_since(Instant::now());
    let stop_at = deadline - cfg.deadline_margin.min(left / 10);
    let mut persist_user = Some(persist_user);
    let mut next_seq = user_seq + 1;
    let mut usage_total = Usage::default();
    let mut round = 0;
    let (final_message, outcome) = loop {
        // The last round offers no tools, so the model has to answer in words.
        let tools = if round < cfg.tool_max_rounds { offered.clone() } else { vec![] };
        let request = ChatRequest {
            model: cfg.llm.model.clone(),
            messages: messages.clone(),
            tools,
            max_tokens: cfg.llm.max_tokens,
            temperature: None,
        };
        let offered_tools = !request.tools.is_empty();
        let answer = stream_model(deps.llm.as_ref(), request, sink, stop_at, &watch).await;
        match answer.usage {
            Some(u) => {
                if round == 0 {
                    // The first request is exactly what was counted above.
                    calibration.observe(tools_tokens, counted, u.prompt_tokens);
                }
                usage_total.add(&u)
            }
            // Some servers send no usage on a streamed answer (llama-cpp-python
            // ignores `stream_options.include_usage`): our own count stands in.
            None => {
                let messages_counted =
                    messages.iter().map(|m| message_tokens(m, &counter)).sum::<u64>() + REPLY_PRIMING;
                let prompt = if offered_tools { line.model_tokens(messages_counted) } else { messages_counted };
                let completion = counter.count(&answer.text);
                usage_total.add(&Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: prompt + completion,
                })
            }
        }
        // The user message must be stored before anything that follows it.
        if let Some(task) = persist_user.take() {
            let started = match task.await {
                Ok(r) => r,
                Err(join) => Err(StoreError::Backend(format!("user message task failed: {join}"))),
            };
            if let Err(e) = started {
                let _ = store.release_lease(user, &sid, turn_id).await;
                tracing::warn!(code = e.code(), error = %e, "user message not stored");
                let _ =
                    sink.send(StreamEvent::error(e.code(), e.to_string(), matches!(e, StoreError::Backend(_)))).await;
                return Ok(done(DoneReason::Error, &sid, turn_id, None));
            }
        }
        let mut assistant = message(&sid, next_seq, turn_id, Role::Assistant, answer.text);
        next_seq += 1;
        assistant.tool_calls = answer.tool_calls;
        let calls = assistant.tool_calls.clone();
        let Outcome::Complete = answer.outcome else {
            // Cut short: any call the model had begun gets an error result, so
            // the log stays a valid request for the next turn.
            let results = synthetic_results(&sid, &mut next_seq, turn_id, &calls, "not run: the turn ended first");
            break ((assistant, results), answer.outcome);
        };
        if calls.is_empty() {
            break ((assistant, vec![]), Outcome::Complete);
        }
        let Some(tools) = deps.tools.clone().filter(|_| round < cfg.tool_max_rounds) else {
            let results =
                synthetic_results(&sid, &mut next_seq, turn_id, &calls, "not run: no more tool rounds in this turn");
            break ((assistant, results), Outcome::Complete);
        };
        round += 1;
        for c in &calls {
            if sink.send(StreamEvent::ToolCall { tool_call: c.clone() }).await.is_err() {
                break;
            }
        }
        let _ = sink.send(StreamEvent::AgentState { state: AgentActivity::Executing, details: None }).await;
        let runs = tokio::select! {
            biased;
            _ = sink.closed() => None,
            _ = watch.stopped.cancelled() => None,
            _ = tokio::time::sleep_until(stop_at) => None,
            r = run_tools(tools.as_ref(), store.as_ref(), user, &sid, &scope, &calls, cfg.tool_concurrency) => Some(r),
        };
        let Some(runs) = runs else {
            let results = synthetic_results(&sid, &mut next_seq, turn_id, &calls, "not run: the turn was stopped");
            let outcome = if Instant::now() >= stop_at { deadline_hit() } else { Outcome::Stopped };
            break ((assistant, results), outcome);
        };
        let mut results = Vec::with_capacity(calls.len());
        for (call, run) in calls.iter().zip(runs) {
            if let Some((state, _)) = agent_state.as_mut() {
                observe(state, call, &run);
                state_observed = true;
            }
            for ev in run.events {
                let _ = sink.send(ev).await;
            }
            let _ = sink
                .send(StreamEvent::ToolResult {
                    tool_call_id: call.id.clone(),
                    name: call.function.name.clone(),
                    ok: run.ok,
                    preview: run.preview,
                })
                .await;
            let content = match keep_apart(store.as_ref(), user, &sid, call, run.content, cfg).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, "tool output not stored apart");
                    ToolRun::failed("the tool's output was too large to keep").content
                }
            };
            let mut m = message(&sid, next_seq, turn_id, Role::Tool, content);
            next_seq += 1;
            m.tool_call_id = Some(call.id.clone());
            results.push(m);
        }
        // Each round is stored as it completes: a call and its results together.
        let mut round_messages = vec![assistant];
        round_messages.extend(results);
        if let Err(e) = store.append_messages(user, &sid, turn_id, &round_messages).await {
            tracing::error!(code = e.code(), error = %e, "tool round not stored");
            let _ = store.release_lease(user, &sid, turn_id).await;
            let _ =
                sink.send(StreamEvent::error(e.code(), format!("the tool round could not be saved: {e}"), true)).await;
            return Ok(done(DoneReason::Error, &sid, turn_id, Some(usage_total)));
        }
        messages.extend(round_messages.iter().map(StoredMessage::to_chat));
        let _ = sink.send(StreamEvent::AgentState { state: AgentActivity::Thinking, details: None }).await;
    };
    drop(watch);

    let (mut assistant, results) = final_message;
    let (status, error, stopped) = match &outcome {
        Outcome::Complete => (TurnStatus::Completed, None, false),
        Outcome::Stopped => (TurnStatus::Stopped, None, true),
        Outcome::Failed { code, message, .. } => {
            (TurnStatus::Error, Some(MessageError { code: code.to_string(), message: message.clone() }), false)
        }
    };
    assistant.error = error;
    assistant.stopped = stopped;
    assistant.usage = Some(usage_total);
    let mut end_messages = vec![assistant];
    end_messages.extend(results);
    let end = TurnEnd { turn_id: turn_id.clone(), run_id, status, messages: end_messages, usage: usage_total };
    // The agent state is its own item: its write goes out beside the turn's
    // transaction rather than after it, so `done` waits for one round trip
    // (docs/performance.md, finding 2). It records tool results that are
    // already committed, so it holds whether or not the answer is stored.
    // A stored state that no tool result touched is left as it is: no write
    // (a new session's first turn stores its initial state).
    let save_state = async {
        if let (Some(states), Some((state, version))) = (&deps.agent_state, agent_state) {
            if state_observed || version == 0 {
                save_agent_state(states.as_ref(), user, &sid, state, version).await;
            }
        }
    };
    let (persisted, ()) = tokio::join!(store.finish_turn(user, &sid, &end), save_state);

    let mut reason = match outcome {
        Outcome::Complete => DoneReason::Complete,
        Outcome::Stopped => DoneReason::Stopped,
        Outcome::Failed { code, message, retryable } => {
            let _ = sink.send(StreamEvent::error(code, message, retryable)).await;
            DoneReason::Error
        }
    };
    if persisted.is_ok() {
        // The summarizer works from watermarks: a lost event is covered by the
        // next turn's, so it never fails the turn; it is sent after `done`.
        *completed = Some(TurnCompleted {
            user_id: user.clone(),
            session_id: sid.clone(),
            turn_id: turn_id.clone(),
            last_message_seq: next_seq - 1,
        });
    }
    if let Err(e) = persisted {
        tracing::error!(code = e.code(), error = %e, "answer not stored");
        let _ = store.release_lease(user, &sid, turn_id).await;
        if reason != DoneReason::Error {
            let _ = sink.send(StreamEvent::error(e.code(), format!("the answer could not be saved: {e}"), true)).await;
        }
        reason = DoneReason::Error;
    }
    Ok(done(reason, &sid, turn_id, Some(usage_total)))
}

/// The turn's context pack: from the prewarm cache when it was built from the
/// project's current version (the cache read and the version read go out
/// together), else built now and written back without waiting. Global packs
/// carry no version, so they are always built (one query).
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

/// A new message of this turn.
fn message(sid: &SessionId, seq: u64, turn_id: &TurnId, role: Role, content: String) -> StoredMessage {
    StoredMessage::new(sid.clone(), seq, turn_id.clone(), role, (!content.is_empty()).then_some(content))
}

/// Error results for calls that never ran, so every call in the log has one.
fn synthetic_results(
    sid: &SessionId,
    next_seq: &mut u64,
    turn_id: &TurnId,
    calls: &[ToolCall],
    why: &str,
) -> Vec<StoredMessage> {
    calls
        .iter()
        .map(|c| {
            let mut m = message(
                sid,
                *next_seq,
                turn_id,
                Role::Tool,
                serde_json::json!({"ok": false, "error": why}).to_string(),
            );
            *next_seq += 1;
            m.tool_call_id = Some(c.id.clone());
            m
        })
        .collect()
}

/// Runs one round's calls concurrently (at most `cap` at once); results in call order.
/// A tool that panics becomes an error result, never a crashed turn.
async fn run_tools(
    tools: &dyn TurnTools,
    store: &dyn Store,
    user: &UserId,
    sid: &SessionId,
    scope: &TurnScope,
    calls: &[ToolCall],
    cap: usize,
) -> Vec<ToolRun> {
    // Owned calls: futures borrowing from the iterator would not be `Send`
    // for every lifetime (a rustc limitation with higher-ranked closures).
    let futures: Vec<_> = calls
        .iter()
        .cloned()
        .map(|call| async move {
            let run = async {
                if call.function.name == READ_TOOL_OUTPUT {
                    read_tool_output(store, user, sid, &call).await
                } else {
                    tools.run(user, scope, &call).await
                }
            };
            match std::panic::AssertUnwindSafe(run).catch_unwind().await {
                Ok(run) => run,
                Err(_) => {
                    tracing::error!(tool = %call.function.name, "tool panicked");
                    ToolRun::failed("the tool failed unexpectedly")
                }
            }
        })
        .collect();
    futures::stream::iter(futures).buffered(cap.max(1)).collect().await
}

/// The built-in tool that reads back a tool output kept apart from the log.
const READ_TOOL_OUTPUT: &str = "read_tool_output";
/// Characters a `read_tool_output` call returns at most.
const READ_TOOL_OUTPUT_MAX: usize = 12_000;

fn read_tool_output_definition() -> serde_json::Value {
    serde_json::json!({"type": "function", "function": {
        "name": READ_TOOL_OUTPUT,
        "description": "Read a part of a large tool output that was kept apart (its result said `full_output`).",
        "parameters": {"type": "object", "additionalProperties": false, "required": ["tool_call_id"], "properties": {
            "tool_call_id": {"type": "string", "description": "The id of the call whose output to read."},
            "offset": {"type": "integer", "minimum": 0, "description": "Character offset to start at (default 0)."},
            "length": {"type": "integer", "minimum": 1, "maximum": READ_TOOL_OUTPUT_MAX}
        }}
    }})
}

async fn read_tool_output(store: &dyn Store, user: &UserId, sid: &SessionId, call: &ToolCall) -> ToolRun {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Args {
        tool_call_id: String,
        #[serde(default)]
        offset: usize,
        length: Option<usize>,
    }
    let args: Args = match serde_json::from_str(&call.function.arguments) {
        Ok(a) => a,
        Err(e) => return ToolRun::failed(&format!("invalid arguments: {e}")),
    };
    match store.tool_output(user, sid, &args.tool_call_id).await {
        Ok(Some(full)) => {
            let len = args.length.unwrap_or(READ_TOOL_OUTPUT_MAX).min(READ_TOOL_OUTPUT_MAX);
            let part: String = full.chars().skip(args.offset).take(len).collect();
            let total = full.chars().count();
            let next = (args.offset + part.chars().count() < total).then_some(args.offset + part.chars().count());
            let content = serde_json::json!({"ok": true, "offset": args.offset, "total_chars": total,
                "next_offset": next, "text": part})
            .to_string();
            ToolRun {
                ok: true,
                preview: format!("read {} of {total} characters", part.chars().count()),
                content,
                events: vec![],
            }
        }
        Ok(None) => ToolRun::failed("no output is kept apart for that tool_call_id in this session"),
        Err(e) => {
            tracing::error!(error = %e, "tool output not read");
            ToolRun::failed("the stored output could not be read right now")
        }
    }
}

/// A tool output over `TOOL_OUTPUT_INLINE_BYTES` is stored apart in full; the
/// log (and so the model's context) gets a preview and a reference to it.
async fn keep_apart(
    store: &dyn Store,
    user: &UserId,
    sid: &SessionId,
    call: &ToolCall,
    content: String,
    cfg: &Config,
) -> Result<String, StoreError> {
    if content.len() <= cfg.tool_output_inline_bytes {
        return Ok(content);
    }
    store.put_tool_output(user, sid, &call.id, &content).await?;
    let preview: String = content.chars().take(cfg.tool_output_inline_bytes.min(2_000)).collect();
    Ok(serde_json::json!({
        "preview": preview,
        "truncated": true,
        "total_chars": content.chars().count(),
        "full_output": {"tool": READ_TOOL_OUTPUT, "tool_call_id": call.id},
    })
    .to_string())
}

/// Folds one tool result into the agent state (in memory; saved at turn end).
fn observe(state: &mut AgentState, call: &ToolCall, run: &ToolRun) {
    let args: serde_json::Value = serde_json::from_str(&call.function.arguments).unwrap_or(serde_json::Value::Null);
    let patches: Vec<EntityPatch> = run
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::EntityPatch { patch } => Some(patch.clone()),
            _ => None,
        })
        .collect();
    let content: serde_json::Value = serde_json::from_str(&run.content).unwrap_or_default();
    let error_code = content["error"]["code"].as_str();
    let obs = ToolObservation {
        call_id: &call.id,
        tool: &call.function.name,
        args: &args,
        ok: run.ok,
        error_code,
        patches: &patches,
    };
    if let Some(v) = observe_tool_result(state, &obs, crate::now_ms()) {
        tracing::info!(expectation = %v.expectation_id, status = ?v.status, "expectation checked");
    }
}

/// Saves the turn's agent state with compare-and-set; on a concurrent change
/// (the summarizer), the newer state wins and this turn's entities are folded
/// into it. A failure is logged: the state is a cache of what the log says.
async fn save_agent_state(
    store: &dyn AgentStateStore,
    user: &UserId,
    sid: &SessionId,
    state: AgentState,
    version: u64,
) {
    match store.save(user, sid, &state, version).await {
        Ok(_) => {}
        Err(SaveError::Conflict) => {
            let ours = state.current_understanding.clone();
            let merged = crate::store::agent_state::update(store, user, sid, 3, |s| {
                for e in &ours.entities {
                    if s.entity(&e.id).is_none() {
                        s.current_understanding.entities.push(e.clone());
                    }
                }
                for d in &ours.dependencies {
                    if !s.current_understanding.dependencies.contains(d) {
                        s.current_understanding.dependencies.push(d.clone());
                    }
                }
                Ok(())
            })
            .await;
            if let Err(e) = merged {
                tracing::warn!(error = ?e, "agent state not saved");
            }
        }
        Err(SaveError::Store(e)) => tracing::warn!(error = %e, "agent state not saved"),
    }
}

fn deadline_hit() -> Outcome {
    Outcome::Failed {
        code: "deadline_exceeded",
        message: "the turn ran out of time; the partial answer was kept".into(),
        retryable: true,
    }
}

fn done(reason: DoneReason, sid: &SessionId, turn_id: &TurnId, usage: Option<Usage>) -> StreamEvent {
    StreamEvent::Done { reason, session_id: Some(sid.clone()), turn_id: turn_id.clone(), usage }
}

/// What one model call produced.
struct ModelAnswer {
    text: String,
    tool_calls: Vec<ToolCall>,
    usage: Option<Usage>,
    outcome: Outcome,
}

/// Streams the model's answer to the client. Returns the text produced (also
/// when cut short), the tool calls it assembled, the usage it reported, and how it ended.
async fn stream_model(
    llm: &dyn Llm,
    request: ChatRequest,
    sink: &mut EventSink,
    stop_at: Instant,
    watch: &Watch,
) -> ModelAnswer {
    let mut text = String::new();
    let mut calls = ToolCallAccumulator::new();
    let mut usage = None;
    let lost = || Outcome::Failed {
        code: "session_lease_lost",
        message: "another turn took over this session".into(),
        retryable: false,
    };
    let answer = |text, calls: ToolCallAccumulator, usage, outcome| ModelAnswer {
        text,
        tool_calls: calls.finish(),
        usage,
        outcome,
    };

    let opened = tokio::select! {
        biased;
        _ = sink.closed() => return answer(text, calls, usage, Outcome::Stopped),
        _ = watch.stopped.cancelled() => return answer(text, calls, usage, Outcome::Stopped),
        _ = watch.lease_lost.cancelled() => return answer(text, calls, usage, lost()),
        _ = tokio::time::sleep_until(stop_at) => return answer(text, calls, usage, deadline_hit()),
        r = llm.stream_chat(request) => r,
    };
    let mut stream = match opened {
        Ok(s) => s,
        Err(e) => return answer(text, calls, usage, failed(&e)),
    };
    let outcome = loop {
        tokio::select! {
            biased;
            _ = watch.stopped.cancelled() => break Outcome::Stopped,
            _ = watch.lease_lost.cancelled() => break lost(),
            _ = tokio::time::sleep_until(stop_at) => break deadline_hit(),
            r = sink.idle() => if r.is_err() { break Outcome::Stopped },
            ev = stream.next() => match ev {
                None => break Outcome::Complete,
                Some(Ok(LlmEvent::TextDelta(t))) => {
                    text.push_str(&t);
                    if sink.text(&t).is_err() {
                        break Outcome::Stopped;
                    }
                }
                Some(Ok(LlmEvent::Usage(u))) => usage = Some(u),
                Some(Ok(ev @ LlmEvent::ToolCallDelta { .. })) => {
                    calls.push_event(&ev);
                }
                Some(Ok(LlmEvent::Finish { .. })) => {}
                Some(Err(e)) => break failed(&e),
            }
        }
    };
    // Dropping the stream cancels the HTTP request to the model.
    drop(stream);
    if !sink.is_closed() && sink.flush().await.is_err() {
        return answer(text, calls, usage, Outcome::Stopped);
    }
    answer(text, calls, usage, outcome)
}

fn failed(e: &LlmError) -> Outcome {
    Outcome::Failed { code: e.code(), message: e.to_string(), retryable: e.is_transient() }
}

/// Keeps the turn's lease and listens for Stop, off the token path: a small
/// read every `STOP_POLL_MS`, a lease renewal every third of `SESSION_LEASE_MS`.
struct Watch {
    lease_lost: CancellationToken,
    stopped: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn watch_turn(store: Arc<dyn Store>, user: UserId, sid: SessionId, turn_id: TurnId, cfg: &Config) -> Watch {
    let lease_lost = CancellationToken::new();
    let stopped = CancellationToken::new();
    let (lease, poll) = (cfg.session_lease, cfg.stop_poll.max(Duration::from_millis(20)));
    let (lost, stop) = (lease_lost.clone(), stopped.clone());
    let task = tokio::spawn(async move {
        let mut renew_at = Instant::now() + lease / 3;
        loop {
            tokio::time::sleep(poll.min(renew_at.saturating_duration_since(Instant::now()))).await;
            if Instant::now() >= renew_at {
                let l = Lease { turn_id: turn_id.clone(), until_ms: crate::now_ms() + lease.as_millis() as i64 };
                match store.renew_lease(&user, &sid, &l).await {
                    Ok(()) => renew_at = Instant::now() + lease / 3,
                    Err(StoreError::LeaseLost) => {
                        lost.cancel();
                        return;
                    }
                    // Transient: the lease still has two thirds of its time.
                    Err(e) => tracing::warn!(error = %e, "lease renewal failed; retrying"),
                }
            }
            match store.stop_requested(&user, &sid, &turn_id).await {
                Ok(true) => {
                    tracing::info!("stop requested");
                    stop.cancel();
                    return;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "stop check failed"),
            }
        }
    });
    Watch { lease_lost, stopped, task }
}
