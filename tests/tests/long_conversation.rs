//! Long conversations end to end (issue 5): turns through the real stream
//! handler, their `TurnCompleted` events through a real FIFO queue on moto,
//! drained into the summarizer's batch handler as Lambda's event source
//! mapping would, and the next turns' model requests holding the system
//! prompt, the rolling summary and only the recent window, within budget.

use serde_json::{json, Value};
use shared::context::{summary_message, ContextBudget, ContextConfig};
use shared::edge::stream::StreamApp;
use shared::ids::{SessionId, UserId};
use shared::sse::{ContextUsage, StreamEvent};
use shared::summary::store::{DynamoSummaryStore, SummaryStore};
use shared::summary::SqsTurnEvents;
use std::sync::Arc;
use std::time::Duration;
use tests::scripted_llm::Reply;
use tests::summary::{
    all_messages, drain_to_summarizer, fresh_fifo_queue, queue_arn, scripted_summary_answer, sqs_client,
    summarizer_deps, Drained,
};
use tests::{dynamo_client, fresh_table, test_config, ScriptedLlm, TestApp};

const SUMMARIZER_MODEL: &str = "scripted-summarizer";

/// Small budgets: the summarizer (defaults: above 20 messages or 5,000
/// characters, keeping the newest 8) alone keeps a window of this conversation
/// within them. The token budgets include the tool definitions offered with
/// every request (~650 tokens of the budget here).
fn budget() -> ContextBudget {
    ContextBudget { max_messages: 16, max_chars: 6_000, max_tokens: 1_900, large_paste_chars: 8_000 }
}

/// Tighter than the summarized window gets between two runs, so the builder
/// also trims, and its cut lands on tool-call groups.
fn tight_budget() -> ContextBudget {
    ContextBudget { max_messages: 9, max_chars: 4_000, max_tokens: 1_500, large_paste_chars: 8_000 }
}

/// Every 5th turn asks for something that makes the model call two tools at
/// once (a parallel tool-call group in the log).
fn uses_tools(turn: usize) -> bool {
    turn % 5 == 3
}

fn question(turn: usize) -> String {
    let tools = if uses_tools(turn) { " [tools]" } else { "" };
    format!("Question {turn}{tools}: how should the launch plan handle step {turn}? {}", "Some context. ".repeat(6))
}

/// The scripted model: summarizer requests get a faithful summary; chat
/// requests get a plain answer, or for a `[tools]` question first two
/// parallel `list_projects` calls and, once their results are in, the answer.
fn model(req: &Value) -> Reply {
    if req["model"] == SUMMARIZER_MODEL {
        let answer = scripted_summary_answer(req).expect("a summarizer request of the known shape");
        return Reply::text(&[&answer]);
    }
    let messages = req["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    if last["role"] == "user" && last["content"].as_str().unwrap_or("").contains("[tools]") {
        return Reply::tool_calls(&[("list_projects", json!({})), ("list_projects", json!({"limit": 5}))]);
    }
    let asked = messages.iter().rev().find(|m| m["role"] == "user").and_then(|m| m["content"].as_str()).unwrap_or("");
    let n = asked.split(':').next().unwrap_or("").trim_start_matches("Question ").to_string();
    let answer = format!("Answer {n}: do it in order, check the result, then move on. {}", "More detail. ".repeat(10));
    Reply::text(&[&answer[..20], &answer[20..]])
}

/// A stream function wired to a fresh table, the scripted model and a real
/// `SqsTurnEvents` on a fresh moto FIFO queue.
struct Conversation {
    app: TestApp,
    sqs: aws_sdk_sqs::Client,
    queue: String,
    arn: String,
    deps: shared::summary::SummarizerDeps,
    summaries: DynamoSummaryStore,
}

