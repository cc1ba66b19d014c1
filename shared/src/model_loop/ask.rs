//! One model request: its text streamed to the client as it comes, its tool
//! calls assembled, and its usage counted (ours when the server reports none).
//!
//! Contract: the request ends at once on Stop, the lease lost, the client
//! gone or the stop time, keeping the text produced so far; dropping the
//! stream cancels the HTTP request to the model. An answer the model ended
//! at its token limit (`finish_reason: "length"`), or that the turn cut
//! because it repeats itself ([`super::repetition`]), ends `CutOff`.

use super::{Interrupts, LoopEnv, ModelLoop, Outcome};
use crate::llm::{ChatRequest, Llm, LlmError, LlmEvent, ToolCallAccumulator};
use crate::message::{ChatMessage, CutReason, ToolCall, Usage};
use crate::sse::EventSink;
use futures::StreamExt;
use tokio::time::Instant;

/// What one model request produced.
pub(super) struct Answer {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub outcome: Outcome,
}

/// Why a one-off request ([`super::LoopRunner::ask`]) has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AskError {
    #[error("{0}")]
    Model(#[from] LlmError),
    #[error("the stop time came first")]
    OutOfTime,
}

impl ModelLoop<'_> {
    /// One model request, its text streamed to the client as it comes.
    pub(super) async fn ask(
        &mut self,
        messages: &[ChatMessage],
        tools: Vec<serde_json::Value>,
        round: usize,
        sink: &mut EventSink,
    ) -> Answer {
        let offered_tools = !tools.is_empty();
        let mut request = request(&self.env, messages.to_vec(), tools);
        // The answer may not spend more than the budget has left.
        let used = self.usage.prompt_tokens + self.usage.completion_tokens;
        if let Some(left) = self.env.interrupts.tokens.and_then(|t| t.left()) {
            let left = u32::try_from(left.saturating_sub(used)).unwrap_or(u32::MAX).max(1);
            request.max_tokens = Some(request.max_tokens.map_or(left, |m| m.min(left)));
        }
        let env = &self.env;
        let (answer, reported) =
            stream_model(env.llm, request, sink, (env.limits.stop_at, env.interrupts), self.approvals).await;
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
        let counting = self.env.counting;
        match reported {
            Some(u) => {
                if round == 0 && self.calibrates {
                    counting.calibrate(u.prompt_tokens);
                }
                self.usage.add(&u)
            }
            // Some servers send no usage on a streamed answer (llama-cpp-python
            // ignores `stream_options.include_usage`): our own count stands in.
            None => self.usage.add(&counting.estimate(messages, text, tools)),
        }
    }
}

fn request(env: &LoopEnv<'_>, messages: Vec<ChatMessage>, tools: Vec<serde_json::Value>) -> ChatRequest {
    ChatRequest {
        model: env.settings.model.to_string(),
        messages,
        tools,
        max_tokens: env.settings.max_tokens,
        temperature: None,
    }
}

/// Resolves when the loop must stop taking new steps: Stop, the client gone,
/// the lease lost, or the stop time.
pub(super) async fn interruption(sink: &EventSink, interrupts: Interrupts<'_>, stop_at: Instant) -> Outcome {
    tokio::select! {
        biased;
        _ = sink.closed() => Outcome::Stopped,
        _ = interrupts.stopped.cancelled() => Outcome::Stopped,
        _ = interrupts.lease_lost.cancelled() => Outcome::lease_lost(),
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
    (stop_at, interrupts): (Instant, Interrupts<'_>),
    approvals: Option<&dyn super::ApprovalGate>,
) -> (Answer, Option<Usage>) {
    let mut text = String::new();
    let mut calls = ToolCallAccumulator::new();
    let mut usage = None;
    let mut admitted = interrupts.admission.is_none();
    let opened = tokio::select! {
        biased;
        why = interruption(sink, interrupts, stop_at) => Err(why),
        r = llm.stream_chat(request) => r.map_err(|e| Outcome::model(&e)),
    };
    let outcome = match opened {
        Err(why) => why,
        Ok(mut stream) => {
            let mut watch = super::repetition::Repetition::default();
            let mut length = false;
            let outcome = loop {
                tokio::select! {
                    biased;
                    _ = interrupts.stopped.cancelled() => break Outcome::Stopped,
                    _ = interrupts.lease_lost.cancelled() => break Outcome::lease_lost(),
                    _ = tokio::time::sleep_until(stop_at) => break Outcome::deadline(),
                    r = sink.idle() => if r.is_err() { break Outcome::Stopped },
                    ev = stream.next() => match ev {
                        None if length => break Outcome::CutOff(CutReason::Length),
                        None => break Outcome::Complete,
                        Some(Ok(LlmEvent::TextDelta(t))) => {
                            // Nothing reaches the client before the budgets admitted the turn.
                            if !admitted {
                                let refused = match interrupts.admission {
                                    Some(verdict) => verdict.refused_after_wait().await,
                                    None => None,
                                };
                                if refused.is_some() {
                                    break Outcome::quota_exceeded();
                                }
                                admitted = true;
                            }
                            text.push_str(&t);
                            if sink.text(&t).is_err() {
                                break Outcome::Stopped;
                            }
                            if watch.push(&t) {
                                break Outcome::CutOff(CutReason::Repetition);
                            }
                        }
                        Some(Ok(LlmEvent::Usage(u))) => usage = Some(u),
                        Some(Ok(ev @ LlmEvent::ToolCallDelta { .. })) => {
                            if calls.is_empty() {
                                if let Some(gate) = approvals {
                                    gate.prefetch();
                                }
                            }
                            calls.push_event(&ev);
                        }
                        Some(Ok(LlmEvent::Finish { reason })) => length = reason == "length",
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

/// One request without tools, read whole; given up at the stop time.
pub(super) async fn ask_once(env: &LoopEnv<'_>, messages: Vec<ChatMessage>) -> Result<String, AskError> {
    let request = request(env, messages, vec![]);
    let text = async {
        let mut stream = env.llm.stream_chat(request).await?;
        let mut text = String::new();
        while let Some(ev) = stream.next().await {
            if let LlmEvent::TextDelta(t) = ev? {
                text.push_str(&t);
            }
        }
        Ok(text)
    };
    tokio::time::timeout_at(env.limits.stop_at, text).await.unwrap_or(Err(AskError::OutOfTime))
}
