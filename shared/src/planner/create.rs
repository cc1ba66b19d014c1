//! `agent_create_plan`: validate, store (replacing the session's open plans
//! in the same write), then per mode: show it for review, have a reviewer
//! model approve it, or run it.

use super::stage::execute;
use super::{answer, failure, step_tool_in, Book, Env, Ran};
use crate::message::{ChatMessage, ToolCall};
use crate::model_loop::{AskError, ToolRun};
use crate::plan::store::OPEN_LOOKBACK;
use crate::plan::{validate, AgentPlan, PlanMode, PlanRecord, PlanStatus};
use crate::sse::{EventSink, StreamEvent};
use crate::tools::plan::AGENT_CREATE_PLAN;

pub(super) async fn create<'a>(env: &'a Env<'a>, call: &ToolCall, sink: &mut EventSink) -> Ran {
    let plan: AgentPlan = match serde_json::from_str(&call.function.arguments) {
        Ok(p) => p,
        Err(e) => return Ok((failure("invalid_arguments", &format!("{AGENT_CREATE_PLAN}: {e}")), None)),
    };
    let scope = env.tool_scope();
    let valid = match validate(plan, step_tool_in(&scope)) {
        Ok(v) => v,
        Err(problems) => {
            let content = serde_json::json!({"error": {"code": "invalid_plan",
                "message": "the plan was not run; fix every problem and call agent_create_plan again",
                "problems": problems}})
            .to_string();
            return Ok((ToolRun { ok: false, preview: problems.join("; "), content, events: vec![] }, None));
        }
    };
    // One current plan per session: a new plan (the edit of a draft is a new
    // plan) replaces every open one, in the same transaction that stores it,
    // so a later decision without a plan id can only reach this one.
    let store = env.layer.store;
    let replaced: Vec<(PlanRecord, u64)> =
        store.list(env.user, env.sid, OPEN_LOOKBACK).await?.into_iter().filter(|(r, _)| r.status.is_open()).collect();
    let mut rec = PlanRecord::new(&valid, env.turn_id.clone());
    rec.supersedes = replaced.iter().map(|(r, _)| r.id.clone()).collect();
    let version = store.create(env.user, env.sid, &rec, &replaced).await?;
    let book = Book { env, rec, version };
    let _ = sink.send(StreamEvent::PlanCreated { plan_id: book.rec.id.clone(), plan: book.rec.plan.clone() }).await;
    let mut ran = proceed(book, sink).await;
    // The planner tells the user which plans will not run any more (and the
    // session's log keeps it: the plan history).
    if let Ok((run, _)) = &mut ran {
        if !replaced.is_empty() {
            note_replaced(run, &replaced);
        }
    }
    ran
}

/// A new plan, as its mode says: shown for review, reviewed, or run.
async fn proceed(mut book: Book<'_>, sink: &mut EventSink) -> Ran {
    let plan_id = book.rec.id.clone();
    match book.rec.plan.mode {
        PlanMode::DraftOnly => {
            let _ = sink.send(StreamEvent::PlanReadyForReview { plan_id }).await;
            let next = "show the user this plan and ask them to approve, change or reject it; on their answer call \
                        agent_continue_plan (approve or reject) or agent_create_plan with the changed plan";
            Ok((answer(&book.rec, next), None))
        }
        PlanMode::AgentReview => {
            let (approved, reason) = review(book.env, &book.rec.plan).await;
            let _ = sink.send(StreamEvent::PlanReview { plan_id, approved, reason: reason.clone() }).await;
            if !approved {
                book.rec.status = PlanStatus::Rejected;
                book.rec.reason = Some(reason);
                book.save().await?;
                return Ok((answer(&book.rec, "the reviewer rejected the plan: tell the user why"), None));
            }
            execute(book, sink).await
        }
        PlanMode::AutoExecute => execute(book, sink).await,
    }
}

/// Adds `superseded` (the plans this one replaced, as they were) to a plan
/// tool's result.
fn note_replaced(run: &mut ToolRun, replaced: &[(PlanRecord, u64)]) {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&run.content) else { return };
    let list: Vec<serde_json::Value> = replaced
        .iter()
        .map(|(r, _)| serde_json::json!({"plan_id": r.id, "goal": r.plan.goal, "was": r.status}))
        .collect();
    v["superseded"] = serde_json::Value::Array(list);
    v["superseded_note"] =
        "the plans in `superseded` were replaced by this one and will never run: say so if the user may expect them"
            .into();
    run.content = v.to_string();
}

/// The reviewer: one model call, no tools, that approves or rejects the plan.
/// A review that fails is a rejection: an unreviewed plan never runs.
async fn review(env: &Env<'_>, plan: &AgentPlan) -> (bool, String) {
    let messages = vec![
        ChatMessage::system(
            "You review plans before they run. Answer with one JSON object only: \
             {\"verdict\": \"approve\" or \"reject\", \"reason\": \"<one sentence>\"}.",
        ),
        ChatMessage::user(serde_json::to_string(plan).unwrap_or_default()),
    ];
    match env.runner.ask(messages).await {
        Ok(text) => verdict(&text),
        Err(AskError::OutOfTime) => (false, "the review ran out of time".into()),
        Err(AskError::Model(e)) => (false, format!("the review failed: {e}")),
    }
}

/// The reviewer's answer: its JSON object if it wrote one, else its words.
pub(super) fn verdict(text: &str) -> (bool, String) {
    let json = text
        .find('{')
        .zip(text.rfind('}'))
        .and_then(|(a, b)| (a < b).then(|| serde_json::from_str::<serde_json::Value>(&text[a..=b]).ok()).flatten());
    match json {
        Some(v) => {
            let approved = v["verdict"].as_str().is_some_and(|s| s.eq_ignore_ascii_case("approve"));
            (approved, v["reason"].as_str().unwrap_or_default().to_string())
        }
        None => (false, format!("the reviewer gave no verdict: {}", text.chars().take(200).collect::<String>())),
    }
}
