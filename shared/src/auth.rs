//! Bearer-JWT authentication: `Authorization: Bearer <JWT>` in, a [`UserId`] (the
//! token's `sub`) out, or an [`AuthError`] with a machine code and an HTTP status.
//!
//! The contract:
//! - HS256 is accepted only when `AUTH_JWT_SECRET` is set, RS256 only when
//!   `AUTH_JWKS_URL` is set; anything else (`none`, HS/RS confusion, other algs) is
//!   refused. The key is chosen from the configured source for the algorithm, never
//!   from the token, so a public RSA key can never be used as an HMAC secret.
//! - `exp` is required (30 s leeway), `nbf` is honoured, `iss`/`aud` are required
//!   and checked when configured, `sub` must be a valid [`UserId`].
//! - A JWKS needs both `AUTH_ISSUER` and `AUTH_AUDIENCE` (an identity provider
//!   signs every app's tokens with the same keys): the config loader refuses to
//!   start without them ([`AuthConfig::check`]), and an [`Authenticator`] built
//!   from such a config anyway ignores the JWKS, so RS256 tokens are refused.
//! - Neither source configured: every request is refused (fail closed).
//! - JWKS (RSA `sig` keys with a `kid`) are cached for `AUTH_JWKS_CACHE_SECS` (at
//!   least 1 s); concurrent callers share one fetch; an unknown `kid` triggers at
//!   most one refetch per 30 s. If a refresh fails, the stale keys serve for up to
//!   an hour more (failed fetches back off 5 s); with no usable keys the answer is
//!   `jwks_unavailable` (503).
//! - The token itself is never logged.

use crate::config::AuthConfig;
use crate::ids::UserId;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY_SECS: u64 = 30;
/// Tokens longer than this are refused before any parsing.
const MAX_TOKEN_LEN: usize = 8 * 1024;
/// A JWKS document larger than this is refused.
const MAX_JWKS_BYTES: usize = 256 * 1024;

/// Why a request was not authenticated.
///
/// Status mapping (see [`AuthError::status`]): everything is 401 except
/// [`AuthError::JwksUnavailable`], which is 503 — the token may be fine and the
/// client should retry later, not throw its token away and log in again.
/// [`AuthError::NotConfigured`] is 401 on purpose: it is a permanent refusal (a
/// retry cannot help until a redeploy), and a 5xx would invite retries and page
/// people for what is a deliberate fail-closed state. Its code tells a developer
/// running locally why they are refused; it reveals nothing an attacker can use,
/// since every request is refused anyway.
///
/// Codes distinguish claim problems (`token_expired`, `invalid_issuer`, …) only
/// for tokens whose signature was verified first, so they give a forger nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    MissingToken,
    /// The `Authorization` header or the token is not well formed (static reason, never the token).
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// The token's `alg` is not one this deployment accepts.
    #[error("token algorithm not accepted")]
    AlgorithmNotAllowed,
    /// RS256 token whose `kid` is not in the JWKS (after the allowed refresh).
    #[error("token signing key unknown")]
    UnknownKey,
    #[error("invalid token signature")]
    InvalidSignature,
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("token issuer not accepted")]
    WrongIssuer,
    #[error("token audience not accepted")]
    WrongAudience,
    #[error("token subject missing or invalid")]
    InvalidSubject,
    #[error("authentication is not configured")]
    NotConfigured,
    #[error("signing keys unavailable")]
    JwksUnavailable,
}

impl AuthError {
    /// The snake_case machine code sent to clients.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::MissingToken => "missing_token",
            AuthError::Malformed(_)
            | AuthError::AlgorithmNotAllowed
            | AuthError::UnknownKey
            | AuthError::InvalidSignature => "invalid_token",
            AuthError::Expired => "token_expired",
            AuthError::NotYetValid => "token_not_yet_valid",
            AuthError::WrongIssuer => "invalid_issuer",
            AuthError::WrongAudience => "invalid_audience",
            AuthError::InvalidSubject => "invalid_subject",
            AuthError::NotConfigured => "auth_not_configured",
            AuthError::JwksUnavailable => "jwks_unavailable",
        }
    }

    /// The HTTP status: 401, except 503 for `jwks_unavailable` (see the type's doc).
    pub fn status(&self) -> u16 {
        match self {
            AuthError::JwksUnavailable => 503,
            _ => 401,
        }
    }
}

/// Timings of the JWKS cache; fixed in production, shortened by tests.
#[derive(Debug, Clone, Copy)]
struct JwksTiming {
    /// How long fetched keys are fresh (`AUTH_JWKS_CACHE_SECS`, at least 1 s).
    ttl: Duration,
    /// At most one refetch per this interval is triggered by unknown `kid`s.
    min_refetch: Duration,
    /// After a failed fetch, callers fail fast for this long instead of retrying.
    failure_backoff: Duration,
    /// Stale keys are still used, while refreshing fails, for this long past `ttl`.
    stale_grace: Duration,
    /// One fetch's whole budget.
    fetch_timeout: Duration,
}

impl JwksTiming {
    fn new(ttl: Duration) -> Self {
        JwksTiming {
            ttl: ttl.max(Duration::from_secs(1)),
            min_refetch: Duration::from_secs(30),
            failure_backoff: Duration::from_secs(5),
            stale_grace: Duration::from_secs(3600),
            fetch_timeout: Duration::from_secs(5),
        }
    }
}

#[derive(Default)]
struct JwksState {
    keys: HashMap<String, Arc<DecodingKey>>,
    /// When `keys` were last fetched successfully.
    fetched_at: Option<Instant>,
    /// When the last fetch failed, if it did.
    failed_at: Option<Instant>,
    /// When an unknown `kid` last triggered a fetch.
    refetched_at: Option<Instant>,
    /// Bumped on every attempt, so waiters can tell someone else just fetched.
    generation: u64,
}

