//! Resumable turns (issue 19, item 1): the frame log in DynamoDB Local, read
//! back by `GET /sessions/{id}/stream` and by a retried `stream_run_id`, with
//! the real handler and a scripted model.

use http_body_util::BodyExt;
use serde_json::json;
use shared::edge::stream::{handle_stream, StreamApp};
use shared::frames::{DynamoFrameLog, FrameBatch, FrameLog, StoredFrame};
use shared::ids::{SessionId, TurnId, UserId};
use shared::session::store::{SessionLog, Sessions};
use shared::sse::{DoneReason, SseDecoder, SseFrame, StreamEvent};
use std::time::Duration;
use tests::{token, Reply, TestApp, Turn};

fn uid(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

fn words(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("w{i} ")).collect()
}

/// A model answering `n` words, `gap` apart.
fn paced(t: &TestApp, n: usize, gap: Duration) -> String {
    let w = words(n);
    t.llm.push(Reply::paced(&w.iter().map(String::as_str).collect::<Vec<_>>(), gap));
    w.concat()
}

/// `GET /sessions/{sid}/stream` on `app`, with `Last-Event-ID` and/or `?after=`.
async fn resume(app: &StreamApp, user: &str, sid: &str, last_id: Option<u64>, after: Option<u64>) -> Turn {
    let uri = match after {
        Some(a) => format!("/sessions/{sid}/stream?after={a}"),
        None => format!("/sessions/{sid}/stream"),
    };
    let mut b =
        http::Request::builder().method("GET").uri(uri).header("authorization", format!("Bearer {}", token(user)));
    if let Some(id) = last_id {
        b = b.header("last-event-id", id.to_string());
    }
    let req = b.body(lambda_http::Body::Empty).unwrap();
    Turn::read(handle_stream(app, lambda_http::Request::from(req)).await).await
}

/// Reads frames until `texts` text deltas have come (and the session is
/// known), then drops the body: the client is gone.
async fn read_then_drop(resp: http::Response<shared::edge::ResponseBody>, texts: usize) -> Vec<SseFrame> {
    let mut body = resp.into_body();
    let mut dec = SseDecoder::new();
    let mut frames: Vec<SseFrame> = Vec::new();
    let count = |fs: &[SseFrame]| fs.iter().filter(|f| f.event.as_deref() == Some("text_delta")).count();
    while count(&frames) < texts {
        let data = body.frame().await.expect("a frame").unwrap().into_data().unwrap();
        frames.extend(dec.feed(&data).unwrap());
    }
    drop(body);
    frames
}

fn id(f: &SseFrame) -> u64 {
    f.id.as_deref().expect("an id").parse().expect("a numeric id")
}

fn ids(frames: &[SseFrame]) -> Vec<u64> {
    frames.iter().map(id).collect()
}

fn events(frames: &[SseFrame]) -> Vec<StreamEvent> {
    frames.iter().map(|f| serde_json::from_str(&f.data).unwrap()).collect()
}

fn text(frames: &[SseFrame]) -> String {
    events(frames)
        .into_iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { content } => Some(content),
            _ => None,
        })
        .collect()
}

fn sid_of(frames: &[SseFrame]) -> String {
    events(frames)
        .into_iter()
        .find_map(|e| match e {
            StreamEvent::Session { session } => Some(session.id.to_string()),
            _ => None,
        })
        .expect("a session event")
}

fn frames_of(turn: &Turn) -> Vec<SseFrame> {
    turn.frames.iter().map(|(_, f)| f.clone()).collect()
}

fn reason(frames: &[SseFrame]) -> DoneReason {
    match events(frames).last() {
        Some(StreamEvent::Done { reason, .. }) => *reason,
        other => panic!("the last event is not done: {other:?}"),
    }
}

