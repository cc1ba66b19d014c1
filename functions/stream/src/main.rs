//! The `stream` function: one chat turn per `POST`, answered with Server-Sent
//! Events over Lambda response streaming, plus the sessions API and the AI
//! SDK's chat routes. Wiring only; the turn lives in `shared::turn`, the
//! routes in `shared::edge::stream`.

use lambda_http::Error;
use shared::edge::stream::{router, StreamApp};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let config = shared::config::Config::from_env()?;
    let app = StreamApp::from_config(config).await?;
    // The concurrent runtime serves many invocations per process on Lambda
    // Managed Instances and falls back to one at a time elsewhere; one
    // invocation's failed answer does not end it (shared::lambda).
    let router = router(app);
    shared::lambda::serve_concurrent(|| lambda_http::streaming_runtime_concurrent(router.clone())).await
}
