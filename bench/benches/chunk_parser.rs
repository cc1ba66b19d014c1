//! The model-stream chunk parser (`shared::llm::ChunkParser`) on a realistic
//! 500-chunk OpenAI streaming body: the role chunk, 497 content chunks of
//! token size with the fields OpenAI sends, the finishing chunk, the usage
//! chunk, then `data: [DONE]`. Fed one chunk per read (as tokens trickle in)
//! and in 16 KiB reads (as a fast model's body arrives).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde_json::json;
use shared::llm::{ChunkParser, LlmEvent};

const CHUNKS: usize = 500;

fn body_chunks() -> Vec<Vec<u8>> {
    const WORDS: [&str; 8] = [" The", " answer", " is", " a", " stream", " of", " small", " tokens,"];
    let frame = |delta: serde_json::Value, finish: Option<&str>| {
        let v = json!({
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
            "created": 1_741_569_952, "model": "gpt-4o-2024-08-06", "service_tier": "default",
            "system_fingerprint": "fp_eb9dce56a8",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
        });
        format!("data: {v}\n\n").into_bytes()
    };
    let mut out = vec![frame(json!({"role": "assistant", "content": "", "refusal": null}), None)];
    out.extend((0..CHUNKS - 3).map(|i| frame(json!({"content": WORDS[i % WORDS.len()]}), None)));
    out.push(frame(json!({}), Some("stop")));
    let usage = json!({
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
        "created": 1_741_569_952, "model": "gpt-4o-2024-08-06", "choices": [],
        "usage": {"prompt_tokens": 812, "completion_tokens": 497, "total_tokens": 1309}
    });
    out.push(format!("data: {usage}\n\ndata: [DONE]\n\n").into_bytes());
    out
}

fn parser(c: &mut Criterion) {
    let chunks = body_chunks();
    let whole = chunks.concat();
    let check = |out: &Vec<LlmEvent>| {
        // 497 text deltas, the finish and the usage.
        assert_eq!(out.len(), CHUNKS - 1, "every chunk parsed");
    };
    let mut g = c.benchmark_group("chunk_parser");
    g.throughput(Throughput::Elements(CHUNKS as u64));
    g.bench_function("500_chunks_one_read_each", |b| {
        b.iter_batched_ref(
            || (ChunkParser::new(), Vec::with_capacity(CHUNKS)),
            |(p, out)| {
                for c in &chunks {
                    p.feed(c, out).unwrap();
                }
                assert!(p.is_done());
                check(out);
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("500_chunks_16k_reads", |b| {
        b.iter_batched_ref(
            || (ChunkParser::new(), Vec::with_capacity(CHUNKS)),
            |(p, out)| {
                for c in whole.chunks(16 * 1024) {
                    p.feed(c, out).unwrap();
                }
                assert!(p.is_done());
                check(out);
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, parser);
criterion_main!(benches);
