//! The calendar's `/events` routes end to end: the entities function's real
//! router against DynamoDB Local. Each refusal is checked to have written
//! nothing by reading back as the owner.

use http_body_util::BodyExt;
use serde_json::{json, Value};
use shared::edge::entities::handle_entities;
use tests::entities::EntitiesTest;
use tests::token;

/// What a client saw, headers included (the `ETag`).
#[derive(Debug)]
struct Seen {
    status: u16,
    etag: Option<String>,
    json: Value,
}

impl Seen {
    fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }
}

async fn send(
    t: &EntitiesTest,
    user: &str,
    method: &str,
    uri: &str,
    body: Option<Value>,
    if_match: Option<&str>,
) -> Seen {
    let mut b = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {}", token(user)));
    if let Some(v) = if_match {
        b = b.header("if-match", v);
    }
    let body = match body {
        Some(v) => lambda_http::Body::Binary(serde_json::to_vec(&v).unwrap()),
        None => lambda_http::Body::Empty,
    };
    let resp = handle_entities(&t.app, lambda_http::Request::from(b.body(body).unwrap())).await;
    let status = resp.status().as_u16();
    let etag = resp.headers().get("etag").map(|v| v.to_str().unwrap().to_string());
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let json = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
    Seen { status, etag, json }
}

async fn get(t: &EntitiesTest, user: &str, uri: &str) -> Seen {
    send(t, user, "GET", uri, None, None).await
}

async fn create(t: &EntitiesTest, user: &str, body: Value) -> String {
    let a = send(t, user, "POST", "/events", Some(body), None).await;
    assert_eq!(a.status, 201, "{a:?}");
    a.json["data"]["id"].as_str().unwrap().to_string()
}

/// The listed occurrences' `(start, title)` over `from..to` in Berlin.
async fn listed(t: &EntitiesTest, user: &str, from: &str, to: &str) -> Vec<(String, String)> {
    let a = get(t, user, &format!("/events?from={from}&to={to}&timezone=Europe/Berlin")).await;
    assert_eq!(a.status, 200, "{a:?}");
    let events = a.json["events"].as_array().unwrap();
    events.iter().map(|e| (e["start"].as_str().unwrap().into(), e["title"].as_str().unwrap().into())).collect()
}

fn berlin(body: Value) -> Value {
    let mut b = body;
    b["timezone"] = json!("Europe/Berlin");
    b
}

#[tokio::test]
async fn an_event_round_trips_through_create_list_get_patch_and_delete() {
    let t = EntitiesTest::new().await;
    let made = send(
        &t,
        "alice",
        "POST",
        "/events",
        Some(berlin(json!({"title": "Design review", "start": "2026-12-01T10:00"}))),
        None,
    )
    .await;
    assert_eq!(made.status, 201, "{made:?}");
    let ev = &made.json["data"];
    assert_eq!(
        (ev["version"].as_u64(), ev["start"].as_str(), ev["end"].as_str()),
        (Some(1), Some("2026-12-01T09:00:00Z"), Some("2026-12-01T10:00:00Z"))
    );
    assert_eq!(made.json["patch"]["changes"][0]["op"], "upsert");
    let id = ev["id"].as_str().unwrap().to_string();
    let url = format!("/events/{id}");

    assert_eq!(
        listed(&t, "alice", "2026-12-01", "2026-12-01").await,
        vec![("2026-12-01T10:00:00+01:00".into(), "Design review".into())]
    );
    let got = get(&t, "alice", &url).await;
    assert_eq!((got.status, got.etag.as_deref()), (200, Some("\"1\"")));
    assert_eq!(&got.json, ev);

    let moved = send(
        &t,
        "alice",
        "PATCH",
        &url,
        Some(json!({"title": "Design review v2", "start": "2026-12-01T11:00"})),
        Some("\"1\""),
    )
    .await;
    assert_eq!(moved.status, 200, "{moved:?}");
    assert_eq!(moved.json["data"]["version"], 2);
    assert_eq!(moved.json["data"]["end"], "2026-12-01T11:00:00Z", "moving the start keeps the hour");
    assert_eq!(get(&t, "alice", &url).await.etag.as_deref(), Some("\"2\""));

    let gone = send(&t, "alice", "DELETE", &url, None, Some("2")).await;
    assert_eq!(gone.status, 200, "{gone:?}");
    assert_eq!(gone.json["data"], json!({"event_id": id, "deleted": true}));
    assert_eq!(gone.json["patch"]["changes"][0], json!({"op": "delete", "event_id": id}));
    let after = get(&t, "alice", &url).await;
    assert_eq!((after.status, after.code()), (404, "event_not_found"));
    assert!(listed(&t, "alice", "2026-12-01", "2026-12-01").await.is_empty());
}

