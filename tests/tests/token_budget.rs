//! The token budget is in the model's tokens, whatever its tokenizer: the
//! stream learns how the model's reported `prompt_tokens` relate to its own
//! counts and keeps what it sends within `CONTEXT_MAX_TOKENS` as the model
//! counts it (shared::context::TokenCalibration).

use serde_json::{json, Value};
use shared::context::{ContextBudget, ContextConfig};
use shared::edge::stream::StreamApp;
use shared::sse::StreamEvent;
use shared::summary::NoTurnEvents;
use std::sync::Arc;
use std::time::Duration;
use tests::scripted_llm::{prompt_tokens, Reply, ScriptedLlm, Step};
use tests::{dynamo_client, fresh_table, test_config, TestApp};

/// A model whose tokenizer makes `factor` times as many tokens as the
/// scripted one (a token per 4 bytes): a token per 2 bytes for 2.
fn double(request: &Value) -> u64 {
    prompt_tokens(request) * 2
}

/// A model whose chat template drops the tool definitions (as SmolLM2's
/// does) and whose tokenizer makes 1.5 times the scripted one's tokens.
fn drops_tools(request: &Value) -> u64 {
    let mut messages_only = request.clone();
    messages_only.as_object_mut().expect("a JSON object").remove("tools");
    prompt_tokens(&messages_only) * 3 / 2
}

type Tokenizer = fn(&Value) -> u64;

async fn app(budget: ContextBudget, model_tokens: Tokenizer) -> TestApp {
    let dynamo = dynamo_client().await;
    let table = fresh_table(&dynamo).await;
    let llm = ScriptedLlm::start().await;
    llm.set_default(Reply::dynamic(move |req| {
        let answer = format!("Noted. {}", "The plan holds if the tiles arrive on time; check the order. ".repeat(5));
        Reply::Stream(vec![
            Step::Text(answer),
            Step::Finish("stop".into()),
            Step::Usage { prompt: model_tokens(req), completion: 80 },
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

/// What one turn sent, as the model counted it and as `context_usage` said.
struct Sent {
    model: u64,
    reported: u64,
    dropped: u32,
}

/// `turns` turns on `session` (a new one if `None`), with long or short
/// messages; returns the session and what each turn sent.
async fn converse(
    app: &TestApp,
    session: Option<String>,
    turns: usize,
    long: bool,
    model_tokens: Tokenizer,
) -> (String, Vec<Sent>) {
    let mut sid = session;
    let mut out = Vec::new();
    for turn in 1..=turns {
        let message = if long {
            format!("Question {turn}: {}", "what should we order for the kitchen, and when? ".repeat(6))
        } else {
            format!("ok {turn}")
        };
        let mut body = json!({ "message": message });
        if let Some(s) = &sid {
            body["session_id"] = json!(s);
        }
        let t = app.turn("alice", body).await;
        assert_eq!(t.error_code(), None, "turn {turn}: {:?}", t.events);
        sid = Some(t.session_id());
        let request = app.llm.requests().last().cloned().expect("a request");
        let (reported, dropped) = usage(&t.events);
        out.push(Sent { model: model_tokens(&request), reported, dropped });
    }
    (sid.expect("a session"), out)
}

// Above the fixed head (the global rules and tools, ~2.8k tokens since the
// overview tool and the dates' rules), so the history is what gets cut.
const BUDGET: ContextBudget =
    ContextBudget { max_messages: 200, max_chars: 1_000_000, max_tokens: 3_000, large_paste_chars: 1_000_000 };

fn assert_within(sent: &[Sent], what: &str) {
    let max = BUDGET.max_tokens;
    for (i, s) in sent.iter().enumerate() {
        assert!(s.model <= max + max / 10, "{what}, turn {}: the model counts {} > {max}", i + 1, s.model);
        let off = s.reported.abs_diff(s.model) as f64 / s.model as f64;
        assert!(off < 0.2, "{what}, turn {}: context_usage says {}, the model counted {}", i + 1, s.reported, s.model);
    }
}

#[tokio::test]
async fn requests_stay_within_the_budget_as_the_model_counts_them() {
    let app = app(BUDGET, double).await;
    let (_, sent) = converse(&app, None, 14, true, double).await;
    assert!(sent.iter().any(|s| s.dropped > 0), "the budget had to trim history, or this test shows nothing");
    // Learned from the turns before: within the budget, and the stream's own
    // account of each request close to the model's.
    assert_within(&sent[1..], "one long session");
}

/// A short conversation, where the tool definitions are most of what is
/// counted, must not teach the stream that the model counts little: a long
/// conversation in the same process then stays within the budget.
#[tokio::test]
async fn tool_definitions_the_model_drops_are_learned_apart_from_the_messages() {
    let app = app(BUDGET, drops_tools).await;
    let (long, sent) = converse(&app, None, 12, true, drops_tools).await;
    assert!(sent.iter().any(|s| s.dropped > 0), "the budget had to trim history");
    assert_within(&sent[3..], "the long session");
    let (_, short) = converse(&app, None, 4, false, drops_tools).await;
    assert_within(&short[1..], "a short session after it");
    let (_, again) = converse(&app, Some(long), 2, true, drops_tools).await;
    assert_within(&again, "the long session again");
}
