//! Running a plan: its unfinished steps stage by stage, a stage's steps at
//! most `cap` at once (1 for a sequence), each step's events forwarded as
//! they come and its end saved before its `step_complete`.
//!
//! Contract: a step whose input failed or was skipped is skipped, never run;
//! a step with calls waiting for the user's yes pauses the plan after its
//! stage (`waiting_for_approval`), its approvals handed to the turn; an
//! interruption starts no new step and leaves the plan `running`. A step the
//! user answered runs on from its executor's messages, not its brief.

use super::step::{brief, run_step, StepEnd};
use super::{answer, Book, Ran};
use crate::model_loop::Outcome;
use crate::plan::{PlanRecord, PlanStatus, PlanStep, StageMode, StepCall, StepOutputs, StepStatus, WaitingCall};
use crate::sse::{EventSink, StreamEvent};
use crate::store::StoreError;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Runs the plan's unfinished steps, stage by stage; its result, and what cut
/// the turn off, if anything.
pub(super) async fn execute(mut book: Book<'_>, sink: &mut EventSink) -> Ran {
    let layer = book.env.layer;
    let stages = book.rec.plan.stages.clone();
    for stage in &stages {
        let cap = match stage.mode {
            StageMode::Parallel => layer.step_concurrency.max(1),
            StageMode::Sequence => 1,
        };
        if let Some(cut) = run_stage(&mut book, &stage.steps, cap, sink).await? {
            unwait(&mut book);
            book.save().await?;
            let next = "the turn was cut off; finished steps are kept: tell the user what is done and that \
                        \"continue\" resumes the plan";
            return Ok((answer(&book.rec, next), Some(cut)));
        }
        if book.rec.steps.iter().any(|s| s.status == StepStatus::WaitingForApproval) {
            book.rec.status = PlanStatus::WaitingForApproval;
            book.save().await?;
            let next = "the plan paused: the calls in waiting_for_approval did not run and wait for the user's \
                        approval, which they give or refuse with Approve / Deny (not in words); their answer resumes \
                        the plan at those steps";
            return Ok((answer(&book.rec, next), None));
        }
    }
    let failed = book.rec.steps.iter().any(|s| s.status == StepStatus::Failed);
    book.rec.status = if failed { PlanStatus::Failed } else { PlanStatus::Completed };
    book.save().await?;
    let next = if failed {
        "some steps failed: tell the user plainly which ones and why, and what the other steps did"
    } else {
        "answer the user from the steps' results"
    };
    Ok((answer(&book.rec, next), None))
}

/// Runs a stage's pending steps, at most `cap` at once, forwarding their
/// events as they come; what cut the turn off, if anything.
async fn run_stage(
    book: &mut Book<'_>,
    steps: &[PlanStep],
    cap: usize,
    sink: &mut EventSink,
) -> Result<Option<Outcome>, StoreError> {
    let env = *book.env;
    let (tx, mut rx) = mpsc::unbounded_channel::<FromStep>();
    let gone = CancellationToken::new();
    let pending: Vec<&PlanStep> = steps.iter().filter(|s| book.rec.step(&s.id).status == StepStatus::Pending).collect();
    let mut queue = pending.into_iter();
    let mut running = FuturesUnordered::new();
    let mut cut: Option<Outcome> = None;
    loop {
        while cut.is_none() && running.len() < cap {
            let Some(step) = queue.next() else { break };
            if !start_step(book, step, sink).await? {
                continue;
            }
            // A step the user answered goes on from its executor's messages.
            let resume = std::mem::take(&mut book.rec.step_mut(&step.id).resume);
            let messages = if resume.is_empty() { brief(&book.rec, step) } else { resume };
            running.push(run_step(env, book.rec.id.clone(), step.clone(), messages, tx.clone(), gone.clone()));
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            // The client gone: executors stop as a turn does (their sinks close).
            _ = sink.closed(), if !gone.is_cancelled() => gone.cancel(),
            Some(msg) = rx.recv() => from_step(book, msg, sink, &gone).await?,
            Some(end) = running.next() => {
                // Everything the step sent goes out before its completion.
                while let Ok(msg) = rx.try_recv() {
                    from_step(book, msg, sink, &gone).await?;
                }
                if end.outcome.interrupts() {
                    cut.get_or_insert(end.outcome.clone());
                }
                settle(book, end, sink).await?;
            }
        }
    }
    Ok(cut)
}

