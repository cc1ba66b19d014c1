//! The WebDAV/CalDAV XML of the client: request bodies out, a small
//! namespace-resolved element tree in, and the `multistatus` answer read from
//! it. Names are matched by (namespace, local name), never by prefix, so any
//! prefixes a server picks are fine. Hrefs are read in the client's one
//! spelling ([`canonical_href`]).

use super::client::canonical_href;
use super::CaldavError;
use quick_xml::events::{BytesRef, Event};
use quick_xml::name::ResolveResult;
use quick_xml::NsReader;

/// WebDAV (RFC 4918).
pub const DAV: &str = "DAV:";
/// CalDAV (RFC 4791).
pub const CALDAV: &str = "urn:ietf:params:xml:ns:caldav";
/// Apple's calendarserver extensions (`getctag`).
pub const CS: &str = "http://calendarserver.org/ns/";

/// One XML element: its namespace (empty when unbound), local name, attributes
/// by local name, child elements and the text directly inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    pub ns: String,
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    pub text: String,
}

impl Element {
    /// Parses a document into its root element.
    pub fn parse(xml: &str) -> Result<Element, CaldavError> {
        let bad = |e: &dyn std::fmt::Display| CaldavError::Protocol(format!("malformed XML: {e}"));
        let mut reader = NsReader::from_str(xml);
        let mut stack: Vec<Element> = Vec::new();
        loop {
            let (ns, event) = reader.read_resolved_event().map_err(|e| bad(&e))?;
            let ns = match ns {
                ResolveResult::Bound(ns) => String::from_utf8_lossy(ns.as_ref()).into_owned(),
                _ => String::new(),
            };
            match event {
                Event::Start(e) => stack.push(start_element(ns, &e).map_err(|e| bad(&e))?),
                Event::Empty(e) => {
                    let el = start_element(ns, &e).map_err(|e| bad(&e))?;
                    if let Some(done) = close(&mut stack, el) {
                        return Ok(done);
                    }
                }
                Event::End(_) => {
                    let el = stack.pop().ok_or_else(|| bad(&"unbalanced end tag"))?;
                    if let Some(done) = close(&mut stack, el) {
                        return Ok(done);
                    }
                }
                Event::Text(t) => push_text(&mut stack, &t.xml10_content().map_err(|e| bad(&e))?),
                Event::CData(t) => push_text(&mut stack, &t.decode().map_err(|e| bad(&e))?),
                Event::GeneralRef(r) => push_text(&mut stack, &resolve_ref(&r).map_err(|e| bad(&e))?),
                Event::Eof => return Err(bad(&"no root element")),
                _ => {}
            }
        }
    }

    /// True if this element is `{ns}name`.
    pub fn is(&self, ns: &str, name: &str) -> bool {
        self.ns == ns && self.name == name
    }

    /// The first child `{ns}name`.
    pub fn child(&self, ns: &str, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.is(ns, name))
    }

    /// Every child `{ns}name`.
    pub fn children_named<'a>(&'a self, ns: &'a str, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.is(ns, name))
    }

    /// The value of the attribute with this local name.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The text of the child `{ns}name`, trimmed; `None` when absent or empty.
    pub fn child_text(&self, ns: &str, name: &str) -> Option<String> {
        let text = self.child(ns, name)?.text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }
}

fn start_element(ns: String, e: &quick_xml::events::BytesStart<'_>) -> Result<Element, quick_xml::Error> {
    let mut attrs = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(quick_xml::Error::from)?;
        let name = String::from_utf8_lossy(a.key.local_name().as_ref()).into_owned();
        attrs.push((name, a.unescape_value()?.into_owned()));
    }
    let name = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
    Ok(Element { ns, name, attrs, ..Element::default() })
}

/// Attaches a finished element to its parent; returns it when it is the root.
fn close(stack: &mut [Element], el: Element) -> Option<Element> {
    match stack.last_mut() {
        Some(parent) => {
            parent.children.push(el);
            None
        }
        None => Some(el),
    }
}

fn push_text(stack: &mut [Element], text: &str) {
    if let Some(top) = stack.last_mut() {
        top.text.push_str(text);
    }
}

/// `&amp;`, `&#13;` …: quick-xml reports references apart from the text.
fn resolve_ref(r: &BytesRef<'_>) -> Result<String, quick_xml::Error> {
    if let Some(c) = r.resolve_char_ref()? {
        return Ok(c.to_string());
    }
    let name = r.decode()?;
    quick_xml::escape::resolve_predefined_entity(&name)
        .map(str::to_string)
        .ok_or_else(|| quick_xml::Error::Escape(quick_xml::escape::EscapeError::UnrecognizedEntity(0..0, name.into())))
}

