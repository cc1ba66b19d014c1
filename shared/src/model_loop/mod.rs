//! The model loop: ask the model (streaming its text to the client), run the
//! calls it makes, store the round, ask again — until it answers in words,
//! the rounds run out, or something ends it. It runs on a [`LoopEnv`] (the
//! model, who and where, limits, what interrupts it) with a [`TurnTools`]
//! layer, and stores its rounds through a [`RoundLog`]. It knows nothing of
//! a turn's phases nor of plans: a layer that needs nested loops (a plan's
//! steps, [`crate::planner`]) is handed a [`LoopRunner`].
//!
//! Contract:
//! - every call in the log gets exactly one result, and stored arguments are
//!   always valid JSON: a call cut off mid-arguments (or malformed) is stored
//!   with `{}` and a result that says why it did not run and what it held, so
//!   the next request passes strict model servers;
//! - a call whose `url` names a host the conversation never gave (only the
//!   model wrote it), or that repeats an earlier call of the same answer, is
//!   refused before it runs ([`sources`]);
//! - a round's calls run concurrently under a cap; calls a layer runs with the
//!   stream ([`TurnTools::streams`]) run after the others, one at a time, and
//!   their events come before their `tool_result`;
//! - a call that started is awaited (within a grace) when the loop is stopped,
//!   cut off by the deadline, the lease lost or left by the client: its real
//!   result is logged and its `entity_patch` sent; only calls never started
//!   get a synthetic one;
//! - each completed round (calls + results) is stored before the next model
//!   request; what is not stored yet is handed back in [`LoopEnd`];
//! - the same loop runs the turn and each nested loop (its own context, tools,
//!   round limit, origin and [`ApprovalGate`]); every tool event carries the
//!   loop's origin;
//! - calls that wait for the user's yes end the loop with them waiting
//!   ([`ApprovalGate`]); so do a nested loop's, surfaced by the call run
//!   with the stream that ran it ([`StreamedRun::waiting`]): the turn's log
//!   gets them as a message of waiting calls after that call's result.
//!
//! Rooms: [`layer`] (the tool-layer trait and its composition), [`round`]
//! (one round's calls), [`ask`] (one model request), [`outputs`] (large
//! outputs kept apart), [`call_signals`] (what calls tell the turn),
//! [`sources`] (calls refused before they run: a `url` the conversation
//! never gave, a call said twice in one answer) and
//! [`telemetry`] (the turn's dev-only measurements).

pub mod ask;
pub mod call_signals;
pub mod layer;
pub mod outputs;
pub mod repetition;
pub mod round;
mod sources;
pub mod telemetry;
#[cfg(test)]
mod tests;
mod waiting;
mod word;

pub use ask::AskError;
pub use layer::{Layers, StreamCx, StreamedRun, ToolRun, TurnScope, TurnTools};
pub use outputs::ToolOutputs;

use crate::agent_state::AgentState;
use crate::ids::{SessionId, TurnId, UserId};
use crate::llm::{Llm, LlmError};
use crate::message::{ChatMessage, PendingApproval, Role, StoredMessage, ToolCall, Usage};
use crate::sse::{AgentActivity, EventSink, StreamEvent, ToolOrigin};
use crate::store::StoreError;
use round::CallEnd;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long running tool calls may finish after the loop was interrupted.
pub const TOOL_GRACE: Duration = Duration::from_secs(10);

/// How the model part of a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Complete,
    /// The user pressed Stop, or the client went away.
    Stopped,
    /// The answer was cut off: the model's token limit, or a loop the
    /// turn stopped ([`repetition`]).
    CutOff(crate::message::CutReason),
    Failed {
        code: &'static str,
        message: String,
        retryable: bool,
    },
}

impl Outcome {
    fn deadline() -> Outcome {
        Outcome::Failed {
            code: "deadline_exceeded",
            message: "the turn ran out of time; the partial answer was kept".into(),
            retryable: true,
        }
    }

    fn quota_exceeded() -> Outcome {
        Outcome::Failed {
            code: "quota_exceeded",
            message: "the day's token budget is spent; the partial answer was kept".into(),
            retryable: false,
        }
    }

    fn lease_lost() -> Outcome {
        Outcome::Failed {
            code: "session_lease_lost",
            message: "another turn took over this session".into(),
            retryable: false,
        }
    }