#[tokio::test]
async fn a_weekly_series_lists_instances_changes_one_and_ends_at_a_following_delete() {
    let t = EntitiesTest::new().await;
    let series =
        json!({"title": "Standup", "start": "2026-03-02T09:00", "recurrence": {"rrule": "FREQ=WEEKLY;COUNT=6"}});
    let id = create(&t, "alice", berlin(series)).await;
    let url = format!("/events/{id}");
    let all = get(&t, "alice", "/events?from=2026-03-01&to=2026-04-30&timezone=Europe/Berlin").await;
    let instances: Vec<&str> =
        all.json["events"].as_array().unwrap().iter().map(|e| e["instance"].as_str().unwrap()).collect();
    assert_eq!(instances.len(), 6, "{all:?}");
    let starts: Vec<String> =
        listed(&t, "alice", "2026-03-01", "2026-04-30").await.into_iter().map(|(s, _)| s).collect();
    assert_eq!(starts[3], "2026-03-23T09:00:00+01:00");
    assert_eq!(starts[4], "2026-03-30T09:00:00+02:00", "09:00 local across the DST change");

    // One instance moved: only it.
    let third = instances[2].to_string();
    let one = send(
        &t,
        "alice",
        "PATCH",
        &format!("{url}?instance={third}"),
        Some(json!({"start": "2026-03-16T10:00", "title": "Late standup"})),
        Some("1"),
    )
    .await;
    assert_eq!(one.status, 200, "{one:?}");
    let now = listed(&t, "alice", "2026-03-01", "2026-04-30").await;
    assert_eq!(now[2], ("2026-03-16T10:00:00+01:00".into(), "Late standup".into()));
    for (i, (start, title)) in now.iter().enumerate().filter(|(i, _)| *i != 2) {
        assert!(start.contains("T09:00:00"), "{i}: {start}");
        assert_eq!(title, "Standup");
    }

    // This and following: the series ends before the fifth.
    let fifth = instances[4];
    let cut =
        send(&t, "alice", "DELETE", &format!("{url}?instance={fifth}&scope=following"), None, Some("\"2\"")).await;
    assert_eq!(cut.status, 200, "{cut:?}");
    assert_eq!(
        (cut.json["data"]["deleted"].as_bool(), cut.json["data"]["event"]["version"].as_u64()),
        (Some(false), Some(3))
    );
    let left: Vec<String> = listed(&t, "alice", "2026-03-01", "2026-04-30").await.into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        left,
        [
            "2026-03-02T09:00:00+01:00",
            "2026-03-09T09:00:00+01:00",
            "2026-03-16T10:00:00+01:00",
            "2026-03-23T09:00:00+01:00"
        ]
    );

    // An instance the series does not have.
    let none = send(&t, "alice", "DELETE", &format!("{url}?instance=2026-03-03T08:00:00Z"), None, None).await;
    assert_eq!((none.status, none.code()), (404, "instance_not_found"));
    let bad_scope = send(&t, "alice", "DELETE", &format!("{url}?instance={fifth}&scope=some"), None, None).await;
    assert_eq!((bad_scope.status, bad_scope.code()), (400, "invalid_value"));
    assert_eq!(get(&t, "alice", &url).await.json["version"], 3, "refusals wrote nothing");
}

