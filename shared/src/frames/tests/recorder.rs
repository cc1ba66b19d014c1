//! The recorder: what it writes, in which batches, and what a failed write
//! leaves behind.

use super::Faulty;
use crate::frames::contract::fixtures::{done, session, text, turn, user};
use crate::frames::{
    pack, unpack, FrameBatch, MemoryFrameLog, Recorder, StoredFrame, BATCH_BYTES, FLUSH_EVERY, FLUSH_FRAMES,
    FLUSH_PACKED_BYTES, SETTLE_WAIT,
};
use crate::ids::{SessionId, TurnId};
use crate::sse::{StreamEvent, Tee};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::time::{sleep, Instant};

fn send(r: &mut Recorder, frames: impl IntoIterator<Item = StoredFrame>) {
    for f in frames {
        r.frame(f.id, &f.event);
    }
}

fn ids(batch: &FrameBatch) -> Vec<u64> {
    batch.frames.iter().map(|f| f.id).collect()
}

fn sizes(batches: &[FrameBatch]) -> Vec<usize> {
    batches.iter().map(|b| b.frames.len()).collect()
}

/// A recorder on `log`, begun for a new session's turn 1.
fn begun(log: Arc<dyn crate::frames::FrameLog>) -> (Recorder, SessionId, TurnId) {
    let (sid, t) = (session(), turn(1));
    let mut r = Recorder::new(log, user("alice"));
    r.begin(&sid, &t, None);
    (r, sid, t)
}

#[tokio::test(start_paused = true)]
async fn frames_before_begin_are_held_then_written_with_the_first_batch() {
    let log = Arc::new(MemoryFrameLog::new());
    let (sid, t) = (session(), turn(1));
    let mut r = Recorder::new(log.clone(), user("alice"));
    send(&mut r, [text(1), text(2)]);
    assert!(!r.keeps(), "nothing is kept before the turn has begun");
    r.begin(&sid, &t, None);
    send(&mut r, [text(3), done(4, &t)]);
    r.settle().await;
    let stored = log.stored(&user("alice"), &sid);
    assert_eq!(stored.len(), 1, "one batch: {stored:?}");
    assert_eq!((ids(&stored[0]), stored[0].turn_id.clone()), (vec![1, 2, 3, 4], t));
    assert_eq!(stored[0].frames[0], text(1), "the held frame as it was sent");
    assert!(stored[0].ends_turn());
    assert!(r.keeps());
}

#[tokio::test(start_paused = true)]
async fn a_recorder_that_never_begins_writes_nothing() {
    let log = Arc::new(Faulty::new());
    let mut r = Recorder::new(log.clone(), user("alice"));
    send(&mut r, [text(1), done(2, &turn(1))]);
    sleep(FLUSH_EVERY * 10).await;
    r.settle().await;
    assert_eq!(log.appends_started(), 0, "a refused request or a retry stores no frame");
    assert!(!r.keeps());
}

/// A one-letter delta: frames that pack tightly, so that only the frame
/// count cuts their batches.
fn tiny(id: u64) -> StoredFrame {
    StoredFrame { id, event: StreamEvent::TextDelta { content: "x".into() } }
}

/// A delta of a few words no other frame repeats, as a model's are.
fn words(id: u64) -> StoredFrame {
    let content = format!(
        " {} {:x} {}",
        id * 7919 % 1000,
        id.wrapping_mul(0x9e37_79b9),
        "abcdefghij".repeat(1 + id as usize % 3)
    );
    StoredFrame { id, event: StreamEvent::TextDelta { content } }
}

#[test]
fn a_batch_packs_to_a_fraction_of_its_json_and_back() {
    let frames: Vec<StoredFrame> = (1..=40).map(words).chain([done(41, &turn(1))]).collect();
    let (json, packed) = (serde_json::to_vec(&frames).unwrap().len(), pack(&frames));
    assert!(packed.len() * 2 < json, "packed {} of {json} JSON bytes", packed.len());
    assert_eq!(unpack(&packed).unwrap(), frames);
    assert!(unpack(b"not deflate at all").is_err());
}

