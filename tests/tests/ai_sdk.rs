//! The AI SDK's chat protocol end to end (`docs/chat-protocol.md`): `POST
//! /chat` and `GET /chat/{id}/stream` through the stream function's real
//! handler, on DynamoDB Local and the scripted model. Every UI stream is
//! checked by [`check_ui_stream`], which refuses what the client's own reader
//! (`ai` 6.x, `processUIMessageStream`) throws on; the last test feeds a real
//! HTTP response to that reader itself, in Node.

use http_body_util::BodyExt;
use serde_json::{json, Value};
use shared::edge::stream::handle_stream;
use shared::entities::{EntityService, NewProject};
use shared::ids::{SessionId, UserId};
use shared::message::Role;
use shared::session::store::{SessionLog, Sessions};
use std::collections::HashSet;
use tests::{token, Reply, TestApp};

/// What a client got from one request.
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("JSON: {}", String::from_utf8_lossy(&self.body)))
    }

    /// The UI parts, checked; panics with the reason on a broken stream.
    fn parts(&self) -> Vec<Value> {
        assert_eq!(self.status, 200, "{}", String::from_utf8_lossy(&self.body));
        assert_eq!(self.headers["x-vercel-ai-ui-message-stream"], "v1");
        assert_eq!(self.headers["content-type"], "text/event-stream");
        check_ui_stream(&self.body).unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&self.body)))
    }
}

async fn call(t: &TestApp, user: &str, method: &str, path: &str, body: Option<Value>) -> Answer {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {}", token(user)))
        .header("content-type", "application/json")
        .body(lambda_http::Body::Binary(body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default()))
        .unwrap();
    let resp = handle_stream(&t.app, lambda_http::Request::from(req)).await;
    let (parts, body) = resp.into_parts();
    let read = async {
        let mut out = Vec::new();
        let mut body = body;
        while let Some(f) = body.frame().await {
            out.extend_from_slice(&f.unwrap().into_data().unwrap_or_default());
        }
        out
    };
    let body = tokio::time::timeout(std::time::Duration::from_secs(30), read).await.expect("the body ended in 30 s");
    Answer { status: parts.status.as_u16(), headers: parts.headers, body }
}

fn user_message(text: &str) -> Value {
    json!({"id": format!("u-{}", text.len()), "role": "user", "parts": [{"type": "text", "text": text}]})
}

/// `DefaultChatTransport`'s body for one new message.
fn submit(chat_id: &str, text: &str) -> Value {
    json!({"id": chat_id, "messages": [user_message(text)], "trigger": "submit-message", "messageId": null})
}

/// Parses a UI message stream and checks it as the AI SDK's client reads it:
/// only `data:` frames of JSON objects with a known `type` (or `data-*`),
/// `start` first, a `text-delta`/`text-end` only inside its `text-start` (and
/// the step: `finish-step` ends open text parts), a `tool-output-*` only for a
/// call announced before, no text left open at `finish`, `finish` last, then
/// `[DONE]`, then nothing.
fn check_ui_stream(wire: &[u8]) -> Result<Vec<Value>, String> {
    let text = std::str::from_utf8(wire).map_err(|e| e.to_string())?;
    let frames: Vec<&str> = text.split_terminator("\n\n").collect();
    if text.is_empty() || !text.ends_with("\n\n") {
        return Err("the stream does not end with a blank line".into());
    }
    let (last, frames) = frames.split_last().ok_or("no frames")?;
    if *last != "data: [DONE]" {
        return Err(format!("the last frame is {last:?}, not [DONE]"));
    }
    const KNOWN: &[&str] = &[
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-start",
        "tool-input-available",
        "tool-input-error",
        "tool-output-available",
        "tool-output-error",
        "finish-step",
        "finish",
        "error",
    ];
    let (mut open_text, mut calls) = (HashSet::new(), HashSet::new());
    let mut parts = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let json = f.strip_prefix("data: ").filter(|j| !j.contains('\n')).ok_or(format!("frame {i} is {f:?}"))?;
        let p: Value = serde_json::from_str(json).map_err(|e| format!("frame {i}: {e}"))?;
        let ty = p["type"].as_str().ok_or(format!("part {i} has no type"))?.to_string();
        let id = |k: &str| p[k].as_str().map(str::to_string).ok_or(format!("{ty} without {k}"));
        if (i == 0) != (ty == "start") {
            return Err(format!("`start` must be first and only first; part {i} is {ty}"));
        }
        if parts.last().is_some_and(|l: &Value| l["type"] == "finish") {
            return Err(format!("{ty} after finish"));
        }
        match ty.as_str() {
            "start" => drop(id("messageId")?),
            "text-start" => drop(open_text.insert(id("id")?)),
            "text-delta" | "text-end" if !open_text.contains(&id("id")?) => {
                return Err(format!("{ty} for text part {} that is not open", id("id")?))
            }
            "text-end" => drop(open_text.remove(&id("id")?)),
            "finish-step" => open_text.clear(),
            "tool-input-start" | "tool-input-available" | "tool-input-error" => {
                id("toolName")?;
                calls.insert(id("toolCallId")?);
            }
            "tool-output-available" | "tool-output-error" if !calls.contains(&id("toolCallId")?) => {
                return Err(format!("{ty} for unknown call {}", id("toolCallId")?))
            }
            "error" => drop(id("errorText")?),
            "finish" if !open_text.is_empty() => return Err(format!("text {open_text:?} still open at finish")),
            t if t.starts_with("data-") && p.get("data").is_none() => return Err(format!("{t} without data")),
            t if !t.starts_with("data-") && !KNOWN.contains(&t) => return Err(format!("unknown part type {t}")),
            _ => {}
        }
        parts.push(p);
    }
    if parts.last().map(|p| p["type"] != "finish").unwrap_or(true) {
        return Err("the last part is not finish".into());
    }
    Ok(parts)
}

