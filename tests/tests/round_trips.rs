//! What a turn waits for before the model is called (issue 17), counted at a
//! proxy in front of DynamoDB Local that holds every request for [`DELAY`]:
//! a call answered before the model request arrived was waited for, and calls
//! that went out together overlap, so they count as one round trip.
//!
//! - an existing session: one round trip (lease, log, run check, pack, and
//!   the budget admission's one update beside them), at most 7 requests for a
//!   talk-only turn (Stop polls aside; 5 of them without budgets: the
//!   admission and the slot's release after `done` are the budgets');
//! - a new session: no round trip (its admission runs beside the model call,
//!   the session's write chained after it), at most 6 requests — one round
//!   trip when its `stream_run_id` must be checked (a retried first turn
//!   must never call the model again): the run's claim read beside the
//!   admission, the write beside the model call.
//!
//! The user's approval settings (their "ask first" tools, issue 29) are read
//! only once the model begins a tool call: a talk-only turn reads none
//! (`settings_reads`, counted apart from the numbers above).
//!
//! And what the client waits for around them (issue 42): the first event
//! is on the wire before any DynamoDB request is answered, budgets on; and
//! `done` follows one durable write after the model's last token (the
//! answer), the session's bookkeeping coming after `done`.
//!
//! Every rig runs with budgets on, at limits no turn here reaches.

use http_body_util::BodyExt;
use serde_json::{json, Value};
use shared::entities::store::DynamoEntityStore;
use shared::entities::{EntityService, NewProject};
use shared::ids::{ProjectId, UserId};
use shared::session::store::{SessionLog, Sessions};
use std::time::Duration;
use tests::fault_proxy::{Action, Fault, FaultProxy, Op, Seen, TurnWrite};
use tests::{token, Reply, TestApp};
use tokio::time::Instant;

const DELAY: Duration = Duration::from_millis(120);

struct Rig {
    t: TestApp,
    proxy: FaultProxy,
}

/// One turn's DynamoDB calls, against its first model request.
#[derive(Debug)]
struct Calls {
    /// Calls answered before the model request arrived.
    waited_for: Vec<Op>,
    /// How many of those ran one after another.
    rounds: usize,
    /// Every call of the turn, Stop polls, lease renewals and the approval
    /// settings' read aside.
    total: Vec<Op>,
    /// Reads of the user's approval settings.
    settings_reads: usize,
}

impl Rig {
    async fn new() -> Rig {
        Rig::with(|_| {}).await
    }

    async fn with(configure: impl FnOnce(&mut shared::config::Config)) -> Rig {
        let proxy = FaultProxy::start().await;
        let budgets = shared::config::BudgetConfig {
            tokens_per_day: 1_000_000,
            turns_per_minute: 1_000,
            concurrent_turns: 100,
            web_calls_per_day: 100,
        };
        let t = TestApp::with_dynamo_client(proxy.client().await, |c| {
            c.budgets = budgets;
            configure(c);
        })
        .await;
        Rig { t, proxy }
    }

    async fn project(&self, user: &str) -> ProjectId {
        let svc = EntityService::new(DynamoEntityStore::new(self.t.dynamo.clone(), self.t.table.clone()));
        let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
        svc.create_project(&UserId::parse(user).unwrap(), p).await.unwrap().data.project.id
    }

    /// A turn run with every DynamoDB call held for [`DELAY`], and its calls.
    async fn measured_turn(&self, body: Value) -> Calls {
        self.measured_turn_of(body, vec![Reply::text(&["an answer"])]).await
    }

    /// The same, the model answering with `replies` in turn.
    async fn measured_turn_of(&self, body: Value, replies: Vec<Reply>) -> Calls {
        for op in [Op::GetItem, Op::PutItem, Op::UpdateItem, Op::Query, Op::TransactWriteItems, Op::BatchGetItem] {
            self.proxy.inject(Fault::on(op).then(Action::Delay(DELAY)));
        }
        let (mark, asked) = (self.proxy.mark(), self.t.llm.arrivals().len());
        for reply in replies {
            self.t.llm.push(reply);
        }
        let turn = self.t.turn("alice", body).await;
        self.proxy.clear();
        assert_eq!(turn.error_code(), None, "{:?}", turn.events);
        let model_at = self.t.llm.arrivals()[asked];
        calls(&self.proxy.since(mark), model_at)
    }
}