impl Conversation {
    async fn new(budget: ContextBudget) -> Conversation {
        let dynamo = dynamo_client().await;
        let table = fresh_table(&dynamo).await;
        let llm = ScriptedLlm::start().await;
        llm.set_default(Reply::dynamic(model));
        let mut config = test_config(&table, &llm.base_url());
        // Load more than the window needs, so the budget and the summary (not
        // the load limit) decide what is sent.
        config.history_limit = Some(60);
        let context = ContextConfig { budget, tokenizer: "cl100k_base".into() };
        let sqs = sqs_client();
        let queue = fresh_fifo_queue(&sqs).await;
        let arn = queue_arn(&sqs, &queue).await;
        let events = Arc::new(SqsTurnEvents::new(sqs.clone(), queue.clone()));
        // Wait for each send, so the queue holds the turn's event when the turn ends.
        let app =
            StreamApp::with_parts(config, context, dynamo.clone(), events, Duration::from_secs(5)).expect("stream app");
        let deps = summarizer_deps(&dynamo, &table, &llm.base_url(), |c| c.model = SUMMARIZER_MODEL.into());
        let summaries = DynamoSummaryStore::new(dynamo.clone(), table.clone());
        Conversation { app: TestApp { app, llm, dynamo, table }, sqs, queue, arn, deps, summaries }
    }

    fn chat_requests(&self) -> Vec<Value> {
        self.app.llm.requests().into_iter().filter(|r| r["model"] != SUMMARIZER_MODEL).collect()
    }
}

/// Per turn: what the stream reported and what the summarizer had done.
#[derive(Debug, Clone)]
struct TurnRecord {
    turn: usize,
    usage: ContextUsage,
    /// The summary version current when the turn was built (0: none).
    summary_version: u64,
    /// Summary versions committed so far, after this turn's drain.
    commits: usize,
    /// Index of this turn's first chat request among all chat requests.
    first_request: usize,
}

/// Runs `turns` turns of one session, draining the queue into the
/// summarizer after each. Returns the records and the session.
async fn converse(c: &Conversation, turns: usize) -> (Vec<TurnRecord>, UserId, SessionId) {
    let user = UserId::parse("alice").unwrap();
    let mut sid: Option<String> = None;
    let mut records = Vec::new();
    let mut drained = Drained::default();
    for turn in 1..=turns {
        let version = match &sid {
            Some(s) => {
                c.summaries.current(&user, &SessionId::parse(s).unwrap()).await.unwrap().map_or(0, |s| s.version)
            }
            None => 0,
        };
        let first_request = c.chat_requests().len();
        let mut body = json!({ "message": question(turn) });
        if let Some(s) = &sid {
            body["session_id"] = json!(s);
        }
        let t = c.app.turn("alice", body).await;
        assert_eq!(t.error_code(), None, "turn {turn}: {:?}", t.events);
        t.done();
        let kinds = t.kinds();
        let at = |k: &str| kinds.iter().position(|x| *x == k);
        assert!(at("session") < at("context_usage"), "turn {turn}: {kinds:?}");
        let usage = t
            .events
            .iter()
            .find_map(|e| match e {
                StreamEvent::ContextUsage(u) => Some(u.clone()),
                _ => None,
            })
            .expect("context_usage");
        sid.get_or_insert_with(|| t.session_id());

        let d = drain_to_summarizer(&c.sqs, &c.queue, &c.arn, &c.deps).await;
        assert_eq!(d.records, 1, "turn {turn}: one TurnCompleted per turn reached the queue");
        assert_eq!(d.failed, 0, "turn {turn}: no summarizer run failed");
        drained.records += d.records;
        let session = SessionId::parse(sid.as_deref().unwrap()).unwrap();
        let commits = c.summaries.versions(&user, &session).await.unwrap().len();
        records.push(TurnRecord { turn, usage, summary_version: version, commits, first_request });
    }
    assert_eq!(drained.records, turns);
    let session = SessionId::parse(sid.as_deref().unwrap()).unwrap();
    (records, user, session)
}

fn text(m: &Value) -> &str {
    m["content"].as_str().unwrap_or("")
}

