//! Request bodies at the edge (`shared::edge::body`, `docs/reliability.md`,
//! "Bad request bodies"): every function reads what a function URL passes on,
//! up to 6 MiB, and answers anything larger with the JSON 413; every operation
//! of the three OpenAPI documents that takes a JSON object refuses any other
//! JSON with `400 invalid_json` and changes nothing. Through the real
//! handlers (and once the real Lambda runtime) on DynamoDB Local and the
//! scripted model; the memory check counts this thread's allocations.

use http_body_util::BodyExt;
use serde_json::{json, Value};
use shared::edge::body::MAX_BODY_BYTES;
use shared::edge::stream::handle_stream;
use shared::sse::StreamEvent;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Duration;
use tests::function_urls::FunctionUrls;
use tests::scripted_llm::roles_and_contents;
use tests::{token, Reply, TestApp};

/// "5.4 MB" and "6.1 MB" in Lambda's unit (its "6 MB" is 6 MiB, [`MAX_BODY_BYTES`]).
const MIB: f64 = 1024.0 * 1024.0;

// ---- a useChat conversation ------------------------------------------------------------

/// One past exchange as `useChat` keeps it from our UI stream: the user's
/// text; the assistant's steps, a tool part, its answer (markdown: newlines,
/// quotes, non-ASCII, all escaped in JSON) and our `data-*` parts.
fn exchange(i: usize) -> [Value; 2] {
    let user = json!({"id": format!("u{i:05}"), "role": "user",
        "parts": [{"type": "text", "text": format!("Turn {i}: what is left on the \"launch\" plan? Keep it short.")}]});
    let rows: String = (0..24)
        .map(|r| format!("| {r} | Task \"{i}-{r}\" — naïve résumé ✓ | todo | 2026-12-{:02} |\n", 1 + r % 28))
        .collect();
    let answer = format!("Here is what is left for turn {i}:\n\n| # | Task | State | Due |\n|---|---|---|---|\n{rows}\nNext: *review* the \\\"risks\\\".");
    let assistant = json!({"id": format!("a{i:05}"), "role": "assistant",
    "metadata": {"turnId": format!("turn-{i}")},
    "parts": [
        {"type": "step-start"},
        {"type": "data-agent-state", "data": {"activity": "thinking", "message": "Thinking…"}},
        {"type": "tool-list_entities", "toolCallId": format!("call_{i}"), "state": "output-available",
            "input": {"kind": "task", "limit": 24},
            "output": format!("{{\"items\": [{{\"id\": \"t-{i}\", \"title\": \"Task {i}\"}}], \"next_cursor\": null}}")},
        {"type": "step-start"},
        {"type": "text", "text": answer, "state": "done"},
        {"type": "data-context-usage", "data": {"used_tokens": 1200 + i, "limit_tokens": 128000}},
    ]});
    [user, assistant]
}

/// The body an unchanged `DefaultChatTransport` posts for chat `id`: every
/// message so far, then the user's new one, `last`; exactly `size` bytes
/// (padded in the first message's metadata).
fn conversation(id: &str, size: usize, last: &str) -> String {
    let new = json!({"id": "new", "role": "user", "parts": [{"type": "text", "text": last}]});
    let mut messages = vec![];
    let mut len = 200 + new.to_string().len();
    for i in 0.. {
        let pair = exchange(i);
        let more: usize = pair.iter().map(|m| m.to_string().len() + 1).sum();
        if len + more > size {
            break;
        }
        len += more;
        messages.extend(pair);
    }
    messages.push(new);
    messages[0]["metadata"]["pad"] = json!("");
    let mut body = json!({"id": id, "messages": messages, "trigger": "submit-message", "messageId": null});
    let unpadded = body.to_string().len();
    assert!(unpadded <= size, "{unpadded} > {size}");
    body["messages"][0]["metadata"]["pad"] = json!("x".repeat(size - unpadded));
    let text = body.to_string();
    assert_eq!(text.len(), size);
    text
}

// ---- requests ----------------------------------------------------------------------------

