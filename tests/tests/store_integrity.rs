//! The DynamoDB store's integrity at its edges, through the `Store` trait
//! against DynamoDB Local: messages over the 400 KB item limit, retried lease
//! writes of the same turn, `stream_run_id` claims per user, and a delete that
//! races a running turn.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::agent_state::store::{AgentStateStore, DynamoAgentStateStore};
use shared::agent_state::AgentState;
use shared::ids::{RunId, SessionId, TurnId, UserId};
use shared::message::{FunctionCall, Role, StoredMessage, ToolCall, Usage};
use shared::session::store::{
    DeleteProgress, Lease, Leases, MessagesFrom, RunClaim, SessionLog, Sessions, ToolOutputs, TurnEnd, TurnStart,
};
use shared::session::{ContextType, SessionView, TurnRecord, TurnStatus};
use shared::store::dynamo::DynamoStore;
use shared::store::StoreError;
use tests::{dynamo_client, fresh_table};

struct Db {
    client: aws_sdk_dynamodb::Client,
    table: String,
    store: DynamoStore,
}

async fn db() -> Db {
    let client = dynamo_client().await;
    let table = fresh_table(&client).await;
    Db { store: DynamoStore::new(client.clone(), table.clone()), client, table }
}

impl Db {
    fn states(&self) -> DynamoAgentStateStore {
        DynamoAgentStateStore::new(self.client.clone(), self.table.clone())
    }

    /// Every item under a partition, as (sk, item).
    async fn partition(&self, pk: &str) -> Vec<(String, std::collections::HashMap<String, AttributeValue>)> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", AttributeValue::S(pk.to_string()))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            for item in page.items.unwrap_or_default() {
                out.push((item["sk"].as_s().unwrap().clone(), item));
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return out,
            }
        }
    }

    async fn session_keys(&self, user: &UserId, sid: &SessionId) -> Vec<String> {
        self.partition(&format!("U#{user}#S#{sid}")).await.into_iter().map(|(sk, _)| sk).collect()
    }
}

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

fn new_view() -> SessionView {
    SessionView::new(ContextType::default(), None, None)
}

fn lease() -> Lease {
    Lease { turn_id: TurnId::new(), until_ms: shared::now_ms() + 30_000 }
}

fn run_of(turn: &TurnId) -> RunId {
    RunId::parse(turn.as_str()).unwrap()
}

fn turn_start(sid: &SessionId, turn: &TurnId, run: &RunId, seq: u64) -> TurnStart {
    TurnStart {
        turn: TurnRecord {
            turn_id: turn.clone(),
            run_id: run.clone(),
            status: TurnStatus::Running,
            user_message_seq: seq,
            assistant_message_seq: None,
            started_at: shared::now_ms(),
            ended_at: None,
        },
        user_message: StoredMessage::new(sid.clone(), seq, turn.clone(), Role::User, Some("hello".into())),
        context_type: ContextType::default(),
        entity_id: None,
        focus: None,
        title: None,
    }
}

/// A new session whose first turn has started (lease held, user message 1
/// stored), as the stream leaves it while the model works.
async fn started_turn(db: &Db, u: &UserId) -> (SessionId, Lease, StoredMessage) {
    let l = lease();
    let run = run_of(&l.turn_id);
    let s = db.store.create_session(u, &new_view(), &l, &run).await.expect("create session");
    let start = turn_start(&s.view.id, &l.turn_id, &run, 1);
    db.store.start_turn(u, &s.view.id, &start).await.expect("start turn");
    (s.view.id, l, start.user_message)
}

fn end(l: &Lease, messages: Vec<StoredMessage>) -> TurnEnd {
    TurnEnd {
        turn_id: l.turn_id.clone(),
        run_id: run_of(&l.turn_id),
        status: TurnStatus::Completed,
        messages,
        usage: Usage::default(),
        scope: None,
    }
}

/// `n` bytes of text mixing 1-, 2-, 3- and 4-byte characters, so that chunk
/// borders fall inside characters.
fn mixed_text(n: usize) -> String {
    let mut s = String::with_capacity(n + 4);
    let pattern = ['a', 'é', '€', '😀', 'b', '\n', '"', '\\'];
    let mut i = 0;
    while s.len() < n {
        s.push(pattern[i % pattern.len()]);
        i += 1;
    }
    s
}

