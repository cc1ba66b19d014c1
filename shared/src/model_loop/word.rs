//! The answer keeps its word ([`crate::claims`]): the turn's final answer is
//! checked against the write steps its stream showed. An answer that claims
//! a change no tool committed, or denies one that did, is not left standing:
//! - the model is asked once more (never twice, without tools) with a fixed
//!   note of what committed; the first answer stays in the log, marked with
//!   its mismatches and out of the model's context, and `answer_check`
//!   (`asked_again`) tells the client the text before it is withdrawn;
//! - an answer that still does not match stands with `answer_check`
//!   (`corrected`), and the stored answer carries the mismatches;
//! - an answer that comes with calls waiting for the user's yes cannot be
//!   asked again (the turn waits): it is corrected at once;
//! - after a tool ran this turn, an answer that only repeats the question or
//!   a tool's description ([`crate::claims::echo`]) is asked again the same
//!   way (`no_answer`), once;
//! - an answer that describes a call instead of making it ("use the
//!   `create_calendar_event` function with …") is withdrawn the same way and
//!   the model asked again *with* the tools, once a turn;
//! - an answer to a question that leaves out what the app showed for it
//!   (the events of the days asked about, [`crate::claims::shown`]) is asked
//!   again with them, once.

use super::{LoopEnd, ModelLoop, Outcome};
use crate::claims::echo::{self, Echoed};
use crate::claims::{check, note_for_model, shown, ClaimMismatch};
use crate::message::{ChatMessage, Role, StoredMessage};
use crate::sse::{CheckVerdict, EventSink, StreamEvent};

/// Why an answer was withdrawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    Claims,
    Echoed,
    LeftOut,
}

