//! One chat turn, as a plain async function over a [`SessionStore`], an [`Llm`] and an
//! [`EventSink`] (BACKEND_FAST_STREAM_SPEC §5), in rooms named for its phases:
//! [`request`] (the body, validated before the stream opens), [`start`] (lease,
//! history, run check, the user message), [`context`] (pack, agent state,
//! prompt, budget), then the model loop ([`crate::model_loop`]) over the
//! turn's tool layers, [`finish`] (persistence, then `done`), [`retry`] (a
//! repeated `stream_run_id`) and [`lease`] (the guard that gives the lease
//! back on every exit, and the watch for Stop).
//!
//! Contract:
//! - `agent_state: thinking` is on the wire before any I/O (the edge sends
//!   it), budgets on or off: the admission runs beside the first round trip,
//!   and a refusal is `error quota_exceeded` then `done`;
//! - one DynamoDB round trip before the model call for an existing session
//!   (lease, log, run check and pack in parallel), none for a new one unless
//!   its `stream_run_id` must be checked (docs/performance.md);
//! - the user message is persisted concurrently with the model call;
//! - every stream ends with `done`, `error` first when something failed — a
//!   panic anywhere in the turn included; the answer is durable before
//!   `done`, and what follows it (the session's bookkeeping, the budget
//!   slot, the turn-end event, the frame log's last batch) runs before the
//!   body ends (Lambda freezes then);
//! - a model error, the client going away, Stop, or the invocation's deadline
//!   keep the partial text in an assistant message marked with what happened,
//!   and every tool call that started has its real result in the log;
//! - one writer per session (the lease); a repeated `stream_run_id` never
//!   stores anything twice nor calls the model again;
//! - a `context_shift` is stored on the session in the write that ends the
//!   turn; `telemetry` and `debug_context` only with `DEV_EVENTS` on;
//! - the turn's tools are layers ([`Layers`]): the plan tools
//!   ([`crate::planner`], with the session's plan records) before the
//!   ontology tools (watched for the signals calls send the turn,
//!   [`Watched`]); a plan call's events all come before its `tool_result`,
//!   and its executors run the same loop, writing to the plan record, never
//!   to the session's log; a turn that answers a plan step's waiting calls
//!   resumes that plan before the model is asked (its first call,
//!   `agent_continue_plan` `continue`, is made by the turn).
//!
//! [`SessionStore`]: crate::session::store::SessionStore
//! [`Llm`]: crate::llm::Llm

mod answers;
pub mod context;
pub mod finish;
pub mod history;
pub mod lease;
pub mod request;
pub mod retry;
pub mod start;

pub use crate::model_loop::{ToolRun, TurnScope, TurnTools};
pub use request::{BadTurn, TurnRequest, ValidTurn};

use crate::agent_state::store::AgentStateStore;
use crate::config::Config;
use crate::context::cache::ContextCache;
use crate::context::{ContextConfig, TokenCalibration, TokenCounter};
use crate::entities::EntityService;
use crate::ids::{SessionId, TurnId, UserId};
use crate::llm::Llm;
use crate::message::Usage;
use crate::metrics::{Record, Unit};
use crate::model_loop::call_signals::Watched;
use crate::model_loop::telemetry::Telemetry;
use crate::model_loop::{Interrupts, Layers, Limits, LoopAbort, LoopEnv, ModelLoop, Settings, ToolOutputs};
use crate::planner::PlanLayer;
use crate::session::store::SessionStore;
use crate::sse::{AgentActivity, DoneReason, EventSink, SinkStats, StreamEvent, ToolOrigin};
use crate::store::StoreError;
use crate::summary::{publish_bounded, TurnCompleted, TurnEvents};
use futures::FutureExt;
use lease::Exit;
use start::Refused;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::Instrument;

