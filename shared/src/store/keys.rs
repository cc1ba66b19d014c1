//! Key builders for the scheme documented in [`crate::store`]: the only place
//! that spells a key, so the scheme cannot drift between readers and writers.

use crate::ids::{MessageId, RunId, SessionId, TurnId, UserId};

pub const SESSION_SK: &str = "SESSION";
pub const MSG_PREFIX: &str = "MSG#";
/// Upper bound of the message range: `$` is the byte after `#`.
pub const MSG_END: &str = "MSG$";
pub const GSI1: &str = "gsi1";
/// The sessions' own index, keys only: a session item is updated several
/// times a turn, and an index that projects every attribute pays a second
/// write for each of them; this one is written only when `gsi2sk` moves (once
/// a turn, at its lease). Listings read the items by key (docs/cost.md).
pub const GSI2: &str = "gsi2";

pub fn session_pk(user: &UserId, session: &SessionId) -> String {
    format!("U#{user}#S#{session}")
}

pub fn message_sk(seq: u64) -> String {
    format!("{MSG_PREFIX}{seq:010}")
}

/// The prefix of the body chunks of one message too large for its item. It
/// sorts before `MSG#`, so message queries never see chunks (and `Limit`
/// counts messages); the message id in it keeps the chunks of an attempt
/// that never committed apart from those of the message that did.
pub fn message_body_prefix(seq: u64, id: &MessageId) -> String {
    format!("BODY#{seq:010}#{id}#")
}

pub fn message_body_sk(seq: u64, id: &MessageId, chunk: usize) -> String {
    format!("{}{chunk:04}", message_body_prefix(seq, id))
}

/// The partition of a user's claim on a `stream_run_id` (one item, `sk = RUN`).
pub fn run_claim_pk(user: &UserId, run: &RunId) -> String {
    format!("U#{user}#RUN#{run}")
}

pub const RUN_CLAIM_SK: &str = "RUN";

/// The prefix of a tool output's chunks. The call id comes from the model, so
/// it is encoded: no character of it can reach into another key.
pub fn tool_output_prefix(call_id: &str) -> String {
    use base64::Engine;
    format!("OUT#{}#", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(call_id))
}

pub fn turn_sk(run: &RunId) -> String {
    format!("TURN#{run}")
}

pub fn sessions_gsi_pk(user: &UserId) -> String {
    format!("U#{user}#SESSIONS")
}

pub fn sessions_gsi_sk(last_activity_ms: i64, session: &SessionId) -> String {
    format!("{:013}#{session}", last_activity_ms.max(0))
}

/// The upper bound of a turn's read of the log: the newest messages and,
/// sorting right after them, the items the next prompt needs (the current
/// summary and the agent state). One descending `Query` from here returns
/// them all, so a turn reads its log in one request.
pub const LOG_END: &str = "MSG~~";

/// The session's current rolling summary (the compare-and-set target). It
/// sorts after every message and before [`LOG_END`].
pub const SUMMARY_SK: &str = "MSG~SUMMARY";

/// The session's agent state (one versioned item, compare-and-set on
/// `version`). It sorts after every message and before [`LOG_END`].
pub const AGENT_STATE_SK: &str = "MSG~AGENT_STATE";

/// The prefix of the audit copies of committed summaries.
pub const SUMMARY_VERSION_PREFIX: &str = "SUMMARY#";

/// One committed summary version, kept for audit (never overwritten).
pub fn summary_version_sk(version: u64) -> String {
    format!("{SUMMARY_VERSION_PREFIX}{version:010}")
}

/// The frame log ([`crate::frames`]): every batch of every turn of a session.
pub const FRAMES_PREFIX: &str = "FRAMES#";
/// Upper bound of the frame log: `$` is the byte after `#`.
pub const FRAMES_END: &str = "FRAMES$";

/// The batches of one turn. Turn ids are UUIDv7 (same length, time-ordered),
/// so turns sort by start time.
pub fn frames_turn_prefix(turn: &TurnId) -> String {
    format!("{FRAMES_PREFIX}{turn}#")
}

/// One batch, by the id of its first frame.
pub fn frames_sk(turn: &TurnId, first_frame: u64) -> String {
    format!("{}{first_frame:010}", frames_turn_prefix(turn))
}

/// A user's budget counters ([`crate::budget`]).
pub fn budget_pk(user: &UserId) -> String {
    format!("U#{user}#BUDGET")
}

/// The day's counts, the running turns' slots and the minutes' turn counts:
/// a user's one budget item.
pub const BUDGET_SK: &str = "BUDGET";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_keys_sort_by_seq_and_stay_in_range() {
        let a = message_sk(9);
        let b = message_sk(10);
        assert!(a < b);
        assert!(a.as_str() > MSG_PREFIX && b.as_str() < MSG_END);
        assert!(SESSION_SK > MSG_END);
        let body = message_body_sk(9, &MessageId::new(), 3);
        assert!(body.as_str() < MSG_PREFIX, "body chunks are outside the message range");
    }

    #[test]
    fn the_log_read_ends_with_the_summary_and_the_agent_state_and_nothing_else() {
        for sk in [SUMMARY_SK, AGENT_STATE_SK] {
            assert!(sk > message_sk(9_999_999_999).as_str() && sk > MSG_END && sk < LOG_END, "{sk}");
        }
        for other in [SESSION_SK.to_string(), summary_version_sk(1), turn_sk(&RunId::parse("r1").unwrap())] {
            assert!(other.as_str() > LOG_END || other.as_str() < MSG_PREFIX, "{other}");
        }
        assert!(tool_output_prefix("c").as_str() > LOG_END);
        let frames = frames_sk(&TurnId::new(), 1);
        assert!(frames.as_str() < MSG_PREFIX && frames.as_str() > message_body_sk(9, &MessageId::new(), 0).as_str());
    }

    #[test]
    fn frame_batches_sort_by_turn_start_then_frame() {
        let (a, b) = (TurnId::new(), TurnId::new());
        assert!(frames_sk(&a, 9_999) < frames_sk(&b, 1), "a later turn sorts after");
        assert!(frames_sk(&a, 9) < frames_sk(&a, 10));
        assert!(frames_sk(&b, 1).as_str() < FRAMES_END);
    }
}
