//! Phase 3 of a turn: the model-and-tools loop. Ask the model (streaming its
//! text to the client), run the calls it makes, store the round, ask again —
//! until it answers in words, the rounds run out, or something ends it.
//!
//! Contract:
//! - every call in the log gets exactly one result, and stored arguments are
//!   always valid JSON: a call cut off mid-arguments (or malformed) is stored
//!   with `{}` and a result that says why it did not run and what it held, so
//!   the next request passes strict model servers;
//! - a call that started is awaited (within a grace) when the turn is stopped,
//!   cut off by the deadline or left by the client: its real result is logged
//!   and its `entity_patch` sent; only calls never started get a synthetic one;
//! - each completed round (calls + results) is stored before the next model
//!   request; what is not stored yet is handed to `finish` in [`LoopEnd`].
//! - the same loop runs the turn (origin `planner`) and each plan step's
//!   executor (origin `plan_step`, its own context, tools and round limit, a
//!   [`CallGate`] holding back what needs the user's confirmation); every
//!   tool event carries the loop's origin.

use super::lease::Watch;
use super::tools::{keep_apart, observe, run_calls, CallEnd, CallRunner, ToolRun, TurnScope, TurnTools};
use crate::agent_state::AgentState;
use crate::config::Config;
use crate::context::{message_tokens, CalibrationLine, TokenCalibration, TokenCounter, REPLY_PRIMING};
use crate::ids::{SessionId, TurnId, UserId};
use crate::llm::{ChatRequest, Llm, LlmError, LlmEvent, ToolCallAccumulator};
use crate::message::{ChatMessage, Role, StoredMessage, ToolCall, Usage};
use crate::plan::run::PlanCtx;
use crate::plan::ToolOrigin;
use crate::sse::{AgentActivity, EventSink, StreamEvent};
use crate::session::store::ToolOutputs;
use crate::store::StoreError;
use crate::tools::plan::is_plan_tool;
use futures::StreamExt;
use std::time::Duration;
use tokio::time::Instant;

/// How long running tool calls may finish after the turn was interrupted.
pub const TOOL_GRACE: Duration = Duration::from_secs(10);

/// How the model part of a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Complete,
    /// The user pressed Stop, or the client went away.
    Stopped,
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

    /// Why calls without a result have none, in the words of their result.
    pub fn why(&self) -> &'static str {
        match self {
            Outcome::Complete => "no more tool rounds in this turn",
            Outcome::Stopped => "the turn was stopped",
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
pub struct LoopEnd {
    pub unsaved: Vec<StoredMessage>,
    pub outcome: Outcome,
    pub usage: Usage,
}

/// The loop could not go on and nothing more may be stored (the user message
/// was not stored).
pub struct LoopAbort(pub StoreError);

/// Counting what the model was asked, for usage when it reports none, and for
/// the process's calibration of our counts against its tokens.
pub struct Counting<'a> {
    pub counter: TokenCounter,
    pub line: CalibrationLine,
    pub calibration: &'a TokenCalibration,
    pub tools_tokens: u64,
    /// Our count of the first request.
    pub counted: u64,
    /// Whether the first request's reported usage calibrates our counts (the
    /// turn's own loop; a plan step's executor did not count its request).
    pub calibrate: bool,
}

/// Holds calls back before they run: a plan step's deletes and bulk updates
/// wait for the user's confirmation ([`crate::plan::run`]). `Some(result)`
/// for each call held, in call order: the result the model reads instead.
pub trait CallGate: Send + Sync {
    fn hold(&self, calls: &[ToolCall]) -> Vec<Option<ToolRun>>;
}

