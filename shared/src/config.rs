//! The one config loader. Every function reads its settings here, once per
//! container, from environment variables; every variable is documented in the
//! README with its default. Unknown or malformed values fail loudly at start
//! rather than being guessed at.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
#[error("config: {var}: {reason}")]
pub struct ConfigError {
    pub var: &'static str,
    pub reason: String,
}

/// Authentication settings. Both absent means every request is refused (fail closed).
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    /// `AUTH_JWT_SECRET`: HS256 shared secret.
    pub jwt_secret: Option<String>,
    /// `AUTH_JWKS_URL`: RS256 keys, fetched and cached. Needs `issuer` and
    /// `audience` (see [`AuthConfig::check`]).
    pub jwks_url: Option<String>,
    /// `AUTH_ISSUER`: tokens must carry this `iss`. Required with a JWKS.
    pub issuer: Option<String>,
    /// `AUTH_AUDIENCE`: tokens must carry this `aud`. Required with a JWKS.
    pub audience: Option<String>,
    /// `AUTH_JWKS_CACHE_SECS` (default 600).
    pub jwks_cache: Duration,
}

/// `Some` and not blank.
fn given(v: &Option<String>) -> bool {
    v.as_deref().is_some_and(|v| !v.trim().is_empty())
}

impl AuthConfig {
    /// Whether a JWKS is configured.
    pub fn has_jwks(&self) -> bool {
        given(&self.jwks_url)
    }

    /// With a JWKS, `iss` and `aud` must both be configured: an identity
    /// provider's keys sign the tokens of every app it serves, so without the
    /// two checks another app's token (and its `sub`) would be a user here.
    /// The error names what is missing.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !self.has_jwks() {
            return Ok(());
        }
        let var = match (given(&self.issuer), given(&self.audience)) {
            (true, true) => return Ok(()),
            (false, false) => "AUTH_ISSUER / AUTH_AUDIENCE",
            (false, true) => "AUTH_ISSUER",
            (true, false) => "AUTH_AUDIENCE",
        };
        Err(ConfigError {
            var,
            reason: format!(
                "AUTH_JWKS_URL is set but {var} {verb} not: a shared identity provider signs other apps' tokens \
                 with the same keys, so set AUTH_ISSUER to its `iss` and AUTH_AUDIENCE to this app's `aud`",
                verb = if var.contains('/') { "are" } else { "is" }
            ),
        })
    }
}

/// The largest `MAX_MESSAGE_BYTES` accepted. The user message is stored as one
/// DynamoDB item (its JSON in `data`, next to the keys and ids), and an item
/// holds at most 400 KB. JSON escaping can grow a message six-fold (a control
/// character becomes `\u00XX`), so 64 KiB is the largest message whose item
/// still fits in the worst case: 6 × 64 KiB = 384 KiB, plus well under 2 KiB of
/// keys and other attributes. Above it, a message we accepted could fail to
/// store.
pub const MAX_MESSAGE_BYTES_LIMIT: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// `LLM_BASE_URL` (default `http://127.0.0.1:8080/v1`): the part before `/chat/completions`.
    pub base_url: String,
    /// `LLM_API_KEY` (default none): sent as a bearer token when set.
    pub api_key: Option<String>,
    /// `LLM_MODEL` (default `smollm2-135m-instruct`).
    pub model: String,
    /// `LLM_CONNECT_TIMEOUT_MS` (default 3000).
    pub connect_timeout: Duration,
    /// `LLM_FIRST_TOKEN_TIMEOUT_MS` (default 30000): status line to first event.
    pub first_token_timeout: Duration,
    /// `LLM_IDLE_TIMEOUT_MS` (default 60000): longest silence between two chunks.
    pub idle_timeout: Duration,
    /// `LLM_MAX_RETRIES` (default 2): retries before the first token only, and
    /// not after a 200 whose first event is late (see [`crate::llm`]).
    pub max_retries: u32,
    /// `LLM_MAX_TOKENS` (default unset: the server decides).
    pub max_tokens: Option<u32>,
}

