//! The summarizer when things go wrong, against the real parts (DynamoDB
//! Local, moto's SQS, the scripted summarizer model): records that can never
//! parse reach the dead-letter queue instead of vanishing, without letting
//! their FIFO group run out of order; and agent-state deltas committed with a
//! summary survive a crash before they are applied, and apply exactly once.

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use serde_json::{json, Value};
use shared::agent_state::store::AgentStateStore;
use shared::ids::{SessionId, TurnId, UserId};
use shared::summary::store::{CommitOutcome, SessionSummary, SummaryStore};
use shared::summary::{
    commit_summary, handle_batch, settle_state_deltas, summarize_session, Outcome, Settled, TurnCompleted,
};
use std::collections::BTreeSet;
use tests::scripted_llm::Reply as LlmReply;
use tests::summary::*;

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

/// The shared summarizer parts, with a queued answer for a session.
struct Parts(SummaryParts);

impl std::ops::Deref for Parts {
    type Target = SummaryParts;
    fn deref(&self) -> &SummaryParts {
        &self.0
    }
}

impl Parts {
    async fn new() -> Parts {
        Parts(SummaryParts::new().await)
    }
    /// Queues the summarizer's faithful answer for `ev`'s session (8 recent kept).
    async fn answer_for(&self, ev: &TurnCompleted) {
        let all = all_messages(&self.store(), &ev.user_id, &ev.session_id).await;
        let (compress, recent) = all.split_at(all.len() - 8);
        self.llm.push(LlmReply::text(&[&answer("Questions were asked and answered.", compress, recent)]));
    }
}

/// One SQS record as Lambda delivers it; `group` is the FIFO `MessageGroupId`
/// (absent from a standard queue's records).
fn record(id: &str, group: Option<&str>, body: Option<&str>) -> Value {
    let mut attributes = json!({
        "ApproximateReceiveCount": "1",
        "SentTimestamp": shared::now_ms().to_string(),
        "SenderId": "local",
        "ApproximateFirstReceiveTimestamp": shared::now_ms().to_string(),
    });
    if let Some(g) = group {
        attributes["MessageGroupId"] = json!(g);
    }
    json!({
        "messageId": id,
        "receiptHandle": format!("rh-{id}"),
        "body": body,
        "attributes": attributes,
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:turns.fifo",
        "awsRegion": "us-east-1",
    })
}

fn event_record(id: &str, ev: &TurnCompleted) -> Value {
    record(id, Some(ev.session_id.as_str()), Some(&serde_json::to_string(ev).unwrap()))
}

fn batch(records: Vec<Value>) -> SqsEvent {
    serde_json::from_value(json!({ "Records": records })).expect("an SqsEvent")
}

fn failed(resp: &aws_lambda_events::event::sqs::SqsBatchResponse) -> BTreeSet<String> {
    resp.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect()
}