#[tokio::test]
async fn a_client_that_dropped_mid_turn_resumes_with_last_event_id() {
    let t = TestApp::new().await;
    let full = paced(&t, 30, Duration::from_millis(40));
    let resp = t.post(Some(&token("alice")), json!({"message": "count"}).to_string()).await;
    let first = read_then_drop(resp, 5).await;
    let (sid, last) = (sid_of(&first), id(first.last().unwrap()));
    let resumed = frames_of(&resume(&t.app, "alice", &sid, Some(last), None).await);
    assert_eq!(resumed.first().map(id), Some(last + 1), "resumed right after the last frame the client had");
    let whole: Vec<SseFrame> = first.iter().chain(&resumed).cloned().collect();
    assert_eq!(ids(&whole), (1..=whole.len() as u64).collect::<Vec<_>>(), "every frame once, in order");
    assert_eq!(text(&whole), full, "the whole answer, nothing repeated");
    assert_eq!(reason(&whole), DoneReason::Complete, "the turn went on without its client");
    // What an uninterrupted client saw is the turn's log: the same frames, byte for byte.
    let replay = frames_of(&resume(&t.app, "alice", &sid, None, Some(0)).await);
    assert_eq!(replay, whole);
    let log = t.store().recent_messages(&uid("alice"), &SessionId::parse(sid).unwrap(), 10).await.unwrap();
    assert_eq!(log[1].content.as_deref(), Some(full.as_str()));
    assert!(!log[1].stopped);
}

#[tokio::test]
async fn after_zero_replays_a_finished_turn_byte_for_byte_then_ends() {
    let t = TestApp::new().await;
    let full = paced(&t, 12, Duration::from_millis(5));
    let live = t.turn("alice", json!({"message": "count"})).await;
    let live = frames_of(&live);
    let replay = resume(&t.app, "alice", &sid_of(&live), None, Some(0)).await;
    assert_eq!(replay.status, 200);
    assert!(replay.content_type.starts_with("text/event-stream"));
    assert_eq!(frames_of(&replay), live, "the same ids, events and data as the live stream");
    assert_eq!(text(&live), full);
    // From the middle: exactly the rest.
    let rest = frames_of(&resume(&t.app, "alice", &sid_of(&live), Some(3), Some(0)).await);
    assert_eq!(rest, live[3..].to_vec(), "Last-Event-ID wins over ?after=");
}

#[tokio::test]
async fn nothing_to_resume_answers_204_and_another_users_or_a_missing_session_is_404() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["secret ", "answer"]));
    let live = frames_of(&t.turn("alice", json!({"message": "hi"})).await);
    let sid = sid_of(&live);
    // Another user, with every way in: nothing of alice's (a session of
    // someone else's is not there for bob: 404, as a missing one).
    for (last, after) in [(None, None), (None, Some(0)), (Some(1), None)] {
        let bob = resume(&t.app, "bob", &sid, last, after).await;
        assert_eq!((bob.status, bob.frames.len()), (404, 0), "bob {last:?} {after:?}");
    }
    // The client has everything already.
    let all = resume(&t.app, "alice", &sid, Some(id(live.last().unwrap())), None).await;
    assert_eq!(all.status, 204);
    // A session that does not exist: 404, like the other session routes
    // (schemathesis' stateful check: a deleted session was still 204).
    assert_eq!(resume(&t.app, "alice", &SessionId::new().to_string(), None, None).await.status, 404);
    // Alice herself, within the resume window: the whole turn.
    assert_eq!(frames_of(&resume(&t.app, "alice", &sid, None, Some(0)).await), live);
    // A bad id is refused, not guessed.
    let req = http::Request::builder()
        .method("GET")
        .uri(format!("/sessions/{sid}/stream"))
        .header("authorization", format!("Bearer {}", token("alice")))
        .header("last-event-id", "seven")
        .body(lambda_http::Body::Empty)
        .unwrap();
    let bad = Turn::read(handle_stream(&t.app, lambda_http::Request::from(req)).await).await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json.unwrap()["error"]["code"], json!("invalid_last_event_id"));
    // Deleted: gone from this route too, frames and all.
    let req = http::Request::builder()
        .method("DELETE")
        .uri(format!("/sessions/{sid}"))
        .header("authorization", format!("Bearer {}", token("alice")))
        .body(lambda_http::Body::Empty)
        .unwrap();
    let deleted = Turn::read(handle_stream(&t.app, lambda_http::Request::from(req)).await).await;
    assert_eq!(deleted.status, 204);
    let gone = resume(&t.app, "alice", &sid, None, Some(0)).await;
    assert_eq!((gone.status, gone.frames.len()), (404, 0));
}

