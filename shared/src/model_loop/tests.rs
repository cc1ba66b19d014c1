//! The loop against a scripted model and fake tool layers: no DynamoDB, no
//! HTTP. Time is tokio's paused clock wherever a test waits on it.

use super::*;
use crate::ids::{SessionId, TurnId, UserId};
use crate::llm::{ChatRequest, LlmEvent, LlmStream};
use crate::message::FunctionCall;
use crate::plan::ToolOrigin as Origin;
use crate::session::ContextType;
use crate::sse::{SseBody, SseDecoder};
use futures::stream;
use futures::StreamExt;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One scripted model answer.
enum Reply {
    /// These events, then the end of the stream.
    Events(Vec<Result<LlmEvent, LlmError>>),
    /// These events, then nothing ever again.
    Hang(Vec<LlmEvent>),
    /// The request itself fails.
    Refuse(LlmError),
}

fn text(t: &str) -> Reply {
    Reply::Events(vec![Ok(LlmEvent::TextDelta(t.into()))])
}

/// An answer that calls tools: `(id, name, arguments)`.
fn calls(calls: &[(&str, &str, &str)]) -> Reply {
    Reply::Events(
        calls
            .iter()
            .enumerate()
            .map(|(i, (id, name, args))| {
                Ok(LlmEvent::ToolCallDelta {
                    index: i as u32,
                    id: Some(id.to_string()),
                    name: Some(name.to_string()),
                    arguments: args.to_string(),
                })
            })
            .collect(),
    )
}

/// A model that answers from a script, in order, and keeps what it was asked.
#[derive(Default)]
struct Scripted {
    replies: Mutex<VecDeque<Reply>>,
    asked: Mutex<Vec<ChatRequest>>,
}

impl Scripted {
    fn new(replies: Vec<Reply>) -> Scripted {
        Scripted { replies: Mutex::new(replies.into()), asked: Mutex::default() }
    }

    fn asked(&self) -> Vec<ChatRequest> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Llm for Scripted {
    async fn stream_chat(&self, req: ChatRequest) -> Result<LlmStream, LlmError> {
        self.asked.lock().unwrap().push(req);
        let reply = self.replies.lock().unwrap().pop_front().expect("the script has an answer for this request");
        match reply {
            Reply::Events(evs) => Ok(stream::iter(evs).boxed()),
            Reply::Hang(evs) => Ok(stream::iter(evs.into_iter().map(Ok)).chain(stream::pending()).boxed()),
            Reply::Refuse(e) => Err(e),
        }
    }
}

/// What a fake tool does when called.
#[derive(Clone)]
enum Act {
    /// Answers `{"ok":true,"echo":<args>}`.
    Echo,
    /// Sleeps this long (tokio time), then echoes.
    Slow(u64),
    /// Cancels the token, then sleeps this long and echoes.
    CancelThenSleep(CancellationToken, u64),
    Panic,
    /// Answers this content, with this event.
    Content(String, Option<StreamEvent>),
}

/// A layer of fake tools; records calls and the most running at once.
#[derive(Default)]
struct Fakes {
    acts: HashMap<String, Act>,
    ran: Mutex<Vec<String>>,
    running: AtomicUsize,
    most: AtomicUsize,
    question: Option<String>,
}

impl Fakes {
    fn with(acts: &[(&str, Act)]) -> Fakes {
        Fakes { acts: acts.iter().map(|(n, a)| (n.to_string(), a.clone())).collect(), ..Fakes::default() }
    }

    fn ran(&self) -> Vec<String> {
        self.ran.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl TurnTools for Fakes {
    fn offered(&self, _: &TurnScope) -> Vec<serde_json::Value> {
        let mut names: Vec<_> = self.acts.keys().cloned().collect();
        names.sort();
        names.iter().map(|n| serde_json::json!({"type": "function", "function": {"name": n}})).collect()
    }

    async fn run(&self, _: &UserId, _: &TurnScope, call: &ToolCall) -> ToolRun {
        self.ran.lock().unwrap().push(call.id.clone());
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let act = self.acts.get(&call.function.name).cloned().unwrap_or(Act::Echo);
        let echo = || ToolRun {
            ok: true,
            content: serde_json::json!({"ok": true, "echo": call.function.arguments}).to_string(),
            preview: format!("ran {}", call.id),
            events: vec![],
        };
        let run = match act {
            Act::Echo => echo(),
            Act::Slow(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                echo()
            }
            Act::CancelThenSleep(token, ms) => {
                token.cancel();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                echo()
            }
            Act::Panic => panic!("a tool bug"),
            Act::Content(content, event) => {
                ToolRun { ok: true, content, preview: "content".into(), events: event.into_iter().collect() }
            }
        };
        self.running.fetch_sub(1, Ordering::SeqCst);
        run
    }

    fn asked_user(&self) -> Option<String> {
        self.question.clone()
    }
}

/// Outputs kept apart, in memory.
#[derive(Default)]
struct Outputs(Mutex<HashMap<String, String>>);

#[async_trait::async_trait]
impl ToolOutputs for Outputs {
    async fn put_tool_output(&self, _: &UserId, _: &SessionId, id: &str, content: &str) -> Result<(), StoreError> {
        self.0.lock().unwrap().insert(id.into(), content.into());
        Ok(())
    }

    async fn tool_output(&self, _: &UserId, _: &SessionId, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.0.lock().unwrap().get(id).cloned())
    }
}

/// Counts every request as 1 + 1 tokens; records calibrations.
#[derive(Default)]
struct Count(Mutex<Vec<u64>>);

impl Counting for Count {
    fn estimate(&self, _: &[ChatMessage], _: &str, _: bool) -> Usage {
        Usage { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
    }

    fn calibrate(&self, prompt_tokens: u64) {
        self.0.lock().unwrap().push(prompt_tokens);
    }
}

/// The rounds a loop stored; `fail_*` makes a write fail.
#[derive(Default)]
struct Log {
    ready: usize,
    rounds: Vec<Vec<StoredMessage>>,
    fail_ready: bool,
    fail_round: bool,
}

#[async_trait::async_trait]
impl RoundLog for Log {
    async fn ready(&mut self) -> Result<(), StoreError> {
        self.ready += 1;
        if self.fail_ready {
            return Err(StoreError::Backend("down".into()));
        }
        Ok(())
    }

