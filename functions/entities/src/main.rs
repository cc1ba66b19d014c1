//! The `entities` function: the ontology (projects, documents, tasks, goals,
//! plans, milestones, risks, requirements, edges, the document tree) as a JSON
//! API on a Lambda function URL, buffered. Wiring only; the service lives in
//! `shared::entities`, the routes in `shared::edge::entities`.

use lambda_http::Error;
use shared::edge::entities::{router, EntitiesApp};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let config = shared::config::Config::from_env()?;
    let app = EntitiesApp::from_config(config).await;
    // One invocation's failed answer does not end the process (shared::lambda).
    shared::lambda::serve(lambda_http::runtime_concurrent(router(app))).await
}
