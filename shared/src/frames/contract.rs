//! The frame log's contract, written once and run against every
//! [`FrameLog`]: the in-memory twin in `cargo test -p shared --lib`, DynamoDB
//! Local in `tests/tests/contract_frames.rs`, so the two cannot drift.
//!
//! Each case is a `pub async fn` over a [`Subject`]: an empty log and a way
//! to set the session's lease fields (which the log reads but never writes).
//! The exported macro `frame_log_contract!` turns them into one
//! `#[tokio::test]` each, given a function that makes a fresh [`Subject`].

use super::{FrameBatch, FrameLog, MemoryFrameLog, StoredFrame, MAX_FRAME_ID};
use crate::ids::{SessionId, TurnId, UserId};
use crate::sse::{DoneReason, StreamEvent};
use crate::store::StoreError;
use std::sync::Arc;

/// The session item's lease fields, as the turn's lease writes them
/// (`lease_turn`, `lease_until`, `status`).
#[async_trait::async_trait]
pub trait Leases: Send + Sync {
    /// `turn` holds the lease until `until_ms`.
    async fn set(&self, user: &UserId, session: &SessionId, turn: &TurnId, until_ms: i64);
    /// The lease is released (the fields are removed).
    async fn release(&self, user: &UserId, session: &SessionId);
    /// The session is being deleted.
    async fn mark_deleting(&self, user: &UserId, session: &SessionId);
}

/// One implementation under test.
pub struct Subject {
    pub log: Arc<dyn FrameLog>,
    pub leases: Arc<dyn Leases>,
}

impl Subject {
    /// The in-memory twin.
    pub fn memory() -> Subject {
        let log = Arc::new(MemoryFrameLog::new());
        Subject { log: log.clone(), leases: log }
    }
}

#[async_trait::async_trait]
impl Leases for MemoryFrameLog {
    async fn set(&self, user: &UserId, session: &SessionId, turn: &TurnId, until_ms: i64) {
        self.set_lease(user, session, turn, until_ms);
    }
    async fn release(&self, user: &UserId, session: &SessionId) {
        self.release_lease(user, session);
    }
    async fn mark_deleting(&self, user: &UserId, session: &SessionId) {
        MemoryFrameLog::mark_deleting(self, user, session);
    }
}

/// The test bodies' vocabulary, also used by the frame logic's unit tests.
pub mod fixtures {
    use super::*;

    pub fn user(name: &str) -> UserId {
        UserId::parse(name).expect("a user id")
    }

    /// A fresh session (UUIDv7), so cases never share a partition.
    pub fn session() -> SessionId {
        SessionId::new()
    }

    /// The `n`th turn of a test: UUIDv7-shaped, and `turn(1) < turn(2)` as
    /// strings, as turns started one after the other are.
    pub fn turn(n: u32) -> TurnId {
        TurnId::parse(format!("0190f5c2-0000-7000-8000-{n:012}")).expect("a turn id")
    }

    pub fn text(id: u64) -> StoredFrame {
        StoredFrame { id, event: StreamEvent::TextDelta { content: format!("w{id} ") } }
    }

    pub fn done(id: u64, turn: &TurnId) -> StoredFrame {
        let event = StreamEvent::Done {
            reason: DoneReason::Complete,
            session_id: None,
            turn_id: turn.clone(),
            usage: None,
            replayed: false,
        };
        StoredFrame { id, event }
    }

    /// Text frames `first..=last`, written at `written_at`.
    pub fn batch(turn: &TurnId, first: u64, last: u64, written_at: i64) -> FrameBatch {
        FrameBatch { turn_id: turn.clone(), frames: (first..=last).map(text).collect(), written_at }
    }

    /// Text frames `first..last`, then `done` at `last`.
    pub fn last_batch(turn: &TurnId, first: u64, last: u64, written_at: i64) -> FrameBatch {
        let mut b = batch(turn, first, last - 1, written_at);
        b.frames.push(done(last, turn));
        b
    }

    pub fn first_ids(batches: &[FrameBatch]) -> Vec<u64> {
        batches.iter().map(FrameBatch::first_id).collect()
    }
}

use fixtures::*;