/// What a turn runs on. Shared by every concurrent turn of the process.
#[derive(Clone)]
pub struct TurnDeps {
    pub store: Arc<dyn SessionStore>,
    /// The turn's one read of its log before the model call.
    pub history: Arc<dyn history::TurnHistory>,
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
    /// Plan records (docs/plans.md); `None`: no plan tools are offered.
    pub plans: Option<Arc<dyn crate::plan::store::PlanStore>>,
    /// Budgets of the context window.
    pub context: Arc<ContextConfig>,
    pub counter: TokenCounterCell,
    /// Where turn-end events go (the summarizer's queue), and the longest a
    /// turn waits for the send before leaving it in the background.
    pub events: Arc<dyn TurnEvents>,
    pub event_wait: Duration,
    /// Where every frame of a turn is kept for a client that comes back
    /// ([`crate::frames`]); `None`: turns are not resumable.
    pub frames: Option<Arc<dyn crate::frames::FrameLog>>,
    /// The user's calendar, for the calendar and daily-brief packs and the
    /// zone a request names; `None`: no calendar.
    pub calendar: Option<crate::calendar::CalendarService>,
    /// Per-user budgets ([`crate::budget`], limits in `config.budgets`);
    /// `None`: none.
    pub budget: Option<Arc<dyn crate::budget::BudgetStore>>,
    /// Refusals of the process that still stand: the edge answers 429 for
    /// them without I/O ([`crate::budget::KnownRefusals`]).
    pub refusals: Arc<crate::budget::KnownRefusals>,
    /// The users' "ask first" tools ([`crate::approval::settings`]); `None`:
    /// only the policy's own rules.
    pub approval_settings: Option<Arc<dyn crate::approval::settings::ApprovalSettingsStore>>,
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

/// The opening event, sent by the edge before any I/O.
pub fn thinking() -> StreamEvent {
    StreamEvent::AgentState { state: AgentActivity::Thinking, details: Some("Thinking…".into()) }
}

/// Runs one turn to its `done`. `turn_id` is new (the edge makes it: the chat
/// route names the answer after it); `deadline` is when the invocation will
/// be killed; the turn stops `DEADLINE_MARGIN_MS` before it. The user's
/// budgets admit it beside its first round trip, after the first event (a
/// refusal is `error quota_exceeded`, then `done`).
pub async fn run_turn(
    deps: TurnDeps,
    user: UserId,
    turn: ValidTurn,
    turn_id: TurnId,
    started: std::time::Instant,
    deadline: Instant,
    mut sink: EventSink,
) {
    let span = tracing::info_span!("turn", user_id = %user, turn_id = %turn_id, session_id = tracing::field::Empty);
    async move {
        let exit = Exit::default();
        let telemetry = Telemetry::new(deps.config.dev_events);
        // Boxed: the turn's future is large, and debug builds copy a future
        // on the stack each time a wrapper takes it (the task-local scope
        // here): unboxed, a turn overflowed a 2 MiB test thread's stack.
        let budget = start::Budget::new(deadline);
        let turn_run =
            telemetry.clone().scope(Box::pin(run(&deps, &user, &turn, &turn_id, deadline, &mut sink, &exit, budget)));
        let ran = std::panic::AssertUnwindSafe(turn_run).catch_unwind().await;
        let (done, completed) = match ran {
            Ok(ended) => ended,
            Err(_) => {
                tracing::error!("the turn panicked");
                let _ = sink.send(StreamEvent::error("internal_error", "the turn failed unexpectedly", true)).await;
                (done(DoneReason::Error, exit.session().as_ref(), &turn_id, None), None)
            }
        };
        // Leases given back by guards (early exits, panics) are released before
        // `done`: Lambda freezes the process once the body ends.
        exit.settled().await;
        for measured in telemetry.drain() {
            let _ = sink.send(measured).await;
        }
        let usage = match &done {
            StreamEvent::Done { usage, .. } => *usage,
            _ => None,
        };
        let _ = sink.send(done).await;
        // The turn-end event and the frame log's last batch (the one with
        // `done`) go out after `done`, while the body is still open: the
        // client has its answer (everything it needs is stored) and the
        // invocation lasts until both are through or their bounded waits are
        // over (docs/performance.md, finding 2).
        let publish = async {
            if let Some(event) = completed {
                publish_bounded(deps.events.clone(), event, deps.event_wait).await;
            }
        };
        // The budget slot goes back with the turn's tokens, off the answer's path.
        let release = async {
            if let Some(slot) = exit.take_slot() {
                slot.release(usage.map_or(0, |u| u.prompt_tokens + u.completion_tokens)).await;
            }
        };
        // The session's bookkeeping the answer's write left (count, tokens,
        // the lease given back: docs/performance.md), after `done` too.
        let bookkeeping = futures::future::join_all(exit.take_after_done());
        tokio::join!(publish, sink.settle_log(), release, bookkeeping);
        turn_metrics(sink.stats(), started, usage, &turn_id).emit();
    }
    .instrument(span)
    .await
}

/// The turn's own loop (not a plan step's): it calibrates the counts, its
/// answer keeps its word and names what the app showed for the question,
/// and its calls are mended from what the user said.
fn the_turns_own(
    model_loop: &mut ModelLoop<'_>,
    agenda: Option<&crate::calendar::agenda::Agenda>,
    pack: Option<&context::LoadedPack>,
    message: &str,
) {
    model_loop.calibrates = true;
    model_loop.keeps_word = true;
    model_loop.shown = shown(agenda, pack, message);
    model_loop.reported = pack.and_then(|p| p.pack.mode.as_ref()).map(|m| m.reported()).unwrap_or_default();
    let said = agenda.map(|a| crate::tools::SeriesSaid(a.said_series));
    model_loop.mend = said.map(|m| Box::new(m) as Box<dyn crate::model_loop::MendCall>);
}

/// What the answer to the user's question must name ([`crate::claims::shown`]):
/// the calendar block's asked days, else the mode block's answer — for a
/// question of the user's own (an approval's answer or a change asked for
/// is the claims check's).
fn shown(
    agenda: Option<&crate::calendar::agenda::Agenda>,
    pack: Option<&context::LoadedPack>,
    message: &str,
) -> Option<crate::claims::shown::Shown> {
    if let Some(shown) = agenda.and_then(|a| a.shown.clone()) {
        return Some(shown);
    }
    if message.trim().is_empty() || crate::claims::echo::asks_for_a_change(message) {
        return None;
    }
    pack?.pack.mode.as_ref()?.shown()
}

/// The turn's phases, up to (not including) its `done`.
#[allow(clippy::too_many_arguments)]
async fn run(
    deps: &TurnDeps,
    user: &UserId,
    turn: &ValidTurn,
    turn_id: &TurnId,
    deadline: Instant,
    sink: &mut EventSink,
    exit: &Exit,
    budget: start::Budget,
) -> (StreamEvent, Option<TurnCompleted>) {
    let allowance = budget.allowance.clone();
    // Beside the start's round trip, not after it: awaited only once the
    // model calls a tool.
    let approval_settings = deps.tools.as_ref().and(deps.approval_settings.clone());
    let approval_settings = crate::approval::read_settings(approval_settings, user);
    let started = match start::start(deps, user, turn, turn_id, sink, exit, budget).await {
        Ok(s) => s,
        Err(refused) => return (refused_done(deps, user, turn, turn_id, refused, deadline, sink).await, None),
    };
    let sid = started.view.id.clone();
    let admission = started.admission.clone();
    // A new session still being admitted keeps its frames until admitted:
    // refused, it stores nothing, frames included.
    let admitted = admission.clone().map(|v| async move { v.wait().await.is_ok() }.boxed());
    sink.begin_log(&sid, turn_id, admitted);
    let prepared = context::prepare(deps, &started, sink).await;
    let watch = started.lease.watch(&deps.config);
    let mut agent_state = started.agent_state;
    let watched = deps.tools.as_deref().map(|t| Watched::new(t, Telemetry::current(), &prepared.offered));
    let gate = approval_gate(deps, user, &sid, &prepared.scope, approval_settings);
    let plans = watched.as_ref().and_then(|w| plan_layer(deps, w, &gate));
    let layers = watched.as_ref().map(|w| layered(plans.as_ref(), w));
    let outputs = SessionOutputs(deps.store.as_ref());
    let counting = prepared.counting(deps.counter.calibration());
    let env = LoopEnv {
        llm: deps.llm.as_ref(),
        outputs: &outputs,
        settings: settings(&deps.config),
        user,
        sid: &sid,
        turn_id,
        scope: &prepared.scope,
        limits: limits(&deps.config, deadline),
        interrupts: Interrupts {
            stopped: &watch.stopped,
            lease_lost: &watch.lease_lost,
            tokens: Some(&allowance),
            admission: admission.as_ref(),
        },
        counting: &counting,
    };
    let mut model_loop = ModelLoop::new(env, layers.as_ref().map(|l| l as &dyn TurnTools), ToolOrigin::Planner);
    model_loop.approvals = Some(&gate);
    model_loop.opening = plans.as_ref().and_then(|_| resumed_plan(turn, &started.history, turn_id));
    the_turns_own(&mut model_loop, started.agenda.as_ref(), started.pack.as_ref(), &turn.message);
    model_loop.agent_state = agent_state.as_mut().map(|(s, _)| s);
    model_loop.next_seq = started.user_message.seq + 1;
    let mut log = turn_log(deps, user, &sid, turn_id, started.persist_user);
    let ended = model_loop.run(prepared.messages, &prepared.offered, &mut log, sink).await;
    let observed = model_loop.observed;
    drop(watch);
    if let Some(over) = admission.as_ref().and_then(crate::budget::Verdict::refused) {
        // A new session refused beside its model call: nothing was relayed
        // and nothing stored (its one write waited for the admission).
        let refused = Refused::OverBudget(None, over);
        return (refused_done(deps, user, turn, turn_id, refused, deadline, sink).await, None);
    }
    match ended {
        Ok(end) => {
            let scope = watched.as_ref().and_then(Watched::shift);
            let state = finish::StateChange { state: agent_state, observed, scope };
            finish::finish(deps, user, &sid, turn_id, started.run_id, end, state, started.lease, sink).await
        }
        Err(LoopAbort(e)) => {
            let _ = sink.send(StreamEvent::error(e.code(), e.to_string(), matches!(e, StoreError::Backend(_)))).await;
            (done(DoneReason::Error, Some(&sid), turn_id, None), None)
        }
    }
}

/// The tools the model sees: the planner's layer, when offered, above the
/// watched tools.
fn layered<'a>(plans: Option<&'a PlanLayer<'a>>, watched: &'a Watched<'a>) -> Layers<'a> {
    match plans {
        Some(p) => Layers::new(vec![p, watched]),
        None => Layers::new(vec![watched]),
    }
}

/// Where the model loop writes the turn's messages; it holds the user's
/// message write so the turn's own writes follow it.
fn turn_log(
    deps: &TurnDeps,
    user: &UserId,
    sid: &SessionId,
    turn_id: &TurnId,
    persist_user: tokio::task::JoinHandle<Result<(), StoreError>>,
) -> finish::TurnLog {
    finish::TurnLog {
        store: deps.store.clone(),
        user: user.clone(),
        sid: sid.clone(),
        turn_id: turn_id.clone(),
        persist_user: Some(persist_user),
    }
}

/// The calls that wait for the user's yes ([`crate::approval`]), signed
/// for this user's session.
fn approval_gate<'a>(
    deps: &'a TurnDeps,
    user: &'a UserId,
    sid: &'a SessionId,
    scope: &TurnScope,
    settings: crate::approval::SettingsRead,
) -> crate::approval::Gate<'a> {
    let tool_scope =
        crate::tools::ToolScope::from_focus(scope.context_type, scope.entity_id.as_deref(), scope.focus.as_ref());
    crate::approval::Gate {
        signer: crate::approval::Signer::of(&deps.config),
        user,
        sid,
        ttl: deps.config.approval_ttl,
        settings,
        calendar: deps.calendar.as_ref(),
        entities: deps.entities.as_ref(),
        project: tool_scope.project().cloned(),
        zone: scope.timezone,
    }
}

