//! The one contract of the session stores, written once and run against
//! every implementation: the in-memory twin in this crate's unit tests, and
//! DynamoDB Local in `tests/tests/contract_sessions.rs` (feature `testkit`).
//! Each case takes a store and a fresh user of its own, so cases can share a
//! table; [`crate::session_store_contract!`] turns them into one test each.
//!
//! The cases cover a turn's paths through the store: opening a session with
//! its first turn, retries of that write, the lease (taken, busy, expired,
//! renewed, released), the start of a later turn (run claims, gap-free seqs),
//! tool rounds, the end of a turn, Stop, message reads and pages, the
//! sessions list, tool outputs, and a delete winning over a running turn.

use super::{DeleteProgress, Lease, MessagesFrom, RunClaim, SessionStore, TurnEnd, TurnStart};
use crate::ids::{RunId, SessionId, TurnId, UserId};
use crate::message::{Role, StoredMessage, Usage};
use crate::session::{ContextType, Scope, SessionStatus, SessionView, TurnRecord, TurnStatus};
use crate::store::StoreError;

/// One `#[tokio::test]` per case, each over a store `$store` makes (an
/// expression, evaluated in the test's async body).
#[macro_export]
macro_rules! session_store_contract {
    ($store:expr) => {
        $crate::session_store_contract_cases!($store;
            open_session_stores_the_session_the_turn_and_the_user_message,
            open_session_retried_by_its_turn_succeeds_and_another_turns_run_is_duplicate,
            create_session_is_leased_claims_the_run_and_takes_an_id_once,
            a_live_lease_of_another_turn_is_busy_and_an_expired_one_is_taken,
            closed_and_missing_sessions_refuse_the_lease,
            only_the_holder_renews_and_releases_the_lease,
            start_turn_counts_the_message_and_sets_the_scope_and_a_missing_title,
            start_turn_needs_the_lease,
            start_turn_refuses_a_run_seen_in_this_or_another_session,
            start_turn_out_of_sequence_writes_nothing,
            tool_rounds_continue_the_count_in_transactions_of_nine,
            a_tool_round_without_the_lease_is_refused,
            finish_turn_records_the_end_releases_the_lease_and_adds_usage,
            finish_turn_stores_the_scope_the_turn_moved_to,
            finish_turn_without_the_lease_writes_nothing,
            a_turn_under_its_own_id_claims_and_records_nothing_and_counts_as_any,
            a_start_under_its_own_id_takes_a_count_left_behind_and_refuses_a_taken_or_passed_seq,
            a_turn_under_its_own_id_without_the_lease_writes_nothing,
            recent_messages_are_the_newest_oldest_first,
            message_pages_go_before_and_after_a_seq,
            sessions_list_most_recent_first_in_pages_for_their_user_only,
            a_turn_taking_its_session_moves_it_first_and_the_listing_reads_it_whole,
            another_users_session_is_not_there,
            a_users_title_stays_and_a_closed_session_takes_no_turn,
            stop_is_asked_of_the_live_turn_only_and_ends_with_it,
            a_started_delete_hides_the_session_and_fails_every_write,
            a_delete_goes_in_pages_of_25_and_resumes,
            tool_outputs_read_back_whole_and_a_later_one_replaces,
            a_large_message_reads_back_whole,
        );
    };
}

/// The tests [`session_store_contract!`](crate::session_store_contract) makes, one per named case.
#[doc(hidden)]
#[macro_export]
macro_rules! session_store_contract_cases {
    ($store:expr; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let store = $store;
                $crate::session::store::contract::$case(&store).await;
            }
        )+
    };
}

/// A user of one case's own.
pub fn fresh_user() -> UserId {
    UserId::parse(format!("contract-{}", uuid::Uuid::new_v4().simple())).expect("valid user id")
}

fn lease_for(turn: &TurnId, ms: i64) -> Lease {
    Lease { turn_id: turn.clone(), until_ms: crate::now_ms() + ms }
}

/// The `stream_run_id` a client named for `turn`: claimed and recorded
/// (`TurnStart::claims_run`).
fn run_of(turn: &TurnId) -> RunId {
    RunId::parse(format!("run-{turn}")).expect("a valid run id")
}

/// A turn whose client named no `stream_run_id`: it runs under its own id.
fn own_run(turn: &TurnId) -> RunId {
    RunId::parse(turn.as_str()).expect("turn ids are valid run ids")
}

fn message(sid: &SessionId, seq: u64, turn: &TurnId, role: Role, text: &str) -> StoredMessage {
    StoredMessage::new(sid.clone(), seq, turn.clone(), role, Some(text.to_string()))
}

