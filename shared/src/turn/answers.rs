//! Calls that wait for the user's yes, settled at a turn's start
//! ([`crate::approval`]): under the session's lease, before the turn's own
//! first write, every waiting call gets its result — the approved call's
//! own (it runs here, with its stored arguments), a denial, or "not run"
//! (the user wrote instead, the approval expired) — so the log the model
//! is sent holds a result for every call. A plan step's call's result also
//! goes to its plan record ([`crate::planner::answered`]): the step goes on
//! from it when the plan resumes.

use super::start::{Ids, Refused};
use super::{TurnDeps, ValidTurn};
use crate::approval::settle::{run, settle, Answer, RunCx, Settled};
use crate::approval::Signer;
use crate::ids::SessionId;
use crate::message::{without_superseded, StoredMessage};
use crate::model_loop::TurnScope;
use crate::planner::{answered, StepAnswer};
use crate::session::{Session, SessionView};
use crate::sse::EventSink;
use std::time::Duration;
use tokio::time::Instant;

/// Settles the waiting calls of `history` (the session's recent log, read
/// beside the lease) and appends their results to it and to the log; how
/// many results were stored. A regenerating turn settles nothing: its
/// marker supersedes the waiting answer.
pub(super) async fn settle_waiting(
    deps: &TurnDeps,
    ids: &Ids<'_>,
    session: &Session,
    view: &SessionView,
    turn: &ValidTurn,
    history: &mut Vec<StoredMessage>,
    sink: &mut EventSink,
) -> Result<u64, Refused> {
    let (user, sid) = (ids.user, &view.id);
    let Some(tools) = deps.tools.as_deref() else { return Ok(0) };
    if turn.regenerate || (turn.approvals.is_empty() && history.iter().all(|m| m.approvals.is_empty())) {
        return Ok(0);
    }
    let refuse = |e| Refused::Store(Some(sid.clone()), e);
    if history.last().map_or(0, |m| m.seq) != session.view.message_count {
        // The log was read beside the lease and a turn ended in between: an
        // answer is checked against the log as it is now that we hold it.
        let limit = history.len().max(crate::approval::LOG_WINDOW);
        *history = without_superseded(deps.store.recent_messages(user, sid, limit).await.map_err(refuse)?);
    }
    let signer = Signer::of(&deps.config);
    let settled = settle(&signer, user, sid, history, &turn.approvals, crate::now_ms())
        .map_err(|e| Refused::Approval(sid.clone(), e))?;
    if settled.is_empty() {
        return Ok(0);
    }
    let scope = TurnScope {
        context_type: view.context_type,
        entity_id: view.entity_id.clone(),
        focus: view.focus.clone(),
        timezone: turn.timezone,
    };
    // The turn's own limits: an approved call still running at the hard stop
    // is cut and its result says so, so that the answer is spent (it never
    // runs twice) and the write gets out before the invocation ends.
    let left = (ids.expires_ms - crate::now_ms()).max(0) as u64;
    let hard_stop = super::limits(&deps.config, Instant::now() + Duration::from_millis(left)).hard_stop;
    let cx = RunCx { tools, user, sid, turn_id: ids.turn_id, scope: &scope, hard_stop };
    let results = run(&settled, cx, session.view.message_count + 1, sink).await;
    deps.store.append_messages(user, sid, ids.turn_id, &results).await.map_err(refuse)?;
    to_plans(deps, ids, sid, &settled, &results).await;
    let stored = results.len() as u64;
    history.extend(results);
    Ok(stored)
}

/// The results of plan steps' calls, into their plan records. A record that
/// cannot be written keeps its plan waiting (the session's log has the
/// results; the plan does not resume): logged, the turn goes on.
async fn to_plans(deps: &TurnDeps, ids: &Ids<'_>, sid: &SessionId, settled: &[Settled], results: &[StoredMessage]) {
    let Some(plans) = deps.plans.as_deref() else { return };
    let answers: Vec<StepAnswer> = settled
        .iter()
        .zip(results)
        .filter_map(|(s, r)| {
            let content = r.content.clone().unwrap_or_default();
            let ran = (s.answer == Answer::Approved).then(|| {
                let v: serde_json::Value = serde_json::from_str(&content).unwrap_or_default();
                v.get("error").is_none() && v["ok"] != false
            });
            let step = s.asked.pending.step.clone()?;
            Some(StepAnswer { step, tool_call_id: s.asked.call.id.clone(), content, ran })
        })
        .collect();
    if answers.is_empty() {
        return;
    }
    if let Err(e) = answered(plans, ids.user, sid, &answers).await {
        tracing::error!(code = e.code(), error = %e, "plan step answers not recorded");
    }
}
