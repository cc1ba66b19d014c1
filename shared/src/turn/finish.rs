//! Phase 4 of a turn: store what is left — the last assistant message marked
//! with how the turn ended, any results not stored yet, the turn record's
//! status and the session's stats, releasing the lease in the same
//! transaction — and the agent state beside it; then the `done` to send.
//!
//! Contract: what `done` promises — the answer — is durable before `done`,
//! in one round trip after the last token; when the store leaves the
//! session's bookkeeping (count, tokens, the lease given back) for after it
//! ([`SessionLog::store_answer`]), that follows `done` in the same
//! invocation, and a next turn that comes first does it itself
//! ([`crate::session::store::Leases::take_over_lease`]). A failed write is
//! an `error` before `done`, and the lease guard then gives the lease back.

use super::lease::LeaseGuard;
use super::TurnDeps;
use crate::agent_state::store::{AgentStateStore, SaveError};
use crate::agent_state::AgentState;
use crate::ids::{RunId, SessionId, TurnId, UserId};
use crate::message::{MessageError, Role, StoredMessage, Usage};
use crate::model_loop::{LoopEnd, Outcome, RoundLog};
use crate::session::store::{SessionLog, TurnEnd};
use crate::session::{Scope, TurnStatus};
use crate::sse::{DoneReason, EventSink, StreamEvent};
use crate::store::StoreError;
use crate::summary::TurnCompleted;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The turn's log while the model works: the start record's write in flight,
/// then each tool round as it completes.
pub struct TurnLog {
    pub store: Arc<dyn SessionLog>,
    pub user: UserId,
    pub sid: SessionId,
    pub turn_id: TurnId,
    pub persist_user: Option<JoinHandle<Result<(), StoreError>>>,
}

#[async_trait::async_trait]
impl RoundLog for TurnLog {
    async fn ready(&mut self) -> Result<(), StoreError> {
        let Some(task) = self.persist_user.take() else { return Ok(()) };
        let started =
            task.await.unwrap_or_else(|join| Err(StoreError::Backend(format!("user message task failed: {join}"))));
        if let Err(e) = &started {
            tracing::warn!(code = e.code(), error = %e, "user message not stored");
        }
        started
    }

    async fn store_round(&mut self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        self.store.append_messages(&self.user, &self.sid, &self.turn_id, messages).await
    }
}

/// What the turn changed about the session: its agent state, its scope.
pub struct StateChange {
    pub state: Option<(AgentState, u64)>,
    /// A tool result touched it.
    pub observed: bool,
    /// A tool moved the conversation here (`context_shift`).
    pub scope: Option<crate::sse::Focus>,
}

/// Stores the end of the turn; returns its `done` and, when stored, the
/// turn-end event for the summarizer.
#[allow(clippy::too_many_arguments)]
pub async fn finish(
    deps: &TurnDeps,
    user: &UserId,
    sid: &SessionId,
    turn_id: &TurnId,
    run_id: RunId,
    end: LoopEnd,
    state: StateChange,
    lease: LeaseGuard,
    sink: &mut EventSink,
) -> (StreamEvent, Option<TurnCompleted>) {
    let LoopEnd { mut unsaved, outcome, usage } = end;
    let status = mark_last_answer(&mut unsaved, &outcome, usage);
    let last_message_seq = unsaved.last().map_or(0, |m| m.seq);
    let StateChange { state, observed, scope } = state;
    let scope = scope.map(|f| Scope { context_type: f.context_type, entity_id: f.entity_id, focus: f.focus });
    let end = TurnEnd { turn_id: turn_id.clone(), run_id, status, messages: unsaved, usage, scope };
    // The agent state is its own item: its write goes out beside the turn's
    // transaction rather than after it, so `done` waits for one round trip
    // (docs/performance.md, finding 2). It records tool results that are
    // already committed, so it holds whether or not the answer is stored. A
    // state that no tool result touched is not written (a session without
    // one reads as a new state).
    let save_state = async {
        if let (Some(states), Some((state, version)), true) = (&deps.agent_state, state, observed) {
            save_agent_state(states.as_ref(), user, sid, state, version).await;
        }
    };
    let (persisted, ()) = tokio::join!(deps.store.store_answer(user, sid, &end), save_state);

    let mut reason = announce(outcome, sink).await;
    let completed = match persisted {
        Ok(left) => {
            match left {
                None => lease.released_by_write(),
                Some(left) => {
                    let (store, user, sid) = (deps.store.clone(), user.clone(), sid.clone());
                    lease.released_after_done(Box::pin(async move {
                        if let Err(e) = store.settle_turn(&user, &sid, &left).await {
                            tracing::warn!(error = %e, "turn's bookkeeping not written; the next turn does it");
                        }
                    }));
                }
            }
            // The summarizer works from watermarks: a lost event is covered by
            // the next turn's, so it never fails the turn.
            Some(TurnCompleted {
                user_id: user.clone(),
                session_id: sid.clone(),
                turn_id: turn_id.clone(),
                last_message_seq,
            })
        }
        Err(e) => {
            tracing::error!(code = e.code(), error = %e, "answer not stored");
            if reason != DoneReason::Error {
                let _ =
                    sink.send(StreamEvent::error(e.code(), format!("the answer could not be saved: {e}"), true)).await;
            }
            reason = DoneReason::Error;
            None
        }
    };
    (super::done(reason, Some(sid), turn_id, Some(usage)), completed)
}

/// The `done` reason of how the model part ended; `error` first when it failed.
async fn announce(outcome: Outcome, sink: &mut EventSink) -> DoneReason {
    match outcome {
        Outcome::Complete => DoneReason::Complete,
        Outcome::Stopped => DoneReason::Stopped,
        Outcome::CutOff(reason) => {
            let _ = sink.send(StreamEvent::CutOff { reason }).await;
            DoneReason::CutOff
        }
        Outcome::Failed { code, message, retryable } => {
            let _ = sink.send(StreamEvent::error(code, message, retryable)).await;
            DoneReason::Error
        }
    }
}

/// The last assistant message says how the turn ended and carries its usage;
/// the turn record's status follows.
fn mark_last_answer(unsaved: &mut [StoredMessage], outcome: &Outcome, usage: Usage) -> TurnStatus {
    let (status, error, stopped, cut_off) = match outcome {
        Outcome::Complete => (TurnStatus::Completed, None, false, None),
        Outcome::Stopped => (TurnStatus::Stopped, None, true, None),
        Outcome::CutOff(reason) => (TurnStatus::CutOff, None, false, Some(*reason)),
        Outcome::Failed { code, message, .. } => {
            let error = MessageError { code: code.to_string(), message: message.clone() };
            (TurnStatus::Error, Some(error), false, None)
        }
    };
    if let Some(last) = unsaved.iter_mut().rev().find(|m| m.role == Role::Assistant) {
        last.error = error;
        last.stopped = stopped;
        last.cut_off = cut_off;
        last.usage = Some(usage);
    }
    status
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
            let merged = crate::agent_state::store::update(store, user, sid, 3, |s| {
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
