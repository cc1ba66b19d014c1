//! Each user's optional CalDAV account: `{url, username, password}`.
//!
//! Both sources hold one JSON object keyed by user id,
//! `{"<user id>": {"url": "…", "username": "…", "password": "…"}}`:
//! - locally the env variable `CALDAV_ACCOUNTS` ([`EnvAccounts`]);
//! - on AWS the Secrets Manager secret named by `CALDAV_ACCOUNTS_SECRET`, read
//!   through the AWS Parameters and Secrets Lambda Extension on localhost
//!   ([`SecretsExtensionAccounts`]; no SDK crate), kept for a short TTL so a
//!   changed secret is seen within minutes without a request per lookup.
//!
//! A user absent from the object has no account: their events live only in
//! DynamoDB. Passwords never appear in `Debug` output.

use super::CaldavError;
use crate::ids::UserId;
use async_trait::async_trait;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// Where a user's calendars are and how to log in.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct CaldavAccount {
    /// The server or principal URL discovery starts from.
    pub url: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for CaldavAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaldavAccount")
            .field("url", &self.url)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Finds a user's CalDAV account.
#[async_trait]
pub trait CaldavAccounts: Send + Sync {
    /// The user's account, `None` when they have none.
    async fn account(&self, user: &UserId) -> Result<Option<CaldavAccount>, CaldavError>;
}

type AccountMap = HashMap<String, CaldavAccount>;

/// The accounts JSON object (see the module docs).
pub fn parse_accounts(json: &str) -> Result<AccountMap, CaldavError> {
    serde_json::from_str(json)
        .map_err(|e| CaldavError::Config(format!("the CalDAV accounts are not the expected JSON: {e}")))
}

/// Accounts fixed at start (`CALDAV_ACCOUNTS`, or none).
#[derive(Debug, Clone, Default)]
pub struct EnvAccounts {
    accounts: AccountMap,
}

impl EnvAccounts {
    pub fn new(accounts: AccountMap) -> Self {
        Self { accounts }
    }

    /// From `CALDAV_ACCOUNTS`; no accounts when it is unset or empty.
    pub fn from_env() -> Result<Self, CaldavError> {
        match std::env::var("CALDAV_ACCOUNTS") {
            Ok(json) if !json.trim().is_empty() => Ok(Self::new(parse_accounts(&json)?)),
            _ => Ok(Self::default()),
        }
    }
}

#[async_trait]
impl CaldavAccounts for EnvAccounts {
    async fn account(&self, user: &UserId) -> Result<Option<CaldavAccount>, CaldavError> {
        Ok(self.accounts.get(user.as_str()).cloned())
    }
}

/// How long a secret read through the extension is used before reading it again.
pub const SECRET_TTL: Duration = Duration::from_secs(300);

/// Accounts in a Secrets Manager secret, through the Lambda extension's
/// `GET /secretsmanager/get?secretId=…` on `localhost:2773`
/// (`PARAMETERS_SECRETS_EXTENSION_HTTP_PORT`), authenticated by the
/// function's `AWS_SESSION_TOKEN`.
pub struct SecretsExtensionAccounts {
    http: reqwest::Client,
    endpoint: String,
    secret_id: String,
    token: String,
    ttl: Duration,
    cache: Mutex<Option<(Instant, Arc<AccountMap>)>>,
}

/// The extension's answer: Secrets Manager's `GetSecretValue` response.
#[derive(Deserialize)]
struct SecretValue {
    #[serde(rename = "SecretString")]
    secret_string: Option<String>,
}

impl SecretsExtensionAccounts {
    /// `endpoint` is the extension's base URL (`http://localhost:2773`).
    pub fn new(
        endpoint: impl Into<String>,
        secret_id: impl Into<String>,
        token: impl Into<String>,
        ttl: Duration,
    ) -> Self {
        Self {
            http: reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap_or_default(),
            endpoint: endpoint.into().trim_end_matches('/').to_string(),
            secret_id: secret_id.into(),
            token: token.into(),
            ttl,
            cache: Mutex::new(None),
        }
    }

    /// From the Lambda environment: the secret `secret_id`, the extension's
    /// port, and the session token.
    pub fn from_env(secret_id: &str) -> Result<Self, CaldavError> {
        let port = std::env::var("PARAMETERS_SECRETS_EXTENSION_HTTP_PORT").unwrap_or_else(|_| "2773".into());
        let token = std::env::var("AWS_SESSION_TOKEN")
            .map_err(|_| CaldavError::Config("AWS_SESSION_TOKEN is not set (the extension needs it)".into()))?;
        Ok(Self::new(format!("http://localhost:{port}"), secret_id, token, SECRET_TTL))
    }