    async fn store_round(&mut self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        if self.fail_round {
            return Err(StoreError::Backend("down".into()));
        }
        self.rounds.push(messages.to_vec());
        Ok(())
    }
}

/// What a loop runs on, owned.
struct Fixture {
    llm: Scripted,
    outputs: Outputs,
    count: Count,
    user: UserId,
    sid: SessionId,
    turn_id: TurnId,
    scope: TurnScope,
    stopped: CancellationToken,
    lease_lost: CancellationToken,
    max_rounds: usize,
    cap: usize,
    inline_bytes: usize,
    stop_in: Duration,
}

impl Fixture {
    fn new(replies: Vec<Reply>) -> Fixture {
        Fixture {
            llm: Scripted::new(replies),
            outputs: Outputs::default(),
            count: Count::default(),
            user: UserId::parse("user-1").unwrap(),
            sid: SessionId::new(),
            turn_id: TurnId::new(),
            scope: TurnScope { context_type: ContextType::Global, entity_id: None, focus: None, timezone: None },
            stopped: CancellationToken::new(),
            lease_lost: CancellationToken::new(),
            max_rounds: 5,
            cap: 4,
            inline_bytes: 16_384,
            stop_in: Duration::from_secs(3600),
        }
    }

    fn env(&self) -> LoopEnv<'_> {
        let stop_at = Instant::now() + self.stop_in;
        LoopEnv {
            llm: &self.llm,
            outputs: &self.outputs,
            settings: Settings { model: "m", max_tokens: None, inline_bytes: self.inline_bytes },
            user: &self.user,
            sid: &self.sid,
            turn_id: &self.turn_id,
            scope: &self.scope,
            limits: Limits {
                max_rounds: self.max_rounds,
                tool_concurrency: self.cap,
                stop_at,
                hard_stop: stop_at + self.stop_in / 2,
            },
            interrupts: Interrupts {
                stopped: &self.stopped,
                lease_lost: &self.lease_lost,
                tokens: None,
                admission: None,
            },
            counting: &self.count,
        }
    }
}

/// Reads a body to its end, as events.
async fn read_all(mut body: SseBody) -> Vec<StreamEvent> {
    use http_body_util::BodyExt;
    let (mut dec, mut out) = (SseDecoder::new(), vec![]);
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else { continue };
        for f in dec.feed(&data).unwrap() {
            out.push(serde_json::from_str(&f.data).unwrap());
        }
    }
    out
}

/// Runs a loop with `tools` on `messages`, reading its stream as it goes.
async fn run(
    fx: &Fixture,
    tools: Option<&dyn TurnTools>,
    gate: Option<&dyn ApprovalGate>,
    log: &mut Log,
) -> (Result<LoopEnd, LoopAbort>, Vec<StreamEvent>) {
    let (mut sink, body) = EventSink::channel();
    let reader = tokio::spawn(read_all(body));
    let offered = tools.map(|t| t.offered(&fx.scope)).unwrap_or_default();
    let mut lp = ModelLoop::new(fx.env(), tools, Origin::Planner);
    lp.approvals = gate;
    lp.next_seq = 10;
    let end = lp.run(vec![ChatMessage::user("hi")], &offered, log, &mut sink).await;
    drop(sink);
    (end, reader.await.unwrap())
}

fn call_ids(events: &[StreamEvent], tool_results: bool) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCall { tool_call, .. } if !tool_results => Some(tool_call.id.clone()),
            StreamEvent::ToolResult { tool_call_id, .. } if tool_results => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect()
}

fn content(m: &StoredMessage) -> serde_json::Value {
    serde_json::from_str(m.content.as_deref().unwrap_or("null")).unwrap_or_default()
}

#[tokio::test]
async fn a_plain_answer_ends_the_loop_after_one_request() {
    let fx = Fixture::new(vec![text("hello there")]);
    let mut log = Log::default();
    let (end, events) = run(&fx, None, None, &mut log).await;
    let end = end.unwrap();
    assert_eq!(end.outcome, Outcome::Complete);
    assert_eq!(end.unsaved.len(), 1);
    assert_eq!(end.unsaved[0].content.as_deref(), Some("hello there"));
    assert_eq!(end.unsaved[0].seq, 10);
    assert_eq!((log.ready, log.rounds.len()), (1, 0));
    assert!(events.iter().any(|e| matches!(e, StreamEvent::TextDelta { content } if content == "hello there")));
    assert!(fx.llm.asked()[0].tools.is_empty(), "no tools: none offered");
}