impl JwksState {
    fn fresh(&self, now: Instant, t: &JwksTiming) -> bool {
        self.fetched_at.is_some_and(|at| now.duration_since(at) < t.ttl)
    }
    fn usable(&self, now: Instant, t: &JwksTiming) -> bool {
        self.fetched_at.is_some_and(|at| now.duration_since(at) < t.ttl + t.stale_grace)
    }
    fn recently_failed(&self, now: Instant, within: Duration) -> bool {
        self.failed_at.is_some_and(|at| now.duration_since(at) < within)
    }
    fn recently_refetched(&self, now: Instant, within: Duration) -> bool {
        self.refetched_at.is_some_and(|at| now.duration_since(at) < within)
    }
}

struct Jwks {
    url: String,
    http: reqwest::Client,
    timing: JwksTiming,
    state: RwLock<JwksState>,
    /// Held for the duration of a fetch: concurrent callers wait and share its result.
    fetch_lock: tokio::sync::Mutex<()>,
}

impl Jwks {
    async fn key(&self, kid: &str) -> Result<Arc<DecodingKey>, AuthError> {
        let t = self.timing;
        let seen_generation = {
            let st = self.state.read().unwrap_or_else(|e| e.into_inner());
            if st.fresh(Instant::now(), &t) {
                if let Some(k) = st.keys.get(kid) {
                    return Ok(k.clone());
                }
            }
            st.generation
        };

        let _fetching = self.fetch_lock.lock().await;
        // None: no fetch; Some(true): a refetch for an unknown kid; Some(false): a refresh.
        let fetch = {
            let st = self.state.read().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if st.generation != seen_generation {
                // Someone fetched while we waited: share their result.
                None
            } else if !st.fresh(now, &t) {
                (!st.recently_failed(now, t.failure_backoff)).then_some(false)
            } else if st.keys.contains_key(kid) {
                None
            } else {
                (!st.recently_refetched(now, t.min_refetch)).then_some(true)
            }
        };
        if let Some(for_unknown_kid) = fetch {
            let fetched = self.fetch().await;
            let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            st.generation += 1;
            if for_unknown_kid {
                st.refetched_at = Some(now);
            }
            match fetched {
                Ok(keys) => {
                    tracing::debug!(url = %self.url, keys = keys.len(), "jwks fetched");
                    st.keys = keys;
                    st.fetched_at = Some(now);
                    st.failed_at = None;
                }
                Err(reason) => {
                    tracing::warn!(url = %self.url, %reason, "jwks fetch failed");
                    st.failed_at = Some(now);
                }
            }
        }

        let st = self.state.read().unwrap_or_else(|e| e.into_inner());
        if !st.usable(Instant::now(), &t) {
            return Err(AuthError::JwksUnavailable);
        }
        st.keys.get(kid).cloned().ok_or(AuthError::UnknownKey)
    }

    /// Fetches and parses the key set: RSA signing keys with a `kid` only; other
    /// keys (EC, symmetric `oct`, encryption keys) are ignored.
    async fn fetch(&self) -> Result<HashMap<String, Arc<DecodingKey>>, String> {
        let resp = self
            .http
            .get(&self.url)
            .header(http::header::ACCEPT, "application/json")
            .timeout(self.timing.fetch_timeout)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("status {}", resp.status()));
        }
        if resp.content_length().is_some_and(|n| n as usize > MAX_JWKS_BYTES) {
            return Err("document too large".into());
        }
        let body = resp.bytes().await.map_err(|e| e.to_string())?;
        if body.len() > MAX_JWKS_BYTES {
            return Err("document too large".into());
        }
        parse_jwks(&body)
    }
}

#[derive(Deserialize)]
struct JwkSetDoc {
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct RsaJwk {
    kty: String,
    kid: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    alg: Option<String>,
    n: Option<String>,
    e: Option<String>,
}

fn parse_jwks(body: &[u8]) -> Result<HashMap<String, Arc<DecodingKey>>, String> {
    let doc: JwkSetDoc = serde_json::from_slice(body).map_err(|e| format!("not a JWK set: {e}"))?;
    let mut keys = HashMap::new();
    for v in doc.keys {
        let Ok(k) = serde_json::from_value::<RsaJwk>(v) else { continue };
        let rsa_sig = k.kty == "RSA"
            && k.use_.as_deref().is_none_or(|u| u == "sig")
            && k.alg.as_deref().is_none_or(|a| a == "RS256");
        if let (true, Some(kid), Some(n), Some(e)) = (rsa_sig, k.kid, k.n, k.e) {
            match DecodingKey::from_rsa_components(&n, &e) {
                Ok(key) => {
                    keys.insert(kid, Arc::new(key));
                }
                Err(err) => tracing::warn!(%kid, %err, "jwks: skipping unusable RSA key"),
            }
        }
    }
    Ok(keys)
}

struct Inner {
    hs256: Option<DecodingKey>,
    jwks: Option<Jwks>,
    issuer: Option<String>,
    audience: Option<String>,
}

/// Verifies bearer tokens. Cheap to clone: the state (and the JWKS cache) is shared.
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Authenticator")
            .field("hs256", &self.inner.hs256.is_some())
            .field("jwks_url", &self.inner.jwks.as_ref().map(|j| j.url.as_str()))
            .field("issuer", &self.inner.issuer)
            .field("audience", &self.inner.audience)
            .finish()
    }
}

#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<serde_json::Value>,
}