/// A turn's start record and user message at `seq`.
fn turn_start(sid: &SessionId, seq: u64, turn: &TurnId, run: &RunId) -> TurnStart {
    TurnStart {
        turn: TurnRecord {
            turn_id: turn.clone(),
            run_id: run.clone(),
            status: TurnStatus::Running,
            user_message_seq: seq,
            assistant_message_seq: None,
            started_at: crate::now_ms(),
            ended_at: None,
        },
        user_message: message(sid, seq, turn, Role::User, &format!("question {seq}")),
        context_type: ContextType::Project,
        entity_id: Some("e-1".into()),
        focus: Some(serde_json::json!({ "projectId": "p-1" })),
        title: Some(format!("title {seq}")),
    }
}

fn turn_end(turn: &TurnId, run: &RunId, messages: Vec<StoredMessage>) -> TurnEnd {
    let usage = Usage { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
    TurnEnd { turn_id: turn.clone(), run_id: run.clone(), status: TurnStatus::Completed, messages, usage, scope: None }
}

/// A session opened by its first turn, which still holds the lease.
pub struct Opened {
    pub user: UserId,
    pub sid: SessionId,
    pub turn: TurnId,
    pub run: RunId,
}

async fn open(store: &dyn SessionStore) -> Opened {
    let (user, turn) = (fresh_user(), TurnId::new());
    let run = run_of(&turn);
    let view = SessionView::new(ContextType::Global, None, None);
    let start = turn_start(&view.id, 1, &turn, &run);
    store.open_session(&user, &view, &lease_for(&turn, 60_000), &start).await.expect("open_session");
    Opened { user, sid: view.id, turn, run }
}

/// Appends `n` assistant messages after `after` for the holder of the lease.
async fn append(store: &dyn SessionStore, o: &Opened, after: u64, n: u64) {
    let msgs: Vec<_> =
        (after + 1..=after + n).map(|s| message(&o.sid, s, &o.turn, Role::Assistant, &format!("a{s}"))).collect();
    store.append_messages(&o.user, &o.sid, &o.turn, &msgs).await.expect("append_messages");
}

/// Ends the first turn (nothing more to store) and starts a second one, which
/// holds the lease; returns it with its run.
async fn second_turn(store: &dyn SessionStore, o: &Opened) -> (TurnId, RunId) {
    store.finish_turn(&o.user, &o.sid, &turn_end(&o.turn, &o.run, vec![])).await.expect("finish first turn");
    let turn = TurnId::new();
    store.acquire_lease(&o.user, &o.sid, &lease_for(&turn, 60_000)).await.expect("lease");
    (turn.clone(), run_of(&turn))
}

async fn count(store: &dyn SessionStore, o: &Opened) -> u64 {
    store.session(&o.user, &o.sid).await.expect("read").expect("visible").view.message_count
}

fn seqs(messages: &[StoredMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.seq).collect()
}

pub async fn open_session_stores_the_session_the_turn_and_the_user_message(store: &dyn SessionStore) {
    let o = open(store).await;
    let s = store.session(&o.user, &o.sid).await.unwrap().expect("the session exists");
    assert_eq!((s.view.message_count, s.view.status), (1, SessionStatus::Active));
    assert_eq!(s.view.title.as_deref(), Some("title 1"), "the first message's title");
    assert_eq!(s.lease.map(|(t, _)| t), Some(o.turn.clone()), "leased to its first turn");
    let record = store.turn_by_run(&o.user, &o.sid, &o.run).await.unwrap().expect("turn record");
    assert_eq!((record.turn_id, record.status, record.user_message_seq), (o.turn.clone(), TurnStatus::Running, 1));
    let claim = store.run_claim(&o.user, &o.run).await.unwrap();
    assert_eq!(claim, Some(RunClaim { session_id: o.sid.clone(), turn_id: o.turn.clone() }));
    let log = store.recent_messages(&o.user, &o.sid, 10).await.unwrap();
    assert_eq!((seqs(&log), log[0].content.as_deref()), (vec![1], Some("question 1")));
}

pub async fn open_session_retried_by_its_turn_succeeds_and_another_turns_run_is_duplicate(store: &dyn SessionStore) {
    let (user, turn) = (fresh_user(), TurnId::new());
    let run = run_of(&turn);
    let view = SessionView::new(ContextType::Global, None, None);
    let (lease, start) = (lease_for(&turn, 60_000), turn_start(&view.id, 1, &turn, &run));
    store.open_session(&user, &view, &lease, &start).await.unwrap();
    // The same write again (its answer was lost): Ok, and stored once.
    store.open_session(&user, &view, &lease, &start).await.expect("a retry of our own write");
    assert_eq!(store.recent_messages(&user, &view.id, 10).await.unwrap().len(), 1);
    // Another turn reusing the run id for a new session.
    let other = TurnId::new();
    let view2 = SessionView::new(ContextType::Global, None, None);
    let mut start2 = turn_start(&view2.id, 1, &other, &run);
    start2.turn.turn_id = other.clone();
    let err = store.open_session(&user, &view2, &lease_for(&other, 60_000), &start2).await.unwrap_err();
    assert!(matches!(err, StoreError::DuplicateRun), "{err:?}");
    assert!(store.session(&user, &view2.id).await.unwrap().is_none(), "nothing written");
}

pub async fn create_session_is_leased_claims_the_run_and_takes_an_id_once(store: &dyn SessionStore) {
    let (user, turn) = (fresh_user(), TurnId::new());
    let (run, lease) = (run_of(&turn), lease_for(&turn, 60_000));
    let view = SessionView::new(ContextType::Calendar, None, None);
    let s = store.create_session(&user, &view, &lease, &run).await.unwrap();
    assert_eq!(
        (s.view.id.clone(), s.view.context_type, s.view.message_count),
        (view.id.clone(), ContextType::Calendar, 0)
    );
    assert_eq!(s.lease, Some((turn.clone(), lease.until_ms)));
    assert_eq!(store.run_claim(&user, &run).await.unwrap().map(|c| c.session_id), Some(view.id.clone()));
    let again = store.create_session(&user, &view, &lease, &run).await.expect("a retry of our own write");
    assert_eq!(again.view.id, view.id);
    let other = TurnId::new();
    let (fresh, other_lease) = (SessionView::new(ContextType::Global, None, None), lease_for(&other, 1));
    let dup = store.create_session(&user, &fresh, &other_lease, &run).await;
    assert!(matches!(dup, Err(StoreError::DuplicateRun)), "{dup:?}");
    let taken = store.create_session(&user, &view, &lease_for(&other, 1), &run_of(&other)).await;
    assert!(matches!(taken, Err(StoreError::Busy)), "an id already taken: {taken:?}");
}

pub async fn a_live_lease_of_another_turn_is_busy_and_an_expired_one_is_taken(store: &dyn SessionStore) {
    let (user, first) = (fresh_user(), TurnId::new());
    let view = SessionView::new(ContextType::Global, None, None);
    store.create_session(&user, &view, &lease_for(&first, 60_000), &run_of(&first)).await.unwrap();
    let second = TurnId::new();
    let busy = store.acquire_lease(&user, &view.id, &lease_for(&second, 60_000)).await;
    assert!(matches!(busy, Err(StoreError::Busy)), "{busy:?}");
    let again = store.acquire_lease(&user, &view.id, &lease_for(&first, 90_000)).await;
    assert!(again.is_ok(), "the holder takes its lease again: {again:?}");
    // An expired lease is anyone's.
    let (user2, stale) = (fresh_user(), TurnId::new());
    let view2 = SessionView::new(ContextType::Global, None, None);
    store.create_session(&user2, &view2, &lease_for(&stale, -1_000), &run_of(&stale)).await.unwrap();
    let s = store.acquire_lease(&user2, &view2.id, &lease_for(&second, 60_000)).await.expect("expired lease");
    assert_eq!(s.lease.map(|(t, _)| t), Some(second));
}

pub async fn closed_and_missing_sessions_refuse_the_lease(store: &dyn SessionStore) {
    let o = open(store).await;
    store.release_lease(&o.user, &o.sid, &o.turn).await.unwrap();
    store.close_session(&o.user, &o.sid).await.unwrap();
    let closed = store.acquire_lease(&o.user, &o.sid, &lease_for(&TurnId::new(), 60_000)).await;
    assert!(matches!(closed, Err(StoreError::Closed)), "{closed:?}");
    let missing = store.acquire_lease(&o.user, &SessionId::new(), &lease_for(&TurnId::new(), 60_000)).await;
    assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");
}

pub async fn only_the_holder_renews_and_releases_the_lease(store: &dyn SessionStore) {
    let o = open(store).await;
    let stranger = TurnId::new();
    let lost = store.renew_lease(&o.user, &o.sid, &lease_for(&stranger, 60_000)).await;
    assert!(matches!(lost, Err(StoreError::LeaseLost)), "{lost:?}");
    store.renew_lease(&o.user, &o.sid, &lease_for(&o.turn, 120_000)).await.expect("the holder renews");
    store.release_lease(&o.user, &o.sid, &stranger).await.expect("not ours: left alone, Ok");
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!(s.lease.as_ref().map(|(t, _)| t), Some(&o.turn), "a stranger's release left it");
    assert!(s.lease.unwrap().1 > crate::now_ms() + 90_000, "renewed");
    store.release_lease(&o.user, &o.sid, &o.turn).await.unwrap();
    assert_eq!(store.session(&o.user, &o.sid).await.unwrap().unwrap().lease, None);
    let after = store.renew_lease(&o.user, &o.sid, &lease_for(&o.turn, 60_000)).await;
    assert!(matches!(after, Err(StoreError::LeaseLost)), "released: {after:?}");
}

pub async fn start_turn_counts_the_message_and_sets_the_scope_and_a_missing_title(store: &dyn SessionStore) {
    let o = open(store).await;
    let (turn, run) = second_turn(store, &o).await;
    let start = turn_start(&o.sid, 2, &turn, &run);
    store.start_turn(&o.user, &o.sid, &start).await.unwrap();
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!(s.view.message_count, 2);
    assert_eq!((s.view.context_type, s.view.entity_id.as_deref()), (ContextType::Project, Some("e-1")));
    assert_eq!(s.view.focus, Some(serde_json::json!({ "projectId": "p-1" })));
    assert_eq!(s.view.title.as_deref(), Some("title 1"), "a title is set only when missing");
    assert_eq!(store.run_claim(&o.user, &run).await.unwrap().map(|c| c.turn_id), Some(turn.clone()));
    assert_eq!(seqs(&store.recent_messages(&o.user, &o.sid, 10).await.unwrap()), [1, 2]);
    // A start without scope removes the stored entity and focus.
    let (turn3, run3) = {
        store.finish_turn(&o.user, &o.sid, &turn_end(&turn, &run, vec![])).await.unwrap();
        let t = TurnId::new();
        store.acquire_lease(&o.user, &o.sid, &lease_for(&t, 60_000)).await.unwrap();
        (t.clone(), run_of(&t))
    };
    let bare = TurnStart {
        entity_id: None,
        focus: None,
        context_type: ContextType::Global,
        ..turn_start(&o.sid, 3, &turn3, &run3)
    };
    store.start_turn(&o.user, &o.sid, &bare).await.unwrap();
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!((s.view.context_type, s.view.entity_id, s.view.focus), (ContextType::Global, None, None));
}

pub async fn start_turn_needs_the_lease(store: &dyn SessionStore) {
    let o = open(store).await;
    store.finish_turn(&o.user, &o.sid, &turn_end(&o.turn, &o.run, vec![])).await.unwrap();
    let turn = TurnId::new();
    let err = store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 2, &turn, &run_of(&turn))).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost), "{err:?}");
    assert_eq!(count(store, &o).await, 1);
    assert_eq!(store.turn_by_run(&o.user, &o.sid, &run_of(&turn)).await.unwrap(), None, "nothing written");
    let gone = store.start_turn(&o.user, &SessionId::new(), &turn_start(&o.sid, 2, &turn, &run_of(&turn))).await;
    assert!(matches!(gone, Err(StoreError::NotFound)), "{gone:?}");
}

