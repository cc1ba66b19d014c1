//! The web and utility tools in real turns: the stream handler, DynamoDB
//! Local, a scripted model, and a local web server standing in for public
//! sites and search providers (reached only through the allow-list settings
//! production never sets). Every refused `web_visit` case is a tool error the
//! model reads; the turn goes on to its answer.

use serde_json::{json, Value};
use shared::config::{SearchConfig, SearchProvider};
use shared::entities::store::DynamoEntityStore;
use shared::entities::{Edge, EdgeEnd, EntityKind, EntityService, NewProject};
use shared::ids::UserId;
use shared::sse::{OperationStatus, StreamEvent, Telemetry};
use std::time::Duration;
use tests::pages::{Answer, Pages};
use tests::{Reply, TestApp};

const PRICING: &str = r#"<html><head><title>Pricing | Example</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<article><h1>Pricing</h1><p>The starter plan costs 12 euros a month and includes five projects, unlimited
tasks and email support on working days. Teams that need more than that get the growth plan instead.</p>
<h2>Growth</h2><p>The growth plan costs 49 euros a month, with unlimited projects, single sign-on, priority
support and an uptime commitment of 99.9 percent, billed yearly or monthly as the customer prefers.</p>
</article><footer>Cookie settings</footer></body></html>"#;

fn r(path: &str, a: Answer) -> (String, Answer) {
    (path.to_string(), a)
}

/// The tool messages of a recorded model request: (tool_call_id, content JSON).
fn tool_messages(req: &Value) -> Vec<(String, Value)> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            let content = serde_json::from_str(m["content"].as_str().unwrap()).unwrap_or(Value::Null);
            (m["tool_call_id"].as_str().unwrap().to_string(), content)
        })
        .collect()
}

fn offered(req: &Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .map_or(vec![], |t| t.iter().map(|d| d["function"]["name"].as_str().unwrap().to_string()).collect())
}