impl Authenticator {
    /// The authenticator every function builds once per container, with its
    /// own HTTP client for the JWKS: short timeouts, so an identity provider
    /// that hangs costs a request seconds, not the invocation.
    pub fn from_config(cfg: &AuthConfig) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(10))
            .build()
            .expect("a plain reqwest client builds");
        Self::new(cfg.clone(), http)
    }

    pub fn new(cfg: AuthConfig, http: reqwest::Client) -> Self {
        let timing = JwksTiming::new(cfg.jwks_cache);
        Self::with_timing(cfg, http, timing)
    }

    fn with_timing(cfg: AuthConfig, http: reqwest::Client, timing: JwksTiming) -> Self {
        // Fail closed: a JWKS without both claim checks would accept other apps' tokens.
        let jwks_checked = match cfg.check() {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(error = %e, "JWKS ignored: RS256 tokens will be refused");
                false
            }
        };
        let hs256 = cfg.jwt_secret.filter(|s| !s.is_empty()).map(|s| {
            if s.len() < 32 {
                tracing::warn!("AUTH_JWT_SECRET is shorter than 32 bytes");
            }
            DecodingKey::from_secret(s.as_bytes())
        });
        let jwks = cfg.jwks_url.filter(|u| jwks_checked && !u.trim().is_empty()).map(|url| Jwks {
            url,
            http,
            timing,
            state: RwLock::new(JwksState::default()),
            fetch_lock: tokio::sync::Mutex::new(()),
        });
        if hs256.is_none() && jwks.is_none() {
            tracing::warn!("neither AUTH_JWT_SECRET nor AUTH_JWKS_URL is set: every request will be refused");
        }
        // Blank means unset, as in the config loader.
        let (issuer, audience) =
            (cfg.issuer.filter(|s| !s.trim().is_empty()), cfg.audience.filter(|s| !s.trim().is_empty()));
        Authenticator { inner: Arc::new(Inner { hs256, jwks, issuer, audience }) }
    }

    /// Whether any token could ever be accepted.
    pub fn is_configured(&self) -> bool {
        self.inner.hs256.is_some() || self.inner.jwks.is_some()
    }

    /// Authenticates a request by its `Authorization: Bearer <JWT>` header.
    pub async fn authenticate(&self, headers: &http::HeaderMap) -> Result<UserId, AuthError> {
        let result = self.authenticate_inner(headers).await;
        if let Err(e) = &result {
            tracing::debug!(code = e.code(), reason = %e, "authentication refused");
        }
        result
    }

    async fn authenticate_inner(&self, headers: &http::HeaderMap) -> Result<UserId, AuthError> {
        if !self.is_configured() {
            return Err(AuthError::NotConfigured);
        }
        let token = bearer_token(headers)?;
        self.verify(token).await
    }

    /// Verifies a bare JWT (no `Bearer ` prefix).
    pub async fn verify(&self, token: &str) -> Result<UserId, AuthError> {
        let inner = &*self.inner;
        if inner.hs256.is_none() && inner.jwks.is_none() {
            return Err(AuthError::NotConfigured);
        }
        if token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::Malformed("token too long"));
        }
        // Unknown algs, `none` included, fail to parse here.
        let header = jsonwebtoken::decode_header(token).map_err(|_| AuthError::Malformed("not a JWT"))?;
        // The key comes from the configured source for the algorithm, and the
        // validation allows that one algorithm only: no HS/RS confusion.
        let key_holder;
        let key: &DecodingKey = match (header.alg, &inner.hs256, &inner.jwks) {
            (Algorithm::HS256, Some(secret), _) => secret,
            (Algorithm::RS256, _, Some(jwks)) => {
                let kid = header.kid.as_deref().ok_or(AuthError::Malformed("missing kid"))?;
                key_holder = jwks.key(kid).await?;
                &key_holder
            }
            _ => return Err(AuthError::AlgorithmNotAllowed),
        };

        let mut v = Validation::new(header.alg);
        v.leeway = LEEWAY_SECS;
        v.validate_exp = true;
        v.validate_nbf = true;
        let mut required = vec!["exp"];
        if let Some(iss) = &inner.issuer {
            v.set_issuer(&[iss]);
            required.push("iss");
        }
        match &inner.audience {
            Some(aud) => {
                v.set_audience(&[aud]);
                required.push("aud");
            }
            // Not configured: not checked (the library would otherwise refuse any `aud`).
            None => v.validate_aud = false,
        }
        v.set_required_spec_claims(&required);

        let data = jsonwebtoken::decode::<Claims>(token, key, &v).map_err(map_jwt_error)?;
        match data.claims.sub {
            Some(serde_json::Value::String(sub)) => UserId::parse(sub).map_err(|_| AuthError::InvalidSubject),
            _ => Err(AuthError::InvalidSubject),
        }
    }
}

fn map_jwt_error(e: jsonwebtoken::errors::Error) -> AuthError {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidSignature => AuthError::InvalidSignature,
        K::ExpiredSignature => AuthError::Expired,
        K::ImmatureSignature => AuthError::NotYetValid,
        K::InvalidIssuer => AuthError::WrongIssuer,
        K::InvalidAudience => AuthError::WrongAudience,
        K::MissingRequiredClaim(c) if c == "iss" => AuthError::WrongIssuer,
        K::MissingRequiredClaim(c) if c == "aud" => AuthError::WrongAudience,
        K::MissingRequiredClaim(_) => AuthError::Malformed("missing exp"),
        K::InvalidClaimFormat(_) => AuthError::Malformed("malformed claim"),
        K::InvalidAlgorithm | K::MissingAlgorithm => AuthError::AlgorithmNotAllowed,
        K::InvalidToken | K::Base64(_) | K::Json(_) | K::Utf8(_) => AuthError::Malformed("not a JWT"),
        other => {
            tracing::warn!(error = ?other, "token verification failed");
            AuthError::InvalidSignature
        }
    }
}

/// Extracts the token from exactly one `Authorization: Bearer <token>` header.
fn bearer_token(headers: &http::HeaderMap) -> Result<&str, AuthError> {
    let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthError::MissingToken)?;
    if values.next().is_some() {
        return Err(AuthError::Malformed("more than one Authorization header"));
    }
    let value = value.to_str().map_err(|_| AuthError::Malformed("Authorization header is not ASCII"))?;
    let value = value.trim();
    if value.is_empty() {
        return Err(AuthError::MissingToken);
    }
    let (scheme, rest) = value.split_once([' ', '\t']).unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::Malformed("expected `Bearer <token>`"));
    }
    let token = rest.trim();
    if token.is_empty() {
        return Err(AuthError::MissingToken);
    }
    if token.contains(|c: char| c.is_ascii_whitespace()) {
        return Err(AuthError::Malformed("expected `Bearer <token>`"));
    }
    Ok(token)
}

