//! The token budget is in the model's tokens, whatever its tokenizer: the
//! stream learns how the model's reported `prompt_tokens` relate to its own
//! counts and keeps what it sends within `CONTEXT_MAX_TOKENS` as the model
//! counts it (shared::context::TokenCalibration).

use serde_json::{json, Value};
use shared::context::{ContextBudget, ContextConfig};
use shared::http::StreamApp;
use shared::sse::StreamEvent;
use shared::summary::NoTurnEvents;
use std::sync::Arc;
use std::time::Duration;
use tests::scripted_llm::{prompt_tokens, Reply, ScriptedLlm, Step};
use tests::{dynamo_client, fresh_table, test_config, TestApp};

/// A model whose tokenizer makes `factor` times as many tokens as the
/// scripted one (a token per 4 bytes): a token per 2 bytes for 2.
fn model_tokens(request: &Value, factor: u64) -> u64 {
    prompt_tokens(request) * factor
}

async fn app(budget: ContextBudget, factor: u64) -> TestApp {
    let dynamo = dynamo_client().await;
    let table = fresh_table(&dynamo).await;
    let llm = ScriptedLlm::start().await;
    llm.set_default(Reply::dynamic(move |req| {
        let answer = format!("Noted. {}", "The plan holds if the tiles arrive on time; check the order. ".repeat(5));
        Reply::Stream(vec![
            Step::Text(answer),
            Step::Finish("stop".into()),
            Step::Usage { prompt: model_tokens(req, factor), completion: 80 },
            Step::Done,
        ])
    }));
    let mut config = test_config(&table, &llm.base_url());
    // Load more than the budget can hold, so the token budget decides.
    config.history_limit = Some(100);
    let context = ContextConfig { budget, tokenizer: "estimate".into() };
    let app = StreamApp::with_parts(config, context, dynamo.clone(), Arc::new(NoTurnEvents), Duration::from_millis(20))
        .expect("stream app");
    TestApp { app, llm, dynamo, table }
}

fn usage(events: &[StreamEvent]) -> (u64, u32) {
    events
        .iter()
        .find_map(|e| match e {
            StreamEvent::ContextUsage(u) => Some((u.tokens_used, u.messages_dropped)),
            _ => None,
        })
        .expect("a context_usage event")
}

#[tokio::test]
async fn requests_stay_within_the_budget_as_the_model_counts_them() {
    let max_tokens = 2_500;
    let budget = ContextBudget { max_messages: 200, max_chars: 1_000_000, max_tokens, large_paste_chars: 1_000_000 };
    let app = app(budget, 2).await;
    let mut sid: Option<String> = None;
    let mut dropped_any = false;
    for turn in 1..=14 {
        let message = format!("Question {turn}: {}", "what should we order for the kitchen, and when? ".repeat(6));
        let mut body = json!({ "message": message });
        if let Some(s) = &sid {
            body["session_id"] = json!(s);
        }
        let t = app.turn("alice", body).await;
        assert_eq!(t.error_code(), None, "turn {turn}: {:?}", t.events);
        sid = Some(t.session_id());
        let request = app.llm.requests().last().cloned().expect("a request");
        let sent = model_tokens(&request, 2);
        let (reported, dropped) = usage(&t.events);
        dropped_any |= dropped > 0;
        if turn > 1 {
            // Learned from the turns before: within the budget, and the
            // stream's own account of the request close to the model's.
            assert!(sent <= max_tokens + max_tokens / 10, "turn {turn}: the model counts {sent} > {max_tokens}");
            let off = reported.abs_diff(sent) as f64 / sent as f64;
            assert!(off < 0.2, "turn {turn}: context_usage says {reported}, the model counted {sent}");
        }
    }
    assert!(dropped_any, "the budget had to trim history, or this test shows nothing");
}
