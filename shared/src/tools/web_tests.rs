//! The web tools through the registry: a page read against a local server,
//! refusals as tool errors with their `operation` events, and `web_search`
//! against a local fake of each provider answering in its documented format
//! (results, none, errors and 429).

use super::*;
use crate::config::{SearchConfig, SearchProvider, WebConfig};
use crate::entities::store::MemoryEntityStore;
use crate::message::FunctionCall;
use crate::session::ContextType;
use crate::sse::{OperationStatus, StreamEvent};
use crate::web::tests::{config, hosts, server};
use crate::web::Fetcher;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn registry(cfg: &WebConfig) -> ToolRegistry {
    let web = WebTools::with_fetcher(cfg, Fetcher::with_hosts(cfg, hosts()));
    ToolRegistry::new(EntityService::new(MemoryEntityStore::new())).with_web(web)
}

async fn run(reg: &ToolRegistry, name: &str, args: Value) -> ToolOutcome {
    let ctx = ToolContext { user: UserId::parse("alice").unwrap(), scope: ToolScope::Global, zone: None };
    let call = ToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: args.to_string() },
    };
    reg.execute(&ctx, &call).await
}

fn content(o: &ToolOutcome) -> Value {
    serde_json::from_str(&o.content).unwrap()
}

/// The operation events' (status, summary).
fn steps(o: &ToolOutcome) -> Vec<(OperationStatus, String)> {
    o.events()
        .into_iter()
        .filter_map(|e| match e {
            StreamEvent::Operation { status, summary, .. } => Some((status, summary.unwrap_or_default())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn web_visit_reads_a_page_and_says_so_in_words() {
    let s = server().await;
    let reg = registry(&config(s.port, true));
    let o = run(&reg, "web_visit", json!({"url": format!("http://127.0.0.1:{}/page", s.port)})).await;
    assert!(o.ok, "{}", o.content);
    assert!(content(&o)["content"].as_str().unwrap().contains("12 euros a month"));
    let read = "Read 127.0.0.1/page".to_string();
    assert_eq!(steps(&o), [(OperationStatus::Start, read.clone()), (OperationStatus::Success, read)]);
    assert_eq!(display_url("https://www.example.org/pricing/?plan=a#x"), "example.org/pricing");
}

#[tokio::test]
async fn a_refused_visit_is_a_tool_error_the_model_reads() {
    let s = server().await;
    let reg = registry(&config(s.port, false));
    for (url, code) in [
        (format!("http://localhost:{}/page", s.port), "blocked_address"),
        ("http://169.254.169.254/latest/meta-data/".to_string(), "blocked_address"),
        ("file:///etc/passwd".to_string(), "unsupported_scheme"),
        (format!("http://u:p@example.org:{}/", s.port), "credentials_in_url"),
        ("http://example.org:8443/".to_string(), "port_not_allowed"),
    ] {
        let o = run(&reg, "web_visit", json!({ "url": url })).await;
        assert!(!o.ok);
        assert_eq!(o.error_code.as_deref(), Some(code), "{url}: {}", o.content);
        assert_eq!(steps(&o).last().unwrap().0, OperationStatus::Error);
    }
    let allowed = registry(&config(s.port, true));
    let o = run(&allowed, "web_visit", json!({"url": format!("http://127.0.0.1:{}/pdf", s.port)})).await;
    assert_eq!(o.error_code.as_deref(), Some("unsupported_content_type"));
    assert!(content(&o)["error"]["message"].as_str().unwrap().contains("PDF"), "{}", o.content);
    assert_eq!(s.hits.load(std::sync::atomic::Ordering::SeqCst), 1, "only the PDF request reached the server");
}

/// A page too deeply nested to convert is the tool error the model reads,
/// naming the limit, and no conversion is left running after the answer.
#[tokio::test]
async fn a_page_over_the_conversion_budget_is_a_tool_error() {
    let s = server().await;
    let cfg = WebConfig { fetch_max_bytes: 2 * 1024 * 1024, ..config(s.port, true) };
    let web = WebTools::with_fetcher(&cfg, Fetcher::with_hosts(&cfg, hosts()));
    let fetcher = web.fetcher.clone();
    let reg = ToolRegistry::new(EntityService::new(MemoryEntityStore::new())).with_web(web);
    let o = run(&reg, "web_visit", json!({"url": format!("http://127.0.0.1:{}/pathological/0", s.port)})).await;
    assert!(!o.ok);
    assert_eq!(o.error_code.as_deref(), Some("page_too_complex"), "{}", o.content);
    let message = content(&o)["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("nest more than 512 deep"), "{message}");
    assert_eq!(steps(&o).last().unwrap().0, OperationStatus::Error);
    assert_eq!(fetcher.conversions_running(), 0);
}

/// A provider's fake: answers every request with `status` and `body`, and
/// keeps each request's head and body.
async fn provider(status: u16, body: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let text = String::from_utf8_lossy(&req).to_string();
                    if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                        let len = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if rest.len() >= len {
                            kept.lock().unwrap().push(text);
                            break;
                        }
                    }
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(body.as_bytes()).await;
            });
        }
    });
    (base, seen)
}