/// The lease keeper's Stop poll (a projected read) and renewals come per
/// second of turn, not per turn.
fn periodic(s: &Seen) -> bool {
    match s.op {
        Op::GetItem => s.body.contains("\"ProjectionExpression\"") && s.body.contains("stop_turn"),
        Op::UpdateItem => s.body.contains("\"UpdateExpression\":\"SET lease_until = :u\""),
        _ => false,
    }
}

/// The frame log's batches (docs/sessions.md) are written in the
/// background, one per `FRAME_FLUSH_MS` of turn: never waited for, counted apart.
fn frames(s: &Seen) -> bool {
    s.op == Op::PutItem && s.body.contains("FRAMES#")
}

fn calls(seen: &[Seen], model_at: Instant) -> Calls {
    let settings = |s: &Seen| s.op == Op::GetItem && s.body.contains("#SETTINGS\"");
    let turn: Vec<&Seen> = seen.iter().filter(|s| !periodic(s) && !frames(s)).collect();
    let mut before: Vec<(Instant, Instant, &Seen)> =
        turn.iter().filter_map(|s| s.answered.filter(|a| *a <= model_at).map(|a| (s.at, a, *s))).collect();
    before.sort_by_key(|(_, answered, _)| *answered);
    let mut rounds = 0;
    let mut last: Option<Instant> = None;
    for (at, answered, _) in &before {
        if last.is_none_or(|l| *at >= l) {
            rounds += 1;
            last = Some(*answered);
        }
    }
    Calls {
        waited_for: before.into_iter().filter(|(_, _, s)| !settings(s)).map(|(_, _, s)| s.op.clone()).collect(),
        rounds,
        total: turn.iter().filter(|s| !settings(s)).map(|s| s.op.clone()).collect(),
        settings_reads: turn.iter().filter(|s| settings(s)).count(),
    }
}

fn global(message: &str) -> Value {
    json!({"message": message, "context_type": "global"})
}

#[tokio::test]
async fn an_existing_session_waits_for_one_round_trip_and_a_talk_only_turn_makes_nine_requests() {
    let r = Rig::new().await;
    let first = r.t.turn("alice", global("hello")).await;
    let mut next = global("and then?");
    next["session_id"] = json!(first.session_id());
    let c = r.measured_turn(next).await;
    assert_eq!(c.rounds, 1, "{c:?}");
    // The lease, the log (history, summary, agent state) and the
    // admission's one update (slot, minute and tokens), all in that one
    // round; nothing else (the global scope's list of projects is not read:
    // `list_projects` gives it when the model asks).
    assert_eq!(c.waited_for.len(), 3, "{c:?}");
    assert_eq!(c.waited_for.iter().filter(|op| **op == Op::UpdateItem).count(), 2, "lease + admission: {c:?}");
    // Start and finish are two plain writes each, not one transaction each
    // (`session::store::dynamo::plain`): two requests more, half the write
    // units (docs/cost.md).
    assert!(c.total.len() <= 9, "{c:?}");
    assert_eq!(c.settings_reads, 0, "no tool call, no approval settings: {c:?}");
}

