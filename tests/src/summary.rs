//! Support for the summarizer tests: moto's SQS (started by `scripts/test.sh`,
//! which exports `AWS_ENDPOINT_URL_SQS`), conversations written through the
//! real store, summarizer deps over real parts, and SQS batch events shaped
//! as Lambda delivers them.

use aws_lambda_events::event::sqs::SqsEvent;
use shared::context::TokenCounter;
use shared::ids::{RunId, SessionId, TurnId, UserId};
use shared::llm::{OpenAiClient, OpenAiConfig};
use shared::message::{Role, StoredMessage, ToolCall, Usage};
use shared::session::store::{Lease, Leases, MessagesFrom, SessionLog, Sessions, TurnEnd, TurnStart};
use shared::session::{ContextType, SessionView, TurnRecord, TurnStatus};
use shared::store::dynamo::DynamoStore;
use shared::summary::store::DynamoSummaryStore;
use shared::summary::{SummarizerDeps, SummaryConfig, TurnCompleted};
use std::sync::Arc;
use std::time::Duration;

pub fn sqs_endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL_SQS")
        .expect("AWS_ENDPOINT_URL_SQS is not set: run the tests with scripts/test.sh, which starts moto_server")
}

pub fn sqs_client_at(endpoint: &str) -> aws_sdk_sqs::Client {
    let conf = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .http_client(shared::store::aws::http_client())
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new("local", "local", None, None, "tests"))
        .build();
    aws_sdk_sqs::Client::from_conf(conf)
}

pub fn sqs_client() -> aws_sdk_sqs::Client {
    sqs_client_at(&sqs_endpoint())
}

/// A new FIFO queue (explicit deduplication ids, as the publisher sends them).
pub async fn fresh_fifo_queue(client: &aws_sdk_sqs::Client) -> String {
    let name = format!("turns-{}.fifo", uuid::Uuid::new_v4().simple());
    client
        .create_queue()
        .queue_name(name)
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .expect("create FIFO queue")
        .queue_url
        .expect("queue url")
}

/// One message after the user's, as a turn would store it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub role: Role,
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
}

impl Reply {
    pub fn text(t: impl Into<String>) -> Reply {
        Reply { role: Role::Assistant, content: Some(t.into()), tool_calls: vec![], tool_call_id: None }
    }
    pub fn calls(calls: Vec<ToolCall>) -> Reply {
        Reply { role: Role::Assistant, content: None, tool_calls: calls, tool_call_id: None }
    }
    pub fn result(call_id: &str, t: impl Into<String>) -> Reply {
        Reply { role: Role::Tool, content: Some(t.into()), tool_calls: vec![], tool_call_id: Some(call_id.into()) }
    }
}

/// Writes one turn through the store exactly as the stream does: create or
/// lease the session, `start_turn` with the user message, `finish_turn` with
/// the replies. Returns the session and the turn's event.
pub async fn write_turn(
    store: &DynamoStore,
    user: &UserId,
    session: Option<&SessionId>,
    user_text: &str,
    replies: Vec<Reply>,
) -> TurnCompleted {
    let turn_id = TurnId::new();
    let lease = Lease { turn_id: turn_id.clone(), until_ms: shared::now_ms() + 30_000 };
    let run_id = RunId::parse(turn_id.as_str()).unwrap();
    let s = match session {
        None => {
            let view = SessionView::new(ContextType::default(), None, None);
            store.create_session(user, &view, &lease, &run_id).await.expect("create session")
        }
        Some(sid) => store.acquire_lease(user, sid, &lease).await.expect("lease"),
    };
    let sid = s.view.id.clone();
    let base = s.view.message_count;
    let msg = |seq: u64, role: Role, content: Option<String>| {
        StoredMessage::new(sid.clone(), seq, turn_id.clone(), role, content)
    };
    let start = TurnStart {
        turn: TurnRecord {
            turn_id: turn_id.clone(),
            run_id: run_id.clone(),
            status: TurnStatus::Running,
            user_message_seq: base + 1,
            assistant_message_seq: None,
            started_at: shared::now_ms(),
            ended_at: None,
        },
        user_message: msg(base + 1, Role::User, Some(user_text.to_string())),
        context_type: ContextType::default(),
        entity_id: None,
        focus: None,
        title: None,
    };
    store.start_turn(user, &sid, &start).await.expect("start turn");
    let messages: Vec<StoredMessage> = replies
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let mut m = msg(base + 2 + i as u64, r.role, r.content);
            m.tool_calls = r.tool_calls;
            m.tool_call_id = r.tool_call_id;
            m
        })
        .collect();
    let last = base + 1 + messages.len() as u64;
    let end = TurnEnd {
        turn_id: turn_id.clone(),
        run_id,
        status: TurnStatus::Completed,
        messages,
        usage: Usage::default(),
        scope: None,
    };
    store.finish_turn(user, &sid, &end).await.expect("finish turn");
    TurnCompleted { user_id: user.clone(), session_id: sid, turn_id, last_message_seq: last }
}

