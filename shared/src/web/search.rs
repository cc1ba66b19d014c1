//! `web_search` over one provider, each in its public API's shape:
//! - Tavily: `POST {base}/search`, JSON `{"query", "max_results"}`, bearer
//!   key; answers `{"results": [{"title", "url", "content"}]}`;
//! - Brave: `GET {base}/res/v1/web/search?q=…&count=…`, key in
//!   `X-Subscription-Token`; answers `{"web": {"results": [{"title", "url",
//!   "description"}]}}` (no `web` when nothing was found);
//! - SearXNG: `GET {base}/search?q=…&format=json`; answers `{"results":
//!   [{"title", "url", "content"}]}`.
//!
//! Contract: [`Searcher::search`] returns at most `max` [`SearchHit`]s (maybe
//! none) or a [`WebError`]: `RateLimited` for a 429, `Search` for any other
//! refusal or an answer of another shape. The provider's URL is the
//! operator's, so it is not under the `web_visit` address policy.

use super::WebError;
use crate::config::{SearchConfig, SearchProvider};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Characters of a snippet kept.
const SNIPPET_CHARS: usize = 400;

/// One result, as the model reads it (and can follow with `web_visit`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// The fields the providers share, under their names.
#[derive(Deserialize)]
struct Hit {
    #[serde(default)]
    title: String,
    url: String,
    #[serde(default, alias = "description")]
    content: String,
}

#[derive(Deserialize)]
struct Results {
    #[serde(default)]
    results: Vec<Hit>,
}

#[derive(Deserialize)]
struct BraveAnswer {
    #[serde(default)]
    web: Option<Results>,
}

#[derive(Clone)]
pub struct Searcher {
    client: reqwest::Client,
    cfg: SearchConfig,
}

impl Searcher {
    pub fn new(cfg: &SearchConfig, timeout: Duration) -> Searcher {
        let client = reqwest::Client::builder().timeout(timeout).build().expect("the search client builds");
        Searcher { client, cfg: cfg.clone() }
    }

    pub fn provider(&self) -> SearchProvider {
        self.cfg.provider
    }

    pub async fn search(&self, query: &str, max: usize) -> Result<Vec<SearchHit>, WebError> {
        let (base, key) = (&self.cfg.base_url, self.cfg.api_key.as_deref().unwrap_or(""));
        let req = match self.cfg.provider {
            SearchProvider::Tavily => self
                .client
                .post(format!("{base}/search"))
                .bearer_auth(key)
                .json(&serde_json::json!({ "query": query, "max_results": max })),
            SearchProvider::Brave => self
                .client
                .get(format!("{base}/res/v1/web/search"))
                .header("X-Subscription-Token", key)
                .header(reqwest::header::ACCEPT, "application/json")
                .query(&[("q", query), ("count", &max.to_string())]),
            SearchProvider::Searxng => {
                self.client.get(format!("{base}/search")).query(&[("q", query), ("format", "json")])
            }
        };
        let resp = req.send().await.map_err(|e| WebError::Search(format!("the provider is unreachable: {e}")))?;
        let status = resp.status();
        if status.as_u16() == 429 {
            return Err(WebError::RateLimited);
        }
        if !status.is_success() {
            return Err(WebError::Search(format!("the provider answered HTTP {}", status.as_u16())));
        }
        let body = resp.bytes().await.map_err(|e| WebError::Search(format!("the answer was cut off: {e}")))?;
        let shape = |e: serde_json::Error| WebError::Search(format!("the provider's answer is not understood: {e}"));
        let hits = match self.cfg.provider {
            SearchProvider::Brave => serde_json::from_slice::<BraveAnswer>(&body).map_err(shape)?.web,
            _ => Some(serde_json::from_slice::<Results>(&body).map_err(shape)?),
        };
        Ok(hits.map(|r| r.results).unwrap_or_default().into_iter().take(max).map(hit).collect())
    }
}

fn hit(h: Hit) -> SearchHit {
    let snippet: String = h.content.trim().chars().take(SNIPPET_CHARS).collect();
    SearchHit { title: h.title.trim().to_string(), url: h.url, snippet }
}