/// A tool round's messages and count, as plain writes: a transaction bills
/// every item twice (docs/cost.md).
#[tokio::test]
async fn a_tool_round_is_written_without_a_transaction_with_or_without_a_run_id() {
    let r = Rig::new().await;
    let first = r.t.turn("alice", global("hello")).await;
    for run in [None, Some("run-2")] {
        let mut next = global("which projects?");
        next["session_id"] = json!(first.session_id());
        if let Some(run) = run {
            next["stream_run_id"] = json!(run);
        }
        let replies = vec![Reply::tool_calls(&[("list_projects", json!({}))]), Reply::text(&["none yet"])];
        let c = r.measured_turn_of(next, replies).await;
        let round = c.total.iter().filter(|op| **op == Op::TransactWriteItems).count();
        // A claimed run keeps its start and end transactions (run claim and
        // turn record): the round between them is plain.
        let kept = if run.is_some() { 2 } else { 0 };
        assert_eq!(round, kept, "run {run:?}: {c:?}");
    }
    // Stored whole: the user message, the call, its result and the answer, twice.
    let sessions = r.t.store().list_sessions(&UserId::parse("alice").unwrap(), 10, None).await.unwrap().sessions;
    assert_eq!(sessions[0].message_count, 2 + 4 + 4);
    let sid = shared::ids::SessionId::parse(first.session_id()).unwrap();
    let log = r.t.store().recent_messages(&UserId::parse("alice").unwrap(), &sid, 100).await.unwrap();
    assert_eq!(log.iter().map(|m| m.seq).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_stream_run_id_is_checked_in_the_same_round_trip() {
    let r = Rig::new().await;
    let first = r.t.turn("alice", global("hello")).await;
    let mut next = global("and then?");
    next["session_id"] = json!(first.session_id());
    next["stream_run_id"] = json!("run-2");
    let c = r.measured_turn(next).await;
    assert_eq!(c.rounds, 1, "{c:?}");
    assert!(c.total.len() <= 8, "the run claim is one read more: {c:?}");
    assert_eq!(c.settings_reads, 0, "no tool call, no approval settings: {c:?}");
}

#[tokio::test]
async fn a_new_session_waits_for_nothing_before_the_model() {
    let r = Rig::new().await;
    let c = r.measured_turn(global("hello")).await;
    assert_eq!(c.rounds, 0, "{c:?}");
    // The end is two plain writes (`session::store::dynamo::plain`).
    assert!(c.total.len() <= 6, "{c:?}");
    assert_eq!(c.settings_reads, 0, "no tool call, no approval settings: {c:?}");
    // And it was stored whole: the next turn sees the first one.
    let sessions = r.t.store().list_sessions(&UserId::parse("alice").unwrap(), 10, None).await.unwrap().sessions;
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].message_count, 2, "the user message and the answer");
}

#[tokio::test]
async fn a_new_session_with_a_stream_run_id_waits_for_one_round_trip() {
    let r = Rig::new().await;
    let mut body = global("hello");
    body["stream_run_id"] = json!("run-1");
    let c = r.measured_turn(body).await;
    let mut waited = c.waited_for.clone();
    waited.sort_by_key(|op| format!("{op:?}"));
    assert_eq!((c.rounds, waited.as_slice()), (1, &[Op::GetItem, Op::UpdateItem][..]), "{c:?}");
    assert!(c.total.len() <= 7, "the run claim is one read more: {c:?}");
    // Stored whole, and a retry of it is answered from what was stored.
    let sessions = r.t.store().list_sessions(&UserId::parse("alice").unwrap(), 10, None).await.unwrap().sessions;
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].message_count, 2, "the user message and the answer");
    assert_eq!(c.settings_reads, 0, "no tool call, no approval settings: {c:?}");
}

#[tokio::test]
async fn a_project_session_with_its_pack_cached_waits_for_one_round_trip() {
    let r = Rig::new().await;
    let p = r.project("alice").await;
    let in_project =
        |m: &str| json!({"message": m, "context_type": "project", "projectFocus": {"projectId": p.to_string()}});
    let first = r.t.turn("alice", in_project("hello")).await;
    let mut next = in_project("and then?");
    next["session_id"] = json!(first.session_id());
    let c = r.measured_turn(next).await;
    assert_eq!(c.rounds, 1, "{c:?}");
    assert!(c.waited_for.len() <= 5, "lease, log, cached pack, project version, admission: {c:?}");
    assert!(c.total.len() <= 10, "the cache's use mark is fresh: not written again: {c:?}");
    assert_eq!(c.settings_reads, 0, "no tool call, no approval settings: {c:?}");
}

/// Every operation a turn may send.
const OPS: [Op; 6] = [Op::GetItem, Op::PutItem, Op::UpdateItem, Op::Query, Op::TransactWriteItems, Op::BatchGetItem];