/// Compares logs without printing megabytes on failure.
fn assert_same_log(got: &[StoredMessage], want: &[StoredMessage], what: &str) {
    let seqs = |l: &[StoredMessage]| l.iter().map(|m| m.seq).collect::<Vec<_>>();
    assert_eq!(seqs(got), seqs(want), "{what}: the seqs");
    for (g, w) in got.iter().zip(want) {
        assert!(g == w, "{what}: message {} differs from what was stored", w.seq);
    }
}

// ---- 1. messages over the 400 KB item limit ---------------------------------

#[tokio::test]
async fn a_1_mb_answer_and_a_tool_call_with_1_mb_of_arguments_are_stored_and_read_back_whole() {
    let db = db().await;
    let alice = user("alice");
    let (sid, l, question) = started_turn(&db, &alice).await;

    let args = serde_json::json!({"text": mixed_text(1 << 20)}).to_string();
    let mut call = StoredMessage::new(sid.clone(), 2, l.turn_id.clone(), Role::Assistant, None);
    call.tool_calls = vec![ToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: FunctionCall { name: "write_document".into(), arguments: args.clone() },
    }];
    let mut result = StoredMessage::new(sid.clone(), 3, l.turn_id.clone(), Role::Tool, Some("{\"ok\":true}".into()));
    result.tool_call_id = Some("call_1".into());
    db.store
        .append_messages(&alice, &sid, &l.turn_id, &[call.clone(), result.clone()])
        .await
        .expect("a tool round with 1 MB of arguments is stored");

    let answer_text = mixed_text(1 << 20);
    let answer = StoredMessage::new(sid.clone(), 4, l.turn_id.clone(), Role::Assistant, Some(answer_text.clone()));
    db.store.finish_turn(&alice, &sid, &end(&l, vec![answer.clone()])).await.expect("a 1 MB answer is stored");

    // The same writes again, as a caller's retry after an answer that was lost:
    // refused, and what was stored stays whole.
    let again = db.store.append_messages(&alice, &sid, &l.turn_id, &[call.clone(), result.clone()]).await;
    assert!(again.is_err(), "{again:?}");
    // A turn under its own id ends with two plain writes
    // (`session::store::dynamo::plain`): its retry finds its own message
    // stored and the lease given back, which is this very write done.
    let again = db.store.finish_turn(&alice, &sid, &end(&l, vec![answer.clone()])).await;
    assert!(again.is_ok(), "{again:?}");

    let log = vec![question, call, result, answer];
    let recent = db.store.recent_messages(&alice, &sid, 10).await.unwrap();
    assert_same_log(&recent, &log, "recent_messages");
    assert!(recent[1].tool_calls[0].function.arguments == args, "the arguments, byte for byte");
    assert!(recent[3].content.as_deref() == Some(answer_text.as_str()), "the answer, byte for byte");
    // Limits count messages, whatever their size.
    assert_same_log(&db.store.recent_messages(&alice, &sid, 1).await.unwrap(), &log[3..], "recent_messages(1)");
    assert_same_log(&db.store.recent_messages(&alice, &sid, 2).await.unwrap(), &log[2..], "recent_messages(2)");

    let page = |from, limit| db.store.messages_page(&alice, &sid, from, limit);
    assert_same_log(&page(MessagesFrom::Before(None), 50).await.unwrap(), &log, "newest page");
    assert_same_log(&page(MessagesFrom::After(0), 50).await.unwrap(), &log, "oldest page");
    assert_same_log(&page(MessagesFrom::After(1), 2).await.unwrap(), &log[1..3], "after 1, two");
    assert_same_log(&page(MessagesFrom::Before(Some(4)), 1).await.unwrap(), &log[2..3], "before 4, one");

    let s = db.store.session(&alice, &sid).await.unwrap().unwrap();
    assert_eq!(s.view.message_count, 4);
    assert!(s.lease.is_none(), "the turn ended");
}