/// The default first page of a turn's history read with the summarizer on:
/// it summarizes past 20 uncovered messages (`SUMMARY_TRIGGER_MESSAGES`), and
/// a tool turn adds up to 4 at once.
pub const HISTORY_FIRST_PAGE: usize = 24;

#[derive(Debug, Clone)]
pub struct Config {
    /// `TABLE_NAME` (default `agentic-chat`).
    pub table_name: String,
    pub llm: LlmConfig,
    pub auth: AuthConfig,
    /// `HISTORY_LIMIT`: stored messages loaded for a turn, newest first; the
    /// context builder's budgets decide what of them is sent. Unset:
    /// `CONTEXT_MAX_MESSAGES` ([`crate::context::ContextConfig::load_limit`]),
    /// no more than the budget can send.
    pub history_limit: Option<usize>,
    /// `HISTORY_FIRST_PAGE`: with the summarizer on (`SUMMARY_QUEUE_URL`
    /// set; default [`HISTORY_FIRST_PAGE`] then, else unset) a turn reads
    /// this many newest messages first, and older ones only as far as the
    /// summary does not cover them ([`crate::turn::history`]): the context
    /// builder sends nothing the summary covers, and the summarizer keeps the
    /// uncovered tail under ~24 messages. Unset: the history limit at once.
    pub history_first_page: Option<usize>,
    /// `MAX_MESSAGE_BYTES` (default 32768, at most [`MAX_MESSAGE_BYTES_LIMIT`]):
    /// the longest user message accepted.
    pub max_message_bytes: usize,
    /// `SESSION_LEASE_MS` (default 30000): how long a turn's session lease lasts
    /// without renewal; a crashed turn's lease expires after this.
    pub session_lease: Duration,
    /// `TOOL_MAX_ROUNDS` (default 5): model → tools → model rounds in one turn;
    /// the round after the last offers no tools, so the model answers in words.
    pub tool_max_rounds: usize,
    /// `TOOL_CONCURRENCY` (default 4): parallel tool calls run at once.
    pub tool_concurrency: usize,
    /// `TOOL_OUTPUT_INLINE_BYTES` (default 16384): a tool output longer than
    /// this is stored apart; the model gets a preview and reads on demand.
    pub tool_output_inline_bytes: usize,
    /// `STOP_POLL_MS` (default 500): how often a running turn checks whether
    /// the user pressed Stop (one small read, never one per token).
    pub stop_poll: Duration,
    /// `DEADLINE_MARGIN_MS` (default 3000): stop this long before the Lambda
    /// deadline, to persist the partial answer and end the stream cleanly.
    pub deadline_margin: Duration,
    /// `TURN_TIMEOUT_MS` (default 900000): the turn's deadline when the runtime
    /// gives none (local adapters, tests).
    pub turn_timeout: Duration,
    /// `DEV_EVENTS` (`1`/`true` or `0`/`false`, default off): send the dev-only
    /// `telemetry` and `debug_context` events (docs/events.md). They show the
    /// prompt's make-up and timings, so production never sets it
    /// (infra/template.yaml does not).
    pub dev_events: bool,
    /// `PLAN_STEP_CONCURRENCY` (default 3, at least 1): executors of one
    /// parallel plan stage running at once (docs/plans.md).
    pub plan_step_concurrency: usize,
    /// `PLAN_STEP_MAX_ROUNDS` (default 3): model → tools rounds of one plan
    /// step's executor; its last round offers no tools.
    pub plan_step_max_rounds: usize,
    /// `CORS_ALLOW_ORIGIN` (default unset): local stacks only. When set, the
    /// edge answers CORS itself ([`crate::edge::with_cors`]) for this origin
    /// (or `*`); on AWS leave it unset: the function URL's `Cors` adds the
    /// headers, and a second copy from us would make browsers refuse both.
    pub cors_allow_origin: Option<String>,
    /// The web tools' limits and the search provider ([`WebConfig`]).
    pub web: WebConfig,
    /// `APPROVAL_SECRET` (default unset: the JWT secret): the key approval
    /// ids are signed with ([`crate::approval`]).
    pub approval_secret: Option<String>,
    /// `APPROVAL_TTL_MS` (default 86400000, a day): how long a call waits
    /// for the user's yes before it counts as denied.
    pub approval_ttl: Duration,
    /// Per-user budgets (`BUDGET_*`, [`BudgetConfig`]).
    pub budgets: BudgetConfig,
    /// `FRAME_FLUSH_MS` (default 250, 1..=1000): the longest a frame waits
    /// before the frame log writes its batch (`crate::frames`): fewer writes
    /// per turn against a resumed stream's freshness (docs/cost.md).
    pub frame_flush: Duration,
}