/// One `#[tokio::test]` per case, in a module `frame_log_contract`, each on
/// a fresh subject from `$subject` (an `async fn() -> Subject` in scope).
/// Spelled out case by case: the list is the suite's table of contents.
#[macro_export]
macro_rules! frame_log_contract {
    ($subject:path) => {
        mod frame_log_contract {
            #[allow(unused_imports)]
            use super::*;
            use $crate::frames::contract as case;

            #[tokio::test]
            async fn nothing_stored_reads_as_nothing() {
                case::nothing_stored_reads_as_nothing(&$subject().await).await
            }
            #[tokio::test]
            async fn a_batch_reads_back_as_written() {
                case::a_batch_reads_back_as_written(&$subject().await).await
            }
            #[tokio::test]
            async fn latest_reads_back_to_the_batch_holding_after_plus_one() {
                case::latest_reads_back_to_the_batch_holding_after_plus_one(&$subject().await).await
            }
            #[tokio::test]
            async fn the_latest_turn_is_the_newest_turn_id_not_the_last_write() {
                case::the_latest_turn_is_the_newest_turn_id_not_the_last_write(&$subject().await).await
            }
            #[tokio::test]
            async fn batches_sort_by_frame_id_whatever_its_digits() {
                case::batches_sort_by_frame_id_whatever_its_digits(&$subject().await).await
            }
            #[tokio::test]
            async fn batches_from_reads_one_turn_from_a_first_id() {
                case::batches_from_reads_one_turn_from_a_first_id(&$subject().await).await
            }
            #[tokio::test]
            async fn users_and_sessions_do_not_see_each_other() {
                case::users_and_sessions_do_not_see_each_other(&$subject().await).await
            }
            #[tokio::test]
            async fn a_put_with_the_same_key_replaces_the_batch() {
                case::a_put_with_the_same_key_replaces_the_batch(&$subject().await).await
            }
            #[tokio::test]
            async fn a_long_turn_reads_back_whole_across_pages() {
                case::a_long_turn_reads_back_whole_across_pages(&$subject().await).await
            }
            #[tokio::test]
            async fn the_lease_holder_is_the_live_lease_only() {
                case::the_lease_holder_is_the_live_lease_only(&$subject().await).await
            }
            #[tokio::test]
            async fn an_empty_batch_never_reads_back_as_a_batch() {
                case::an_empty_batch_never_reads_back_as_a_batch(&$subject().await).await
            }
        }
    };
}

pub async fn nothing_stored_reads_as_nothing(s: &Subject) {
    let (u, sid) = (user("alice"), session());
    assert_eq!(s.log.latest(&u, &sid, 0).await.unwrap(), None);
    assert_eq!(s.log.batches_from(&u, &sid, &turn(1), 1).await.unwrap(), vec![]);
    assert_eq!(s.log.lease_holder(&u, &sid).await.unwrap(), None, "no session item, no holder");
}

pub async fn a_batch_reads_back_as_written(s: &Subject) {
    let (u, sid, t) = (user("alice"), session(), turn(1));
    let b = batch(&t, 1, 3, 1_700_000_000_123);
    s.log.append(&u, &sid, &b).await.unwrap();
    let latest = s.log.latest(&u, &sid, 0).await.unwrap().expect("a turn");
    assert_eq!((latest.turn_id.clone(), latest.last_written_at, latest.done), (t.clone(), b.written_at, false));
    assert_eq!(latest.batches, vec![b.clone()], "frames, events and written_at as written");
    assert_eq!(s.log.batches_from(&u, &sid, &t, 1).await.unwrap(), vec![b]);
}

pub async fn latest_reads_back_to_the_batch_holding_after_plus_one(s: &Subject) {
    let (u, sid, t) = (user("alice"), session(), turn(1));
    for b in [batch(&t, 1, 3, 10), batch(&t, 4, 6, 20), last_batch(&t, 7, 8, 30)] {
        s.log.append(&u, &sid, &b).await.unwrap();
    }
    for (after, firsts) in [
        (0, vec![1, 4, 7]),
        (2, vec![1, 4, 7]),
        (3, vec![4, 7]),
        (4, vec![4, 7]),
        (6, vec![7]),
        // At or past the end the last batch still comes: it says whether
        // the turn is done and when it was written.
        (8, vec![7]),
        (MAX_FRAME_ID, vec![7]),
        (u64::MAX, vec![7]),
    ] {
        let latest = s.log.latest(&u, &sid, after).await.unwrap().expect("a turn");
        assert_eq!(first_ids(&latest.batches), firsts, "after {after}");
        assert_eq!((latest.done, latest.last_written_at), (true, 30), "after {after}");
    }
}

