//! The summarizer function's SQS batch handler, with partial batch failures.

use super::{summarize_session, Outcome, SummarizerDeps, TurnCompleted};
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;
use std::collections::{BTreeMap, HashSet};

/// The SQS system attribute naming a FIFO record's message group.
const MESSAGE_GROUP_ID: &str = "MessageGroupId";

/// Handles one batch: one run per session named in it (a session's records
/// collapse into its newest event, since runs work from watermarks), sessions
/// concurrently up to `SUMMARY_CONCURRENCY`. A session whose run fails has all
/// of its records reported in `batchItemFailures`, so SQS redelivers them,
/// in order within their FIFO group; the other sessions' records are deleted.
///
/// A record whose body is not a [`TurnCompleted`] can never succeed, but it
/// is never dropped either: it is reported as failed on every delivery, so the
/// queue's redrive policy moves it to the dead-letter queue after
/// `maxReceiveCount` receives, where an operator sees it (docs/deploy.md,
/// "Summarizer dead-letter queue"). In a FIFO queue it blocks its message
/// group: the records of that group after it in the batch are reported too,
/// unprocessed, so nothing of the group is handled out of order.
pub async fn handle_batch(deps: &SummarizerDeps, event: SqsEvent) -> SqsBatchResponse {
    let plan = plan(event.records);

    let runs = futures::stream::iter(plan.sessions.into_values().map(|(ev, ids)| async move {
        let span = tracing::info_span!("summarize", user_id = %ev.user_id, session_id = %ev.session_id,
            last_message_seq = ev.last_message_seq);
        let result = tracing::Instrument::instrument(summarize_session(deps, &ev), span.clone()).await;
        match result {
            // A rejected backlog is done too: redelivering the event would ask
            // nothing (the rejections are counted per backlog), and the next
            // turn's event brings new messages. So is a run deferred to a
            // running turn: that turn's end (or the session's next) event
            // brings the work back.
            Ok(outcome) => {
                span.in_scope(|| tracing::info!(?outcome, "summarizer run done"));
                (Vec::new(), Some(outcome))
            }
            Err(e) => {
                span.in_scope(|| tracing::warn!(error = %e, "summarizer run failed; its records will be retried"));
                (ids, None)
            }
        }
    }))
    .buffer_unordered(deps.config.concurrency.max(1))
    .collect::<Vec<(Vec<String>, Option<Outcome>)>>()
    .await;

    let failed_sessions = runs.iter().filter(|(ids, _)| !ids.is_empty()).count();
    let count = |f: fn(&Outcome) -> bool| runs.iter().filter(|(_, o)| o.as_ref().is_some_and(f)).count() as f64;
    let rejected = count(|o| matches!(o, Outcome::Rejected { .. }));
    let deferred = count(|o| matches!(o, Outcome::Deferred { .. }));
    crate::metrics::Record::new("summarizer")
        .metric("SummarizerRuns", runs.len() as f64, crate::metrics::Unit::Count)
        .metric("SummarizerFailures", failed_sessions as f64, crate::metrics::Unit::Count)
        .metric("SummarizerRejected", rejected, crate::metrics::Unit::Count)
        .metric("SummarizerDeferred", deferred, crate::metrics::Unit::Count)
        .metric("SummarizerUnparseable", plan.unparseable as f64, crate::metrics::Unit::Count)
        .emit();
    let mut response = SqsBatchResponse::default();
    for id in plan.failed.into_iter().chain(runs.into_iter().flat_map(|(ids, _)| ids)) {
        let mut failure = BatchItemFailure::default();
        failure.item_identifier = id;
        response.batch_item_failures.push(failure);
    }
    response
}

/// What to do with a batch's records.
#[derive(Default)]
struct Plan {
    /// (user, session) -> (newest event, the record ids that named it).
    sessions: BTreeMap<(String, String), (TurnCompleted, Vec<String>)>,
    /// Records reported as failed without a run: unparseable ones, and the
    /// ones after them in their FIFO group.
    failed: Vec<String>,
    unparseable: usize,
}

/// Sorts the records, in delivery order, into runs and failures.
fn plan(records: Vec<SqsMessage>) -> Plan {
    let mut plan = Plan::default();
    // FIFO groups with an unparseable record earlier in this batch.
    let mut blocked: HashSet<String> = HashSet::new();
    for record in records {
        let id = record.message_id.clone().unwrap_or_default();
        let group = record.attributes.get(MESSAGE_GROUP_ID).cloned();
        if group.as_ref().is_some_and(|g| blocked.contains(g)) {
            tracing::warn!(message_id = %id, group = ?group, "record held back behind an unparseable one of its group");
            plan.failed.push(id);
            continue;
        }
        let parsed = match record.body.as_deref() {
            Some(body) => serde_json::from_str::<TurnCompleted>(body).map_err(|e| e.to_string()),
            None => Err("no body".to_string()),
        };
        let ev = match parsed {
            Ok(ev) => ev,
            Err(error) => {
                tracing::error!(message_id = %id, group = ?group, %error,
                    "record is not a TurnCompleted; reported as failed, so it reaches the dead-letter queue");
                plan.unparseable += 1;
                plan.failed.push(id);
                blocked.extend(group);
                continue;
            }
        };
        let key = (ev.user_id.to_string(), ev.session_id.to_string());
        match plan.sessions.get_mut(&key) {
            Some((newest, ids)) => {
                if ev.last_message_seq > newest.last_message_seq {
                    *newest = ev;
                }
                ids.push(id);
            }
            None => {
                plan.sessions.insert(key, (ev, vec![id]));
            }
        }
    }
    plan
}
