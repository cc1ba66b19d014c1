//! Tools as the turn sees them: the [`TurnTools`] trait, one round's calls run
//! concurrently under a cap, and the built-in `read_tool_output`.
//!
//! Contract of a round ([`run_calls`]): a call that started is awaited — when
//! the turn is interrupted (Stop, client gone, deadline, lease lost) no new
//! call starts, and the running ones get a bounded grace to finish, so the log
//! records what really happened. Each call ends as [`CallEnd::Ran`] (its real
//! result), [`CallEnd::Unfinished`] (still running when the grace ran out: its
//! effect is unknown and the result says so) or [`CallEnd::NotStarted`].

use crate::agent_state::{observe_tool_result, AgentState, ToolObservation};
use crate::config::Config;
use crate::entities::EntityPatch;
use crate::ids::{SessionId, UserId};
use crate::message::ToolCall;
use crate::session::ContextType;
use crate::sse::StreamEvent;
use crate::session::store::ToolOutputs;
use crate::store::StoreError;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use serde::Deserialize;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

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

    /// Asked after each tool round: `Some(answer)` when a call of this turn
    /// asked the user something (`ask_clarifying_questions`); the loop then
    /// ends the turn with that answer instead of asking the model again.
    /// Only a turn's watch ([`super::signals::Watched`]) knows; default never.
    fn asked_user(&self) -> Option<String> {
        None
    }
}

/// How one call of a round ended.
#[derive(Debug)]
pub enum CallEnd {
    Ran(ToolRun),
    /// It was running when the turn ended and did not finish within the grace.
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

/// Runs one call of the turn (a tool of the registry or a built-in).
pub struct CallRunner<'a> {
    pub tools: &'a dyn TurnTools,
    pub store: &'a dyn ToolOutputs,
    pub user: &'a UserId,
    pub sid: &'a SessionId,
    pub scope: &'a TurnScope,
}

impl CallRunner<'_> {
    /// A tool that panics becomes an error result, never a crashed turn.
    async fn run(&self, call: ToolCall) -> ToolRun {
        let run = async {
            if call.function.name == READ_TOOL_OUTPUT {
                read_tool_output(self.store, self.user, self.sid, &call).await
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

/// The built-in tool that reads back a tool output kept apart from the log.
pub const READ_TOOL_OUTPUT: &str = "read_tool_output";
/// Characters a `read_tool_output` call returns at most.
const READ_TOOL_OUTPUT_MAX: usize = 12_000;

pub fn read_tool_output_definition() -> serde_json::Value {
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

async fn read_tool_output(store: &dyn ToolOutputs, user: &UserId, sid: &SessionId, call: &ToolCall) -> ToolRun {
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
pub async fn keep_apart(
    store: &dyn ToolOutputs,
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
