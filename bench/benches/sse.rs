//! The SSE encoder (one frame per event the turn sends), the AI SDK's UI
//! message stream encoder (`POST /chat`) and the SSE decoder (how a client,
//! and the CLI, read a turn) on a realistic 500-frame turn: `agent_state`,
//! `session`, 497 `text_delta`s of token size, `done`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use shared::chat::ui_stream::UiEncoder;
use shared::ids::{SessionId, TurnId};
use shared::message::Usage;
use shared::session::SessionView;
use shared::sse::{AgentActivity, DoneReason, SseDecoder, SseEncoder, StreamEvent};
use std::hint::black_box;

fn session_event() -> StreamEvent {
    // From JSON, as the client would read it, so fields added later with a
    // default do not break the benchmark.
    let session: SessionView = serde_json::from_value(serde_json::json!({
        "id": SessionId::new().to_string(),
        "title": "Plan the kitchen renovation",
        "context_type": "project",
        "focus": {"projectId": "p-123", "projectName": "Kitchen"},
        "status": "active",
        "message_count": 24,
        "created_at": 1_763_800_000_000_i64,
        "last_activity_at": 1_763_800_360_000_i64
    }))
    .expect("a valid session view");
    StreamEvent::Session { session }
}

/// A whole turn as events, in order.
fn turn_events(text_frames: usize) -> Vec<StreamEvent> {
    const WORDS: [&str; 8] = ["The ", "answer ", "is ", "a ", "stream ", "of ", "small ", "tokens, "];
    let mut events = vec![
        StreamEvent::AgentState { state: AgentActivity::Thinking, details: Some("Thinking…".into()) },
        session_event(),
    ];
    events.extend((0..text_frames).map(|i| StreamEvent::TextDelta { content: WORDS[i % WORDS.len()].into() }));
    events.push(StreamEvent::Done {
        reason: DoneReason::Complete,
        session_id: Some(SessionId::new()),
        turn_id: TurnId::new(),
        usage: Some(Usage { prompt_tokens: 812, completion_tokens: 497, total_tokens: 1309 }),
        replayed: false,
    });
    events
}

fn encoder(c: &mut Criterion) {
    let mut g = c.benchmark_group("sse_encode");
    g.throughput(Throughput::Elements(1));
    let delta = StreamEvent::TextDelta { content: "answer ".into() };
    g.bench_function("text_delta", |b| {
        let mut enc = SseEncoder::new();
        b.iter(|| black_box(enc.encode(black_box(&delta))))
    });
    let session = session_event();
    g.bench_function("session", |b| {
        let mut enc = SseEncoder::new();
        b.iter(|| black_box(enc.encode(black_box(&session))))
    });
    g.finish();

    let events = turn_events(497);
    let mut g = c.benchmark_group("sse_encode_turn");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("500_frames", |b| {
        b.iter(|| {
            let mut enc = SseEncoder::new();
            for e in &events {
                black_box(enc.encode(e));
            }
        })
    });
    g.finish();

    let mut g = c.benchmark_group("ui_encode_turn");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("500_frames", |b| {
        b.iter(|| {
            let mut enc = UiEncoder::new("m1");
            for e in &events {
                black_box(enc.encode(e));
            }
        })
    });
    g.finish();
}

fn decoder(c: &mut Criterion) {
    let mut enc = SseEncoder::new();
    // As the client reads it: one network read per frame.
    let frames: Vec<bytes::Bytes> = turn_events(497).iter().map(|e| enc.encode(e)).collect();
    let whole: Vec<u8> = frames.concat();
    let mut g = c.benchmark_group("sse_decode_turn");
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.bench_function("500_frames_one_read_each", |b| {
        b.iter_batched_ref(
            || (SseDecoder::new(), Vec::with_capacity(frames.len())),
            |(dec, out)| {
                for f in &frames {
                    dec.feed_into(f, out).unwrap();
                }
                assert_eq!(out.len(), frames.len());
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("500_frames_16k_reads", |b| {
        b.iter_batched_ref(
            || (SseDecoder::new(), Vec::with_capacity(frames.len())),
            |(dec, out)| {
                for chunk in whole.chunks(16 * 1024) {
                    dec.feed_into(chunk, out).unwrap();
                }
                assert_eq!(out.len(), frames.len());
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, encoder, decoder);
criterion_main!(benches);
