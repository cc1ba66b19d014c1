//! Reading one page for `web_visit`: every hop checked by the [`Policy`],
//! names resolved by the [`GuardedResolver`], redirects followed by hand, one
//! time limit over the whole visit, a body cap, and only HTML, text and JSON.
//!
//! Contract: [`Fetcher::visit`] returns the page's readable content or a
//! [`WebError`] naming why not; it never connects to an address the policy
//! refuses, never sends credentials, ignores proxy settings (a proxy would
//! resolve names where the guard cannot see), and follows at most
//! [`MAX_REDIRECTS`] redirects. An HTML page's conversion runs on a blocking
//! thread under [`page`]'s budget; when the time is up it is told to stop and
//! waited for, so no conversion outlives its visit
//! ([`Fetcher::conversions_running`] is 0 whenever no visit is under way).

use super::guard::{GuardedResolver, Policy, Refused};
use super::page;
use super::WebError;
use crate::config::WebConfig;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Redirects followed at most; the next one is refused.
pub const MAX_REDIRECTS: usize = 5;

/// A page as the model reads it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Page {
    /// Where the page was read from, after redirects.
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `html` (converted to Markdown), `text` or `json`.
    pub format: &'static str,
    pub content: String,
}

/// The kinds of body `web_visit` reads.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Html,
    Text,
    Json,
}

/// Reads pages under the policy.
#[derive(Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    policy: Arc<Policy>,
    timeout: Duration,
    max_bytes: usize,
    /// HTML conversions now running on blocking threads.
    converting: Arc<AtomicUsize>,
}

/// One visit's HTML conversion: told to stop when the visit's time is up,
/// and held (the lock) while it runs, so the visit can wait for its end.
#[derive(Default)]
struct Conversion {
    stop: Arc<AtomicBool>,
    running: Arc<tokio::sync::Mutex<()>>,
}

/// Counts one running conversion for as long as it lives (unwinding too).
struct Running(Arc<AtomicUsize>);