pub async fn start_turn_refuses_a_run_seen_in_this_or_another_session(store: &dyn SessionStore) {
    let o = open(store).await;
    let (turn, _) = second_turn(store, &o).await;
    let mut same_run = turn_start(&o.sid, 2, &turn, &o.run);
    same_run.turn.turn_id = turn.clone();
    let err = store.start_turn(&o.user, &o.sid, &same_run).await.unwrap_err();
    assert!(matches!(err, StoreError::DuplicateRun), "seen in this session: {err:?}");
    // The run id of a turn in another session of the same user.
    let other = TurnId::new();
    let view = SessionView::new(ContextType::Global, None, None);
    let start = turn_start(&view.id, 1, &other, &run_of(&other));
    store.open_session(&o.user, &view, &lease_for(&other, 60_000), &start).await.unwrap();
    let claimed = turn_start(&o.sid, 2, &turn, &run_of(&other));
    let err = store.start_turn(&o.user, &o.sid, &claimed).await.unwrap_err();
    assert!(matches!(err, StoreError::DuplicateRun), "claimed in another session: {err:?}");
    assert_eq!(count(store, &o).await, 1, "nothing written");
}

pub async fn start_turn_out_of_sequence_writes_nothing(store: &dyn SessionStore) {
    let o = open(store).await;
    let (turn, run) = second_turn(store, &o).await;
    // Seq 3 would leave a gap after 1.
    let err = store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 3, &turn, &run)).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost), "{err:?}");
    assert_eq!(seqs(&store.recent_messages(&o.user, &o.sid, 10).await.unwrap()), [1]);
    assert_eq!(store.turn_by_run(&o.user, &o.sid, &run).await.unwrap(), None);
    store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 2, &turn, &run)).await.expect("in sequence");
}