pub async fn the_latest_turn_is_the_newest_turn_id_not_the_last_write(s: &Subject) {
    let (u, sid, older, newer) = (user("alice"), session(), turn(1), turn(2));
    s.log.append(&u, &sid, &batch(&newer, 1, 2, 10)).await.unwrap();
    // A late batch of an earlier turn (a cut-off writer's) does not win.
    s.log.append(&u, &sid, &last_batch(&older, 5, 6, 20)).await.unwrap();
    let latest = s.log.latest(&u, &sid, 0).await.unwrap().expect("a turn");
    assert_eq!((latest.turn_id, latest.done, latest.last_written_at), (newer, false, 10));
    assert_eq!(first_ids(&latest.batches), vec![1], "none of the older turn's batches");
}

pub async fn batches_sort_by_frame_id_whatever_its_digits(s: &Subject) {
    let (u, sid, t) = (user("alice"), session(), turn(1));
    // Written out of order: 100 before 9 and 10 as strings, not as ids.
    for b in [batch(&t, 100, 100, 3), batch(&t, 10, 99, 2), batch(&t, 1, 9, 1)] {
        s.log.append(&u, &sid, &b).await.unwrap();
    }
    let top = batch(&t, MAX_FRAME_ID - 1, MAX_FRAME_ID, 4);
    s.log.append(&u, &sid, &top).await.unwrap();
    let all = s.log.latest(&u, &sid, 0).await.unwrap().expect("a turn");
    assert_eq!(first_ids(&all.batches), vec![1, 10, 100, MAX_FRAME_ID - 1]);
    let from = s.log.batches_from(&u, &sid, &t, 10).await.unwrap();
    assert_eq!(first_ids(&from), vec![10, 100, MAX_FRAME_ID - 1]);
    let at_end = s.log.batches_from(&u, &sid, &t, MAX_FRAME_ID - 1).await.unwrap();
    assert_eq!(at_end, vec![top], "the highest first id a batch can have is in range");
    assert_eq!(s.log.batches_from(&u, &sid, &t, MAX_FRAME_ID).await.unwrap(), vec![]);
}

pub async fn batches_from_reads_one_turn_from_a_first_id(s: &Subject) {
    let (u, sid, a, b) = (user("alice"), session(), turn(1), turn(2));
    for batch in [batch(&a, 1, 3, 1), last_batch(&a, 4, 5, 2), batch(&b, 1, 2, 3), batch(&b, 3, 4, 4)] {
        s.log.append(&u, &sid, &batch).await.unwrap();
    }
    assert_eq!(first_ids(&s.log.batches_from(&u, &sid, &a, 1).await.unwrap()), vec![1, 4], "an earlier turn");
    assert_eq!(first_ids(&s.log.batches_from(&u, &sid, &b, 1).await.unwrap()), vec![1, 3]);
    // By first id: a batch that starts before `from` is not read, even
    // when it holds `from` (the follower asks for the batch after its last).
    assert_eq!(first_ids(&s.log.batches_from(&u, &sid, &a, 2).await.unwrap()), vec![4]);
    assert_eq!(first_ids(&s.log.batches_from(&u, &sid, &a, 4).await.unwrap()), vec![4]);
    assert_eq!(s.log.batches_from(&u, &sid, &a, 6).await.unwrap(), vec![]);
    assert_eq!(s.log.batches_from(&u, &sid, &turn(3), 1).await.unwrap(), vec![], "a turn with nothing stored");
}

