//! The calendar's [`Remote`] seam over CalDAV: a user with an account gets
//! their default calendar (the first calendar of events, made when they have
//! none); events are written there as iCalendar objects conditioned on the
//! ETag last seen, and read back from `sync-collection`.
//!
//! Errors become [`CalendarError`]s: a `412` is `RemoteConflict` naming the
//! event's title (nothing written), anything else `Remote`.

use super::accounts::{CaldavAccount, CaldavAccounts};
use super::client::{event_href, CaldavClient, Precondition, Resource};
use super::ical::{from_ics, summary_of, to_ics};
use super::CaldavError;
use crate::calendar::error::CalendarError;
use crate::calendar::model::{CalendarEvent, Organizer, RemoteRef, SkipReason, SkippedEvent, Zone};
use crate::calendar::remote::{Remote, RemoteCalendar, RemoteChanges};
use crate::ids::UserId;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Mutex;

impl From<CaldavError> for CalendarError {
    fn from(e: CaldavError) -> Self {
        CalendarError::Remote(e.to_string())
    }
}

/// Users' CalDAV calendars, found through their accounts.
pub struct CaldavRemote {
    accounts: Arc<dyn CaldavAccounts>,
    http: reqwest::Client,
    /// The zone of floating times read from the server.
    default_zone: Zone,
    /// The default calendar's href per user, for the account it was found
    /// with: discovery is three round trips, done once per process.
    found: Mutex<HashMap<UserId, (CaldavAccount, String)>>,
}

impl CaldavRemote {
    pub fn new(accounts: Arc<dyn CaldavAccounts>) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        Self::with_http(accounts, http)
    }

    /// Talking through `http` (e.g. one that trusts a server's own certificate).
    pub fn with_http(accounts: Arc<dyn CaldavAccounts>, http: reqwest::Client) -> Self {
        Self { accounts, http, default_zone: Zone::UTC, found: Mutex::new(HashMap::new()) }
    }

    /// With the accounts of this process's environment ([`super::accounts_from_env`]).
    pub fn from_env() -> Result<Self, CaldavError> {
        Ok(Self::new(super::accounts_from_env()?))
    }

    /// Floating times (no zone, no `Z`) from the server are read in `zone`.
    pub fn with_default_zone(mut self, zone: Zone) -> Self {
        self.default_zone = zone;
        self
    }

    /// The user's default calendar href on `client`, found once.
    async fn calendar_href(
        &self,
        user: &UserId,
        account: &CaldavAccount,
        client: &CaldavClient,
    ) -> Result<String, CaldavError> {
        if let Some((a, href)) = self.found.lock().await.get(user) {
            if a == account {
                return Ok(href.clone());
            }
        }
        let href = client.default_calendar().await?.href;
        self.found.lock().await.insert(user.clone(), (account.clone(), href.clone()));
        Ok(href)
    }
}

#[async_trait::async_trait]
impl Remote for CaldavRemote {
    async fn calendar(&self, user: &UserId) -> Result<Option<Box<dyn RemoteCalendar>>, CalendarError> {
        let Some(account) = self.accounts.account(user).await? else { return Ok(None) };
        let client = CaldavClient::with_http(self.http.clone(), &account)?;
        let href = self.calendar_href(user, &account, &client).await?;
        let cal = CaldavCalendar::new(client, href).with_default_zone(self.default_zone);
        Ok(Some(Box::new(cal.with_username(&account.username))))
    }
}

/// One calendar collection on a CalDAV server.
#[derive(Debug, Clone)]
pub struct CaldavCalendar {
    client: CaldavClient,
    href: String,
    default_zone: Zone,
    /// The account's username: an `ORGANIZER` naming it is the user.
    username: Option<String>,
}

impl CaldavCalendar {
    pub fn new(client: CaldavClient, href: String) -> Self {
        Self { client, href, default_zone: Zone::UTC, username: None }
    }

    /// Events organized by `username` are the user's own.
    pub fn with_username(mut self, username: &str) -> Self {
        self.username = Some(username.to_string());
        self
    }

    pub fn with_default_zone(mut self, zone: Zone) -> Self {
        self.default_zone = zone;
        self
    }

    pub fn href(&self) -> &str {
        &self.href
    }
}

/// A `412` as the calendar's conflict naming the event; the rest as is.
fn conflict_named(title: &str) -> impl Fn(CaldavError) -> CalendarError + '_ {
    move |e| match e {
        CaldavError::Conflict { .. } => CalendarError::RemoteConflict { title: title.to_string() },
        e => e.into(),
    }
}

#[async_trait::async_trait]
impl RemoteCalendar for CaldavCalendar {
    async fn put(&self, event: &CalendarEvent) -> Result<RemoteRef, CalendarError> {
        let (href, pre) = match &event.remote {
            Some(r) => (r.href.clone(), Precondition::Match(r.etag.clone())),
            None => (event_href(&self.href, &event.uid), Precondition::Create),
        };
        let etag = self.client.put(&href, &to_ics(event), pre).await.map_err(conflict_named(&event.title))?;
        Ok(RemoteRef { href, etag })
    }

    async fn delete(&self, remote: &RemoteRef, title: &str) -> Result<(), CalendarError> {
        match self.client.delete(&remote.href, &remote.etag).await {
            // Already gone there: what the delete wanted.
            Ok(()) | Err(CaldavError::NotFound(_)) => Ok(()),
            Err(e) => Err(conflict_named(title)(e)),
        }
    }

    async fn changes(&self, token: Option<&str>) -> Result<RemoteChanges, CalendarError> {
        let sync = self.client.sync(&self.href, token).await?;
        let mut changed = Vec::with_capacity(sync.changed.len());
        let mut skipped = Vec::new();
        for r in sync.changed {
            match self.read(&r) {
                Ok(e) => changed.push(e),
                // Not an event we can hold (e.g. a lone instance of someone
                // else's series, or a broken object): left on the server,
                // not copied, and named by every listing.
                Err(mut s) => {
                    tracing::warn!(href = %r.href, reason = ?s.reason, detail = %s.detail, "skipping a calendar object");
                    (s.href, s.title) = (Some(r.href), summary_of(&r.ics));
                    skipped.push(s);
                }
            }
        }
        Ok(RemoteChanges { changed, removed: sync.removed, skipped, full: sync.full, token: sync.token })
    }
}

/// The most bytes of one calendar object we take in: a DynamoDB item holds
/// 400 KB, and an object this large is an export, not an event.
pub const MAX_OBJECT_BYTES: usize = 256 * 1024;

impl CaldavCalendar {
    /// One resource as an event, or why it is skipped.
    fn read(&self, r: &Resource) -> Result<CalendarEvent, SkippedEvent> {
        if r.ics.len() > MAX_OBJECT_BYTES {
            let detail = format!("{} bytes; at most {MAX_OBJECT_BYTES} are taken in", r.ics.len());
            return Err(SkippedEvent::new(SkipReason::TooLarge, detail));
        }
        let mut e = from_ics(&r.ics, self.default_zone)
            .map_err(|e| SkippedEvent::new(SkipReason::Unreadable, e.to_string()))?;
        e.remote = Some(RemoteRef { href: r.href.clone(), etag: r.etag.clone() });
        if let (Some(o), Some(u)) = (e.organizer.as_mut(), self.username.as_deref()) {
            o.own = Organizer::names(&o.address, u);
        }
        Ok(e)
    }
}