/// Reads `body` until its text holds `until`; what it read.
async fn read_until(body: &mut shared::edge::ResponseBody, until: &str, hang: &str) -> String {
    let mut text = String::new();
    let read = async {
        while !text.contains(until) {
            match body.frame().await {
                Some(f) => text.push_str(&String::from_utf8_lossy(&f.unwrap().into_data().unwrap_or_default())),
                None => break,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read).await.unwrap_or_else(|_| panic!("{hang}"));
    text
}

#[tokio::test]
async fn the_first_event_is_on_the_wire_before_any_dynamodb_request_is_answered() {
    let r = Rig::new().await;
    let sid = r.t.turn("alice", global("hello")).await.session_id();
    let existing = json!({"message": "and then?", "session_id": sid, "context_type": "global"});
    for body in [existing, global("a new one")] {
        // Every request of the turn is held at the proxy until the client
        // has its first event.
        for op in OPS {
            r.proxy.inject(Fault::on(op).then(Action::Hold));
        }
        let mark = r.proxy.mark();
        r.t.llm.push(Reply::text(&["an answer"]));
        let alice = token("alice");
        let head = r.t.post(Some(&alice), serde_json::to_vec(&body).unwrap());
        let resp = tokio::time::timeout(Duration::from_secs(30), head)
            .await
            .expect("the response head waited for a DynamoDB request (held)");
        assert_eq!(resp.status(), 200);
        let mut stream = resp.into_body();
        let first = read_until(&mut stream, "\n\n", "the first event waited for a DynamoDB request (held)").await;
        assert!(first.starts_with("id: ") || first.starts_with("event: "), "{first}");
        assert!(first.contains("event: agent_state"), "{first}");
        let seen = r.proxy.since(mark);
        assert!(seen.iter().all(|s| s.answered.is_none()), "answered before the first event: {seen:?}");
        r.proxy.clear();
        r.proxy.release();
        let rest = read_until(&mut stream, "event: done", "the turn ended").await;
        assert!(!rest.contains("event: error"), "{rest}");
    }
}

#[tokio::test]
async fn done_follows_one_durable_write_after_the_last_token_and_the_bookkeeping_follows_done() {
    let r = Rig::new().await;
    let sid = r.t.turn("alice", global("hello")).await.session_id();
    let user = UserId::parse("alice").unwrap();
    let id = shared::ids::SessionId::parse(&sid).unwrap();
    let before = r.t.store().session(&user, &id).await.unwrap().unwrap();
    // The end's session write (count, tokens, the lease given back) is held:
    // `done` must not wait for it.
    let held = r.proxy.inject(Fault::on_write(TurnWrite::Finish).then(Action::Hold));
    let mark = r.proxy.mark();
    r.t.llm.push(tests::Reply::Stream(vec![
        tests::Step::Text("an".into()),
        tests::Step::Text(" answer".into()),
        tests::Step::Usage { prompt: 30, completion: 2 },
        tests::Step::Finish("stop".into()),
        tests::Step::Done,
    ]));
    let body = json!({"message": "and then?", "session_id": sid, "context_type": "global"});
    let resp = r.t.post(Some(&token("alice")), serde_json::to_vec(&body).unwrap()).await;
    let mut stream = resp.into_body();
    let text = read_until(&mut stream, "event: done", "done waited for the session's bookkeeping (held)").await;
    let done_at = Instant::now();
    assert!(!text.contains("event: error"), "{text}");
    let last_token = r.t.llm.sent().last().expect("the model wrote its answer").0;
    // Writes sent after the last token and answered before `done`: the
    // answer, alone (the start's writes run beside the model and may end
    // after an instant answer: they are not the end's).
    let seen = r.proxy.since(mark);
    let start = |s: &Seen| [TurnWrite::Start, TurnWrite::StartMessage].iter().any(|w| s.body.contains(w.marker()));
    let before_done: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.op.is_write() && !periodic(s) && !frames(s) && !start(s) && s.at >= last_token)
        .filter(|s| s.answered.is_some_and(|a| a <= done_at))
        .collect();
    assert_eq!(before_done.len(), 1, "{before_done:#?}");
    assert_eq!(before_done[0].op, Op::PutItem);
    assert!(before_done[0].body.contains(TurnWrite::FinishMessage.marker()), "the answer: {:?}", before_done[0]);
    // It goes out after `done`, and is held.
    let out = async {
        while r.proxy.fired(held) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), out).await.expect("the bookkeeping went out after done");
    // Released, it lands before the body ends, once: count, tokens, lease.
    r.proxy.release();
    read_until(&mut stream, "never", "the body ended after the bookkeeping").await;
    let after = r.t.store().session(&user, &id).await.unwrap().unwrap();
    assert_eq!(after.view.message_count, before.view.message_count + 2);
    assert_eq!(after.prompt_tokens, before.prompt_tokens + 30);
    assert_eq!(after.completion_tokens, before.completion_tokens + 2);
    assert!(after.lease.is_none(), "the lease was given back");
}

