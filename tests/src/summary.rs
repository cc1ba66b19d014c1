//! Support for the summarizer tests: moto's SQS (started by `scripts/test.sh`,
//! which exports `AWS_ENDPOINT_URL_SQS`), conversations written through the
//! real store, summarizer deps over real parts, and SQS batch events shaped
//! as Lambda delivers them.

use aws_lambda_events::event::sqs::SqsEvent;
use shared::context::TokenCounter;
use shared::ids::{MessageId, RunId, SessionId, TurnId, UserId};
use shared::llm::{OpenAiClient, OpenAiConfig};
use shared::message::{Role, StoredMessage, ToolCall, Usage};
use shared::session::{ContextType, SessionStatus, SessionView, TurnRecord, TurnStatus};
use shared::store::dynamo::DynamoStore;
use shared::store::summary::DynamoSummaryStore;
use shared::store::{Lease, MessagesFrom, Store, TurnEnd, TurnStart};
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
    let s = match session {
        None => {
            let now = shared::now_ms();
            let view = SessionView {
                id: SessionId::new(),
                title: None,
                context_type: ContextType::default(),
                entity_id: None,
                focus: None,
                status: SessionStatus::Active,
                message_count: 0,
                created_at: now,
                last_activity_at: now,
            };
            store.create_session(user, &view, &lease).await.expect("create session")
        }
        Some(sid) => store.acquire_lease(user, sid, &lease).await.expect("lease"),
    };
    let sid = s.view.id.clone();
    let base = s.view.message_count;
    let msg = |seq: u64, role: Role, content: Option<String>| StoredMessage {
        id: MessageId::new(),
        session_id: sid.clone(),
        seq,
        turn_id: turn_id.clone(),
        role,
        content,
        tool_calls: vec![],
        tool_call_id: None,
        error: None,
        stopped: false,
        include_in_context: true,
        usage: None,
        created_at: shared::now_ms(),
    };
    let run_id = RunId::parse(turn_id.as_str()).unwrap();
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
    let end =
        TurnEnd { turn_id: turn_id.clone(), run_id, status: TurnStatus::Completed, messages, usage: Usage::default() };
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
