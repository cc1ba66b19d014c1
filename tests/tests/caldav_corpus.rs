//! Calendars as the world writes them: real exports of Google Calendar, Apple
//! iCal, Outlook/Exchange and Thunderbird/Lightning (by `PRODID`), put on
//! Radicale as they are (one calendar object per UID, as CalDAV stores them)
//! and read through the calendar service's sync. No listing, free-time
//! answer or agenda fails; every object the test reckons readable lists (or
//! is named as one whose recurrence cannot be expanded), and every other one
//! is named in `skipped`.
//!
//! The files are the test data of public iCalendar parsers, fetched at test
//! setup from PyPI as pinned sdists (`ensure_ical_corpus` in scripts/lib.sh,
//! `ICAL_CORPUS_DIR`); [`SOURCES`] names each package and its licence. None is
//! copied into this repository.

use shared::calendar::caldav::remote::MAX_OBJECT_BYTES;
use shared::calendar::caldav::{CaldavCalendar, CaldavClient, Precondition};
use shared::calendar::remote::{Remote, RemoteCalendar};
use shared::calendar::store::{EventStore, MemoryEventStore};
use shared::calendar::{
    agenda, recur, CalendarError, CalendarEvent, CalendarService, FreeQuery, ListQuery, SkipReason, SkippedEvent, Zone,
};
use shared::entities::store::MemoryEntityStore;
use shared::entities::EntityService;
use shared::ids::UserId;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tests::caldav::radicale;

/// Each sdist's folder under `ICAL_CORPUS_DIR`, where it comes from, its licence.
const SOURCES: &[(&str, &str, &str)] = &[
    ("icalendar-7.3.2", "PyPI sdist icalendar 7.3.2 (collective/icalendar), src/icalendar/tests", "BSD-2-Clause"),
    (
        "recurring_ical_events-3.8.2",
        "PyPI sdist recurring-ical-events 3.8.2 (niccokunzmann), recurring_ical_events/test/calendars",
        "LGPL-3.0-or-later",
    ),
    ("vobject-0.9.9", "PyPI sdist vobject 0.9.9 (py-vobject), test_files", "Apache-2.0"),
];

/// The client that wrote a file, by its `PRODID`.
fn client(prodid: &str) -> &'static str {
    let p = prodid.to_ascii_lowercase();
    if p.contains("google") {
        "Google Calendar"
    } else if p.contains("apple") {
        "Apple iCal"
    } else if p.contains("microsoft") || p.contains("outlook") || p.contains("exchange") {
        "Outlook/Exchange"
    } else if p.contains("mozilla") {
        "Thunderbird/Lightning"
    } else {
        "other"
    }
}

/// Users' calendars for the service: each corpus file is one user's calendar.
struct Calendars(HashMap<UserId, CaldavCalendar>);

#[async_trait::async_trait]
impl Remote for Calendars {
    async fn calendar(&self, user: &UserId) -> Result<Option<Box<dyn RemoteCalendar>>, CalendarError> {
        Ok(self.0.get(user).map(|c| Box::new(c.clone()) as Box<dyn RemoteCalendar>))
    }
}

/// Content lines, unfolded (RFC 5545 §3.1), CRLF or LF.
fn unfold(ics: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for line in ics.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        match (line.strip_prefix([' ', '\t']), out.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ if line.is_empty() => {}
            _ => out.push(line.to_string()),
        }
    }
    out
}

fn name_of(line: &str) -> String {
    line.split([':', ';']).next().unwrap_or("").to_ascii_uppercase()
}

fn value_of(line: &str) -> &str {
    line.split_once(':').map_or("", |(_, v)| v.trim())
}