#[tokio::test]
async fn a_tool_round_is_stored_before_the_model_is_asked_again() {
    let fx = Fixture::new(vec![calls(&[("c1", "echo", r#"{"x":1}"#)]), text("done")]);
    let tools = Fakes::with(&[("echo", Act::Echo)]);
    let mut log = Log::default();
    let (end, events) = run(&fx, Some(&tools), None, &mut log).await;
    let end = end.unwrap();
    assert_eq!(tools.ran(), ["c1"]);
    assert_eq!(log.rounds.len(), 1);
    let round = &log.rounds[0];
    assert_eq!((round[0].role, round[1].role), (Role::Assistant, Role::Tool));
    assert_eq!((round[0].seq, round[1].seq), (10, 11));
    assert_eq!(round[1].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(content(&round[1])["echo"], r#"{"x":1}"#);
    let asked = fx.llm.asked();
    assert_eq!(asked.len(), 2);
    let second = &asked[1].messages;
    assert_eq!(second.last().unwrap().tool_call_id.as_deref(), Some("c1"), "the result is in the next request");
    assert_eq!(end.unsaved[0].content.as_deref(), Some("done"));
    assert_eq!(end.unsaved[0].seq, 12);
    let order: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCall { .. } => Some("call"),
            StreamEvent::ToolResult { .. } => Some("result"),
            StreamEvent::TextDelta { .. } => Some("text"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["call", "result", "text"]);
}

#[tokio::test]
async fn several_rounds_each_stored_then_words() {
    let fx = Fixture::new(vec![
        calls(&[("a", "echo", "{}")]),
        calls(&[("b", "echo", "{}")]),
        calls(&[("c", "echo", "{}")]),
        text("finally"),
    ]);
    let tools = Fakes::with(&[("echo", Act::Echo)]);
    let mut log = Log::default();
    let (end, _) = run(&fx, Some(&tools), None, &mut log).await;
    assert_eq!(end.unwrap().outcome, Outcome::Complete);
    assert_eq!(tools.ran(), ["a", "b", "c"]);
    assert_eq!(log.rounds.len(), 3);
    assert_eq!(fx.llm.asked().len(), 4);
    assert_eq!(fx.llm.asked()[3].messages.len(), 1 + 3 * 2, "every round's call and result is sent");
}

#[tokio::test]
async fn the_round_after_the_last_offers_no_tools_and_runs_no_call() {
    let mut fx =
        Fixture::new(vec![calls(&[("a", "echo", "{}")]), calls(&[("b", "echo", "{}")]), calls(&[("c", "echo", "{}")])]);
    fx.max_rounds = 2;
    let tools = Fakes::with(&[("echo", Act::Echo)]);
    let mut log = Log::default();
    let (end, _) = run(&fx, Some(&tools), None, &mut log).await;
    let end = end.unwrap();
    let asked = fx.llm.asked();
    assert_eq!(asked.len(), 3);
    assert!(!asked[0].tools.is_empty() && !asked[1].tools.is_empty());
    assert!(asked[2].tools.is_empty(), "the last request offers no tools");
    assert_eq!(tools.ran(), ["a", "b"], "a call in the last answer does not run");
    assert_eq!(end.outcome, Outcome::Complete);
    let result = &end.unsaved[1];
    assert_eq!(result.tool_call_id.as_deref(), Some("c"));
    assert!(content(result)["error"].as_str().unwrap().contains("no more tool rounds"), "{result:?}");
}

#[tokio::test(start_paused = true)]
async fn a_rounds_calls_run_concurrently_under_the_cap_and_keep_call_order() {
    let mut fx = Fixture::new(vec![
        calls(&[
            ("a", "slow", r#"{"n": 1}"#),
            ("b", "slow", r#"{"n": 2}"#),
            ("c", "fast", "{}"),
            ("d", "slow", r#"{"n": 3}"#),
            ("e", "slow", r#"{"n": 4}"#),
        ]),
        text("ok"),
    ]);
    fx.cap = 2;
    let tools = Fakes::with(&[("slow", Act::Slow(50)), ("fast", Act::Slow(1))]);
    let mut log = Log::default();
    let (end, events) = run(&fx, Some(&tools), None, &mut log).await;
    end.unwrap();
    assert_eq!(tools.most.load(Ordering::SeqCst), 2, "two at once, never more");
    assert_eq!(tools.ran().len(), 5);
    let results: Vec<_> = log.rounds[0][1..].iter().map(|m| m.tool_call_id.clone().unwrap()).collect();
    assert_eq!(results, ["a", "b", "c", "d", "e"]);
    assert_eq!(call_ids(&events, true), ["a", "b", "c", "d", "e"], "results go out in call order");
}

#[tokio::test(start_paused = true)]
async fn stop_mid_round_awaits_the_started_call_and_starts_no_other() {
    let mut fx = Fixture::new(vec![calls(&[("a", "first", "{}"), ("b", "echo", "{}")])]);
    fx.cap = 1;
    let tools = Fakes::with(&[("first", Act::CancelThenSleep(fx.stopped.clone(), 1_000)), ("echo", Act::Echo)]);
    let mut log = Log::default();
    let (end, _) = run(&fx, Some(&tools), None, &mut log).await;
    let end = end.unwrap();
    assert_eq!(end.outcome, Outcome::Stopped);
    assert_eq!(tools.ran(), ["a"], "nothing starts after Stop");
    assert_eq!(content(&end.unsaved[1])["ok"], true, "the started call's real result is kept");
    let not_run = content(&end.unsaved[2])["error"].as_str().unwrap().to_string();
    assert!(not_run.starts_with("not run: the turn was stopped"), "{not_run}");
    assert!(log.rounds.is_empty(), "an interrupted round goes back unsaved");
}

#[tokio::test(start_paused = true)]
async fn a_call_still_running_after_the_grace_is_marked_unfinished() {
    let fx = Fixture::new(vec![calls(&[("a", "long", "{}")])]);
    let tools = Fakes::with(&[("long", Act::CancelThenSleep(fx.stopped.clone(), 60_000))]);
    let mut log = Log::default();
    let (end, _) = run(&fx, Some(&tools), None, &mut log).await;
    let end = end.unwrap();
    assert_eq!(end.outcome, Outcome::Stopped);
    let why = content(&end.unsaved[1])["error"].as_str().unwrap().to_string();
    assert!(why.contains("while this call was running; it may or may not have taken effect"), "{why}");
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_model_that_never_finishes_and_keeps_the_partial() {
    let mut fx = Fixture::new(vec![Reply::Hang(vec![LlmEvent::TextDelta("partial ".into())])]);
    fx.stop_in = Duration::from_secs(5);
    let mut log = Log::default();
    let (end, _) = run(&fx, None, None, &mut log).await;
    let end = end.unwrap();
    assert!(matches!(end.outcome, Outcome::Failed { code: "deadline_exceeded", .. }), "{:?}", end.outcome);
    assert_eq!(end.unsaved[0].content.as_deref(), Some("partial "));
}

#[tokio::test(start_paused = true)]
async fn a_lost_lease_or_stop_ends_the_model_request() {
    let fx = Fixture::new(vec![Reply::Hang(vec![])]);
    fx.lease_lost.cancel();
    let (end, _) = run(&fx, None, None, &mut Log::default()).await;
    assert!(matches!(end.unwrap().outcome, Outcome::Failed { code: "session_lease_lost", .. }));
    let fx = Fixture::new(vec![Reply::Hang(vec![])]);
    fx.stopped.cancel();
    let (end, _) = run(&fx, None, None, &mut Log::default()).await;
    assert_eq!(end.unwrap().outcome, Outcome::Stopped);
}

#[tokio::test]
async fn the_client_gone_stops_the_loop() {
    let fx = Fixture::new(vec![Reply::Hang(vec![])]);
    let (mut sink, body) = EventSink::channel();
    drop(body);
    let mut lp = ModelLoop::new(fx.env(), None, Origin::Planner);
    let end = lp.run(vec![ChatMessage::user("hi")], &[], &mut Log::default(), &mut sink).await.unwrap();
    assert_eq!(end.outcome, Outcome::Stopped);
}

#[tokio::test]
async fn a_model_error_fails_the_loop_with_its_code() {
    let fx = Fixture::new(vec![Reply::Refuse(LlmError::Http { status: 503, body: "busy".into() })]);
    let (end, _) = run(&fx, None, None, &mut Log::default()).await;
    let outcome = end.unwrap().outcome;
    assert!(matches!(outcome, Outcome::Failed { code: "llm_http_error", retryable: true, .. }), "{outcome:?}");
}

#[tokio::test]
async fn invalid_arguments_are_refused_and_stored_as_an_empty_object() {
    let fx = Fixture::new(vec![
        calls(&[("cut", "echo", r#"{"a": "#), ("list", "echo", "[1]"), ("none", "echo", "")]),
        text("ok"),
    ]);
    let tools = Fakes::with(&[("echo", Act::Echo)]);
    let mut log = Log::default();
    let (end, _) = run(&fx, Some(&tools), None, &mut log).await;
    end.unwrap();
    assert_eq!(tools.ran(), ["none"], "only the argument-less call runs");
    let round = &log.rounds[0];
    assert!(round[0].tool_calls.iter().all(|c| c.function.arguments == "{}"));
    let cut = content(&round[1]);
    assert_eq!(cut["error"]["code"], "invalid_arguments");
    assert_eq!(cut["arguments_received"], r#"{"a": "#);
    assert_eq!(content(&round[2])["error"]["message"], "arguments must be a JSON object");
}

/// Deletes wait for the user's yes.
struct AskDeletes;

fn pending(call: &ToolCall) -> PendingApproval {
    PendingApproval {
        tool_call_id: call.id.clone(),
        approval_id: format!("apv-{}", call.id),
        tool: call.function.name.clone(),
        summary: "Delete it".into(),
        expires_at: i64::MAX,
        step: None,
    }
}

#[async_trait::async_trait]
impl ApprovalGate for AskDeletes {
    async fn waits(&self, calls: &[ToolCall]) -> Vec<Option<PendingApproval>> {
        calls.iter().map(|c| (c.function.name == "delete").then(|| pending(c))).collect()
    }
}

#[tokio::test]
async fn a_waiting_call_ends_the_loop_after_the_rounds_other_calls_ran() {
    let fx = Fixture::new(vec![calls(&[("d", "delete", "{}"), ("e", "echo", "{}")]), text("never asked")]);
    let tools = Fakes::with(&[("delete", Act::Echo), ("echo", Act::Echo)]);
    let mut log = Log::default();
    let (end, events) = run(&fx, Some(&tools), Some(&AskDeletes), &mut log).await;
    let end = end.unwrap();
    assert_eq!(tools.ran(), ["e"]);
    assert_eq!(call_ids(&events, true), ["e"], "the waiting call has no result yet");
    assert_eq!(end.unsaved[0].approvals, [pending(&end.unsaved[0].tool_calls[0])]);
    assert!(events
        .iter()
        .any(|e| matches!(e, StreamEvent::ApprovalRequired { tool_call_id, .. } if tool_call_id == "d")));
    assert_eq!(fx.llm.asked().len(), 1, "the model is not asked again");
}

#[tokio::test]
async fn a_panicking_tool_is_an_error_result_not_a_crash() {
    let fx = Fixture::new(vec![calls(&[("p", "boom", "{}")]), text("sorry")]);
    let tools = Fakes::with(&[("boom", Act::Panic)]);
    let mut log = Log::default();
    let (end, _) = run(&fx, Some(&tools), None, &mut log).await;
    assert_eq!(end.unwrap().outcome, Outcome::Complete);
    assert_eq!(content(&log.rounds[0][1])["error"], "the tool failed unexpectedly");
}

#[tokio::test]
async fn a_large_output_is_kept_apart_and_read_back() {
    let big = "x".repeat(300);
    let mut fx = Fixture::new(vec![
        calls(&[("big", "dump", "{}")]),
        calls(&[("read", READ, r#"{"tool_call_id": "big", "offset": 290}"#)]),
        text("ok"),
    ]);
    fx.inline_bytes = 150;
    let tools = Fakes::with(&[("dump", Act::Content(big.clone(), None))]);
    let mut log = Log::default();
    let (end, _) = run(&fx, Some(&tools), None, &mut log).await;
    end.unwrap();
    assert_eq!(fx.outputs.0.lock().unwrap().get("big"), Some(&big), "stored whole");
    let inline = content(&log.rounds[0][1]);
    assert_eq!((inline["truncated"].as_bool(), inline["total_chars"].as_u64()), (Some(true), Some(300)));
    assert_eq!(inline["full_output"]["tool_call_id"], "big");
    let read = content(&log.rounds[1][1]);
    assert_eq!((read["text"].as_str(), read["next_offset"].as_u64()), (Some("xxxxxxxxxx"), None));
    assert_eq!(tools.ran(), ["big"], "the built-in is the loop's, not the layer's");
}

const READ: &str = super::outputs::READ_TOOL_OUTPUT;

#[tokio::test]
async fn a_question_to_the_user_ends_the_loop_with_it() {
    let fx = Fixture::new(vec![calls(&[("q", "ask", "{}")])]);
    let mut tools = Fakes::with(&[("ask", Act::Echo)]);
    tools.question = Some("- which project?".into());
    let mut log = Log::default();
    let (end, events) = run(&fx, Some(&tools), None, &mut log).await;
    let end = end.unwrap();
    assert_eq!(fx.llm.asked().len(), 1, "the model is not asked again");
    assert_eq!(end.unsaved.last().unwrap().content.as_deref(), Some("- which project?"));
    assert!(events.iter().any(|e| matches!(e, StreamEvent::AgentState { state: AgentActivity::WaitingOnUser, .. })));
}

#[tokio::test]
async fn a_round_that_cannot_be_stored_ends_the_loop_with_the_stores_error() {
    let fx = Fixture::new(vec![calls(&[("a", "echo", "{}")])]);
    let tools = Fakes::with(&[("echo", Act::Echo)]);
    let mut log = Log { fail_round: true, ..Log::default() };
    let (end, _) = run(&fx, Some(&tools), None, &mut log).await;
    let end = end.unwrap();
    assert!(matches!(end.outcome, Outcome::Failed { code: "store_unavailable", .. }), "{:?}", end.outcome);
    assert_eq!(end.unsaved.len(), 2, "the round goes back to be stored at the end");
}

#[tokio::test]
async fn a_user_message_not_stored_aborts_the_loop() {
    let fx = Fixture::new(vec![text("hi")]);
    let mut log = Log { fail_ready: true, ..Log::default() };
    let (end, _) = run(&fx, None, None, &mut log).await;
    assert!(matches!(end, Err(LoopAbort(StoreError::Backend(_)))));
}

#[tokio::test]
async fn usage_is_the_models_and_ours_when_it_reports_none_and_only_the_first_calibrates() {
    let reported = Usage { prompt_tokens: 100, completion_tokens: 5, total_tokens: 105 };
    let fx = Fixture::new(vec![
        Reply::Events(vec![
            Ok(LlmEvent::ToolCallDelta {
                index: 0,
                id: Some("a".into()),
                name: Some("echo".into()),
                arguments: "{}".into(),
            }),
            Ok(LlmEvent::Usage(reported)),
        ]),
        Reply::Events(vec![Ok(LlmEvent::TextDelta("ok".into())), Ok(LlmEvent::Usage(reported))]),
        // (a third request is never made)
    ]);
    let tools = Fakes::with(&[("echo", Act::Echo)]);
    let (mut sink, body) = EventSink::channel();
    let reader = tokio::spawn(read_all(body));
    let mut lp = ModelLoop::new(fx.env(), Some(&tools), Origin::Planner);
    lp.calibrates = true;
    let end = lp.run(vec![ChatMessage::user("hi")], &[], &mut Log::default(), &mut sink).await.unwrap();
    drop(sink);
    reader.await.unwrap();
    assert_eq!(end.usage.prompt_tokens, 200);
    assert_eq!(*fx.count.0.lock().unwrap(), [100], "only the first request calibrates");

    let fx = Fixture::new(vec![text("ok")]);
    let (end, _) = run(&fx, None, None, &mut Log::default()).await;
    assert_eq!(end.unwrap().usage.total_tokens, 2, "our count stands in");
    assert!(fx.count.0.lock().unwrap().is_empty(), "a loop that does not calibrate never does");
}

/// A layer whose `stream_me` calls run with the stream: each sends an event,
/// may report an interruption, and may run a nested loop.
struct Streaming<'a> {
    event: StreamEvent,
    interrupt: Option<Outcome>,
    ran: &'a Fakes,
    /// Tools for a nested loop; `None`: no nested loop.
    nested: Option<&'a Fakes>,
    nested_end: Mutex<Option<(LoopEnd, Log, Vec<StreamEvent>)>>,
    seen_before: Mutex<Vec<Vec<String>>>,
    /// The nested loop's approval gate.
    nested_gate: Option<&'a dyn ApprovalGate>,
}

impl<'a> Streaming<'a> {
    fn new(ran: &'a Fakes, nested: Option<&'a Fakes>, interrupt: Option<Outcome>) -> Self {
        Streaming {
            event: StreamEvent::PlanReadyForReview { plan_id: "p".into() },
            interrupt,
            ran,
            nested,
            nested_end: Mutex::default(),
            seen_before: Mutex::default(),
            nested_gate: None,
        }
    }
}

#[async_trait::async_trait]
impl TurnTools for Streaming<'_> {
    fn offered(&self, _: &TurnScope) -> Vec<serde_json::Value> {
        vec![serde_json::json!({"type": "function", "function": {"name": "stream_me"}})]
    }

    async fn run(&self, _: &UserId, _: &TurnScope, _: &ToolCall) -> ToolRun {
        ToolRun::failed("needs the stream")
    }

    fn handles(&self, name: &str) -> bool {
        name == "stream_me"
    }

    fn streams(&self, _: &ToolCall) -> bool {
        true
    }

    async fn run_streamed(&self, call: &ToolCall, cx: StreamCx<'_>) -> StreamedRun {
        self.seen_before.lock().unwrap().push(self.ran.ran());
        let _ = cx.sink.send(self.event.clone()).await;
        let mut usage = Usage::default();
        if let Some(tools) = self.nested {
            let offered = tools.offered(cx.scope);
            let origin = Origin::PlanStep { plan_id: "p".into(), step_id: "s".into() };
            let nested = Nested {
                messages: vec![ChatMessage::user("step brief")],
                tools: Some(tools),
                offered: &offered,
                max_rounds: 1,
                origin,
                approvals: self.nested_gate,
            };
            let (mut sink, body) = EventSink::channel();
            let reader = tokio::spawn(read_all(body));
            let mut log = Log::default();
            let end = cx.runner.run(nested, &mut log, &mut sink).await.unwrap();
            drop(sink);
            usage = end.usage;
            *self.nested_end.lock().unwrap() = Some((end, log, reader.await.unwrap()));
        }
        let run = ToolRun { ok: true, content: format!("streamed {}", call.id), preview: "s".into(), events: vec![] };
        let waiting = self.nested_end.lock().unwrap().as_ref().map_or(vec![], |(end, ..)| {
            let m = &end.unsaved[0];
            m.approvals.iter().map(|p| (m.tool_calls[0].clone(), p.clone())).collect()
        });
        StreamedRun { run, interrupted: self.interrupt.clone(), usage, waiting }
    }
}

#[tokio::test]
async fn calls_run_with_the_stream_go_after_the_others_with_their_events_before_their_result() {
    let fx = Fixture::new(vec![calls(&[("s", "stream_me", "{}"), ("e", "echo", "{}")]), text("ok")]);
    let base = Fakes::with(&[("echo", Act::Echo)]);
    let streaming = Streaming::new(&base, None, None);
    let layers = Layers::new(vec![&streaming, &base]);
    let mut log = Log::default();
    let (end, events) = run(&fx, Some(&layers), None, &mut log).await;
    end.unwrap();
    assert_eq!(*streaming.seen_before.lock().unwrap(), [vec!["e".to_string()]], "the other call ran first");
    assert_eq!(base.ran(), ["e"], "the streamed call never reaches the base layer");
    let pos = |f: &dyn Fn(&StreamEvent) -> bool| events.iter().position(f).unwrap();
    let streamed = pos(&|e| matches!(e, StreamEvent::PlanReadyForReview { .. }));
    let result_s = pos(&|e| matches!(e, StreamEvent::ToolResult { tool_call_id, .. } if tool_call_id == "s"));
    let result_e = pos(&|e| matches!(e, StreamEvent::ToolResult { tool_call_id, .. } if tool_call_id == "e"));
    assert!(streamed < result_s && result_s < result_e, "{events:?}");
    assert_eq!(log.rounds[0][1].content.as_deref(), Some("streamed s"));
    assert_eq!(content(&log.rounds[0][2])["ok"], true, "the other call's own result");
}

#[tokio::test]
async fn a_streamed_call_that_was_cut_off_ends_the_round() {
    let fx = Fixture::new(vec![calls(&[("s1", "stream_me", r#"{"n": 1}"#), ("s2", "stream_me", r#"{"n": 2}"#)])]);
    let base = Fakes::default();
    let streaming = Streaming::new(&base, None, Some(Outcome::Stopped));
    let layers = Layers::new(vec![&streaming, &base]);
    let (end, _) = run(&fx, Some(&layers), None, &mut Log::default()).await;
    let end = end.unwrap();
    assert_eq!(end.outcome, Outcome::Stopped);
    assert_eq!(streaming.seen_before.lock().unwrap().len(), 1, "the second streamed call never starts");
    assert_eq!(end.unsaved[1].content.as_deref(), Some("streamed s1"));
    assert!(content(&end.unsaved[2])["error"].as_str().unwrap().starts_with("not run"));
}

#[tokio::test]
async fn a_layer_runs_a_nested_loop_through_the_runner_it_is_handed() {
    let nested_usage = Usage { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 };
    let fx = Fixture::new(vec![
        calls(&[("outer", "stream_me", "{}")]),
        calls(&[("inner", "echo", r#"{"in":1}"#)]),
        Reply::Events(vec![Ok(LlmEvent::TextDelta("step done".into())), Ok(LlmEvent::Usage(nested_usage))]),
        text("all done"),
    ]);
    let base = Fakes::default();
    let inner = Fakes::with(&[("echo", Act::Echo)]);
    let streaming = Streaming::new(&base, Some(&inner), None);
    let layers = Layers::new(vec![&streaming, &base]);
    let mut log = Log::default();
    let (end, outer_events) = run(&fx, Some(&layers), None, &mut log).await;
    let end = end.unwrap();
    assert_eq!(end.unsaved[0].content.as_deref(), Some("all done"));
    let (nested, nested_log, nested_events) = streaming.nested_end.lock().unwrap().take().unwrap();
    assert_eq!(nested.unsaved[0].content.as_deref(), Some("step done"));
    assert_eq!(inner.ran(), ["inner"]);
    assert_eq!(nested_log.rounds.len(), 1, "the nested rounds go to the nested log");
    assert_eq!(nested_log.rounds[0][0].seq, 1, "a nested loop counts from 1");
    assert_eq!(log.rounds.len(), 1, "the outer log only has the outer round");
    let asked = fx.llm.asked();
    assert_eq!(asked[1].messages[0].content.as_deref(), Some("step brief"), "the nested loop has its own context");
    assert!(asked[2].tools.is_empty(), "its own round limit");
    let origin = nested_events.iter().find_map(|e| match e {
        StreamEvent::ToolCall { origin, .. } => Some(origin.clone()),
        _ => None,
    });
    assert!(matches!(origin, Some(Origin::PlanStep { .. })), "{nested_events:?}");
    assert!(!call_ids(&outer_events, false).contains(&"inner".to_string()), "nested events stay on its sink");
    assert!(end.usage.prompt_tokens >= 7, "the nested usage is the loop's");
}

#[tokio::test]
async fn the_runners_one_off_question_is_not_streamed_and_has_a_time_limit() {
    let fx = Fixture::new(vec![text("verdict"), Reply::Hang(vec![])]);
    let env = fx.env();
    let runner: &dyn LoopRunner = &env;
    assert_eq!(runner.ask(vec![ChatMessage::user("q")]).await.unwrap(), "verdict");
    let mut fx = Fixture::new(vec![Reply::Hang(vec![])]);
    fx.stop_in = Duration::from_millis(1);
    let env = fx.env();
    assert_eq!(LoopRunner::ask(&env, vec![]).await, Err(AskError::OutOfTime));
}

#[tokio::test]
async fn layers_route_each_call_to_the_first_layer_that_handles_it() {
    let base = Fakes::with(&[("echo", Act::Echo)]);
    let streaming = Streaming::new(&base, None, None);
    let layers = Layers::new(vec![&streaming, &base]);
    let scope = TurnScope { context_type: ContextType::Global, entity_id: None, focus: None, timezone: None };
    let names: Vec<_> = layers.offered(&scope).iter().map(|d| d["function"]["name"].clone()).collect();
    assert_eq!(names, ["stream_me", "echo"], "every layer's offer, in order");
    let call = |name: &str| ToolCall {
        id: "c".into(),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: "{}".into() },
    };
    assert!(layers.streams(&call("stream_me")) && !layers.streams(&call("echo")));
    let user = UserId::parse("user-1").unwrap();
    assert_eq!(
        layers.run(&user, &scope, &call("stream_me")).await.content,
        ToolRun::failed("needs the stream").content
    );
    assert!(layers.run(&user, &scope, &call("echo")).await.ok);
    assert!(!Layers::new(vec![&streaming]).run(&user, &scope, &call("echo")).await.ok, "no layer handles it");
}

#[tokio::test]
async fn the_watch_reports_a_context_shift_and_questions_from_calls() {
    use crate::sse::{Focus, ShiftReason};
    let focus = Focus { context_type: ContextType::Project, entity_id: Some("p1".into()), focus: None };
    let shift = StreamEvent::ContextShift {
        current: focus.clone(),
        reason: ShiftReason::ProjectCreated,
        entity_name: "P".into(),
    };
    let tools = Fakes::with(&[("move", Act::Content("{}".into(), Some(shift)))]);
    let watched = super::call_signals::Watched::new(&tools, super::telemetry::Telemetry::new(false), &[]);
    assert!(watched.shift().is_none() && watched.asked_user().is_none());
    let call = ToolCall {
        id: "m".into(),
        kind: "function".into(),
        function: FunctionCall { name: "move".into(), arguments: "{}".into() },
    };
    let scope = TurnScope { context_type: ContextType::Global, entity_id: None, focus: None, timezone: None };
    watched.run(&UserId::parse("user-1").unwrap(), &scope, &call).await;
    assert_eq!(watched.shift(), Some(focus));
}

#[tokio::test]
async fn a_nested_loops_waiting_call_ends_the_turn_after_the_streamed_calls_result() {
    let fx = Fixture::new(vec![
        calls(&[("s", "stream_me", "{}")]),
        calls(&[("d", "delete", "{}")]),
        text("the planner is not asked again"),
    ]);
    let (base, inner) = (Fakes::with(&[("echo", Act::Echo)]), Fakes::with(&[("delete", Act::Echo)]));
    let mut streaming = Streaming::new(&base, Some(&inner), None);
    streaming.nested_gate = Some(&AskDeletes);
    let layers = Layers::new(vec![&streaming, &base]);
    let mut log = Log::default();
    let (end, events) = run(&fx, Some(&layers), None, &mut log).await;
    let end = end.unwrap();
    assert!(inner.ran().is_empty(), "the nested delete waits");
    assert_eq!(end.outcome, Outcome::Complete);
    let roles: Vec<Role> = end.unsaved.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::Assistant, Role::Tool, Role::Assistant], "the round, then the waiting calls");
    let waiting = &end.unsaved[2];
    assert_eq!((waiting.tool_calls[0].id.as_str(), waiting.approvals.len()), ("d", 1));
    assert_eq!(waiting.seq, end.unsaved[1].seq + 1);
    let nested = streaming.nested_end.lock().unwrap();
    let (_, _, nested_events) = nested.as_ref().unwrap();
    let asked = nested_events.iter().find_map(|e| match e {
        StreamEvent::ApprovalRequired { tool_call_id, origin, .. } => Some((tool_call_id.clone(), origin.clone())),
        _ => None,
    });
    let origin = Origin::PlanStep { plan_id: "p".into(), step_id: "s".into() };
    assert_eq!(asked, Some(("d".to_string(), origin)), "the nested loop asked, with its origin");
    assert!(events.iter().any(|e| matches!(e, StreamEvent::ToolResult { tool_call_id, .. } if tool_call_id == "s")));
    assert!(events.iter().any(|e| matches!(e, StreamEvent::AgentState { state: AgentActivity::WaitingOnUser, .. })));
    assert_eq!(fx.llm.asked().len(), 2, "the planner's first request and the nested one only");
}

#[tokio::test]
async fn an_opening_call_runs_before_the_model_is_asked() {
    let fx = Fixture::new(vec![text("from the result")]);
    let tools = Fakes::with(&[("echo", Act::Echo)]);
    let mut log = Log::default();
    let (mut sink, body) = EventSink::channel();
    let reader = tokio::spawn(read_all(body));
    let offered = tools.offered(&fx.scope);
    let mut lp = ModelLoop::new(fx.env(), Some(&tools), Origin::Planner);
    lp.opening = Some(ToolCall {
        id: "open".into(),
        kind: "function".into(),
        function: FunctionCall { name: "echo".into(), arguments: "{}".into() },
    });
    let end = lp.run(vec![ChatMessage::user("hi")], &offered, &mut log, &mut sink).await.unwrap();
    drop(sink);
    reader.await.unwrap();
    assert_eq!(tools.ran(), ["open"]);
    assert_eq!(log.rounds[0][0].tool_calls[0].id, "open", "stored as the first round");
    let requests = fx.llm.asked();
    assert_eq!(requests.len(), 1, "one model request, after the call");
    assert!(requests[0].messages.iter().any(|m| m.tool_call_id.as_deref() == Some("open")));
    assert_eq!(end.unsaved[0].content.as_deref(), Some("from the result"));
}