#[tokio::test]
async fn an_idle_session_answers_204() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["first"]));
    let sid = sid_of(&frames_of(&t.turn("alice", json!({"message": "hi"})).await));
    let sid_id = SessionId::parse(sid.clone()).unwrap();
    // A later turn of this session that finished longer ago than the resume
    // window (stored as the writer would have, 61 s back).
    let log = DynamoFrameLog::new(t.dynamo.clone(), t.table.clone());
    let turn = TurnId::new();
    let done = StreamEvent::Done {
        reason: DoneReason::Complete,
        session_id: Some(sid_id.clone()),
        turn_id: turn.clone(),
        usage: None,
        replayed: false,
    };
    let frames = vec![
        StoredFrame { id: 1, event: shared::turn::thinking() },
        StoredFrame { id: 2, event: StreamEvent::TextDelta { content: "old".into() } },
        StoredFrame { id: 3, event: done },
    ];
    let written_at = shared::now_ms() - 61_000;
    log.append(&uid("alice"), &sid_id, &FrameBatch { turn_id: turn, frames, written_at }).await.unwrap();
    let idle = resume(&t.app, "alice", &sid, None, Some(0)).await;
    assert_eq!((idle.status, idle.frames.len()), (204, 0));
}

#[tokio::test]
async fn a_second_instance_serves_the_resume_while_the_first_runs_the_turn() {
    let t = TestApp::new().await;
    let full = paced(&t, 25, Duration::from_millis(40));
    let other = StreamApp::with_dynamo(t.app.deps.config.as_ref().clone(), t.dynamo.clone());
    let resp = t.post(Some(&token("alice")), json!({"message": "count"}).to_string()).await;
    let first = read_then_drop(resp, 3).await;
    let (sid, last) = (sid_of(&first), id(first.last().unwrap()));
    let resumed = resume(&other, "alice", &sid, Some(last), None).await;
    let resumed = frames_of(&resumed);
    assert!(resumed.len() > 10, "the rest came live from the other instance: {}", resumed.len());
    let whole: Vec<SseFrame> = first.into_iter().chain(resumed).collect();
    assert_eq!(ids(&whole), (1..=whole.len() as u64).collect::<Vec<_>>());
    assert_eq!(text(&whole), full);
    assert_eq!(reason(&whole), DoneReason::Complete);
}

#[tokio::test]
async fn a_retried_stream_run_id_follows_the_running_turn() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["first answer"]));
    let sid = sid_of(&frames_of(&t.turn("alice", json!({"message": "hello"})).await));
    let full = paced(&t, 40, Duration::from_millis(40));
    let body = json!({"message": "count", "session_id": sid, "stream_run_id": "r-1"});
    let live = tokio::spawn({
        let resp = t.post(Some(&token("alice")), body.to_string()).await;
        Turn::read(resp)
    });
    // The retry comes while the first request's turn is running, once its
    // start (the run id's claim) is stored: before, it is refused as busy.
    let run = shared::ids::RunId::parse("r-1").unwrap();
    for _ in 0..200 {
        if t.store().run_claim(&uid("alice"), &run).await.unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let session = t.store().session(&uid("alice"), &SessionId::parse(sid.clone()).unwrap()).await.unwrap();
    assert!(session.unwrap().lease.is_some(), "the first turn is still running");
    let retry = t.turn("alice", body).await;
    let live = live.await.unwrap();
    assert_eq!(retry.error_code(), None, "{:?}", retry.events);
    assert_eq!(retry.text(), full, "the whole answer, followed live");
    let (live_done, retry_done) = (live.done().clone(), retry.done().clone());
    match (live_done, retry_done) {
        (
            StreamEvent::Done { turn_id: a, reason: ra, replayed: false, .. },
            StreamEvent::Done { turn_id: b, reason: rb, replayed: true, .. },
        ) => assert_eq!((a, ra), (b, rb), "the first turn's done"),
        other => panic!("{other:?}"),
    }
    assert_eq!(t.llm.request_count(), 2, "the model ran once for this run id");
    // The same frames as the first request, id for id.
    let (a, b) = (frames_of(&live), frames_of(&retry));
    assert_eq!(ids(&a), ids(&b));
    assert_eq!(a[1..a.len() - 1], b[1..b.len() - 1], "everything between agent_state and done");
}

