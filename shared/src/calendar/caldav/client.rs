//! A CalDAV client (RFC 4791, sync by RFC 6578) over reqwest with Basic auth.
//!
//! Contract:
//! - hrefs are what the server writes (absolute paths), read in one spelling
//!   ([`canonical_href`]: servers percent-encode differently) and resolved
//!   against the account URL; [`event_href`] makes one for a new event;
//! - every write is conditional: create with `If-None-Match: *`, change and
//!   delete with `If-Match: <etag>`; a `412` is [`CaldavError::Conflict`] naming
//!   the resource, so a change made elsewhere in between is never overwritten;
//! - [`CaldavClient::sync`] reports changes since a token, or a full listing
//!   (`full: true`) when the server refuses the token or has no sync-collection.

use super::accounts::CaldavAccount;
use super::xml::{self, Multistatus, Response, CALDAV, CS, DAV};
use super::CaldavError;
use chrono::{DateTime, Utc};
use percent_encoding::{percent_decode_str, percent_encode, AsciiSet, NON_ALPHANUMERIC};
use reqwest::header::{HeaderMap, CONTENT_TYPE, ETAG, IF_MATCH, IF_NONE_MATCH};
use reqwest::{Method, StatusCode, Url};
use std::time::Duration;

/// The slug and display name of the calendar made for a user who has none.
pub const DEFAULT_CALENDAR_SLUG: &str = "agentic-chat";
pub const DEFAULT_CALENDAR_NAME: &str = "Agentic chat";

/// How often a request answered `423 Locked` is sent in all.
const LOCKED_TRIES: u32 = 5;

/// A calendar collection of the account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarInfo {
    pub href: String,
    pub display_name: Option<String>,
    /// `getctag`: changes whenever anything in the calendar does.
    pub ctag: Option<String>,
    /// The collection's current RFC 6578 token, when the server has them.
    pub sync_token: Option<String>,
    /// `supported-calendar-component-set` (empty: the server did not say).
    pub components: Vec<String>,
}

/// One calendar object resource: where, which version, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub href: String,
    pub etag: String,
    pub ics: String,
}

/// The condition of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// `If-None-Match: *`: only if nothing is there yet.
    Create,
    /// `If-Match: <etag>`: only if it is still this version.
    Match(String),
}

/// What changed in a calendar since a sync token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncChanges {
    /// The token to pass next time (`None`: the server has none; list again).
    pub token: Option<String>,
    /// Resources added or changed, with their data.
    pub changed: Vec<Resource>,
    /// Hrefs removed since the token (always empty when `full`).
    pub removed: Vec<String>,
    /// `changed` is the whole calendar: whatever the caller has that is not in
    /// it was removed (the first sync, a refused token, or no sync-collection).
    pub full: bool,
}

/// A CalDAV account's client. Cheap to clone (reqwest's pool is shared).
#[derive(Clone)]
pub struct CaldavClient {
    http: reqwest::Client,
    base: Url,
    username: String,
    password: String,
}

impl std::fmt::Debug for CaldavClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaldavClient").field("base", &self.base.as_str()).field("username", &self.username).finish()
    }
}

/// What a path segment keeps as is: RFC 3986's unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The href of a new event's resource in `calendar`: its UID, percent-encoded
/// as [`canonical_href`] spells it, plus `.ics`.
pub fn event_href(calendar: &str, uid: &str) -> String {
    let slash = if calendar.ends_with('/') { "" } else { "/" };
    format!("{calendar}{slash}{}.ics", percent_encode(uid.as_bytes(), SEGMENT))
}

/// `href` in the one spelling this client uses: each path segment decoded
/// and encoded again, all but `A-Za-z0-9-._~` (a full URL keeps its scheme
/// and authority). Servers spell one path differently (Radicale writes
/// `a%40b.ics`, Xandikos `a@b.ics`, for the same resource); read this way,
/// the hrefs of a sync compare equal to the ones we wrote.
pub fn canonical_href(href: &str) -> String {
    let path_at = match href.find("://") {
        Some(i) => href[i + 3..].find('/').map_or(href.len(), |j| i + 3 + j),
        None => 0,
    };
    let (origin, path) = href.split_at(path_at);
    let segments: Vec<String> = path
        .split('/')
        .map(|s| percent_encode(&percent_decode_str(s).collect::<Vec<u8>>(), SEGMENT).to_string())
        .collect();
    format!("{origin}{}", segments.join("/"))
}

