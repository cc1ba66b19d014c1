//! A round with calls that wait for the user's yes ([`super::ApprovalGate`]):
//! the other calls run as in any round; the waiting ones are announced, get
//! `approval_required` and no result, and the loop ends (the turn's answer
//! is the question). Their results come with the turn that answers them
//! ([`crate::approval`]). A nested loop's waiting calls (a plan step's) end
//! the turn's loop the same way, right after the round whose streamed call
//! ran that nested loop ([`ModelLoop::surface_waiting`]).

use super::layer::ToolRun;
use super::{LoopEnd, ModelLoop, Outcome};
use crate::message::{PendingApproval, StoredMessage, ToolCall};
use crate::sse::{AgentActivity, EventSink, StreamEvent};

impl ModelLoop<'_> {
    /// Which calls wait; `None` when none does (a refused call never waits).
    pub(super) async fn waiting(
        &self,
        calls: &[ToolCall],
        refusals: &[Option<ToolRun>],
    ) -> Option<Vec<Option<PendingApproval>>> {
        let gate = self.approvals?;
        let mut waits = gate.waits(calls).await;
        for (w, r) in waits.iter_mut().zip(refusals) {
            if r.is_some() {
                *w = None;
            }
        }
        waits.iter().any(Option::is_some).then_some(waits)
    }

    /// Runs the round's calls that do not wait, then ends the loop with the
    /// others waiting: the assistant message carries their approvals.
    pub(super) async fn wait_for_user(
        &mut self,
        mut assistant: StoredMessage,
        refusals: &[Option<ToolRun>],
        waits: Vec<Option<PendingApproval>>,
        sink: &mut EventSink,
    ) -> LoopEnd {
        let calls = assistant.tool_calls.clone();
        for (call, _) in calls.iter().zip(&waits).filter(|(_, w)| w.is_some()) {
            let event = StreamEvent::ToolCall { tool_call: call.clone(), origin: self.origin.clone() };
            let _ = sink.send(event).await;
        }
        let (run, run_refusals): (Vec<ToolCall>, Vec<Option<ToolRun>>) = calls
            .iter()
            .zip(refusals)
            .zip(&waits)
            .filter(|(_, w)| w.is_none())
            .map(|((c, r), _)| (c.clone(), r.clone()))
            .unzip();
        let (results, interrupted) =
            if run.is_empty() { (vec![], None) } else { self.tool_round(&run, &run_refusals, sink).await };
        let _ = sink.send(StreamEvent::AgentState { state: AgentActivity::WaitingOnUser, details: None }).await;
        for (call, pending) in calls.iter().zip(&waits) {
            let Some(p) = pending else { continue };
            let arguments = serde_json::from_str(&call.function.arguments).unwrap_or_default();
            let _ = sink
                .send(StreamEvent::ApprovalRequired {
                    approval_id: p.approval_id.clone(),
                    tool_call_id: call.id.clone(),
                    tool: call.function.name.clone(),
                    summary: p.summary.clone(),
                    arguments,
                    expires_at: p.expires_at,
                    origin: self.origin.clone(),
                })
                .await;
        }
        assistant.approvals = waits.into_iter().flatten().collect();
        self.check_waiting(&mut assistant, sink).await;
        self.end([vec![assistant], results].concat(), interrupted.unwrap_or(Outcome::Complete))
    }
}

impl ModelLoop<'_> {
    /// A round whose streamed call surfaced nested calls that wait (a plan
    /// step's): the round as it ran, then a message holding those calls and
    /// their approvals, and the loop ends (their `tool_call` and
    /// `approval_required` went out while the nested loop ran).
    pub(super) async fn surface_waiting(&mut self, round: Vec<StoredMessage>, sink: &mut EventSink) -> LoopEnd {
        let _ = sink.send(StreamEvent::AgentState { state: AgentActivity::WaitingOnUser, details: None }).await;
        let (calls, approvals): (Vec<ToolCall>, Vec<PendingApproval>) =
            std::mem::take(&mut self.surfaced).into_iter().unzip();
        let mut waiting = self.message(crate::message::Role::Assistant, String::new());
        waiting.tool_calls = calls;
        waiting.approvals = approvals;
        self.end([round, vec![waiting]].concat(), Outcome::Complete)
    }
}