/// One file as calendar object resources: the calendar's properties and
/// every `VTIMEZONE`, with the `VEVENT`s of one UID each (a VEVENT without
/// UID alone). `METHOD` is dropped: RFC 4791 §4.1 forbids it in a stored
/// object. Returns the file's `PRODID` too.
fn split(ics: &str) -> (String, Vec<String>) {
    let (mut head, mut zones, mut prodid) = (vec![], vec![], String::new());
    let mut events: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut depth, mut block, mut kind) = (0usize, Vec::<String>::new(), String::new());
    for line in unfold(ics) {
        let name = name_of(&line);
        if name == "BEGIN" {
            depth += 1;
            if depth == 2 {
                (kind, block) = (value_of(&line).to_ascii_uppercase(), vec![]);
            }
        }
        match depth {
            1 if name == "PRODID" => {
                prodid = value_of(&line).to_string();
                head.push(line.clone());
            }
            1 if !matches!(name.as_str(), "BEGIN" | "END" | "METHOD") => head.push(line.clone()),
            d if d >= 2 => block.push(line.clone()),
            _ => {}
        }
        if name == "END" {
            if depth == 2 {
                let uid = block.iter().find(|l| name_of(l) == "UID").map(|l| value_of(l).to_string());
                match kind.as_str() {
                    "VTIMEZONE" => zones.push(block.join("\r\n")),
                    "VEVENT" => {
                        let key = uid.unwrap_or_else(|| format!("(no UID {})", events.len()));
                        events.entry(key).or_default().push(block.join("\r\n"));
                    }
                    _ => {}
                }
            }
            depth = depth.saturating_sub(1);
        }
    }
    let object = |evs: &Vec<String>| {
        let mut parts = vec!["BEGIN:VCALENDAR".to_string()];
        parts.extend(head.iter().cloned());
        parts.extend(zones.iter().cloned());
        parts.extend(evs.iter().cloned());
        parts.push("END:VCALENDAR\r\n".into());
        parts.join("\r\n")
    };
    (prodid, events.values().map(object).collect())
}

/// The test's own reckoning of an object we should read: a VEVENT without
/// `RECURRENCE-ID` (the series or single event) with a UID and a `DTSTART`
/// that is a date or a date-time (RFC 5545 §3.3.4–5), within the size we
/// take in. Returns that DTSTART's date, to look for the event around it.
fn readable(ics: &str) -> Option<chrono::NaiveDate> {
    if ics.len() > MAX_OBJECT_BYTES {
        return None;
    }
    let lines = unfold(ics);
    let mut masters = vec![];
    let (mut depth, mut cur) = (0usize, None::<Vec<&String>>);
    for l in &lines {
        match name_of(l).as_str() {
            "BEGIN" => {
                depth += 1;
                if value_of(l).eq_ignore_ascii_case("VEVENT") && depth == 2 {
                    cur = Some(vec![]);
                }
            }
            "END" => {
                if depth == 2 && value_of(l).eq_ignore_ascii_case("VEVENT") {
                    masters.extend(cur.take());
                }
                depth = depth.saturating_sub(1);
            }
            _ if depth == 2 => cur.iter_mut().for_each(|c| c.push(l)),
            _ => {}
        }
    }
    let master = masters.into_iter().find(|ev| ev.iter().all(|l| name_of(l) != "RECURRENCE-ID"))?;
    master.iter().find(|l| name_of(l) == "UID").filter(|l| !value_of(l).is_empty())?;
    let start = value_of(master.iter().find(|l| name_of(l) == "DTSTART")?);
    let date = chrono::NaiveDate::parse_from_str(start.get(..8)?, "%Y%m%d").ok()?;
    let time = &start[8..];
    let time_ok = time.is_empty()
        || (time.len() >= 7
            && time.starts_with('T')
            && time[1..7].bytes().all(|b| b.is_ascii_digit())
            && matches!(&time[7..], "" | "Z"));
    time_ok.then_some(date)
}