fn types(parts: &[Value]) -> Vec<String> {
    parts.iter().map(|p| p["type"].as_str().unwrap().to_string()).collect()
}

fn text_of(parts: &[Value]) -> String {
    parts.iter().filter(|p| p["type"] == "text-delta").map(|p| p["delta"].as_str().unwrap()).collect()
}

fn uid(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

#[tokio::test]
async fn a_text_turn_is_a_valid_ui_message_stream_named_after_its_turn() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["Hello", " there", "!"]));
    let a = call(&t, "alice", "POST", "/chat", Some(submit("Xb3kQ9mZ2pL7aR1c", "hi"))).await;
    let parts = a.parts();
    let mut kinds = types(&parts);
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "start",
            "data-agent-state",
            "data-session",
            "data-context-usage",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "finish"
        ]
    );
    assert_eq!(text_of(&parts), "Hello there!");
    assert_eq!(parts[1]["transient"], true);
    let finish = parts.last().unwrap();
    assert_eq!(finish["finishReason"], "stop");
    let meta = &finish["messageMetadata"];
    assert_eq!(meta["reason"], "complete");
    assert!(meta["usage"]["total_tokens"].as_u64().is_some(), "{meta}");
    assert_eq!(parts[0]["messageId"], meta["turn_id"], "the message is named after its turn");
    assert_eq!(meta["session_id"], "Xb3kQ9mZ2pL7aR1c");
    assert_eq!(parts[2]["data"]["session"]["id"], "Xb3kQ9mZ2pL7aR1c");
}

