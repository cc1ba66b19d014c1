//! `shared::sse::SseDecoder`: any bytes, split anywhere, decode to the same
//! frames (and the same error) as when they arrive at once, and nothing panics.
//! The first input byte picks the split points and a small or default limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shared::sse::{SseDecodeError, SseDecoder, SseFrame};

/// Frames and the first error of one stream, fed in `pieces`, then finished;
/// with a 64-byte limit when `small` (to reach the limit errors), else the default.
fn decode<'a>(small: bool, pieces: impl Iterator<Item = &'a [u8]>) -> (Vec<SseFrame>, Option<SseDecodeError>) {
    let mut dec = if small { SseDecoder::with_limit(64) } else { SseDecoder::new() };
    let mut frames = Vec::new();
    for piece in pieces {
        if let Err(e) = dec.feed_into(piece, &mut frames) {
            return (frames, Some(e));
        }
    }
    frames.extend(dec.finish());
    (frames, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&knob, input)) = data.split_first() else { return };
    let small = knob & 0x80 == 0;
    let step = usize::from(knob & 0x7f).max(1);
    let whole = decode(small, std::iter::once(input));
    let split = decode(small, input.chunks(step));
    let bytewise = decode(small, input.chunks(1));
    assert_eq!(whole, split, "split every {step} bytes");
    assert_eq!(whole, bytewise, "split every byte");
});
