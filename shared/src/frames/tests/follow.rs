//! Following the log: which turn `follow` and `follow_turn` offer, what a
//! follower hands out (catch-up, then live), and how every follow ends.

use super::{live_until, Faulty};
use crate::frames::contract::fixtures::{batch, last_batch, session, text, turn, user};
use crate::frames::follow::GRACE;
use crate::frames::{
    follow, follow_turn, FrameLog, MemoryFrameLog, Recorder, StoredFrame, MAX_FRAME_ID, RESUME_WINDOW,
};
use crate::ids::SessionId;
use crate::sse::{DoneReason, StreamEvent, Tee};
use futures::StreamExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{sleep, Instant};

/// Far enough for any follow here to end on its own.
fn later() -> Instant {
    Instant::now() + Duration::from_secs(600)
}

fn ids(frames: &[StoredFrame]) -> Vec<u64> {
    frames.iter().map(|f| f.id).collect()
}

fn range(first: u64, last: u64) -> Vec<u64> {
    (first..=last).collect()
}

fn done_reason(frames: &[StoredFrame]) -> Option<DoneReason> {
    match frames.last().map(|f| &f.event) {
        Some(StreamEvent::Done { reason, .. }) => Some(*reason),
        _ => None,
    }
}

fn error_code(frames: &[StoredFrame]) -> Option<(&str, bool)> {
    frames.iter().find_map(|f| match &f.event {
        StreamEvent::Error { code, retryable, .. } => Some((code.as_str(), *retryable)),
        _ => None,
    })
}

/// A session of alice's whose turn 1 stored frames 1..=6, `done` last.
async fn finished(log: &MemoryFrameLog, written_at: i64) -> SessionId {
    let (sid, t) = (session(), turn(1));
    log.append(&user("alice"), &sid, &batch(&t, 1, 3, written_at)).await.unwrap();
    log.append(&user("alice"), &sid, &last_batch(&t, 4, 6, written_at)).await.unwrap();
    sid
}