/// The plan tools, when plan records are kept: their steps work with the
/// turn's own (watched) tools, and their calls wait as the turn's do.
fn plan_layer<'a>(
    deps: &'a TurnDeps,
    tools: &'a Watched<'a>,
    gate: &'a crate::approval::Gate<'a>,
) -> Option<PlanLayer<'a>> {
    Some(PlanLayer {
        store: deps.plans.as_deref()?,
        approvals: Some(gate),
        tools,
        step_concurrency: deps.config.plan_step_concurrency,
        step_max_rounds: deps.config.plan_step_max_rounds,
    })
}

/// A turn that answered a plan step's waiting calls resumes that plan
/// before the model is asked: its first call is `agent_continue_plan`
/// `continue` for that plan (made by the turn; the log shows it as the
/// planner's call, with the plan's result), so the plan goes on from the
/// answered step and the planner answers from where it got.
fn resumed_plan(
    turn: &ValidTurn,
    history: &[crate::message::StoredMessage],
    turn_id: &TurnId,
) -> Option<crate::message::ToolCall> {
    let answered = |id: &str| turn.approvals.iter().any(|a| a.approval_id == id);
    let asked = crate::approval::asked(history);
    let step = asked.iter().rev().find_map(|a| a.pending.step.as_ref().filter(|_| answered(&a.pending.approval_id)))?;
    let arguments = serde_json::json!({"decision": "continue", "plan_id": step.plan_id}).to_string();
    Some(crate::message::ToolCall {
        id: format!("call_resume_{turn_id}"),
        kind: "function".into(),
        function: crate::message::FunctionCall { name: crate::tools::plan::AGENT_CONTINUE_PLAN.into(), arguments },
    })
}

