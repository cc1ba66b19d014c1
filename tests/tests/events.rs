//! Every sample in `events/` deserializes into the type its function expects
//! (the same types the runtimes deserialize into), so `cargo lambda invoke
//! --data-file events/<sample>.json` never fails on the envelope.
//!
//! The function is told by the file-name prefix (see events/README.md):
//! `stream-*` and `entities-*` are function-URL requests (`LambdaRequest`,
//! payload format 2.0), `summarizer-*` SQS batches whose bodies are
//! `TurnCompleted`, `prewarm-schedule*` scheduled EventBridge events,
//! `prewarm-url*` function-URL requests to the prewarm function. A sample
//! with any other prefix fails the test, so a new one gets a check here.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_http::request::LambdaRequest;
use shared::summary::TurnCompleted;
use std::path::{Path, PathBuf};

fn events_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../events")
}

fn samples() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(events_dir())
        .expect("events/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect();
    out.sort();
    out
}

/// A function-URL request: deserializes as `LambdaRequest` (API Gateway v2 /
/// function URL shape) and converts into the `http::Request` the handler sees,
/// with the sample's method and path.
fn check_function_url(name: &str, text: &str) {
    let raw: serde_json::Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: not JSON: {e}"));
    let req: LambdaRequest = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: not a LambdaRequest: {e}"));
    assert!(matches!(req, LambdaRequest::ApiGatewayV2(_)), "{name}: not a function-URL (payload 2.0) request");
    let req: http::Request<lambda_http::Body> = req.into();
    assert_eq!(
        req.method().as_str(),
        raw["requestContext"]["http"]["method"].as_str().expect("method"),
        "{name}: method"
    );
    assert_eq!(req.uri().path(), raw["rawPath"].as_str().expect("rawPath"), "{name}: path");
    if let Some(body) = raw.get("body").and_then(|b| b.as_str()) {
        let _: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{name}: body is not JSON: {e}"));
    }
}

fn check_sqs_batch(name: &str, text: &str) {
    let event: SqsEvent = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: not an SqsEvent: {e}"));
    assert!(!event.records.is_empty(), "{name}: an empty batch");
    for (i, record) in event.records.iter().enumerate() {
        assert!(record.message_id.is_some(), "{name}: record {i} has no messageId (batch item failures need it)");
        let body = record.body.as_deref().unwrap_or_else(|| panic!("{name}: record {i} has no body"));
        let turn: TurnCompleted =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{name}: record {i} body is not TurnCompleted: {e}"));
        // FIFO: the group is the session, the deduplication id the turn.
        if let Some(group) = record.attributes.get("MessageGroupId") {
            assert_eq!(group, turn.session_id.as_str(), "{name}: record {i} MessageGroupId");
        }
        if let Some(dedup) = record.attributes.get("MessageDeduplicationId") {
            assert_eq!(dedup, turn.turn_id.as_str(), "{name}: record {i} MessageDeduplicationId");
        }
    }
}

fn check_schedule(name: &str, text: &str) {
    let event: EventBridgeEvent =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: not an EventBridgeEvent: {e}"));
    assert_eq!(event.detail_type, "Scheduled Event", "{name}: detail-type");
    assert_eq!(event.source, "aws.events", "{name}: source");
}

#[test]
fn every_sample_event_deserializes_into_its_functions_type() {
    let samples = samples();
    assert!(!samples.is_empty(), "no samples in events/");
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for (name, text) in &samples {
        let kind = if name.starts_with("stream-") || name.starts_with("entities-") || name.starts_with("prewarm-url") {
            check_function_url(name, text);
            "function-url"
        } else if name.starts_with("summarizer-") {
            check_sqs_batch(name, text);
            "sqs"
        } else if name.starts_with("prewarm-schedule") {
            check_schedule(name, text);
            "schedule"
        } else {
            panic!("{name}: unknown sample prefix; add its function's type to tests/tests/events.rs");
        };
        *seen.entry(kind).or_default() += 1;
    }
    // One sample per function and trigger at least.
    for prefix in ["stream-", "entities-", "summarizer-", "prewarm-schedule", "prewarm-url"] {
        assert!(samples.iter().any(|(n, _)| n.starts_with(prefix)), "no {prefix}* sample in events/");
    }
    assert!(seen.len() == 3, "sample kinds seen: {seen:?}");
}
