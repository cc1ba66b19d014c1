//! The `prewarm` function: one binary for its function URL (buffered) and its
//! EventBridge schedule. Wiring only: `shared::edge::prewarm::invoke` tells
//! the two payloads apart and runs the route or the refresh.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;
use shared::edge::prewarm::{invoke, runtime_deadline};
use shared::prewarm::PrewarmApp;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let config = shared::config::Config::from_env()?;
    let app = PrewarmApp::from_config(config).await?;
    // One invocation's failed answer does not end the process (shared::lambda).
    shared::lambda::serve(|| {
        let app = app.clone();
        lambda_runtime::Runtime::new(service_fn(move |event: LambdaEvent<Value>| {
            let app = app.clone();
            async move {
                tracing::debug!(deadline_ms = event.context.deadline, "prewarm invocation");
                let deadline = runtime_deadline(event.context.deadline);
                Ok::<_, Error>(invoke(&app, event.payload, deadline).await)
            }
        }))
    })
    .await
}