/// What a client got: status, headers, the whole body.
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    async fn read(resp: http::Response<shared::edge::ResponseBody>) -> Answer {
        let (parts, body) = resp.into_parts();
        let body = tokio::time::timeout(Duration::from_secs(60), body.collect())
            .await
            .expect("the body ended within 60 s")
            .expect("infallible")
            .to_bytes()
            .to_vec();
        Answer { status: parts.status.as_u16(), headers: parts.headers, body }
    }

    /// The JSON error's code, checking it is the one error shape.
    fn error_code(&self) -> String {
        assert_eq!(self.headers.get("content-type").map(|v| v.as_bytes()), Some(&b"application/json"[..]));
        let v: Value = serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body[..self.body.len().min(200)])));
        assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
        assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{v}");
        v["error"]["code"].as_str().expect("a code").to_string()
    }

    /// A turn answered as the UI message stream, to its end.
    fn assert_ui_turn(&self) {
        let text = String::from_utf8_lossy(&self.body);
        assert_eq!(self.status, 200, "{}", text.chars().take(300).collect::<String>());
        assert_eq!(self.headers["x-vercel-ai-ui-message-stream"], "v1");
        assert!(text.contains(r#""type":"finish""#) && text.ends_with("data: [DONE]\n\n"), "{text}");
    }
}

fn request(path: &str, body: String) -> lambda_http::Request {
    let req = http::Request::post(path)
        .header("authorization", format!("Bearer {}", token("alice")))
        .header("content-type", "application/json")
        // As the runtime hands a function URL's JSON body over: text.
        .body(lambda_http::Body::Text(body))
        .unwrap();
    lambda_http::Request::from(req)
}

async fn post(t: &TestApp, path: &str, body: String) -> Answer {
    Answer::read(handle_stream(&t.app, request(path, body)).await).await
}

/// The model's last request ended with the user's `text`, the server's own
/// history before it (the client's copy is not read).
fn asked_with(t: &TestApp, text: &str) {
    let req = t.llm.requests().pop().expect("the model was called");
    let turns = roles_and_contents(&req);
    assert_eq!(turns.last().map(|(r, c)| (r.as_str(), c.as_str())), Some(("user", text)));
    assert!(turns.iter().filter(|(r, _)| r == "user").count() == 1, "a new chat: {turns:?}");
}

// ---- size -------------------------------------------------------------------------------

/// A conversation an unchanged `useChat` sends after a long chat, 5.4 MB,
/// is a turn (it was a plain-text 413: axum's 2 MiB default for `Bytes`).
#[tokio::test]
async fn a_whole_use_chat_conversation_of_5_4_mb_is_a_turn() {
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["Three ", "tasks left."]));
    let body = conversation("long-chat", (5.4 * MIB) as usize, "And what is next?");
    let a = post(&t, "/chat", body).await;
    a.assert_ui_turn();
    assert!(String::from_utf8_lossy(&a.body).contains("tasks left."));
    asked_with(&t, "And what is next?");
}

/// One byte over the largest body a function URL can pass on, a 6.1 MB
/// conversation, and a native turn over 2 MiB are the JSON 413, with no
/// model call and nothing written; the largest body itself is read.
#[tokio::test]
async fn the_largest_body_is_read_and_anything_larger_is_the_json_413() {
    let t = TestApp::new().await;
    for (path, body, code) in [
        ("/chat", conversation("over", MAX_BODY_BYTES + 1, "hi"), "too_large"),
        ("/chat", conversation("over", (6.1 * MIB) as usize, "hi"), "too_large"),
        ("/", json!({"message": "hi", "pad": "x".repeat((6.1 * MIB) as usize)}).to_string(), "too_large"),
        // Over what a turn takes (2 × MAX_MESSAGE_BYTES + 64 KiB), under the edge's limit.
        ("/", format!("{{\"message\": \"hi\", \"pad\": \"{}\"}}", "x".repeat(2_097_153 - 28)), "message_too_large"),
    ] {
        let size = body.len();
        let a = post(&t, path, body).await;
        assert_eq!((a.status, a.error_code().as_str()), (413, code), "{path}, {size} bytes");
    }
    assert_eq!(t.llm.request_count(), 0, "no turn ran");
    assert_eq!(table(&t).await, vec![], "nothing written");
    t.llm.push(Reply::text(&["At the limit."]));
    post(&t, "/chat", conversation("at-limit", MAX_BODY_BYTES, "One more")).await.assert_ui_turn();
    asked_with(&t, "One more");
}

/// The stream function as Lambda runs it (`lambda_http`'s streaming runtime
/// around its router, as `functions/stream` wires it): a function-URL event
/// carrying a 5.4 MB conversation is a turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5_4_mb_conversation_through_the_lambda_runtime_is_a_turn() {
    use tests::runtime_api::{function_url_post, FakeRuntimeApi};
    let mut api = FakeRuntimeApi::start().await;
    api.set_env();
    let t = TestApp::new().await;
    t.llm.push(Reply::text(&["Through ", "Lambda."]));
    let router = shared::edge::stream::router(t.app.clone());
    let runtime = tokio::spawn(lambda_http::run_with_streaming_response_concurrent(router));
    let mut event = function_url_post(&token("alice"), &json!({}));
    event["rawPath"] = json!("/chat");
    event["requestContext"]["http"]["path"] = json!("/chat");
    event["body"] = json!(conversation("via-runtime", (5.4 * MIB) as usize, "Via the runtime?"));
    api.invoke("big-1", event);
    let received = tokio::time::timeout(Duration::from_secs(60), api.responses.recv())
        .await
        .expect("a response within 60 s")
        .expect("a response");
    let body: Vec<u8> = received.body_with_times().into_iter().flat_map(|(_, b)| b.to_vec()).collect();
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("Lambda.") && text.ends_with("data: [DONE]\n\n"), "{text}");
    asked_with(&t, "Via the runtime?");
    runtime.abort();
}