pub async fn tool_rounds_continue_the_count_in_transactions_of_nine(store: &dyn SessionStore) {
    let o = open(store).await;
    append(store, &o, 1, 20).await;
    assert_eq!(count(store, &o).await, 21);
    let log = store.recent_messages(&o.user, &o.sid, 100).await.unwrap();
    assert_eq!(seqs(&log), (1..=21).collect::<Vec<_>>());
    // A slot already taken is refused, and the count stays.
    let taken = [message(&o.sid, 21, &o.turn, Role::Tool, "again")];
    let err = store.append_messages(&o.user, &o.sid, &o.turn, &taken).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost), "{err:?}");
    assert_eq!(count(store, &o).await, 21);
}

pub async fn a_tool_round_without_the_lease_is_refused(store: &dyn SessionStore) {
    let o = open(store).await;
    let round = [message(&o.sid, 2, &TurnId::new(), Role::Assistant, "x")];
    let err = store.append_messages(&o.user, &o.sid, &TurnId::new(), &round).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost), "{err:?}");
    assert_eq!(count(store, &o).await, 1);
    assert_eq!(seqs(&store.recent_messages(&o.user, &o.sid, 10).await.unwrap()), [1]);
}

pub async fn finish_turn_records_the_end_releases_the_lease_and_adds_usage(store: &dyn SessionStore) {
    let o = open(store).await;
    // 12 closing messages: more than one transaction holds.
    let msgs: Vec<_> = (2..=13).map(|s| message(&o.sid, s, &o.turn, Role::Assistant, &format!("a{s}"))).collect();
    store.finish_turn(&o.user, &o.sid, &turn_end(&o.turn, &o.run, msgs)).await.unwrap();
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!((s.view.message_count, s.lease, s.prompt_tokens, s.completion_tokens), (13, None, 10, 5));
    let record = store.turn_by_run(&o.user, &o.sid, &o.run).await.unwrap().unwrap();
    assert_eq!((record.status, record.assistant_message_seq), (TurnStatus::Completed, Some(13)));
    assert!(record.ended_at.is_some());
    assert_eq!(seqs(&store.recent_messages(&o.user, &o.sid, 100).await.unwrap()), (1..=13).collect::<Vec<_>>());
    let turn = TurnId::new();
    let run = run_of(&turn);
    store.acquire_lease(&o.user, &o.sid, &lease_for(&turn, 60_000)).await.unwrap();
    store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 14, &turn, &run)).await.unwrap();
    store.finish_turn(&o.user, &o.sid, &turn_end(&turn, &run, vec![])).await.unwrap();
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!((s.prompt_tokens, s.completion_tokens), (20, 10), "usage adds up");
}