impl ModelLoop<'_> {
    /// The model answered in words: the loop's end, once the answer keeps its word.
    pub(super) async fn answered(
        &mut self,
        mut first: StoredMessage,
        messages: &[ChatMessage],
        offered: &[serde_json::Value],
        round: usize,
        sink: &mut EventSink,
    ) -> LoopEnd {
        let steps = sink.stats().steps.clone();
        let said = first.content.as_deref().unwrap_or_default();
        let Some((mismatches, note, why)) = self.withdrawn(said, messages, offered, &steps, sink) else {
            return self.end(vec![first], Outcome::Complete);
        };
        if self.budget_spent() {
            return self.corrected(first, mismatches, sink).await;
        }
        tracing::info!(mismatches = mismatches.len(), "the answer does not keep its word; asking again");
        let verdict = CheckVerdict::AskedAgain;
        let _ = sink.send(StreamEvent::AnswerCheck { verdict, mismatches: mismatches.clone() }).await;
        let mut again = messages.to_vec();
        again.push(first.to_chat());
        // As the user's turn: strict chat templates take no system message
        // after the first, and the last message must be the user's or a tool's.
        again.push(ChatMessage::user(note.clone()));
        first.include_in_context = false;
        first.claim_mismatches = mismatches;
        let answer = self.ask(&again, vec![], round + 1, sink).await;
        // Nothing said, or only the note said back ("Committed this turn:
        // nothing." — the local model did): the first answer stands. A left-out
        // listing said back is the answer asked for (the note is the events).
        let echoed_note = why != Why::LeftOut && echo::repeats_note(&answer.text, &note);
        if answer.text.trim().is_empty() || echoed_note {
            // Asked again without tools, the model said nothing (or only
            // tried a call): the first answer stands, corrected. An empty
            // assistant message would break every later request's history.
            first.include_in_context = true;
            let mismatches = std::mem::take(&mut first.claim_mismatches);
            return self.corrected(first, mismatches, sink).await;
        }
        let second = self.message(Role::Assistant, answer.text);
        if answer.outcome != Outcome::Complete {
            return self.end(vec![first, second], answer.outcome);
        }
        let again_said = second.content.as_deref().unwrap_or_default();
        let left = self.withdrawn(again_said, messages, offered, &steps, sink).map(|w| w.0).unwrap_or_default();
        let mut end = self.corrected(second, left, sink).await;
        end.unsaved.insert(0, first);
        end
    }

    /// Why `said` does not stand, with the note the model is asked again
    /// with: a claim the steps do not show, an answer that answers nothing,
    /// or one that leaves out what the app showed for the question.
    fn withdrawn(
        &self,
        said: &str,
        messages: &[ChatMessage],
        offered: &[serde_json::Value],
        steps: &[crate::claims::Step],
        sink: &EventSink,
    ) -> Option<(Vec<ClaimMismatch>, String, Why)> {
        if !self.keeps_word {
            return None;
        }
        // A turn that stored a plan answers about the plan ("Changed: the
        // April newsletter. Approve?"), a change no `operation` shows; the
        // plan's own writes are steps of the turns that run it, checked there.
        let mut mismatches = if sink.stats().planned { vec![] } else { check(said, steps) };
        mismatches.retain(|m| !self.reports(m));
        if !mismatches.is_empty() {
            let note = note_for_model(&mismatches, steps);
            return Some((mismatches, note, Why::Claims));
        }
        // What the app showed for the question, left out, before an echo:
        // asked again with the echo's note and the listing after it, the
        // local model repeated the question again ("Is there anything on
        // your plate this week?"); the listing first, it names the events.
        if let Some(shown) = self.shown.as_ref() {
            let missing = shown::left_out(said, shown);
            if !missing.is_empty() {
                let m = shown::mismatch(said, &shown.source, &missing);
                return Some((vec![m], shown::note_for_model(shown), Why::LeftOut));
            }
        }
        let (what, m) = self.echoed(said, messages, offered, sink)?;
        Some((vec![m], echo::note_for_model(what), Why::Echoed))
    }

    /// Whether `m` claims a change the context reported as made before this
    /// turn, by its title: the log shows it.
    fn reports(&self, m: &ClaimMismatch) -> bool {
        let quote = m.quote.to_lowercase();
        m.kind == crate::claims::MismatchKind::ClaimedNotDone
            && self.reported.iter().any(|t| t.trim().len() >= 3 && quote.contains(&t.trim().to_lowercase()))
    }

    /// The answer stands; its mismatches, if any, go to the client and the log.
    async fn corrected(
        &mut self,
        mut answer: StoredMessage,
        mismatches: Vec<ClaimMismatch>,
        sink: &mut EventSink,
    ) -> LoopEnd {
        self.correct(&mut answer, mismatches, sink).await;
        self.end(vec![answer], Outcome::Complete)
    }

    /// The tool a final answer describes calling instead of calling it, when
    /// the loop may still ask for calls (once a turn, the turn's own loop).
    pub(super) fn described_call(
        &self,
        said: &str,
        messages: &[ChatMessage],
        offered: &[serde_json::Value],
        nudged: bool,
    ) -> Option<Nudge> {
        if !self.keeps_word || nudged || self.tools.is_none() {
            return None;
        }
        // A question answered with a described call is asked again in
        // words (the word check), never pushed into a write.
        let question = messages.iter().rev().find(|m| m.role == Role::User)?.content.as_deref()?;
        if !echo::asks_for_a_change(question) {
            return None;
        }
        if let Some(tool) = echo::described_call(said, &tool_names(offered)) {
            return Some(Nudge::Described(tool.to_string()));
        }
        refused(messages)
    }

    /// Asks again, with the tools, after an answer that described a call:
    /// the answer is withdrawn (kept in the log out of context, marked) and
    /// the note goes to the model as the user's turn.
    pub(super) async fn ask_for_the_call(
        &mut self,
        mut first: StoredMessage,
        nudge: &Nudge,
        messages: &mut Vec<ChatMessage>,
        log: &mut dyn super::RoundLog,
        sink: &mut EventSink,
    ) -> Result<(), crate::store::StoreError> {
        let said = first.content.clone().unwrap_or_default();
        let (mismatch, note) = match nudge {
            Nudge::Described(tool) => (echo::described(tool, &said), echo::call_note(tool)),
            Nudge::Refused { tool, error } => (echo::gave_up(tool, &said), echo::retry_note(tool, error)),
        };
        tracing::info!(?nudge, "the answer did not make the call asked for; asking again with the tools");
        let verdict = CheckVerdict::AskedAgain;
        let _ = sink.send(StreamEvent::AnswerCheck { verdict, mismatches: vec![mismatch.clone()] }).await;
        messages.push(first.to_chat());
        messages.push(ChatMessage::user(note));
        first.include_in_context = false;
        first.claim_mismatches = vec![mismatch];
        log.store_round(std::slice::from_ref(&first)).await
    }

    /// `said` only repeats the question or a tool's description (after a
    /// tool ran this turn), or repeats the app's own prompt blocks.
    fn echoed(
        &self,
        said: &str,
        messages: &[ChatMessage],
        offered: &[serde_json::Value],
        sink: &EventSink,
    ) -> Option<(Echoed, ClaimMismatch)> {
        let question = messages.iter().rev().find(|m| m.role == Role::User)?.content.as_deref()?;
        let descriptions: Vec<&str> =
            offered.iter().filter_map(|t| t.pointer("/function/description").and_then(|d| d.as_str())).collect();
        if !echo::asks_for_a_change(question) {
            if let Some(tool) = echo::described_call(said, &tool_names(offered)) {
                return Some((Echoed::Call, echo::described(tool, said)));
            }
        }
        let found = echo::echoed(said, question, &descriptions)?;
        // The question back is an answer of sorts when no tool ran (a
        // clarifying echo); the app's own block never is.
        (found.0 == Echoed::Prompt || sink.stats().tool_calls > 0).then_some(found)
    }

    /// Marks `answer` with its mismatches and tells the client (no-op without any).
    pub(super) async fn correct(
        &mut self,
        answer: &mut StoredMessage,
        mismatches: Vec<ClaimMismatch>,
        sink: &mut EventSink,
    ) {
        if mismatches.is_empty() {
            return;
        }
        tracing::info!(mismatches = mismatches.len(), "the answer stands corrected");
        let _ = sink
            .send(StreamEvent::AnswerCheck { verdict: CheckVerdict::Corrected, mismatches: mismatches.clone() })
            .await;
        answer.claim_mismatches = mismatches;
    }

    /// The words that came with calls waiting for the user's yes: nothing
    /// they wait for is done yet, so "I deleted it" stands corrected.
    pub(super) async fn check_waiting(&mut self, answer: &mut StoredMessage, sink: &mut EventSink) {
        if !self.keeps_word {
            return;
        }
        let steps = sink.stats().steps.clone();
        let mismatches = check(answer.content.as_deref().unwrap_or_default(), &steps);
        self.correct(answer, mismatches, sink).await;
    }
}