    /// The accounts, from the cache while it is fresh.
    async fn accounts(&self) -> Result<Arc<AccountMap>, CaldavError> {
        // Held across the fetch: concurrent lookups wait for one read.
        let mut cache = self.cache.lock().await;
        if let Some((at, map)) = cache.as_ref() {
            if at.elapsed() < self.ttl {
                return Ok(map.clone());
            }
        }
        let map = Arc::new(self.fetch().await?);
        *cache = Some((Instant::now(), map.clone()));
        Ok(map)
    }

    async fn fetch(&self) -> Result<AccountMap, CaldavError> {
        let url = format!("{}/secretsmanager/get", self.endpoint);
        let resp = self
            .http
            .get(url)
            .query(&[("secretId", &self.secret_id)])
            .header("X-Aws-Parameters-Secrets-Token", &self.token)
            .send()
            .await
            .map_err(|e| CaldavError::Transport(format!("secrets extension: {e}")))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(CaldavError::Config(format!(
                "secrets extension answered HTTP {status} for {}",
                self.secret_id
            )));
        }
        let value: SecretValue =
            resp.json().await.map_err(|e| CaldavError::Config(format!("secrets extension answer: {e}")))?;
        let json = value
            .secret_string
            .ok_or_else(|| CaldavError::Config(format!("secret {} has no SecretString", self.secret_id)))?;
        parse_accounts(&json)
    }
}

#[async_trait]
impl CaldavAccounts for SecretsExtensionAccounts {
    async fn account(&self, user: &UserId) -> Result<Option<CaldavAccount>, CaldavError> {
        Ok(self.accounts().await?.get(user.as_str()).cloned())
    }
}

/// The accounts of this process's environment: the secret when
/// `CALDAV_ACCOUNTS_SECRET` is set (on AWS), else `CALDAV_ACCOUNTS` (locally;
/// unset: nobody has an account).
pub fn accounts_from_env() -> Result<Arc<dyn CaldavAccounts>, CaldavError> {
    match std::env::var("CALDAV_ACCOUNTS_SECRET") {
        Ok(id) if !id.trim().is_empty() => Ok(Arc::new(SecretsExtensionAccounts::from_env(id.trim())?)),
        _ => Ok(Arc::new(EnvAccounts::from_env()?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const JSON: &str = r#"{"u1": {"url": "http://127.0.0.1:5232/", "username": "alice", "password": "pw"}}"#;

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    #[tokio::test]
    async fn env_accounts_find_a_user_and_nobody_else() {
        let accounts = EnvAccounts::new(parse_accounts(JSON).unwrap());
        let a = accounts.account(&user("u1")).await.unwrap().unwrap();
        assert_eq!(
            (a.url.as_str(), a.username.as_str(), a.password.as_str()),
            ("http://127.0.0.1:5232/", "alice", "pw")
        );
        assert_eq!(accounts.account(&user("u2")).await.unwrap(), None);
        assert!(!format!("{a:?}").contains("pw"), "the password stays out of Debug output");
    }

    #[test]
    fn malformed_accounts_are_a_config_error() {
        assert!(matches!(parse_accounts(r#"{"u1": {"url": "x"}}"#), Err(CaldavError::Config(_))));
    }

    /// The extension's HTTP contract on loopback: the secret id in the query,
    /// the session token in the header, GetSecretValue's JSON back; anything
    /// else a 400.
    async fn extension(calls: Arc<AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                calls.fetch_add(1, Ordering::SeqCst);
                let head = String::from_utf8_lossy(&req).to_ascii_lowercase();
                let ok = head.starts_with("get /secretsmanager/get?secretid=caldav%2faccounts ")
                    && head.contains("\r\nx-aws-parameters-secrets-token: session-token\r\n");
                let (status, body) = if ok {
                    ("200 OK", serde_json::json!({"Name": "caldav/accounts", "SecretString": JSON}).to_string())
                } else {
                    ("400 Bad Request", String::new())
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn the_secret_is_read_once_per_ttl() {
        let calls = Arc::new(AtomicUsize::new(0));
        let endpoint = extension(calls.clone()).await;
        let accounts = SecretsExtensionAccounts::new(&endpoint, "caldav/accounts", "session-token", SECRET_TTL);
        assert_eq!(accounts.account(&user("u1")).await.unwrap().unwrap().username, "alice");
        assert_eq!(accounts.account(&user("u2")).await.unwrap(), None);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the second lookup is served from the cache");

        let stale = SecretsExtensionAccounts::new(&endpoint, "caldav/accounts", "session-token", Duration::ZERO);
        stale.account(&user("u1")).await.unwrap();
        stale.account(&user("u1")).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3, "an expired cache reads the secret again");

        let wrong = SecretsExtensionAccounts::new(&endpoint, "caldav/accounts", "other", SECRET_TTL);
        assert!(matches!(wrong.account(&user("u1")).await, Err(CaldavError::Config(_))));
    }
}
