//! The `summarizer` function: an SQS FIFO batch handler for `TurnCompleted`
//! events that keeps each session's rolling summary up to date, off the chat
//! turn's hot path. Wiring only; the logic lives in `shared::summary`.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use shared::agent_state::store::DynamoAgentStateStore;
use shared::context::ContextConfig;
use shared::llm::{OpenAiClient, OpenAiConfig};
use shared::store::dynamo::DynamoStore;
use shared::summary::store::DynamoSummaryStore;
use shared::summary::{handle_batch, SummarizerDeps, SummaryConfig};
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init();
    let config = shared::config::Config::from_env()?;
    let context = ContextConfig::from_env()?;
    let summary = SummaryConfig::from_env(&config.llm.model)?;
    // The token trigger is about the chat model's budget, so its tokenizer.
    let counter = context.counter(&config.llm.model)?;
    let sdk = shared::store::aws::load_from_env().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let mut llm = OpenAiConfig::from(&config.llm);
    llm.model = summary.model.clone();
    let deps = Arc::new(SummarizerDeps {
        store: Arc::new(DynamoStore::new(dynamo.clone(), config.table_name.clone())),
        summaries: Arc::new(DynamoSummaryStore::new(dynamo.clone(), config.table_name.clone())),
        agent_state: Some(Arc::new(DynamoAgentStateStore::new(dynamo, config.table_name.clone()))),
        llm: Arc::new(OpenAiClient::new(llm)),
        config: summary,
        counter,
        large_paste_chars: context.budget.large_paste_chars,
    });
    // One invocation's failed answer does not end the process (shared::lambda).
    shared::lambda::serve(|| {
        let deps = deps.clone();
        lambda_runtime::Runtime::new(service_fn(move |event: LambdaEvent<SqsEvent>| {
            let deps = deps.clone();
            async move { Ok::<SqsBatchResponse, Error>(handle_batch(&deps, event.payload).await) }
        }))
    })
    .await
}