    fn model(e: &LlmError) -> Outcome {
        Outcome::Failed { code: e.code(), message: e.to_string(), retryable: e.is_transient() }
    }

    /// Whether this cut the whole turn off (Stop, the client gone, the
    /// deadline, the lease lost) rather than failing what was running.
    pub fn interrupts(&self) -> bool {
        matches!(self, Outcome::Stopped | Outcome::Failed { code: "deadline_exceeded" | "session_lease_lost", .. })
    }

    /// Why calls without a result have none, in the words of their result.
    pub fn why(&self) -> &'static str {
        match self {
            Outcome::Complete => "no more tool rounds in this turn",
            Outcome::Stopped => "the turn was stopped",
            Outcome::CutOff(_) => "the answer was cut off",
            Outcome::Failed { code: "deadline_exceeded", .. } => "the turn ran out of time",
            Outcome::Failed { .. } => "the turn ended with an error",
        }
    }
}

/// When the loop must stop: model rounds, tool concurrency, time.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_rounds: usize,
    pub tool_concurrency: usize,
    /// No new model request or tool call after this.
    pub stop_at: Instant,
    /// Running tool calls are given up at this point at the latest.
    pub hard_stop: Instant,
}

/// What interrupts the loop besides the client leaving and the deadline.
#[derive(Clone, Copy)]
pub struct Interrupts<'a> {
    /// The user pressed Stop.
    pub stopped: &'a CancellationToken,
    /// Another turn took the session over.
    pub lease_lost: &'a CancellationToken,
    /// The user's token budget for this turn ([`crate::budget`]): requests
    /// are capped at what is left, and once spent the loop ends
    /// `quota_exceeded` with what it has (`None`: no budget).
    pub tokens: Option<&'a crate::budget::TokenAllowance>,
    /// A new session's budget admission, still running beside the first
    /// model request: no text is relayed before it admits; refused, the
    /// request ends at once (`None`: decided before the loop).
    pub admission: Option<&'a crate::budget::Verdict>,
}

/// What every request names: the model, its answer's cap; and the largest
/// tool output the log keeps inline.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    pub model: &'a str,
    pub max_tokens: Option<u32>,
    pub inline_bytes: usize,
}

/// Counting what the model was asked: our estimate of a request's usage when
/// the server reports none, and the process's calibration of our counts
/// against the model's tokens (the context phase counted the first request).
pub trait Counting: Send + Sync {
    /// Our count of a request (`messages`, with tool definitions when
    /// `tools`) and of its answer `reply`, in the model's tokens.
    fn estimate(&self, messages: &[ChatMessage], reply: &str, tools: bool) -> Usage;
    /// The model's own count of the first request's prompt.
    fn calibrate(&self, prompt_tokens: u64);
}

/// Where the loop's rounds go: the turn's log, or a plan step's record.
#[async_trait::async_trait]
pub trait RoundLog: Send {
    /// Everything before the first answer is stored (the user message).
    async fn ready(&mut self) -> Result<(), StoreError>;
    /// Stores one finished round: the assistant's calls and their results.
    async fn store_round(&mut self, messages: &[StoredMessage]) -> Result<(), StoreError>;
}

/// How the loop ended: the messages not stored yet (the last assistant
/// message first, then its calls' results), why it ended, the usage.
#[derive(Debug)]
pub struct LoopEnd {
    pub unsaved: Vec<StoredMessage>,
    pub outcome: Outcome,
    pub usage: Usage,
}

/// The loop could not go on and nothing more may be stored (the user message
/// was not stored).
#[derive(Debug)]
pub struct LoopAbort(pub StoreError);

/// Decides which calls of a round wait for the user's yes
/// ([`crate::approval`]): the loop runs the round's other calls, announces
/// the waiting ones (`approval_required`) and ends the turn with them
/// waiting, their approvals on the stored assistant message. The turn's own
/// loop and a plan step's executor ask the same gate (one policy).
#[async_trait::async_trait]
pub trait ApprovalGate: Send + Sync {
    /// The model began a tool call: start what [`ApprovalGate::waits`] will
    /// need, so that it is ready (or on its way) by then.
    fn prefetch(&self) {}
    /// Per call, in call order: `Some` when it must wait.
    async fn waits(&self, calls: &[ToolCall]) -> Vec<Option<PendingApproval>>;
}