#[tokio::test(start_paused = true)]
async fn a_session_without_frames_or_lease_has_nothing_to_follow() {
    let log = Arc::new(MemoryFrameLog::new());
    assert!(follow(log.clone(), &user("alice"), &session(), 0, later()).await.unwrap().is_none());
    assert!(follow_turn(log, &user("alice"), &session(), &turn(1), 0, later()).await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn a_finished_turn_replays_from_after_and_ends_at_done() {
    let log = Arc::new(MemoryFrameLog::new());
    let sid = finished(&log, crate::now_ms()).await;
    for (after, want) in [(0, range(1, 6)), (2, range(3, 6)), (3, range(4, 6)), (5, vec![6])] {
        let f = follow(log.clone(), &user("alice"), &sid, after, later()).await.unwrap().expect("offered");
        assert_eq!(f.turn_id, turn(1));
        let frames: Vec<_> = f.frames.collect().await;
        assert_eq!(ids(&frames), want, "after {after}");
        assert_eq!(done_reason(&frames), Some(DoneReason::Complete), "the stored done, after {after}");
    }
}

/// A turn whose answer is stored (lease released) while its last batch is
/// still on its way: the replay starts once that batch is stored, whole —
/// never part of the answer first (the chat page empties the message it has
/// when a replay begins).
#[tokio::test(start_paused = true)]
async fn a_finished_turns_replay_waits_for_its_last_batch_and_comes_whole() {
    let log = Arc::new(MemoryFrameLog::new());
    let (sid, t) = (session(), turn(1));
    log.append(&user("alice"), &sid, &batch(&t, 1, 3, crate::now_ms())).await.unwrap();
    let landed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (writer, flag, s2, t2) = (log.clone(), landed.clone(), sid.clone(), t.clone());
    tokio::spawn(async move {
        sleep(Duration::from_millis(300)).await;
        flag.store(true, Ordering::SeqCst);
        writer.append(&user("alice"), &s2, &last_batch(&t2, 4, 6, crate::now_ms())).await.unwrap();
    });
    let f = follow(log.clone(), &user("alice"), &sid, 0, later()).await.unwrap().expect("offered");
    assert!(landed.load(Ordering::SeqCst), "the replay began before the turn's last batch was stored");
    let mut frames = f.frames;
    let mut got = Vec::new();
    while let Some(Some(frame)) = futures::FutureExt::now_or_never(frames.next()) {
        got.push(frame);
    }
    assert_eq!(ids(&got), range(1, 6), "every frame at once, done included");
}

#[tokio::test(start_paused = true)]
async fn nothing_after_the_end_of_a_finished_turn_is_offered() {
    let log = Arc::new(MemoryFrameLog::new());
    let sid = finished(&log, crate::now_ms()).await;
    for after in [6, 7, 1_000] {
        assert!(follow(log.clone(), &user("alice"), &sid, after, later()).await.unwrap().is_none(), "after {after}");
    }
    assert!(follow(log, &user("bob"), &sid, 0, later()).await.unwrap().is_none(), "not another user's");
}

#[tokio::test(start_paused = true)]
async fn after_at_or_past_max_frame_id_is_never_followed() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    log.append(&u, &sid, &batch(&t, 1, 2, crate::now_ms())).await.unwrap();
    log.set_lease(&u, &sid, &t, live_until());
    for after in [MAX_FRAME_ID, MAX_FRAME_ID + 1, u64::MAX] {
        assert!(follow(log.clone(), &u, &sid, after, later()).await.unwrap().is_none(), "after {after}");
        assert!(follow_turn(log.clone(), &u, &sid, &t, after, later()).await.unwrap().is_none(), "turn, {after}");
    }
    // Just below: offered, and numbering from it does not overflow.
    let f = follow(log, &u, &sid, MAX_FRAME_ID - 1, Instant::now() + Duration::from_secs(1)).await.unwrap();
    assert_eq!(f.expect("offered").frames.collect::<Vec<_>>().await, vec![]);
}

#[tokio::test(start_paused = true)]
async fn a_turn_finished_longer_than_resume_window_ago_is_only_offered_to_its_retry() {
    let log = Arc::new(MemoryFrameLog::new());
    let old = crate::now_ms() - RESUME_WINDOW.as_millis() as i64 - 1_000;
    let sid = finished(&log, old).await;
    assert!(follow(log.clone(), &user("alice"), &sid, 0, later()).await.unwrap().is_none());
    let retry = follow_turn(log, &user("alice"), &sid, &turn(1), 0, later()).await.unwrap().expect("still stored");
    assert_eq!(ids(&retry.frames.collect::<Vec<_>>().await), range(1, 6));
}

#[tokio::test(start_paused = true)]
async fn a_running_turn_is_caught_up_then_followed_live_to_done() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    log.append(&u, &sid, &batch(&t, 1, 3, crate::now_ms())).await.unwrap();
    log.set_lease(&u, &sid, &t, live_until());
    let writer = {
        let (log, u, sid, t) = (log.clone(), u.clone(), sid.clone(), t.clone());
        tokio::spawn(async move {
            sleep(Duration::from_millis(250)).await;
            log.append(&u, &sid, &batch(&t, 4, 5, crate::now_ms())).await.unwrap();
            sleep(Duration::from_millis(250)).await;
            log.release_lease(&u, &sid);
            log.append(&u, &sid, &last_batch(&t, 6, 7, crate::now_ms())).await.unwrap();
        })
    };
    let f = follow(log.clone(), &u, &sid, 2, later()).await.unwrap().expect("running");
    let mut frames = f.frames;
    assert_eq!(frames.next().await.map(|f| f.id), Some(3), "the stored frame first");
    let rest: Vec<_> = frames.collect().await;
    assert_eq!(ids(&rest), range(4, 7), "then each frame as it is stored, once");
    assert_eq!(done_reason(&rest), Some(DoneReason::Complete));
    writer.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_running_turn_wins_over_an_earlier_stored_one_even_before_its_first_batch() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid) = (user("alice"), session());
    log.append(&u, &sid, &last_batch(&turn(1), 1, 4, crate::now_ms())).await.unwrap();
    log.set_lease(&u, &sid, &turn(2), live_until());
    let f = follow(log.clone(), &u, &sid, 0, later()).await.unwrap().expect("the running turn");
    assert_eq!(f.turn_id, turn(2), "not the finished turn 1");
    log.append(&u, &sid, &last_batch(&turn(2), 1, 2, crate::now_ms())).await.unwrap();
    let frames: Vec<_> = f.frames.collect().await;
    assert_eq!(ids(&frames), range(1, 2));
    assert!(matches!(&frames[1].event, StreamEvent::Done { turn_id, .. } if *turn_id == turn(2)));
}

