//! The dev-only events (gap 3 of the old flow): `telemetry` (tool selection,
//! a call outside it, each tool call's time) and `debug_context` (what the
//! context builder kept and dropped, where the tokens went) are sent only
//! with `DEV_EVENTS` on, and the deployment template never turns it on.

use serde_json::json;
use shared::entities::store::DynamoEntityStore;
use shared::entities::{EntityService, NewProject};
use shared::ids::{ProjectId, UserId};
use shared::sse::{DebugContext, StreamEvent, Telemetry};
use tests::{Reply, TestApp, Turn};

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

async fn project(t: &TestApp, u: &str) -> ProjectId {
    let svc = EntityService::new(DynamoEntityStore::new(t.dynamo.clone(), t.table.clone()));
    let new = NewProject {
        name: "Launch".into(),
        description: None,
        state: Default::default(),
        context: Some("Ship it.".into()),
    };
    svc.create_project(&user(u), new).await.unwrap().data.project.id
}

/// Two turns in a project: a plain answer, then one that calls
/// `create_task` (offered) and `list_projects` (not offered in a project).
async fn two_turns(t: &TestApp) -> (Turn, Turn) {
    let p = project(t, "alice").await;
    let focus = json!({"projectId": p.to_string()});
    t.llm.push(Reply::text(&["Hello."]));
    let first = t.turn("alice", json!({"message": "hi", "context_type": "project", "projectFocus": focus})).await;
    t.llm.push(Reply::tool_calls(&[("create_task", json!({"title": "Write the post"})), ("list_projects", json!({}))]));
    t.llm.push(Reply::text(&["Done."]));
    let body = json!({"message": "add a task", "session_id": first.session_id(), "context_type": "project", "projectFocus": focus});
    let second = t.turn("alice", body).await;
    assert_eq!(second.error_code(), None, "{:?}", second.events);
    (first, second)
}

fn debug_context(turn: &Turn) -> &DebugContext {
    turn.events
        .iter()
        .find_map(|e| match e {
            StreamEvent::DebugContext(d) => Some(d),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no debug_context: {:?}", turn.kinds()))
}

fn telemetry(turn: &Turn) -> Vec<&Telemetry> {
    turn.events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Telemetry(m) => Some(m),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn telemetry_and_debug_context_are_sent_with_the_switch_on() {
    let t = TestApp::with_config(|c| c.dev_events = true).await;
    let (first, second) = two_turns(&t).await;

    // debug_context right after context_usage; what was kept, by seq.
    let kinds = second.kinds();
    let usage = kinds.iter().position(|k| *k == "context_usage").unwrap();
    assert_eq!(kinds[usage + 1], "debug_context", "{kinds:?}");
    assert_eq!(debug_context(&first).kept, vec![1]);
    let d = debug_context(&second);
    assert_eq!(d.kept, vec![1, 2, 3], "the first turn's two messages and this one");
    assert!(d.dropped.is_empty() && d.summarized.is_empty() && !d.summary_used && d.within_budget);
    assert_eq!(d.pack_scope.as_deref(), Some("project"));
    let k = d.tokens;
    assert!(k.pack > 0 && k.pack < k.system_prompt, "{k:?}");
    assert!(k.history > 0 && k.current > 0 && k.tools > 0, "{k:?}");
    let parts = k.system_prompt + k.history + k.current + k.tools + shared::context::REPLY_PRIMING;
    assert_eq!(k.counted_total, parts, "{k:?}");
    let reported = second.events.iter().find_map(|e| match e {
        StreamEvent::ContextUsage(u) => Some(u.tokens_used),
        _ => None,
    });
    assert_eq!(Some(k.model_total), reported);

    // The tool selection, then per call its time before its result; the
    // call outside the offered set is a miss.
    let measured = telemetry(&second);
    match measured[0] {
        Telemetry::ToolSelection { scope, offered, .. } => {
            assert_eq!(scope, "project");
            assert!(offered.contains(&"create_task".to_string()) && !offered.contains(&"list_projects".to_string()));
        }
        m => panic!("first the selection: {m:?}"),
    }
    let executed: Vec<_> = measured
        .iter()
        .filter_map(|m| match m {
            Telemetry::ToolExecution { tool, ok, .. } => Some((tool.as_str(), *ok)),
            _ => None,
        })
        .collect();
    assert_eq!(executed, vec![("create_task", true), ("list_projects", true)]);
    assert!(measured.iter().any(|m| matches!(m, Telemetry::ToolSelectionMiss { tool } if tool == "list_projects")));
    let timing_of = |call: &str| {
        second.events.iter().position(|e| matches!(e, StreamEvent::Telemetry(Telemetry::ToolExecution { tool_call_id, .. }) if tool_call_id == call)).unwrap()
    };
    let result_of = |call: &str| {
        second
            .events
            .iter()
            .position(|e| matches!(e, StreamEvent::ToolResult { tool_call_id, .. } if tool_call_id == call))
            .unwrap()
    };
    for call in ["call_0_create_task", "call_1_list_projects"] {
        assert!(timing_of(call) < result_of(call), "{call}: {kinds:?}");
    }
    assert_eq!(kinds.last(), Some(&"done"));
}

#[tokio::test]
async fn dev_events_are_off_by_default() {
    let t = TestApp::with_config(|c| assert!(!c.dev_events, "DEV_EVENTS is off unless set")).await;
    let (first, second) = two_turns(&t).await;
    for turn in [first, second] {
        let dev: Vec<_> = turn.events.iter().filter(|e| e.dev_only()).collect();
        assert!(dev.is_empty(), "{dev:?}");
        assert!(!turn.kinds().contains(&"telemetry") && !turn.kinds().contains(&"debug_context"));
    }
}

/// The template's functions never switch the dev events on (production
/// settings): no `DEV_EVENTS` variable, in any function's environment.
#[test]
fn the_deployment_template_never_sets_dev_events() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/template.yaml");
    let template = std::fs::read_to_string(&path).expect("infra/template.yaml");
    let set: Vec<&str> =
        template.lines().filter(|l| !l.trim_start().starts_with('#') && l.contains("DEV_EVENTS")).collect();
    assert!(set.is_empty(), "the template sets DEV_EVENTS: {set:?}");
    assert!(template.contains("DEV_EVENTS"), "the template's comment says why it is not set");
}