/// What a loop and the loops nested in it share.
#[derive(Clone, Copy)]
pub struct LoopEnv<'a> {
    pub llm: &'a dyn Llm,
    pub outputs: &'a dyn ToolOutputs,
    pub settings: Settings<'a>,
    pub user: &'a UserId,
    pub sid: &'a SessionId,
    pub turn_id: &'a TurnId,
    pub scope: &'a TurnScope,
    pub limits: Limits,
    pub interrupts: Interrupts<'a>,
    pub counting: &'a dyn Counting,
}

/// A nested loop, as a layer asks for one: its own context, tools, round
/// limit, origin and approval gate; the rest is the outer loop's.
pub struct Nested<'a> {
    pub messages: Vec<ChatMessage>,
    pub tools: Option<&'a dyn TurnTools>,
    pub offered: &'a [serde_json::Value],
    pub max_rounds: usize,
    pub origin: ToolOrigin,
    pub approvals: Option<&'a dyn ApprovalGate>,
}

/// Runs loops for a layer, on the loop's model and within its limits.
#[async_trait::async_trait]
pub trait LoopRunner: Send + Sync {
    /// A nested loop, to its end; it starts at seq 1 and keeps no agent state.
    async fn run(&self, nested: Nested<'_>, log: &mut dyn RoundLog, sink: &mut EventSink)
        -> Result<LoopEnd, LoopAbort>;

    /// One request without tools, its whole text: not streamed, not counted
    /// in the usage, given up at the loop's stop time (a plan's review).
    async fn ask(&self, messages: Vec<ChatMessage>) -> Result<String, AskError>;
}

#[async_trait::async_trait]
impl LoopRunner for LoopEnv<'_> {
    async fn run(
        &self,
        nested: Nested<'_>,
        log: &mut dyn RoundLog,
        sink: &mut EventSink,
    ) -> Result<LoopEnd, LoopAbort> {
        let env = LoopEnv { limits: Limits { max_rounds: nested.max_rounds, ..self.limits }, ..*self };
        let mut inner = ModelLoop::new(env, nested.tools, nested.origin);
        inner.approvals = nested.approvals;
        inner.run(nested.messages, nested.offered, log, sink).await
    }

    async fn ask(&self, messages: Vec<ChatMessage>) -> Result<String, AskError> {
        ask::ask_once(self, messages).await
    }
}

/// One loop: what it shares, and its own state.
pub struct ModelLoop<'a> {
    pub env: LoopEnv<'a>,
    pub tools: Option<&'a dyn TurnTools>,
    /// Whose calls these are, on every tool event.
    pub origin: ToolOrigin,
    /// Decides which calls wait for the user's yes.
    pub approvals: Option<&'a dyn ApprovalGate>,
    /// A call made before the first model request, as if the model had
    /// made it (a plan that the user's answer to its approval resumes).
    pub opening: Option<ToolCall>,
    /// Calls of nested loops that wait for the user's yes, surfaced by the
    /// calls run with the stream this round.
    surfaced: Vec<(ToolCall, PendingApproval)>,
    /// The first request's reported usage calibrates our counts (only the
    /// turn's own loop: the context phase counted its first request).
    pub calibrates: bool,
    /// Tool results are folded into it as they come.
    pub agent_state: Option<&'a mut AgentState>,
    /// The answer is checked against the turn's write steps ([`claims`]):
    /// only the turn's own loop (a plan step's executor reports to it).
    pub keeps_word: bool,
    /// What the app showed the model as the answer to the user's question
    /// (a calendar question's named days and their events): an answer that
    /// leaves it out is asked again ([`crate::claims::shown`]).
    pub shown: Option<crate::claims::shown::Shown>,
    /// Mends calls from what the user said before they are gated and run.
    pub mend: Option<Box<dyn MendCall>>,
    /// Titles of changes the context reports as made before this turn (a
    /// brief's "changed"): an answer naming them as done claims nothing.
    pub reported: Vec<String>,
    /// A tool result was folded into the agent state.
    pub observed: bool,
    /// Seq of the next message of this loop.
    pub next_seq: u64,
    pub usage: Usage,
}

