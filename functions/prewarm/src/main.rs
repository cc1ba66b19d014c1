//! The `prewarm` function: one binary for its function URL (buffered) and its
//! EventBridge schedule. Wiring only: `shared::prewarm::invoke` tells the two
//! payloads apart and runs the handler or the refresh.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;
use shared::prewarm::{invoke, PrewarmApp};
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let config = shared::config::Config::from_env()?;
    let app = PrewarmApp::from_config(config).await?;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let app = app.clone();
        async move {
            // The runtime's deadline is epoch milliseconds; the refresh wants an Instant.
            let left = (event.context.deadline as i64).saturating_sub(shared::now_ms()).max(0) as u64;
            let deadline = Instant::now() + Duration::from_millis(left);
            Ok::<_, Error>(invoke(&app, event.payload, deadline).await)
        }
    }))
    .await
}
