//! The web tools: `web_visit` reads one page (under [`crate::web::guard`]'s
//! address policy) as Markdown, `web_search` asks the configured provider
//! and returns `{title, url, snippet}` hits to follow with `web_visit`.
//! `web_search` exists only with a provider (`WEB_SEARCH_PROVIDER`): without
//! one it is neither offered nor run. Each call streams an `operation` whose
//! `summary` says it in words ("Read example.org/pricing", "Searched the web
//! for “…”"); a refused visit or a failed search is a tool error the model
//! reads, never a failed turn. A long page goes the way of every large
//! output: stored apart, the model gets a preview (`model_loop::outputs`).

use super::outcome::{Done, Refusal};
use super::{Tool, ToolName};
use crate::config::WebConfig;
use crate::sse::{OperationAction, OperationStatus, StreamEvent};
use crate::web::{Fetcher, Searcher, WebError};
use serde::Deserialize;
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const WebSearch: ToolName = ToolName::of(&WebSearch);
    pub const WebVisit: ToolName = ToolName::of(&WebVisit);
}

/// Every web tool, in the order a scope offers them.
pub const WEB_TOOLS: &[ToolName] = &[ToolName::WebSearch, ToolName::WebVisit];

/// Hits a search returns at most.
const MAX_HITS: usize = 8;

/// What the web tools run on, and their per-turn caps.
#[derive(Clone)]
pub struct WebTools {
    pub fetcher: Fetcher,
    /// `None` without a provider: no `web_search`.
    pub searcher: Option<Searcher>,
    pub max_searches_per_turn: usize,
    pub max_visits_per_turn: usize,
}

impl WebTools {
    pub fn new(cfg: &WebConfig) -> WebTools {
        WebTools::with_fetcher(cfg, Fetcher::new(cfg))
    }

    /// Over a chosen fetcher (tests: one whose resolver has fixed names).
    pub fn with_fetcher(cfg: &WebConfig, fetcher: Fetcher) -> WebTools {
        WebTools {
            fetcher,
            searcher: cfg.search.as_ref().map(|s| Searcher::new(s, cfg.fetch_timeout)),
            max_searches_per_turn: cfg.max_searches_per_turn,
            max_visits_per_turn: cfg.max_visits_per_turn,
        }
    }

    /// Whether `tool` (a web tool) can run here.
    pub fn has(&self, tool: ToolName) -> bool {
        tool != ToolName::WebSearch || self.searcher.is_some()
    }

    /// How many calls of `tool` one turn may make.
    pub fn cap(&self, tool: &str) -> Option<usize> {
        match tool {
            WebSearch::NAME => Some(self.max_searches_per_turn),
            WebVisit::NAME => Some(self.max_visits_per_turn),
            _ => None,
        }
    }
}

/// One web step's `operation` events, in words.
struct Step {
    action: OperationAction,
    entity_type: &'static str,
    name: String,
    summary: String,
}

impl Step {
    fn events(&self, ok: bool) -> Vec<StreamEvent> {
        let end = if ok { OperationStatus::Success } else { OperationStatus::Error };
        [OperationStatus::Start, end]
            .into_iter()
            .map(|status| StreamEvent::Operation {
                action: self.action,
                entity_type: self.entity_type.to_string(),
                entity_name: self.name.clone(),
                status,
                entity_id: None,
                summary: Some(self.summary.clone()),
            })
            .collect()
    }

    fn finish(self, r: Result<serde_json::Value, WebError>) -> Result<Done, Refusal> {
        match r {
            Ok(v) => Ok(Done { result: Ok(v), ops: vec![], patches: vec![], turn_events: self.events(true) }),
            Err(e) => Err(Refusal::Web(e, self.events(false))),
        }
    }
}

/// How a URL reads in a sentence: host and path, no scheme or query
/// (`example.org/pricing`).
pub fn display_url(raw: &str) -> String {
    match url::Url::parse(raw.trim()) {
        Ok(u) => {
            let host = u.host_str().unwrap_or("").trim_start_matches("www.");
            let path = u.path().trim_end_matches('/');
            let shown = format!("{host}{path}");
            if shown.chars().count() > 80 {
                shown.chars().take(79).chain(['…']).collect()
            } else {
                shown
            }
        }
        Err(_) => raw.chars().take(80).collect(),
    }
}

fn web<'a>(c: &super::call::Call<'a>) -> Result<&'a WebTools, Refusal> {
    c.web.ok_or_else(|| Refusal::Args("the web is not available here".into()))
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VisitArgs {
    /// The page's full http(s) URL, e.g. one from web_search.
    pub url: String,
}

pub struct WebVisit;

#[async_trait::async_trait]
impl Tool for WebVisit {
    type Args = VisitArgs;
    const NAME: &'static str = "web_visit";
    const DESCRIPTION: &'static str = "Read a public web page (HTML, text or JSON) and get its main content as \
        Markdown. Private and internal addresses are refused; PDFs are not supported.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &super::call::Call<'_>, a: VisitArgs) -> Result<Done, Refusal> {
        let w = web(c)?;
        let shown = display_url(&a.url);
        let step = Step {
            action: OperationAction::Read,
            entity_type: "web_page",
            summary: format!("Read {shown}"),
            name: shown,
        };
        step.finish(w.fetcher.visit(&a.url).await.map(|p| super::call::to_json(&p)))
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    /// What to search the web for.
    pub query: String,
    /// At most this many results (default and most 8).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 8)]
    pub max_results: Option<usize>,
}

pub struct WebSearch;

#[async_trait::async_trait]
impl Tool for WebSearch {
    type Args = WebSearchArgs;
    const NAME: &'static str = "web_search";
    const DESCRIPTION: &'static str = "Search the public web. Returns results with title, url and snippet; read \
        a result in full with web_visit.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &super::call::Call<'_>, a: WebSearchArgs) -> Result<Done, Refusal> {
        let searcher = web(c)?.searcher.as_ref().ok_or_else(|| Refusal::Args("web search is not configured".into()))?;
        let query = a.query.trim().to_string();
        if query.is_empty() {
            return Err(Refusal::Args("query is empty".into()));
        }
        let step = Step {
            action: OperationAction::Search,
            entity_type: "web",
            summary: format!("Searched the web for “{query}”"),
            name: format!("“{query}”"),
        };
        let max = a.max_results.unwrap_or(MAX_HITS).clamp(1, MAX_HITS);
        let r = searcher.search(&query, max).await;
        step.finish(r.map(|hits| serde_json::json!({ "query": query, "results": hits })))
    }
}