/// A session of `turns` plain question/answer turns; the last turn's event.
pub async fn chatty_session(store: &DynamoStore, user: &UserId, turns: usize) -> TurnCompleted {
    let mut ev = write_turn(store, user, None, "question 1", vec![Reply::text("answer 1")]).await;
    for i in 2..=turns {
        ev = write_turn(
            store,
            user,
            Some(&ev.session_id),
            &format!("question {i}"),
            vec![Reply::text(format!("answer {i}"))],
        )
        .await;
    }
    ev
}

/// Every message of the session, oldest first.
pub async fn all_messages(store: &DynamoStore, user: &UserId, session: &SessionId) -> Vec<StoredMessage> {
    let mut out: Vec<StoredMessage> = Vec::new();
    loop {
        let after = out.last().map_or(0, |m| m.seq);
        let page = store.messages_page(user, session, MessagesFrom::After(after), 100).await.expect("messages");
        if page.is_empty() {
            return out;
        }
        out.extend(page);
    }
}

/// Summarizer deps over the test's table and scripted model.
pub fn summarizer_deps(
    dynamo: &aws_sdk_dynamodb::Client,
    table: &str,
    llm_base_url: &str,
    tweak: impl FnOnce(&mut SummaryConfig),
) -> SummarizerDeps {
    let mut config = SummaryConfig::defaults("scripted-summarizer");
    tweak(&mut config);
    let llm = OpenAiClient::new(OpenAiConfig {
        base_url: llm_base_url.to_string(),
        api_key: Some("test-key".into()),
        model: config.model.clone(),
        connect_timeout: Duration::from_secs(2),
        first_token_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        max_retries: 0,
        max_tokens: None,
    });
    SummarizerDeps {
        store: Arc::new(DynamoStore::new(dynamo.clone(), table)),
        summaries: Arc::new(DynamoSummaryStore::new(dynamo.clone(), table)),
        llm: Arc::new(llm),
        config,
        counter: TokenCounter::Estimate,
        large_paste_chars: 8_000,
        agent_state: Some(Arc::new(shared::agent_state::store::DynamoAgentStateStore::new(dynamo.clone(), table))),
    }
}

/// The summarizer model's answer covering `compress` and keeping `recent`.
pub fn answer(summary: &str, compress: &[StoredMessage], recent: &[StoredMessage]) -> String {
    serde_json::json!({
        "summary": summary,
        "kept_message_ids": recent.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        "dropped_message_ids": compress.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        "agent_state_item_updates": [],
        "agent_state_updates": {},
    })
    .to_string()
}