/// One `response` of a `multistatus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// As the server wrote it (usually an absolute path), in the client's
    /// one spelling ([`canonical_href`]).
    pub href: String,
    /// The response-level `status` (sync-collection reports removed members
    /// as 404 here); `None` when it only has `propstat`s.
    pub status: Option<u16>,
    /// The properties found (from `propstat`s with a 2xx status).
    pub props: Vec<Element>,
}

impl Response {
    /// A property found for this resource.
    pub fn prop(&self, ns: &str, name: &str) -> Option<&Element> {
        self.props.iter().find(|p| p.is(ns, name))
    }

    /// A property's trimmed text, `None` when absent or empty.
    pub fn prop_text(&self, ns: &str, name: &str) -> Option<String> {
        let text = self.prop(ns, name)?.text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// The `href` inside a property (`current-user-principal`,
    /// `calendar-home-set`), in the client's one spelling.
    pub fn prop_href(&self, ns: &str, name: &str) -> Option<String> {
        self.prop(ns, name)?.child_text(DAV, "href").map(|h| canonical_href(&h))
    }
}

/// A `multistatus` answer: its responses and, for sync-collection, the new token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Multistatus {
    pub responses: Vec<Response>,
    pub sync_token: Option<String>,
}

impl Multistatus {
    pub fn parse(xml: &str) -> Result<Multistatus, CaldavError> {
        let root = Element::parse(xml)?;
        if !root.is(DAV, "multistatus") {
            return Err(CaldavError::Protocol(format!(
                "expected a DAV: multistatus, got {{{}}}{}",
                root.ns, root.name
            )));
        }
        let mut out = Multistatus { sync_token: root.child_text(DAV, "sync-token"), ..Multistatus::default() };
        for r in root.children_named(DAV, "response") {
            let href = r
                .child_text(DAV, "href")
                .map(|h| canonical_href(&h))
                .ok_or_else(|| CaldavError::Protocol("a response without href".into()))?;
            let status = r.child_text(DAV, "status").and_then(|s| status_code(&s));
            let mut props = Vec::new();
            for ps in r.children_named(DAV, "propstat") {
                let ok =
                    ps.child_text(DAV, "status").and_then(|s| status_code(&s)).is_some_and(|c| (200..300).contains(&c));
                if let (true, Some(prop)) = (ok, ps.child(DAV, "prop")) {
                    props.extend(prop.children.iter().cloned());
                }
            }
            out.responses.push(Response { href, status, props });
        }
        Ok(out)
    }
}