#[tokio::test]
async fn multibyte_characters_survive_every_chunk_border() {
    let db = db().await;
    let alice = user("alice");
    let (sid, l, question) = started_turn(&db, &alice).await;
    // Four-byte characters after 0..=3 ASCII bytes: at least three of the four
    // messages have a chunk border inside a character, whatever the framing.
    let messages: Vec<StoredMessage> = (0..4)
        .map(|k| {
            let text = format!("{}{}", "x".repeat(k), "😀".repeat(180_000));
            StoredMessage::new(sid.clone(), 2 + k as u64, l.turn_id.clone(), Role::Assistant, Some(text))
        })
        .collect();
    db.store.append_messages(&alice, &sid, &l.turn_id, &messages).await.expect("stored");
    let mut log = vec![question];
    log.extend(messages);
    assert_same_log(&db.store.recent_messages(&alice, &sid, 100).await.unwrap(), &log, "recent_messages");
    assert_same_log(
        &db.store.messages_page(&alice, &sid, MessagesFrom::After(0), 100).await.unwrap(),
        &log,
        "messages_page",
    );
}

// ---- 2. a retried lease write of the same turn -----------------------------

#[tokio::test]
async fn a_retried_lease_write_of_the_same_turn_succeeds_and_another_turn_stays_busy() {
    let db = db().await;
    let alice = user("alice");
    let first = lease();
    let view = new_view();
    let run = run_of(&first.turn_id);
    let created = db.store.create_session(&alice, &view, &first, &run).await.unwrap();
    // The create's response was lost and the SDK sent it again.
    let again = db.store.create_session(&alice, &view, &first, &run).await.expect("a retry of our own create succeeds");
    assert_eq!(again.view, created.view);
    assert_eq!(again.lease, Some((first.turn_id.clone(), first.until_ms)));
    // Another turn with a session id already taken is refused.
    let other = lease();
    let refused = db.store.create_session(&alice, &view, &other, &run_of(&other.turn_id)).await;
    assert!(matches!(refused, Err(StoreError::Busy)), "{refused:?}");
    db.store.release_lease(&alice, &view.id, &first.turn_id).await.unwrap();

    let mine = lease();
    let got = db.store.acquire_lease(&alice, &view.id, &mine).await.unwrap();
    assert_eq!(got.lease, Some((mine.turn_id.clone(), mine.until_ms)));
    // The lease write applied, its response was lost, the retry finds the lease held: by us.
    let retried = db.store.acquire_lease(&alice, &view.id, &mine).await.expect("a retry of our own lease succeeds");
    assert_eq!(retried.view.id, view.id);
    assert_eq!(retried.lease, Some((mine.turn_id.clone(), mine.until_ms)));
    // Anyone else is still refused.
    assert!(matches!(db.store.acquire_lease(&alice, &view.id, &lease()).await, Err(StoreError::Busy)));
    db.store.renew_lease(&alice, &view.id, &mine).await.unwrap();
    db.store.renew_lease(&alice, &view.id, &mine).await.expect("a renewal is its own retry");
}

// ---- 3. a `stream_run_id` is claimed once per user ---------------------------

#[tokio::test]
async fn a_run_id_creates_one_session_per_user() {
    let db = db().await;
    let (alice, bob) = (user("alice"), user("bob"));
    let run = RunId::parse("client-run-1").unwrap();
    assert_eq!(db.store.run_claim(&alice, &run).await.unwrap(), None);

    let (first, first_view) = (lease(), new_view());
    db.store.create_session(&alice, &first_view, &first, &run).await.unwrap();
    let claim = RunClaim { session_id: first_view.id.clone(), turn_id: first.turn_id.clone() };
    assert_eq!(db.store.run_claim(&alice, &run).await.unwrap(), Some(claim.clone()));

    // The same first turn, retried by the client: a new turn and a new session id.
    let (retry, retry_view) = (lease(), new_view());
    let second = db.store.create_session(&alice, &retry_view, &retry, &run).await;
    assert!(matches!(second, Err(StoreError::DuplicateRun)), "{second:?}");
    assert_eq!(db.store.run_claim(&alice, &run).await.unwrap(), Some(claim.clone()), "the first claim stands");
    assert!(db.store.session(&alice, &retry_view.id).await.unwrap().is_none(), "no second session");
    assert_eq!(db.store.list_sessions(&alice, 10, None).await.unwrap().sessions.len(), 1);

    // Claims are per user: bob's run of the same name is his own.
    let (bobs, bobs_view) = (lease(), new_view());
    db.store.create_session(&bob, &bobs_view, &bobs, &run).await.expect("another user's claim does not interfere");
    let bobs_claim = RunClaim { session_id: bobs_view.id.clone(), turn_id: bobs.turn_id.clone() };
    assert_eq!(db.store.run_claim(&bob, &run).await.unwrap(), Some(bobs_claim));
    assert_eq!(db.store.run_claim(&alice, &run).await.unwrap(), Some(claim));

    // Each first turn starts with the run its session was created with.
    let start = turn_start(&first_view.id, &first.turn_id, &run, 1);
    db.store.start_turn(&alice, &first_view.id, &start).await.expect("the claim is this turn's own");
    let start = turn_start(&bobs_view.id, &bobs.turn_id, &run, 1);
    db.store.start_turn(&bob, &bobs_view.id, &start).await.expect("bob's turn starts");
}