pub async fn finish_turn_stores_the_scope_the_turn_moved_to(store: &dyn SessionStore) {
    let o = open(store).await;
    let scope = Scope { context_type: ContextType::Entity, entity_id: Some("task-9".into()), focus: None };
    let end = TurnEnd { scope: Some(scope), ..turn_end(&o.turn, &o.run, vec![]) };
    store.finish_turn(&o.user, &o.sid, &end).await.unwrap();
    let v = store.session(&o.user, &o.sid).await.unwrap().unwrap().view;
    assert_eq!((v.context_type, v.entity_id.as_deref(), v.focus), (ContextType::Entity, Some("task-9"), None));
}

pub async fn finish_turn_without_the_lease_writes_nothing(store: &dyn SessionStore) {
    let o = open(store).await;
    store.release_lease(&o.user, &o.sid, &o.turn).await.unwrap();
    let thief = TurnId::new();
    store.acquire_lease(&o.user, &o.sid, &lease_for(&thief, 60_000)).await.unwrap();
    let answer = vec![message(&o.sid, 2, &o.turn, Role::Assistant, "late")];
    let err = store.finish_turn(&o.user, &o.sid, &turn_end(&o.turn, &o.run, answer)).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost), "{err:?}");
    assert_eq!(seqs(&store.recent_messages(&o.user, &o.sid, 10).await.unwrap()), [1]);
    let record = store.turn_by_run(&o.user, &o.sid, &o.run).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Running, "the record did not end");
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!(s.lease.map(|(t, _)| t), Some(thief), "the new holder keeps its lease");
}

/// A turn whose client named no `stream_run_id` (`TurnStart::claims_run`):
/// nothing claims its run or records it, and it counts, scopes and releases
/// as any turn; Stop finds it by its own id.
pub async fn a_turn_under_its_own_id_claims_and_records_nothing_and_counts_as_any(store: &dyn SessionStore) {
    let o = open(store).await;
    let (turn, _) = second_turn(store, &o).await;
    let run = own_run(&turn);
    store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 2, &turn, &run)).await.unwrap();
    assert_eq!(store.run_claim(&o.user, &run).await.unwrap(), None);
    assert_eq!(store.turn_by_run(&o.user, &o.sid, &run).await.unwrap(), None);
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!((s.view.message_count, s.view.context_type), (2, ContextType::Project));
    assert_eq!(store.request_stop(&o.user, &o.sid, Some(&run)).await.unwrap(), Some(turn.clone()));
    let answer = vec![message(&o.sid, 3, &turn, Role::Assistant, "answer")];
    store.finish_turn(&o.user, &o.sid, &turn_end(&turn, &run, answer)).await.unwrap();
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!((s.view.message_count, s.lease, s.prompt_tokens), (3, None, 20));
    assert_eq!(seqs(&store.recent_messages(&o.user, &o.sid, 10).await.unwrap()), [1, 2, 3]);
    // Stopped before any text: no message, the lease still given back.
    let (turn, _) = (TurnId::new(), ());
    store.acquire_lease(&o.user, &o.sid, &lease_for(&turn, 60_000)).await.unwrap();
    store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 4, &turn, &own_run(&turn))).await.unwrap();
    store.finish_turn(&o.user, &o.sid, &turn_end(&turn, &own_run(&turn), vec![])).await.unwrap();
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!((s.view.message_count, s.lease), (4, None));
}

