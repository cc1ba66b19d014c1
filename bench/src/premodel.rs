//! What a turn does before the model is called (issue 17): the time from the
//! request to the model request, and the product's DynamoDB calls, counted
//! from its `ddb.*` spans and placed against its `llm.request` span (adapter
//! mode, where the handler runs in this process and its spans are seen).
//!
//! - requests before the model: `ddb.*` spans that start after the handler's
//!   entry and end before the first `llm.request` span starts (waited for;
//!   a write that goes out beside the model call is not);
//! - round trips in series: the most of those that do not overlap (calls
//!   that go out together overlap, so they count once);
//! - requests per turn: every `ddb.*` span of the turn, from the handler's
//!   entry to `done`, the lease keeper's Stop polls and renewals aside (they
//!   come per second of turn, not per turn).

use crate::driver::TurnTiming;
use crate::spans::Intervals;
use std::time::Duration;
use tokio::time::Instant;

/// One turn's DynamoDB calls, as counted above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calls {
    pub before_model: usize,
    pub in_series_before_model: usize,
    pub per_turn: usize,
}

/// The lease keeper's periodic calls, left out of the counts.
fn periodic(key: &str) -> bool {
    key.contains("(stop_requested)") || key.contains("(renew_lease)")
}

/// When the turn's first model request left (its first `llm.request` span).
pub fn model_sent(t: &TurnTiming, spans: &Intervals) -> Option<Instant> {
    let from = t.handler_entry?;
    spans
        .iter()
        .filter(|(k, _)| k.starts_with("llm.request"))
        .flat_map(|(_, v)| v.iter().map(|(a, _)| *a))
        .filter(|a| *a >= from && *a <= t.done_at)
        .min()
}

pub fn calls(t: &TurnTiming, spans: &Intervals) -> Option<Calls> {
    let from = t.handler_entry?;
    let model = model_sent(t, spans)?;
    let ddb: Vec<(Instant, Instant)> = spans
        .iter()
        .filter(|(k, _)| k.starts_with("ddb.") && !periodic(k))
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|(a, _)| *a >= from && *a <= t.done_at)
        .collect();
    let before: Vec<(Instant, Instant)> = ddb.iter().copied().filter(|(_, b)| *b <= model).collect();
    Some(Calls { before_model: before.len(), in_series_before_model: in_series(before), per_turn: ddb.len() })
}

/// The most intervals of these that do not overlap (earliest end first).
fn in_series(mut spans: Vec<(Instant, Instant)>) -> usize {
    spans.sort_by_key(|(_, end)| *end);
    let mut last_end: Option<Instant> = None;
    let mut n = 0;
    for (start, end) in spans {
        if last_end.is_none_or(|e| start >= e) {
            n += 1;
            last_end = Some(end);
        }
    }
    n
}

/// Pre-model time minus the time DynamoDB calls were in flight in it (the
/// union of their spans): what our own code took (adapter only).
pub fn ours_before_model(t: &TurnTiming, spans: &Intervals) -> Option<Duration> {
    let (from, model) = (t.handler_entry?, model_sent(t, spans)?);
    let ddb: Vec<(Instant, Instant)> =
        spans.iter().filter(|(k, _)| k.starts_with("ddb.")).flat_map(|(_, v)| v.iter().copied()).collect();
    Some(model.saturating_duration_since(from).saturating_sub(crate::spans::covered(&ddb, from, model)))
}

/// Request received → model request sent (adapter only).
pub fn to_model_sent(t: &TurnTiming, spans: &Intervals) -> Option<Duration> {
    Some(model_sent(t, spans)?.saturating_duration_since(t.handler_entry?))
}

/// Request received (the handler's entry; elsewhere, the request sent) →
/// the scripted model has the request.
pub fn to_model_received(t: &TurnTiming) -> Option<Duration> {
    Some(t.model_received?.saturating_duration_since(t.handler_entry.unwrap_or(t.sent_at)))
}

/// Time to first token as the user sees it (request sent → first
/// `text_delta`) minus the model's own (request received → first token).
pub fn user_ttft_minus_model(t: &TurnTiming) -> Option<Duration> {
    let model = t.first_token_at.saturating_duration_since(t.model_received?);
    Some(t.first_delta_at.saturating_duration_since(t.sent_at).saturating_sub(model))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_that_overlap_count_once_in_series() {
        let t0 = Instant::now();
        let at = |a: u64, b: u64| (t0 + Duration::from_millis(a), t0 + Duration::from_millis(b));
        assert_eq!(in_series(vec![at(0, 5), at(1, 4), at(2, 6)]), 1, "one round of three");
        assert_eq!(in_series(vec![at(0, 5), at(1, 4), at(6, 9)]), 2, "a second round after the first");
        assert_eq!(in_series(vec![]), 0);
    }
}