#[tokio::test]
async fn an_unparseable_record_is_reported_and_holds_back_the_rest_of_its_group() {
    let p = Parts::new().await;
    let store = p.store();
    let a = chatty_session(&store, &user("a-user"), 12).await;
    let b = chatty_session(&store, &user("b-user"), 12).await;
    let c = chatty_session(&store, &user("c-user"), 12).await;
    // With concurrency 1 the runs go a, then b; c must never reach the model.
    p.answer_for(&a).await;
    p.answer_for(&b).await;
    let deps = summarizer_deps(&p.dynamo, &p.table, &p.llm.base_url(), |c| c.concurrency = 1);
    let mut older_b = b.clone();
    older_b.turn_id = TurnId::new();
    older_b.last_message_seq -= 2;
    let (group_b, group_c) = (b.session_id.as_str(), c.session_id.as_str());
    let resp = handle_batch(
        &deps,
        batch(vec![
            event_record("a1", &a),
            // Group b: a good record, then a broken one, then a good one.
            event_record("b1", &older_b),
            record("x", Some(group_b), Some(r#"{"session_id": "only half an event"}"#)),
            event_record("b2", &b),
            // Group c: no body at all, then c's own event.
            record("n", Some(group_c), None),
            event_record("c1", &c),
            // A standard queue's record (no group): only itself.
            record("s", None, Some("not json")),
        ]),
    )
    .await;

    let expected: BTreeSet<String> = ["x", "b2", "n", "c1", "s"].into_iter().map(String::from).collect();
    assert_eq!(failed(&resp), expected, "the broken records, and what follows them in their group");
    assert_eq!(serde_json::to_value(&resp).unwrap()["batchItemFailures"].as_array().unwrap().len(), 5);
    // What came before the broken record in its group ran; what came after did not.
    assert_eq!(p.llm.request_count(), 2);
    for (ev, summarized) in [(&a, true), (&b, true), (&c, false)] {
        let current = p.summaries().current(&ev.user_id, &ev.session_id).await.unwrap();
        assert_eq!(current.is_some(), summarized, "{}", ev.user_id);
    }
}

/// The queue as the template declares it (FIFO, redrive to a FIFO DLQ after
/// `maxReceiveCount` receives), driven the way Lambda's event source mapping
/// drives it: receive a batch, hand it to the handler, delete what succeeded,
/// and let what it reported become visible again.
#[tokio::test]
async fn an_unparseable_record_reaches_the_dead_letter_queue_after_max_receive_count() {
    let p = Parts::new().await;
    let deps = summarizer_deps(&p.dynamo, &p.table, &p.llm.base_url(), |_| {});
    let sqs = sqs_client();
    let dlq = fresh_fifo_queue(&sqs).await;
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    const MAX_RECEIVE_COUNT: usize = 2;
    let queue = sqs
        .create_queue()
        .queue_name(format!("turns-{}.fifo", uuid::Uuid::new_v4().simple()))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(
            QueueAttributeName::RedrivePolicy,
            json!({ "deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT.to_string() }).to_string(),
        )
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();

    // Session s: a broken record, then a good one behind it. Session t: a good one.
    let event = |seq| TurnCompleted {
        user_id: user("alice"),
        session_id: SessionId::new(),
        turn_id: TurnId::new(),
        last_message_seq: seq,
    };
    let (behind, other) = (event(4), event(2));
    let s_group = behind.session_id.as_str().to_string();
    let broken = r#"{"user_id": "alice", "last_message_seq": "four"}"#.to_string();
    for (body, group, dedup) in [
        (broken.clone(), s_group.as_str(), "broken"),
        (serde_json::to_string(&behind).unwrap(), s_group.as_str(), "behind"),
        (serde_json::to_string(&other).unwrap(), other.session_id.as_str(), "other"),
    ] {
        sqs.send_message()
            .queue_url(&queue)
            .message_body(body)
            .message_group_id(group)
            .message_deduplication_id(dedup)
            .send()
            .await
            .unwrap();
    }

    let mut rounds = Vec::new();
    for _ in 0..(MAX_RECEIVE_COUNT + 3) {
        let got = sqs
            .receive_message()
            .queue_url(&queue)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        let msgs = got.messages();
        if msgs.is_empty() {
            break;
        }
        let records = msgs
            .iter()
            .map(|m| {
                let attrs: serde_json::Map<String, Value> =
                    m.attributes().into_iter().flatten().map(|(k, v)| (k.as_str().to_string(), json!(v))).collect();
                json!({
                    "messageId": m.message_id(), "receiptHandle": m.receipt_handle(), "body": m.body(),
                    "attributes": attrs, "messageAttributes": {}, "eventSource": "aws:sqs",
                })
            })
            .collect();
        let resp = handle_batch(&deps, batch(records)).await;
        let failures = failed(&resp);
        let mut round = Vec::new();
        for m in msgs {
            let (id, receipt) = (m.message_id().unwrap(), m.receipt_handle().unwrap());
            round.push((m.body().unwrap().to_string(), failures.contains(id)));
            if failures.contains(id) {
                sqs.change_message_visibility()
                    .queue_url(&queue)
                    .receipt_handle(receipt)
                    .visibility_timeout(0)
                    .send()
                    .await
                    .unwrap();
            } else {
                sqs.delete_message().queue_url(&queue).receipt_handle(receipt).send().await.unwrap();
            }
        }
        rounds.push(round);
    }

    let behind_body = serde_json::to_string(&behind).unwrap();
    let first = &rounds[0];
    assert!(first.contains(&(broken.clone(), true)) && first.contains(&(behind_body.clone(), true)), "{first:?}");
    assert!(first.contains(&(serde_json::to_string(&other).unwrap(), false)), "the other session is done: {first:?}");
    assert_eq!(rounds.len(), MAX_RECEIVE_COUNT, "received {MAX_RECEIVE_COUNT} times, then parked: {rounds:?}");
    assert!(rounds[1..].iter().all(|r| r == &vec![(broken.clone(), true), (behind_body.clone(), true)]), "{rounds:?}");

    // Both are in the dead-letter queue, in their order; the queue is empty.
    let parked = sqs.receive_message().queue_url(&dlq).max_number_of_messages(10).send().await.unwrap();
    let bodies: Vec<&str> = parked.messages().iter().filter_map(|m| m.body()).collect();
    assert_eq!(bodies, vec![broken.as_str(), behind_body.as_str()]);
    let left = sqs.receive_message().queue_url(&queue).max_number_of_messages(10).send().await.unwrap();
    assert!(left.messages().is_empty());

    // Redriving the good one after the fix is safe: the summarizer works from watermarks.
    assert_eq!(summarize_session(&deps, &behind).await.unwrap(), Outcome::NotNeeded);
}

/// The answer of `answer()` with agent-state deltas, one of which (an
/// expectation without an id) would be added again by a second application.
fn answer_with_deltas(ev_all: &[shared::message::StoredMessage]) -> String {
    let (compress, recent) = ev_all.split_at(ev_all.len() - 8);
    let mut a: Value = serde_json::from_str(&answer("The user asked questions 1 to 7.", compress, recent)).unwrap();
    a["agent_state_item_updates"] =
        json!([{"op": "add", "item": {"id": "i1", "kind": "question", "title": "Which questions are open?"}}]);
    a["agent_state_updates"] = json!({
        "assumptions": [{"id": "a1", "hypothesis": "the user wants short answers", "confidence": 0.7}],
        "expectations": [{"action": "search", "expected_outcome": "finds the open questions"}],
    });
    a.to_string()
}

#[tokio::test]
async fn deltas_committed_before_a_crash_are_applied_exactly_once_on_redelivery() {
    let p = Parts::new().await;
    let store = p.store();
    let alice = user("alice");
    let ev = chatty_session(&store, &alice, 15).await;
    let all = all_messages(&store, &alice, &ev.session_id).await;
    p.llm.push(LlmReply::text(&[&answer_with_deltas(&all)]));
    let deps = summarizer_deps(&p.dynamo, &p.table, &p.llm.base_url(), |_| {});

    // Phase one only: the summary is committed, then the process dies.
    let (outcome, committed) = commit_summary(&deps, &ev).await.unwrap();
    assert!(matches!(outcome, Outcome::Committed { version: 1, .. }), "{outcome:?}");
    let committed = committed.expect("the committed version");
    assert!(committed.deltas_pending);
    let stored = p.summaries().current(&alice, &ev.session_id).await.unwrap().unwrap();
    assert!(stored.deltas_pending, "the deltas are recorded as still to apply");
    assert!(p.states().load(&alice, &ev.session_id).await.unwrap().is_none(), "nothing applied yet");

    // SQS redelivers the record, twice at once (a retry overlapping a slow run).
    let (r1, r2) = tokio::join!(summarize_session(&deps, &ev), summarize_session(&deps, &ev));
    assert_eq!((r1.unwrap(), r2.unwrap()), (Outcome::UpToDate, Outcome::UpToDate));
    let (state, version) = p.states().load(&alice, &ev.session_id).await.unwrap().expect("the redelivery applied them");
    assert_eq!(version, 1, "one write applied them");
    assert_eq!(state.items.iter().filter(|i| i.id == "i1").count(), 1);
    assert_eq!(state.assumptions.iter().filter(|a| a.id == "a1").count(), 1);
    assert_eq!(state.expectations.len(), 1, "{:?}", state.expectations);
    assert!(!p.summaries().current(&alice, &ev.session_id).await.unwrap().unwrap().deltas_pending);

    // Once more, later; and the dead run's phase two, should it ever wake up: nothing more.
    assert_eq!(summarize_session(&deps, &ev).await.unwrap(), Outcome::UpToDate);
    assert_eq!(settle_state_deltas(&deps, &alice, &ev.session_id, &committed).await.unwrap(), Settled::AlreadySettled);
    assert_eq!(p.states().load(&alice, &ev.session_id).await.unwrap().map(|(_, v)| v), Some(1));
    assert_eq!(p.llm.request_count(), 1, "the model was asked once");
}

#[tokio::test]
async fn a_summary_never_replaces_one_whose_deltas_are_pending() {
    let p = Parts::new().await;
    let alice = user("alice");
    let ev = chatty_session(&p.store(), &alice, 2).await;
    let s = p.summaries();
    let v = |version: u64, pending: bool| SessionSummary {
        version,
        text: format!("v{version}"),
        through_seq: version,
        source_last_seq: 4,
        model: "m".into(),
        created_at: 0,
        kept_message_ids: vec![],
        dropped_message_ids: vec![],
        agent_state_item_updates: vec![json!({"op": "add", "item": {"id": "i1", "kind": "note", "title": "t"}})],
        agent_state_updates: Value::Null,
        deltas_pending: pending,
    };
    assert_eq!(s.commit(&alice, &ev.session_id, &v(1, true)).await.unwrap(), CommitOutcome::Committed);
    assert_eq!(s.commit(&alice, &ev.session_id, &v(2, false)).await.unwrap(), CommitOutcome::Superseded);
    assert_eq!(s.current(&alice, &ev.session_id).await.unwrap().unwrap().text, "v1");
    assert!(!s.settle(&alice, &ev.session_id, 2).await.unwrap(), "only the current version settles");
    assert!(s.settle(&alice, &ev.session_id, 1).await.unwrap());
    assert!(!s.settle(&alice, &ev.session_id, 1).await.unwrap(), "settled once");
    assert_eq!(s.commit(&alice, &ev.session_id, &v(2, false)).await.unwrap(), CommitOutcome::Committed);
    // The audit copies never carry the mark.
    assert!(s.versions(&alice, &ev.session_id).await.unwrap().iter().all(|v| !v.deltas_pending));
}

fn ids(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

/// Issue 25: a model that cannot write the required shape was asked again on
/// every redelivery of the same event, without end (14 rejected answers,
/// 1,391 s of the one local model). The rejected answers are counted per
/// backlog across deliveries: SUMMARY_MAX_ATTEMPTS in all, then the event is
/// done (not redelivered, not parked), and only new messages are asked about.
#[tokio::test]
async fn rejected_answers_are_bounded_per_backlog_across_deliveries() {
    let p = Parts::new().await;
    let store = p.store();
    let alice = user("alice");
    let ev = chatty_session(&store, &alice, 12).await;
    let deps = summarizer_deps(&p.dynamo, &p.table, &p.llm.base_url(), |c| c.max_attempts = 3);
    let garbage = || LlmReply::text(&["Sure! The user asked twelve questions."]);
    p.llm.set_default(garbage());

    // Delivery 1: a rejected answer, then the model fails (HTTP 500): a run
    // error, so the record is reported and comes back.
    p.llm.push(garbage());
    p.llm.push(LlmReply::Status(500, r#"{"error": {"message": "overloaded"}}"#.into()));
    let resp = handle_batch(&deps, sqs_event(&[("m1", &ev)])).await;
    assert_eq!(failed(&resp), ids(&["m1"]), "a model error is retried by redelivery");
    assert_eq!(p.llm.request_count(), 2);

    // Delivery 2: two more rejected answers make SUMMARY_MAX_ATTEMPTS for this
    // backlog; the event is done.
    let resp = handle_batch(&deps, sqs_event(&[("m1", &ev)])).await;
    assert_eq!(p.llm.request_count(), 4, "two more answers: three rejected in all, across both deliveries");
    assert_eq!(failed(&resp), ids(&[]), "a rejected backlog is not redelivered");
    // It told the model why the earlier delivery's answer was refused.
    let input = p.llm.requests()[2]["messages"][1]["content"].as_str().unwrap().to_string();
    assert!(input.contains("An earlier answer to this input was rejected: no JSON object in the answer"), "{input}");

    // Delivery 3 (SQS may deliver an event twice): nothing is asked.
    let resp = handle_batch(&deps, sqs_event(&[("m1", &ev)])).await;
    assert_eq!((failed(&resp), p.llm.request_count()), (ids(&[]), 4));
    let reason = "no JSON object in the answer".to_string();
    assert_eq!(summarize_session(&deps, &ev).await.unwrap(), Outcome::Rejected { attempts: 3, reason });
    assert!(p.summaries().current(&alice, &ev.session_id).await.unwrap().is_none(), "nothing written");

    // The next turn is a new backlog: asked again, and a faithful answer commits.
    let next = write_turn(&store, &alice, Some(&ev.session_id), "question 13", vec![Reply::text("answer 13")]).await;
    p.llm.set_default(LlmReply::dynamic(|req| {
        LlmReply::text(&[&scripted_summary_answer(req).expect("a summary request")])
    }));
    let out = summarize_session(&deps, &next).await.unwrap();
    assert!(matches!(out, Outcome::Committed { version: 1, .. }), "{out:?}");
    assert_eq!(p.llm.request_count(), 5);
}

async fn queue_attribute(sqs: &aws_sdk_sqs::Client, queue: &str, name: QueueAttributeName) -> Option<String> {
    let got = sqs.get_queue_attributes().queue_url(queue).attribute_names(name.clone()).send().await.unwrap();
    got.attributes.and_then(|a| a.get(&name).cloned())
}

/// Issue 25: `scripts/local-event-source.py` (the local stand-in for Lambda's
/// event source mapping, run by `scripts/stack.sh`) left a record the
/// summarizer kept failing on the queue for redelivery without end. It
/// follows the template's redrive policy: the queue it creates has a
/// dead-letter queue and `maxReceiveCount` from `infra/template.yaml`, and a
/// record failing on its last receive is moved there. The script runs here
/// for real (`--once` per receive) against moto's SQS, invoking the real
/// batch handler behind a local invoke endpoint.
#[tokio::test]
async fn the_local_event_source_parks_a_failing_record_after_the_templates_max_receive_count() {
    let p = Parts::new().await;
    let deps = summarizer_deps(&p.dynamo, &p.table, &p.llm.base_url(), |_| {});
    let (invoke_url, batches) = summarizer_invoke_endpoint(deps).await;
    let sqs = sqs_client();
    let max = template_max_receive_count() as usize;
    let name = format!("turns-{}.fifo", uuid::Uuid::new_v4().simple());
    // Visibility 1 s: a failed record comes back soon (the stack's queue: 30 s);
    // each receive below long-polls for it.
    let created = local_event_source(&["--create-queue", "--queue-name", &name, "--visibility", "1"]).await;
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let queue = String::from_utf8(created.stdout).unwrap().trim().to_string();

    // Session s: a record that never parses. Session t: a good one. (What
    // follows a broken record in its group is the batch handler's test above;
    // moto redelivers a group's in-flight messages out of order.)
    let other = TurnCompleted {
        user_id: user("alice"),
        session_id: SessionId::new(),
        turn_id: TurnId::new(),
        last_message_seq: 2,
    };
    let s_group = SessionId::new().to_string();
    let broken = r#"{"user_id": "alice", "last_message_seq": "four"}"#.to_string();
    let other_body = serde_json::to_string(&other).unwrap();
    for (body, group, dedup) in
        [(&broken, s_group.as_str(), "broken"), (&other_body, other.session_id.as_str(), "other")]
    {
        let send = sqs.send_message().queue_url(&queue).message_body(body).message_group_id(group);
        send.message_deduplication_id(dedup).send().await.unwrap();
    }

    // Receive after receive (each long-polls until the failed records are
    // visible again) until the source parks them; bounded, since a source
    // that never parks goes on.
    let mut log = String::new();
    for _ in 0..max + 3 {
        let args = ["--once", "--wait", "20", "--queue-name", &name, "--invoke-url", &invoke_url];
        let out = local_event_source(&args).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        log.push_str(&String::from_utf8_lossy(&out.stderr));
        if log.contains("moved to the dead-letter queue") {
            break;
        }
    }
    let seen = batches.lock().unwrap().clone();
    assert_eq!(seen.len(), max, "received {max} times (the template's maxReceiveCount), then parked: {seen:?}");
    assert_eq!(seen[0], [broken.clone(), other_body.clone()]);
    assert!(seen[1..].iter().all(|b| b == std::slice::from_ref(&broken)), "{seen:?}");
    assert_eq!(log.matches("moved to the dead-letter queue").count(), 1, "{log}");

    // It is in the dead-letter queue, in its group; the queue is empty.
    let dlq = sqs.get_queue_url().queue_name(name.replace(".fifo", "-dlq.fifo")).send().await.unwrap();
    let dlq = dlq.queue_url.unwrap();
    let parked = sqs
        .receive_message()
        .queue_url(&dlq)
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    let bodies: Vec<&str> = parked.messages().iter().filter_map(|m| m.body()).collect();
    assert_eq!(bodies, [broken.as_str()]);
    let groups: Vec<&str> = parked
        .messages()
        .iter()
        .filter_map(|m| m.attributes()?.get(&MessageSystemAttributeName::MessageGroupId).map(String::as_str))
        .collect();
    assert_eq!(groups, [s_group.as_str()]);
    let left = sqs.receive_message().queue_url(&queue).max_number_of_messages(10).send().await.unwrap();
    assert!(left.messages().is_empty());

    // The queue's policy is the template's, so moto or SQS would park it too.
    let policy = queue_attribute(&sqs, &queue, QueueAttributeName::RedrivePolicy).await.expect("a redrive policy");
    let policy: Value = serde_json::from_str(&policy).unwrap();
    assert_eq!(policy["maxReceiveCount"].to_string().trim_matches('"'), max.to_string(), "{policy}");
    let dlq_arn = queue_attribute(&sqs, &dlq, QueueAttributeName::QueueArn).await.unwrap();
    assert_eq!(policy["deadLetterTargetArn"], dlq_arn.as_str());

    // A queue an earlier version of the script made (no policy) gets one.
    let old = format!("turns-{}.fifo", uuid::Uuid::new_v4().simple());
    let old_url = sqs.create_queue().queue_name(&old).attributes(QueueAttributeName::FifoQueue, "true").send().await;
    let old_url = old_url.unwrap().queue_url.unwrap();
    assert!(local_event_source(&["--create-queue", "--queue-name", &old]).await.status.success());
    let policy = queue_attribute(&sqs, &old_url, QueueAttributeName::RedrivePolicy).await.expect("a policy now");
    let policy: Value = serde_json::from_str(&policy).unwrap();
    assert_eq!(policy["maxReceiveCount"].to_string().trim_matches('"'), max.to_string(), "{policy}");
    // Bad input: a clear usage error, nothing created.
    let bad = local_event_source(&["--create-queue", "--queue-name", &old, "--max-receive-count", "0"]).await;
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--max-receive-count must be at least 1"));
}
