//! What the model's own tokenizer makes of our counts, learned from the usage
//! it reports.
//!
//! Contract: for a request of `x` counted message tokens offered with tool
//! definitions we count at `t`, [`TokenCalibration::line`] predicts the
//! model's `prompt_tokens` as `a·x + b`. Before the model has reported
//! anything for that tool set, `a = 1, b = t` (our counter's word). Then:
//! - `b` is what the model adds beyond the messages: the tool definitions as
//!   it renders them (some chat templates drop them: `b` ≈ 0) and its
//!   template. Learning it apart from `a` matters: a ratio over the whole
//!   request, measured on a short conversation where the tools dominate, would
//!   let a long one through at several times what the model can take;
//! - with at least three reports whose message counts spread (standard
//!   deviation ≥ 15% of their mean), `a, b` are a least-squares line over
//!   recent reports (each older one weighs 0.8 of the next); else `a = 1` and
//!   `b` is the mean difference, so the prediction is exact where the
//!   conversation is and off elsewhere only by our counter's error;
//! - `a ∈ [1/2, 3]`, `b ≥ 0`: a wild report cannot open the budget wide.
//!
//! The stream turns `CONTEXT_MAX_TOKENS` (model tokens) into a message budget
//! in counted tokens with it, and reports `context_usage` in model tokens.
//! One process talks to one model, so the fits are per process, one per tool
//! set (keyed by its counted size: a global turn offers fewer tools than a
//! project turn).

use std::sync::Mutex;

/// Reports of fewer counted message tokens than this say little.
pub const MIN_COUNTED: u64 = 32;
const DECAY: f64 = 0.8;
const MIN_SPREAD: f64 = 0.15;
const MIN_SLOPE: f64 = 0.5;
const MAX_SLOPE: f64 = 3.0;
/// Tool sets remembered; more are rare (a handful of scopes).
const MAX_FITS: usize = 16;

/// Predicted model tokens: `slope · counted + intercept`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub slope: f64,
    pub intercept: f64,
}

impl Line {
    /// The model's tokens for `counted` message tokens (rounded up).
    pub fn model_tokens(&self, counted: u64) -> u64 {
        (self.slope * counted as f64 + self.intercept).ceil().max(0.0) as u64
    }

    /// The most counted message tokens that fit in `model_budget` (rounded down).
    pub fn counted_budget(&self, model_budget: u64) -> u64 {
        ((model_budget as f64 - self.intercept) / self.slope).floor().max(0.0) as u64
    }
}

/// Decayed sums of (counted, reported) pairs for one tool set.
#[derive(Debug, Default, Clone, Copy)]
struct Fit {
    reports: u32,
    w: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl Fit {
    fn add(&mut self, x: f64, y: f64) {
        self.reports += 1;
        self.w = self.w * DECAY + 1.0;
        self.x = self.x * DECAY + x;
        self.y = self.y * DECAY + y;
        self.xx = self.xx * DECAY + x * x;
        self.xy = self.xy * DECAY + x * y;
    }

    fn line(&self) -> Line {
        let (mx, my) = (self.x / self.w, self.y / self.w);
        let var = (self.xx / self.w - mx * mx).max(0.0);
        let (slope, intercept) = if self.reports >= 3 && var.sqrt() >= MIN_SPREAD * mx {
            let slope = ((self.xy / self.w - mx * my) / var).clamp(MIN_SLOPE, MAX_SLOPE);
            (slope, my - slope * mx)
        } else {
            (1.0, my - mx)
        };
        Line { slope, intercept: intercept.max(0.0) }
    }
}

/// The process's fits, one per tool set.
#[derive(Debug, Default)]
pub struct TokenCalibration {
    fits: Mutex<Vec<(u64, Fit)>>,
}

impl TokenCalibration {
    pub fn new() -> Self {
        Self::default()
    }

    /// The prediction for requests offered tools we count at `tools`.
    pub fn line(&self, tools: u64) -> Line {
        let fits = self.fits.lock().unwrap_or_else(|e| e.into_inner());
        match fits.iter().find(|(k, _)| *k == tools) {
            Some((_, fit)) => fit.line(),
            None => Line { slope: 1.0, intercept: tools as f64 },
        }
    }

    /// Learns from one request: `messages` and `tools` as we counted them,
    /// `reported` as the model did (its `prompt_tokens`).
    pub fn observe(&self, tools: u64, messages: u64, reported: u64) {
        if messages < MIN_COUNTED || reported == 0 {
            return;
        }
        let mut fits = self.fits.lock().unwrap_or_else(|e| e.into_inner());
        let at = match fits.iter().position(|(k, _)| *k == tools) {
            Some(i) => i,
            None => {
                if fits.len() == MAX_FITS {
                    fits.remove(0);
                }
                fits.push((tools, Fit::default()));
                fits.len() - 1
            }
        };
        fits[at].1.add(messages as f64, reported as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_any_report_our_counts_stand() {
        let c = TokenCalibration::new();
        let l = c.line(600);
        assert_eq!((l.slope, l.intercept), (1.0, 600.0));
        assert_eq!(l.counted_budget(3_000), 2_400);
        assert_eq!(l.model_tokens(2_400), 3_000);
    }

    #[test]
    fn slope_and_intercept_are_learned_apart() {
        // A model that drops the tool definitions and counts 1.5x our tokens.
        let c = TokenCalibration::new();
        for x in [300u64, 700, 1_200, 1_800, 2_500] {
            c.observe(600, x, x * 3 / 2);
        }
        let l = c.line(600);
        assert!((l.slope - 1.5).abs() < 0.01 && l.intercept < 5.0, "{l:?}");
        // 3072 model tokens hold ~2048 counted, not the 3072 - 600 a ratio
        // learned on the first, tool-dominated request would have allowed.
        assert!((2_040..=2_048).contains(&l.counted_budget(3_072)), "{}", l.counted_budget(3_072));
        // Another tool set is not affected.
        assert_eq!(c.line(900).intercept, 900.0);
    }

    #[test]
    fn without_spread_the_prediction_is_exact_where_the_conversation_is() {
        let c = TokenCalibration::new();
        c.observe(600, 2_000, 2_900);
        c.observe(600, 2_010, 2_915);
        let l = c.line(600);
        assert_eq!(l.slope, 1.0);
        assert!(l.model_tokens(2_005).abs_diff(2_908) <= 2, "{l:?}");
    }

    #[test]
    fn wild_reports_are_bounded_and_small_ones_ignored() {
        let c = TokenCalibration::new();
        c.observe(0, 10, 100_000);
        assert_eq!(c.line(0).intercept, 0.0, "too small to learn from");
        for x in [1_000u64, 2_000, 3_000, 4_000] {
            c.observe(0, x, x * 100);
        }
        assert_eq!(c.line(0).slope, MAX_SLOPE);
        for x in [1_000u64, 2_000, 3_000, 4_000, 5_000, 6_000] {
            c.observe(7, x, 1);
        }
        let l = c.line(7);
        assert_eq!(l.slope, MIN_SLOPE);
        assert!(l.intercept >= 0.0);
    }
}