#[tokio::test]
async fn a_turn_cut_off_without_done_ends_with_error_then_done() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["first"]));
    let sid = sid_of(&frames_of(&t.turn("alice", json!({"message": "hi"})).await));
    let sid_id = SessionId::parse(sid.clone()).unwrap();
    // A turn whose invocation died after two frames: stored, no `done`, no lease.
    let log = DynamoFrameLog::new(t.dynamo.clone(), t.table.clone());
    let turn = TurnId::new();
    let frames = vec![
        StoredFrame { id: 1, event: shared::turn::thinking() },
        StoredFrame { id: 2, event: StreamEvent::TextDelta { content: "half".into() } },
    ];
    let batch = FrameBatch { turn_id: turn.clone(), frames, written_at: shared::now_ms() };
    log.append(&uid("alice"), &sid_id, &batch).await.unwrap();
    // It ends by itself, with `done` (Turn::read gives up after 30 s).
    let r = resume(&t.app, "alice", &sid, None, Some(0)).await;
    let f = frames_of(&r);
    assert_eq!(ids(&f), vec![1, 2, 3, 4]);
    assert_eq!(r.error_code().as_deref(), Some("stream_interrupted"));
    match r.done() {
        StreamEvent::Done { reason: DoneReason::Error, turn_id, session_id, .. } => {
            assert_eq!((turn_id, session_id.as_ref()), (&turn, Some(&sid_id)));
        }
        other => panic!("{other:?}"),
    }
}

/// Issue 25: the largest id a client can send (`u64::MAX`, as `Last-Event-ID`
/// and as `?after=`) has nothing after it: 204, on an idle session and while
/// a turn runs — before, `after + 1` panicked (debug) or wrapped to 0.
#[tokio::test]
async fn the_largest_last_event_id_answers_204_idle_and_while_a_turn_runs() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["first"]));
    let sid = sid_of(&frames_of(&t.turn("alice", json!({"message": "hi"})).await));
    for (last_id, after) in [(Some(u64::MAX), None), (None, Some(u64::MAX)), (Some(9_999_999_999), None)] {
        let idle = resume(&t.app, "alice", &sid, last_id, after).await;
        assert_eq!((idle.status, idle.frames.len()), (204, 0), "idle, {last_id:?} {after:?}");
    }
    let full = paced(&t, 40, Duration::from_millis(40));
    let resp = t.post(Some(&token("alice")), json!({"message": "count", "session_id": sid}).to_string()).await;
    let live = tokio::spawn(Turn::read(resp));
    for (last_id, after) in [(Some(u64::MAX), None), (None, Some(u64::MAX))] {
        let running = resume(&t.app, "alice", &sid, last_id, after).await;
        assert_eq!((running.status, running.frames.len()), (204, 0), "running, {last_id:?} {after:?}");
    }
    // The turn itself is untouched, and a real id still resumes it.
    let live = live.await.unwrap();
    assert_eq!(live.text(), full);
    let replay = resume(&t.app, "alice", &sid, Some(0), None).await;
    assert_eq!(replay.status, 200);
    assert_eq!(text(&frames_of(&replay)), full);
}
