//! The prewarm function end to end against DynamoDB Local: the function-URL
//! handler, the cache it fills, and the scheduled refresh.

use aws_sdk_dynamodb::types::AttributeValue;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use shared::context::cache::{active_gsi_sk, cache_pk, cache_sk, ContextCache};
use shared::context::pack::build_pack;
use shared::edge::prewarm::{handle_prewarm, invoke};
use shared::ids::{ProjectId, SessionId, UserId};
use shared::prewarm::refresh::{refresh_active, RefreshReport};
use shared::prewarm::{PrewarmApp, PrewarmConfig};
use shared::session::store::Sessions;
use shared::tools::ToolScope;
use std::time::{Duration, Instant};
use tests::entities::EntitiesTest;
use tests::{test_config, token};

struct PrewarmTest {
    t: EntitiesTest,
    app: PrewarmApp,
}

impl PrewarmTest {
    async fn new() -> PrewarmTest {
        Self::with(PrewarmConfig::default()).await
    }

    async fn with(config: PrewarmConfig) -> PrewarmTest {
        let t = EntitiesTest::new().await;
        let app = PrewarmApp::with_dynamo(test_config(&t.table, "http://127.0.0.1:9/unused"), config, t.dynamo.clone());
        PrewarmTest { t, app }
    }

