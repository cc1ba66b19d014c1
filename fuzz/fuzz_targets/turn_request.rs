//! `shared::turn::ValidTurn::parse` (the body of a chat turn, untrusted): any
//! bytes and any message limit give a verdict without panicking, and what it
//! accepts keeps the limits it promises. The first two bytes pick the limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shared::turn::ValidTurn;

fuzz_target!(|data: &[u8]| {
    let (limit, body) = match data {
        [a, b, body @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), body),
        _ => return,
    };
    if let Ok(turn) = ValidTurn::parse(body, limit) {
        assert!(!turn.message.trim().is_empty(), "an accepted message is not blank");
        assert!(turn.message.len() <= limit, "an accepted message is within the limit");
    }
});
