//! The web, for the chat's tools: reading a page the model chose
//! ([`Fetcher`], `web_visit`) without ever reaching the function's own
//! network ([`guard`]), its main content as Markdown ([`page`]), and web
//! search behind one interface over Tavily, Brave or SearXNG ([`Searcher`]).
//!
//! A URL the model writes is attacker input (a page or a document it read may
//! have chosen it): see [`guard`] for what is refused and why it cannot be
//! bypassed by DNS, redirects or odd address spellings. Every failure is a
//! [`WebError`] with a stable [`WebError::code`] the model reads.

pub mod fetch;
pub mod guard;
pub mod page;
mod scan;
pub mod search;
mod sink;

pub use fetch::{Fetcher, Page, MAX_REDIRECTS};
pub use search::{SearchHit, Searcher};

/// Why a page was not read or a search not answered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WebError {
    #[error("not a valid URL: {0}")]
    InvalidUrl(String),
    #[error("only http and https URLs can be read, not {0}")]
    Scheme(String),
    #[error("port {0} is not allowed: only 80 and 443")]
    Port(u16),
    #[error("URLs with a user name or password are not read")]
    Credentials,
    #[error("{0} is a private or reserved address and is never read")]
    Blocked(String),
    #[error("the page redirected more than {0} times")]
    TooManyRedirects(usize),
    #[error("the page is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the page did not arrive within {0} ms")]
    Timeout(u64),
    #[error("the page is too complex to read: {0}")]
    TooComplex(String),
    #[error("{0} cannot be read: only HTML, text and JSON pages are supported")]
    Unsupported(String),
    #[error("the site answered HTTP {0}")]
    Status(u16),
    #[error("the site could not be reached: {0}")]
    Network(String),
    #[error("web search is rate limited right now; try again later or answer without it")]
    RateLimited,
    #[error("web search failed: {0}")]
    Search(String),
    #[error(
        "today's {limit} web calls are spent; they are counted again in {retry_after_secs} s: answer without the web"
    )]
    DailyLimit { limit: u64, retry_after_secs: u64 },
}

impl WebError {
    /// The machine code the model (and the logs) read.
    pub fn code(&self) -> &'static str {
        match self {
            WebError::InvalidUrl(_) => "invalid_url",
            WebError::Scheme(_) => "unsupported_scheme",
            WebError::Port(_) => "port_not_allowed",
            WebError::Credentials => "credentials_in_url",
            WebError::Blocked(_) => "blocked_address",
            WebError::TooManyRedirects(_) => "too_many_redirects",
            WebError::TooLarge(_) => "too_large",
            WebError::Timeout(_) => "timeout",
            WebError::TooComplex(_) => "page_too_complex",
            WebError::Unsupported(_) => "unsupported_content_type",
            WebError::Status(_) => "http_status",
            WebError::Network(_) => "unreachable",
            WebError::RateLimited => "rate_limited",
            WebError::Search(_) => "search_failed",
            WebError::DailyLimit { .. } => "quota_exceeded",
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