/// The API `web_search` speaks (`WEB_SEARCH_PROVIDER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchProvider {
    Tavily,
    Brave,
    Searxng,
}

/// `web_search`'s provider: present only when `WEB_SEARCH_PROVIDER` is set.
#[derive(Debug, Clone)]
pub struct SearchConfig {
    pub provider: SearchProvider,
    /// `WEB_SEARCH_API_KEY`: required for `tavily` and `brave`.
    pub api_key: Option<String>,
    /// `WEB_SEARCH_BASE_URL`: the provider's public API by default; required
    /// for `searxng` (a self-hosted instance).
    pub base_url: String,
}

/// The web tools (docs/tools.md). `web_visit` is always available; it reaches
/// public addresses only, unless `allow_cidrs` says otherwise (tests and local
/// evals: production never sets it).
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// `WEB_FETCH_TIMEOUT_MS` (default 10000): one `web_visit`, every
    /// redirect and the body included.
    pub fetch_timeout: Duration,
    /// `WEB_FETCH_MAX_BYTES` (default 2097152): the largest body read.
    pub fetch_max_bytes: usize,
    /// `WEB_FETCH_ALLOW_PORTS` (default none; comma-separated): ports besides 80 and 443.
    pub allow_ports: Vec<u16>,
    /// `WEB_FETCH_ALLOW_CIDRS` (default none; comma-separated, e.g.
    /// `127.0.0.1/32`): otherwise refused addresses `web_visit` may reach.
    /// For tests and local evals only.
    pub allow_cidrs: Vec<ipnet::IpNet>,
    /// `WEB_SEARCH_PROVIDER` (`tavily`, `brave` or `searxng`; default unset:
    /// no `web_search`).
    pub search: Option<SearchConfig>,
    /// `WEB_MAX_SEARCHES_PER_TURN` (default 3).
    pub max_searches_per_turn: usize,
    /// `WEB_MAX_VISITS_PER_TURN` (default 5).
    pub max_visits_per_turn: usize,
}

impl Default for WebConfig {
    /// Production's defaults: public addresses on 80/443 only, no search.
    fn default() -> Self {
        WebConfig {
            fetch_timeout: Duration::from_secs(10),
            fetch_max_bytes: 2 * 1024 * 1024,
            allow_ports: vec![],
            allow_cidrs: vec![],
            search: None,
            max_searches_per_turn: 3,
            max_visits_per_turn: 5,
        }
    }
}

/// A comma-separated list, each item parsed; unset is empty.
fn env_list<T: std::str::FromStr>(name: &'static str) -> Result<Vec<T>, ConfigError>
where
    T::Err: std::fmt::Display,
{
    let Some(v) = env_or(name) else { return Ok(vec![]) };
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|e: T::Err| ConfigError { var: name, reason: format!("{s:?}: {e}") }))
        .collect()
}

impl WebConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        let d = WebConfig::default();
        Ok(WebConfig {
            fetch_timeout: ms("WEB_FETCH_TIMEOUT_MS", d.fetch_timeout.as_millis() as u64)?,
            fetch_max_bytes: env_parse("WEB_FETCH_MAX_BYTES", d.fetch_max_bytes)?,
            allow_ports: env_list("WEB_FETCH_ALLOW_PORTS")?,
            allow_cidrs: env_list("WEB_FETCH_ALLOW_CIDRS")?,
            search: search_config()?,
            max_searches_per_turn: env_parse("WEB_MAX_SEARCHES_PER_TURN", d.max_searches_per_turn)?,
            max_visits_per_turn: env_parse("WEB_MAX_VISITS_PER_TURN", d.max_visits_per_turn)?,
        })
    }
}