#[tokio::test]
async fn thirty_turns_then_the_request_is_summary_plus_recent_window() {
    let b = tight_budget();
    let c = Conversation::new(b).await;
    let (records, user, session) = converse(&c, 30).await;
    assert!(records.iter().any(|r| r.commits > 0), "the summarizer committed during the 30 turns");
    assert!(records.iter().any(|r| r.usage.messages_dropped > 0), "the budget trimmed the window on some turns");
    for r in &records {
        assert!(r.usage.tokens_used <= b.max_tokens, "turn {}: {:?}", r.turn, r.usage);
        assert!(r.usage.messages_kept as usize <= b.max_messages, "turn {}: {:?}", r.turn, r.usage);
    }

    // Turn 31: what the model is sent.
    let current = c.summaries.current(&user, &session).await.unwrap().expect("a committed summary");
    let before = c.chat_requests().len();
    let t = c.app.turn("alice", json!({"message": "Question 31: and now?", "session_id": session.to_string()})).await;
    assert_eq!(t.error_code(), None, "{:?}", t.events);
    let req = c.chat_requests()[before].clone();
    let msgs = req["messages"].as_array().unwrap();

    // The system prompt is built per turn and never stored: first, and the
    // same as the previous turn's (same scope, nothing else changed).
    let previous = &c.chat_requests()[records.last().unwrap().first_request];
    assert_eq!(msgs[0]["role"], "system");
    assert!(!text(&msgs[0]).is_empty() && !text(&msgs[0]).starts_with("Summary of the earlier"));
    assert_eq!(msgs[0], previous["messages"][0], "the per-turn system prompt first");
    // Then the per-project context when there is one (a second system
    // message), then the summary: the last of the leading system messages.
    let lead = msgs.iter().take_while(|m| m["role"] == "system").count();
    assert!(lead >= 2, "{msgs:?}");
    assert_eq!(
        text(&msgs[lead - 1]),
        summary_message(&current.text, current.through_seq).content.unwrap(),
        "then the current summary"
    );

    // Then a contiguous run of the log strictly after the watermark, ending
    // with the new question.
    let log = all_messages(&c.app.store(), &user, &session).await;
    let rest = &msgs[lead..];
    assert_eq!(rest.last().map(text), Some("Question 31: and now?"));
    // The log as it was when the request was built: up to the new question.
    let asked = log.iter().find(|m| m.content.as_deref() == Some("Question 31: and now?")).expect("stored").seq;
    let window: Vec<_> = log.iter().filter(|m| m.seq > current.through_seq && m.seq <= asked).collect();
    let sent: Vec<(String, String)> =
        rest.iter().map(|m| (m["role"].as_str().unwrap().to_string(), text(m).to_string())).collect();
    let tail: Vec<(String, String)> = window[window.len() - sent.len()..]
        .iter()
        .map(|m| {
            let chat = m.to_chat();
            (serde_json::to_value(chat.role).unwrap().as_str().unwrap().to_string(), chat.content.unwrap_or_default())
        })
        .collect();
    assert_eq!(sent, tail, "only messages after the watermark (through {}), most recent last", current.through_seq);
    let first_sent_seq = window[window.len() - sent.len()].seq;
    assert!(first_sent_seq > current.through_seq);
    assert!(asked > current.through_seq);

    // Within the configured budget, with no orphan tool message.
    let usage = t
        .events
        .iter()
        .find_map(|e| match e {
            StreamEvent::ContextUsage(u) => Some(u.clone()),
            _ => None,
        })
        .unwrap();
    assert!(usage.summary_used);
    assert_eq!(usage.token_budget, b.max_tokens);
    assert!(usage.tokens_used <= b.max_tokens, "{usage:?}");
    assert_eq!(usage.messages_kept as usize, rest.len());
    assert!(rest.len() <= b.max_messages, "{} messages", rest.len());
    let chars: usize = msgs.iter().map(|m| text(m).chars().count()).sum::<usize>()
        + msgs
            .iter()
            .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
            .map(|c| {
                c["function"]["name"].as_str().unwrap().chars().count()
                    + c["function"]["arguments"].as_str().unwrap().chars().count()
            })
            .sum::<usize>();
    assert!(chars <= b.max_chars, "{chars} chars");
    tests::assert_tool_protocol(&req);
    assert!(rest.first().unwrap()["role"] != "tool", "the window never starts with a tool result");

    // Every chat request of the run kept the protocol too.
    for r in c.chat_requests() {
        tests::assert_tool_protocol(&r);
    }
    let versions = c.summaries.versions(&user, &session).await.unwrap();
    assert!(!versions.is_empty());
    assert_eq!(versions.last().unwrap().version, current.version);
}

