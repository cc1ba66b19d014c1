//! `--mode cost` (issue 30): DynamoDB capacity per turn by phase for the
//! kinds of turn docs/cost.md prices — talk-only (existing and new session),
//! a tool turn (one tool call, then the answer) — and the frame log's batch
//! interval swept against a resumed stream's first frame. Turns go through
//! the in-process handler (the local adapter) with a metered DynamoDB client
//! ([`crate::capacity`]); each turn's records are those answered between its
//! request and the next turn's.

use crate::capacity::{self, Meter, Phases};
use shared::sse::SseDecoder;
use std::fmt::Write;
use std::time::Duration;
use tests::{Reply, ScriptedLlm};
use tokio::time::Instant;

/// One kind of turn, measured.
pub struct Measured {
    pub label: String,
    pub phases: Phases,
    /// Requests / read units / write units per turn, by operation.
    pub ops: Vec<(String, f64, f64, f64)>,
    /// Mean request sent → body end (what Lambda bills, near enough).
    pub duration: Duration,
}

/// A tool turn: the model calls `list_projects`, then answers in words.
fn tool_reply(answer: Reply) -> Reply {
    Reply::dynamic(move |req| {
        let last = req["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        match last["role"].as_str() {
            Some("tool") => answer.clone(),
            _ => Reply::tool_calls(&[("list_projects", serde_json::json!({}))]),
        }
    })
}

/// A kind of turn.
pub struct Kind<'a> {
    pub label: &'a str,
    /// One `list_projects` call, then the answer.
    pub tools: bool,
    pub new_sessions: bool,
    /// Projects the user has (what `list_projects` returns: each ~250 bytes
    /// of JSON in the tool result).
    pub projects: usize,
}