fn search_config() -> Result<Option<SearchConfig>, ConfigError> {
    const VAR: &str = "WEB_SEARCH_PROVIDER";
    let Some(name) = env_or(VAR) else { return Ok(None) };
    let (provider, default_base) = match name.trim().to_ascii_lowercase().as_str() {
        "tavily" => (SearchProvider::Tavily, Some("https://api.tavily.com")),
        "brave" => (SearchProvider::Brave, Some("https://api.search.brave.com")),
        "searxng" => (SearchProvider::Searxng, None),
        other => return Err(ConfigError { var: VAR, reason: format!("{other:?}: expected tavily, brave or searxng") }),
    };
    let api_key = env_or("WEB_SEARCH_API_KEY");
    if provider != SearchProvider::Searxng && api_key.is_none() {
        return Err(ConfigError { var: "WEB_SEARCH_API_KEY", reason: format!("{name} needs an API key") });
    }
    let base_url = match env_or("WEB_SEARCH_BASE_URL").or(default_base.map(String::from)) {
        Some(b) => b.trim().trim_end_matches('/').to_string(),
        None => {
            return Err(ConfigError { var: "WEB_SEARCH_BASE_URL", reason: "searxng needs its instance's URL".into() })
        }
    };
    Ok(Some(SearchConfig { provider, api_key, base_url }))
}

/// Per-user budgets ([`crate::budget`]); `0` turns one off, and all four off
/// means no budget request at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetConfig {
    /// `BUDGET_TOKENS_PER_DAY` (default 500000): model tokens, in + out as the
    /// model reports them, per UTC day.
    pub tokens_per_day: u64,
    /// `BUDGET_TURNS_PER_MINUTE` (default 20): turns started per clock minute.
    pub turns_per_minute: u64,
    /// `BUDGET_CONCURRENT_TURNS` (default 3): turns running at once.
    pub concurrent_turns: u64,
    /// `BUDGET_WEB_CALLS_PER_DAY` (default 200): web tool calls per UTC day.
    pub web_calls_per_day: u64,
}

impl BudgetConfig {
    /// No budget at all.
    pub const OFF: BudgetConfig =
        BudgetConfig { tokens_per_day: 0, turns_per_minute: 0, concurrent_turns: 0, web_calls_per_day: 0 };

    /// Whether a turn's start checks anything.
    pub fn checks_turns(&self) -> bool {
        self.tokens_per_day > 0 || self.turns_per_minute > 0 || self.concurrent_turns > 0
    }

    pub fn from_env() -> Result<BudgetConfig, ConfigError> {
        Ok(BudgetConfig {
            tokens_per_day: env_parse("BUDGET_TOKENS_PER_DAY", 500_000u64)?,
            turns_per_minute: env_parse("BUDGET_TURNS_PER_MINUTE", 20u64)?,
            concurrent_turns: env_parse("BUDGET_CONCURRENT_TURNS", 3u64)?,
            web_calls_per_day: env_parse("BUDGET_WEB_CALLS_PER_DAY", 200u64)?,
        })
    }
}

/// `name`'s value, if set and not blank. Every module's settings are read
/// through this and [`env_parse`], so blank means unset everywhere.
pub(crate) fn env_or(name: &'static str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `name` parsed, `default` when unset; a malformed value is an error, never a guess.
pub(crate) fn env_parse<T: std::str::FromStr>(name: &'static str, default: T) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    match env_or(name) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|e: T::Err| ConfigError { var: name, reason: format!("{v:?}: {e}") }),
    }
}

