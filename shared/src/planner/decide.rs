//! `agent_continue_plan`: the user's answer about an open plan — approve or
//! reject a draft, continue a plan that was cut off (or, made by the turn
//! itself, one whose waiting calls the user answered). A decision without a
//! plan id reaches the session's current plan only, and only while it is
//! open. A plan waiting for approvals is answered by them, not by this tool.

use super::stage::execute;
use super::{answer, failure, status_name, Book, Env, Ran};
use crate::message::ToolCall;
use crate::plan::{PlanRecord, PlanStatus};
use crate::sse::EventSink;
use crate::store::StoreError;
use crate::tools::plan::{ContinuePlanArgs, PlanDecision};

pub(super) async fn decide<'a>(env: &'a Env<'a>, call: &ToolCall, sink: &mut EventSink) -> Ran {
    let args: ContinuePlanArgs = match serde_json::from_str(&call.function.arguments) {
        Ok(a) => a,
        Err(e) => return Ok((failure("invalid_arguments", &format!("agent_continue_plan: {e}")), None)),
    };
    let (rec, version) = match find(env, &args).await? {
        Ok(found) => found,
        Err(refused) => return Ok((refused, None)),
    };
    let mut book = Book { env, rec, version };
    use PlanDecision as D;
    use PlanStatus as S;
    match (args.decision, book.rec.status) {
        (D::Approve, S::AwaitingApproval) | (D::Continue, S::Running) => {
            book.rec.status = S::Running;
            execute(book, sink).await
        }
        (D::Reject, S::AwaitingApproval | S::Running | S::WaitingForApproval) => {
            book.rec.status = S::Rejected;
            book.rec.reason = args.reason;
            book.save().await?;
            Ok((answer(&book.rec, "nothing more of this plan runs: tell the user what was and was not done"), None))
        }
        (_, S::Superseded) => {
            let by = book.rec.superseded_by.as_deref().unwrap_or("a newer plan");
            let verb = verb(args.decision);
            let why = format!("the plan was replaced by plan {by} and never runs; there is nothing to {verb} in it");
            Ok((failure("plan_decision_not_applicable", &why), None))
        }
        (decision, status) => {
            let why = format!("the plan is {}; {decision:?} does not apply to it", status_name(status));
            Ok((failure("plan_decision_not_applicable", &why), None))
        }
    }
}

fn verb(decision: PlanDecision) -> &'static str {
    match decision {
        PlanDecision::Approve => "approve",
        PlanDecision::Reject => "reject",
        PlanDecision::Continue => "continue",
    }
}

/// The plan the decision is about, or the result that says there is none.
async fn find(
    env: &Env<'_>,
    args: &ContinuePlanArgs,
) -> Result<Result<(PlanRecord, u64), crate::model_loop::ToolRun>, StoreError> {
    let (store, verb) = (env.layer.store, verb(args.decision));
    let found = match &args.plan_id {
        Some(id) => store.load(env.user, env.sid, id).await?,
        // No plan named: the session's current plan (its newest) only. An
        // older plan is never reached this way: it was replaced, or it ended.
        None => match store.current(env.user, env.sid).await? {
            None => {
                let why = format!("there is nothing to {verb}: this conversation has no plan");
                return Ok(Err(failure("no_open_plan", &why)));
            }
            Some((rec, _)) if !rec.status.is_open() => {
                let why = format!(
                    "there is nothing to {verb}: the current plan \"{}\" ({}) is {}; nothing was run. Tell the \
                     user so; a new plan needs agent_create_plan",
                    rec.plan.goal,
                    rec.id,
                    status_name(rec.status)
                );
                return Ok(Err(failure("no_open_plan", &why)));
            }
            open => open,
        },
    };
    Ok(found.ok_or_else(|| failure("plan_not_found", "there is no such plan in this conversation")))
}