#[tokio::test(start_paused = true)]
async fn a_batch_is_written_once_it_fills_its_write_unit_not_later() {
    let log = Arc::new(MemoryFrameLog::new());
    let (mut r, sid, _) = begun(log.clone());
    send(&mut r, (1..=60).map(words));
    // Paused time: no flush timer can have fired; only the size cut these.
    tokio::task::yield_now().await;
    while log.stored(&user("alice"), &sid).is_empty() {
        tokio::task::yield_now().await;
    }
    r.settle().await;
    let stored = log.stored(&user("alice"), &sid);
    assert!(stored.len() >= 2, "60 frames of words fill more than one unit: {:?}", sizes(&stored));
    let (full, last) = stored.split_at(stored.len() - 1);
    for b in full {
        let packed = pack(&b.frames).len();
        // Cut within a probe (PROBE_EVERY JSON bytes, ~60 packed) of the mark.
        assert!((FLUSH_PACKED_BYTES..FLUSH_PACKED_BYTES + 120).contains(&packed), "a full batch packed to {packed}");
    }
    assert!(pack(&last[0].frames).len() < FLUSH_PACKED_BYTES + 120);
    let all: Vec<u64> = stored.iter().flat_map(ids).collect();
    assert_eq!(all, (1..=60).collect::<Vec<_>>(), "contiguous, in order, each frame once");
}

#[tokio::test(start_paused = true)]
async fn a_batch_holds_at_most_flush_frames() {
    let log = Arc::new(MemoryFrameLog::new());
    let (mut r, sid, _) = begun(log.clone());
    send(&mut r, (1..=150).map(tiny));
    r.settle().await;
    let stored = log.stored(&user("alice"), &sid);
    assert_eq!(sizes(&stored), vec![FLUSH_FRAMES, FLUSH_FRAMES, 150 - 2 * FLUSH_FRAMES]);
    let all: Vec<u64> = stored.iter().flat_map(ids).collect();
    assert_eq!(all, (1..=150).collect::<Vec<_>>(), "contiguous, in order, each frame once");
}

#[tokio::test(start_paused = true)]
async fn done_is_written_at_once_without_waiting_for_flush_every() {
    let log = Arc::new(MemoryFrameLog::new());
    let (mut r, sid, t) = begun(log.clone());
    let start = Instant::now();
    send(&mut r, [text(1), text(2), done(3, &t)]);
    // No settle: the writer alone must cut the batch at `done`.
    while log.stored(&user("alice"), &sid).is_empty() {
        assert!(start.elapsed() < FLUSH_EVERY, "the batch with done waited for the flush timer");
        sleep(FLUSH_EVERY / 10).await;
    }
    let stored = log.stored(&user("alice"), &sid);
    assert_eq!((sizes(&stored), stored[0].ends_turn()), (vec![3], true));
}

#[tokio::test(start_paused = true)]
async fn a_batch_is_written_flush_every_after_its_first_frame() {
    let log = Arc::new(MemoryFrameLog::new());
    let (mut r, sid, t) = begun(log.clone());
    send(&mut r, [text(1)]);
    sleep(FLUSH_EVERY / 2).await;
    send(&mut r, [text(2)]);
    sleep(FLUSH_EVERY / 2 + FLUSH_EVERY / 10).await;
    // Due FLUSH_EVERY after frame 1, not after frame 2.
    assert_eq!(sizes(&log.stored(&user("alice"), &sid)), vec![2], "frames 1 and 2 together, written on time");
    send(&mut r, [text(3), done(4, &t)]);
    r.settle().await;
    let stored = log.stored(&user("alice"), &sid);
    assert_eq!(stored.iter().map(ids).collect::<Vec<_>>(), vec![vec![1, 2], vec![3, 4]]);
}

