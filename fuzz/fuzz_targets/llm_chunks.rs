//! `shared::llm::ChunkParser` (the model's streamed Chat Completions body):
//! any bytes, split anywhere, give the same events (and the same verdict) as
//! when they arrive at once, and nothing panics; the tool-call deltas it
//! yields assemble without panicking. The first input byte picks the splits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shared::llm::{ChunkParser, LlmEvent, ToolCallAccumulator};

/// The events of one body fed in `pieces`, and whether it decoded.
fn parse<'a>(pieces: impl Iterator<Item = &'a [u8]>) -> (Vec<LlmEvent>, bool) {
    let mut parser = ChunkParser::new();
    let mut events = Vec::new();
    for piece in pieces {
        if parser.feed(piece, &mut events).is_err() {
            return (events, false);
        }
    }
    let ok = parser.finish(&mut events).is_ok();
    (events, ok)
}

fuzz_target!(|data: &[u8]| {
    let Some((&knob, body)) = data.split_first() else { return };
    let step = usize::from(knob).max(1);
    let whole = parse(std::iter::once(body));
    let split = parse(body.chunks(step));
    assert_eq!(whole, split, "split every {step} bytes");
    let mut calls = ToolCallAccumulator::new();
    for event in &whole.0 {
        calls.push_event(event);
    }
    let _ = calls.finish();
});