#[derive(Serialize)]
struct MintClaims<'a> {
    sub: &'a str,
    iat: u64,
    exp: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    iss: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aud: Option<&'a str>,
}

/// Mints an HS256 token for local development: `sub`, `iat`, `exp = now + ttl`.
pub fn mint_hs256(secret: &str, sub: &str, ttl: Duration) -> Result<String, AuthError> {
    mint_hs256_with(secret, sub, ttl, None, None)
}

/// Like [`mint_hs256`], adding `iss` and `aud` when given (for deployments that check them).
pub fn mint_hs256_with(
    secret: &str,
    sub: &str,
    ttl: Duration,
    issuer: Option<&str>,
    audience: Option<&str>,
) -> Result<String, AuthError> {
    if secret.is_empty() {
        return Err(AuthError::NotConfigured);
    }
    UserId::parse(sub).map_err(|_| AuthError::InvalidSubject)?;
    let iat = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let claims = MintClaims { sub, iat, exp: iat.saturating_add(ttl.as_secs()), iss: issuer, aud: audience };
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(secret.as_bytes()))
        .map_err(|_| AuthError::InvalidSignature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use http::HeaderMap;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const SECRET: &str = "test-secret-test-secret-test-secret!";

    /// A fixed 2048-bit test key (PKCS#1), generated with `openssl genrsa 2048`. Test only.
    const RSA_PEM: &str = "-----BEGIN RSA PRIVATE KEY-----
MIIEpAIBAAKCAQEAyrvpVk4gazvV3JxvACSTVzNwmkjs4Rda8FPpbkLyg452FzD/
oj1rHRVqpb9sfvEi9qYoZJ2abCI7C/CpHHLVkOmhvhzYwYh3rxM1NBHFIAA9GDfQ
uybtDT6gwgU492QOGvP9wuANRFzmecSW6jarEp5Sh2gUAiKVur9rf+ysk4zCTIzL
6j2coQbq+sPecfhEIg94JKhBDujFh0gvVbjV7EYN2kpuck0iuCG2d+ybMi1Zsaxp
XmCdndgA6K8S1CACdaCEcSUXahaMmTDhwk22W53e9ckNnM3YRr4K/Efz/LTHYeu/
jRLCsSjjKYQ231EPxb0sMPD/KG/13dyTPOxuEwIDAQABAoIBAAUjxXMkMOs3DaF1
r9S7mKatza2Dqsm8G1ibcAAVH2vZaUIGQnzc/MG0gMsp8ri3KVFCfiSq4DbcmU2g
sNDhUmvFmI2m0pH5gTtFi+RBjRNWHjZmd9q+zmS3EUFJ+5s+BKOHSwgtQPjaOBef
NcpDT4v9yo7XQyaYtN4Sq0mHeQqWi9iGZTaaHqoWdvoGG4A4FBsQdhS3mCHl2yp8
PYU0PEXkDJgM2gnPIkEz/FukGTMh3YypmBrCQjexY8+loEqVDnlwKzrC5GXQS+YJ
e82IyHUkyxhlc85feG4PrfNViRPBAQYUicU7QNMR25tjeNaELvpFC6V+MnExvpeT
86RNYCUCgYEA/wK0s58SOFZIk0cxACU5OQBwXrqBf3hRlmJQiQRYi34nwifNHVHb
NKLrRALvmHEsidosqtLVUkIUIOAFA4gg3C7339kVEWe71exLqAa7PTY4xhQP0CRk
x946IOf+6bv6nMiLgbQ5iAzThGvE1SkkloTMakDjbSY+l4oiQBwprcUCgYEAy4VH
6yY3ciCBoEYWrY+ajdgduo1oflWmCvXpPhfJ6hy3OFhcyvo1DzwUimWCnuBFWTKd
IcszAvMNhgv8k+z0Rz/bdnVgWbf7YkQ3wj4jxQpkhWZ0QlnIi6pd2vo/k/QjW9Bf
Q1oxbg3ZO7pExyxszU9rkgN9q/zFeFEGVANoAfcCgYBBb79QzEPPowxyhnUjdWnO
n7c2B6PNQuGktku2LSBPgyrOnon6uROH2TqHtD0pH/lu0kZd+0X0GrKxkOqYcmkE
NyUyErFeSwEfLshnMHsBhRVidqlsHrqhsvu1j/KQpcT0UF3EBawxpiDsvP7AOBOE
cEVICqiRTJwJJNAPJWrohQKBgQCFjVqaZqOv0sD9acDr9/ZV6mHnz2+op4+kVabP
RlELvfhFk0ahM/upmaVpBB/pHgaj9+DBElTRNKnFMwx2DeJm9vKPE4s8lMzzuQxV
/O0AGkfIemkEOWKutAeO8PTTpDunvl8lFYSmUZQh66PCh9aGC/3s/Tl0qRT0VUcv
zmRsFQKBgQCQuydbozd73qUWMpgtaLvXaLXVXTPZ2Cnz+o2PEsPKByYDWxqoBWsO
phqgndZgsUrQK0+ZzQifm04i60IMmagyManHbY7YnMW826vqoBL19Z38NKZafXR3
+e4KPEptP18iPguJsk/IvsX/hqvQetJ9CLh90QlfJK8oyYFb13/NoA==
-----END RSA PRIVATE KEY-----
";
    /// The key's modulus, base64url without padding (`openssl rsa -modulus`).
    const RSA_N: &str = "yrvpVk4gazvV3JxvACSTVzNwmkjs4Rda8FPpbkLyg452FzD_oj1rHRVqpb9sfvEi9qYoZJ2abCI7C_CpHHLVkOmhvhzYwYh3rxM1NBHFIAA9GDfQuybtDT6gwgU492QOGvP9wuANRFzmecSW6jarEp5Sh2gUAiKVur9rf-ysk4zCTIzL6j2coQbq-sPecfhEIg94JKhBDujFh0gvVbjV7EYN2kpuck0iuCG2d-ybMi1ZsaxpXmCdndgA6K8S1CACdaCEcSUXahaMmTDhwk22W53e9ckNnM3YRr4K_Efz_LTHYeu_jRLCsSjjKYQ231EPxb0sMPD_KG_13dyTPOxuEw";
    const RSA_E: &str = "AQAB";

    fn now() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
    }

    fn hs_cfg() -> AuthConfig {
        AuthConfig { jwt_secret: Some(SECRET.into()), jwks_cache: Duration::from_secs(600), ..Default::default() }
    }

    fn auth(cfg: AuthConfig) -> Authenticator {
        Authenticator::new(cfg, reqwest::Client::new())
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        h
    }

    fn hs(claims: serde_json::Value, secret: &str) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(secret.as_bytes()))
            .unwrap()
    }

    fn rs(claims: serde_json::Value, kid: &str) -> String {
        let mut h = Header::new(Algorithm::RS256);
        h.kid = Some(kid.into());
        jsonwebtoken::encode(&h, &claims, &EncodingKey::from_rsa_pem(RSA_PEM.as_bytes()).unwrap()).unwrap()
    }

    /// The issuer and audience the JWKS tests configure (a JWKS needs both).
    const ISSUER: &str = "https://idp.test";
    const AUDIENCE: &str = "agentic-chat";

    /// Valid for every configuration of these tests: `iss` and `aud` are only
    /// checked where configured.
    fn valid_claims(sub: &str) -> serde_json::Value {
        json!({ "sub": sub, "iat": now(), "exp": now() + 600, "iss": ISSUER, "aud": AUDIENCE })
    }

    fn b64(v: &serde_json::Value) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    }

    #[tokio::test]
    async fn valid_hs256_gives_the_sub() {
        let a = auth(hs_cfg());
        let user = a.authenticate(&bearer(&hs(valid_claims("alice"), SECRET))).await.unwrap();
        assert_eq!(user.as_str(), "alice");
        // Minted dev tokens verify too.
        let t = mint_hs256(SECRET, "dev-user", Duration::from_secs(60)).unwrap();
        assert_eq!(a.authenticate(&bearer(&t)).await.unwrap().as_str(), "dev-user");
        // Scheme is case-insensitive, surrounding whitespace tolerated.
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, format!("bEaReR   {t} ").parse().unwrap());
        assert_eq!(a.authenticate(&h).await.unwrap().as_str(), "dev-user");
    }

    #[tokio::test]
    async fn expired_and_not_yet_valid() {
        let a = auth(hs_cfg());
        let expired = hs(json!({ "sub": "alice", "exp": now() - 120 }), SECRET);
        let e = a.authenticate(&bearer(&expired)).await.unwrap_err();
        assert_eq!((e.clone(), e.code(), e.status()), (AuthError::Expired, "token_expired", 401));
        // Within the leeway: still fine.
        let skewed = hs(json!({ "sub": "alice", "exp": now() - 5 }), SECRET);
        assert!(a.authenticate(&bearer(&skewed)).await.is_ok());
        let future = hs(json!({ "sub": "alice", "exp": now() + 600, "nbf": now() + 300 }), SECRET);
        assert_eq!(a.authenticate(&bearer(&future)).await.unwrap_err(), AuthError::NotYetValid);
        let no_exp = hs(json!({ "sub": "alice" }), SECRET);
        assert_eq!(a.authenticate(&bearer(&no_exp)).await.unwrap_err().code(), "invalid_token");
    }

    #[tokio::test]
    async fn wrong_secret_and_tampering_are_refused() {
        let a = auth(hs_cfg());
        let other = hs(valid_claims("alice"), "another-secret-another-secret-xx");
        let e = a.authenticate(&bearer(&other)).await.unwrap_err();
        assert_eq!((e.clone(), e.code()), (AuthError::InvalidSignature, "invalid_token"));
        // Swap the payload of a valid token.
        let good = hs(valid_claims("alice"), SECRET);
        let parts: Vec<&str> = good.split('.').collect();
        let forged = format!("{}.{}.{}", parts[0], b64(&valid_claims("mallory")), parts[2]);
        assert_eq!(a.authenticate(&bearer(&forged)).await.unwrap_err(), AuthError::InvalidSignature);
    }

    #[tokio::test]
    async fn alg_none_is_refused() {
        let a = auth(hs_cfg());
        for alg in ["none", "None", "NONE"] {
            let t = format!("{}.{}.", b64(&json!({ "alg": alg, "typ": "JWT" })), b64(&valid_claims("alice")));
            let e = a.authenticate(&bearer(&t)).await.unwrap_err();
            assert_eq!(e.code(), "invalid_token", "{alg}");
        }
    }

    #[tokio::test]
    async fn sub_must_be_a_valid_user_id() {
        let a = auth(hs_cfg());
        for claims in [
            json!({ "exp": now() + 600 }),
            json!({ "sub": "", "exp": now() + 600 }),
            json!({ "sub": "a#b", "exp": now() + 600 }),
            json!({ "sub": 42, "exp": now() + 600 }),
        ] {
            let e = a.authenticate(&bearer(&hs(claims.clone(), SECRET))).await.unwrap_err();
            assert_eq!((e.clone(), e.code()), (AuthError::InvalidSubject, "invalid_subject"), "{claims}");
        }
        assert_eq!(mint_hs256(SECRET, "a#b", Duration::from_secs(1)).unwrap_err(), AuthError::InvalidSubject);
    }

    #[tokio::test]
    async fn bad_header_forms() {
        let a = auth(hs_cfg());
        let t = hs(valid_claims("alice"), SECRET);
        let e = a.authenticate(&HeaderMap::new()).await.unwrap_err();
        assert_eq!((e.code(), e.status()), ("missing_token", 401));
        for v in ["", "Bearer", "Bearer   "] {
            let mut h = HeaderMap::new();
            h.insert(http::header::AUTHORIZATION, v.parse().unwrap());
            assert_eq!(a.authenticate(&h).await.unwrap_err(), AuthError::MissingToken, "{v:?}");
        }
        for v in [format!("Basic {t}"), t.clone(), format!("Bearer {t} extra"), "Bearer a.b".into(), "Bearer x".into()]
        {
            let mut h = HeaderMap::new();
            h.insert(http::header::AUTHORIZATION, v.parse().unwrap());
            let e = a.authenticate(&h).await.unwrap_err();
            assert!(matches!(e, AuthError::Malformed(_)), "{v:?}: {e:?}");
            assert_eq!(e.code(), "invalid_token");
            // The message never echoes the token.
            assert!(!e.to_string().contains(&t));
        }
        let mut h = bearer(&t);
        h.append(http::header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
        assert!(matches!(a.authenticate(&h).await.unwrap_err(), AuthError::Malformed(_)));
        let long = "a".repeat(MAX_TOKEN_LEN + 1);
        assert!(matches!(a.authenticate(&bearer(&long)).await.unwrap_err(), AuthError::Malformed(_)));
    }

    #[tokio::test]
    async fn not_configured_refuses_everything() {
        let a = auth(AuthConfig::default());
        assert!(!a.is_configured());
        let t = hs(valid_claims("alice"), SECRET);
        for h in [bearer(&t), HeaderMap::new()] {
            let e = a.authenticate(&h).await.unwrap_err();
            assert_eq!((e.clone(), e.code(), e.status()), (AuthError::NotConfigured, "auth_not_configured", 401));
        }
        // An empty secret counts as unset.
        let a = auth(AuthConfig { jwt_secret: Some(String::new()), ..Default::default() });
        assert_eq!(a.authenticate(&bearer(&t)).await.unwrap_err(), AuthError::NotConfigured);
    }

    #[tokio::test]
    async fn issuer_and_audience_when_configured() {
        let a = auth(AuthConfig {
            issuer: Some("https://issuer.test".into()),
            audience: Some("agentic-chat".into()),
            ..hs_cfg()
        });
        let exp = now() + 600;
        let ok = hs(json!({ "sub": "alice", "exp": exp, "iss": "https://issuer.test", "aud": "agentic-chat" }), SECRET);
        assert!(a.authenticate(&bearer(&ok)).await.is_ok());
        let aud_list = hs(
            json!({ "sub": "alice", "exp": exp, "iss": "https://issuer.test", "aud": ["x", "agentic-chat"] }),
            SECRET,
        );
        assert!(a.authenticate(&bearer(&aud_list)).await.is_ok());
        let minted =
            mint_hs256_with(SECRET, "bob", Duration::from_secs(60), Some("https://issuer.test"), Some("agentic-chat"))
                .unwrap();
        assert!(a.authenticate(&bearer(&minted)).await.is_ok());

        let cases = [
            (
                json!({ "sub": "alice", "exp": exp, "iss": "https://evil.test", "aud": "agentic-chat" }),
                "invalid_issuer",
            ),
            (json!({ "sub": "alice", "exp": exp, "aud": "agentic-chat" }), "invalid_issuer"),
            (json!({ "sub": "alice", "exp": exp, "iss": "https://issuer.test", "aud": "other" }), "invalid_audience"),
            (json!({ "sub": "alice", "exp": exp, "iss": "https://issuer.test" }), "invalid_audience"),
        ];
        for (claims, code) in cases {
            let e = a.authenticate(&bearer(&hs(claims.clone(), SECRET))).await.unwrap_err();
            assert_eq!((e.code(), e.status()), (code, 401), "{claims}");
        }

        // Not configured: not checked.
        let a = auth(hs_cfg());
        let any = hs(json!({ "sub": "alice", "exp": exp, "iss": "whoever", "aud": "whatever" }), SECRET);
        assert!(a.authenticate(&bearer(&any)).await.is_ok());
    }

    #[tokio::test]
    async fn rs256_refused_when_only_the_secret_is_configured() {
        let a = auth(hs_cfg());
        let e = a.authenticate(&bearer(&rs(valid_claims("alice"), "k1"))).await.unwrap_err();
        assert_eq!((e.clone(), e.code()), (AuthError::AlgorithmNotAllowed, "invalid_token"));
    }

    // ---- JWKS ----

    /// A hand-written HTTP/1.1 server serving a JWK set, counting requests.
    struct JwksServer {
        url: String,
        hits: Arc<AtomicUsize>,
        body: Arc<Mutex<String>>,
    }

    fn jwk_set(kids: &[&str]) -> String {
        let keys: Vec<_> = kids
            .iter()
            .map(|kid| json!({ "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": RSA_N, "e": RSA_E }))
            .collect();
        // Keys we must ignore ride along: a symmetric key and an encryption key.
        let mut keys = keys;
        keys.push(json!({ "kty": "oct", "kid": "sym", "k": "c2VjcmV0" }));
        keys.push(json!({ "kty": "RSA", "kid": "enc", "use": "enc", "n": RSA_N, "e": RSA_E }));
        json!({ "keys": keys }).to_string()
    }

    async fn jwks_server(kids: &[&str], delay: Duration) -> JwksServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/.well-known/jwks.json", listener.local_addr().unwrap());
        let hits = Arc::new(AtomicUsize::new(0));
        let body = Arc::new(Mutex::new(jwk_set(kids)));
        let (h, b) = (hits.clone(), body.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else { return };
                let (h, b) = (h.clone(), b.clone());
                tokio::spawn(async move {
                    let mut req = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => req.extend_from_slice(&buf[..n]),
                        }
                    }
                    h.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    let body = b.lock().unwrap().clone();
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        JwksServer { url, hits, body }
    }

    fn jwks_cfg(url: &str) -> AuthConfig {
        AuthConfig {
            jwks_url: Some(url.into()),
            issuer: Some(ISSUER.into()),
            audience: Some(AUDIENCE.into()),
            jwks_cache: Duration::from_secs(600),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn jwks_tokens_of_another_app_or_issuer_are_refused() {
        let srv = jwks_server(&["k1"], Duration::ZERO).await;
        let a = auth(jwks_cfg(&srv.url));
        let exp = now() + 600;
        assert!(a.authenticate(&bearer(&rs(valid_claims("alice"), "k1"))).await.is_ok());
        let cases = [
            // Same identity provider, same keys, another app's audience.
            (json!({ "sub": "alice", "exp": exp, "iss": ISSUER, "aud": "another-app" }), "invalid_audience"),
            (json!({ "sub": "alice", "exp": exp, "iss": ISSUER, "aud": ["another-app"] }), "invalid_audience"),
            (json!({ "sub": "alice", "exp": exp, "iss": ISSUER }), "invalid_audience"),
            // Same keys, another issuer.
            (json!({ "sub": "alice", "exp": exp, "iss": "https://evil.test", "aud": AUDIENCE }), "invalid_issuer"),
            (json!({ "sub": "alice", "exp": exp, "aud": AUDIENCE }), "invalid_issuer"),
        ];
        for (claims, code) in cases {
            let e = a.authenticate(&bearer(&rs(claims.clone(), "k1"))).await.unwrap_err();
            assert_eq!((e.code(), e.status()), (code, 401), "{claims}");
        }
    }

    #[tokio::test]
    async fn a_jwks_without_issuer_and_audience_is_not_used() {
        let srv = jwks_server(&["k1"], Duration::ZERO).await;
        let token = rs(valid_claims("alice"), "k1");
        for (issuer, audience) in
            [(None, None), (Some(ISSUER), None), (None, Some(AUDIENCE)), (Some(" "), Some(AUDIENCE))]
        {
            let cfg =
                AuthConfig { issuer: issuer.map(Into::into), audience: audience.map(Into::into), ..jwks_cfg(&srv.url) };
            assert!(cfg.check().is_err(), "{issuer:?} {audience:?}");
            let a = auth(cfg.clone());
            let e = a.authenticate(&bearer(&token)).await.unwrap_err();
            assert_eq!((e.code(), e.status()), ("auth_not_configured", 401), "{issuer:?} {audience:?}");
            // With a secret too, the secret works and RS256 is not accepted.
            let a = auth(AuthConfig { jwt_secret: Some(SECRET.into()), ..cfg });
            assert_eq!(a.authenticate(&bearer(&token)).await.unwrap_err(), AuthError::AlgorithmNotAllowed);
            assert!(a.authenticate(&bearer(&hs(valid_claims("alice"), SECRET))).await.is_ok());
        }
        assert_eq!(srv.hits.load(Ordering::SeqCst), 0, "the JWKS was never fetched");
    }

    #[tokio::test]
    async fn rs256_via_jwks_is_cached() {
        let srv = jwks_server(&["k1"], Duration::ZERO).await;
        let a = auth(jwks_cfg(&srv.url));
        let user = a.authenticate(&bearer(&rs(valid_claims("alice"), "k1"))).await.unwrap();
        assert_eq!(user.as_str(), "alice");
        assert_eq!(srv.hits.load(Ordering::SeqCst), 1);
        let user = a.clone().authenticate(&bearer(&rs(valid_claims("bob"), "k1"))).await.unwrap();
        assert_eq!(user.as_str(), "bob");
        assert_eq!(srv.hits.load(Ordering::SeqCst), 1, "second token served from the cache");
        // Claims are still checked on the RS256 path.
        let expired = rs(json!({ "sub": "alice", "exp": now() - 120, "iss": ISSUER, "aud": AUDIENCE }), "k1");
        assert_eq!(a.authenticate(&bearer(&expired)).await.unwrap_err(), AuthError::Expired);
        // Keys of other kinds in the set are not usable.
        for kid in ["sym", "enc"] {
            assert_eq!(
                a.authenticate(&bearer(&rs(valid_claims("alice"), kid))).await.unwrap_err(),
                AuthError::UnknownKey
            );
        }
    }

    #[tokio::test]
    async fn unknown_kid_refetches_once_then_is_rate_limited() {
        let srv = jwks_server(&["k1"], Duration::ZERO).await;
        let a = auth(jwks_cfg(&srv.url));
        assert!(a.authenticate(&bearer(&rs(valid_claims("alice"), "k1"))).await.is_ok());
        assert_eq!(srv.hits.load(Ordering::SeqCst), 1);

        // The issuer rotates in k2: the first k2 token triggers one refetch and passes.
        *srv.body.lock().unwrap() = jwk_set(&["k1", "k2"]);
        assert!(a.authenticate(&bearer(&rs(valid_claims("alice"), "k2"))).await.is_ok());
        assert_eq!(srv.hits.load(Ordering::SeqCst), 2);

        // A flood of unknown kids right after: no more fetches.
        for i in 0..20 {
            let e = a.authenticate(&bearer(&rs(valid_claims("alice"), &format!("bogus{i}")))).await.unwrap_err();
            assert_eq!((e.code(), e.status()), ("invalid_token", 401));
        }
        assert_eq!(srv.hits.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn unknown_kids_on_a_cold_cache_cost_two_fetches_at_most() {
        let srv = jwks_server(&["k1"], Duration::ZERO).await;
        let a = auth(jwks_cfg(&srv.url));
        // The first fetch fills the cache, the second is the one refetch an unknown kid may trigger.
        for i in 0..10 {
            let e = a.authenticate(&bearer(&rs(valid_claims("alice"), &format!("nope{i}")))).await.unwrap_err();
            assert_eq!(e, AuthError::UnknownKey);
        }
        assert_eq!(srv.hits.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_fetch() {
        let srv = jwks_server(&["k1"], Duration::from_millis(100)).await;
        let a = auth(jwks_cfg(&srv.url));
        let token = rs(valid_claims("alice"), "k1");
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (a, h) = (a.clone(), bearer(&token));
                tokio::spawn(async move { a.authenticate(&h).await })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap().unwrap().as_str(), "alice");
        }
        assert_eq!(srv.hits.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn expired_cache_refreshes_and_min_refetch_elapses() {
        let srv = jwks_server(&["k1"], Duration::ZERO).await;
        let timing = JwksTiming {
            ttl: Duration::from_millis(400),
            min_refetch: Duration::from_millis(100),
            ..JwksTiming::new(Duration::from_secs(600))
        };
        let a = Authenticator::with_timing(jwks_cfg(&srv.url), reqwest::Client::new(), timing);
        let hits = || srv.hits.load(Ordering::SeqCst);
        let t = rs(valid_claims("alice"), "k1");
        let unknown = rs(valid_claims("alice"), "x");
        assert!(a.authenticate(&bearer(&t)).await.is_ok());
        assert_eq!(hits(), 1);
        assert!(a.authenticate(&bearer(&unknown)).await.is_err());
        assert_eq!(hits(), 2, "unknown kid: one refetch");
        assert!(a.authenticate(&bearer(&unknown)).await.is_err());
        assert_eq!(hits(), 2, "within min_refetch: no refetch");
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(a.authenticate(&bearer(&unknown)).await.is_err());
        assert_eq!(hits(), 3, "after min_refetch: one more refetch");
        assert!(a.authenticate(&bearer(&t)).await.is_ok());
        assert_eq!(hits(), 3, "known kid: from the cache");
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert!(a.authenticate(&bearer(&t)).await.is_ok());
        assert_eq!(hits(), 4, "stale cache: refreshed");
    }

    #[tokio::test]
    async fn stale_keys_serve_while_the_jwks_is_broken_then_503() {
        let srv = jwks_server(&["k1"], Duration::ZERO).await;
        let timing = JwksTiming {
            ttl: Duration::from_millis(200),
            stale_grace: Duration::from_millis(300),
            failure_backoff: Duration::from_millis(50),
            ..JwksTiming::new(Duration::from_secs(600))
        };
        let a = Authenticator::with_timing(jwks_cfg(&srv.url), reqwest::Client::new(), timing);
        let hits = || srv.hits.load(Ordering::SeqCst);
        let t = rs(valid_claims("alice"), "k1");
        assert!(a.authenticate(&bearer(&t)).await.is_ok());
        *srv.body.lock().unwrap() = "<html>oops</html>".into();
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(a.authenticate(&bearer(&t)).await.is_ok(), "refresh failed: stale keys still used");
        assert!(a.authenticate(&bearer(&t)).await.is_ok());
        assert_eq!(hits(), 2, "failure backoff: one failed attempt, not one per request");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let e = a.authenticate(&bearer(&t)).await.unwrap_err();
        assert_eq!((e.code(), e.status()), ("jwks_unavailable", 503), "past the stale grace");
        assert_eq!(hits(), 3);
        *srv.body.lock().unwrap() = jwk_set(&["k1"]);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(a.authenticate(&bearer(&t)).await.is_ok(), "recovers once the JWKS does");
        assert_eq!(hits(), 4);
    }

    #[tokio::test]
    async fn hs256_refused_when_only_jwks_is_configured() {
        let srv = jwks_server(&["k1"], Duration::ZERO).await;
        let a = auth(jwks_cfg(&srv.url));
        // Plain HS256, and the classic confusion: HMAC keyed with the public key material.
        let n_bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(RSA_N).unwrap();
        for secret in [SECRET.as_bytes().to_vec(), RSA_N.as_bytes().to_vec(), n_bytes] {
            let mut h = Header::new(Algorithm::HS256);
            h.kid = Some("k1".into());
            let t = jsonwebtoken::encode(&h, &valid_claims("alice"), &EncodingKey::from_secret(&secret)).unwrap();
            let e = a.authenticate(&bearer(&t)).await.unwrap_err();
            assert_eq!((e.clone(), e.code()), (AuthError::AlgorithmNotAllowed, "invalid_token"));
        }
        // Other RSA/EC algs are refused too, whatever the key.
        let t = format!("{}.{}.sig", b64(&json!({ "alg": "RS512", "kid": "k1" })), b64(&valid_claims("alice")));
        assert_eq!(a.authenticate(&bearer(&t)).await.unwrap_err(), AuthError::AlgorithmNotAllowed);
        assert_eq!(srv.hits.load(Ordering::SeqCst), 0, "refused before any fetch");
    }

    #[tokio::test]
    async fn both_configured_keeps_the_keys_apart() {
        let srv = jwks_server(&["k1"], Duration::ZERO).await;
        let a = auth(AuthConfig { jwt_secret: Some(SECRET.into()), ..jwks_cfg(&srv.url) });
        assert!(a.authenticate(&bearer(&hs(valid_claims("alice"), SECRET))).await.is_ok());
        assert!(a.authenticate(&bearer(&rs(valid_claims("alice"), "k1"))).await.is_ok());
        let confused = hs(valid_claims("alice"), RSA_N);
        assert_eq!(a.authenticate(&bearer(&confused)).await.unwrap_err(), AuthError::InvalidSignature);
    }

    #[tokio::test]
    async fn jwks_down_is_503_and_backs_off() {
        // A port with nothing listening.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        drop(listener);
        let a = auth(jwks_cfg(&url));
        let e = a.authenticate(&bearer(&rs(valid_claims("alice"), "k1"))).await.unwrap_err();
        assert_eq!((e.clone(), e.code(), e.status()), (AuthError::JwksUnavailable, "jwks_unavailable", 503));
        // Within the failure backoff: fails fast without another attempt.
        let st = a.inner.jwks.as_ref().unwrap().state.read().unwrap().generation;
        assert!(a.authenticate(&bearer(&rs(valid_claims("alice"), "k1"))).await.is_err());
        assert_eq!(a.inner.jwks.as_ref().unwrap().state.read().unwrap().generation, st);
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let _g = rt.enter();
        let a = auth(hs_cfg());
        assert!(!format!("{a:?}").contains(SECRET));
    }
}
