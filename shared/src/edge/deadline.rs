//! When the runtime will stop this invocation: the one reading of the
//! runtime's deadline for every function.

use std::time::Duration;
use tokio::time::Instant;

/// A runtime deadline below this cannot be an epoch time (it would be before
/// 2001): `cargo lambda watch` sends the invoke timeout itself (e.g. 600000)
/// where Lambda sends `Lambda-Runtime-Deadline-Ms`.
const EPOCH_2001_MS: u64 = 978_307_200_000;

/// The deadline of the runtime's `deadline_ms` (epoch milliseconds, or a
/// timeout from now, see [`EPOCH_2001_MS`]), measured against `now_ms`;
/// `fallback` from now when there is none (0: local adapters, tests).
pub fn from_runtime(deadline_ms: u64, now_ms: i64, fallback: Duration) -> Instant {
    let now = Instant::now();
    let left = match deadline_ms {
        0 => return now + fallback,
        timeout if timeout < EPOCH_2001_MS => timeout,
        epoch => epoch.saturating_sub(now_ms.max(0) as u64),
    };
    now + Duration::from_millis(left)
}

/// The deadline of the invocation a request came in, or `fallback` from now.
pub fn of_request(extensions: &http::Extensions, fallback: Duration) -> Instant {
    let deadline_ms = extensions.get::<lambda_http::Context>().map(|c| c.deadline).unwrap_or(0);
    from_runtime(deadline_ms, crate::now_ms(), fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const FALLBACK: Duration = Duration::from_secs(900);

    #[tokio::test(start_paused = true)]
    async fn an_epoch_deadline_is_the_time_left() {
        let d = from_runtime(NOW as u64 + 60_000, NOW, FALLBACK);
        assert_eq!(d - Instant::now(), Duration::from_secs(60));
        assert_eq!(from_runtime(NOW as u64 - 1_000, NOW, FALLBACK), Instant::now(), "a past deadline is now");
    }

    #[tokio::test(start_paused = true)]
    async fn a_small_value_is_the_watchs_timeout_and_none_is_the_fallback() {
        assert_eq!(from_runtime(600_000, NOW, FALLBACK) - Instant::now(), Duration::from_secs(600));
        assert_eq!(from_runtime(0, NOW, FALLBACK) - Instant::now(), FALLBACK);
        assert_eq!(of_request(&http::Extensions::new(), FALLBACK) - Instant::now(), FALLBACK);
    }
}