fn summaries(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Operation { status: OperationStatus::Success, summary, .. } => summary.clone(),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_global_turn_searches_the_web_then_reads_a_result() {
    let searx = |url: String| {
        json!({"query": "example pricing", "number_of_results": 1, "results": [
            {"url": url, "title": "Pricing | Example", "content": "Plans and prices", "engine": "duckduckgo"}]})
        .to_string()
    };
    let pages = Pages::start(vec![r("/pricing", Answer::ok("text/html; charset=utf-8", PRICING))]).await;
    let provider = Pages::start(vec![r("/search", Answer::ok("application/json", searx(pages.url("/pricing"))))]).await;
    let (port, base) = (pages.port, provider.url(""));
    let t = TestApp::with_config(move |c| {
        c.dev_events = true;
        c.web.allow_cidrs = vec!["127.0.0.1/32".parse().unwrap()];
        c.web.allow_ports = vec![port];
        c.web.search = Some(SearchConfig { provider: SearchProvider::Searxng, api_key: None, base_url: base });
    })
    .await;
    t.llm.push(Reply::tool_calls(&[("web_search", json!({"query": "example pricing"}))]));
    t.llm.push(Reply::dynamic(|req| {
        let (_, found) = tool_messages(req).pop().expect("the search result");
        let url = found["results"][0]["url"].as_str().expect("a result url").to_string();
        Reply::tool_calls(&[("web_visit", json!({ "url": url }))])
    }));
    t.llm.push(Reply::text(&["The starter plan is 12 euros a month."]));
    let turn = t.turn("alice", json!({"message": "what does example.org charge?", "context_type": "global"})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);

    let requests = t.llm.requests();
    let tools = offered(&requests[0]);
    assert!(tools.contains(&"web_search".into()) && tools.contains(&"web_visit".into()), "{tools:?}");
    let (_, page) = tool_messages(&requests[2]).pop().unwrap();
    assert!(page["content"].as_str().unwrap().contains("12 euros a month"), "{page}");
    assert!(!page["content"].as_str().unwrap().contains("Cookie settings"), "{page}");
    assert_eq!(
        summaries(&turn.events),
        ["Searched the web for “example pricing”".to_string(), "Read 127.0.0.1/pricing".to_string()]
    );
    assert_eq!(provider.requests(), ["/search?q=example+pricing&format=json"]);
    // DEV_EVENTS: each call's time.
    let timed: Vec<&str> = turn
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Telemetry(Telemetry::ToolExecution { tool, ok: true, .. }) => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(timed, ["web_search", "web_visit"]);
}

/// Every refused `web_visit`, in one round of a real turn, with the code the model reads.
fn refused_cases(pages: &Pages, port: u16) -> Vec<(String, &'static str)> {
    let mut cases: Vec<(String, &'static str)> = [
        format!("http://127.0.0.1:{port}/pricing"),
        format!("http://localhost:{port}/pricing"),
        format!("http://[::1]:{port}/pricing"),
        format!("http://[::ffff:127.0.0.1]:{port}/pricing"),
        format!("http://2130706433:{port}/pricing"),
        format!("http://0x7f.1:{port}/pricing"),
        format!("http://017700000001:{port}/pricing"),
        "http://169.254.169.254/latest/meta-data/".into(),
        "http://10.0.0.1/".into(),
        "http://172.16.0.1/".into(),
        "http://192.168.1.1/".into(),
        "http://100.64.0.1/".into(),
        "http://224.0.0.1/".into(),
        "http://255.255.255.255/".into(),
        "http://0.0.0.0/".into(),
        "http://192.0.2.1/".into(),
        "http://[fc00::1]/".into(),
        "http://[fe80::1]/".into(),
        pages.url("/to-metadata"),
    ]
    .into_iter()
    .map(|u| (u, "blocked_address"))
    .collect();
    cases.extend([
        (pages.url("/hops/6"), "too_many_redirects"),
        (format!("http://user:secret@127.0.0.2:{port}/pricing"), "credentials_in_url"),
        ("ftp://127.0.0.2/file".into(), "unsupported_scheme"),
        ("file:///etc/passwd".into(), "unsupported_scheme"),
        ("http://127.0.0.2:8081/".into(), "port_not_allowed"),
        (pages.url("/big"), "too_large"),
        (pages.url("/slow"), "timeout"),
        (pages.url("/report.pdf"), "unsupported_content_type"),
    ]);
    cases
}

#[tokio::test]
async fn every_refused_visit_is_a_tool_error_and_the_turn_answers() {
    let mut routes = vec![
        r("/pricing", Answer::ok("text/html", PRICING)),
        r("/to-metadata", Answer::redirect("http://169.254.169.254/latest/meta-data/")),
        r("/big", Answer::ok("text/plain", "x".repeat(10_000))),
        r("/slow", Answer::trickle()),
        r("/report.pdf", Answer::ok("application/pdf", "%PDF-1.7")),
        r("/hops/0", Answer::ok("text/plain", "arrived")),
    ];
    for n in 1..=6 {
        routes.push(r(&format!("/hops/{n}"), Answer::redirect(format!("/hops/{}", n - 1))));
    }
    // Served on 127.0.0.2, the one address allowed: 127.0.0.1 and `localhost` stay refused.
    let pages = Pages::start_on("127.0.0.2", routes).await;
    let port = pages.port;
    let t = TestApp::with_config(move |c| {
        c.web.allow_cidrs = vec!["127.0.0.2/32".parse().unwrap()];
        c.web.allow_ports = vec![port];
        c.web.fetch_max_bytes = 4_096;
        c.web.fetch_timeout = Duration::from_secs(3);
        c.web.max_visits_per_turn = 100;
        c.tool_concurrency = 8;
    })
    .await;
    let cases = refused_cases(&pages, port);
    let calls: Vec<(&str, Value)> = cases.iter().map(|(u, _)| ("web_visit", json!({ "url": u }))).collect();
    t.llm.push(Reply::tool_calls(&calls));
    t.llm.push(Reply::tool_calls(&[("web_visit", json!({ "url": pages.url("/hops/5") }))]));
    t.llm.push(Reply::text(&["None of those could be read."]));
    // The addresses are the user's: a visit to one nobody gave is refused before the guard.
    let given: Vec<String> = cases.iter().map(|(u, _)| u.clone()).chain([pages.url("/hops/5")]).collect();
    let message = format!("read these: {}", given.join(" "));
    let turn = t.turn("alice", json!({"message": message, "context_type": "global"})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    assert_eq!(turn.kinds().last(), Some(&"done"));

    let results = tool_messages(&t.llm.requests()[1]);
    assert_eq!(results.len(), cases.len());
    for ((url, code), (_, result)) in cases.iter().zip(&results) {
        assert_eq!(result["error"]["code"], *code, "{url}: {result}");
    }
    // Five redirects are followed.
    let (_, arrived) = tool_messages(&t.llm.requests()[2]).pop().unwrap();
    assert_eq!(arrived["content"], "arrived", "{arrived}");
    // The allowed server saw only the allowed cases' requests, never the refused hops.
    let seen = pages.requests();
    assert!(seen.iter().all(|p| !p.contains("pricing")), "{seen:?}");
}

/// An address only the model wrote is not fetched: asked "what can you do?",
/// the local model visited www.example.com and sites it made up. The call's
/// result says why; the page server never hears of it.
#[tokio::test]
async fn an_address_nobody_gave_is_refused_before_it_goes_out() {
    let pages = Pages::start(vec![r("/pricing", Answer::ok("text/html; charset=utf-8", PRICING))]).await;
    let port = pages.port;
    let t = TestApp::with_config(move |c| {
        c.web.allow_cidrs = vec!["127.0.0.1/32".parse().unwrap()];
        c.web.allow_ports = vec![port];
    })
    .await;
    t.llm.push(Reply::tool_calls(&[("web_visit", json!({ "url": pages.url("/pricing") }))]));
    t.llm.push(Reply::text(&["I can read pages you give me."]));
    let turn = t.turn("alice", json!({"message": "What can you do?", "context_type": "global"})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let (_, refused) = tool_messages(&t.llm.requests()[1]).pop().unwrap();
    assert_eq!(refused["error"]["code"], "address_not_given", "{refused}");
    assert!(pages.requests().is_empty(), "{:?}", pages.requests());

    // Given in the next message, the same address is read.
    t.llm.push(Reply::tool_calls(&[("web_visit", json!({ "url": pages.url("/pricing") }))]));
    t.llm.push(Reply::text(&["12 euros."]));
    let message = format!("Then read {}", pages.url("/pricing"));
    let sid = turn.session_id();
    let read = t.turn("alice", json!({"message": message, "context_type": "global", "session_id": sid})).await;
    assert_eq!(read.error_code(), None, "{:?}", read.events);
    let (_, page) = tool_messages(&t.llm.requests()[3]).pop().unwrap();
    assert!(page["content"].as_str().unwrap_or_default().contains("12 euros a month"), "{page}");
}

#[tokio::test]
async fn caps_rate_limits_and_a_missing_provider_are_what_the_model_reads() {
    let limited =
        Pages::start(vec![r("/search", Answer::status(429, "application/json", r#"{"error": "rate"}"#))]).await;
    let base = limited.url("");
    let t = TestApp::with_config(move |c| {
        c.web.max_visits_per_turn = 1;
        c.web.search = Some(SearchConfig { provider: SearchProvider::Searxng, api_key: None, base_url: base });
    })
    .await;
    t.llm.push(Reply::tool_calls(&[
        ("web_search", json!({"query": "anything"})),
        ("web_visit", json!({"url": "http://10.0.0.1/"})),
        ("web_visit", json!({"url": "http://10.0.0.2/"})),
    ]));
    t.llm.push(Reply::text(&["Search is busy."]));
    let turn =
        t.turn("alice", json!({"message": "look it up on 10.0.0.1 and 10.0.0.2", "context_type": "brain_dump"})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let results = tool_messages(&t.llm.requests()[1]);
    assert_eq!(results[0].1["error"]["code"], "rate_limited", "{:?}", results[0]);
    assert_eq!(results[1].1["error"]["code"], "blocked_address");
    assert!(results[2].1["error"].as_str().unwrap_or_default().contains("at most 1 times"), "{:?}", results[2]);
    assert!(turn.text().contains("Search is busy."));

    // No provider: web_search is not offered (web_visit is), and never in the calendar.
    let plain = TestApp::new().await;
    plain.llm.push(Reply::text(&["Hi."]));
    plain.turn("alice", json!({"message": "hi", "context_type": "global"})).await;
    plain.llm.push(Reply::text(&["Hi."]));
    plain.turn("alice", json!({"message": "hi", "context_type": "calendar"})).await;
    let requests = plain.llm.requests();
    let global = offered(&requests[0]);
    assert!(global.contains(&"web_visit".into()) && !global.contains(&"web_search".into()), "{global:?}");
    let prompt = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(!prompt.contains("web_search"), "the prompt does not mention it");
    assert!(!offered(&requests[1]).iter().any(|n| n.starts_with("web_")));
}

#[tokio::test]
async fn a_long_page_is_kept_apart_with_a_preview() {
    let long = format!("<html><body><article>{}</article></body></html>", "<p>Paragraph of words. </p>".repeat(800));
    let pages = Pages::start(vec![r("/long", Answer::ok("text/html", long))]).await;
    let port = pages.port;
    let t = TestApp::with_config(move |c| {
        c.web.allow_cidrs = vec!["127.0.0.1/32".parse().unwrap()];
        c.web.allow_ports = vec![port];
        c.tool_output_inline_bytes = 2_000;
    })
    .await;
    t.llm.push(Reply::tool_calls(&[("web_visit", json!({ "url": pages.url("/long") }))]));
    t.llm.push(Reply::text(&["It is long."]));
    let turn = t.turn("alice", json!({"message": format!("read {}", pages.url("/long"))})).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let (_, kept) = tool_messages(&t.llm.requests()[1]).pop().unwrap();
    assert_eq!(kept["truncated"], true, "{kept}");
    assert_eq!(kept["full_output"]["tool"], "read_tool_output");
    assert!(kept["total_chars"].as_u64().unwrap() > 10_000, "{kept}");
}

#[tokio::test]
async fn a_project_turn_reads_field_info_and_links_to_depth_two() {
    let t = TestApp::new().await;
    let svc = EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let alice = UserId::parse("alice").unwrap();
    let p = NewProject { name: "Launch".into(), description: None, state: Default::default(), context: None };
    let project = svc.create_project(&alice, p).await.unwrap().data.project.id;
    let mk = |kind: &str, title: &str| {
        let fields = if kind == "goal" { json!({"name": title}) } else { json!({"title": title}) };
        let fields = serde_json::from_value::<shared::entities::EntityFields>(json!({"kind": kind, "fields": fields}));
        shared::entities::CreateEntity::new(fields.unwrap())
    };
    let goal = svc.create(&alice, &project, mk("goal", "Ship v2")).await.unwrap().data.id;
    let task = svc.create(&alice, &project, mk("task", "Write the post")).await.unwrap().data.id;
    let risk = svc.create(&alice, &project, mk("risk", "Late review")).await.unwrap().data.id;
    let edge = |from: (EntityKind, &shared::ids::EntityId), rel: &str, to: (EntityKind, &shared::ids::EntityId)| Edge {
        from: EdgeEnd { kind: from.0, id: from.1.clone() },
        relation: rel.into(),
        to: EdgeEnd { kind: to.0, id: to.1.clone() },
    };
    svc.link(&alice, &project, edge((EntityKind::Task, &task), "supports", (EntityKind::Goal, &goal))).await.unwrap();
    svc.link(&alice, &project, edge((EntityKind::Risk, &risk), "blocks", (EntityKind::Task, &task))).await.unwrap();

    t.llm.push(Reply::tool_calls(&[
        ("get_field_info", json!({"kind": "task"})),
        ("get_entity_relationships", json!({"entity_id": task.to_string()})),
        ("get_linked_entities", json!({"entity_id": goal.to_string(), "depth": 2})),
    ]));
    t.llm.push(Reply::text(&["The goal depends on the post, which a late review blocks."]));
    let body = json!({"message": "what hangs on the goal?", "context_type": "project",
        "projectFocus": {"projectId": project.to_string()}});
    let turn = t.turn("alice", body).await;
    assert_eq!(turn.error_code(), None, "{:?}", turn.events);
    let requests = t.llm.requests();
    let tools = offered(&requests[0]);
    for name in ["get_linked_entities", "web_visit"] {
        assert!(tools.contains(&name.to_string()), "{name} offered in a project: {tools:?}");
    }
    // Not offered in a project (issue 31: fewer tools), still run when called.
    for name in ["get_field_info", "get_entity_relationships"] {
        assert!(!tools.contains(&name.to_string()), "{name} not offered in a project: {tools:?}");
    }
    let results = tool_messages(&requests[1]);
    assert_eq!(results[0].1["fields"]["required"], json!(["title"]), "{:?}", results[0]);
    let names: Vec<&str> =
        results[1].1["linked"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains(&"Ship v2") && names.contains(&"Late review"), "{names:?}");
    let far = results[2].1["linked"].as_array().unwrap().iter().find(|l| l["depth"] == 2).cloned().unwrap();
    assert_eq!((far["name"].as_str(), far["relation"].as_str()), (Some("Late review"), Some("blocks")));

    // Another user asking about alice's entity in their own project: not found, like a missing id.
    let bp = NewProject { name: "Mine".into(), description: None, state: Default::default(), context: None };
    let bob_project = svc.create_project(&UserId::parse("bob").unwrap(), bp).await.unwrap().data.project.id;
    t.llm.push(Reply::tool_calls(&[("get_linked_entities", json!({"entity_id": task.to_string()}))]));
    t.llm.push(Reply::text(&["Nothing there."]));
    let body =
        json!({"message": "links?", "context_type": "project", "projectFocus": {"projectId": bob_project.to_string()}});
    t.turn("bob", body).await;
    let (_, r) = tool_messages(t.llm.requests().last().unwrap()).pop().unwrap();
    assert_eq!(r["error"]["code"], "entity_not_found", "{r}");
}