/// `YYYYMMDDTHHMMSSZ`, the form of CalDAV time ranges.
pub fn caldav_utc(t: DateTime<Utc>) -> String {
    t.format("%Y%m%dT%H%M%SZ").to_string()
}

fn method(name: &'static str) -> Method {
    Method::from_bytes(name.as_bytes()).expect("a valid method name")
}

fn transport(e: reqwest::Error) -> CaldavError {
    CaldavError::Transport(e.to_string())
}

/// An answer's status, headers and body, read whole.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn etag(&self) -> Option<String> {
        self.headers.get(ETAG).and_then(|v| v.to_str().ok()).map(str::to_string)
    }
}

impl CaldavClient {
    /// A client for `account`, with its own connection pool and timeouts.
    pub fn new(account: &CaldavAccount) -> Result<Self, CaldavError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(transport)?;
        Self::with_http(http, account)
    }

    /// A client for `account` sharing `http`'s pool.
    pub fn with_http(http: reqwest::Client, account: &CaldavAccount) -> Result<Self, CaldavError> {
        let base = Url::parse(&account.url).map_err(|e| CaldavError::Config(format!("bad CalDAV URL: {e}")))?;
        Ok(Self { http, base, username: account.username.clone(), password: account.password.clone() })
    }

    fn url(&self, href: &str) -> Result<Url, CaldavError> {
        self.base.join(href).map_err(|e| CaldavError::Protocol(format!("bad href {href:?}: {e}")))
    }

    /// Sends one request; 401 and 403 are errors here, other statuses are the
    /// caller's to judge. `423 Locked` is sent again, up to [`LOCKED_TRIES`]
    /// times with a short backoff: the server did nothing (RFC 4918 §11.3), and
    /// Xandikos answers it while another write holds the collection (its git
    /// repository), e.g. two of the user's turns writing at once.
    async fn send(
        &self,
        method: Method,
        href: &str,
        headers: &[(reqwest::header::HeaderName, String)],
        body: Option<String>,
    ) -> Result<Answer, CaldavError> {
        let url = self.url(href)?;
        let mut tries = 0;
        let resp = loop {
            let mut req =
                self.http.request(method.clone(), url.clone()).basic_auth(&self.username, Some(&self.password));
            for (name, value) in headers {
                req = req.header(name, value);
            }
            if let Some(body) = &body {
                req = req.body(body.clone());
            }
            let resp = req.send().await.map_err(transport)?;
            tries += 1;
            if resp.status() != StatusCode::LOCKED || tries == LOCKED_TRIES {
                break resp;
            }
            tokio::time::sleep(Duration::from_millis(50 << tries)).await;
        };
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.text().await.map_err(transport)?;
        match status {
            StatusCode::UNAUTHORIZED => Err(CaldavError::Unauthorized),
            StatusCode::FORBIDDEN if xml::error_condition(&body).is_none() => Err(CaldavError::Forbidden(href.into())),
            _ => Ok(Answer { status, headers, body }),
        }
    }

    /// A PROPFIND or REPORT with an XML body: its multistatus (207), or an error.
    async fn dav_xml(
        &self,
        verb: &'static str,
        href: &str,
        depth: &str,
        body: String,
    ) -> Result<Multistatus, CaldavError> {
        let headers = [(reqwest::header::HeaderName::from_static("depth"), depth.to_string()), xml_type()];
        let a = self.send(method(verb), href, &headers, Some(body)).await?;
        match a.status {
            StatusCode::MULTI_STATUS => Multistatus::parse(&a.body),
            StatusCode::NOT_FOUND => Err(CaldavError::NotFound(href.into())),
            s => Err(CaldavError::Http(s.as_u16())),
        }
    }

    /// PROPFIND `props` on one resource (Depth 0): its response.
    async fn props_of(&self, href: &str, props: &[&str]) -> Result<Response, CaldavError> {
        let ms = self.dav_xml("PROPFIND", href, "0", xml::propfind(props)).await?;
        ms.responses.into_iter().next().ok_or_else(|| CaldavError::Protocol(format!("PROPFIND {href}: no response")))
    }

    /// The account's principal (`current-user-principal` of the account URL;
    /// the account URL itself when the server does not say).
    pub async fn principal(&self) -> Result<String, CaldavError> {
        let base = self.base.path().to_string();
        let r = self.props_of(&base, &["d:current-user-principal"]).await?;
        Ok(r.prop_href(DAV, "current-user-principal").unwrap_or(base))
    }

    /// The collection holding the principal's calendars (`calendar-home-set`).
    pub async fn calendar_home(&self) -> Result<String, CaldavError> {
        let principal = self.principal().await?;
        let r = self.props_of(&principal, &["c:calendar-home-set"]).await?;
        r.prop_href(CALDAV, "calendar-home-set")
            .ok_or_else(|| CaldavError::Protocol(format!("{principal} has no calendar-home-set")))
    }

    /// The account's calendars that hold events.
    pub async fn calendars(&self) -> Result<Vec<CalendarInfo>, CaldavError> {
        let home = self.calendar_home().await?;
        let ms = self.dav_xml("PROPFIND", &home, "1", xml::propfind(CALENDAR_PROPS)).await?;
        Ok(ms.responses.iter().filter_map(calendar_info).filter(holds_events).collect())
    }

    /// One calendar's properties.
    pub async fn calendar(&self, href: &str) -> Result<CalendarInfo, CaldavError> {
        let r = self.props_of(href, CALENDAR_PROPS).await?;
        calendar_info(&r).ok_or_else(|| CaldavError::Protocol(format!("{href} is not a calendar")))
    }

    /// Makes a calendar of events named `display_name` at `slug` in the home.
    pub async fn create_calendar(&self, slug: &str, display_name: &str) -> Result<CalendarInfo, CaldavError> {
        let home = self.calendar_home().await?;
        let href = format!("{}/{}/", home.trim_end_matches('/'), slug);
        let a = self.send(method("MKCALENDAR"), &href, &[xml_type()], Some(xml::mkcalendar(display_name))).await?;
        if !a.status.is_success() {
            return Err(CaldavError::Http(a.status.as_u16()));
        }
        self.calendar(&href).await
    }

    /// The calendar events go to: the account's first calendar of events,
    /// made ([`DEFAULT_CALENDAR_SLUG`]) when it has none.
    pub async fn default_calendar(&self) -> Result<CalendarInfo, CaldavError> {
        if let Some(first) = self.calendars().await?.into_iter().next() {
            return Ok(first);
        }
        self.create_calendar(DEFAULT_CALENDAR_SLUG, DEFAULT_CALENDAR_NAME).await
    }

    /// The events of `calendar` with an instance overlapping `[start, end)`
    /// (the server expands recurrences to decide), as stored.
    pub async fn query(
        &self,
        calendar: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<Resource>, CaldavError> {
        let (s, e) = (caldav_utc(start), caldav_utc(end));
        let ms = self.dav_xml("REPORT", calendar, "1", xml::calendar_query(Some((&s, &e)))).await?;
        Ok(resources(&ms))
    }

    /// Every event of `calendar`.
    pub async fn list_all(&self, calendar: &str) -> Result<Vec<Resource>, CaldavError> {
        let ms = self.dav_xml("REPORT", calendar, "1", xml::calendar_query(None)).await?;
        Ok(resources(&ms))
    }

    /// One resource with its current ETag.
    pub async fn get(&self, href: &str) -> Result<Resource, CaldavError> {
        let a = self.send(Method::GET, href, &[], None).await?;
        match a.status {
            s if s.is_success() => {
                let etag = match a.etag() {
                    Some(etag) => etag,
                    None => self.etag(href).await?,
                };
                Ok(Resource { href: href.to_string(), etag, ics: a.body })
            }
            StatusCode::NOT_FOUND => Err(CaldavError::NotFound(href.into())),
            s => Err(CaldavError::Http(s.as_u16())),
        }
    }

    /// A resource's current ETag (PROPFIND `getetag`).
    pub async fn etag(&self, href: &str) -> Result<String, CaldavError> {
        let r = self.props_of(href, &["d:getetag"]).await?;
        r.prop_text(DAV, "getetag").ok_or_else(|| CaldavError::Protocol(format!("{href} has no getetag")))
    }

    /// Writes `ics` at `href` if `pre` holds: the new ETag. `412` (it exists,
    /// or changed since that ETag) is [`CaldavError::Conflict`].
    pub async fn put(&self, href: &str, ics: &str, pre: Precondition) -> Result<String, CaldavError> {
        let condition = match pre {
            Precondition::Create => (IF_NONE_MATCH, "*".to_string()),
            Precondition::Match(etag) => (IF_MATCH, etag),
        };
        let headers = [condition, (CONTENT_TYPE, "text/calendar; charset=utf-8".to_string())];
        let a = self.send(Method::PUT, href, &headers, Some(ics.to_string())).await?;
        match a.status {
            StatusCode::PRECONDITION_FAILED => Err(CaldavError::Conflict { href: href.into() }),
            s if s.is_success() => match a.etag() {
                Some(etag) => Ok(etag),
                // RFC 4791 §5.3.4: a server that changed the data may omit it.
                None => self.etag(href).await,
            },
            s => Err(CaldavError::Http(s.as_u16())),
        }
    }

    /// Deletes `href` if it is still at `etag`; `412` is [`CaldavError::Conflict`].
    pub async fn delete(&self, href: &str, etag: &str) -> Result<(), CaldavError> {
        let a = self.send(Method::DELETE, href, &[(IF_MATCH, etag.to_string())], None).await?;
        match a.status {
            StatusCode::PRECONDITION_FAILED => Err(CaldavError::Conflict { href: href.into() }),
            StatusCode::NOT_FOUND => Err(CaldavError::NotFound(href.into())),
            s if s.is_success() => Ok(()),
            s => Err(CaldavError::Http(s.as_u16())),
        }
    }

    /// What changed in `calendar` since `token` (`None`: everything, `full`).
    /// A refused token (`valid-sync-token`) or a server without
    /// sync-collection gets a full listing instead.
    pub async fn sync(&self, calendar: &str, token: Option<&str>) -> Result<SyncChanges, CaldavError> {
        let headers = [(reqwest::header::HeaderName::from_static("depth"), "1".to_string()), xml_type()];
        let body = xml::sync_collection(token.unwrap_or(""));
        let a = self.send(method("REPORT"), calendar, &headers, Some(body)).await?;
        let ms = match a.status {
            StatusCode::MULTI_STATUS => Multistatus::parse(&a.body)?,
            StatusCode::NOT_FOUND => return Err(CaldavError::NotFound(calendar.into())),
            s if refused_sync(s, &a.body) => return self.full_sync(calendar).await,
            s => return Err(CaldavError::Http(s.as_u16())),
        };
        let self_href = self.url(calendar)?;
        let mut changes = SyncChanges { token: ms.sync_token.clone(), full: token.is_none(), ..SyncChanges::default() };
        let mut changed = Vec::new();
        for r in &ms.responses {
            if self.url(&r.href)? == self_href {
                continue;
            }
            match r.status {
                Some(404) => changes.removed.push(r.href.clone()),
                _ => changed.push(r.href.clone()),
            }
        }
        changes.changed = self.multiget(calendar, &changed).await?;
        Ok(changes)
    }

    /// The whole calendar and the token to go on from. The token is read
    /// first: a change in between is reported again next time, never lost.
    async fn full_sync(&self, calendar: &str) -> Result<SyncChanges, CaldavError> {
        let token = self.calendar(calendar).await?.sync_token;
        let changed = self.list_all(calendar).await?;
        Ok(SyncChanges { token, changed, removed: Vec::new(), full: true })
    }

    /// The data and ETags of `hrefs` in `calendar` (calendar-multiget); one
    /// gone in between is left out (the next sync reports its removal).
    pub async fn multiget(&self, calendar: &str, hrefs: &[String]) -> Result<Vec<Resource>, CaldavError> {
        if hrefs.is_empty() {
            return Ok(Vec::new());
        }
        let ms = self.dav_xml("REPORT", calendar, "1", xml::calendar_multiget(hrefs)).await?;
        Ok(resources(&ms))
    }
}