#[tokio::test(start_paused = true)]
async fn a_follower_stays_on_its_turn_when_a_later_turn_starts() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid) = (user("alice"), session());
    log.append(&u, &sid, &batch(&turn(1), 1, 2, crate::now_ms())).await.unwrap();
    log.set_lease(&u, &sid, &turn(1), live_until());
    let f = follow(log.clone(), &u, &sid, 0, later()).await.unwrap().expect("running");
    // Turn 1 lost its lease to turn 2, whose frames land first; turn 1's
    // done lands within the grace.
    log.set_lease(&u, &sid, &turn(2), live_until());
    log.append(&u, &sid, &batch(&turn(2), 1, 5, crate::now_ms())).await.unwrap();
    let late = {
        let (log, u, sid) = (log.clone(), u.clone(), sid.clone());
        tokio::spawn(async move {
            sleep(GRACE / 2).await;
            log.append(&u, &sid, &last_batch(&turn(1), 3, 4, crate::now_ms())).await.unwrap();
        })
    };
    let frames: Vec<_> = f.frames.collect().await;
    assert_eq!(ids(&frames), range(1, 4), "turn 1's frames only");
    assert_eq!(done_reason(&frames), Some(DoneReason::Complete));
    late.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_turn_that_ends_without_done_closes_with_stream_interrupted_after_grace() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    log.append(&u, &sid, &batch(&t, 1, 2, crate::now_ms())).await.unwrap();
    log.set_lease(&u, &sid, &t, live_until());
    let f = follow(log.clone(), &u, &sid, 0, later()).await.unwrap().expect("running");
    let mut frames = f.frames;
    assert_eq!(frames.next().await.map(|f| f.id), Some(1));
    assert_eq!(frames.next().await.map(|f| f.id), Some(2));
    // The invocation dies: its lease is gone, its done never stored.
    log.release_lease(&u, &sid);
    let gone = Instant::now();
    let rest: Vec<_> = frames.collect().await;
    assert!(gone.elapsed() >= GRACE, "the last batch had its grace to land");
    assert_eq!(ids(&rest), vec![3, 4], "numbered after the last stored frame");
    assert_eq!(error_code(&rest), Some(("stream_interrupted", false)));
    let StreamEvent::Done { reason, session_id, turn_id, .. } = &rest[1].event else { panic!("done last: {rest:?}") };
    assert_eq!((*reason, session_id.clone(), turn_id.clone()), (DoneReason::Error, Some(sid), t));
}

#[tokio::test(start_paused = true)]
async fn a_done_that_lands_within_grace_ends_the_follow_normally() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    log.append(&u, &sid, &batch(&t, 1, 2, crate::now_ms())).await.unwrap();
    // The turn released its lease before storing done (as turns do).
    let f = follow(log.clone(), &u, &sid, 0, later()).await.unwrap().expect("written just now");
    let late = {
        let (log, u, sid, t) = (log.clone(), u.clone(), sid.clone(), t.clone());
        tokio::spawn(async move {
            sleep(GRACE - Duration::from_millis(500)).await;
            log.append(&u, &sid, &last_batch(&t, 3, 3, crate::now_ms())).await.unwrap();
        })
    };
    let frames: Vec<_> = f.frames.collect().await;
    assert_eq!((ids(&frames), error_code(&frames)), (range(1, 3), None));
    assert_eq!(done_reason(&frames), Some(DoneReason::Complete));
    late.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_turn_cut_off_long_ago_is_not_offered() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    let old = crate::now_ms() - RESUME_WINDOW.as_millis() as i64 - 1_000;
    log.append(&u, &sid, &batch(&t, 1, 2, old)).await.unwrap();
    assert!(follow(log.clone(), &u, &sid, 0, later()).await.unwrap().is_none(), "no done, no lease, long ago");
    // Still holding the lease (a long turn between writes): offered.
    log.set_lease(&u, &sid, &t, live_until());
    assert!(follow(log, &u, &sid, 0, later()).await.unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_follow_ends_at_until_without_done() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    log.append(&u, &sid, &batch(&t, 1, 2, crate::now_ms())).await.unwrap();
    log.set_lease(&u, &sid, &t, live_until());
    let until = Instant::now() + Duration::from_secs(2);
    let frames: Vec<_> = follow(log, &u, &sid, 0, until).await.unwrap().expect("running").frames.collect().await;
    assert_eq!((ids(&frames), done_reason(&frames)), (range(1, 2), None), "the client comes back with its last id");
    assert!(Instant::now() >= until);
}