/// The items a turn's log reads returned (`Count` of each `Query` on the
/// log), and how many reads there were.
fn log_reads(seen: &[Seen]) -> (usize, Vec<u64>) {
    let reads: Vec<&Seen> = seen.iter().filter(|s| s.op == Op::Query && s.body.contains("\"MSG#")).collect();
    let counts = reads
        .iter()
        .map(|s| serde_json::from_str::<Value>(s.reply.as_deref().unwrap_or("{}")).unwrap()["Count"].as_u64().unwrap())
        .collect();
    (reads.len(), counts)
}

/// With the summarizer on (`HISTORY_FIRST_PAGE`), a turn reads the newest
/// messages and goes further back only as far as the summary leaves
/// uncovered: what the context builder may send, not the whole window
/// (issue 42 #4: 42 items a turn at turn ~20).
#[tokio::test]
async fn a_long_sessions_history_read_stops_at_its_summary() {
    use shared::summary::store::{DynamoSummaryStore, SessionSummary, SummaryStore};
    let r = Rig::with(|c| c.history_first_page = Some(6)).await;
    let first = r.t.turn("alice", global("message 1")).await;
    let sid = first.session_id();
    for i in 2..=12 {
        r.t.llm.push(Reply::text(&["an answer"]));
        let turn =
            r.t.turn("alice", json!({"message": format!("message {i}"), "session_id": sid, "context_type": "global"}))
                .await;
        assert_eq!(turn.error_code(), None);
    }
    let turn = |m: &str| json!({"message": m, "session_id": sid, "context_type": "global"});
    // No summary: the first page does not reach it, the rest is read, and
    // the model gets the whole conversation.
    let (mark, asked) = (r.proxy.mark(), r.t.llm.arrivals().len());
    r.t.llm.push(Reply::text(&["an answer"]));
    assert_eq!(r.t.turn("alice", turn("message 13")).await.error_code(), None);
    let (reads, counts) = log_reads(&r.proxy.since(mark));
    assert_eq!(reads, 2, "{counts:?}");
    assert_eq!(counts.iter().sum::<u64>(), 24, "every message read: {counts:?}");
    let sent = r.t.llm.requests()[asked].to_string();
    assert!(sent.contains("message 1\""), "the oldest message went to the model");
    // A summary through seq 20: the first page reaches it; one read, of no
    // more than the page (and the summary) — 26 messages are stored.
    let user = UserId::parse("alice").unwrap();
    let id = shared::ids::SessionId::parse(&sid).unwrap();
    let summary = SessionSummary {
        version: 1,
        text: "the first ten exchanges".into(),
        through_seq: 20,
        source_last_seq: 20,
        model: "m".into(),
        created_at: 0,
        kept_message_ids: vec![],
        dropped_message_ids: vec![],
        agent_state_item_updates: vec![],
        agent_state_updates: Value::Null,
        deltas_pending: false,
    };
    DynamoSummaryStore::new(r.t.dynamo.clone(), r.t.table.clone()).commit(&user, &id, &summary).await.unwrap();
    let (mark, asked) = (r.proxy.mark(), r.t.llm.arrivals().len());
    r.t.llm.push(Reply::text(&["an answer"]));
    assert_eq!(r.t.turn("alice", turn("message 14")).await.error_code(), None);
    let (reads, counts) = log_reads(&r.proxy.since(mark));
    assert_eq!((reads, counts.iter().sum::<u64>() <= 8), (1, true), "{counts:?}");
    let sent = r.t.llm.requests()[asked].to_string();
    assert!(sent.contains("the first ten exchanges") && sent.contains("message 13"), "{sent}");
}