/// A step about to run: skipped (saved, `step_complete`) when an input did
/// not finish, else counted as an attempt and announced. Whether it runs.
async fn start_step(book: &mut Book<'_>, step: &PlanStep, sink: &mut EventSink) -> Result<bool, StoreError> {
    let plan_id = book.rec.id.clone();
    if let Some(why) = failed_input(&book.rec, step) {
        book.rec.step_mut(&step.id).status = StepStatus::Skipped;
        book.rec.step_mut(&step.id).error = Some(why.clone());
        book.save().await?;
        let ev = StreamEvent::StepComplete {
            plan_id,
            step_id: step.id.clone(),
            status: StepStatus::Skipped,
            outputs: StepOutputs::default(),
            error: Some(why),
        };
        let _ = sink.send(ev).await;
        return Ok(false);
    }
    book.rec.step_mut(&step.id).attempts += 1;
    let start =
        StreamEvent::StepStart { plan_id: plan_id.clone(), step_id: step.id.clone(), title: step.title.clone() };
    let _ = sink.send(start).await;
    let spawned = StreamEvent::ExecutorSpawned {
        plan_id,
        step_id: step.id.clone(),
        executor: step.executor,
        tools: step.tools.clone(),
    };
    let _ = sink.send(spawned).await;
    Ok(true)
}

/// What a running step tells the stage.
pub(super) enum FromStep {
    /// An event for the client.
    Event(StreamEvent),
    /// An executor round that finished: its calls, saved at once so a crash
    /// later in the step cannot make a resumed attempt repeat them.
    Round { step_id: String, calls: Vec<StepCall> },
}

async fn from_step(
    book: &mut Book<'_>,
    msg: FromStep,
    sink: &mut EventSink,
    gone: &CancellationToken,
) -> Result<(), StoreError> {
    match msg {
        FromStep::Event(ev) => {
            if sink.send(ev).await.is_err() {
                gone.cancel();
            }
            Ok(())
        }
        FromStep::Round { step_id, calls } => {
            book.rec.step_mut(&step_id).calls.extend(calls);
            book.save().await
        }
    }
}

/// A step's end into the record (saved), then `executor_result` and `step_complete`.
async fn settle(book: &mut Book<'_>, end: StepEnd, sink: &mut EventSink) -> Result<(), StoreError> {
    let plan_id = book.rec.id.clone();
    book.env.spent.lock().expect("not poisoned").add(&end.usage);
    let step = book.rec.step_mut(&end.step_id);
    step.calls.extend(end.calls);
    step.outputs.entity_ids.extend(end.outputs.entity_ids);
    step.outputs.doc_ids.extend(end.outputs.doc_ids);
    let (ok, summary) = match &end.outcome {
        o if o.interrupts() => {
            // Left pending: it runs again on "continue", told of the calls it made.
            step.error = Some(format!("cut off: {}", o.why()));
            (false, o.why().to_string())
        }
        Outcome::Failed { message, .. } => {
            step.status = StepStatus::Failed;
            step.error = Some(message.clone());
            (false, message.clone())
        }
        _ if !end.waiting.is_empty() => {
            step.status = StepStatus::WaitingForApproval;
            step.summary = Some(end.summary.clone());
            step.waiting = end
                .waiting
                .iter()
                .map(|(c, p)| WaitingCall {
                    tool_call: c.clone(),
                    approval_id: p.approval_id.clone(),
                    summary: p.summary.clone(),
                })
                .collect();
            step.resume = end.transcript;
            book.env.waiting.lock().expect("not poisoned").extend(end.waiting);
            (true, end.summary)
        }
        _ => {
            step.status = StepStatus::Done;
            step.summary = Some(end.summary.clone());
            step.error = None;
            (true, end.summary)
        }
    };
    let (status, outputs, error) = (step.status, step.outputs.clone(), step.error.clone());
    book.save().await?;
    let step_id = end.step_id;
    let result = StreamEvent::ExecutorResult { plan_id: plan_id.clone(), step_id: step_id.clone(), ok, summary };
    let _ = sink.send(result).await;
    let _ = sink.send(StreamEvent::StepComplete { plan_id, step_id, status, outputs, error }).await;
    Ok(())
}

/// Why a step cannot run: an input that failed or was skipped.
fn failed_input(rec: &PlanRecord, step: &PlanStep) -> Option<String> {
    step.inputs.iter().find_map(|i| {
        let st = rec.step(i);
        matches!(st.status, StepStatus::Failed | StepStatus::Skipped).then(|| format!("its input {i:?} did not finish"))
    })
}

/// A stage cut off while some of its steps wait: they do not wait (the turn
/// ends without asking); they run again from their brief on "continue",
/// told of the calls they made.
fn unwait(book: &mut Book<'_>) {
    book.env.waiting.lock().expect("not poisoned").clear();
    for step in book.rec.steps.iter_mut().filter(|s| s.status == StepStatus::WaitingForApproval) {
        step.status = StepStatus::Pending;
        step.waiting.clear();
        step.resume.clear();
    }
}