const CALENDAR_PROPS: &[&str] =
    &["d:resourcetype", "d:displayname", "cs:getctag", "d:sync-token", "c:supported-calendar-component-set"];

fn xml_type() -> (reqwest::header::HeaderName, String) {
    (CONTENT_TYPE, "application/xml; charset=utf-8".to_string())
}

/// A response's calendar, `None` when it is not a calendar collection.
fn calendar_info(r: &Response) -> Option<CalendarInfo> {
    r.prop(DAV, "resourcetype")?.child(CALDAV, "calendar")?;
    let components = r
        .prop(CALDAV, "supported-calendar-component-set")
        .map(|set| set.children_named(CALDAV, "comp").filter_map(|c| c.attr("name").map(str::to_string)).collect())
        .unwrap_or_default();
    Some(CalendarInfo {
        href: r.href.clone(),
        display_name: r.prop_text(DAV, "displayname"),
        ctag: r.prop_text(CS, "getctag"),
        sync_token: r.prop_text(DAV, "sync-token"),
        components,
    })
}

fn holds_events(c: &CalendarInfo) -> bool {
    c.components.is_empty() || c.components.iter().any(|n| n.eq_ignore_ascii_case("VEVENT"))
}

/// The calendar object resources of a REPORT's answer (those with data).
fn resources(ms: &Multistatus) -> Vec<Resource> {
    ms.responses
        .iter()
        .filter_map(|r| {
            let etag = r.prop_text(DAV, "getetag")?;
            let ics = r.prop(CALDAV, "calendar-data")?.text.clone();
            Some(Resource { href: r.href.clone(), etag, ics })
        })
        .collect()
}

