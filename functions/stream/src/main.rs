//! The `stream` function: one chat turn per `POST`, answered with Server-Sent
//! Events over Lambda response streaming. Wiring only; the turn lives in
//! `shared::turn`, the edge in `shared::http`.

use lambda_http::{service_fn, Error};
use shared::http::{handle_stream, StreamApp};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let config = shared::config::Config::from_env()?;
    let app = StreamApp::from_config(config).await?;
    // The concurrent runtime serves many invocations per process on Lambda
    // Managed Instances and falls back to one at a time elsewhere.
    lambda_http::run_with_streaming_response_concurrent(service_fn(move |req| {
        let app = app.clone();
        async move { Ok::<_, Error>(handle_stream(&app, req).await) }
    }))
    .await
}