// ---- memory -------------------------------------------------------------------------------

/// Counts the bytes this thread allocates (a reallocation counts its new size).
struct Counting;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

fn count(n: usize) {
    let _ = ALLOCATED.try_with(|a| a.set(a.get() + n as u64));
}

// SAFETY: every call is passed to `System` unchanged; only a thread-local
// counter (no allocation, no destructor) is touched besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes this thread allocated while the stream function took a chat
/// request to its answer's head (routing, auth, reading and parsing the
/// body; the turn itself runs after, in its task).
async fn allocated_until_the_head(t: &TestApp, body: String) -> (u64, Answer) {
    let req = request("/chat", body);
    let before = ALLOCATED.with(Cell::get);
    let resp = handle_stream(&t.app, req).await;
    let used = ALLOCATED.with(Cell::get) - before;
    (used, Answer::read(resp).await)
}

/// A 5.4 MB conversation costs the edge no more memory than a one-message
/// one, to within a small part of its size: its body is neither copied nor
/// parsed into owned values (only the last message is read). The current
/// thread runs the handler (a `current_thread` runtime), so the count is
/// the request's own.
#[tokio::test]
async fn a_big_conversation_is_not_copied_on_its_way_to_the_turn() {
    let t = TestApp::new().await;
    t.llm.set_default(Reply::text(&["Fine."]));
    // Once-per-process work (clients, caches) happens before either is counted.
    post(&t, "/chat", conversation("warm-up", 2_000, "warm up")).await.assert_ui_turn();
    let small = conversation("small-1", 2_000, "What is next?");
    let (one, a) = allocated_until_the_head(&t, small).await;
    a.assert_ui_turn();
    let big = conversation("big-1", (5.4 * MIB) as usize, "What is next?");
    let size = big.len() as u64;
    let (many, a) = allocated_until_the_head(&t, big).await;
    a.assert_ui_turn();
    assert!(
        many.saturating_sub(one) < size / 16,
        "the big body cost {many} bytes of allocation, the small one {one}: copies of a {size}-byte body"
    );
}

// ---- JSON that is not an object --------------------------------------------------------------

/// Every item of the table, comparable.
async fn table(t: &TestApp) -> Vec<BTreeMap<String, String>> {
    let mut items = vec![];
    let mut start = None;
    loop {
        let page = t.dynamo.scan().table_name(&t.table).set_exclusive_start_key(start).send().await.unwrap();
        let of = |i: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>| {
            i.iter().map(|(k, v)| (k.clone(), format!("{v:?}"))).collect::<BTreeMap<String, String>>()
        };
        items.extend(page.items().iter().map(of));
        start = page.last_evaluated_key().cloned();
        if start.is_none() {
            break;
        }
    }
    items.sort();
    items
}