    async fn raw(&self, user: Option<&str>, method: &str, body: Vec<u8>) -> (u16, Value) {
        let mut b = http::Request::builder().method(method).uri("/prewarm").header("content-type", "application/json");
        if let Some(u) = user {
            b = b.header("authorization", format!("Bearer {}", token(u)));
        }
        let req = lambda_http::Request::from(b.body(lambda_http::Body::Binary(body)).expect("request"));
        let resp = handle_prewarm(&self.app, req).await;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.expect("infallible").to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    async fn prewarm(&self, user: &str, body: Value) -> (u16, Value) {
        self.raw(Some(user), "POST", serde_json::to_vec(&body).unwrap()).await
    }

    async fn cached(&self, user: &str, scope: &ToolScope) -> Option<(shared::context::pack::ContextPack, u64)> {
        self.app.cache.cached_pack(&uid(user), scope).await.expect("cache read").map(|c| (c.pack, c.version))
    }

    async fn version(&self, user: &str, project: &str) -> u64 {
        self.t.version(user, project).await
    }

    /// Makes a cache look idle: last used `ago` in the past.
    async fn age(&self, user: &str, scope: &ToolScope, ago: Duration) {
        let then = shared::now_ms() - ago.as_millis() as i64;
        let u = uid(user);
        self.t
            .dynamo
            .update_item()
            .table_name(&self.t.table)
            .key("pk", AttributeValue::S(cache_pk(&u)))
            .key("sk", AttributeValue::S(cache_sk(scope)))
            .update_expression("SET last_used = :u, gsi1sk = :g")
            .expression_attribute_values(":u", AttributeValue::N(then.to_string()))
            .expression_attribute_values(":g", AttributeValue::S(active_gsi_sk(then, &u, &cache_sk(scope))))
            .send()
            .await
            .expect("age the cache");
    }

    async fn last_used(&self, user: &str, scope: &ToolScope) -> i64 {
        self.app.cache.cached_entry(&uid(user), scope).await.unwrap().expect("cached").last_used
    }

    async fn refresh(&self) -> RefreshReport {
        refresh_active(&self.app.cache, &self.app.service, &self.app.config, Instant::now() + Duration::from_secs(60))
            .await
    }
}

fn uid(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

fn project_scope(p: &str) -> ToolScope {
    ToolScope::Project { project: ProjectId::parse(p).unwrap() }
}

#[tokio::test]
async fn prewarm_then_the_cache_hits_with_the_same_version_and_pack() {
    let p = PrewarmTest::new().await;
    let (project, _) = p.t.project("alice", "Launch").await;
    p.t.create("alice", &project, "documents", json!({"title": "Spec", "content": "hello"})).await;
    let version = p.version("alice", &project).await;

    let (status, body) = p.prewarm("alice", json!({"context_type": "project", "project_id": project})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cached"]["scope"], "project");
    assert_eq!(body["cached"]["version"], version);
    assert_eq!(body["cached"]["stored"], true);
    assert!(body["cached"]["bytes"].as_u64().unwrap() > 0);
    assert!(body["cached"]["build_ms"].is_u64());

    // A new session, without a lease, with the focus recorded for the stream.
    let session = SessionId::parse(body["session"]["id"].as_str().unwrap()).unwrap();
    let stored = p.app.store.session(&uid("alice"), &session).await.unwrap().expect("session created");
    assert_eq!(stored.lease, None);
    assert_eq!(stored.view.context_type.as_str(), "project");
    assert_eq!(stored.view.focus, Some(json!({"projectId": project})));

    // Hit: the version it was built from is the project's, and the pack is what a build gives.
    let scope = project_scope(&project);
    let (pack, cached_version) = p.cached("alice", &scope).await.expect("a cache hit");
    assert_eq!(cached_version, version);
    assert_eq!(pack, build_pack(&p.app.service, &uid("alice"), &scope).await);
    assert!(pack.doc_structure.is_some());

    // Prewarming again on the same session moves its focus to an entity.
    let task = p.t.create("alice", &project, "tasks", json!({"title": "Ship"})).await;
    let (status, body) = p
        .prewarm(
            "alice",
            json!({"session_id": session, "context_type": "entity", "project_id": project,
                "entity_id": task, "entity_type": "task"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["session"]["id"], session.as_str());
    assert_eq!(body["cached"]["scope"], "entity");
    let stored = p.app.store.session(&uid("alice"), &session).await.unwrap().unwrap();
    assert_eq!(stored.view.context_type.as_str(), "entity");
    assert_eq!(stored.view.entity_id.as_deref(), Some(task.as_str()));
    let entity_scope = ToolScope::from_focus(stored.view.context_type, Some(&task), stored.view.focus.as_ref());
    let (pack, _) = p.cached("alice", &entity_scope).await.expect("the entity pack is cached");
    assert_eq!(pack.entity.as_ref().unwrap()["id"], task.as_str());
}

#[tokio::test]
async fn an_entity_write_moves_the_version_past_the_cache() {
    let p = PrewarmTest::new().await;
    let (project, _) = p.t.project("alice", "Launch").await;
    assert_eq!(p.prewarm("alice", json!({"context_type": "project", "project_id": project})).await.0, 200);
    let scope = project_scope(&project);
    let (_, before) = p.cached("alice", &scope).await.unwrap();
    assert_eq!(before, p.version("alice", &project).await);

    p.t.create("alice", &project, "tasks", json!({"title": "New work"})).await;
    let now = p.version("alice", &project).await;
    let (_, cached) = p.cached("alice", &scope).await.unwrap();
    assert_eq!(cached, before, "the cache is untouched by the write");
    assert_ne!(cached, now, "and the freshness check sees it is stale");
}

#[tokio::test]
async fn the_schedule_refreshes_exactly_the_stale_caches_of_active_sessions() {
    let p = PrewarmTest::new().await;
    let (stale, _) = p.t.project("alice", "Stale").await;
    let (fresh, _) = p.t.project("alice", "Fresh").await;
    let (idle, _) = p.t.project("bob", "Idle").await;
    for (user, project) in [("alice", &stale), ("alice", &fresh), ("bob", &idle)] {
        assert_eq!(p.prewarm(user, json!({"context_type": "project", "project_id": project})).await.0, 200);
    }
    // Bob's session went idle two hours ago; both stale and idle projects change.
    p.age("bob", &project_scope(&idle), Duration::from_secs(2 * 3600)).await;
    p.t.create("alice", &stale, "tasks", json!({"title": "Change"})).await;
    p.t.create("bob", &idle, "tasks", json!({"title": "Change"})).await;
    let idle_cached = p.cached("bob", &project_scope(&idle)).await.unwrap().1;
    let idle_used = p.last_used("bob", &project_scope(&idle)).await;
    let stale_used = p.last_used("alice", &project_scope(&stale)).await;

    let report = p.refresh().await;
    assert_eq!(
        report,
        RefreshReport { checked: 2, refreshed: 1, unchanged: 1, finished: true, ..Default::default() },
        "{report:?}"
    );
    let (pack, v) = p.cached("alice", &project_scope(&stale)).await.unwrap();
    assert_eq!(v, p.version("alice", &stale).await, "the stale cache was rebuilt");
    assert_eq!(pack, build_pack(&p.app.service, &uid("alice"), &project_scope(&stale)).await);
    assert_eq!(p.last_used("alice", &project_scope(&stale)).await, stale_used, "a refresh is not activity");
    assert_eq!(p.cached("alice", &project_scope(&fresh)).await.unwrap().1, p.version("alice", &fresh).await);
    assert_eq!(p.cached("bob", &project_scope(&idle)).await.unwrap().1, idle_cached, "idle caches are left alone");
    assert_eq!(p.last_used("bob", &project_scope(&idle)).await, idle_used);

    // A second run finds nothing to do.
    let again = p.refresh().await;
    assert_eq!(again, RefreshReport { checked: 2, unchanged: 2, finished: true, ..Default::default() });
}

#[tokio::test]
async fn a_bounded_run_stops_and_the_next_one_resumes_where_it_stopped() {
    let p = PrewarmTest::with(PrewarmConfig { max_per_run: 2, ..Default::default() }).await;
    let mut projects = Vec::new();
    for i in 0..3 {
        let (project, _) = p.t.project("alice", &format!("P{i}")).await;
        assert_eq!(p.prewarm("alice", json!({"context_type": "project", "project_id": project})).await.0, 200);
        projects.push(project);
    }
    for project in &projects {
        p.t.create("alice", project, "tasks", json!({"title": "Change"})).await;
    }
    let first = p.refresh().await;
    assert_eq!((first.checked, first.refreshed, first.finished), (2, 2, false), "{first:?}");
    assert_eq!(first.stopped.as_deref(), Some("budget"));
    let second = p.refresh().await;
    assert!(second.resumed_from.is_some(), "{second:?}");
    assert_eq!((second.refreshed, second.finished), (1, true), "{second:?}");
    for project in &projects {
        assert_eq!(p.cached("alice", &project_scope(project)).await.unwrap().1, p.version("alice", project).await);
    }
    // Past its deadline margin a run does nothing and keeps its place.
    let late = refresh_active(&p.app.cache, &p.app.service, &p.app.config, Instant::now()).await;
    assert_eq!((late.checked, late.stopped.as_deref()), (0, Some("deadline")));
}

#[tokio::test]
async fn another_users_project_is_not_found_and_nothing_is_cached() {
    let p = PrewarmTest::new().await;
    let (project, _) = p.t.project("alice", "Private").await;
    let (status, body) = p.prewarm("bob", json!({"context_type": "project", "project_id": project})).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "project_not_found");
    assert!(p.cached("bob", &project_scope(&project)).await.is_none());
    assert!(p.cached("alice", &project_scope(&project)).await.is_none());
    let sessions = p.app.store.list_sessions(&uid("bob"), 10, None).await.unwrap();
    assert!(sessions.sessions.is_empty(), "no session was created for the refused request");
    // A pack that could not be built (no project read) is never cached.
    let empty = shared::context::pack::ContextPack { scope: "project", ..Default::default() };
    let out = p.app.cache.put_pack(&uid("bob"), &project_scope(&project), &empty, 1).await.unwrap();
    assert!(!out.stored);
    assert!(p.cached("bob", &project_scope(&project)).await.is_none());
    // A deleted or foreign session id is not found either.
    let (status, _) = p.prewarm("bob", json!({"session_id": SessionId::new(), "context_type": "global"})).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn bad_input_is_refused_with_json_errors() {
    let p = PrewarmTest::new().await;
    for body in [
        b"not json".to_vec(),
        b"{}".to_vec(),
        br#"{"context_type":"nonsense"}"#.to_vec(),
        br#"{"context_type":"project"}"#.to_vec(),
        br#"{"context_type":"project","project_id":"no spaces allowed"}"#.to_vec(),
        br#"{"context_type":"entity","project_id":"p1"}"#.to_vec(),
    ] {
        let (status, json) = p.raw(Some("alice"), "POST", body.clone()).await;
        assert_eq!(status, 400, "{}: {json}", String::from_utf8_lossy(&body));
        assert!(json["error"]["code"].is_string());
    }
    assert_eq!(p.raw(None, "POST", br#"{"context_type":"global"}"#.to_vec()).await.0, 401);
    assert_eq!(p.raw(Some("alice"), "GET", vec![]).await.0, 405);
    // Global scope works without a project: the project list, version 0.
    p.t.project("alice", "One").await;
    let (status, body) = p.prewarm("alice", json!({"context_type": "global"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cached"]["scope"], "global");
    assert_eq!(body["cached"]["version"], 0);
    assert_eq!(p.cached("alice", &ToolScope::Global).await.unwrap().0.projects.len(), 1);
}

fn sample(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn the_sample_events_run_through_the_lambda_entry_point() {
    let p = PrewarmTest::new().await;
    let (project, _) = p.t.project("alice", "Launch").await;
    let mut url = sample("prewarm-url.json");
    url["headers"]["authorization"] = json!(format!("Bearer {}", token("alice")));
    url["body"] = json!(url["body"].as_str().unwrap().replace("REPLACE_PROJECT_ID", &project));
    let deadline = Instant::now() + Duration::from_secs(60);
    let out = serde_json::to_value(invoke(&p.app, url, deadline).await).unwrap();
    assert_eq!(out["statusCode"], 200, "{out}");
    let body: Value = serde_json::from_str(out["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["cached"]["version"], p.version("alice", &project).await);

    p.t.create("alice", &project, "tasks", json!({"title": "Change"})).await;
    let report = serde_json::to_value(invoke(&p.app, sample("prewarm-schedule.json"), deadline).await).unwrap();
    assert_eq!(report["refreshed"], 1, "{report}");
    assert_eq!(report["finished"], true);
}

/// The function-URL answer, as the runtime serializes it: the payload-2.0
/// response shape, `cookies` included (`cargo lambda watch` answered 500
/// without it), for a success, a refusal and an event that is not a request.
#[tokio::test]
async fn the_function_url_answer_is_a_payload_2_response() {
    let p = PrewarmTest::new().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ok = sample("prewarm-url.json");
    ok["headers"]["authorization"] = json!(format!("Bearer {}", token("alice")));
    ok["body"] = json!(r#"{"context_type":"global"}"#);
    let mut refused = ok.clone();
    refused["headers"]["authorization"] = json!("Bearer not-a-jwt");
    for (event, status, code) in [
        (ok, 200, None),
        (refused, 401, Some("invalid_token")),
        (json!({"hello": "world"}), 400, Some("invalid_event")),
    ] {
        // What lambda_runtime sends back to the Runtime API.
        let sent: Value =
            serde_json::from_slice(&serde_json::to_vec(&invoke(&p.app, event, deadline).await).unwrap()).unwrap();
        assert_eq!(sent["statusCode"], status, "{sent}");
        assert_eq!(sent["headers"]["content-type"], "application/json", "{sent}");
        assert_eq!(sent["cookies"], json!([]), "{sent}");
        assert_eq!(sent["isBase64Encoded"], false, "{sent}");
        let body: Value = serde_json::from_str(sent["body"].as_str().expect("a string body")).unwrap();
        match code {
            None => assert_eq!(body["cached"]["scope"], "global", "{body}"),
            Some(code) => assert_eq!(body["error"]["code"], code, "{body}"),
        }
    }
}

/// Context assembly, cold (`build_pack`) versus warm (`cached_pack` and the
/// project's version, two GetItems in parallel), on a project with 500 entities and a 200-node document tree.
/// Against DynamoDB Local, so absolute numbers are local ones:
/// `scripts/test.sh -E 'test(context_assembly_warm_versus_cold)' --run-ignored only --no-capture`
#[tokio::test]
#[ignore = "a measurement, not a check: run it on demand"]
async fn context_assembly_warm_versus_cold() {
    let p = PrewarmTest::new().await;
    let (project, _) = p.t.project("alice", "Big").await;
    // 200 documents (the context document and 199 more, up to 3 levels deep), then 300 tasks.
    let mut docs: Vec<String> = Vec::new();
    for i in 0..199 {
        let body = match i {
            0..=19 => json!({"title": format!("Doc {i}"), "description": "A top-level document"}),
            _ => json!({"title": format!("Doc {i}"), "parent_id": docs[(i - 20) / 9]}),
        };
        docs.push(p.t.create("alice", &project, "documents", body).await);
    }
    for i in 0..300 {
        p.t.create("alice", &project, "tasks", json!({"title": format!("Task {i}")})).await;
    }
    let scope = project_scope(&project);
    let user = uid("alice");
    let (status, body) = p.prewarm("alice", json!({"context_type": "project", "project_id": project})).await;
    assert_eq!(status, 200, "{body}");
    let runs = 20;
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..runs {
        let t0 = Instant::now();
        let pack = build_pack(&p.app.service, &user, &scope).await;
        cold.push(t0.elapsed());
        // Warm: the cache read and the freshness check (the project's version), in parallel.
        let t1 = Instant::now();
        let project_id = scope.project().unwrap();
        let (hit, current) =
            tokio::join!(p.app.cache.cached_pack(&user, &scope), p.app.service.get_project(&user, project_id));
        warm.push(t1.elapsed());
        let hit = hit.unwrap().unwrap();
        assert_eq!(hit.version, current.unwrap().version, "a hit");
        assert_eq!(hit.pack, pack);
    }
    cold.sort();
    warm.sort();
    let pct = |v: &[Duration], q: usize| v[(v.len() * q / 100).min(v.len() - 1)];
    println!(
        "context assembly over {runs} runs, {} pack bytes: cold p50 {:?} p90 {:?}; warm p50 {:?} p90 {:?}",
        body["cached"]["bytes"],
        pct(&cold, 50),
        pct(&cold, 90),
        pct(&warm, 50),
        pct(&warm, 90)
    );
}
