//! Logging: JSON lines on stdout, which CloudWatch ingests as structured logs.
//! Each line carries its spans: the runtime's (`requestId`) and the turn's
//! (`user_id`, `session_id`, `turn_id`) — never a token.
//! `LOG_FORMAT=text` gives human-readable lines locally; `RUST_LOG` filters
//! (default `info`).

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once per process; later calls do nothing.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let text = std::env::var("LOG_FORMAT").map(|v| v.eq_ignore_ascii_case("text")).unwrap_or(false);
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stdout);
    let _ = if text {
        builder.without_time().try_init()
    } else {
        builder.json().with_current_span(true).with_span_list(true).flatten_event(true).without_time().try_init()
    };
}