fn settings(cfg: &Config) -> Settings<'_> {
    Settings { model: &cfg.llm.model, max_tokens: cfg.llm.max_tokens, inline_bytes: cfg.tool_output_inline_bytes }
}

/// Tool outputs kept apart, in the session's store.
struct SessionOutputs<'a>(&'a dyn SessionStore);

#[async_trait::async_trait]
impl ToolOutputs for SessionOutputs<'_> {
    async fn put_tool_output(
        &self,
        user: &UserId,
        session: &SessionId,
        call_id: &str,
        content: &str,
    ) -> Result<(), StoreError> {
        crate::session::store::ToolOutputs::put_tool_output(self.0, user, session, call_id, content).await
    }

    async fn tool_output(
        &self,
        user: &UserId,
        session: &SessionId,
        call_id: &str,
    ) -> Result<Option<String>, StoreError> {
        crate::session::store::ToolOutputs::tool_output(self.0, user, session, call_id).await
    }
}

/// Keep the margin to persist and end cleanly, but never more than a tenth of
/// the time there is: a short-timeout function would otherwise stop at once.
/// Tool calls already running may use half of what is left after that.
fn limits(cfg: &Config, deadline: Instant) -> Limits {
    let left = deadline.saturating_duration_since(Instant::now());
    let margin = cfg.deadline_margin.min(left / 10);
    Limits {
        max_rounds: cfg.tool_max_rounds,
        tool_concurrency: cfg.tool_concurrency,
        stop_at: deadline - margin,
        hard_stop: deadline - margin / 2,
    }
}

