//! One tool round: its calls announced, run concurrently under a cap (those a
//! layer runs with the stream after them, one at a time), and what each did
//! sent to the client, folded into the agent state, and kept for the log.
//!
//! Contract of a round ([`run_calls`]): a call that started is awaited — when
//! the loop is interrupted (Stop, client gone, deadline, lease lost) no new
//! call starts, and the running ones get a bounded grace to finish, so the log
//! records what really happened. Each call ends as [`CallEnd::Ran`] (its real
//! result), [`CallEnd::Unfinished`] (still running when the grace ran out: its
//! effect is unknown and the result says so) or [`CallEnd::NotStarted`].

use super::ask::interruption;
use super::layer::{StreamCx, ToolRun, TurnScope, TurnTools};
use super::outputs::{keep_apart, read_tool_output, ToolOutputs, READ_TOOL_OUTPUT};
use super::{LoopEnd, ModelLoop, Outcome, TOOL_GRACE};
use crate::agent_state::{observe_tool_result, AgentState, ToolObservation};
use crate::entities::EntityPatch;
use crate::ids::{SessionId, UserId};
use crate::message::{Role, StoredMessage, ToolCall};
use crate::sse::{AgentActivity, EventSink, StreamEvent};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// How one call of a round ended.
#[derive(Debug)]
pub enum CallEnd {
    Ran(ToolRun),
    /// It was running when the loop ended and did not finish within the grace.
    Unfinished,
    NotStarted,
}

impl CallEnd {
    /// The result the model reads for a call that has no real one.
    pub fn missing_result(&self, why: &str) -> Option<String> {
        let error = match self {
            CallEnd::Ran(_) => return None,
            CallEnd::Unfinished => format!(
                "{why} while this call was running; it may or may not have taken effect: check before repeating it"
            ),
            CallEnd::NotStarted => format!("not run: {why} before this call started"),
        };
        Some(serde_json::json!({"ok": false, "error": error}).to_string())
    }
}

/// Runs one call of the loop (a tool of its layer or a built-in).
pub struct CallRunner<'a> {
    pub tools: &'a dyn TurnTools,
    pub outputs: &'a dyn ToolOutputs,
    pub user: &'a UserId,
    pub sid: &'a SessionId,
    pub scope: &'a TurnScope,
}

impl CallRunner<'_> {
    /// A tool that panics becomes an error result, never a crashed turn.
    async fn run(&self, call: ToolCall) -> ToolRun {
        let run = async {
            if call.function.name == READ_TOOL_OUTPUT {
                read_tool_output(self.outputs, self.user, self.sid, &call).await
            } else {
                self.tools.run(self.user, self.scope, &call).await
            }
        };
        match std::panic::AssertUnwindSafe(run).catch_unwind().await {
            Ok(run) => run,
            Err(_) => {
                tracing::error!(tool = %call.function.name, "tool panicked");
                ToolRun::failed("the tool failed unexpectedly")
            }
        }
    }
}

/// Runs one round's calls, at most `cap` at once; ends in call order, with
/// what interrupted the round, if anything. After `interrupt` fires, running
/// calls get `grace` (never past `hard_stop`) and nothing new starts.
pub async fn run_calls<I>(
    runner: &CallRunner<'_>,
    calls: &[ToolCall],
    cap: usize,
    interrupt: impl Future<Output = I>,
    grace: Duration,
    hard_stop: Instant,
) -> (Vec<CallEnd>, Option<I>) {
    let mut ends: Vec<CallEnd> = calls.iter().map(|_| CallEnd::NotStarted).collect();
    let mut queue = calls.iter().cloned().enumerate();
    let mut running = FuturesUnordered::new();
    let (mut interrupted, mut give_up) = (None, None);
    tokio::pin!(interrupt);
    loop {
        while interrupted.is_none() && running.len() < cap.max(1) {
            let Some((i, call)) = queue.next() else { break };
            ends[i] = CallEnd::Unfinished;
            running.push(runner.run(call).map(move |run| (i, run)));
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            Some((i, run)) = running.next() => ends[i] = CallEnd::Ran(run),
            why = &mut interrupt, if interrupted.is_none() => {
                give_up = Some((Instant::now() + grace).min(hard_stop));
                interrupted = Some(why);
            }
            _ = tokio::time::sleep_until(give_up.unwrap_or(hard_stop)), if give_up.is_some() => break,
        }
    }
    (ends, interrupted)
}