#[tokio::test]
async fn another_users_event_is_not_found_on_every_route_and_stays_untouched() {
    let t = EntitiesTest::new().await;
    let id = create(&t, "alice", berlin(json!({"title": "Private", "start": "2026-12-01T10:00"}))).await;
    let url = format!("/events/{id}");
    let before = get(&t, "alice", &url).await.json;
    for (method, body) in [("GET", None), ("PATCH", Some(json!({"title": "Mine now"}))), ("DELETE", None)] {
        for if_match in [None, Some("1")] {
            let a = send(&t, "bob", method, &url, body.clone(), if_match).await;
            assert_eq!((a.status, a.code()), (404, "event_not_found"), "{method}: {a:?}");
        }
    }
    assert!(get(&t, "bob", "/events?from=2026-12-01&to=2026-12-02").await.json["events"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(get(&t, "alice", &url).await.json, before, "nothing read into, nothing written");
}

#[tokio::test]
async fn a_stale_if_match_is_a_conflict_naming_the_current_version_and_writes_nothing() {
    let t = EntitiesTest::new().await;
    let id = create(&t, "alice", berlin(json!({"title": "Review", "start": "2026-12-01T10:00"}))).await;
    let url = format!("/events/{id}");
    assert_eq!(send(&t, "alice", "PATCH", &url, Some(json!({"title": "Review 2"})), Some("1")).await.status, 200);
    let before = get(&t, "alice", &url).await.json;
    let stale = send(&t, "alice", "PATCH", &url, Some(json!({"title": "Lost"})), Some("W/\"1\"")).await;
    assert_eq!((stale.status, stale.code()), (409, "version_conflict"));
    assert_eq!(stale.json["error"]["current_version"], 2);
    let stale = send(&t, "alice", "DELETE", &url, None, Some("1")).await;
    assert_eq!((stale.status, stale.json["error"]["current_version"].as_u64()), (409, Some(2)));
    let bad = send(&t, "alice", "DELETE", &url, None, Some("one")).await;
    assert_eq!((bad.status, bad.code()), (400, "invalid_value"));
    assert_eq!(get(&t, "alice", &url).await.json, before);
}

#[tokio::test]
async fn bad_input_is_refused_with_its_code_and_nothing_is_written() {
    let t = EntitiesTest::new().await;
    let id = create(&t, "alice", berlin(json!({"title": "Kept", "start": "2026-12-01T10:00"}))).await;
    let url = format!("/events/{id}");
    let before = get(&t, "alice", &url).await.json;
    let start = "2026-12-02T10:00";
    for (body, code) in [
        (json!({"title": "X", "start": start, "timezone": "Mars/Olympus"}), "invalid_timezone"),
        (
            json!({"title": "X", "start": start, "end": "2026-12-02T09:00", "timezone": "Europe/Berlin"}),
            "end_before_start",
        ),
        (json!({"title": "X", "start": start, "recurrence": {"rrule": "FREQ=SOMETIMES"}}), "invalid_rrule"),
        (json!({"title": "X", "start": "next Tuesday at 10"}), "invalid_time"),
        (json!({"title": "X", "start": start, "duration_minutes": 525_601}), "invalid_value"),
        (json!({"title": "X", "start": start, "colour": "red"}), "unknown_field"),
        (json!({"start": start}), "missing_field"),
    ] {
        let a = send(&t, "alice", "POST", "/events", Some(body.clone()), None).await;
        assert_eq!((a.status, a.code()), (400, code), "{body}: {a:?}");
    }
    for (body, code) in [
        (json!({"timezone": "Mars/Olympus"}), "invalid_timezone"),
        (json!({"end": "2026-12-01T09:00"}), "end_before_start"),
        (json!({"recurrence": {"rrule": "FREQ=SOMETIMES"}}), "invalid_rrule"),
    ] {
        let a = send(&t, "alice", "PATCH", &url, Some(body.clone()), None).await;
        assert_eq!((a.status, a.code()), (400, code), "{body}: {a:?}");
    }
    for (uri, code) in [
        ("/events?from=2026-01-01&to=2027-06-01", "range_too_long"),
        ("/events?to=2026-12-31", "missing_field"),
        ("/events?from=2026-12-02&to=2026-12-01", "end_before_start"),
        ("/events?from=2026-12-01&to=2026-12-02&timezone=Mars/Olympus", "invalid_timezone"),
        ("/events/free?from=2026-12-01&to=2026-12-02", "missing_field"),
        ("/events/free?from=2026-12-01&to=2026-12-02&duration_minutes=2", "invalid_value"),
    ] {
        let a = get(&t, "alice", uri).await;
        assert_eq!((a.status, a.code()), (400, code), "{uri}: {a:?}");
    }
    assert_eq!(get(&t, "alice", &url).await.json, before);
    let all = listed(&t, "alice", "2026-06-01", "2027-05-31").await;
    assert_eq!(all, vec![("2026-12-01T10:00:00+01:00".into(), "Kept".into())], "only the one made");
}

#[tokio::test]
async fn free_time_is_working_hours_around_the_users_events() {
    let t = EntitiesTest::new().await;
    create(&t, "alice", berlin(json!({"title": "Busy", "start": "2026-12-01T10:00", "end": "2026-12-01T11:30"}))).await;
    let a =
        get(&t, "alice", "/events/free?from=2026-12-01&to=2026-12-01&duration_minutes=60&timezone=Europe/Berlin").await;
    assert_eq!(a.status, 200, "{a:?}");
    let slots: Vec<(&str, &str)> = a.json["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["start"].as_str().unwrap(), s["end"].as_str().unwrap()))
        .collect();
    assert_eq!(
        slots,
        [
            ("2026-12-01T09:00:00+01:00", "2026-12-01T10:00:00+01:00"),
            ("2026-12-01T11:30:00+01:00", "2026-12-01T17:00:00+01:00")
        ]
    );
    let bob =
        get(&t, "bob", "/events/free?from=2026-12-01&to=2026-12-01&duration_minutes=60&timezone=Europe/Berlin").await;
    assert_eq!(bob.json["slots"][0]["end"], "2026-12-01T17:00:00+01:00", "another user's events are not in the way");
}

/// Issue 41: RFC 5545's own form for an all-day series (`UNTIL` a DATE) is
/// taken, and the `UNTIL` a "this and following" delete writes is read back.
/// Dates: python-dateutil, `rrulestr("FREQ=WEEKLY;UNTIL=20260610", dtstart=datetime(2026,5,6))`.
#[tokio::test]
async fn an_all_day_series_with_a_date_until_is_made_listed_and_cut_at_a_following_delete() {
    let t = EntitiesTest::new().await;
    let series = json!({"title": "Weekly all-day", "start": "2026-05-06", "recurrence": {"rrule": "FREQ=WEEKLY;UNTIL=20260610"}});
    let id = create(&t, "alice", berlin(series)).await;
    let dates = |v: Vec<(String, String)>| v.into_iter().map(|(s, _)| s).collect::<Vec<_>>();
    let weeks = ["2026-05-06", "2026-05-13", "2026-05-20", "2026-05-27", "2026-06-03", "2026-06-10"];
    assert_eq!(dates(listed(&t, "alice", "2026-05-01", "2026-07-31").await), weeks);

    let cut =
        send(&t, "alice", "DELETE", &format!("/events/{id}?instance=2026-05-27&scope=following"), None, None).await;
    assert_eq!(cut.status, 200, "{cut:?}");
    assert_eq!(cut.json["data"]["event"]["recurrence"]["rrule"], "FREQ=WEEKLY;UNTIL=20260526");
    assert_eq!(dates(listed(&t, "alice", "2026-05-01", "2026-07-31").await), weeks[..3]);
}

/// Issue 41: `COUNT` and `UNTIL` together are refused (RFC 5545 §3.3.10), on
/// create and on a change of the rule, with nothing written.
#[tokio::test]
async fn a_rule_with_both_count_and_until_is_refused_and_nothing_is_written() {
    let t = EntitiesTest::new().await;
    let both = json!({"rrule": "FREQ=DAILY;COUNT=5;UNTIL=20260620T000000Z"});
    let made = send(
        &t,
        "alice",
        "POST",
        "/events",
        Some(json!({"title": "X", "start": "2026-06-01T09:00", "recurrence": both})),
        None,
    )
    .await;
    assert_eq!((made.status, made.code()), (400, "invalid_rrule"), "{made:?}");
    let id = create(
        &t,
        "alice",
        json!({"title": "Daily", "start": "2026-06-01T09:00", "recurrence": {"rrule": "FREQ=DAILY;COUNT=5"}}),
    )
    .await;
    let changed = send(&t, "alice", "PATCH", &format!("/events/{id}"), Some(json!({"recurrence": both})), None).await;
    assert_eq!((changed.status, changed.code()), (400, "invalid_rrule"), "{changed:?}");
    let stored = get(&t, "alice", &format!("/events/{id}")).await.json;
    assert_eq!(
        (stored["version"].as_u64(), stored["recurrence"]["rrule"].as_str()),
        (Some(1), Some("FREQ=DAILY;COUNT=5"))
    );
}

/// Issue 41: a weekly 09:00 Berlin series from 17 Mar with an `EXDATE` and a
/// changed instance, moved to start 31 Mar 10:00 (across the DST change):
/// both follow it in wall-clock time, so 11 rule dates list as 10. Starts:
/// python-dateutil, an `rruleset` of `rrule(WEEKLY,
/// dtstart=datetime(2026,3,31,10,0,tzinfo=ZoneInfo("Europe/Berlin")))` with
/// `exdate(datetime(2026,4,21,10,0,tzinfo=…))`.
#[tokio::test]
async fn moving_a_series_across_dst_moves_its_exception_and_override_with_it() {
    let t = EntitiesTest::new().await;
    let rec = json!({"rrule": "FREQ=WEEKLY", "exdates": ["2026-04-07T09:00"]});
    let id =
        create(&t, "alice", berlin(json!({"title": "Review", "start": "2026-03-17T09:00", "recurrence": rec}))).await;
    let url = format!("/events/{id}");
    let one = send(
        &t,
        "alice",
        "PATCH",
        &format!("{url}?instance=2026-04-14T07:00:00Z"),
        Some(json!({"title": "Guest review"})),
        None,
    )
    .await;
    assert_eq!(one.status, 200, "{one:?}");
    let moved =
        send(&t, "alice", "PATCH", &format!("{url}?scope=series"), Some(json!({"start": "2026-03-31T10:00"})), None)
            .await;
    assert_eq!(moved.status, 200, "{moved:?}");
    let got = listed(&t, "alice", "2026-03-01", "2026-06-09").await;
    let days = ["03-31", "04-07", "04-14", "04-28", "05-05", "05-12", "05-19", "05-26", "06-02", "06-09"];
    let want: Vec<(String, String)> = days
        .iter()
        .map(|d| {
            (format!("2026-{d}T10:00:00+02:00"), if *d == "04-28" { "Guest review" } else { "Review" }.to_string())
        })
        .collect();
    assert_eq!(got, want);
}

/// Issue 41: "this and following" on `COUNT=10` with an `EXDATE` before the
/// split keeps ten rule dates (RFC 5545 counts them before `EXDATE`): nine
/// listed. Rule dates: python-dateutil, `rrule(WEEKLY, count=10,
/// dtstart=datetime(2026,1,6,9,0,tzinfo=ZoneInfo("Europe/Berlin")))`.
#[tokio::test]
async fn a_following_change_of_a_count_series_with_an_exdate_keeps_its_count() {
    let t = EntitiesTest::new().await;
    let rec = json!({"rrule": "FREQ=WEEKLY;COUNT=10", "exdates": ["2026-01-20T09:00"]});
    let id =
        create(&t, "alice", berlin(json!({"title": "Weekly", "start": "2026-01-06T09:00", "recurrence": rec}))).await;
    let split = send(
        &t,
        "alice",
        "PATCH",
        &format!("/events/{id}?instance=2026-02-17T08:00:00Z&scope=following"),
        Some(json!({"title": "Later"})),
        None,
    )
    .await;
    assert_eq!(split.status, 200, "{split:?}");
    let got = listed(&t, "alice", "2026-01-01", "2026-06-30").await;
    let days = ["01-06", "01-13", "01-27", "02-03", "02-10", "02-17", "02-24", "03-03", "03-10"];
    let want: Vec<(String, String)> = days
        .iter()
        .map(|d| (format!("2026-{d}T09:00:00+01:00"), if *d >= "02-17" { "Later" } else { "Weekly" }.to_string()))
        .collect();
    assert_eq!(got, want);
}
