//! The summarizer function's SQS batch handler, with partial batch failures.

use super::{summarize_session, SummarizerDeps, TurnCompleted};
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use futures::StreamExt;
use std::collections::BTreeMap;

/// Handles one batch: one run per session named in it (a session's records
/// collapse into its newest event, since runs work from watermarks), sessions
/// concurrently up to `SUMMARY_CONCURRENCY`. A session whose run fails has all
/// of its records reported in `batchItemFailures`, so SQS redelivers them,
/// in order within their FIFO group; the other sessions' records are deleted.
/// A record whose body is not a [`TurnCompleted`] can never succeed: it is
/// logged and acknowledged rather than left to block its group (no work is
/// lost, because the next turn's event covers the session).
pub async fn handle_batch(deps: &SummarizerDeps, event: SqsEvent) -> SqsBatchResponse {
    // (user, session) -> (newest event, the record ids that named it)
    let mut sessions: BTreeMap<(String, String), (TurnCompleted, Vec<String>)> = BTreeMap::new();
    for record in event.records {
        let id = record.message_id.clone().unwrap_or_default();
        let parsed = record.body.as_deref().map(serde_json::from_str::<TurnCompleted>);
        let ev = match parsed {
            Some(Ok(ev)) => ev,
            other => {
                let error = match other {
                    Some(Err(e)) => e.to_string(),
                    _ => "no body".to_string(),
                };
                tracing::error!(message_id = %id, error = %error, "dropping a record that is not a TurnCompleted");
                continue;
            }
        };
        let key = (ev.user_id.to_string(), ev.session_id.to_string());
        match sessions.get_mut(&key) {
            Some((newest, ids)) => {
                if ev.last_message_seq > newest.last_message_seq {
                    *newest = ev;
                }
                ids.push(id);
            }
            None => {
                sessions.insert(key, (ev, vec![id]));
            }
        }
    }

    let runs = futures::stream::iter(sessions.into_values().map(|(ev, ids)| async move {
        let span = tracing::info_span!("summarize", user_id = %ev.user_id, session_id = %ev.session_id,
            last_message_seq = ev.last_message_seq);
        let result = tracing::Instrument::instrument(summarize_session(deps, &ev), span.clone()).await;
        match result {
            Ok(outcome) => {
                span.in_scope(|| tracing::info!(?outcome, "summarizer run done"));
                Vec::new()
            }
            Err(e) => {
                span.in_scope(|| tracing::warn!(error = %e, "summarizer run failed; its records will be retried"));
                ids
            }
        }
    }))
    .buffer_unordered(deps.config.concurrency.max(1))
    .collect::<Vec<Vec<String>>>()
    .await;

    let failed_sessions = runs.iter().filter(|ids| !ids.is_empty()).count();
    crate::metrics::Record::new("summarizer")
        .metric("SummarizerRuns", runs.len() as f64, crate::metrics::Unit::Count)
        .metric("SummarizerFailures", failed_sessions as f64, crate::metrics::Unit::Count)
        .emit();
    let mut response = SqsBatchResponse::default();
    for id in runs.into_iter().flatten() {
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id;
        response.batch_item_failures.push(failure);
    }
    response
}