impl<'a> ModelLoop<'a> {
    /// A loop from seq 1, without agent state, gate or calibration.
    pub fn new(env: LoopEnv<'a>, tools: Option<&'a dyn TurnTools>, origin: ToolOrigin) -> ModelLoop<'a> {
        ModelLoop {
            env,
            tools,
            origin,
            approvals: None,
            opening: None,
            surfaced: Vec::new(),
            calibrates: false,
            agent_state: None,
            keeps_word: false,
            shown: None,
            mend: None,
            reported: Vec::new(),
            observed: false,
            next_seq: 1,
            usage: Usage::default(),
        }
    }

    pub async fn run(
        &mut self,
        mut messages: Vec<ChatMessage>,
        offered: &[serde_json::Value],
        log: &mut dyn RoundLog,
        sink: &mut EventSink,
    ) -> Result<LoopEnd, LoopAbort> {
        let max_rounds = self.env.limits.max_rounds;
        let mut round = 0;
        let mut nudged = false;
        loop {
            // The last round offers no tools, so the model has to answer in words.
            let tools = if round < max_rounds { offered.to_vec() } else { vec![] };
            let mut answer = match self.opening.take() {
                Some(call) => ask::Answer { text: String::new(), calls: vec![call], outcome: Outcome::Complete },
                None => self.ask(&messages, tools, round, sink).await,
            };
            // A length cut at the tokens the budget left is the budget's, not the model's.
            let ended =
                matches!(answer.outcome, Outcome::Complete | Outcome::CutOff(crate::message::CutReason::Length));
            if ended && self.budget_spent() {
                answer.outcome = Outcome::quota_exceeded();
            }
            if round == 0 {
                // The user message must be stored before anything that follows it.
                log.ready().await.map_err(LoopAbort)?;
            }
            let (assistant, refusals) = self.assistant_message(answer.text, answer.calls, &messages);
            let calls = assistant.tool_calls.clone();
            let can_run = self.tools.is_some() && round < max_rounds;
            let said = assistant.content.as_deref().unwrap_or_default();
            let described = match (&answer.outcome, calls.is_empty() && round < max_rounds) {
                (Outcome::Complete, true) => self.described_call(said, &messages, offered, nudged),
                _ => None,
            };
            if let Some(nudge) = described {
                nudged = true;
                round += 1;
                if let Err(e) = self.ask_for_the_call(assistant, &nudge, &mut messages, log, sink).await {
                    tracing::error!(code = e.code(), error = %e, "withdrawn answer not stored");
                    let message = format!("the answer could not be saved: {e}");
                    return Ok(self.end(vec![], Outcome::Failed { code: e.code(), message, retryable: true }));
                }
                continue;
            }
            let outcome = match answer.outcome {
                Outcome::Complete if calls.is_empty() => {
                    return Ok(self.answered(assistant, &messages, offered, round, sink).await)
                }
                Outcome::Complete if can_run => None,
                outcome => Some(outcome),
            };
            if let Some(outcome) = outcome {
                let results = self.no_results(&calls, &refusals, &outcome);
                return Ok(self.end([vec![assistant], results].concat(), outcome));
            }
            round += 1;
            if let Some(waits) = self.waiting(&calls, &refusals).await {
                return Ok(self.wait_for_user(assistant, &refusals, waits, sink).await);
            }
            let (results, interrupted) = self.tool_round(&calls, &refusals, sink).await;
            let round_messages = [vec![assistant], results].concat();
            if let Some(outcome) = interrupted {
                return Ok(self.end(round_messages, outcome));
            }
            if !self.surfaced.is_empty() {
                return Ok(self.surface_waiting(round_messages, sink).await);
            }
            if let Some(answer) = self.tools.and_then(|t| t.asked_user()) {
                return Ok(self.asked_user(round_messages, answer, sink).await);
            }
            if let Err(e) = log.store_round(&round_messages).await {
                tracing::error!(code = e.code(), error = %e, "tool round not stored");
                let message = format!("the tool round could not be saved: {e}");
                return Ok(self.end(round_messages, Outcome::Failed { code: e.code(), message, retryable: true }));
            }
            messages.extend(round_messages.iter().map(StoredMessage::to_chat));
            let _ = sink.send(StreamEvent::AgentState { state: AgentActivity::Thinking, details: None }).await;
        }
    }

    /// Whether this loop's tokens spent the turn's budget.
    fn budget_spent(&self) -> bool {
        let used = self.usage.prompt_tokens + self.usage.completion_tokens;
        self.env.interrupts.tokens.is_some_and(|t| t.spent_by(used))
    }

    fn end(&self, unsaved: Vec<StoredMessage>, outcome: Outcome) -> LoopEnd {
        LoopEnd { unsaved, outcome, usage: self.usage }
    }

    fn message(&mut self, role: Role, content: String) -> StoredMessage {
        let env = &self.env;
        let m = StoredMessage::new(
            env.sid.clone(),
            self.next_seq,
            env.turn_id.clone(),
            role,
            (!content.is_empty()).then_some(content),
        );
        self.next_seq += 1;
        m
    }

    /// The assistant message as stored, with arguments that are valid JSON,
    /// and per call why it must not run (its arguments were not valid JSON).
    fn assistant_message(
        &mut self,
        text: String,
        calls: Vec<ToolCall>,
        conversation: &[ChatMessage],
    ) -> (StoredMessage, Vec<Option<ToolRun>>) {
        let mut assistant = self.message(Role::Assistant, text);
        let (mut calls, mut refusals): (Vec<ToolCall>, Vec<Option<ToolRun>>) =
            calls.into_iter().map(valid_arguments).unzip();
        for (call, refusal) in calls.iter_mut().zip(refusals.iter_mut()).filter(|(_, r)| r.is_none()) {
            if let Some(why) = self.mend.as_ref().and_then(|m| m.mend(call)) {
                tracing::info!(tool = %call.function.name, why, "call mended from the user's words");
            }
            *refusal = sources::unsourced(call, conversation);
        }
        let refused: Vec<bool> = refusals.iter().map(Option::is_some).collect();
        for (refusal, repeat) in refusals.iter_mut().zip(sources::repeats(&calls, &refused)) {
            if refusal.is_none() {
                *refusal = repeat;
            }
        }
        assistant.tool_calls = calls;
        (assistant, refusals)
    }

    /// Results for calls that will not run: refused ones say why, the rest
    /// say the turn ended first.
    fn no_results(
        &mut self,
        calls: &[ToolCall],
        refusals: &[Option<ToolRun>],
        outcome: &Outcome,
    ) -> Vec<StoredMessage> {
        let ends = refusals.iter().map(|r| r.clone().map_or(CallEnd::NotStarted, CallEnd::Ran)).collect();
        self.result_messages(calls, ends, outcome.why())
    }

    fn result_messages(&mut self, calls: &[ToolCall], ends: Vec<CallEnd>, why: &str) -> Vec<StoredMessage> {
        calls
            .iter()
            .zip(ends)
            .map(|(call, end)| {
                let (content, operations) = match end {
                    CallEnd::Ran(run) => (run.content, crate::sse::settled_operations(&run.events)),
                    end => (end.missing_result(why).expect("not a ran call"), vec![]),
                };
                let mut m = self.message(Role::Tool, content);
                m.tool_call_id = Some(call.id.clone());
                m.operations = operations;
                m
            })
            .collect()
    }
}