#[tokio::test(start_paused = true)]
async fn reads_that_keep_failing_end_with_store_unavailable() {
    let log = Arc::new(Faulty::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    log.inner.append(&u, &sid, &batch(&t, 1, 2, crate::now_ms())).await.unwrap();
    log.inner.set_lease(&u, &sid, &t, live_until());
    log.failing_reads.store(u32::MAX, Ordering::SeqCst);
    let frames: Vec<_> = follow(log, &u, &sid, 0, later()).await.unwrap().expect("running").frames.collect().await;
    assert_eq!(ids(&frames), range(1, 4));
    assert_eq!(error_code(&frames), Some(("store_unavailable", true)), "worth trying again");
    assert_eq!(done_reason(&frames), Some(DoneReason::Error));
}

#[tokio::test(start_paused = true)]
async fn a_few_failed_reads_lose_nothing() {
    let log = Arc::new(Faulty::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    log.inner.append(&u, &sid, &batch(&t, 1, 2, crate::now_ms())).await.unwrap();
    log.inner.set_lease(&u, &sid, &t, live_until());
    let f = follow(log.clone(), &u, &sid, 0, later()).await.unwrap().expect("running");
    // One read short of giving up, while the rest of the turn is stored.
    log.failing_reads.store(4, Ordering::SeqCst);
    log.inner.append(&u, &sid, &last_batch(&t, 3, 4, crate::now_ms())).await.unwrap();
    let frames: Vec<_> = f.frames.collect().await;
    assert_eq!((ids(&frames), error_code(&frames)), (range(1, 4), None));
    assert_eq!(log.failing_reads.load(Ordering::SeqCst), 0, "the failures were met");
}

#[tokio::test(start_paused = true)]
async fn a_gap_in_the_log_is_never_handed_out() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    // Frames 3 and 4 never stored (cannot happen with one writer per turn).
    log.append(&u, &sid, &batch(&t, 1, 2, crate::now_ms())).await.unwrap();
    log.append(&u, &sid, &last_batch(&t, 5, 6, crate::now_ms())).await.unwrap();
    let retry = follow_turn(log, &u, &sid, &t, 0, later()).await.unwrap().expect("stored");
    let frames: Vec<_> = retry.frames.collect().await;
    assert_eq!(ids(&frames), range(1, 4), "1 and 2, then the end numbered 3 and 4; never 5 and 6");
    assert_eq!(error_code(&frames), Some(("stream_interrupted", false)));
}

#[tokio::test(start_paused = true)]
async fn follow_turn_follows_its_turn_not_the_latest() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid) = (user("alice"), session());
    log.append(&u, &sid, &last_batch(&turn(1), 1, 5, crate::now_ms())).await.unwrap();
    log.append(&u, &sid, &last_batch(&turn(2), 1, 3, crate::now_ms())).await.unwrap();
    let f = follow_turn(log.clone(), &u, &sid, &turn(1), 3, later()).await.unwrap().expect("stored");
    assert_eq!(f.turn_id, turn(1));
    assert_eq!(ids(&f.frames.collect::<Vec<_>>().await), range(4, 5));
    assert!(follow_turn(log, &u, &sid, &turn(3), 0, later()).await.unwrap().is_none(), "never stored, not running");
}

#[tokio::test(start_paused = true)]
async fn follow_turn_of_the_lease_holder_waits_for_its_first_batch() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    log.set_lease(&u, &sid, &t, live_until());
    let f = follow_turn(log.clone(), &u, &sid, &t, 0, later()).await.unwrap().expect("running");
    log.append(&u, &sid, &last_batch(&t, 1, 3, crate::now_ms())).await.unwrap();
    assert_eq!(ids(&f.frames.collect::<Vec<_>>().await), range(1, 3));
}

#[tokio::test(start_paused = true)]
async fn a_follower_reads_what_the_recorder_writes_id_for_id() {
    let log = Arc::new(MemoryFrameLog::new());
    let (u, sid, t) = (user("alice"), session(), turn(1));
    log.set_lease(&u, &sid, &t, live_until());
    let sent: Vec<StoredFrame> =
        (1..=100).map(text).chain([crate::frames::contract::fixtures::done(101, &t)]).collect();
    let turn_task = {
        let (log, sid, t, sent) = (log.clone(), sid.clone(), t.clone(), sent.clone());
        tokio::spawn(async move {
            let mut r = Recorder::new(log, user("alice"));
            r.begin(&sid, &t, None);
            for f in sent {
                r.frame(f.id, &f.event);
                sleep(Duration::from_millis(7)).await;
            }
            r.settle().await;
        })
    };
    let f = follow(log.clone(), &u, &sid, 0, later()).await.unwrap().expect("running");
    assert_eq!(f.frames.collect::<Vec<_>>().await, sent);
    turn_task.await.unwrap();
}