#[tokio::test]
async fn a_tool_turn_carries_tool_parts_operations_and_entity_patches() {
    let t = TestApp::new().await;
    let service =
        EntityService::new(shared::entities::store::DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    let project = service.create_project(&uid("alice"), p).await.unwrap().data.project.id;
    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Write the launch post"}))]));
    t.llm.push(Reply::text(&["Created ", "the task."]));
    let mut body = submit("chat-tools-1", "Add a task to write the launch post");
    body["context_type"] = json!("project");
    body["project_id"] = json!(project.to_string());
    let parts = call(&t, "alice", "POST", "/chat", Some(body)).await.parts();
    let kinds = types(&parts);
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap_or_else(|| panic!("no {k} in {kinds:?}"));
    assert!(pos("tool-input-start") < pos("tool-input-available"));
    assert!(pos("tool-input-available") < pos("data-operation"));
    assert!(pos("data-operation") < pos("data-entity-patch"));
    assert!(pos("data-entity-patch") < pos("tool-output-available"));
    assert!(pos("tool-output-available") < pos("text-start"));
    assert_eq!(kinds.iter().filter(|k| *k == "start-step").count(), 2, "a tool round, then the answer: {kinds:?}");
    let input = &parts[pos("tool-input-available")];
    assert_eq!(
        (input["toolName"].as_str(), input["input"]["title"].as_str()),
        (Some("create_task"), Some("Write the launch post"))
    );
    assert_eq!(parts[pos("tool-output-available")]["toolCallId"], input["toolCallId"]);
    let patch = &parts[pos("data-entity-patch")];
    let task = patch["data"]["patch"]["changes"][0]["id"].as_str().unwrap();
    assert_eq!(patch["id"], format!("{project}:task:{task}"), "the patch part is named after its entity");
    assert_eq!(parts[pos("data-operation")]["data"]["entity_name"], "Write the launch post");
    assert_eq!(text_of(&parts), "Created the task.");
}

#[tokio::test]
async fn a_client_made_chat_id_creates_the_session_and_the_next_post_continues_it() {
    let t = TestApp::new().await;
    let chat = "aB3dE6gH9jK2mN5p"; // 16 letters and digits, like useChat's generateId()
    t.llm.push(Reply::text(&["first answer"]));
    call(&t, "alice", "POST", "/chat", Some(submit(chat, "first question"))).await.parts();
    t.llm.push(Reply::text(&["second answer"]));
    let mut body = submit(chat, "second question");
    // The transport sends the whole conversation; only the last message is read.
    body["messages"] = json!([user_message("first question"), {"id": "x", "role": "assistant", "parts": [{"type": "text", "text": "first answer"}]}, user_message("second question")]);
    call(&t, "alice", "POST", "/chat", Some(body)).await.parts();

    let sid = SessionId::parse(chat).unwrap();
    let s = t.store().session(&uid("alice"), &sid).await.unwrap().expect("the session is stored under the chat id");
    assert_eq!(s.view.message_count, 4);
    let log = t.store().recent_messages(&uid("alice"), &sid, 10).await.unwrap();
    let contents: Vec<_> = log.iter().map(|m| m.content.clone().unwrap_or_default()).collect();
    assert_eq!(contents, ["first question", "first answer", "second question", "second answer"]);
    let asked = t.llm.requests().last().unwrap().clone();
    let sent = tests::scripted_llm::roles_and_contents(&asked);
    assert_eq!(sent.iter().filter(|(r, _)| r == "user").count(), 2, "{sent:?}");
    // Scoped to the user: the same chat id is another session for bob.
    t.llm.push(Reply::text(&["hi bob"]));
    call(&t, "bob", "POST", "/chat", Some(submit(chat, "mine"))).await.parts();
    let bobs = t.store().session(&uid("bob"), &sid).await.unwrap().unwrap();
    assert_eq!(bobs.view.message_count, 2);
    assert_eq!(t.store().session(&uid("alice"), &sid).await.unwrap().unwrap().view.message_count, 4);
}

#[tokio::test]
async fn regenerate_supersedes_the_last_answer_and_history_shows_one() {
    let t = TestApp::new().await;
    let chat = "regenChat0000001";
    t.llm.push(Reply::text(&["a poor answer"]));
    let first = call(&t, "alice", "POST", "/chat", Some(submit(chat, "what is 2+2?"))).await.parts();
    t.llm.push(Reply::text(&["4"]));
    let mut body = submit(chat, "what is 2+2?");
    body["trigger"] = json!("regenerate-message");
    body["messageId"] = first[0]["messageId"].clone();
    let again = call(&t, "alice", "POST", "/chat", Some(body)).await.parts();
    assert_eq!(text_of(&again), "4");
    assert_ne!(again[0]["messageId"], first[0]["messageId"], "a new answer, a new message");

    // The model was asked the same question once, without the old answer.
    let asked = tests::scripted_llm::roles_and_contents(t.llm.requests().last().unwrap());
    let non_system: Vec<_> = asked.iter().filter(|(r, _)| r != "system").cloned().collect();
    assert_eq!(non_system, [("user".to_string(), "what is 2+2?".to_string())]);

    // Nothing lost in the log, the user message stored once; history shows one answer.
    let sid = SessionId::parse(chat).unwrap();
    let log = t.store().recent_messages(&uid("alice"), &sid, 10).await.unwrap();
    assert_eq!(log.iter().filter(|m| m.role == Role::User).count(), 1);
    assert_eq!(log.len(), 4, "user, superseded answer, marker, new answer");
    let history = call(&t, "alice", "GET", &format!("/sessions/{chat}/messages"), None).await.json();
    let shown: Vec<_> =
        history["messages"].as_array().unwrap().iter().map(|m| (m["role"].clone(), m["content"].clone())).collect();
    assert_eq!(shown, [(json!("user"), json!("what is 2+2?")), (json!("assistant"), json!("4"))]);

    // Regenerated again: still one answer, the newest.
    t.llm.push(Reply::text(&["four"]));
    let mut body = submit(chat, "what is 2+2?");
    body["trigger"] = json!("regenerate-message");
    assert_eq!(text_of(&call(&t, "alice", "POST", "/chat", Some(body)).await.parts()), "four");
    let history = call(&t, "alice", "GET", &format!("/sessions/{chat}/messages"), None).await.json();
    let shown: Vec<_> = history["messages"].as_array().unwrap().iter().map(|m| m["content"].clone()).collect();
    assert_eq!(shown, [json!("what is 2+2?"), json!("four")]);

    // The next turn's model request has the newest answer only.
    t.llm.push(Reply::text(&["ok"]));
    call(&t, "alice", "POST", "/chat", Some(submit(chat, "thanks"))).await.parts();
    let asked = tests::scripted_llm::roles_and_contents(t.llm.requests().last().unwrap());
    let contents: Vec<_> = asked.iter().filter(|(r, _)| r != "system").map(|(_, c)| c.as_str()).collect();
    assert_eq!(contents, ["what is 2+2?", "four", "thanks"]);
}

#[tokio::test]
async fn regenerate_without_a_session_or_a_question_is_an_error_part() {
    let t = TestApp::new().await;
    let mut body = submit("neverSeen0000001", "again");
    body["trigger"] = json!("regenerate-message");
    let parts = call(&t, "alice", "POST", "/chat", Some(body)).await.parts();
    let err = parts.iter().find(|p| p["type"] == "error").expect("an error part");
    assert!(err["errorText"].as_str().unwrap().contains("not found"), "{err}");
    assert_eq!(parts.last().unwrap()["finishReason"], "error");
    let sid = SessionId::parse("neverSeen0000001").unwrap();
    assert!(t.store().session(&uid("alice"), &sid).await.unwrap().is_none(), "no session was created");
}

#[tokio::test]
async fn a_failed_turn_ends_with_error_then_finish_then_done() {
    let t = TestApp::new().await;
    t.llm.push(Reply::Status(500, "boom".into()));
    t.llm.set_default(Reply::Status(500, "boom".into()));
    let parts = call(&t, "alice", "POST", "/chat", Some(submit("failingChat00001", "hi"))).await.parts();
    let kinds = types(&parts);
    let err = kinds.iter().position(|k| k == "error").expect("an error part");
    assert!(err < kinds.len() - 1);
    assert_eq!(parts.last().unwrap()["finishReason"], "error");
    assert_eq!(parts.last().unwrap()["messageMetadata"]["reason"], "error");
}

#[tokio::test]
async fn bad_chat_requests_are_4xx_json_before_any_stream() {
    let t = TestApp::new().await;
    let cases = [
        (json!({"messages": [user_message("hi")]}), 400, "missing_chat_id"),
        (json!({"id": "a b", "messages": [user_message("hi")]}), 400, "invalid_id"),
        (json!({"id": "c1", "messages": []}), 400, "missing_message"),
        (json!({"id": "c1", "messages": [{"id": "a", "role": "assistant", "parts": []}]}), 400, "missing_message"),
        (json!({"id": "c1", "trigger": "resume-stream", "messages": [user_message("hi")]}), 400, "unknown_trigger"),
        (json!({"id": "c1", "messages": [user_message("hi")], "context_type": "nope"}), 400, "unknown_context_type"),
        (json!([1, 2]), 400, "invalid_json"),
        (json!({"id": "c1", "messages": [user_message(&"x".repeat(40 * 1024))]}), 413, "message_too_large"),
    ];
    for (body, status, code) in cases {
        let a = call(&t, "alice", "POST", "/chat", Some(body.clone())).await;
        assert_eq!((a.status, a.json()["error"]["code"].as_str()), (status, Some(code)), "{body}");
        assert_eq!(a.headers["content-type"], "application/json");
    }
    let a = call(&t, "alice", "GET", "/chat", None).await;
    assert_eq!((a.status, a.json()["error"]["code"].as_str()), (405, Some("method_not_allowed")));
    let a = call(&t, "alice", "GET", "/chat/a%20b/stream", None).await;
    assert_eq!(a.status, 400);
    assert_eq!(t.llm.request_count(), 0, "no model call for a refused request");
}

#[tokio::test]
async fn a_reconnect_replays_the_running_turn_from_its_start_then_follows_it_live() {
    let t = TestApp::new().await;
    let chat = "resumeChat000001";
    let idle = call(&t, "alice", "GET", &format!("/chat/{chat}/stream"), None).await;
    assert_eq!((idle.status, idle.body.len()), (204, 0), "nothing to resume");
    // The chat's second turn: the session exists, so the turn's lease (what
    // the resume route looks for) is taken before the model is called.
    t.llm.push(Reply::text(&["first answer"]));
    call(&t, "alice", "POST", "/chat", Some(submit(chat, "first"))).await.parts();
    let pieces: Vec<String> = (0..12).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    t.llm.push(Reply::paced(&refs, std::time::Duration::from_millis(80)));
    let live = {
        let t = &t;
        async move { call(t, "alice", "POST", "/chat", Some(submit(chat, "count"))).await }
    };
    let resumed = async {
        // A reload mid-turn: the client reconnects once the model is writing.
        while t.llm.sent().len() < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let written = t.llm.sent().len() - 1;
        (call(&t, "alice", "GET", &format!("/chat/{chat}/stream"), None).await, written)
    };
    let (live, (resumed, written)) = tokio::join!(live, resumed);
    assert!(written < pieces.len(), "the reconnect came mid-turn ({written} pieces written)");
    let (live_parts, resumed_parts) = (live.parts(), resumed.parts());
    assert_eq!(resumed_parts[0]["type"], "start", "a replay from the turn's start");
    assert_eq!(resumed_parts[0]["messageId"], live_parts[0]["messageId"], "the same message");
    assert_eq!(text_of(&resumed_parts), pieces.concat(), "every word once");
    assert_eq!(text_of(&live_parts), pieces.concat());
    // Just finished: the replay is the live stream, byte for byte.
    let again = call(&t, "alice", "GET", &format!("/chat/{chat}/stream"), None).await;
    assert_eq!(String::from_utf8_lossy(&again.body), String::from_utf8_lossy(&live.body));
    // Another user's session of the same name has nothing to resume.
    let other = call(&t, "bob", "GET", &format!("/chat/{chat}/stream"), None).await;
    assert_eq!(other.status, 204);
}

#[test]
fn the_checker_refuses_what_the_client_throws_on() {
    let wire = |parts: &[Value], done: bool| {
        let mut s: String = parts.iter().map(|p| format!("data: {p}\n\n")).collect();
        if done {
            s.push_str("data: [DONE]\n\n");
        }
        s.into_bytes()
    };
    let start = json!({"type": "start", "messageId": "m"});
    let finish = json!({"type": "finish"});
    let ts = json!({"type": "text-start", "id": "t"});
    let td = json!({"type": "text-delta", "id": "t", "delta": "x"});
    let te = json!({"type": "text-end", "id": "t"});
    let fs = json!({"type": "finish-step"});
    let out = json!({"type": "tool-output-available", "toolCallId": "c", "output": 1});
    assert!(check_ui_stream(&wire(&[start.clone(), ts.clone(), td.clone(), te.clone(), finish.clone()], true)).is_ok());
    let broken: [(&[Value], bool); 7] = [
        (&[start.clone(), td.clone(), finish.clone()], true),
        (&[start.clone(), ts.clone(), fs.clone(), td.clone(), finish.clone()], true),
        (&[start.clone(), out, finish.clone()], true),
        (&[start.clone(), ts.clone(), td.clone(), finish.clone()], true),
        (&[start.clone(), finish.clone()], false),
        (&[ts, start.clone(), finish.clone()], true),
        (&[start, json!({"type": "agent_state"}), finish], true),
    ];
    for (parts, done) in broken {
        assert!(check_ui_stream(&wire(parts, done)).is_err(), "{parts:?}");
    }
}

/// The strongest check: the AI SDK's own client (`ai` 6.x `AbstractChat`, the
/// class `useChat` wraps, over an unconfigured `DefaultChatTransport`) in Node,
/// against our function URL on real HTTP. It makes its own chat id, sends a
/// message whose answer uses a tool, then regenerates it.
#[tokio::test]
async fn the_ai_sdks_own_client_reads_our_stream() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("node");
    assert!(
        dir.join("node_modules/ai/package.json").exists(),
        "the AI SDK is not installed in {}: run the tests with scripts/test.sh (npm ci there)",
        dir.display()
    );
    let urls = tests::function_urls::FunctionUrls::start().await;
    let t = &urls.t;
    let service =
        EntityService::new(shared::entities::store::DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    let project = service.create_project(&uid("alice"), p).await.unwrap().data.project.id;
    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Write the launch post"}))]));
    t.llm.push(Reply::text(&["Created ", "the task."]));
    t.llm.push(Reply::text(&["Regenerated ", "answer."]));
    let out = tokio::process::Command::new("node")
        .arg(dir.join("chat-check.mjs"))
        .current_dir(&dir)
        .env("CHAT_URL", format!("{}chat", urls.url("stream")))
        .env("CHAT_TOKEN", token("alice"))
        .env("CHAT_BODY", json!({"context_type": "project", "project_id": project.to_string()}).to_string())
        .env("CHAT_TEXT", "Add a task to write the launch post")
        .output()
        .await
        .expect("node runs (Node 20+ is required)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "node failed: {stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(seen["errors"], json!([]), "the client raised errors: {seen}");
    assert_eq!((seen["statusAfterFirst"].as_str(), seen["status"].as_str()), (Some("ready"), Some("ready")));

    // The client's chat id (its own generateId: 16 letters and digits) is the session.
    let chat = seen["chatId"].as_str().unwrap();
    assert!(chat.len() == 16 && chat.chars().all(|c| c.is_ascii_alphanumeric()), "{chat}");
    let sid = SessionId::parse(chat).unwrap();
    assert!(t.store().session(&uid("alice"), &sid).await.unwrap().is_some());

    // After the first answer: the user's message, then one assistant message
    // named after the turn, holding the tool call with its output, the
    // operation and entity-patch data parts, and the text.
    let first = seen["afterFirst"].as_array().unwrap();
    assert_eq!(first.len(), 2, "{seen}");
    let answer = &first[1];
    assert_eq!(answer["role"], "assistant");
    assert_eq!(answer["id"], answer["metadata"]["turn_id"], "messageId is the turn id");
    let parts = answer["parts"].as_array().unwrap();
    let of = |ty: &str| parts.iter().filter(|p| p["type"] == ty).collect::<Vec<_>>();
    let tool = of("tool-create_task");
    assert_eq!(tool.len(), 1, "{answer}");
    assert_eq!(tool[0]["state"], "output-available");
    assert_eq!(tool[0]["input"]["title"], "Write the launch post");
    assert_eq!(of("data-entity-patch").len(), 1);
    assert!(!of("data-operation").is_empty());
    assert!(of("data-agent-state").is_empty(), "agent state is transient");
    let texts = of("text");
    assert_eq!(texts.len(), 1);
    assert_eq!((texts[0]["text"].as_str(), texts[0]["state"].as_str()), (Some("Created the task."), Some("done")));
    assert!(seen["data"].as_array().unwrap().iter().any(|d| d == "data-agent-state"), "onData sees transient parts");

    // After regenerate(): still two messages, the answer replaced by the new one.
    let after = seen["afterRegenerate"].as_array().unwrap();
    assert_eq!(after.len(), 2, "{seen}");
    assert_ne!(after[1]["id"], answer["id"]);
    let texts: Vec<_> = after[1]["parts"].as_array().unwrap().iter().filter(|p| p["type"] == "text").collect();
    assert_eq!(texts.len(), 1);
    assert_eq!(texts[0]["text"], "Regenerated answer.");
    // And the stored history agrees: one question, one answer.
    let history =
        t.store().messages_page(&uid("alice"), &sid, shared::session::store::MessagesFrom::Before(None), 50).await;
    let visible = shared::message::without_superseded(history.unwrap());
    let roles: Vec<Role> = visible.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
}

/// A reload mid-turn with the AI SDK's own client: a second `AbstractChat` on
/// the same chat id calls `resumeStream()` while the first one's turn runs;
/// both end with the same single answer, its text once.
#[tokio::test]
async fn the_ai_sdks_own_client_resumes_a_running_turn_without_repeating_text() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("node");
    assert!(
        dir.join("node_modules/ai/package.json").exists(),
        "run the tests with scripts/test.sh (npm ci in tests/node)"
    );
    let urls = tests::function_urls::FunctionUrls::start().await;
    let pieces: Vec<String> = (0..15).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    urls.t.llm.push(Reply::text(&["first answer"]));
    urls.t.llm.push(Reply::paced(&refs, std::time::Duration::from_millis(80)));
    let out = tokio::process::Command::new("node")
        .arg(dir.join("chat-check.mjs"))
        .current_dir(&dir)
        .env("CHAT_URL", format!("{}chat", urls.url("stream")))
        .env("CHAT_TOKEN", token("alice"))
        .env("CHAT_MODE", "resume")
        .output()
        .await
        .expect("node runs (Node 20+ is required)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "node failed: {stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(seen["errors"], json!([]), "{seen}");
    assert_eq!(seen["status"], "ready");
    eprintln!("requests (ms from the start): {}", seen["requests"]);
    let (live, reloaded) = (seen["live"].as_array().unwrap(), seen["reloaded"].as_array().unwrap());
    assert_eq!(reloaded.len(), 4, "the history and one answer: {seen}");
    assert_eq!(reloaded[3]["id"], live[3]["id"], "the same messageId");
    let text = |m: &Value| -> String {
        m["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["type"] == "text")
            .map(|p| p["text"].as_str().unwrap())
            .collect()
    };
    assert_eq!(text(&reloaded[3]), pieces.concat(), "every word once");
    assert_eq!(text(&live[3]), pieces.concat());
}

/// The AI SDK's own approval flow (`tests/node/approval-check.mjs`): a
/// scripted delete asks; the client answers with `addToolApprovalResponse`
/// (and `sendAutomaticallyWhen:
/// lastAssistantMessageIsCompleteWithApprovalResponses` sends it), or, as a
/// forger, with an id the server never made. What the client printed, the
/// project and the task.
async fn approval_round_trip(mode: &str) -> (Value, tests::function_urls::FunctionUrls, String, String) {
    approval_round_trip_with(mode, |task| {
        vec![
            Reply::tool_calls(&[("delete_entity", json!({"kind": "task", "id": task}))]),
            Reply::text(&["Done ", "with it."]),
        ]
    })
    .await
}

/// [`approval_round_trip`], the model's replies (in order) made from the task's id.
async fn approval_round_trip_with(
    mode: &str,
    replies: impl Fn(&str) -> Vec<Reply>,
) -> (Value, tests::function_urls::FunctionUrls, String, String) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("node");
    assert!(
        dir.join("node_modules/ai/package.json").exists(),
        "run the tests with scripts/test.sh (npm ci in tests/node)"
    );
    let urls = tests::function_urls::FunctionUrls::start().await;
    let t = &urls.t;
    let service =
        EntityService::new(shared::entities::store::DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    let project = service.create_project(&uid("alice"), p).await.unwrap().data.project.id;
    let reg = shared::tools::ToolRegistry::new(service);
    let scope = shared::tools::ToolScope::Project { project: project.clone() };
    let ctx = shared::tools::ToolContext { user: uid("alice"), scope, zone: None };
    let call = shared::message::ToolCall {
        id: "setup".into(),
        kind: "function".into(),
        function: shared::message::FunctionCall {
            name: "create_task".into(),
            arguments: json!({"title": "Old checklist"}).to_string(),
        },
    };
    let created = reg.execute(&ctx, &call).await;
    let task = serde_json::from_str::<Value>(&created.content).unwrap()["id"].as_str().unwrap().to_string();
    for reply in replies(&task) {
        t.llm.push(reply);
    }
    let out = tokio::process::Command::new("node")
        .arg(dir.join("approval-check.mjs"))
        .current_dir(&dir)
        .env("CHAT_URL", format!("{}chat", urls.url("stream")))
        .env("CHAT_TOKEN", token("alice"))
        .env("CHAT_BODY", json!({"context_type": "project", "project_id": project.to_string()}).to_string())
        .env("CHAT_TEXT", "Delete the old checklist")
        .env("APPROVAL", mode)
        .output()
        .await
        .expect("node runs (Node 20+ is required)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "node failed: {stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    // The question: the call's input, then the request, and the turn finished.
    let asked = seen["asked"].as_array().unwrap_or_else(|| panic!("{seen}"));
    assert_eq!(asked.len(), 2, "{seen}");
    let part = asked[1]["parts"].as_array().unwrap().iter().find(|p| p["type"] == "tool-delete_entity").cloned();
    let part = part.unwrap_or_else(|| panic!("{seen}"));
    assert_eq!(part["state"], "approval-requested", "{seen}");
    assert!(part["approval"]["id"].as_str().unwrap().starts_with("apv1."));
    assert_eq!(seen["statusAsked"], "ready");
    (seen, urls, project.to_string(), task.to_string())
}

async fn task_left(urls: &tests::function_urls::FunctionUrls, project: &str, task: &str) -> bool {
    let t = &urls.t;
    let service =
        EntityService::new(shared::entities::store::DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let (p, id) = (shared::ids::ProjectId::parse(project).unwrap(), shared::ids::EntityId::parse(task).unwrap());
    service.get(&uid("alice"), &p, shared::entities::EntityKind::Task, &id).await.is_ok()
}

/// The tool part of the continued assistant message, and the message's text.
fn answered(seen: &Value) -> (Value, String) {
    let messages = seen["answered"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "the answer continues the same message: {seen}");
    assert_eq!(messages[1]["id"], seen["asked"][1]["id"], "the same messageId");
    let parts = messages[1]["parts"].as_array().unwrap();
    let tool: Vec<_> = parts.iter().filter(|p| p["type"] == "tool-delete_entity").collect();
    assert_eq!(tool.len(), 1, "{seen}");
    let text = parts.iter().filter(|p| p["type"] == "text").map(|p| p["text"].as_str().unwrap()).collect();
    (tool[0].clone(), text)
}

#[tokio::test]
async fn the_ai_sdks_client_approves_a_delete_and_it_runs_once() {
    let (seen, urls, project, task) = approval_round_trip("approve").await;
    assert_eq!(seen["errors"], json!([]), "{seen}");
    assert_eq!(seen["status"], "ready", "{seen}");
    let requests = seen["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2, "one question, one answer: {seen}");
    assert_eq!((requests[1]["status"].as_u64(), requests[1]["lastRole"].as_str()), (Some(200), Some("assistant")));
    let (tool, text) = answered(&seen);
    assert_eq!(tool["state"], "output-available", "{seen}");
    assert_eq!(text, "Done with it.");
    assert!(!task_left(&urls, &project, &task).await, "the task is gone");
    assert_eq!(urls.t.llm.request_count(), 2);
    assert_eq!(urls.t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn the_ai_sdks_client_denies_a_delete_and_the_model_is_told() {
    let (seen, urls, project, task) = approval_round_trip("deny").await;
    assert_eq!(seen["errors"], json!([]), "{seen}");
    let (tool, _) = answered(&seen);
    assert_eq!(tool["state"], "output-denied", "{seen}");
    assert!(task_left(&urls, &project, &task).await, "the task is still there");
    let last = urls.t.llm.requests().last().cloned().unwrap();
    let told = last["messages"].as_array().unwrap().iter().any(|m| {
        m["role"] == "tool" && m["content"].as_str().unwrap_or("").contains("denied by the user: I still need it")
    });
    assert!(told, "the model read the denial: {last}");
    assert_eq!(urls.t.llm.take_rejections(), vec![]);
}

#[tokio::test]
async fn the_ai_sdks_client_with_a_forged_approval_is_refused_and_nothing_is_deleted() {
    let (seen, urls, project, task) = approval_round_trip("forge").await;
    let requests = seen["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2, "{seen}");
    assert_eq!(requests[1]["status"], 404, "{seen}");
    assert_eq!(seen["status"], "error", "the client shows the refusal: {seen}");
    assert!(task_left(&urls, &project, &task).await, "nothing deleted");
    assert_eq!(urls.t.llm.request_count(), 1, "the model was not asked again");
}

/// The same round trip when the delete is a plan step's: the executor's call
/// is asked about inside the plan call (whose output arrives before the turn
/// ends), the client sends the answer by itself, and the plan goes on in the
/// same message.
#[tokio::test]
async fn the_ai_sdks_client_approves_a_plan_steps_delete_and_the_plan_goes_on() {
    let (seen, urls, project, task) = approval_round_trip_with("approve", |task| {
        let plan = json!({"goal": "Clean up", "stages": [{"id": "a", "name": "Clean", "mode": "sequence", "steps": [
            {"id": "d", "title": "Delete the old checklist", "intent": "update", "executor": "editor",
             "tools": ["delete_entity"], "inputs": []}]}]});
        vec![
            Reply::tool_calls(&[("agent_create_plan", plan)]),
            Reply::tool_calls(&[("delete_entity", json!({"kind": "task", "id": task}))]),
            Reply::text(&["Deleted the checklist."]),
            Reply::text(&["Done ", "with it."]),
        ]
    })
    .await;
    assert_eq!(seen["errors"], json!([]), "{seen}");
    assert_eq!(seen["status"], "ready", "{seen}");
    let plan_call =
        seen["asked"][1]["parts"].as_array().unwrap().iter().find(|p| p["type"] == "tool-agent_create_plan");
    assert_eq!(plan_call.unwrap()["state"], "output-available", "the plan call has its result: {seen}");
    let requests = seen["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2, "the client sent the answer by itself: {seen}");
    let (tool, text) = answered(&seen);
    assert_eq!(tool["state"], "output-available", "{seen}");
    assert_eq!(text, "Done with it.");
    assert!(!task_left(&urls, &project, &task).await, "the task is gone");
    assert_eq!(urls.t.llm.request_count(), 4, "planner, executor; executor again, planner");
    assert_eq!(urls.t.llm.take_rejections(), vec![]);
}
