//! How long the product's own DynamoDB calls take inside a turn, from its
//! `ddb.*` tracing spans (`shared::store::dynamo` wraps every call in one,
//! named by operation, with a `what` field), and when its model requests
//! leave (`llm.request`). A tracing layer in the bench
//! process times each such span from creation to close; it sees the adapter
//! mode, where the handler runs in this process. Nothing else is enabled, so
//! the layer adds no logging work to the turn.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// When each span started and ended, keyed `name (what)`.
pub type Intervals = BTreeMap<String, Vec<(Instant, Instant)>>;

#[derive(Clone, Default)]
pub struct SpanTimes(Arc<Mutex<Intervals>>);

impl SpanTimes {
    /// Installs the timing layer as this process's subscriber.
    pub fn install() -> SpanTimes {
        let times = SpanTimes::default();
        let layer = Timer(times.clone()).with_filter(tracing_subscriber::filter::filter_fn(|m| {
            m.is_span() && (m.name().starts_with("ddb.") || m.name().starts_with("llm."))
        }));
        let _ = tracing_subscriber::registry().with(layer).try_init();
        times
    }

    /// Everything recorded so far, which is then forgotten.
    pub fn take(&self) -> Intervals {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Durations of spans.
pub fn durations(spans: &Intervals) -> BTreeMap<String, Vec<Duration>> {
    spans.iter().map(|(k, v)| (k.clone(), v.iter().map(|(a, b)| b.saturating_duration_since(*a)).collect())).collect()
}

/// The time inside `[from, to]` covered by at least one of `spans` (the
/// union: writes that overlap count once).
pub fn covered(spans: &[(Instant, Instant)], from: Instant, to: Instant) -> Duration {
    let mut inside: Vec<(Instant, Instant)> =
        spans.iter().map(|&(a, b)| (a.max(from), b.min(to))).filter(|(a, b)| a < b).collect();
    inside.sort();
    let mut total = Duration::ZERO;
    let mut current: Option<(Instant, Instant)> = None;
    for (a, b) in inside {
        match current {
            Some((ca, cb)) if a <= cb => current = Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += cb - ca;
                current = Some((a, b));
            }
            None => current = Some((a, b)),
        }
    }
    total + current.map_or(Duration::ZERO, |(a, b)| b - a)
}

struct Timer(SpanTimes);

struct Started {
    at: Instant,
    key: String,
}

struct What(Option<String>);

impl Visit for What {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "what" {
            self.0 = Some(value.to_string());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "what" {
            self.0 = Some(format!("{value:?}").trim_matches('"').to_string());
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Timer {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut what = What(None);
        attrs.record(&mut what);
        let name = attrs.metadata().name();
        let key = match what.0 {
            Some(w) => format!("{name} ({w})"),
            None => name.to_string(),
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Started { at: Instant::now(), key });
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let ext = span.extensions();
        if let Some(s) = ext.get::<Started>() {
            self.0 .0.lock().unwrap().entry(s.key.clone()).or_default().push((s.at, Instant::now()));
        }
    }
}