pub async fn users_and_sessions_do_not_see_each_other(s: &Subject) {
    let (alice, bob, sid, t) = (user("alice"), user("bob"), session(), turn(1));
    s.log.append(&alice, &sid, &batch(&t, 1, 2, 1)).await.unwrap();
    s.leases.set(&alice, &sid, &t, crate::now_ms() + 60_000).await;
    assert_eq!(s.log.latest(&bob, &sid, 0).await.unwrap(), None, "another user, the same session id");
    assert_eq!(s.log.batches_from(&bob, &sid, &t, 1).await.unwrap(), vec![]);
    assert_eq!(s.log.lease_holder(&bob, &sid).await.unwrap(), None);
    assert_eq!(s.log.latest(&alice, &session(), 0).await.unwrap(), None, "another session of the same user");
    assert!(s.log.latest(&alice, &sid, 0).await.unwrap().is_some());
}

pub async fn a_put_with_the_same_key_replaces_the_batch(s: &Subject) {
    let (u, sid, t) = (user("alice"), session(), turn(1));
    s.log.append(&u, &sid, &batch(&t, 1, 2, 1)).await.unwrap();
    let again = batch(&t, 1, 3, 2);
    s.log.append(&u, &sid, &again).await.unwrap();
    assert_eq!(s.log.batches_from(&u, &sid, &t, 1).await.unwrap(), vec![again.clone()]);
    assert_eq!(s.log.latest(&u, &sid, 0).await.unwrap().expect("a turn").batches, vec![again]);
}

pub async fn a_long_turn_reads_back_whole_across_pages(s: &Subject) {
    let (u, sid, t) = (user("alice"), session(), turn(1));
    s.log.append(&u, &sid, &batch(&turn(0), 1, 1, 1)).await.unwrap();
    // More batches than one page of DynamoDB's descending read holds.
    for id in 1..=60 {
        s.log.append(&u, &sid, &batch(&t, id, id, id as i64)).await.unwrap();
    }
    let all = s.log.latest(&u, &sid, 0).await.unwrap().expect("a turn");
    assert_eq!((all.turn_id.clone(), all.last_written_at), (t.clone(), 60));
    assert_eq!(first_ids(&all.batches), (1..=60).collect::<Vec<_>>(), "the turn's, not the earlier turn's");
    let rest = s.log.latest(&u, &sid, 30).await.unwrap().expect("a turn");
    assert_eq!(first_ids(&rest.batches), (31..=60).collect::<Vec<_>>());
    assert_eq!(s.log.batches_from(&u, &sid, &t, 1).await.unwrap().len(), 60);
}

pub async fn the_lease_holder_is_the_live_lease_only(s: &Subject) {
    let (u, sid, t) = (user("alice"), session(), turn(1));
    let now = crate::now_ms();
    s.leases.set(&u, &sid, &t, now + 60_000).await;
    assert_eq!(s.log.lease_holder(&u, &sid).await.unwrap(), Some(t.clone()), "a live lease");
    s.leases.set(&u, &sid, &t, now - 1_000).await;
    assert_eq!(s.log.lease_holder(&u, &sid).await.unwrap(), None, "an expired lease");
    s.leases.set(&u, &sid, &turn(2), now + 60_000).await;
    assert_eq!(s.log.lease_holder(&u, &sid).await.unwrap(), Some(turn(2)), "taken over by the next turn");
    s.leases.release(&u, &sid).await;
    assert_eq!(s.log.lease_holder(&u, &sid).await.unwrap(), None, "released");
    s.leases.set(&u, &sid, &t, now + 60_000).await;
    s.leases.mark_deleting(&u, &sid).await;
    assert_eq!(s.log.lease_holder(&u, &sid).await.unwrap(), None, "a session being deleted runs nothing");
}

pub async fn an_empty_batch_never_reads_back_as_a_batch(s: &Subject) {
    let (u, sid, t) = (user("alice"), session(), turn(1));
    let empty = FrameBatch { turn_id: t.clone(), frames: Vec::new(), written_at: 1 };
    // The writer never sends one; if one is stored, readers refuse it
    // rather than hand out a batch without a first frame.
    if s.log.append(&u, &sid, &empty).await.is_ok() {
        assert!(matches!(s.log.latest(&u, &sid, 0).await, Err(StoreError::Corrupt(_))));
        assert!(matches!(s.log.batches_from(&u, &sid, &t, 0).await, Err(StoreError::Corrupt(_))));
    }
}

#[cfg(test)]
mod memory {
    async fn subject() -> super::Subject {
        super::Subject::memory()
    }
    frame_log_contract!(subject);
}