impl<'a> Kind<'a> {
    pub fn new(label: &'a str, tools: bool, new_sessions: bool, projects: usize) -> Kind<'a> {
        Kind { label, tools, new_sessions, projects }
    }
}

/// The user's projects, before the turns.
async fn seed_projects(dynamo: &aws_sdk_dynamodb::Client, table: &str, n: usize) -> Result<(), String> {
    use shared::entities::{store::DynamoEntityStore, EntityService, NewProject};
    let svc = EntityService::new(DynamoEntityStore::new(dynamo.clone(), table.to_string()));
    let user = shared::ids::UserId::parse("bench-cost").map_err(|e| e.to_string())?;
    for i in 0..n {
        let description =
            format!("Project {i}: the quarterly launch plan, its milestones, owners and the open risks to review.");
        let p = NewProject {
            name: format!("Launch {i}"),
            description: Some(description),
            state: Default::default(),
            context: None,
        };
        svc.create_project(&user, p).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `n` turns (after `warmup`) of one kind through a fresh handler.
pub async fn measure(
    kind: &Kind<'_>,
    answer: Reply,
    flush: Duration,
    (warmup, n): (usize, usize),
) -> Result<Measured, String> {
    let Kind { label, tools, new_sessions, projects } = *kind;
    eprintln!("cost: {label}");
    let meter = Meter::default();
    let dynamo = meter.client().await;
    let table = tests::fresh_table(&dynamo).await;
    seed_projects(&dynamo, &table, projects).await?;
    meter.take();
    let llm = ScriptedLlm::start().await;
    llm.set_default(if tools { tool_reply(answer) } else { answer });
    let mut config = crate::bench_config(&table, &llm.base_url());
    config.frame_flush = flush;
    let app = shared::edge::stream::StreamApp::with_dynamo(config, dynamo);
    let (addr, _) = crate::adapter::serve(crate::adapter::Handler::stream(app)).await;
    let url = format!("http://{addr}/");
    let client = reqwest::Client::builder().no_proxy().build().map_err(|e| e.to_string())?;
    let token = tests::token("bench-cost");
    let mut session: Option<String> = None;
    let mut windows = Vec::new();
    for i in 0..warmup + n {
        let mut body = serde_json::json!({"message": format!("turn {i}"), "context_type": "global"});
        if let (false, Some(s)) = (new_sessions, &session) {
            body["session_id"] = serde_json::json!(s);
        }
        let (asked, start) = (llm.arrivals().len(), Instant::now());
        let sid = run_turn(&client, &url, &token, &body).await?;
        session.get_or_insert(sid);
        let end = Instant::now();
        let model = llm.arrivals().get(asked).copied();
        if i >= warmup {
            windows.push((start, end, model));
        } else {
            meter.take();
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let records = meter.take();
    let ops = capacity::by_op(&records, n);
    let far = Instant::now() + Duration::from_secs(3600);
    let turns: Vec<Phases> = windows
        .iter()
        .enumerate()
        .map(|(i, (from, _, model))| {
            let to = windows.get(i + 1).map_or(far, |w| w.0);
            capacity::by_phase(&records, *from, to, *model)
        })
        .collect();
    let duration = windows.iter().map(|(a, b, _)| *b - *a).sum::<Duration>() / windows.len().max(1) as u32;
    Ok(Measured { label: label.into(), phases: capacity::mean(&turns), ops, duration })
}

/// Posts one turn and reads it to its end; returns its session id.
async fn run_turn(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    body: &serde_json::Value,
) -> Result<String, String> {
    let mut resp = client.post(url).bearer_auth(token).json(body).send().await.map_err(|e| e.to_string())?;
    if resp.status() != 200 {
        return Err(format!("turn answered {}", resp.status()));
    }
    let (mut dec, mut sid, mut error) = (SseDecoder::new(), None, None);
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        for f in dec.feed(&chunk).map_err(|e| e.to_string())? {
            let v: serde_json::Value = serde_json::from_str(&f.data).map_err(|e| e.to_string())?;
            match v["type"].as_str() {
                Some("session") => sid = v["session"]["id"].as_str().map(str::to_string),
                Some("error") => error = Some(v["code"].to_string()),
                _ => {}
            }
        }
    }
    match (error, sid) {
        (Some(e), _) => Err(format!("the turn ended with error {e}")),
        (None, Some(s)) => Ok(s),
        (None, None) => Err("no session event".into()),
    }
}

/// The table of measured kinds: requests / read units / write units per
/// phase, and the dollars per 1,000 turns.
pub fn render(rows: &[Measured], resumes: &[(Duration, Vec<Duration>)]) -> String {
    let mut out = String::from(
        "\n### What a turn costs, by kind (`--mode cost`; mean per turn: requests / RRU / WRU)\n\n\
         Units by AWS's rules (`aws_units`); DynamoDB Local's own count of the total beside them.\n\n\
         | turn | before the model | frame log | rest (start record, finish, budget release) | total | DynamoDB Local's RRU / WRU | DynamoDB $ / 1,000 | Lambda $ / 1,000 (256 MB arm64) | infrastructure $ / 1,000 |\n\
         |---|---|---|---|---|---|--:|--:|--:|\n",
    );
    for m in rows {
        let p = m.phases;
        let cell = |p: capacity::Phase| format!("{:.1} / {:.1} / {:.1}", p.requests, p.read, p.write);
        let ddb = p.total().dollars_per_1000();
        let lambda = 1000.0
            * (m.duration.as_secs_f64() * crate::STREAM_MEMORY_GB * crate::LAMBDA_GB_SECOND + crate::LAMBDA_REQUEST);
        let _ = writeln!(
            out,
            "| {} (mean {:.0} ms) | {} | {} | {} | {} | {:.1} / {:.1} | {ddb:.5} | {lambda:.5} | {:.5} |",
            m.label,
            m.duration.as_secs_f64() * 1000.0,
            cell(p.before_model),
            cell(p.frame_log),
            cell(p.rest),
            cell(p.total()),
            p.total().local_read,
            p.total().local_write,
            ddb + lambda
        );
    }
    for m in rows {
        let ops: Vec<String> =
            m.ops.iter().map(|(op, r, rd, w)| format!("{op} {r:.1} × ({rd:.1} RRU, {w:.1} WRU)")).collect();
        let _ = writeln!(out, "\n- {}, per turn: {}", m.label, ops.join("; "));
    }
    if !resumes.is_empty() {
        out.push_str(
            "\n#### Frame log batch interval: a resumed stream's first frame (reconnect at once after the 3rd `text_delta`; request sent → first byte, ms)\n\n\
             | `FRAME_FLUSH_MS` | n | p50 | p95 | max |\n|--:|--:|--:|--:|--:|\n",
        );
        for (flush, t) in resumes {
            if let Some(s) = crate::stats::Summary::of(t) {
                let _ = writeln!(
                    out,
                    "| {} | {} | {:.1} | {:.1} | {:.1} |",
                    flush.as_millis(),
                    t.len(),
                    ms(s.p50),
                    ms(s.p95),
                    ms(s.max)
                );
            }
        }
    }
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