fn ms(name: &'static str, default: u64) -> Result<Duration, ConfigError> {
    env_parse(name, default).map(Duration::from_millis)
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        let history_limit = match env_or("HISTORY_LIMIT") {
            None => None,
            Some(_) => Some(env_parse("HISTORY_LIMIT", 0usize)?),
        };
        if history_limit.is_some_and(|n| n == 0 || n > 1000) {
            return Err(ConfigError { var: "HISTORY_LIMIT", reason: "must be 1..=1000".into() });
        }
        let history_first_page = match (env_or("HISTORY_FIRST_PAGE"), env_or("SUMMARY_QUEUE_URL")) {
            (Some(_), _) => Some(env_parse("HISTORY_FIRST_PAGE", HISTORY_FIRST_PAGE)?.clamp(1, 1000)),
            (None, Some(_)) => Some(HISTORY_FIRST_PAGE),
            (None, None) => None,
        };
        let auth = AuthConfig {
            jwt_secret: env_or("AUTH_JWT_SECRET"),
            jwks_url: env_or("AUTH_JWKS_URL"),
            issuer: env_or("AUTH_ISSUER"),
            audience: env_or("AUTH_AUDIENCE"),
            jwks_cache: Duration::from_secs(env_parse("AUTH_JWKS_CACHE_SECS", 600u64)?),
        };
        auth.check()?;
        let max_message_bytes = env_parse("MAX_MESSAGE_BYTES", 32 * 1024usize)?;
        if max_message_bytes == 0 || max_message_bytes > MAX_MESSAGE_BYTES_LIMIT {
            return Err(ConfigError {
                var: "MAX_MESSAGE_BYTES",
                reason: format!(
                    "{max_message_bytes} is outside 1..={MAX_MESSAGE_BYTES_LIMIT}: a longer message might not fit \
                     in one DynamoDB item (400 KB) once JSON-escaped"
                ),
            });
        }
        Ok(Config {
            table_name: env_or("TABLE_NAME").unwrap_or_else(|| "agentic-chat".into()),
            llm: LlmConfig {
                base_url: env_or("LLM_BASE_URL")
                    .unwrap_or_else(|| "http://127.0.0.1:8080/v1".into())
                    .trim_end_matches('/')
                    .to_string(),
                api_key: env_or("LLM_API_KEY"),
                model: env_or("LLM_MODEL").unwrap_or_else(|| "smollm2-135m-instruct".into()),
                connect_timeout: ms("LLM_CONNECT_TIMEOUT_MS", 3_000)?,
                first_token_timeout: ms("LLM_FIRST_TOKEN_TIMEOUT_MS", 30_000)?,
                idle_timeout: ms("LLM_IDLE_TIMEOUT_MS", 60_000)?,
                max_retries: env_parse("LLM_MAX_RETRIES", 2u32)?,
                max_tokens: env_or("LLM_MAX_TOKENS")
                    .map(|v| v.parse().map_err(|e| ConfigError { var: "LLM_MAX_TOKENS", reason: format!("{e}") }))
                    .transpose()?,
            },
            auth,
            history_limit,
            history_first_page,
            max_message_bytes,
            session_lease: ms("SESSION_LEASE_MS", 30_000)?,
            tool_max_rounds: env_parse("TOOL_MAX_ROUNDS", 5usize)?,
            tool_concurrency: env_parse("TOOL_CONCURRENCY", 4usize)?,
            tool_output_inline_bytes: env_parse("TOOL_OUTPUT_INLINE_BYTES", 16 * 1024usize)?,
            stop_poll: ms("STOP_POLL_MS", 500)?,
            deadline_margin: ms("DEADLINE_MARGIN_MS", 3_000)?,
            turn_timeout: ms("TURN_TIMEOUT_MS", 900_000)?,
            dev_events: switch("DEV_EVENTS")?,
            plan_step_concurrency: env_parse("PLAN_STEP_CONCURRENCY", 3usize)?.max(1),
            plan_step_max_rounds: env_parse("PLAN_STEP_MAX_ROUNDS", 3usize)?,
            cors_allow_origin: cors_origin()?,
            web: WebConfig::from_env()?,
            approval_secret: env_or("APPROVAL_SECRET"),
            approval_ttl: ms("APPROVAL_TTL_MS", 86_400_000)?,
            budgets: BudgetConfig::from_env()?,
            frame_flush: frame_flush()?,
        })
    }
}

fn frame_flush() -> Result<Duration, ConfigError> {
    // The default is `frames::FLUSH_EVERY` (the test `defaults` checks it).
    let every = ms("FRAME_FLUSH_MS", crate::frames::FLUSH_EVERY.as_millis() as u64)?;
    if every.is_zero() || every > Duration::from_secs(1) {
        return Err(ConfigError { var: "FRAME_FLUSH_MS", reason: "must be 1..=1000".into() });
    }
    Ok(every)
}