impl Running {
    fn new(count: &Arc<AtomicUsize>) -> Running {
        count.fetch_add(1, Ordering::SeqCst);
        Running(count.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Fetcher {
    pub fn new(cfg: &WebConfig) -> Fetcher {
        Fetcher::with_hosts(cfg, HashMap::new())
    }

    /// A fetcher whose resolver answers `hosts` from this table (tests:
    /// a name that resolves to a chosen address). Production uses [`Fetcher::new`].
    pub fn with_hosts(cfg: &WebConfig, hosts: HashMap<String, Vec<IpAddr>>) -> Fetcher {
        let policy = Arc::new(Policy { allow: cfg.allow_cidrs.clone(), ports: cfg.allow_ports.clone() });
        let resolver = GuardedResolver { policy: policy.clone(), fixed: hosts };
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(resolver))
            .user_agent(concat!("agentic-chat/", env!("CARGO_PKG_VERSION"), " (web_visit)"))
            .build()
            .expect("the web client builds");
        let converting = Arc::default();
        Fetcher { client, policy, timeout: cfg.fetch_timeout, max_bytes: cfg.fetch_max_bytes, converting }
    }

    /// How many of this fetcher's HTML conversions are running now.
    pub fn conversions_running(&self) -> usize {
        self.converting.load(Ordering::SeqCst)
    }

    /// Reads `url` within the time limit. When the time is up during the
    /// page's conversion, the conversion is stopped and its end awaited before
    /// the answer: its parse stops at the next chunk, and readability (which
    /// cannot be interrupted) has at most a page's budget of work left.
    pub async fn visit(&self, url: &str) -> Result<Page, WebError> {
        let conversion = Conversion::default();
        match tokio::time::timeout(self.timeout, self.follow(url, &conversion)).await {
            Ok(r) => r,
            Err(_) => {
                conversion.stop.store(true, Ordering::SeqCst);
                let _ended = conversion.running.lock().await;
                Err(WebError::Timeout(self.timeout.as_millis() as u64))
            }
        }
    }

    async fn follow(&self, raw: &str, conversion: &Conversion) -> Result<Page, WebError> {
        let mut url = Url::parse(raw.trim()).map_err(|e| WebError::InvalidUrl(e.to_string()))?;
        for hop in 0..=MAX_REDIRECTS {
            self.policy.check_url(&url)?;
            let resp = self.client.get(url.clone()).send().await.map_err(sent)?;
            let location = resp.headers().get(reqwest::header::LOCATION).and_then(|l| l.to_str().ok());
            match location {
                Some(next) if resp.status().is_redirection() => {
                    if hop == MAX_REDIRECTS {
                        return Err(WebError::TooManyRedirects(MAX_REDIRECTS));
                    }
                    url = url.join(next).map_err(|e| WebError::InvalidUrl(format!("redirect to {next:?}: {e}")))?;
                }
                _ => return self.read(url, resp, conversion).await,
            }
        }
        Err(WebError::TooManyRedirects(MAX_REDIRECTS))
    }

    async fn read(&self, url: Url, mut resp: reqwest::Response, conversion: &Conversion) -> Result<Page, WebError> {
        if !resp.status().is_success() {
            return Err(WebError::Status(resp.status().as_u16()));
        }
        let kind = kind_of(resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()))?;
        if resp.content_length().is_some_and(|n| n > self.max_bytes as u64) {
            return Err(WebError::TooLarge(self.max_bytes));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(sent)? {
            if body.len() + chunk.len() > self.max_bytes {
                return Err(WebError::TooLarge(self.max_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        // Pages are read as UTF-8; another charset's bytes become U+FFFD.
        let text = String::from_utf8_lossy(&body).into_owned();
        let page_url = url.to_string();
        let (title, format, content) = match kind {
            Kind::Html => {
                let (at, stop) = (url.clone(), conversion.stop.clone());
                // Fields drop in order: the count falls before the lock is released.
                let held = (Running::new(&self.converting), conversion.running.clone().lock_owned().await);
                let converted = tokio::task::spawn_blocking(move || {
                    let _held = held;
                    page::readable(&text, &at, &stop)
                })
                .await
                .map_err(|e| WebError::Network(format!("the page could not be converted: {e}")))?;
                let (title, md) = converted.map_err(|h| match h {
                    page::Halt::TooComplex(why) => WebError::TooComplex(why),
                    page::Halt::Stopped => WebError::Timeout(self.timeout.as_millis() as u64),
                })?;
                (title, "html", md)
            }
            Kind::Text => (None, "text", text),
            Kind::Json => (None, "json", text),
        };
        Ok(Page { url: page_url, title, format, content })
    }
}

/// The body kinds read; PDF and everything else are refused by name.
fn kind_of(content_type: Option<&str>) -> Result<Kind, WebError> {
    let mime = content_type.unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match mime.as_str() {
        "text/html" | "application/xhtml+xml" => Ok(Kind::Html),
        "application/json" => Ok(Kind::Json),
        m if m.ends_with("+json") => Ok(Kind::Json),
        m if m.starts_with("text/") => Ok(Kind::Text),
        "" => Err(WebError::Unsupported("a page without a content type".into())),
        "application/pdf" => Err(WebError::Unsupported("PDF".into())),
        m => Err(WebError::Unsupported(m.to_string())),
    }
}

/// A client error: a name the resolver refused is `Blocked`; the rest is
/// the network's (reqwest's own time limits are not set: ours covers all).
fn sent(e: reqwest::Error) -> WebError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(err) = source {
        if let Some(r) = err.downcast_ref::<Refused>() {
            return WebError::Blocked(r.0.clone());
        }
        source = err.source();
    }
    // reqwest's own message is vague ("error sending request"): say what below it failed.
    let e = e.without_url();
    let mut why = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(err) = source {
        why = format!("{why}: {err}");
        source = err.source();
    }
    WebError::Network(why)
}
