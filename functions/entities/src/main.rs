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
    // What `lambda_http::run` does (its `Adapter` turns the function URL's
    // event into a request and the answer back), with one invocation's failed
    // answer not ending the process (shared::lambda).
    let router = router(app);
    shared::lambda::serve(|| lambda_http::lambda_runtime::Runtime::new(lambda_http::Adapter::from(router.clone())))
        .await
}