/// An SQS batch as Lambda's event source mapping delivers it from a FIFO queue.
pub fn sqs_event(records: &[(&str, &TurnCompleted)]) -> SqsEvent {
    let records: Vec<serde_json::Value> = records
        .iter()
        .enumerate()
        .map(|(i, (id, ev))| {
            serde_json::json!({
                "messageId": id,
                "receiptHandle": format!("rh-{id}"),
                "body": serde_json::to_string(ev).unwrap(),
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": shared::now_ms().to_string(),
                    "SenderId": "local",
                    "ApproximateFirstReceiveTimestamp": shared::now_ms().to_string(),
                    "SequenceNumber": format!("{:020}", i + 1),
                    "MessageGroupId": ev.session_id.as_str(),
                    "MessageDeduplicationId": ev.turn_id.as_str(),
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:turns.fifo",
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).expect("an SqsEvent")
}

/// A scripted summarizer's faithful answer to the request the summarizer
/// sends (`messages[1]` holds its input JSON): every message it was given is
/// covered, every recent one kept, and the UUIDs of the covered messages and
/// of the previous summary are carried forward, so validation accepts it.
/// `None` when the request is not a summarizer request of that shape.
pub fn scripted_summary_answer(request: &serde_json::Value) -> Option<String> {
    let input: serde_json::Value = serde_json::from_str(request["messages"][1]["content"].as_str()?).ok()?;
    let messages = input["messages"].as_array()?;
    let ids: Vec<&str> = messages.iter().filter_map(|m| m["id"].as_str()).collect();
    let recent: Vec<&str> = input["recent_message_ids"].as_array()?.iter().filter_map(|v| v.as_str()).collect();
    let seqs: Vec<u64> = messages.iter().filter_map(|m| m["seq"].as_u64()).collect();
    let mut carried: Vec<String> = input["previous_summary"].as_str().map(uuids_in).unwrap_or_default();
    for m in messages {
        carried.extend(m["content"].as_str().map(uuids_in).unwrap_or_default());
    }
    carried.sort();
    carried.dedup();
    let users = messages.iter().filter(|m| m["role"] == "user").count();
    let tools = messages.iter().filter(|m| m["role"] == "tool").count();
    let mut summary = format!(
        "Messages {}-{}: the user asked {users} more questions, each answered; {tools} tool results were read.",
        seqs.first().copied().unwrap_or(0),
        seqs.last().copied().unwrap_or(0),
    );
    if !carried.is_empty() {
        summary.push_str(&format!(" Entities: {}.", carried.join(", ")));
    }
    Some(
        serde_json::json!({
            "summary": summary,
            "kept_message_ids": recent,
            "dropped_message_ids": ids,
            "agent_state_item_updates": [],
            "agent_state_updates": {},
        })
        .to_string(),
    )
}

fn uuids_in(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_hexdigit() || c == '-'))
        .filter(|w| uuid::Uuid::try_parse(w).is_ok() && w.len() == 36)
        .map(str::to_ascii_lowercase)
        .collect()
}

/// What one [`drain_to_summarizer`] saw.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Drained {
    pub records: usize,
    pub batches: usize,
    pub failed: usize,
}

/// A queue's ARN, as the event source mapping puts it on each record.
pub async fn queue_arn(client: &aws_sdk_sqs::Client, queue_url: &str) -> String {
    use aws_sdk_sqs::types::QueueAttributeName as Q;
    let got = client.get_queue_attributes().queue_url(queue_url).attribute_names(Q::QueueArn).send().await;
    got.ok()
        .and_then(|r| r.attributes().and_then(|a| a.get(&Q::QueueArn).cloned()))
        .unwrap_or_else(|| "arn:aws:sqs:us-east-1:000000000000:turns.fifo".into())
}