/// A sync-collection the server will not do: the token is refused (403/409
/// with `valid-sync-token`) or the REPORT is unknown to it.
fn refused_sync(status: StatusCode, body: &str) -> bool {
    let unsupported = matches!(status.as_u16(), 400 | 405 | 415 | 422 | 501);
    let bad_token = xml::error_condition(body).is_some_and(|(ns, name)| ns == DAV && name == "valid-sync-token");
    unsupported || bad_token
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_hrefs_encode_like_servers() {
        assert_eq!(event_href("/u/cal/", "abc-1.2_3~"), "/u/cal/abc-1.2_3~.ics");
        assert_eq!(event_href("/u/cal", "a@b c/d"), "/u/cal/a%40b%20c%2Fd.ics");
        assert_eq!(event_href("/u/cal/", "ü"), "/u/cal/%C3%BC.ics");
    }

    /// Radicale's and Xandikos's spellings of one resource read as one, and
    /// as the href we make for it.
    #[test]
    fn hrefs_are_read_in_one_spelling() {
        let ours = event_href("/alice/cal/", "x@agentic-chat");
        for theirs in
            ["/alice/cal/x%40agentic-chat.ics", "/alice/cal/x@agentic-chat.ics", "/alice/cal/x%40agentic%2dchat.ics"]
        {
            assert_eq!(canonical_href(theirs), ours, "{theirs}");
        }
        assert_eq!(canonical_href("/a%2Fb/c d/"), "/a%2Fb/c%20d/", "an encoded slash stays inside its segment");
        assert_eq!(canonical_href("https://dav.example.com/u/ü.ics"), "https://dav.example.com/u/%C3%BC.ics");
        assert_eq!(canonical_href("https://dav.example.com"), "https://dav.example.com");
        assert_eq!(canonical_href("/"), "/");
    }

    #[test]
    fn time_ranges_are_utc_basic_format() {
        let t = DateTime::parse_from_rfc3339("2024-03-31T01:30:00+02:00").unwrap().with_timezone(&Utc);
        assert_eq!(caldav_utc(t), "20240330T233000Z");
    }

    #[test]
    fn a_refused_token_is_told_apart_from_other_errors() {
        let body = r#"<error xmlns="DAV:"><valid-sync-token/></error>"#;
        assert!(refused_sync(StatusCode::FORBIDDEN, body));
        assert!(refused_sync(StatusCode::NOT_IMPLEMENTED, ""));
        assert!(!refused_sync(StatusCode::INTERNAL_SERVER_ERROR, ""));
    }
}
