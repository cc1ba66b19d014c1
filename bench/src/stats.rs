//! Percentiles and the results table.
//!
//! Percentiles are nearest-rank over the raw samples (no interpolation, no
//! histogram buckets), so p99 of 40 samples is the largest one: with few
//! samples the high percentiles are the worst cases seen, never smoothed away.

use std::fmt::Write as _;
use std::time::Duration;

/// p50/p95/p99/max of a set of durations.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub n: usize,
    pub p50: Duration,
    pub p95: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Summary {
    pub fn of(samples: &[Duration]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        let rank = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
        Some(Summary { n: s.len(), p50: rank(0.50), p95: rank(0.95), p99: rank(0.99), max: s[s.len() - 1] })
    }
}

/// Milliseconds with two decimals: the resolution the targets are stated in.
pub fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// Which statistic a target applies to.
#[derive(Debug, Clone, Copy)]
pub enum Judge {
    P50,
    P99,
}

/// A target: the statistic, its limit, and how it reads in the table.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub judge: Judge,
    pub limit: Duration,
    pub text: &'static str,
}

impl Target {
    pub const fn p99_ms(ms: u64, text: &'static str) -> Target {
        Target { judge: Judge::P99, limit: Duration::from_millis(ms), text }
    }
    pub const fn p50_ms(ms: u64, text: &'static str) -> Target {
        Target { judge: Judge::P50, limit: Duration::from_millis(ms), text }
    }
    fn met(&self, s: &Summary) -> bool {
        let v = match self.judge {
            Judge::P50 => s.p50,
            Judge::P99 => s.p99,
        };
        v <= self.limit
    }
}

/// One row of the latency table.
pub struct Row {
    pub metric: String,
    pub mode: String,
    pub summary: Option<Summary>,
    pub targets: Vec<Target>,
}

/// A row of the "other" table: a single figure against a target.
pub struct Figure {
    pub metric: String,
    pub value: String,
    pub target: String,
    pub met: Option<bool>,
}

pub fn latency_table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str("| metric | mode | n | p50 ms | p95 ms | p99 ms | max ms | target | met |\n");
    out.push_str("|---|---|--:|--:|--:|--:|--:|---|---|\n");
    for r in rows {
        let target = r.targets.iter().map(|t| t.text).collect::<Vec<_>>().join("; ");
        match &r.summary {
            Some(s) => {
                let met = if r.targets.is_empty() {
                    "".to_string()
                } else if r.targets.iter().all(|t| t.met(s)) {
                    "yes".to_string()
                } else {
                    "**no**".to_string()
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.metric,
                    r.mode,
                    s.n,
                    ms(s.p50),
                    ms(s.p95),
                    ms(s.p99),
                    ms(s.max),
                    target,
                    met
                );
            }
            None => {
                let _ = writeln!(out, "| {} | {} | 0 | – | – | – | – | {} | |", r.metric, r.mode, target);
            }
        }
    }
    out
}

pub fn figure_table(figures: &[Figure]) -> String {
    let mut out = String::new();
    out.push_str("| metric | value | target | met |\n|---|---|---|---|\n");
    for f in figures {
        let met = match f.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        let _ = writeln!(out, "| {} | {} | {} | {} |", f.metric, f.value, f.target, met);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = Summary::of(&samples).unwrap();
        assert_eq!((s.p50, s.p95, s.p99, s.max), (samples[49], samples[94], samples[98], samples[99]));
        let few: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        let s = Summary::of(&few).unwrap();
        assert_eq!((s.p50, s.p99), (few[4], few[9]), "with few samples p99 is the worst one");
        assert!(Summary::of(&[]).is_none());
    }
}
