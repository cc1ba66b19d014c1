//! The turn's dev-only measurements (`telemetry` events, docs/events.md):
//! a per-turn recorder that any code running inside the turn can push a
//! measurement into, off unless `DEV_EVENTS` is on.
//!
//! Contract:
//! - [`Telemetry::current`] is the recorder of the turn whose future is being
//!   polled (a task-local set by [`Telemetry::scope`]); outside a turn, or
//!   with `DEV_EVENTS` off, it is a no-op recorder: recording costs nothing
//!   and nothing is ever sent. Code in a `tokio::spawn`ed task is outside the
//!   turn's task: take `Telemetry::current()` before spawning and move it in.
//! - What is recorded is sent once, in the order recorded: with the events of
//!   the tool call during which it was recorded (before its `tool_result`),
//!   else just before `done`. Nothing recorded is ever dropped or repeated.
//!
//! Use: `Telemetry::current().plan_step(plan_id, step_id, started.elapsed(), ok)`
//! when a plan step ends; [`Telemetry::record`] for any other [`Measure`].

use crate::sse::{StreamEvent, Telemetry as Measure};
use std::sync::{Arc, Mutex};
use std::time::Duration;

tokio::task_local! {
    static CURRENT: Telemetry;
}

/// A turn's recorder. Clones share the same record.
#[derive(Clone, Default)]
pub struct Telemetry(Option<Arc<Mutex<Vec<Measure>>>>);

impl Telemetry {
    /// A recorder that keeps what it is given when `on`, else ignores it.
    pub fn new(on: bool) -> Telemetry {
        Telemetry(on.then(Default::default))
    }

    /// Runs `turn` with this recorder as [`Telemetry::current`].
    pub fn scope<F: std::future::Future>(self, turn: F) -> impl std::future::Future<Output = F::Output> {
        CURRENT.scope(self, turn)
    }

    /// The running turn's recorder (a no-op one outside a turn).
    pub fn current() -> Telemetry {
        CURRENT.try_with(Telemetry::clone).unwrap_or_default()
    }

    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    pub fn record(&self, measure: Measure) {
        if let Some(record) = &self.0 {
            record.lock().unwrap_or_else(|e| e.into_inner()).push(measure);
        }
    }

    /// A plan step ended after `took`.
    pub fn plan_step(&self, plan_id: impl Into<String>, step_id: impl Into<String>, took: Duration, ok: bool) {
        if self.is_on() {
            let (plan_id, step_id) = (plan_id.into(), step_id.into());
            self.record(Measure::PlanStep { plan_id, step_id, duration_ms: millis(took), ok });
        }
    }

    /// Everything recorded and not sent yet, as events, oldest first.
    pub fn drain(&self) -> Vec<StreamEvent> {
        let Some(record) = &self.0 else { return vec![] };
        let taken = std::mem::take(&mut *record.lock().unwrap_or_else(|e| e.into_inner()));
        taken.into_iter().map(StreamEvent::Telemetry).collect()
    }
}

pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_current_recorder_is_the_turns_and_off_records_nothing() {
        Telemetry::current().plan_step("p", "s", Duration::from_millis(5), true);
        let on = Telemetry::new(true);
        on.clone()
            .scope(async {
                Telemetry::current().plan_step("p", "s1", Duration::from_millis(5), true);
            })
            .await;
        let sent = on.drain();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(on.drain().is_empty(), "drained once");
        let off = Telemetry::new(false);
        off.clone().scope(async { Telemetry::current().plan_step("p", "s1", Duration::ZERO, true) }).await;
        assert!(off.drain().is_empty());
    }
}
