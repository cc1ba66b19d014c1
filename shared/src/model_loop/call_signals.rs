//! What a turn learns from its own tool calls, beyond their results: a move
//! to another scope to store on the session (`context_shift`), questions for
//! the user that end the turn (`clarifying_questions`), and, with
//! `DEV_EVENTS`, how long each call took and which calls missed the offered
//! set (`telemetry`).
//!
//! [`Watched`] wraps a layer of tools for one turn: every call passes
//! through it unchanged, except that the recorder's events are appended to
//! the call's events (so they reach the client before its `tool_result`),
//! and that a call past its tool's per-turn cap ([`TurnTools::per_turn_cap`])
//! is answered with an error result instead of running.
//! The model loop asks [`TurnTools::asked_user`] after each tool round; the
//! turn reads [`Watched::shift`] when the loop has ended.

use super::layer::{ToolRun, TurnScope, TurnTools};
use super::telemetry::{millis, Telemetry};
use crate::ids::UserId;
use crate::message::ToolCall;
use crate::sse::{Focus, StreamEvent, Telemetry as Measure};
use std::sync::Mutex;

/// One turn's tools, watched.
pub struct Watched<'a> {
    inner: &'a dyn TurnTools,
    telemetry: Telemetry,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// Names of the tools offered (only kept when telemetry is on).
    offered: Option<Vec<String>>,
    shift: Option<Focus>,
    questions: Option<Vec<String>>,
    /// Calls started this turn, by tool name (only for capped tools).
    calls: std::collections::HashMap<String, usize>,
}

impl<'a> Watched<'a> {
    /// `offered`: the definitions the turn offers (a call outside them is a
    /// selection miss).
    pub fn new(inner: &'a dyn TurnTools, telemetry: Telemetry, offered: &[serde_json::Value]) -> Self {
        let offered = telemetry.is_on().then(|| tool_names(offered));
        Watched { inner, telemetry, seen: Mutex::new(Seen { offered, ..Seen::default() }) }
    }

    /// The last scope a call of this turn moved the conversation to.
    pub fn shift(&self) -> Option<Focus> {
        self.seen().shift.clone()
    }

    /// Counts a call of `name`; the error result when it is past the cap.
    fn over_cap(&self, name: &str) -> Option<ToolRun> {
        let cap = self.inner.per_turn_cap(name)?;
        let mut seen = self.seen();
        let n = seen.calls.entry(name.to_string()).or_default();
        *n += 1;
        (*n > cap).then(|| {
            ToolRun::failed(&format!(
                "{name} can be called at most {cap} times in one turn; answer with what you have found"
            ))
        })
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The names in OpenAI `tools` entries.
pub fn tool_names(defs: &[serde_json::Value]) -> Vec<String> {
    defs.iter().filter_map(|d| d["function"]["name"].as_str().map(String::from)).collect()
}

#[async_trait::async_trait]
impl TurnTools for Watched<'_> {
    fn offered(&self, scope: &TurnScope) -> Vec<serde_json::Value> {
        self.inner.offered(scope)
    }

    async fn run(&self, user: &UserId, scope: &TurnScope, call: &ToolCall) -> ToolRun {
        let name = &call.function.name;
        let missed = self.seen().offered.as_ref().is_some_and(|o| !o.contains(name));
        if missed {
            self.telemetry.record(Measure::ToolSelectionMiss { tool: name.clone() });
        }
        if let Some(refused) = self.over_cap(name) {
            return refused;
        }
        let started = std::time::Instant::now();
        let mut run = self.inner.run(user, scope, call).await;
        let duration_ms = millis(started.elapsed());
        self.telemetry.record(Measure::ToolExecution {
            tool: name.clone(),
            tool_call_id: call.id.clone(),
            duration_ms,
            ok: run.ok,
        });
        {
            let mut seen = self.seen();
            for e in &run.events {
                match e {
                    StreamEvent::ContextShift { current, .. } => seen.shift = Some(current.clone()),
                    StreamEvent::ClarifyingQuestions { questions } => seen.questions = Some(questions.clone()),
                    _ => {}
                }
            }
        }
        run.events.extend(self.telemetry.drain());
        run
    }

    /// The questions, one per line, as the turn's answer.
    fn asked_user(&self) -> Option<String> {
        let seen = self.seen();
        let questions = seen.questions.as_ref()?;
        Some(questions.iter().map(|q| format!("- {q}")).collect::<Vec<_>>().join("\n"))
    }
}