/// Its start writes the message, then the session: one cut off between the
/// two leaves the count behind the log, and the next turn's start (counting
/// from the log, `turn::start`) is taken. A seq already stored, or one the
/// count has passed, is refused with nothing written.
pub async fn a_start_under_its_own_id_takes_a_count_left_behind_and_refuses_a_taken_or_passed_seq(
    store: &dyn SessionStore,
) {
    let o = open(store).await;
    let (turn, _) = second_turn(store, &o).await;
    let run = own_run(&turn);
    // The count is 1; the log's seq 2 would be a start cut off.
    store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 3, &turn, &run)).await.unwrap();
    assert_eq!(count(store, &o).await, 3);
    let again = TurnStart {
        user_message: message(&o.sid, 3, &turn, Role::User, "another question"),
        ..turn_start(&o.sid, 3, &turn, &run)
    };
    assert!(store.start_turn(&o.user, &o.sid, &again).await.is_err(), "seq 3 is taken");
    assert!(store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 2, &turn, &run)).await.is_err(), "passed");
    let log = store.recent_messages(&o.user, &o.sid, 10).await.unwrap();
    assert_eq!(seqs(&log), [1, 3], "nothing written by the refused starts");
    assert_eq!(log[1].content.as_deref(), Some("question 3"));
    assert_eq!(count(store, &o).await, 3);
}

pub async fn a_turn_under_its_own_id_without_the_lease_writes_nothing(store: &dyn SessionStore) {
    let o = open(store).await;
    let (turn, _) = second_turn(store, &o).await;
    let run = own_run(&turn);
    store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 2, &turn, &run)).await.unwrap();
    store.release_lease(&o.user, &o.sid, &turn).await.unwrap();
    let thief = TurnId::new();
    store.acquire_lease(&o.user, &o.sid, &lease_for(&thief, 60_000)).await.unwrap();
    let answer = vec![message(&o.sid, 3, &turn, Role::Assistant, "late")];
    let err = store.finish_turn(&o.user, &o.sid, &turn_end(&turn, &run, answer)).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost), "{err:?}");
    assert_eq!(seqs(&store.recent_messages(&o.user, &o.sid, 10).await.unwrap()), [1, 2]);
    let s = store.session(&o.user, &o.sid).await.unwrap().unwrap();
    assert_eq!((s.view.message_count, s.lease.map(|(t, _)| t)), (2, Some(thief)));
}

pub async fn recent_messages_are_the_newest_oldest_first(store: &dyn SessionStore) {
    let o = open(store).await;
    append(store, &o, 1, 9).await;
    assert_eq!(seqs(&store.recent_messages(&o.user, &o.sid, 4).await.unwrap()), [7, 8, 9, 10]);
    assert_eq!(store.recent_messages(&o.user, &o.sid, 50).await.unwrap().len(), 10);
    assert!(store.recent_messages(&o.user, &SessionId::new(), 5).await.unwrap().is_empty());
}

pub async fn message_pages_go_before_and_after_a_seq(store: &dyn SessionStore) {
    let o = open(store).await;
    append(store, &o, 1, 9).await;
    let page = |from| store.messages_page(&o.user, &o.sid, from, 3);
    assert_eq!(seqs(&page(MessagesFrom::Before(None)).await.unwrap()), [8, 9, 10]);
    assert_eq!(seqs(&page(MessagesFrom::Before(Some(8))).await.unwrap()), [5, 6, 7]);
    assert_eq!(seqs(&page(MessagesFrom::Before(Some(3))).await.unwrap()), [1, 2]);
    assert!(page(MessagesFrom::Before(Some(0))).await.unwrap().is_empty());
    assert_eq!(seqs(&page(MessagesFrom::After(0)).await.unwrap()), [1, 2, 3]);
    assert_eq!(seqs(&page(MessagesFrom::After(8)).await.unwrap()), [9, 10]);
    assert!(page(MessagesFrom::After(10)).await.unwrap().is_empty());
    // The last seq there can be: nothing after it (not an overflow, not the whole log).
    assert!(page(MessagesFrom::After(u64::MAX)).await.unwrap().is_empty());
}

pub async fn sessions_list_most_recent_first_in_pages_for_their_user_only(store: &dyn SessionStore) {
    let user = fresh_user();
    let mut ids = Vec::new();
    for i in 0..5 {
        let turn = TurnId::new();
        let mut view = SessionView::new(ContextType::Global, None, None);
        view.last_activity_at = 1_000_000 + i;
        store.create_session(&user, &view, &lease_for(&turn, 60_000), &run_of(&turn)).await.unwrap();
        ids.push(view.id);
    }
    ids.reverse();
    let first = store.list_sessions(&user, 2, None).await.unwrap();
    let cursor = first.cursor.clone().expect("more to come");
    let second = store.list_sessions(&user, 2, Some(&cursor)).await.unwrap();
    let third = store.list_sessions(&user, 2, second.cursor.as_deref()).await.unwrap();
    let listed: Vec<_> = [first, second, third].into_iter().flat_map(|p| p.sessions).map(|v| v.id).collect();
    assert_eq!(listed, ids);
    let foreign = store.list_sessions(&fresh_user(), 2, Some(&cursor)).await;
    assert!(matches!(foreign, Err(StoreError::NotFound)), "another user's cursor: {foreign:?}");
    assert!(matches!(store.list_sessions(&user, 2, Some("not-a-cursor")).await, Err(StoreError::NotFound)));
    assert!(store.list_sessions(&fresh_user(), 10, None).await.unwrap().sessions.is_empty());
}

