//! What the model's own tokenizer makes of our counts, learned from the usage
//! it reports.
//!
//! Contract: [`TokenCalibration::ratio`] is 1 until the model has reported a
//! request's `prompt_tokens`; then it is a moving mean of reported ÷ counted
//! (a quarter weight to the newest request), clamped to [1/4, 4]. Requests we
//! counted at fewer than [`MIN_COUNTED`] tokens are not learned from: the
//! chat template's own tokens dominate them. The stream scales
//! `CONTEXT_MAX_TOKENS` (which is in the model's tokens) into counted tokens
//! with it, and its `context_usage` back, so budgets hold for whatever
//! tokenizer the model behind the OpenAI-compatible API really uses. One
//! process talks to one model, so the ratio is per process.

use std::sync::atomic::{AtomicU64, Ordering};

/// Fewer counted tokens than this say little about the tokenizer.
pub const MIN_COUNTED: u64 = 64;
const SCALE: f64 = 1_000_000.0;
const MIN_RATIO: f64 = 0.25;
const MAX_RATIO: f64 = 4.0;
const NEWEST_WEIGHT: f64 = 0.25;

/// Reported ÷ counted prompt tokens, learned per process.
#[derive(Debug, Default)]
pub struct TokenCalibration {
    /// The ratio × [`SCALE`]; 0 while nothing is learned.
    scaled: AtomicU64,
}

impl TokenCalibration {
    pub fn new() -> Self {
        Self::default()
    }

    /// The model's tokens per counted token (1 until the first report).
    pub fn ratio(&self) -> f64 {
        match self.scaled.load(Ordering::Relaxed) {
            0 => 1.0,
            s => s as f64 / SCALE,
        }
    }

    /// Learns from one request: `counted` by our counter, `reported` by the model.
    pub fn observe(&self, counted: u64, reported: u64) {
        if counted < MIN_COUNTED || reported == 0 {
            return;
        }
        let sample = (reported as f64 / counted as f64).clamp(MIN_RATIO, MAX_RATIO);
        // Concurrent turns may interleave; a lost update only skips one sample.
        let _ = self.scaled.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
            let next = match s {
                0 => sample,
                s => (s as f64 / SCALE) * (1.0 - NEWEST_WEIGHT) + sample * NEWEST_WEIGHT,
            };
            Some((next * SCALE).round() as u64)
        });
    }

    /// A budget in model tokens as counted tokens (rounded down: the budget holds).
    pub fn to_counted(&self, model_tokens: u64) -> u64 {
        (model_tokens as f64 / self.ratio()).floor() as u64
    }

    /// Counted tokens as the model's (rounded up).
    pub fn to_model(&self, counted: u64) -> u64 {
        (counted as f64 * self.ratio()).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_the_ratio_and_moves_with_it() {
        let c = TokenCalibration::new();
        assert_eq!(c.ratio(), 1.0);
        assert_eq!(c.to_counted(12_000), 12_000);
        c.observe(10, 500); // too small to learn from
        assert_eq!(c.ratio(), 1.0);
        c.observe(1_000, 1_500);
        assert!((c.ratio() - 1.5).abs() < 1e-6);
        assert_eq!(c.to_counted(12_000), 8_000);
        assert_eq!(c.to_model(8_000), 12_000);
        c.observe(1_000, 500);
        assert!((c.ratio() - (1.5 * 0.75 + 0.5 * 0.25)).abs() < 1e-6);
        // A wild report is clamped, not believed.
        for _ in 0..100 {
            c.observe(1_000, 1_000_000);
        }
        assert!((c.ratio() - MAX_RATIO).abs() < 1e-3);
    }
}