/// Every `.ics` file of the corpus holding a VEVENT, with its source and licence.
fn corpus() -> Option<Vec<(PathBuf, &'static str, &'static str)>> {
    let dir = std::env::var("ICAL_CORPUS_DIR").ok().filter(|d| !d.is_empty());
    let missing = dir.is_none().then(|| "ICAL_CORPUS_DIR is not set (no iCalendar corpus)".to_string());
    if !tests::web::present("caldav_corpus", missing) {
        return None;
    }
    let dir = PathBuf::from(dir.unwrap_or_default());
    let mut files = vec![];
    for (folder, source, licence) in SOURCES {
        let mut found = vec![];
        walk(&dir.join(folder), &mut found);
        // The benchmark's one 1.6 MB export is a load test, not test data.
        found.retain(|p| !p.components().any(|c| c.as_os_str() == "benchmark"));
        found.sort();
        assert!(!found.is_empty(), "no .ics files from {source} under {}", dir.display());
        files.extend(found.into_iter().map(|p| (p, *source, *licence)));
    }
    // The exports of the four clients named in `client` (the rest of the
    // test data is mostly written by hand or by the parsers themselves).
    files.retain(|(p, ..)| {
        std::fs::read(p).is_ok_and(|b| {
            let text = String::from_utf8_lossy(&b);
            text.contains("BEGIN:VEVENT") && client(&split(&text).0) != "other"
        })
    });
    // At most this many files per client, in path order: enough to meet
    // each client's forms, few enough for a busy CI machine.
    let mut per_client: HashMap<&str, usize> = HashMap::new();
    files.retain(|(p, ..)| {
        let text = String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
        let n = per_client.entry(client(&split(&text).0)).or_default();
        *n += 1;
        *n <= MAX_FILES_PER_CLIENT
    });
    Some(files)
}

/// See [`corpus`].
const MAX_FILES_PER_CLIENT: usize = 10;

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("ics")) {
            out.push(p);
        }
    }
}

/// What happened to the objects of one client's files.
#[derive(Debug, Default)]
struct Tally {
    files: usize,
    put: usize,
    refused_by_server: usize,
    listed: usize,
    no_occurrence_in_first_year: usize,
    skipped: BTreeMap<String, usize>,
}

fn query(from: chrono::NaiveDate, to: chrono::NaiveDate) -> ListQuery {
    ListQuery { from: from.to_string(), to: to.to_string(), timezone: Some("UTC".into()), project_id: None }
}

/// The reason's wire name (`unreadable`, …).
fn reason(s: &SkippedEvent) -> String {
    serde_json::to_value(s.reason).unwrap().as_str().unwrap().to_string()
}

#[tokio::test]
async fn real_world_calendars_list_everything_readable_and_name_the_rest() {
    let Some(rad) = radicale("caldav_corpus") else { return };
    let Some(files) = corpus() else { return };
    let alice = rad.client("alice");
    let mut calendars = HashMap::new();
    let mut plan = vec![];
    let mut tally: BTreeMap<&str, Tally> = BTreeMap::new();
    for (i, (path, source, licence)) in files.iter().enumerate() {
        let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
        let (prodid, objects) = split(&text);
        let (_, cal) = rad.fresh_calendar("alice", &format!("corpus-{i}")).await;
        let t = tally.entry(client(&prodid)).or_default();
        t.files += 1;
        let put = put_all(&alice, &cal.href, &objects).await;
        t.put += objects.len();
        t.refused_by_server += objects.len() - put;
        let user = UserId::parse(format!("u-corpus-{i}")).unwrap();
        calendars.insert(user.clone(), CaldavCalendar::new(alice.clone(), cal.href.clone()));
        plan.push((user, cal.href, path, client(&prodid), *source, *licence));
    }
    let store = Arc::new(MemoryEventStore::new());
    let svc = CalendarService::new(store.clone(), EntityService::new(MemoryEntityStore::new()))
        .with_remote(Arc::new(Calendars(calendars)));

    for (user, href, path, who, source, licence) in &plan {
        let t = tally.get_mut(who).unwrap();
        let what = format!("{} ({who}; {source}, {licence})", path.display());
        check_calendar(&svc, store.as_ref(), &alice, user, href, &what, t).await;
    }

    println!("client | files | objects put | refused by Radicale | listed | none in first year | skipped");
    for (who, t) in &tally {
        println!(
            "{who} | {} | {} | {} | {} | {} | {:?}",
            t.files, t.put, t.refused_by_server, t.listed, t.no_occurrence_in_first_year, t.skipped
        );
    }
    assert!(files.len() >= 30, "{} files", files.len());
    for who in ["Google Calendar", "Apple iCal", "Outlook/Exchange", "Thunderbird/Lightning"] {
        assert!(tally.get(who).is_some_and(|t| t.listed > 0), "no event of {who} listed: {tally:?}");
    }
}

