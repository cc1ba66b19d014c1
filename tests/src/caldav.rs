//! The CalDAV server of the calendar tests: the Radicale `scripts/test.sh`
//! starts (`CALDAV_TEST_URL`) with the users of `CALDAV_TEST_USERS`
//! (`user:password …`, `RADICALE_USERS` in `scripts/lib.sh`).
//!
//! Without `CALDAV_TEST_URL` a test is skipped with a message, except in CI
//! (`CI=true`), where that is a failure.

use shared::calendar::caldav::{CaldavAccount, CaldavClient, CalendarInfo};

/// The test run's Radicale, or `None` (skipped) outside CI when there is none.
pub fn radicale(test: &str) -> Option<Radicale> {
    let url = std::env::var("CALDAV_TEST_URL").ok().filter(|u| !u.is_empty());
    let missing = url.is_none().then(|| "CALDAV_TEST_URL is not set (no Radicale)".to_string());
    crate::web::present(test, missing).then(|| Radicale { url: url.unwrap_or_default() })
}

/// A running Radicale.
pub struct Radicale {
    pub url: String,
}

impl Radicale {
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

    pub fn client(&self, user: &str) -> CaldavClient {
        CaldavClient::new(&self.account(user)).expect("a CalDAV client")
    }

    /// A new calendar of `user`'s, its own for one test (tests share the server).
    pub async fn fresh_calendar(&self, user: &str, test: &str) -> (CaldavClient, CalendarInfo) {
        let client = self.client(user);
        let slug = format!("{test}-{}", uuid::Uuid::new_v4().simple());
        let cal = client.create_calendar(&slug, test).await.expect("MKCALENDAR");
        (client, cal)
    }
}