/// Everything one loop runs on.
pub struct ModelLoop<'a> {
    pub llm: &'a dyn Llm,
    pub tools: Option<&'a dyn TurnTools>,
    pub store: &'a dyn ToolOutputs,
    pub cfg: &'a Config,
    pub user: &'a UserId,
    pub sid: &'a SessionId,
    pub turn_id: &'a TurnId,
    pub scope: &'a TurnScope,
    pub limits: Limits,
    pub watch: &'a Watch,
    pub counting: Counting<'a>,
    /// Tool results are folded into it as they come.
    pub agent_state: Option<&'a mut AgentState>,
    pub observed: bool,
    /// Seq of the next message of this turn.
    pub next_seq: u64,
    pub usage: Usage,
    /// Whose calls these are, on every tool event.
    pub origin: ToolOrigin,
    /// Plans, for the planner's loop (`None` in an executor: plans never nest).
    pub plans: Option<PlanCtx<'a>>,
    pub gate: Option<&'a dyn CallGate>,
}

impl ModelLoop<'_> {
    pub async fn run(
        &mut self,
        mut messages: Vec<ChatMessage>,
        offered: &[serde_json::Value],
        log: &mut dyn RoundLog,
        sink: &mut EventSink,
    ) -> Result<LoopEnd, LoopAbort> {
        let mut round = 0;
        loop {
            // The last round offers no tools, so the model has to answer in words.
            let tools = if round < self.limits.max_rounds { offered.to_vec() } else { vec![] };
            let answer = self.ask(&messages, tools, round, sink).await;
            if round == 0 {
                // The user message must be stored before anything that follows it.
                log.ready().await.map_err(LoopAbort)?;
            }
            let (assistant, refusals) = self.assistant_message(answer.text, answer.calls);
            let calls = assistant.tool_calls.clone();
            let can_run = self.tools.is_some() && round < self.limits.max_rounds;
            let outcome = match answer.outcome {
                Outcome::Complete if calls.is_empty() => return Ok(self.end(vec![assistant], Outcome::Complete)),
                Outcome::Complete if !can_run => {
                    let results = self.no_results(&calls, &refusals, &Outcome::Complete);
                    return Ok(self.end([vec![assistant], results].concat(), Outcome::Complete));
                }
                Outcome::Complete => None,
                cut => Some(cut),
            };
            if let Some(outcome) = outcome {
                let results = self.no_results(&calls, &refusals, &outcome);
                return Ok(self.end([vec![assistant], results].concat(), outcome));
            }
            round += 1;
            let (results, interrupted) = self.tool_round(&calls, &refusals, sink).await;
            let round_messages = [vec![assistant], results].concat();
            if let Some(outcome) = interrupted {
                return Ok(self.end(round_messages, outcome));
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

    fn end(&self, unsaved: Vec<StoredMessage>, outcome: Outcome) -> LoopEnd {
        LoopEnd { unsaved, outcome, usage: self.usage }
    }

    fn message(&mut self, role: Role, content: String) -> StoredMessage {
        let m = StoredMessage::new(
            self.sid.clone(),
            self.next_seq,
            self.turn_id.clone(),
            role,
            (!content.is_empty()).then_some(content),
        );
        self.next_seq += 1;
        m
    }

    /// The assistant message as stored, with arguments that are valid JSON,
    /// and per call why it must not run (its arguments were not valid JSON).
    fn assistant_message(&mut self, text: String, calls: Vec<ToolCall>) -> (StoredMessage, Vec<Option<ToolRun>>) {
        let mut assistant = self.message(Role::Assistant, text);
        let (calls, mut refusals): (Vec<ToolCall>, Vec<Option<ToolRun>>) =
            calls.into_iter().map(valid_arguments).unzip();
        if let Some(gate) = self.gate {
            for (refusal, held) in refusals.iter_mut().zip(gate.hold(&calls)) {
                if refusal.is_none() {
                    *refusal = held;
                }
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
                let content = match end {
                    CallEnd::Ran(run) => run.content,
                    end => end.missing_result(why).expect("not a ran call"),
                };
                let mut m = self.message(Role::Tool, content);
                m.tool_call_id = Some(call.id.clone());
                m
            })
            .collect()
    }
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

/// What one model request produced.
struct Answer {
    text: String,
    calls: Vec<ToolCall>,
    outcome: Outcome,
}

impl ModelLoop<'_> {
    /// One model request, its text streamed to the client as it comes.
    async fn ask(
        &mut self,
        messages: &[ChatMessage],
        tools: Vec<serde_json::Value>,
        round: usize,
        sink: &mut EventSink,
    ) -> Answer {
        let offered_tools = !tools.is_empty();
        let request = ChatRequest {
            model: self.cfg.llm.model.clone(),
            messages: messages.to_vec(),
            tools,
            max_tokens: self.cfg.llm.max_tokens,
            temperature: None,
        };
        let (answer, reported) = stream_model(self.llm, request, sink, self.limits.stop_at, self.watch).await;
        self.count_usage(messages, &answer.text, reported, offered_tools, round);
        answer
    }

    fn count_usage(
        &mut self,
        messages: &[ChatMessage],
        text: &str,
        reported: Option<Usage>,
        tools: bool,
        round: usize,
    ) {
        let c = &self.counting;
        match reported {
            Some(u) => {
                if round == 0 && c.calibrate {
                    // The first request is exactly what the context phase counted.
                    c.calibration.observe(c.tools_tokens, c.counted, u.prompt_tokens);
                }
                self.usage.add(&u)
            }
            // Some servers send no usage on a streamed answer (llama-cpp-python
            // ignores `stream_options.include_usage`): our own count stands in.
            None => {
                let counted = messages.iter().map(|m| message_tokens(m, &c.counter)).sum::<u64>() + REPLY_PRIMING;
                let prompt = if tools { c.line.model_tokens(counted) } else { counted };
                let completion = c.counter.count(text);
                self.usage.add(&Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: prompt + completion,
                })
            }
        }
    }

    /// Runs one round's calls and sends what they did; the result messages in
    /// call order, and what interrupted the round, if anything.
    async fn tool_round(
        &mut self,
        calls: &[ToolCall],
        refusals: &[Option<ToolRun>],
        sink: &mut EventSink,
    ) -> (Vec<StoredMessage>, Option<Outcome>) {
        for c in calls {
            let event = StreamEvent::ToolCall { tool_call: c.clone(), origin: self.origin.clone() };
            if sink.send(event).await.is_err() {
                break;
            }
        }
        let _ = sink.send(StreamEvent::AgentState { state: AgentActivity::Executing, details: None }).await;
        let tools = self.tools.expect("a tool round has tools");
        let runner = CallRunner { tools, store: self.store, user: self.user, sid: self.sid, scope: self.scope };
        // Plan calls run after the others, one at a time, with the stream.
        let is_plan = |c: &ToolCall| self.plans.is_some() && is_plan_tool(&c.function.name);
        let runnable: Vec<ToolCall> =
            calls.iter().zip(refusals).filter(|(c, r)| r.is_none() && !is_plan(c)).map(|(c, _)| c.clone()).collect();
        let (ends, mut interrupted) = {
            let interrupt = interruption(sink, self.watch, self.limits.stop_at);
            let (cap, hard_stop) = (self.limits.tool_concurrency, self.limits.hard_stop);
            run_calls(&runner, &runnable, cap, interrupt, TOOL_GRACE, hard_stop).await
        };
        let mut ran = ends.into_iter();
        let mut ends = Vec::with_capacity(calls.len());
        for (call, refusal) in calls.iter().zip(refusals) {
            let end = match refusal {
                Some(r) => CallEnd::Ran(r.clone()),
                None if self.plans.is_some() && is_plan_tool(&call.function.name) => match interrupted {
                    Some(_) => CallEnd::NotStarted,
                    None => {
                        let (run, cut) = crate::plan::run::plan_call(self, call, sink).await;
                        interrupted = cut;
                        CallEnd::Ran(run)
                    }
                },
                None => ran.next().expect("one end per runnable call"),
            };
            ends.push(match end {
                CallEnd::Ran(run) => CallEnd::Ran(self.ran(call, run, sink).await),
                other => other,
            });
        }
        let why = interrupted.as_ref().map_or("the turn ended", Outcome::why);
        (self.result_messages(calls, ends, why), interrupted)
    }

    /// A call that ran: its events to the client, its result into the agent
    /// state, and a large output kept apart (the log gets a preview).
    async fn ran(
        &mut self,
        call: &ToolCall,
        mut run: super::tools::ToolRun,
        sink: &mut EventSink,
    ) -> super::tools::ToolRun {
        if let Some(state) = self.agent_state.as_deref_mut() {
            observe(state, call, &run);
            self.observed = true;
        }
        for ev in std::mem::take(&mut run.events) {
            let _ = sink.send(ev).await;
        }
        let _ = sink
            .send(StreamEvent::ToolResult {
                tool_call_id: call.id.clone(),
                name: call.function.name.clone(),
                ok: run.ok,
                preview: run.preview.clone(),
                origin: self.origin.clone(),
            })
            .await;
        let content = std::mem::take(&mut run.content);
        run.content = match keep_apart(self.store, self.user, self.sid, call, content, self.cfg).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "tool output not stored apart");
                ToolRun::failed("the tool's output was too large to keep").content
            }
        };
        run
    }
}