#[tokio::test]
async fn a_hundred_turns_stay_bounded() {
    let c = Conversation::new(budget()).await;
    let started = std::time::Instant::now();
    let (records, _user, _session) = converse(&c, 100).await;
    let elapsed = started.elapsed();
    let b = budget();

    println!();
    println!(
        "100-turn scripted conversation (budget: {} tokens, {} messages, {} chars; tokenizer cl100k_base; \
         summarizer: defaults, keep 8 recent; {:.1} s)",
        b.max_tokens,
        b.max_messages,
        b.max_chars,
        elapsed.as_secs_f64()
    );
    println!(
        "{:>5} | {:>11} | {:>13} | {:>16} | {:>12} | {:>15} | {:>23}",
        "turn",
        "tokens sent",
        "messages kept",
        "messages dropped",
        "summary used",
        "summary version",
        "tokens min-max, 10 turns"
    );
    for r in records.iter().filter(|r| r.turn == 1 || r.turn % 10 == 0) {
        let decade = records.iter().filter(|x| x.turn + 10 > r.turn && x.turn <= r.turn).map(|x| x.usage.tokens_used);
        let (lo, hi) = (decade.clone().min().unwrap(), decade.max().unwrap());
        println!(
            "{:>5} | {:>11} | {:>13} | {:>16} | {:>12} | {:>15} | {:>23}",
            r.turn,
            r.usage.tokens_used,
            r.usage.messages_kept,
            r.usage.messages_dropped,
            if r.usage.summary_used { "yes" } else { "no" },
            if r.summary_version == 0 { "-".to_string() } else { format!("v{}", r.summary_version) },
            format!("{lo}-{hi}"),
        );
    }
    let commits = records.last().unwrap().commits;
    let max_all = records.iter().map(|r| r.usage.tokens_used).max().unwrap();
    println!("summarizer commits over 100 turns: {commits}; max tokens sent over all turns: {max_all}");
    let commit_turns: Vec<usize> =
        records.windows(2).filter(|w| w[1].commits > w[0].commits).map(|w| w[1].turn).collect();
    println!("summary committed after turns: {commit_turns:?}");

    // Bounded: never above the budget, and the second half is no larger than
    // the first half of the bounded stretch.
    let tokens = |from: usize, to: usize| {
        records.iter().filter(move |r| r.turn >= from && r.turn <= to).map(|r| r.usage.tokens_used)
    };
    let late_max = tokens(50, 100).max().unwrap();
    assert!(late_max <= b.max_tokens, "max tokens over turns 50-100: {late_max}");
    assert!(
        tokens(76, 100).max().unwrap() <= tokens(50, 75).max().unwrap(),
        "tokens grow: 50-75 max {:?}, 76-100 max {:?}",
        tokens(50, 75).max(),
        tokens(76, 100).max()
    );
    let mean = |from, to| tokens(from, to).sum::<u64>() as f64 / (to - from + 1) as f64;
    assert!(mean(76, 100) <= mean(50, 75) * 1.15, "mean tokens grow: {} -> {}", mean(50, 75), mean(76, 100));
    assert!(records.iter().filter(|r| r.turn >= 50).all(|r| r.usage.summary_used));
    assert!(commits >= 5, "the summarizer kept up: {commits} commits");
    // The summary stays current: never more than a few turns behind.
    let max_gap = commit_turns.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    assert!(max_gap <= 15, "longest stretch without a commit: {max_gap} turns");
}