/// Received SQS messages as the batch event Lambda's event source mapping
/// builds from them: body, messageId, receiptHandle, the system attributes
/// (MessageGroupId, MessageDeduplicationId, SequenceNumber, ...).
pub fn sqs_event_from_messages(queue_arn: &str, messages: &[aws_sdk_sqs::types::Message]) -> SqsEvent {
    let records: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| {
            let attributes: serde_json::Map<String, serde_json::Value> = m
                .attributes()
                .map(|a| a.iter().map(|(k, v)| (k.as_str().to_string(), serde_json::Value::from(v.as_str()))).collect())
                .unwrap_or_default();
            serde_json::json!({
                "messageId": m.message_id(),
                "receiptHandle": m.receipt_handle(),
                "body": m.body(),
                "attributes": attributes,
                "messageAttributes": {},
                "md5OfBody": m.md5_of_body().unwrap_or(""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).expect("an SqsEvent")
}

/// One pass of a local event source mapping: receives what the queue holds
/// (batches of up to 10), hands each batch to [`handle_batch`](shared::summary::handle_batch),
/// deletes the records not reported in `batchItemFailures` and makes the
/// failed ones visible again at once (Lambda would wait out the visibility
/// timeout). Returns when a receive comes back empty.
pub async fn drain_to_summarizer(
    client: &aws_sdk_sqs::Client,
    queue_url: &str,
    queue_arn: &str,
    deps: &SummarizerDeps,
) -> Drained {
    let mut out = Drained::default();
    // A failed record is redelivered at once; bound the passes so a session
    // that always fails cannot loop forever.
    for _ in 0..20 {
        let got = client
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive");
        let messages = got.messages();
        if messages.is_empty() {
            break;
        }
        out.batches += 1;
        out.records += messages.len();
        let resp = shared::summary::handle_batch(deps, sqs_event_from_messages(queue_arn, messages)).await;
        let failed: std::collections::HashSet<&str> =
            resp.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        out.failed += failed.len();
        for m in messages {
            let handle = m.receipt_handle().expect("receipt handle");
            if failed.contains(m.message_id().unwrap_or_default()) {
                client
                    .change_message_visibility()
                    .queue_url(queue_url)
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .send()
                    .await
                    .expect("release a failed record");
            } else {
                client.delete_message().queue_url(queue_url).receipt_handle(handle).send().await.expect("delete");
            }
        }
    }
    out
}

/// One summarizer test's real parts: a fresh table and a scripted model.
pub struct SummaryParts {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub table: String,
    pub llm: crate::ScriptedLlm,
}

impl SummaryParts {
    pub async fn new() -> SummaryParts {
        let dynamo = crate::dynamo_client().await;
        let table = crate::fresh_table(&dynamo).await;
        SummaryParts { dynamo, table, llm: crate::ScriptedLlm::start().await }
    }
    pub fn store(&self) -> DynamoStore {
        DynamoStore::new(self.dynamo.clone(), self.table.clone())
    }
    pub fn summaries(&self) -> DynamoSummaryStore {
        DynamoSummaryStore::new(self.dynamo.clone(), self.table.clone())
    }
    pub fn states(&self) -> shared::agent_state::store::DynamoAgentStateStore {
        shared::agent_state::store::DynamoAgentStateStore::new(self.dynamo.clone(), self.table.clone())
    }
}

/// The summarizer behind a local Lambda invoke endpoint, as `cargo lambda
/// watch` serves it to `scripts/local-event-source.py`: each `POST` body is an
/// SQS batch event, handled by [`handle_batch`](shared::summary::handle_batch),
/// answered with its `batchItemFailures`. Returns the URL and the bodies of
/// each batch's records, in order.
pub async fn summarizer_invoke_endpoint(deps: SummarizerDeps) -> (String, Arc<std::sync::Mutex<Vec<Vec<String>>>>) {
    use http_body_util::BodyExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let batches: Arc<std::sync::Mutex<Vec<Vec<String>>>> = Arc::default();
    let (deps, seen) = (Arc::new(deps), batches.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let (deps, seen) = (deps.clone(), seen.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (deps, seen) = (deps.clone(), seen.clone());
                    async move {
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let event: SqsEvent = serde_json::from_slice(&body).expect("an SQS batch event");
                        let bodies = event.records.iter().map(|r| r.body.clone().unwrap_or_default()).collect();
                        seen.lock().unwrap().push(bodies);
                        let resp = shared::summary::handle_batch(&deps, event).await;
                        let json = serde_json::to_vec(&resp).expect("json");
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                            bytes::Bytes::from(json),
                        )))
                    }
                });
                let io = hyper_util::rt::TokioIo::new(tcp);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
            });
        }
    });
    (format!("http://{addr}/2015-03-31/functions/summarizer/invocations"), batches)
}

/// Runs `scripts/local-event-source.py` with `args` against moto's SQS (the
/// tests' `AWS_ENDPOINT_URL_SQS`) and `PYTHON` (default `python3`): its exit
/// status, stdout and stderr.
pub async fn local_event_source(args: &[&str]) -> std::process::Output {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/local-event-source.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let endpoint = sqs_endpoint();
    // A blocking child (tokio's process feature is not enabled); the runtime
    // keeps serving the invoke endpoint the script calls meanwhile.
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .args(args)
            .env("AWS_ENDPOINT_URL_SQS", endpoint)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env_remove("SUMMARY_MAX_RECEIVE_COUNT")
            .output()
            .expect("run scripts/local-event-source.py")
    })
    .await
    .expect("the child's thread")
}

/// `maxReceiveCount` of the summarizer queue's redrive policy in
/// `infra/template.yaml` (the one number the local event source must follow).
pub fn template_max_receive_count() -> u32 {
    let template = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml"))
        .expect("infra/template.yaml");
    let counts: Vec<u32> = template
        .lines()
        .filter_map(|l| l.trim().strip_prefix("maxReceiveCount:"))
        .map(|v| v.split('#').next().unwrap_or("").trim().parse().expect("a number"))
        .collect();
    assert_eq!(counts.len(), 1, "one redrive policy in the template: {counts:?}");
    counts[0]
}