/// Puts each object as a new resource; how many the server took.
async fn put_all(client: &CaldavClient, cal: &str, objects: &[String]) -> usize {
    let mut taken = 0;
    for (n, ics) in objects.iter().enumerate() {
        let href = format!("{}{n}.ics", cal);
        match client.put(&href, ics, Precondition::Create).await {
            Ok(_) => taken += 1,
            Err(e) => println!("  Radicale refused an object of {cal}: {e}"),
        }
    }
    taken
}

/// One file's calendar: the listing, free time and agenda answer; each
/// object the server holds is listed, or named in `skipped` as the test
/// expects.
async fn check_calendar(
    svc: &CalendarService,
    store: &dyn EventStore,
    dav: &CaldavClient,
    user: &UserId,
    cal: &str,
    what: &str,
    t: &mut Tally,
) {
    let day = |s: &str| s.parse::<chrono::NaiveDate>().unwrap();
    // The first listing syncs; what the server holds is what it judges.
    let first = svc.list(user, &query(day("2000-01-01"), day("2000-01-02"))).await;
    let skipped = first.unwrap_or_else(|e| panic!("{what}: the listing failed: {e}")).skipped;
    let held: Vec<CalendarEvent> = store.list(user).await.unwrap();
    for r in dav.list_all(cal).await.unwrap() {
        // Named by href alone: not taken in (an unexpandable one is held, with its id).
        let named = skipped.iter().find(|s| s.event_id.is_none() && s.href.as_deref() == Some(r.href.as_str()));
        let ours = held.iter().find(|e| e.remote.as_ref().is_some_and(|x| x.href == r.href));
        let Some(start) = readable(&r.ics) else {
            let s = named.unwrap_or_else(|| panic!("{what}: {} is not readable, and not named:\n{}", r.href, r.ics));
            assert!(matches!(s.reason, SkipReason::Unreadable | SkipReason::TooLarge), "{what}: {s:?}");
            *t.skipped.entry(reason(s)).or_default() += 1;
            continue;
        };
        assert!(named.is_none(), "{what}: {} is readable, yet skipped: {named:?}\n{}", r.href, r.ics);
        let ev = ours.unwrap_or_else(|| panic!("{what}: {} is readable, yet not held:\n{}", r.href, r.ics));
        let (from, to) = (start - chrono::Duration::days(1), start + chrono::Duration::days(364));
        let list = svc.list(user, &query(from, to)).await.unwrap_or_else(|e| panic!("{what}: {e}"));
        if let Some(s) = list.skipped.iter().find(|s| s.event_id.as_ref() == Some(&ev.id)) {
            assert_eq!(s.reason, SkipReason::Unexpandable, "{what}: {s:?}");
            *t.skipped.entry(reason(s)).or_default() += 1;
            continue;
        }
        if list.events.iter().any(|i| i.event_id == ev.id) {
            t.listed += 1;
            continue;
        }
        // Not in its first year's listing: either that year has no
        // occurrence at all (every one excluded, moved out, or the series
        // ends before its start), or the listing was cut at its cap (a busy
        // calendar's year) and the first occurrence lists on its own day.
        let (a, b) = (Zone::UTC.day_start(from), Zone::UTC.day_start(to + chrono::Duration::days(1)));
        let (occ, _) = recur::occurrences(ev, a, b, Zone::UTC, usize::MAX).unwrap();
        if let Some(first) = occ.first() {
            assert!(list.truncated, "{what}: {} has occurrences yet is not listed:\n{}", r.href, r.ics);
            let on = first.start.instant(Zone::UTC).date_naive();
            let day = svc.list(user, &query(on, on)).await.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                day.events.iter().any(|i| i.event_id == ev.id),
                "{what}: {} is not listed on the day of its first occurrence ({on}):\n{}",
                r.href,
                r.ics
            );
            t.listed += 1;
            continue;
        }
        t.no_occurrence_in_first_year += 1;
    }
    // Free time and the agenda answer too, naming the same.
    let start = held.iter().map(|e| e.start.instant(Zone::UTC).date_naive()).min().unwrap_or(day("2026-01-01"));
    let free = FreeQuery {
        from: start.to_string(),
        to: (start + chrono::Duration::days(30)).to_string(),
        duration_minutes: 30,
        timezone: Some("UTC".into()),
        include_weekends: true,
        ..Default::default()
    };
    let free = svc.free_time(user, &free).await.unwrap_or_else(|e| panic!("{what}: free time failed: {e}"));
    let names = |s: &[SkippedEvent]| {
        let mut v: Vec<String> = s.iter().map(|x| format!("{:?}{:?}", x.href, x.event_id)).collect();
        v.sort();
        v
    };
    let all = svc.list(user, &query(start, start + chrono::Duration::days(30))).await.unwrap();
    assert_eq!(names(&free.skipped), names(&all.skipped), "{what}");
    let now = Zone::UTC.day_start(start) + chrono::Duration::hours(8);
    let block = agenda::agenda(svc, user, Some(Zone::UTC), 7, now, "").await;
    let block = block.unwrap_or_else(|| panic!("{what}: no agenda")).block;
    assert_eq!(block.contains("Not shown, could not be read"), !all.skipped.is_empty(), "{what}:\n{block}");
}