#[tokio::test]
async fn a_run_id_claimed_in_one_session_is_refused_in_another() {
    let db = db().await;
    let alice = user("alice");
    // Session A's turn used the run id.
    let (a, a_lease, _) = started_turn(&db, &alice).await;
    let run = run_of(&a_lease.turn_id);
    let claim = db.store.run_claim(&alice, &run).await.unwrap().expect("start_turn claimed the run");
    assert_eq!(claim.session_id, a);

    // Session B, leased by a new turn that reuses the run id.
    let (l, view) = (lease(), new_view());
    db.store.create_session(&alice, &view, &l, &run_of(&l.turn_id)).await.unwrap();
    let start = turn_start(&view.id, &l.turn_id, &run, 1);
    let refused = db.store.start_turn(&alice, &view.id, &start).await;
    assert!(matches!(refused, Err(StoreError::DuplicateRun)), "{refused:?}");
    assert_eq!(db.store.session(&alice, &view.id).await.unwrap().unwrap().view.message_count, 0, "nothing written");
    assert!(db.store.turn_by_run(&alice, &view.id, &run).await.unwrap().is_none());
    assert_eq!(db.store.run_claim(&alice, &run).await.unwrap(), Some(claim));

    // In another user's session the same run id is free.
    let bob = user("bob");
    let (l, view) = (lease(), new_view());
    db.store.create_session(&bob, &view, &l, &run_of(&l.turn_id)).await.unwrap();
    db.store.start_turn(&bob, &view.id, &turn_start(&view.id, &l.turn_id, &run, 1)).await.expect("bob's own run");
}

// ---- 4. a delete that races a running turn ---------------------------------

/// Everything a running turn writes after its start, each of which must fail
/// once the delete has begun: small writes, and writes whose bodies are chunked.
async fn later_writes_fail(db: &Db, u: &UserId, sid: &SessionId, l: &Lease, when: &str) {
    for arguments in ["{\"q\":\"plans\"}".to_string(), mixed_text(500_000)] {
        let mut call = StoredMessage::new(sid.clone(), 2, l.turn_id.clone(), Role::Assistant, None);
        call.tool_calls = vec![ToolCall {
            id: "call_1".into(),
            kind: "function".into(),
            function: FunctionCall { name: "search".into(), arguments },
        }];
        let mut result = StoredMessage::new(sid.clone(), 3, l.turn_id.clone(), Role::Tool, Some("found".into()));
        result.tool_call_id = Some("call_1".into());
        let appended = db.store.append_messages(u, sid, &l.turn_id, &[call, result]).await;
        assert!(appended.is_err(), "{when}: append_messages must fail, got {appended:?}");
    }

    let put = db.store.put_tool_output(u, sid, "call_1", &mixed_text(700_000)).await;
    assert!(put.is_err(), "{when}: put_tool_output must fail, got {put:?}");

    for text in ["done".to_string(), mixed_text(450_000)] {
        let answer = StoredMessage::new(sid.clone(), 2, l.turn_id.clone(), Role::Assistant, Some(text));
        let finished = db.store.finish_turn(u, sid, &end(l, vec![answer])).await;
        assert!(finished.is_err(), "{when}: finish_turn must fail, got {finished:?}");
    }

    let saved = db.states().save(u, sid, &AgentState::new(sid.to_string()), 0).await;
    assert!(saved.is_err(), "{when}: the agent state save must fail, got {saved:?}");
}

