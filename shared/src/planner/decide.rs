//! `agent_continue_plan`: the user's answer about an open plan — approve or
//! reject a draft, confirm or cancel the changes it paused for, continue a
//! plan that was cut off. A decision without a plan id reaches the session's
//! current plan only, and only while it is open.

use super::stage::execute;
use super::step::collect_outputs;
use super::{answer, failure, status_name, Book, Env, Ran};
use crate::message::ToolCall;
use crate::plan::{PlanRecord, PlanStatus, StepCall, StepOutputs, StepStatus, ToolOrigin};
use crate::sse::{EventSink, StreamEvent};
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
        (D::Confirm, S::AwaitingConfirmation) => {
            confirm(&mut book, sink).await?;
            execute(book, sink).await
        }
        (D::Reject | D::Cancel, S::AwaitingApproval | S::Running | S::AwaitingConfirmation) => {
            decline(&mut book, args).await?;
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
        PlanDecision::Confirm => "confirm",
        PlanDecision::Cancel => "cancel",
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

/// Rejected or cancelled: held changes are skipped, nothing more runs.
async fn decline(book: &mut Book<'_>, args: ContinuePlanArgs) -> Result<(), StoreError> {
    let held = book.rec.steps.iter_mut().filter(|s| s.status == StepStatus::AwaitingConfirmation);
    for step in held {
        step.status = StepStatus::Skipped;
        step.error = Some("the user declined this change; nothing was changed".into());
        step.held.clear();
    }
    book.rec.status = if args.decision == PlanDecision::Reject { PlanStatus::Rejected } else { PlanStatus::Cancelled };
    book.rec.reason = args.reason;
    book.save().await
}

/// Runs the calls the plan paused for, as their steps' executors asked for
/// them; each such step is then done.
async fn confirm(book: &mut Book<'_>, sink: &mut EventSink) -> Result<(), StoreError> {
    let held: Vec<String> = book
        .rec
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::AwaitingConfirmation)
        .map(|s| s.step_id.clone())
        .collect();
    for step_id in held {
        confirm_step(book, &step_id, sink).await?;
    }
    book.rec.status = PlanStatus::Running;
    book.save().await
}

/// One step's held calls, run in order with their events; the step saved.
async fn confirm_step(book: &mut Book<'_>, step_id: &str, sink: &mut EventSink) -> Result<(), StoreError> {
    let (env, plan_id) = (book.env, book.rec.id.clone());
    let origin = ToolOrigin::PlanStep { plan_id: plan_id.clone(), step_id: step_id.to_string() };
    let calls = std::mem::take(&mut book.rec.step_mut(step_id).held);
    let mut outputs = StepOutputs::default();
    let mut all_ok = true;
    for call in calls {
        let _ = sink.send(StreamEvent::ToolCall { tool_call: call.clone(), origin: origin.clone() }).await;
        let run = env.layer.tools.run(env.user, env.scope, &call).await;
        collect_outputs(&run.events, &mut outputs);
        for ev in &run.events {
            let _ = sink.send(ev.clone()).await;
        }
        let (id, name) = (call.id.clone(), call.function.name.clone());
        let result = StreamEvent::ToolResult {
            tool_call_id: id,
            name,
            ok: run.ok,
            preview: run.preview.clone(),
            origin: origin.clone(),
        };
        let _ = sink.send(result).await;
        all_ok &= run.ok;
        book.rec.step_mut(step_id).calls.push(StepCall { tool_call: call, ok: run.ok, result: run.content });
    }
    let step = book.rec.step_mut(step_id);
    step.status = if all_ok { StepStatus::Done } else { StepStatus::Failed };
    step.outputs.entity_ids.extend(outputs.entity_ids);
    step.outputs.doc_ids.extend(outputs.doc_ids);
    step.summary = Some(format!("{} (confirmed by the user)", step.summary.clone().unwrap_or_default()));
    step.changes.clear();
    let (status, outputs, error) = (step.status, step.outputs.clone(), step.error.clone());
    book.save().await?;
    let step_id = step_id.to_string();
    let _ = sink.send(StreamEvent::StepComplete { plan_id, step_id, status, outputs, error }).await;
    Ok(())
}