/// `BEGIN:VCALENDAR` around `body` (VEVENTs and VTIMEZONEs, LF lines).
fn vcal(body: &str) -> String {
    format!("BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//agentic-chat//test//EN\n{body}END:VCALENDAR\n")
        .replace('\n', "\r\n")
}

fn vevent(uid: &str, title: &str, rest: &str) -> String {
    vcal(&format!("BEGIN:VEVENT\nUID:{uid}\nDTSTAMP:20261101T000000Z\nSUMMARY:{title}\n{rest}END:VEVENT\n"))
}

/// One bad object of each kind on the server, among good ones: the listing,
/// free time and the agenda answer with the rest and name each; the sync
/// goes past them, and one fixed on the server lists at the next sync.
#[tokio::test]
async fn one_bad_object_of_each_kind_is_named_and_the_rest_lists() {
    let Some(rad) = radicale("caldav_bad_objects") else { return };
    let (alice, cal) = rad.fresh_calendar("alice", "bad-objects").await;
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let at = |h: u32| format!("DTSTART:202611{:02}T{h:02}0000Z\nDTEND:202611{:02}T{:02}0000Z\n", 2, 2, h + 1);
    let huge = format!("DESCRIPTION:{}\n", "x".repeat(MAX_OBJECT_BYTES));
    let custom_zone = "BEGIN:VTIMEZONE\nTZID:Custom Office Time\nBEGIN:STANDARD\nDTSTART:19700101T000000\n\
        TZOFFSETFROM:+0530\nTZOFFSETTO:+0530\nEND:STANDARD\nEND:VTIMEZONE\n";
    let objects = [
        ("good", vevent(&format!("good-{tag}"), "Dentist", &at(10))),
        ("huge", vevent(&format!("huge-{tag}"), "Export", &(at(12) + &huge))),
        (
            "lone",
            vevent(&format!("lone-{tag}"), "Moved instance", &format!("RECURRENCE-ID:20261102T140000Z\n{}", at(14))),
        ),
        ("rule", vevent(&format!("rule-{tag}"), "Odd rule", &format!("{}RRULE:FREQ=YEARLY;BYWEEKNO=60\n", at(15)))),
        (
            "zone",
            vcal(&format!(
                "{custom_zone}BEGIN:VEVENT\nUID:zone-{tag}\nDTSTAMP:20261101T000000Z\nSUMMARY:Office hours\n\
                 DTSTART;TZID=Custom Office Time:20261102T160000\nDURATION:PT1H\nEND:VEVENT\n"
            )),
        ),
    ];
    let mut hrefs = HashMap::new();
    for (name, ics) in &objects {
        let href = format!("{}{name}.ics", cal.href);
        let etag = alice.put(&href, ics, Precondition::Create).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        hrefs.insert(*name, (href, etag));
    }
    let user = UserId::parse("u-bad-objects").unwrap();
    let remote = Calendars(HashMap::from([(user.clone(), CaldavCalendar::new(alice.clone(), cal.href.clone()))]));
    let store = Arc::new(MemoryEventStore::new());
    let svc =
        CalendarService::new(store.clone(), EntityService::new(MemoryEntityStore::new())).with_remote(Arc::new(remote));
    let q = ListQuery {
        from: "2026-11-01".into(),
        to: "2026-11-30".into(),
        timezone: Some("UTC".into()),
        project_id: None,
    };

    let list = svc.list(&user, &q).await.expect("the listing answers");
    let titles: Vec<&str> = list.events.iter().map(|e| e.title.as_str()).collect();
    assert_eq!(titles, vec!["Dentist", "Office hours"], "{list:?}");
    let named: BTreeMap<&str, (String, Option<&str>)> = list
        .skipped
        .iter()
        .map(|s| {
            let which = hrefs.iter().find(|(_, (h, _))| s.href.as_deref() == Some(h.as_str())).map(|(n, _)| *n);
            (which.unwrap_or("?"), (reason(s), s.title.as_deref()))
        })
        .collect();
    let expected = BTreeMap::from([
        ("huge", ("too_large".to_string(), Some("Export"))),
        ("lone", ("unreadable".to_string(), Some("Moved instance"))),
        ("rule", ("unexpandable".to_string(), Some("Odd rule"))),
    ]);
    assert_eq!(named, expected, "{:?}", list.skipped);

    // Free time leaves the dentist busy and names the same; so does the agenda.
    let free = FreeQuery {
        from: "2026-11-02".into(),
        to: "2026-11-02".into(),
        duration_minutes: 30,
        timezone: Some("UTC".into()),
        ..Default::default()
    };
    let free = svc.free_time(&user, &free).await.unwrap();
    assert_eq!(
        free.slots.first().map(|s| (s.start.as_str(), s.end.as_str())),
        Some(("2026-11-02T09:00:00Z", "2026-11-02T10:00:00Z"))
    );
    assert_eq!(free.skipped.len(), 3, "{:?}", free.skipped);
    let now = "2026-11-02T08:00:00Z".parse().unwrap();
    let block = agenda::agenda(&svc, &user, Some(Zone::UTC), 7, now, "").await.unwrap().block;
    assert!(block.contains("“Dentist” 10:00–11:00"), "{block}");
    assert!(block.contains("Not shown, could not be read (3 events"), "{block}");
    assert!(block.contains("“Moved instance”: not an event we can read"), "{block}");

    // Fixed on the server: the next (incremental) sync lists it and no
    // longer names it; the huge one deleted there is named no more.
    let (lone_href, lone_etag) = &hrefs["lone"];
    let fixed = vevent(&format!("lone-{tag}"), "Moved instance", &at(14));
    alice.put(lone_href, &fixed, Precondition::Match(lone_etag.clone())).await.unwrap();
    let (huge_href, huge_etag) = &hrefs["huge"];
    alice.delete(huge_href, huge_etag).await.unwrap();
    let after = svc.list(&user, &q).await.unwrap();
    let titles: Vec<&str> = after.events.iter().map(|e| e.title.as_str()).collect();
    assert_eq!(titles, vec!["Dentist", "Moved instance", "Office hours"]);
    let reasons: Vec<String> = after.skipped.iter().map(reason).collect();
    assert_eq!(reasons, vec!["unexpandable"], "{:?}", after.skipped);
}
