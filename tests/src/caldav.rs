//! The CalDAV servers of the calendar tests, both started by `scripts/test.sh`
//! with the users of `CALDAV_TEST_USERS` (`user:password …`, `RADICALE_USERS`
//! in `scripts/lib.sh`):
//! - Radicale at `CALDAV_TEST_URL` (plain HTTP);
//! - Xandikos at `CALDAV_TEST_URL_XANDIKOS`, multi-user over HTTPS with the
//!   self-signed certificate at `CALDAV_TEST_XANDIKOS_CA` (Xandikos checks
//!   passwords only over HTTPS), which this module's clients trust.
//!
//! Without a server's URL a test on it is skipped with a message, except in
//! CI (`CI=true`), where that is a failure.

use shared::calendar::caldav::{CaldavAccount, CaldavAccounts, CaldavClient, CaldavRemote, CalendarInfo, EnvAccounts};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Which CalDAV server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Radicale,
    Xandikos,
}

impl Server {
    pub fn name(self) -> &'static str {
        match self {
            Server::Radicale => "Radicale",
            Server::Xandikos => "Xandikos",
        }
    }

    fn url_var(self) -> &'static str {
        match self {
            Server::Radicale => "CALDAV_TEST_URL",
            Server::Xandikos => "CALDAV_TEST_URL_XANDIKOS",
        }
    }
}

/// The test run's `server`, or `None` (skipped) outside CI when there is none.
pub fn caldav_server(server: Server, test: &str) -> Option<CaldavServer> {
    let var = server.url_var();
    let url = std::env::var(var).ok().filter(|u| !u.is_empty());
    let missing = url.is_none().then(|| format!("{var} is not set (no {})", server.name()));
    if !crate::web::present(&format!("{test} on {}", server.name()), missing) {
        return None;
    }
    Some(CaldavServer { server, url: url.unwrap_or_default(), http: http_client(server) })
}

/// The test run's Radicale, or `None` (skipped) outside CI when there is none.
pub fn radicale(test: &str) -> Option<Radicale> {
    caldav_server(Server::Radicale, test)
}

/// The HTTP client of `server`'s accounts: the production client's timeouts,
/// and for Xandikos its certificate as a root.
fn http_client(server: Server) -> reqwest::Client {
    let mut builder =
        reqwest::Client::builder().connect_timeout(Duration::from_secs(5)).timeout(Duration::from_secs(30));
    if server == Server::Xandikos {
        let path = std::env::var("CALDAV_TEST_XANDIKOS_CA").expect("CALDAV_TEST_XANDIKOS_CA (scripts/test.sh sets it)");
        let pem = std::fs::read(&path).unwrap_or_else(|e| panic!("Xandikos's certificate {path}: {e}"));
        builder = builder.add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("a PEM certificate"));
    }
    builder.build().expect("an HTTP client")
}

/// A running CalDAV server.
pub struct CaldavServer {
    pub server: Server,
    pub url: String,
    http: reqwest::Client,
}

/// The name the Radicale-only callers know.
pub type Radicale = CaldavServer;

impl CaldavServer {
    /// `user`'s account with the password the server has for them.
    pub fn account(&self, user: &str) -> CaldavAccount {
        let users = std::env::var("CALDAV_TEST_USERS").unwrap_or_default();
        let password = users
            .split_whitespace()
            .find_map(|pair| pair.strip_prefix(user)?.strip_prefix(':'))
            .map_or_else(|| format!("{user}-pw"), str::to_string);
        self.account_with(user, &password)
    }

    pub fn account_with(&self, user: &str, password: &str) -> CaldavAccount {
        CaldavAccount {
            url: format!("{}/", self.url.trim_end_matches('/')),
            username: user.into(),
            password: password.into(),
        }
    }

    /// A client of `account` on this server.
    pub fn client_of(&self, account: &CaldavAccount) -> CaldavClient {
        CaldavClient::with_http(self.http.clone(), account).expect("a CalDAV client")
    }

    pub fn client(&self, user: &str) -> CaldavClient {
        self.client_of(&self.account(user))
    }

    /// The calendar seam with these app users' accounts (`app user → server user`).
    pub fn remote(&self, users: &[(&str, &str)]) -> CaldavRemote {
        let accounts: HashMap<_, _> = users.iter().map(|(app, user)| (app.to_string(), self.account(user))).collect();
        let accounts: Arc<dyn CaldavAccounts> = Arc::new(EnvAccounts::new(accounts));
        CaldavRemote::with_http(accounts, self.http.clone())
    }

    /// A new calendar of `user`'s, its own for one test (tests share the server).
    pub async fn fresh_calendar(&self, user: &str, test: &str) -> (CaldavClient, CalendarInfo) {
        let client = self.client(user);
        let slug = format!("{test}-{}", uuid::Uuid::new_v4().simple());
        let cal = client.create_calendar(&slug, test).await.expect("MKCALENDAR");
        (client, cal)
    }
}