/// Resolves when the turn must stop taking new steps: Stop, the client gone,
/// the lease lost, or the deadline.
async fn interruption(sink: &EventSink, watch: &Watch, stop_at: Instant) -> Outcome {
    tokio::select! {
        biased;
        _ = sink.closed() => Outcome::Stopped,
        _ = watch.stopped.cancelled() => Outcome::Stopped,
        _ = watch.lease_lost.cancelled() => Outcome::lease_lost(),
        _ = tokio::time::sleep_until(stop_at) => Outcome::deadline(),
    }
}

/// Streams the model's answer to the client. Returns the text produced (also
/// when cut short), the tool calls it assembled, how it ended, and the usage
/// it reported.
async fn stream_model(
    llm: &dyn Llm,
    request: ChatRequest,
    sink: &mut EventSink,
    stop_at: Instant,
    watch: &Watch,
) -> (Answer, Option<Usage>) {
    let mut text = String::new();
    let mut calls = ToolCallAccumulator::new();
    let mut usage = None;
    let opened = tokio::select! {
        biased;
        why = interruption(sink, watch, stop_at) => Err(why),
        r = llm.stream_chat(request) => r.map_err(|e| Outcome::model(&e)),
    };
    let outcome = match opened {
        Err(why) => why,
        Ok(mut stream) => {
            let outcome = loop {
                tokio::select! {
                    biased;
                    _ = watch.stopped.cancelled() => break Outcome::Stopped,
                    _ = watch.lease_lost.cancelled() => break Outcome::lease_lost(),
                    _ = tokio::time::sleep_until(stop_at) => break Outcome::deadline(),
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
                        Some(Err(e)) => break Outcome::model(&e),
                    }
                }
            };
            // Dropping the stream cancels the HTTP request to the model.
            drop(stream);
            outcome
        }
    };
    let outcome = if !sink.is_closed() && sink.flush().await.is_err() { Outcome::Stopped } else { outcome };
    (Answer { text, calls: calls.finish(), outcome }, usage)
}

impl ModelLoop<'_> {
    /// A call asked the user something (`ask_clarifying_questions`): its
    /// questions are the turn's answer, streamed and stored as the last
    /// assistant message, and the model is not asked again this turn.
    async fn asked_user(&mut self, mut round: Vec<StoredMessage>, answer: String, sink: &mut EventSink) -> LoopEnd {
        let _ = sink.send(StreamEvent::AgentState { state: AgentActivity::WaitingOnUser, details: None }).await;
        if sink.text(&answer).is_ok() {
            let _ = sink.flush().await;
        }
        round.push(self.message(Role::Assistant, answer));
        self.end(round, Outcome::Complete)
    }
}