/// A JSON call to a function URL: (status, content type, body).
async fn send(url: &str, method: &str, body: Vec<u8>) -> (u16, String, Vec<u8>) {
    let r = reqwest::Client::new()
        .request(method.to_uppercase().parse().unwrap(), url)
        .bearer_auth(token("alice"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let ct = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    (status, ct, r.bytes().await.unwrap().to_vec())
}

/// An id from a JSON answer.
async fn created(url: String, body: Value, pointer: &str) -> String {
    let (status, _, b) = send(&url, "POST", body.to_string().into_bytes()).await;
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(status, 201, "{v}");
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_else(|| panic!("{pointer} in {v}")).to_string()
}

/// The request body's schema of an operation, its `$ref` resolved.
fn body_schema(doc: &Value, op: &Value) -> Option<Value> {
    let schema = op.pointer("/requestBody/content/application~1json/schema")?;
    let name = schema["$ref"].as_str().map(|r| r.trim_start_matches("#/components/schemas/"));
    Some(name.map_or(schema.clone(), |n| doc["components"]["schemas"][n].clone()))
}

/// The schema says "an object": `type: object`, or each of its `oneOf` does.
fn is_object(schema: &Value) -> bool {
    schema["type"] == "object"
        || schema["oneOf"].as_array().is_some_and(|b| !b.is_empty() && b.iter().all(|s| s["type"] == "object"))
}

/// The object's documented fields as an array, by position (what serde's
/// derived structs would read as the object): a plausible value each.
fn positional(schema: &Value) -> Value {
    let props = schema["properties"].as_object().or_else(|| schema["oneOf"][0]["properties"].as_object());
    let value = |p: &Value| match p["type"].as_str() {
        _ if p["enum"].is_array() => {
            p["enum"].as_array().unwrap().iter().find(|v| !v.is_null()).cloned().unwrap_or(json!("x"))
        }
        Some("boolean") => json!(true),
        Some("integer" | "number") => json!(1),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => json!("Launch"),
    };
    Value::Array(props.into_iter().flatten().map(|(_, p)| value(p)).collect())
}

/// Every operation of the three committed OpenAPI documents that takes a
/// JSON object, called with an array (by position, as serde would read the
/// object, among others), a string, a number, a boolean and `null`: each
/// is `400 invalid_json` with the one error body, and a body over 6 MiB is
/// the JSON 413. The path ids are real (a project, its task, an event, a
/// session waiting on the user's yes to delete the task), so a body read as
/// the object would write: afterwards the table is as it was, the task
/// still there, the model not called again.
#[tokio::test]
async fn every_operation_that_takes_an_object_refuses_any_other_json_and_changes_nothing() {
    let urls = FunctionUrls::start().await;
    let t = &urls.t;
    let entities = urls.url("entities");
    let project = created(format!("{entities}projects"), json!({"name": "Launch"}), "/data/project/id").await;
    let task =
        created(format!("{entities}projects/{project}/tasks"), json!({"title": "Old checklist"}), "/data/id").await;
    let event = created(
        format!("{entities}events"),
        json!({"title": "Review", "start": "2026-12-01T10:00", "timezone": "Europe/Berlin"}),
        "/data/id",
    )
    .await;
    t.llm.push(Reply::tool_calls(&[("delete_entity", json!({"kind": "task", "id": task}))]));
    let asked = t
        .turn(
            "alice",
            json!({"message": "Delete the old checklist", "context_type": "project",
                "projectFocus": {"projectId": project}}),
        )
        .await;
    let approval = asked
        .events
        .iter()
        .find_map(|e| match e {
            StreamEvent::ApprovalRequired { approval_id, .. } => Some(approval_id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("approval_required: {:?}", asked.kinds()));
    let ids = [
        ("{project_id}", project.clone()),
        ("{entity_id}", task.clone()),
        ("{event_id}", event),
        ("{id}", asked.session_id()),
        ("{approval_id}", approval),
    ];
    let before = table(t).await;
    let calls = t.llm.request_count();

    let mut walked = BTreeMap::new();
    for (file, function) in
        [("openapi.json", "entities"), ("openapi-stream.json", "stream"), ("openapi-prewarm.json", "prewarm")]
    {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(file);
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for (template, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let Some(schema) = body_schema(&doc, op) else { continue };
                let name = format!("{} {template} ({file})", method.to_uppercase());
                assert!(is_object(&schema), "{name} documents an object: {schema}");
                for status in ["400", "413"] {
                    assert!(op["responses"][status].is_object(), "{name} documents its {status}");
                }
                let url =
                    ids.iter().fold(format!("{}{}", urls.url(function), &template[1..]), |u, (k, v)| u.replace(k, v));
                let bodies = [json!([]), json!([true]), json!([["create_task"]]), positional(&schema)]
                    .into_iter()
                    .chain([json!("Launch"), json!(1), json!(true), Value::Null]);
                for body in bodies {
                    let (status, ct, b) = send(&url, method, body.to_string().into_bytes()).await;
                    let answer: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
                    assert_eq!((status, ct.as_str()), (400, "application/json"), "{name} with {body}: {answer}");
                    assert_eq!(answer["error"]["code"], "invalid_json", "{name} with {body}: {answer}");
                    assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
                }
                let over = format!("{{\"pad\": \"{}\"}}", "x".repeat(MAX_BODY_BYTES));
                let (status, ct, b) = send(&url, method, over.into_bytes()).await;
                let answer: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
                assert_eq!(
                    (status, ct.as_str(), &answer["error"]["code"]),
                    (413, "application/json", &json!("too_large")),
                    "{name}"
                );
                *walked.entry(file).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(walked.len(), 3, "each document has operations with a body: {walked:?}");
    assert_eq!(table(t).await, before, "nothing changed in the table");
    assert_eq!(t.llm.request_count(), calls, "no turn ran");
    let (status, ..) = send(&format!("{entities}projects/{project}/tasks/{task}"), "GET", vec![]).await;
    assert_eq!(status, 200, "the task waiting on the user's yes is still there");
}