#[tokio::test(start_paused = true)]
async fn one_write_in_flight_and_what_arrives_meanwhile_is_the_next_batch() {
    let log = Arc::new(Faulty::gated());
    let (mut r, sid, t) = begun(log.clone());
    send(&mut r, [text(1)]);
    log.until_appends_started(1).await;
    send(&mut r, (2..=5).map(text));
    sleep(FLUSH_EVERY * 4).await;
    assert_eq!(log.appends_started(), 1, "no second write while the first is in flight");
    send(&mut r, [done(6, &t)]);
    log.open(100);
    r.settle().await;
    assert_eq!(log.max_in_flight.load(Ordering::SeqCst), 1);
    let stored = log.inner.stored(&user("alice"), &sid);
    assert_eq!(stored.iter().map(ids).collect::<Vec<_>>(), vec![vec![1], vec![2, 3, 4, 5, 6]]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_ends_the_log_there_with_no_later_batch() {
    let log = Arc::new(Faulty::failing_from(2));
    let (mut r, sid, t) = begun(log.clone());
    send(&mut r, [text(1)]);
    sleep(FLUSH_EVERY * 2).await;
    assert!(r.keeps(), "the first write succeeded");
    send(&mut r, [text(2)]);
    log.until_appends_started(2).await;
    sleep(FLUSH_EVERY).await;
    assert!(!r.keeps(), "a failed write: the turn cannot be resumed past it");
    // The turn goes on; its frames are no longer written (a gap would
    // hand a follower frames out of order).
    send(&mut r, [text(3), done(4, &t)]);
    r.settle().await;
    assert_eq!(log.appends_started(), 2, "the writer stopped at the failure");
    let stored = log.inner.stored(&user("alice"), &sid);
    assert_eq!(stored.iter().map(ids).collect::<Vec<_>>(), vec![vec![1]]);
}

#[tokio::test(start_paused = true)]
async fn a_first_write_that_fails_keeps_nothing() {
    let log = Arc::new(Faulty::failing_from(1));
    let (mut r, sid, t) = begun(log.clone());
    assert!(r.keeps(), "healthy until a write fails");
    send(&mut r, [text(1), done(2, &t)]);
    r.settle().await;
    assert!(!r.keeps());
    assert_eq!(log.inner.stored(&user("alice"), &sid), vec![]);
}

fn big(id: u64, bytes: usize) -> StoredFrame {
    StoredFrame { id, event: StreamEvent::TextDelta { content: "x".repeat(bytes) } }
}

#[tokio::test(start_paused = true)]
async fn large_frames_split_batches_under_batch_bytes() {
    let log = Arc::new(MemoryFrameLog::new());
    let (mut r, sid, _) = begun(log.clone());
    send(&mut r, (1..=5).map(|id| big(id, BATCH_BYTES * 2 / 5)));
    r.settle().await;
    let stored = log.stored(&user("alice"), &sid);
    assert_eq!(sizes(&stored), vec![2, 2, 1], "two frames of 2/5 fit, three do not");
    for b in &stored {
        assert!(serde_json::to_string(&b.frames).unwrap().len() <= BATCH_BYTES);
    }
    assert!(r.keeps());
}

#[tokio::test(start_paused = true)]
async fn a_frame_larger_than_a_batch_ends_the_log_before_it() {
    let log = Arc::new(MemoryFrameLog::new());
    let (mut r, sid, t) = begun(log.clone());
    send(&mut r, [text(1), big(2, BATCH_BYTES + 1), text(3), done(4, &t)]);
    r.settle().await;
    assert!(!r.keeps());
    let stored = log.stored(&user("alice"), &sid);
    assert_eq!(stored.iter().map(ids).collect::<Vec<_>>(), vec![vec![1]], "what came before it, nothing after");
}

#[tokio::test(start_paused = true)]
async fn settle_gives_up_on_a_write_that_hangs_after_settle_wait() {
    let log = Arc::new(Faulty::gated());
    let (mut r, sid, t) = begun(log.clone());
    send(&mut r, [text(1), done(2, &t)]);
    let start = Instant::now();
    // Paused time: the wait is SETTLE_WAIT of the test's clock, not the machine's.
    tokio::time::timeout(SETTLE_WAIT * 2, r.settle()).await.expect("settle is bounded");
    assert!(start.elapsed() >= SETTLE_WAIT, "settle waited for the last batch first");
    assert_eq!((log.appends_started(), log.inner.stored(&user("alice"), &sid)), (1, vec![]));
}

#[tokio::test(start_paused = true)]
async fn settle_waits_for_the_last_batch() {
    let log = Arc::new(Faulty::gated());
    let (mut r, sid, t) = begun(log.clone());
    send(&mut r, [text(1), done(2, &t)]);
    log.until_appends_started(1).await;
    let opener = {
        let log = log.clone();
        tokio::spawn(async move {
            sleep(SETTLE_WAIT / 2).await;
            log.open(1);
        })
    };
    r.settle().await;
    assert_eq!(sizes(&log.inner.stored(&user("alice"), &sid)), vec![2], "stored when settle returned");
    opener.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_second_begin_does_not_move_the_frames_to_another_turn() {
    let log = Arc::new(MemoryFrameLog::new());
    let (mut r, sid, t) = begun(log.clone());
    send(&mut r, [text(1)]);
    r.begin(&session(), &turn(2), None);
    send(&mut r, [done(2, &t)]);
    r.settle().await;
    let stored = log.stored(&user("alice"), &sid);
    assert_eq!((sizes(&stored), stored[0].turn_id.clone()), (vec![2], t));
}
