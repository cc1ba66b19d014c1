//! Publishing [`TurnCompleted`] without holding up the turn.

use super::TurnCompleted;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("could not encode the event: {0}")]
    Encode(String),
    #[error("the queue refused the event: {0}")]
    Send(String),
}

/// Where turn-end events go.
#[async_trait::async_trait]
pub trait TurnEvents: Send + Sync {
    async fn publish(&self, event: &TurnCompleted) -> Result<(), PublishError>;
}

/// SQS FIFO: message group = session id (one summarizer at a time per
/// session, in order), deduplication id = turn id (a retried publish of the
/// same turn is dropped by SQS within its 5-minute window).
#[derive(Clone)]
pub struct SqsTurnEvents {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsTurnEvents {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self { client, queue_url: queue_url.into() }
    }
}

#[async_trait::async_trait]
impl TurnEvents for SqsTurnEvents {
    async fn publish(&self, event: &TurnCompleted) -> Result<(), PublishError> {
        let body = serde_json::to_string(event).map_err(|e| PublishError::Encode(e.to_string()))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_group_id(event.session_id.as_str())
            .message_deduplication_id(event.turn_id.as_str())
            .send()
            .instrument(tracing::debug_span!("sqs.send_message"))
            .await
            .map_err(|e| PublishError::Send(format!("{}", aws_sdk_sqs::error::DisplayErrorContext(e))))?;
        Ok(())
    }
}

/// For deployments without a summarizer queue (`SUMMARY_QUEUE_URL` unset):
/// events go nowhere and conversations are bounded by the context builder alone.
pub struct NoTurnEvents;

#[async_trait::async_trait]
impl TurnEvents for NoTurnEvents {
    async fn publish(&self, _event: &TurnCompleted) -> Result<(), PublishError> {
        Ok(())
    }
}

/// Publishes in a spawned task and waits for it at most `wait`. Never fails:
/// a failure is logged, and a send still running after `wait` goes on in the
/// background (on Lambda it resumes with the next invocation of the
/// container, or is lost with it; either way a later turn's event covers it,
/// because the summarizer works from watermarks). Returns whether the send
/// completed successfully within `wait`.
pub async fn publish_bounded(events: Arc<dyn TurnEvents>, event: TurnCompleted, wait: Duration) -> bool {
    let span = tracing::info_span!("turn_event", session_id = %event.session_id, turn_id = %event.turn_id);
    let task = tokio::spawn(
        async move {
            let started = tokio::time::Instant::now();
            match events.publish(&event).await {
                Ok(()) => {
                    tracing::debug!(ms = started.elapsed().as_millis() as u64, "turn event published");
                    true
                }
                Err(e) => {
                    tracing::warn!(error = %e, "turn event not published; a later turn's event covers it");
                    false
                }
            }
        }
        .instrument(span),
    );
    match tokio::time::timeout(wait, task).await {
        Ok(Ok(sent)) => sent,
        Ok(Err(join)) => {
            tracing::warn!(error = %join, "turn event task failed");
            false
        }
        Err(_) => false,
    }
}
