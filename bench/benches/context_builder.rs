//! The context builder (`shared::context::build_context`) on a realistic
//! 500-message log with tool groups: turns of a user message and an answer,
//! every third turn with an assistant message making two parallel tool calls
//! and their two results in between. Budget: the defaults
//! (`ContextBudget::default()`: 40 messages, 60 000 chars, 12 000 tokens).
//!
//! Cases: the whole 500-message log with the lexical estimate (the default
//! `CONTEXT_TOKENIZER`) and with the opt-in BPE (`cl100k_base`); and the 80
//! messages a turn loads at most (`ContextConfig::load_limit()`, twice the
//! message budget) with the estimate.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;
use shared::context::{build_context, ContextBudget, ContextInput, TokenCounter};
use shared::ids::{MessageId, SessionId, TurnId};
use shared::message::StoredMessage;
use std::hint::black_box;

const LOG: usize = 500;

/// One stored message, from JSON as DynamoDB items are read, so fields added
/// later with a default do not break the benchmark.
fn stored(
    seq: u64,
    session: &SessionId,
    role: &str,
    content: Option<String>,
    extra: serde_json::Value,
) -> StoredMessage {
    let mut v = json!({
        "id": MessageId::new().to_string(),
        "session_id": session.to_string(),
        "seq": seq,
        "turn_id": TurnId::new().to_string(),
        "role": role,
        "created_at": 1_763_800_000_000_i64 + seq as i64 * 1000,
    });
    if let Some(c) = content {
        v["content"] = json!(c);
    }
    if let serde_json::Value::Object(m) = extra {
        for (k, x) in m {
            v[k] = x;
        }
    }
    serde_json::from_value(v).expect("a valid stored message")
}

fn sentence(i: usize, words: usize) -> String {
    const WORDS: [&str; 12] = [
        "project",
        "kitchen",
        "budget",
        "the",
        "deadline",
        "tile",
        "order",
        "contractor",
        "we",
        "next",
        "week",
        "plan",
    ];
    let mut s = String::new();
    for w in 0..words {
        s.push_str(WORDS[(i * 7 + w * 3) % WORDS.len()]);
        s.push(if w % 11 == 10 { '.' } else { ' ' });
    }
    s
}

/// The log (seq 1..=LOG) and the current user message (seq LOG + 1).
fn log() -> (Vec<StoredMessage>, StoredMessage) {
    let session = SessionId::new();
    let mut out = Vec::with_capacity(LOG);
    let mut turn = 0;
    while out.len() < LOG {
        let seq = |out: &Vec<StoredMessage>| out.len() as u64 + 1;
        out.push(stored(seq(&out), &session, "user", Some(sentence(turn, 20)), json!({})));
        if turn % 3 == 2 && out.len() + 4 <= LOG {
            let ids = [format!("call_{turn}_a"), format!("call_{turn}_b")];
            let calls: Vec<_> = ids
                .iter()
                .map(|id| {
                    json!({"id": id, "type": "function",
                           "function": {"name": "search_entities", "arguments": format!("{{\"query\":\"{}\"}}", sentence(turn, 3).trim())}})
                })
                .collect();
            out.push(stored(
                seq(&out),
                &session,
                "assistant",
                Some("Let me look that up.".into()),
                json!({"tool_calls": calls}),
            ));
            for id in &ids {
                let result = json!({"ok": true, "items": (0..4).map(|k| json!({"id": format!("e-{turn}-{k}"), "title": sentence(k, 6)})).collect::<Vec<_>>()});
                out.push(stored(seq(&out), &session, "tool", Some(result.to_string()), json!({"tool_call_id": id})));
            }
        }
        if out.len() < LOG {
            out.push(stored(seq(&out), &session, "assistant", Some(sentence(turn, 90)), json!({})));
        }
        turn += 1;
    }
    let current = stored(LOG as u64 + 1, &session, "user", Some(sentence(turn, 25)), json!({}));
    (out, current)
}

fn builder(c: &mut Criterion) {
    let (history, current) = log();
    let system_prompt = sentence(0, 350);
    let budget = ContextBudget::default();
    let bpe = TokenCounter::from_setting("cl100k_base", "").expect("the BPE loads");
    let estimate = TokenCounter::from_setting("estimate", "").expect("the estimate");
    // Vocabulary parsing happens on first use: not part of a turn.
    black_box(bpe.count("warm up"));
    let input = |h: &'static [StoredMessage], cur: &'static StoredMessage| ContextInput {
        system_prompt: Box::leak(system_prompt.clone().into_boxed_str()),
        system_context: None,
        summary: None,
        history: h,
        current: cur,
    };
    let history: &'static [StoredMessage] = Box::leak(history.into_boxed_slice());
    let current: &'static StoredMessage = Box::leak(Box::new(current));
    let loaded = &history[history.len() - 80..];
    let whole = input(history, current);
    let recent = input(loaded, current);
    let built = build_context(&whole, &budget, &bpe);
    assert!(built.kept.len() > 1 && !built.dropped.is_empty(), "the budget trims the log");

    let mut g = c.benchmark_group("context_builder");
    g.throughput(Throughput::Elements(LOG as u64));
    g.bench_function("500_messages_tool_groups_estimate", |b| {
        b.iter(|| black_box(build_context(&whole, &budget, &estimate)))
    });
    g.bench_function("500_messages_tool_groups_cl100k", |b| b.iter(|| black_box(build_context(&whole, &budget, &bpe))));
    g.throughput(Throughput::Elements(80));
    g.bench_function("80_messages_load_limit_estimate", |b| {
        b.iter(|| black_box(build_context(&recent, &budget, &estimate)))
    });
    g.finish();
}

criterion_group!(benches, builder);
criterion_main!(benches);