/// Mends a call's arguments from what the user said, before the call is
/// gated, run and stored (the stored call is the mended one): the local
/// model wrote an `until` it made up for "six lessons".
pub trait MendCall: Send + Sync {
    /// Why the call was changed, when it was.
    fn mend(&self, call: &mut ToolCall) -> Option<&'static str>;
}

/// Arguments the model left invalid (cut off mid-stream, or malformed) are
/// stored as `{}`, and the call is refused with a result that quotes them
/// (the registry's `invalid_arguments` shape): strict servers reject a history
/// holding invalid JSON arguments. Empty arguments are an argument-less call
/// (some servers send nothing for `{}`).
fn valid_arguments(mut call: ToolCall) -> (ToolCall, Option<ToolRun>) {
    let args = call.function.arguments.trim();
    if args.is_empty() {
        call.function.arguments = "{}".into();
        return (call, None);
    }
    let why = match serde_json::from_str::<serde_json::Value>(args) {
        Ok(v) if v.is_object() => return (call, None),
        Ok(_) => "arguments must be a JSON object".to_string(),
        Err(e) => format!("arguments are not valid JSON ({e}): the call was cut off or malformed, so it did not run"),
    };
    let raw = std::mem::replace(&mut call.function.arguments, "{}".into());
    let received: String = raw.chars().take(2_000).collect();
    let content = serde_json::json!({
        "error": {"code": "invalid_arguments", "message": why},
        "arguments_received": received,
    })
    .to_string();
    let run = ToolRun { ok: false, preview: why, content, events: vec![] };
    (call, Some(run))
}