pub async fn a_turn_taking_its_session_moves_it_first_and_the_listing_reads_it_whole(store: &dyn SessionStore) {
    let user = fresh_user();
    let mut ids = Vec::new();
    for i in 0..3 {
        let turn = TurnId::new();
        let mut view = SessionView::new(ContextType::Global, None, None);
        view.last_activity_at = 1_000_000 + i;
        store.create_session(&user, &view, &lease_for(&turn, -1), &run_of(&turn)).await.unwrap();
        ids.push(view.id);
    }
    // The oldest session gets a turn: it is the most recent now, and what the
    // listing shows is the item as it is, not as it was indexed.
    let turn = TurnId::new();
    store.acquire_lease(&user, &ids[0], &lease_for(&turn, 60_000)).await.unwrap();
    store.rename_session(&user, &ids[0], "Renamed").await.unwrap();
    let page = store.list_sessions(&user, 10, None).await.unwrap();
    let listed: Vec<_> = page.sessions.iter().map(|v| v.id.clone()).collect();
    assert_eq!(listed, vec![ids[0].clone(), ids[2].clone(), ids[1].clone()]);
    assert_eq!(page.sessions[0].title.as_deref(), Some("Renamed"));
    assert!(page.sessions[0].last_activity_at > 1_000_002, "{:?}", page.sessions[0]);
}

pub async fn another_users_session_is_not_there(store: &dyn SessionStore) {
    let o = open(store).await;
    let stranger = fresh_user();
    assert!(store.session(&stranger, &o.sid).await.unwrap().is_none());
    assert!(matches!(store.rename_session(&stranger, &o.sid, "x").await, Err(StoreError::NotFound)));
    let lease = store.acquire_lease(&stranger, &o.sid, &lease_for(&TurnId::new(), 60_000)).await;
    assert!(matches!(lease, Err(StoreError::NotFound)), "{lease:?}");
    assert!(store.recent_messages(&stranger, &o.sid, 10).await.unwrap().is_empty());
}

pub async fn a_users_title_stays_and_a_closed_session_takes_no_turn(store: &dyn SessionStore) {
    let o = open(store).await;
    let renamed = store.rename_session(&o.user, &o.sid, "Mine").await.unwrap();
    assert_eq!(renamed.view.title.as_deref(), Some("Mine"));
    let (turn, run) = second_turn(store, &o).await;
    store.start_turn(&o.user, &o.sid, &turn_start(&o.sid, 2, &turn, &run)).await.unwrap();
    store.finish_turn(&o.user, &o.sid, &turn_end(&turn, &run, vec![])).await.unwrap();
    let s = store.close_session(&o.user, &o.sid).await.unwrap();
    assert_eq!((s.view.title.as_deref(), s.view.status), (Some("Mine"), SessionStatus::Closed));
    let refused = store.acquire_lease(&o.user, &o.sid, &lease_for(&TurnId::new(), 60_000)).await;
    assert!(matches!(refused, Err(StoreError::Closed)), "{refused:?}");
    assert!(matches!(store.close_session(&o.user, &SessionId::new()).await, Err(StoreError::NotFound)));
}

pub async fn stop_is_asked_of_the_live_turn_only_and_ends_with_it(store: &dyn SessionStore) {
    let o = open(store).await;
    let other_run = run_of(&TurnId::new());
    assert_eq!(store.request_stop(&o.user, &o.sid, Some(&other_run)).await.unwrap(), None, "another run");
    assert!(!store.stop_requested(&o.user, &o.sid, &o.turn).await.unwrap());
    assert_eq!(store.request_stop(&o.user, &o.sid, Some(&o.run)).await.unwrap(), Some(o.turn.clone()));
    assert!(store.stop_requested(&o.user, &o.sid, &o.turn).await.unwrap());
    assert!(!store.stop_requested(&o.user, &o.sid, &TurnId::new()).await.unwrap(), "only that turn");
    store.finish_turn(&o.user, &o.sid, &turn_end(&o.turn, &o.run, vec![])).await.unwrap();
    assert!(!store.stop_requested(&o.user, &o.sid, &o.turn).await.unwrap(), "it ended with the turn");
    assert_eq!(store.request_stop(&o.user, &o.sid, None).await.unwrap(), None, "no running turn");
    let missing = store.request_stop(&o.user, &SessionId::new(), None).await;
    assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");
    // An expired lease is no running turn.
    let (user, stale) = (fresh_user(), TurnId::new());
    let view = SessionView::new(ContextType::Global, None, None);
    store.create_session(&user, &view, &lease_for(&stale, -1_000), &run_of(&stale)).await.unwrap();
    assert_eq!(store.request_stop(&user, &view.id, None).await.unwrap(), None);
}