/// An on/off setting: `1`/`true` or `0`/`false` (any case), off when unset.
fn switch(name: &'static str) -> Result<bool, ConfigError> {
    match env_or(name).map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("0") | Some("false") => Ok(false),
        Some("1") | Some("true") => Ok(true),
        Some(v) => Err(ConfigError { var: name, reason: format!("{v:?}: expected 1, true, 0 or false") }),
    }
}

/// `CORS_ALLOW_ORIGIN`: one origin (`scheme://host[:port]`) or `*`; it is
/// sent as a header, so anything else is refused at start.
fn cors_origin() -> Result<Option<String>, ConfigError> {
    let Some(v) = env_or("CORS_ALLOW_ORIGIN") else { return Ok(None) };
    let v = v.trim().to_string();
    let origin = v.split_once("://").is_some_and(|(scheme, host)| {
        matches!(scheme, "http" | "https") && !host.is_empty() && !host.contains('/') && host.is_ascii()
    });
    if v == "*" || (origin && !v.chars().any(|c| c.is_whitespace() || c == ',')) {
        return Ok(Some(v));
    }
    Err(ConfigError {
        var: "CORS_ALLOW_ORIGIN",
        reason: format!("{v:?} is not `*` or one origin like http://localhost:5173"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The environment is process-wide: these tests take turns with it.
    static ENV: Mutex<()> = Mutex::new(());

    const VARS: [&str; 13] = [
        "WEB_SEARCH_PROVIDER",
        "WEB_SEARCH_API_KEY",
        "WEB_SEARCH_BASE_URL",
        "WEB_FETCH_ALLOW_CIDRS",
        "WEB_FETCH_ALLOW_PORTS",
        "DEV_EVENTS",
        "AUTH_JWT_SECRET",
        "AUTH_JWKS_URL",
        "AUTH_ISSUER",
        "AUTH_AUDIENCE",
        "AUTH_JWKS_CACHE_SECS",
        "MAX_MESSAGE_BYTES",
        "CORS_ALLOW_ORIGIN",
    ];

    /// `Config::from_env` with exactly `vars` among the ones under test set.
    fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let _turn = ENV.lock().unwrap_or_else(|e| e.into_inner());
        for v in VARS {
            std::env::remove_var(v);
        }
        for (k, v) in vars {
            std::env::set_var(k, v);
        }
        let out = Config::from_env();
        for v in VARS {
            std::env::remove_var(v);
        }
        out
    }

    #[test]
    fn dev_events_are_off_unless_switched_on() {
        assert!(!load(&[]).unwrap().dev_events);
        assert!(load(&[("DEV_EVENTS", "1")]).unwrap().dev_events);
        assert!(load(&[("DEV_EVENTS", "TRUE")]).unwrap().dev_events);
        assert!(!load(&[("DEV_EVENTS", "false")]).unwrap().dev_events);
        assert_eq!(load(&[("DEV_EVENTS", "yes please")]).unwrap_err().var, "DEV_EVENTS");
    }

    const JWKS: (&str, &str) = ("AUTH_JWKS_URL", "https://idp.example/.well-known/jwks.json");

    #[test]
    fn jwks_without_issuer_and_audience_fails_at_load() {
        let e = load(&[JWKS]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("AUTH_JWKS_URL is set but AUTH_ISSUER / AUTH_AUDIENCE are not"), "{msg}");
        let e = load(&[JWKS, ("AUTH_ISSUER", "https://idp.example")]).unwrap_err();
        assert_eq!(e.var, "AUTH_AUDIENCE", "{e}");
        let e = load(&[JWKS, ("AUTH_AUDIENCE", "agentic-chat"), ("AUTH_ISSUER", "  ")]).unwrap_err();
        assert_eq!(e.var, "AUTH_ISSUER", "blank is unset: {e}");

        let c = load(&[JWKS, ("AUTH_ISSUER", "https://idp.example"), ("AUTH_AUDIENCE", "agentic-chat")]).unwrap();
        assert_eq!(c.auth.issuer.as_deref(), Some("https://idp.example"));
        assert_eq!(c.auth.audience.as_deref(), Some("agentic-chat"));
        // Without a JWKS (HS256 for local development) they stay optional.
        assert!(load(&[("AUTH_JWT_SECRET", "a-local-secret-a-local-secret-32")]).is_ok());
    }

    #[test]
    fn max_message_bytes_is_capped_below_one_item() {
        assert_eq!(load(&[]).unwrap().max_message_bytes, 32 * 1024);
        let max = MAX_MESSAGE_BYTES_LIMIT.to_string();
        assert_eq!(load(&[("MAX_MESSAGE_BYTES", &max)]).unwrap().max_message_bytes, MAX_MESSAGE_BYTES_LIMIT);
        for bad in [(MAX_MESSAGE_BYTES_LIMIT + 1).to_string(), "1048576".into(), "0".into()] {
            let e = load(&[("MAX_MESSAGE_BYTES", &bad)]).unwrap_err();
            assert_eq!(e.var, "MAX_MESSAGE_BYTES");
            assert!(e.to_string().contains("DynamoDB item"), "{e}");
        }
        // The worst case the cap is sized for fits in 400 KB with room for the item's other attributes.
        let escaped = serde_json::to_string(&"\u{1}".repeat(MAX_MESSAGE_BYTES_LIMIT)).unwrap();
        assert!(escaped.len() + 2 * 1024 <= 400 * 1024, "{}", escaped.len());
    }

    #[test]
    fn the_frame_flush_default_is_the_frame_logs() {
        assert_eq!(load(&[]).unwrap().frame_flush, crate::frames::FLUSH_EVERY);
    }

    #[test]
    fn cors_origin_is_one_origin_or_star() {
        assert_eq!(load(&[]).unwrap().cors_allow_origin, None);
        let c = load(&[("CORS_ALLOW_ORIGIN", "http://127.0.0.1:5173")]).unwrap();
        assert_eq!(c.cors_allow_origin.as_deref(), Some("http://127.0.0.1:5173"));
        assert_eq!(load(&[("CORS_ALLOW_ORIGIN", "*")]).unwrap().cors_allow_origin.as_deref(), Some("*"));
        for bad in ["localhost:5173", "http://a, http://b", "http://a/path", "ftp://a"] {
            let e = load(&[("CORS_ALLOW_ORIGIN", bad)]).unwrap_err();
            assert_eq!(e.var, "CORS_ALLOW_ORIGIN", "{bad}");
        }
    }

    #[test]
    fn web_defaults_are_production_safe_and_providers_need_their_settings() {
        let c = load(&[]).unwrap().web;
        assert!(c.allow_cidrs.is_empty() && c.allow_ports.is_empty() && c.search.is_none());
        assert_eq!((c.fetch_timeout, c.fetch_max_bytes), (Duration::from_secs(10), 2 * 1024 * 1024));
        let c = load(&[("WEB_FETCH_ALLOW_CIDRS", "127.0.0.1/32, ::1/128"), ("WEB_FETCH_ALLOW_PORTS", "8080")]).unwrap();
        assert_eq!(c.web.allow_cidrs.len(), 2);
        assert_eq!(c.web.allow_ports, vec![8080]);
        assert_eq!(load(&[("WEB_FETCH_ALLOW_CIDRS", "localhost")]).unwrap_err().var, "WEB_FETCH_ALLOW_CIDRS");
        assert_eq!(load(&[("WEB_SEARCH_PROVIDER", "bing")]).unwrap_err().var, "WEB_SEARCH_PROVIDER");
        assert_eq!(load(&[("WEB_SEARCH_PROVIDER", "tavily")]).unwrap_err().var, "WEB_SEARCH_API_KEY");
        assert_eq!(load(&[("WEB_SEARCH_PROVIDER", "searxng")]).unwrap_err().var, "WEB_SEARCH_BASE_URL");
        let s = load(&[("WEB_SEARCH_PROVIDER", "Brave"), ("WEB_SEARCH_API_KEY", "k")]).unwrap().web.search.unwrap();
        assert_eq!((s.provider, s.base_url.as_str()), (SearchProvider::Brave, "https://api.search.brave.com"));
    }
}