fn searching(provider: SearchProvider, base: &str) -> ToolRegistry {
    let search = SearchConfig { provider, api_key: Some("test-key".into()), base_url: base.to_string() };
    registry(&WebConfig { search: Some(search), ..WebConfig::default() })
}

// Each provider's documented response shape (trimmed to the fields read plus a few others).
const TAVILY: &str = r#"{"query": "rust readability", "follow_up_questions": null, "answer": null, "images": [],
  "results": [{"title": "Readability in Rust", "url": "https://example.org/a", "content": "A port of readability.js", "score": 0.92, "raw_content": null}],
  "response_time": 1.1}"#;
const BRAVE: &str = r#"{"type": "search", "query": {"original": "rust readability"},
  "web": {"type": "search", "results": [{"title": "Readability in Rust", "url": "https://example.org/a",
  "description": "A port of readability.js", "language": "en", "profile": {"name": "Example"}}]}}"#;
const SEARXNG: &str = r#"{"query": "rust readability", "number_of_results": 1,
  "results": [{"url": "https://example.org/a", "title": "Readability in Rust", "content": "A port of readability.js", "engine": "duckduckgo", "score": 1.0}],
  "answers": [], "suggestions": [], "unresponsive_engines": []}"#;

#[tokio::test]
async fn each_provider_is_asked_in_its_shape_and_read_into_title_url_snippet() {
    let want = json!([{"title": "Readability in Rust", "url": "https://example.org/a", "snippet": "A port of readability.js"}]);
    for (p, answer, request) in [
        (
            SearchProvider::Tavily,
            TAVILY,
            ["POST /search ", "authorization: bearer test-key", r#""query":"rust readability""#],
        ),
        (
            SearchProvider::Brave,
            BRAVE,
            ["GET /res/v1/web/search?q=rust+readability&count=8 ", "x-subscription-token: test-key", ""],
        ),
        (SearchProvider::Searxng, SEARXNG, ["GET /search?q=rust+readability&format=json ", "", ""]),
    ] {
        let (base, seen) = provider(200, answer).await;
        let o = run(&searching(p, &base), "web_search", json!({"query": "rust readability"})).await;
        assert!(o.ok, "{p:?}: {}", o.content);
        assert_eq!(content(&o)["results"], want, "{p:?}");
        let req = seen.lock().unwrap()[0].to_ascii_lowercase();
        for part in request {
            assert!(req.contains(&part.to_ascii_lowercase()), "{p:?} request lacks {part:?}: {req}");
        }
        let said = "Searched the web for “rust readability”".to_string();
        assert_eq!(steps(&o), [(OperationStatus::Start, said.clone()), (OperationStatus::Success, said)]);
    }
}

#[tokio::test]
async fn empty_results_rate_limits_and_errors_are_what_the_model_reads() {
    for (p, empty) in [
        (SearchProvider::Tavily, r#"{"query": "q", "results": [], "response_time": 0.2}"#),
        (SearchProvider::Brave, r#"{"type": "search", "query": {"original": "q"}}"#),
        (SearchProvider::Searxng, r#"{"query": "q", "number_of_results": 0, "results": []}"#),
    ] {
        let (base, _) = provider(200, empty).await;
        let o = run(&searching(p, &base), "web_search", json!({"query": "q"})).await;
        assert!(o.ok, "{p:?}: {}", o.content);
        assert_eq!(content(&o)["results"], json!([]), "{p:?}");

        let (base, _) = provider(429, r#"{"detail": {"error": "rate limit"}}"#).await;
        let o = run(&searching(p, &base), "web_search", json!({"query": "q"})).await;
        assert_eq!(o.error_code.as_deref(), Some("rate_limited"), "{p:?}");
        assert_eq!(steps(&o).last().unwrap().0, OperationStatus::Error);

        let (base, _) = provider(401, r#"{"detail": {"error": "Unauthorized"}}"#).await;
        let o = run(&searching(p, &base), "web_search", json!({"query": "q"})).await;
        assert_eq!(o.error_code.as_deref(), Some("search_failed"), "{p:?}");
        assert!(o.content.contains("HTTP 401"), "{}", o.content);

        let (base, _) = provider(200, "<html>not json</html>").await;
        let o = run(&searching(p, &base), "web_search", json!({"query": "q"})).await;
        assert_eq!(o.error_code.as_deref(), Some("search_failed"), "{p:?}");
    }
}

#[test]
fn web_search_is_offered_only_with_a_provider() {
    let names = |reg: &ToolRegistry| -> Vec<String> {
        reg.definitions(&ToolScope::Global)
            .iter()
            .map(|d| d["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let offered = |reg: &ToolRegistry, ctx| {
        crate::model_loop::TurnTools::offered(
            reg,
            &crate::model_loop::TurnScope { context_type: ctx, entity_id: None, focus: None, timezone: None },
        )
        .iter()
        .map(|d| d["function"]["name"].as_str().unwrap().to_string())
        .collect::<Vec<_>>()
    };
    let plain = registry(&WebConfig::default());
    let with = searching(SearchProvider::Searxng, "http://127.0.0.1:9");
    assert!(!names(&plain).iter().any(|n| n.starts_with("web_")), "offered() alone has no web tools");
    let global = offered(&plain, ContextType::Global);
    assert!(global.contains(&"web_visit".to_string()) && !global.contains(&"web_search".to_string()));
    assert!(offered(&with, ContextType::BrainDump).contains(&"web_search".to_string()));
    assert!(!offered(&with, ContextType::Calendar).iter().any(|n| n.starts_with("web_")));
    let none = ToolRegistry::new(EntityService::new(MemoryEntityStore::new()));
    // Called anyway (a model that remembers it from elsewhere): no such tool here.
    let o = futures::executor::block_on(run(&plain, "web_search", json!({"query": "q"})));
    assert_eq!(o.error_code.as_deref(), Some("unknown_tool"), "{}", o.content);
    let o = futures::executor::block_on(run(&none, "web_visit", json!({"url": "https://example.org/"})));
    assert_eq!(o.error_code.as_deref(), Some("unknown_tool"), "{}", o.content);
    assert!(!offered(&none, ContextType::Global).iter().any(|n| n.starts_with("web_")), "no web, no web tools");
}

#[tokio::test]
async fn a_spent_daily_web_budget_is_a_tool_error_and_nothing_goes_out() {
    let s = server().await;
    let cfg = config(s.port, true);
    let store: Arc<dyn crate::budget::BudgetStore> = Arc::new(crate::budget::MemoryBudgetStore::new());
    let limits = crate::config::BudgetConfig { web_calls_per_day: 2, ..crate::config::BudgetConfig::OFF };
    let web = WebTools::with_fetcher(&cfg, Fetcher::with_hosts(&cfg, hosts())).with_budget(store, limits);
    let reg = ToolRegistry::new(EntityService::new(MemoryEntityStore::new())).with_web(web);
    let url = json!({"url": format!("http://127.0.0.1:{}/page", s.port)});
    for _ in 0..2 {
        let o = run(&reg, "web_visit", url.clone()).await;
        assert!(o.ok, "{}", o.content);
    }
    let o = run(&reg, "web_visit", url).await;
    assert_eq!(o.error_code.as_deref(), Some("quota_exceeded"), "{}", o.content);
    assert!(content(&o)["error"]["message"].as_str().unwrap().contains("2 web calls"), "{}", o.content);
    assert_eq!(steps(&o).last().unwrap().0, OperationStatus::Error);
    assert_eq!(s.hits.load(std::sync::atomic::Ordering::SeqCst), 2, "the third visit never reached the server");
}