pub async fn a_started_delete_hides_the_session_and_fails_every_write(store: &dyn SessionStore) {
    let o = open(store).await;
    append(store, &o, 1, 30).await;
    let first = store.delete_session(&o.user, &o.sid, Some(0)).await.unwrap();
    assert_eq!(first, DeleteProgress::Partial { items_deleted: 0 });
    assert!(store.session(&o.user, &o.sid).await.unwrap().is_none(), "gone from reads at once");
    assert!(store.list_sessions(&o.user, 10, None).await.unwrap().sessions.is_empty(), "and from lists");
    let round = [message(&o.sid, 32, &o.turn, Role::Assistant, "late")];
    let err = store.append_messages(&o.user, &o.sid, &o.turn, &round).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound), "{err:?}");
    let err = store.finish_turn(&o.user, &o.sid, &turn_end(&o.turn, &o.run, round.to_vec())).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound), "{err:?}");
    let renew = store.renew_lease(&o.user, &o.sid, &lease_for(&o.turn, 60_000)).await;
    assert!(matches!(renew, Err(StoreError::LeaseLost)), "{renew:?}");
    let out = store.put_tool_output(&o.user, &o.sid, "call-1", "output").await;
    assert!(matches!(out, Err(StoreError::NotFound)), "{out:?}");
    assert_eq!(store.tool_output(&o.user, &o.sid, "call-1").await.unwrap(), None, "nothing left behind");
    assert!(matches!(store.rename_session(&o.user, &o.sid, "x").await, Err(StoreError::NotFound)));
}

pub async fn a_delete_goes_in_pages_of_25_and_resumes(store: &dyn SessionStore) {
    let o = open(store).await;
    // The turn record, the user message and 30 more: 32 items beside the session.
    append(store, &o, 1, 30).await;
    let partial = store.delete_session(&o.user, &o.sid, Some(1)).await.unwrap();
    assert_eq!(partial, DeleteProgress::Partial { items_deleted: 25 });
    let done = store.delete_session(&o.user, &o.sid, None).await.unwrap();
    assert_eq!(done, DeleteProgress::Done { items_deleted: 8 }, "the 7 left and the session item");
    assert!(store.recent_messages(&o.user, &o.sid, 100).await.unwrap().is_empty());
    assert_eq!(store.turn_by_run(&o.user, &o.sid, &o.run).await.unwrap(), None);
    let again = store.delete_session(&o.user, &o.sid, None).await;
    assert!(matches!(again, Err(StoreError::NotFound)), "nothing under the key: {again:?}");
}

pub async fn tool_outputs_read_back_whole_and_a_later_one_replaces(store: &dyn SessionStore) {
    let o = open(store).await;
    let big: String = "é".repeat(400_000); // 800 000 bytes: three chunks.
    store.put_tool_output(&o.user, &o.sid, "call/1#x", &big).await.unwrap();
    assert_eq!(store.tool_output(&o.user, &o.sid, "call/1#x").await.unwrap().as_deref(), Some(big.as_str()));
    store.put_tool_output(&o.user, &o.sid, "call/1#x", "short").await.unwrap();
    assert_eq!(store.tool_output(&o.user, &o.sid, "call/1#x").await.unwrap().as_deref(), Some("short"));
    assert_eq!(store.tool_output(&o.user, &o.sid, "call/1").await.unwrap(), None, "ids do not overlap");
    let missing = store.put_tool_output(&o.user, &SessionId::new(), "c", "x").await;
    assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");
}

pub async fn a_large_message_reads_back_whole(store: &dyn SessionStore) {
    let o = open(store).await;
    let text = "x".repeat(700_000);
    let large = message(&o.sid, 2, &o.turn, Role::Tool, &text);
    store.append_messages(&o.user, &o.sid, &o.turn, std::slice::from_ref(&large)).await.unwrap();
    let back = store.messages_page(&o.user, &o.sid, MessagesFrom::After(1), 10).await.unwrap();
    assert_eq!((back.len(), back[0].id.clone()), (1, large.id.clone()));
    assert_eq!(back[0].content.as_deref().map(str::len), Some(700_000));
    // Its body chunks (3) are items of the session too.
    let done = store.delete_session(&o.user, &o.sid, None).await.unwrap();
    assert_eq!(done, DeleteProgress::Done { items_deleted: 7 }, "turn, 2 messages, 3 chunks, the session");
}

#[cfg(test)]
mod memory {
    crate::session_store_contract!(crate::session::store::MemoryStore::new());
}