impl ModelLoop<'_> {
    /// Runs one round's calls and sends what they did; the result messages in
    /// call order, and what interrupted the round, if anything.
    pub(super) async fn tool_round(
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
        let env = self.env;
        let runner = CallRunner { tools, outputs: env.outputs, user: env.user, sid: env.sid, scope: env.scope };
        // Calls run with the stream go after the others, one at a time.
        let runnable: Vec<ToolCall> = calls
            .iter()
            .zip(refusals)
            .filter(|(c, r)| r.is_none() && !tools.streams(c))
            .map(|(c, _)| c.clone())
            .collect();
        let (ends, mut interrupted) = {
            let interrupt = interruption(sink, env.interrupts, env.limits.stop_at);
            let (cap, hard_stop) = (env.limits.tool_concurrency, env.limits.hard_stop);
            run_calls(&runner, &runnable, cap, interrupt, TOOL_GRACE, hard_stop).await
        };
        let mut ran = ends.into_iter();
        let mut ends = Vec::with_capacity(calls.len());
        for (call, refusal) in calls.iter().zip(refusals) {
            let end = match refusal {
                Some(r) => CallEnd::Ran(r.clone()),
                None if tools.streams(call) => match interrupted {
                    Some(_) => CallEnd::NotStarted,
                    None => {
                        let (run, cut) = self.run_streamed(tools, call, sink).await;
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

    /// A call run with the stream, handed this loop's environment as the
    /// runner of its nested loops; what they used counts as this loop's.
    async fn run_streamed(
        &mut self,
        tools: &dyn TurnTools,
        call: &ToolCall,
        sink: &mut EventSink,
    ) -> (ToolRun, Option<Outcome>) {
        let env = self.env;
        let cx = StreamCx { user: env.user, sid: env.sid, turn_id: env.turn_id, scope: env.scope, runner: &env, sink };
        let done = tools.run_streamed(call, cx).await;
        self.usage.add(&done.usage);
        self.surfaced.extend(done.waiting);
        (done.run, done.interrupted)
    }

    /// A call that ran: its events to the client, its result into the agent
    /// state, and a large output kept apart (the log gets a preview).
    async fn ran(&mut self, call: &ToolCall, mut run: ToolRun, sink: &mut EventSink) -> ToolRun {
        if let Some(state) = self.agent_state.as_deref_mut() {
            observe(state, call, &run);
            self.observed = true;
        }
        // Kept on the run: its settled operations are stored with its result.
        for ev in run.events.iter().cloned() {
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
        let env = &self.env;
        run.content = match keep_apart(env.outputs, env.user, env.sid, call, content, env.settings.inline_bytes).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "tool output not stored apart");
                ToolRun::failed("the tool's output was too large to keep").content
            }
        };
        run
    }

    /// A call asked the user something (`ask_clarifying_questions`): its
    /// questions are the turn's answer, streamed and stored as the last
    /// assistant message, and the model is not asked again this turn.
    pub(super) async fn asked_user(
        &mut self,
        mut round: Vec<StoredMessage>,
        answer: String,
        sink: &mut EventSink,
    ) -> LoopEnd {
        let _ = sink.send(StreamEvent::AgentState { state: AgentActivity::WaitingOnUser, details: None }).await;
        if sink.text(&answer).is_ok() {
            let _ = sink.flush().await;
        }
        round.push(self.message(Role::Assistant, answer));
        self.end(round, Outcome::Complete)
    }
}

/// Folds one tool result into the agent state (in memory; saved at turn end).
pub fn observe(state: &mut AgentState, call: &ToolCall, run: &ToolRun) {
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