/// `HTTP/1.1 404 Not Found` → 404.
fn status_code(line: &str) -> Option<u16> {
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The DAV `error` element's first child (a precondition such as
/// `valid-sync-token`), when `body` is one.
pub fn error_condition(body: &str) -> Option<(String, String)> {
    let root = Element::parse(body).ok()?;
    if !root.is(DAV, "error") {
        return None;
    }
    root.children.first().map(|c| (c.ns.clone(), c.name.clone()))
}

// ------------------------------------------------------------ requests ---

const HEAD: &str = r#"<?xml version="1.0" encoding="utf-8"?>"#;
const XMLNS: &str =
    r#"xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav" xmlns:cs="http://calendarserver.org/ns/""#;

/// A PROPFIND asking for `props`, each written with its prefix (`d:`, `c:`, `cs:`).
pub fn propfind(props: &[&str]) -> String {
    let props: String = props.iter().map(|p| format!("<{p}/>")).collect();
    format!("{HEAD}<d:propfind {XMLNS}><d:prop>{props}</d:prop></d:propfind>")
}

/// A calendar-query for the VEVENTs overlapping `[start, end)` (UTC
/// `YYYYMMDDTHHMMSSZ`), or every VEVENT without a range.
pub fn calendar_query(range: Option<(&str, &str)>) -> String {
    let filter = match range {
        Some((start, end)) => {
            format!(r#"<c:comp-filter name="VEVENT"><c:time-range start="{start}" end="{end}"/></c:comp-filter>"#)
        }
        None => r#"<c:comp-filter name="VEVENT"/>"#.to_string(),
    };
    format!(
        "{HEAD}<c:calendar-query {XMLNS}><d:prop><d:getetag/><c:calendar-data/></d:prop>\
         <c:filter><c:comp-filter name=\"VCALENDAR\">{filter}</c:comp-filter></c:filter></c:calendar-query>"
    )
}

/// A sync-collection REPORT (RFC 6578) from `token` (empty: the initial sync).
pub fn sync_collection(token: &str) -> String {
    let token = quick_xml::escape::escape(token);
    format!(
        "{HEAD}<d:sync-collection {XMLNS}><d:sync-token>{token}</d:sync-token><d:sync-level>1</d:sync-level>\
         <d:prop><d:getetag/></d:prop></d:sync-collection>"
    )
}

/// A calendar-multiget REPORT for these resource hrefs.
pub fn calendar_multiget(hrefs: &[String]) -> String {
    let hrefs: String = hrefs.iter().map(|h| format!("<d:href>{}</d:href>", quick_xml::escape::escape(h))).collect();
    format!("{HEAD}<c:calendar-multiget {XMLNS}><d:prop><d:getetag/><c:calendar-data/></d:prop>{hrefs}</c:calendar-multiget>")
}

/// The MKCALENDAR body of a calendar of VEVENTs named `display_name`.
pub fn mkcalendar(display_name: &str) -> String {
    let name = quick_xml::escape::escape(display_name);
    format!(
        "{HEAD}<c:mkcalendar {XMLNS}><d:set><d:prop><d:displayname>{name}</d:displayname>\
         <c:supported-calendar-component-set><c:comp name=\"VEVENT\"/></c:supported-calendar-component-set>\
         </d:prop></d:set></c:mkcalendar>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_resolved_not_matched() {
        let xml = r#"<?xml version="1.0"?>
<X:multistatus xmlns:X="DAV:" xmlns:Q="urn:ietf:params:xml:ns:caldav">
  <X:response><X:href>/a/b/</X:href>
    <X:propstat><X:prop><Q:calendar-home-set><X:href>/a/</X:href></Q:calendar-home-set>
      <X:displayname>R &amp; D&#13;</X:displayname></X:prop><X:status>HTTP/1.1 200 OK</X:status></X:propstat>
    <X:propstat><X:prop><X:getctag/></X:prop><X:status>HTTP/1.1 404 Not Found</X:status></X:propstat>
  </X:response>
  <sync-token xmlns="DAV:">tok</sync-token>
</X:multistatus>"#;
        let ms = Multistatus::parse(xml).unwrap();
        assert_eq!(ms.sync_token.as_deref(), Some("tok"));
        let r = &ms.responses[0];
        assert_eq!(r.href, "/a/b/");
        assert_eq!(r.prop_href(CALDAV, "calendar-home-set").as_deref(), Some("/a/"));
        assert_eq!(r.prop(DAV, "displayname").unwrap().text, "R & D\r");
        assert!(r.prop(DAV, "getctag").is_none(), "a 404 propstat is not a found property");
    }

    #[test]
    fn hrefs_are_read_in_the_clients_one_spelling() {
        let xml = r#"<D:multistatus xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:response><D:href>/u/calendars/a@b.ics</D:href>
            <D:propstat><D:prop><C:calendar-home-set><D:href>/u/calendars%2Fx/</D:href></C:calendar-home-set></D:prop>
            <D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>"#;
        let r = &Multistatus::parse(xml).unwrap().responses[0];
        assert_eq!(r.href, "/u/calendars/a%40b.ics");
        assert_eq!(r.prop_href(CALDAV, "calendar-home-set").as_deref(), Some("/u/calendars%2Fx/"));
    }

    #[test]
    fn a_removed_member_has_a_response_status() {
        let xml = r#"<multistatus xmlns="DAV:"><response><href>/c/x.ics</href><status>HTTP/1.1 404 Not Found</status></response></multistatus>"#;
        let ms = Multistatus::parse(xml).unwrap();
        assert_eq!(ms.responses[0].status, Some(404));
    }

    #[test]
    fn error_bodies_name_their_precondition() {
        let body = r#"<?xml version='1.0'?><error xmlns="DAV:"><valid-sync-token /></error>"#;
        assert_eq!(error_condition(body), Some((DAV.to_string(), "valid-sync-token".to_string())));
        assert_eq!(error_condition("not xml"), None);
    }

    #[test]
    fn requests_are_well_formed() {
        for body in [
            propfind(&["d:resourcetype", "cs:getctag"]),
            calendar_query(Some(("20240101T000000Z", "20240201T000000Z"))),
            calendar_query(None),
            sync_collection("a<b"),
            calendar_multiget(&["/x/a&b.ics".to_string()]),
            mkcalendar("Work & play"),
        ] {
            Element::parse(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        }
    }
}