/// The `done` (and `error` before it) of a turn that did not start.
async fn refused_done(
    deps: &TurnDeps,
    user: &UserId,
    turn: &ValidTurn,
    turn_id: &TurnId,
    refused: Refused,
    deadline: Instant,
    sink: &mut EventSink,
) -> StreamEvent {
    match refused {
        Refused::Retry { session } => {
            let run = turn.run_id.as_ref().expect("only a given run id repeats");
            retry::answer(deps, user, &session, run, deadline, sink).await
        }
        Refused::Gone(sid) => done(DoneReason::Stopped, Some(&sid), turn_id, None),
        Refused::OverBudget(sid, over) => {
            // The message says which budget and in how many seconds to retry
            // (docs/budgets.md); `GET /me/usage` says the same.
            let _ = sink.send(StreamEvent::error("quota_exceeded", over.to_string(), true)).await;
            done(DoneReason::Error, sid.as_ref(), turn_id, None)
        }
        Refused::NothingToRegenerate(sid) => {
            let message = "this session has no user message to answer again";
            let _ = sink.send(StreamEvent::error("nothing_to_regenerate", message, false)).await;
            done(DoneReason::Error, Some(&sid), turn_id, None)
        }
        Refused::Approval(sid, err) => {
            let _ = sink.send(StreamEvent::error(err.code(), err.to_string(), false)).await;
            done(DoneReason::Error, Some(&sid), turn_id, None)
        }
        Refused::Store(sid, err) => {
            tracing::warn!(code = err.code(), error = %err, "turn refused");
            let retryable = matches!(err, StoreError::Busy | StoreError::Backend(_));
            let _ = sink.send(StreamEvent::error(err.code(), err.to_string(), retryable)).await;
            done(DoneReason::Error, sid.as_ref(), turn_id, None)
        }
    }
}

fn done(reason: DoneReason, sid: Option<&SessionId>, turn_id: &TurnId, usage: Option<Usage>) -> StreamEvent {
    StreamEvent::Done { reason, session_id: sid.cloned(), turn_id: turn_id.clone(), usage, replayed: false }
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