#[tokio::test]
async fn a_turns_writes_after_its_session_delete_began_fail_and_leave_nothing() {
    let db = db().await;
    let alice = user("alice");

    // The delete has marked the session and not finished (its budget ran out).
    let (sid, l, _) = started_turn(&db, &alice).await;
    let before = db.session_keys(&alice, &sid).await;
    let partial = db.store.delete_session(&alice, &sid, Some(0)).await.unwrap();
    assert_eq!(partial, DeleteProgress::Partial { items_deleted: 0 });
    later_writes_fail(&db, &alice, &sid, &l, "while deleting").await;
    assert_eq!(db.session_keys(&alice, &sid).await, before, "nothing was added while deleting");
    assert!(matches!(db.store.renew_lease(&alice, &sid, &l).await, Err(StoreError::LeaseLost)));
    assert!(matches!(db.store.delete_session(&alice, &sid, None).await, Ok(DeleteProgress::Done { .. })));
    assert_eq!(db.session_keys(&alice, &sid).await, Vec::<String>::new());

    // The delete has finished.
    let (sid, l, _) = started_turn(&db, &alice).await;
    assert!(matches!(db.store.delete_session(&alice, &sid, None).await, Ok(DeleteProgress::Done { .. })));
    later_writes_fail(&db, &alice, &sid, &l, "after the delete").await;
    assert_eq!(db.session_keys(&alice, &sid).await, Vec::<String>::new(), "nothing came back");
}

#[tokio::test]
async fn a_retried_delete_sweeps_what_is_left_under_a_session_whose_item_is_gone() {
    let db = db().await;
    let alice = user("alice");
    let (sid, l, _) = started_turn(&db, &alice).await;
    let answer = StoredMessage::new(sid.clone(), 2, l.turn_id.clone(), Role::Assistant, Some("an answer".into()));
    db.store.finish_turn(&alice, &sid, &end(&l, vec![answer])).await.unwrap();
    db.store.put_tool_output(&alice, &sid, "call_9", &mixed_text(700_000)).await.unwrap();
    // The session item went first (as an older delete, or one racing a
    // writer, could leave it): the rest of the partition is still there.
    db.client
        .delete_item()
        .table_name(&db.table)
        .key("pk", AttributeValue::S(format!("U#{alice}#S#{sid}")))
        .key("sk", AttributeValue::S("SESSION".into()))
        .send()
        .await
        .unwrap();
    let left = db.session_keys(&alice, &sid).await;
    assert!(left.len() >= 4, "messages, turn record and chunks remain: {left:?}");

    let progress = db.store.delete_session(&alice, &sid, None).await.expect("the retried delete finishes the job");
    assert_eq!(progress, DeleteProgress::Done { items_deleted: left.len() });
    assert_eq!(db.session_keys(&alice, &sid).await, Vec::<String>::new());
    // Only a partition with nothing at all is not found.
    assert!(matches!(db.store.delete_session(&alice, &sid, None).await, Err(StoreError::NotFound)));
}

#[tokio::test]
async fn a_later_tool_output_under_the_same_id_reads_back_alone() {
    let db = db().await;
    let u = user("alice");
    let (sid, _, _) = started_turn(&db, &u).await;
    let long = "a".repeat(700_000);
    let short = "b".repeat(310_000);
    db.store.put_tool_output(&u, &sid, "call_0", &long).await.unwrap();
    db.store.put_tool_output(&u, &sid, "call_0", &short).await.unwrap();
    let got = db.store.tool_output(&u, &sid, "call_0").await.unwrap().unwrap();
    assert_eq!(got.len(), short.len(), "no chunk of the earlier output is attached");
    assert_eq!(got, short);
}

#[tokio::test]
async fn a_turn_ending_with_more_messages_than_one_transaction_holds_stores_them_all() {
    let db = db().await;
    let u = user("alice");
    let (sid, l, _) = started_turn(&db, &u).await;
    let msgs: Vec<StoredMessage> = (2..14)
        .map(|seq| StoredMessage::new(sid.clone(), seq, l.turn_id.clone(), Role::Assistant, Some(format!("m{seq}"))))
        .collect();
    db.store.finish_turn(&u, &sid, &end(&l, msgs)).await.expect("12 messages end a turn");
    let log = db.store.recent_messages(&u, &sid, 50).await.unwrap();
    assert_eq!(log.iter().map(|m| m.seq).collect::<Vec<_>>(), (1..14).collect::<Vec<_>>());
    let session = db.store.session(&u, &sid).await.unwrap().unwrap();
    assert_eq!(session.view.message_count, 13);
    assert_eq!(session.lease, None, "released");
}