fn tool_names(offered: &[serde_json::Value]) -> Vec<&str> {
    offered.iter().filter_map(|t| t.pointer("/function/name").and_then(|n| n.as_str())).collect()
}

/// Why the loop asks again with the tools.
#[derive(Debug)]
pub(super) enum Nudge {
    /// The answer described a call to this tool instead of making it.
    Described(String),
    /// Every call of the round just run was refused, and the answer gave up
    /// (the local model explained the error back: "You can do this by …").
    Refused { tool: String, error: String },
}

/// The round just run, when each of its calls was refused: the first one's tool and error.
fn refused(messages: &[ChatMessage]) -> Option<Nudge> {
    let at = messages.iter().rposition(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())?;
    let calls = &messages[at].tool_calls;
    let results = &messages[at + 1..];
    // This turn's round, the last thing said: not a round of an earlier turn.
    if results.is_empty() || results.iter().any(|m| m.role != Role::Tool) {
        return None;
    }
    let mut first = None;
    for r in results.iter().filter(|m| m.role == Role::Tool) {
        let v: serde_json::Value = serde_json::from_str(r.content.as_deref()?).ok()?;
        let message = v.pointer("/error/message").and_then(|m| m.as_str())?;
        let tool = calls.iter().find(|c| Some(&c.id) == r.tool_call_id.as_ref())?.function.name.clone();
        first.get_or_insert(Nudge::Refused { tool, error: message.to_string() });
    }
    first
}
