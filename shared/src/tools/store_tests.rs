//! The tools over a real store — the entity store's in-memory twin (its
//! contract suite keeps it equal to the DynamoDB one): what a tool call
//! writes is what the next call reads, for the caller's user only.

use super::*;
use crate::entities::store::MemoryEntityStore;
use crate::ids::ProjectId;
use crate::message::FunctionCall;

fn registry() -> ToolRegistry {
    ToolRegistry::new(EntityService::new(MemoryEntityStore::new()))
}

async fn run(reg: &ToolRegistry, user: &str, scope: &ToolScope, name: &str, args: Value) -> (bool, Value) {
    let ctx = ToolContext { user: UserId::parse(user).unwrap(), scope: scope.clone(), zone: None };
    let call = ToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: args.to_string() },
    };
    let out = reg.execute(&ctx, &call).await;
    (out.ok, serde_json::from_str(&out.content).expect("tool content is JSON"))
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_else(|| panic!("not an error: {v}"))
}

/// A project made by `create_project`, as its scope.
async fn project(reg: &ToolRegistry, user: &str, args: Value) -> (ToolScope, Value) {
    let (ok, v) = run(reg, user, &ToolScope::Global, "create_project", args).await;
    assert!(ok, "create_project: {v}");
    let id = v["project"]["id"].as_str().or_else(|| v["id"].as_str()).unwrap_or_else(|| panic!("no id in {v}"));
    (ToolScope::Project { project: ProjectId::parse(id).unwrap() }, v)
}

#[tokio::test]
async fn a_project_created_with_its_first_tasks_reads_back_with_them() {
    let reg = registry();
    let (scope, _) = project(&reg, "alice", json!({"name": "Alpha", "tasks": ["Write the spec"]})).await;
    let (ok, projects) = run(&reg, "alice", &ToolScope::Global, "list_projects", json!({})).await;
    assert!(ok);
    assert!(projects.to_string().contains("Alpha"), "{projects}");
    let (ok, tasks) = run(&reg, "alice", &scope, "list_entities", json!({"kind": "task"})).await;
    assert!(ok, "{tasks}");
    assert_eq!(tasks["items"].as_array().map(Vec::len), Some(1), "{tasks}");
    assert!(tasks.to_string().contains("Write the spec"));
}

#[tokio::test]
async fn another_users_project_is_not_there() {
    let reg = registry();
    let (scope, _) = project(&reg, "alice", json!({"name": "Private"})).await;
    let ToolScope::Project { project } = &scope else { unreachable!() };
    let (ok, projects) = run(&reg, "bob", &ToolScope::Global, "list_projects", json!({})).await;
    assert!(ok);
    assert!(!projects.to_string().contains("Private"), "{projects}");
    let (ok, got) =
        run(&reg, "bob", &ToolScope::Global, "get_project", json!({"project_id": project.to_string()})).await;
    assert!(!ok);
    assert_eq!(code(&got), "project_not_found", "{got}");
    // Nor can bob write into it through a scope that names it.
    let (ok, v) = run(&reg, "bob", &scope, "create_task", json!({"title": "sneaky"})).await;
    assert!(!ok, "{v}");
    let (_, tasks) = run(&reg, "alice", &scope, "list_entities", json!({"kind": "task"})).await;
    assert_eq!(tasks["items"].as_array().map(Vec::len), Some(0), "{tasks}");
}

#[tokio::test]
async fn an_update_with_a_stale_version_changes_nothing() {
    let reg = registry();
    let (scope, _) = project(&reg, "alice", json!({"name": "Beta"})).await;
    let (ok, task) = run(&reg, "alice", &scope, "create_task", json!({"title": "first"})).await;
    assert!(ok, "{task}");
    let id = task["entity"]["id"].as_str().or_else(|| task["id"].as_str()).expect("task id").to_string();
    let update = |title: &str, version: u64| json!({"kind": "task", "id": id, "changes": {"title": title}, "expected_version": version});
    let (ok, v) = run(&reg, "alice", &scope, "update_entity", update("second", 1)).await;
    assert!(ok, "{v}");
    let (ok, v) = run(&reg, "alice", &scope, "update_entity", update("stale", 1)).await;
    assert!(!ok);
    assert_eq!(code(&v), "version_conflict", "{v}");
    let (_, got) = run(&reg, "alice", &scope, "get_entity", json!({"kind": "task", "id": id})).await;
    assert!(got.to_string().contains("second") && !got.to_string().contains("stale"), "{got}");
}

#[tokio::test]
async fn a_deleted_entity_is_gone_and_a_second_delete_says_so() {
    let reg = registry();
    let (scope, _) = project(&reg, "alice", json!({"name": "Gamma"})).await;
    let (_, goal) = run(&reg, "alice", &scope, "create_goal", json!({"name": "ship"})).await;
    let id = goal["entity"]["id"].as_str().or_else(|| goal["id"].as_str()).expect("goal id").to_string();
    let (ok, v) = run(&reg, "alice", &scope, "delete_entity", json!({"kind": "goal", "id": id})).await;
    assert!(ok, "{v}");
    let (ok, v) = run(&reg, "alice", &scope, "get_entity", json!({"kind": "goal", "id": id})).await;
    assert!(!ok);
    assert_eq!(code(&v), "entity_not_found", "{v}");
    let (ok, v) = run(&reg, "alice", &scope, "delete_entity", json!({"kind": "goal", "id": id})).await;
    assert!(!ok);
    assert_eq!(code(&v), "entity_not_found", "{v}");
}

#[tokio::test]
async fn documents_form_a_tree_that_refuses_a_missing_parent_and_a_cycle() {
    let reg = registry();
    let (scope, _) = project(&reg, "alice", json!({"name": "Delta"})).await;
    let doc = |title: &str, parent: Option<&str>| json!({"title": title, "content": "", "parent_id": parent});
    let (ok, a) = run(&reg, "alice", &scope, "create_document", doc("A", None)).await;
    assert!(ok, "{a}");
    let a_id = a["entity"]["id"].as_str().or_else(|| a["id"].as_str()).expect("doc id").to_string();
    let (ok, b) = run(&reg, "alice", &scope, "create_document", doc("B", Some(&a_id))).await;
    assert!(ok, "{b}");
    let b_id = b["entity"]["id"].as_str().or_else(|| b["id"].as_str()).expect("doc id").to_string();
    let missing = crate::ids::EntityId::new().to_string();
    let (ok, v) = run(&reg, "alice", &scope, "create_document", doc("C", Some(&missing))).await;
    assert!(!ok);
    assert_eq!(code(&v), "parent_not_found", "{v}");
    let (ok, v) =
        run(&reg, "alice", &scope, "move_document", json!({"document_id": a_id, "new_parent_id": b_id})).await;
    assert!(!ok, "moving a document under its own child must fail: {v}");
    let (ok, tree) = run(&reg, "alice", &scope, "get_doc_structure", json!({})).await;
    assert!(ok);
    // Beside the project's context document, A is a root with B under it.
    let root = tree["root"].as_array().expect("a root");
    let a = root.iter().find(|n| n["id"] == a_id.as_str()).unwrap_or_else(|| panic!("A is not a root: {tree}"));
    assert_eq!(a["children"][0]["id"], b_id.as_str(), "{tree}");
    assert_eq!(a["children"][0]["children"], json!([]), "{tree}");
}

/// Creates an entity with `tool` in `scope`, returning its id.
async fn made(reg: &ToolRegistry, scope: &ToolScope, tool: &str, args: Value) -> String {
    let (ok, v) = run(reg, "alice", scope, tool, args).await;
    assert!(ok, "{tool}: {v}");
    v["id"].as_str().unwrap().to_string()
}

async fn link(reg: &ToolRegistry, scope: &ToolScope, from: (&str, &str), relation: &str, to: (&str, &str)) {
    let args = json!({"from_kind": from.0, "from_id": from.1, "relation": relation, "to_kind": to.0, "to_id": to.1});
    let (ok, v) = run(reg, "alice", scope, "link_entities", args).await;
    assert!(ok, "{v}");
}

#[tokio::test]
async fn relationships_and_linked_entities_name_both_directions_to_depth_two() {
    let reg = registry();
    let (scope, _) = project(&reg, "alice", json!({"name": "Launch"})).await;
    let goal = made(&reg, &scope, "create_goal", json!({"name": "Ship v2"})).await;
    let task = made(&reg, &scope, "create_task", json!({"title": "Write the post"})).await;
    let risk = made(&reg, &scope, "create_risk", json!({"title": "Late review"})).await;
    let lone = made(&reg, &scope, "create_task", json!({"title": "Alone"})).await;
    link(&reg, &scope, ("task", &task), "supports", ("goal", &goal)).await;
    link(&reg, &scope, ("risk", &risk), "blocks", ("task", &task)).await;

    let (ok, v) = run(&reg, "alice", &scope, "get_entity_relationships", json!({"entity_id": task})).await;
    assert!(ok, "{v}");
    assert_eq!(v["entity"]["name"], "Write the post");
    let mut seen: Vec<(String, String, String, String)> = v["linked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap().to_string();
            (s("kind"), s("name"), s("relation"), s("direction"))
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("goal".into(), "Ship v2".into(), "supports".into(), "out".into()),
            ("risk".into(), "Late review".into(), "blocks".into(), "in".into())
        ]
    );

    // Depth 2 from the goal reaches the risk through the task; a relation filter narrows.
    let (ok, v) = run(&reg, "alice", &scope, "get_linked_entities", json!({"entity_id": goal, "depth": 2})).await;
    assert!(ok, "{v}");
    let far = v["linked"].as_array().unwrap().iter().find(|l| l["depth"] == 2).expect("a second-level link");
    assert_eq!((far["name"].as_str(), far["via"].as_str()), (Some("Late review"), Some(task.as_str())));
    let args = json!({"entity_id": goal, "depth": 2, "relation": "supports"});
    let (_, v) = run(&reg, "alice", &scope, "get_linked_entities", args).await;
    assert_eq!(v["linked"].as_array().unwrap().len(), 1, "{v}");
    let (ok, v) = run(&reg, "alice", &scope, "get_linked_entities", json!({"entity_id": goal, "depth": 3})).await;
    assert!(!ok && code(&v) == "invalid_arguments", "{v}");

    // No links: an empty list, not an error; a missing id and another user's read alike.
    let (ok, v) = run(&reg, "alice", &scope, "get_entity_relationships", json!({"entity_id": lone})).await;
    assert!(ok && v["linked"] == json!([]), "{v}");
    let missing = crate::ids::EntityId::new().to_string();
    let (ok, v) = run(&reg, "alice", &scope, "get_entity_relationships", json!({"entity_id": missing})).await;
    assert!(!ok && code(&v) == "entity_not_found", "{v}");
    let (bob_scope, _) = project(&reg, "bob", json!({"name": "Bob's"})).await;
    let (ok, v) = run(&reg, "bob", &bob_scope, "get_linked_entities", json!({"entity_id": task})).await;
    assert!(!ok && code(&v) == "entity_not_found", "{v}");
    let (ok, v) = run(&reg, "bob", &scope, "get_linked_entities", json!({"entity_id": task})).await;
    assert!(!ok && code(&v) == "project_not_found", "another user's project: {v}");
}

#[tokio::test]
async fn field_info_describes_each_kind() {
    let reg = registry();
    let (ok, v) = run(&reg, "alice", &ToolScope::Global, "get_field_info", json!({"kind": "task"})).await;
    assert!(ok, "{v}");
    assert_eq!(v["schema"], "TaskFields");
    assert_eq!(v["fields"]["required"], json!(["title"]));
    let (ok, v) = run(&reg, "alice", &ToolScope::Global, "get_field_info", json!({"kind": "spaceship"})).await;
    assert!(!ok && code(&v) == "invalid_arguments", "{v}");
}

#[tokio::test]
async fn reorganize_project_moves_and_relinks_at_once_and_names_every_change() {
    let reg = registry();
    let (scope, _) = project(&reg, "alice", json!({"name": "Launch"})).await;
    let doc = |title: &str| json!({"title": title, "content": ""});
    let specs = made(&reg, &scope, "create_document", doc("Specs")).await;
    let notes = made(&reg, &scope, "create_document", doc("API notes")).await;
    let goal = made(&reg, &scope, "create_goal", json!({"name": "Ship"})).await;
    let (t1, t2) = (
        made(&reg, &scope, "create_task", json!({"title": "Draft"})).await,
        made(&reg, &scope, "create_task", json!({"title": "Review"})).await,
    );
    link(&reg, &scope, ("task", &t1), "supports", ("goal", &goal)).await;
    let edge =
        |t: &str| json!({"from_kind": "task", "from_id": t, "relation": "supports", "to_kind": "goal", "to_id": goal});
    let ctx = ToolContext { user: UserId::parse("alice").unwrap(), scope: scope.clone(), zone: None };
    let call = |args: Value| ToolCall {
        id: "call_r".into(),
        kind: "function".into(),
        function: FunctionCall { name: "reorganize_project".into(), arguments: args.to_string() },
    };
    let names = |out: &ToolOutcome| -> Vec<(String, crate::sse::OperationStatus)> {
        out.operations
            .iter()
            .filter_map(|e| match e {
                crate::sse::StreamEvent::Operation { entity_name, status, .. } => Some((entity_name.clone(), *status)),
                _ => None,
            })
            .collect()
    };
    let (_, tree) = run(&reg, "alice", &scope, "get_doc_structure", json!({})).await;
    let version = tree["version"].as_u64().unwrap();
    let batch = json!({
        "expected_version": version,
        "moves": [{"document_id": notes, "new_parent_id": specs}],
        "unlink": [edge(&t1)],
        "link": [edge(&t2)],
    });

    // Stale: refused whole, each named step shown failed, no patch.
    let mut stale = batch.clone();
    stale["expected_version"] = json!(version - 1);
    let out = reg.execute(&ctx, &call(stale)).await;
    assert_eq!(out.error_code.as_deref(), Some("version_conflict"), "{}", out.content);
    assert!(out.patches.is_empty());
    use crate::sse::OperationStatus::{Error, Start, Success};
    assert!(names(&out).iter().all(|(_, s)| matches!(s, Start | Error)), "{:?}", names(&out));

    // Current: every change lands in one patch of one version; one operation each.
    let out = reg.execute(&ctx, &call(batch)).await;
    assert!(out.ok, "{}", out.content);
    let ended: Vec<String> = names(&out).into_iter().filter(|(_, s)| *s == Success).map(|(n, _)| n).collect();
    assert_eq!(ended, ["API notes under Specs", "Draft supports Ship", "Review supports Ship"]);
    assert_eq!(out.patches.len(), 1);
    let p = &out.patches[0];
    assert_eq!((p.version, p.changes.len(), p.doc_structure.is_some()), (version + 1, 2, true), "{p:?}");
    let (_, edges) = run(&reg, "alice", &scope, "list_edges", json!({})).await;
    assert_eq!(edges["items"].as_array().unwrap().len(), 1, "{edges}");
    assert_eq!(edges["items"][0]["from"]["id"], t2.as_str());

    // Past one transaction: refused by the limit, saying it; nothing written.
    let many: Vec<Value> = (0..5).map(|_| edge(&t1)).collect();
    let out = reg.execute(&ctx, &call(json!({"link": many, "moves": null}))).await;
    assert_eq!(out.error_code.as_deref(), Some("too_many_changes"), "{}", out.content);
    assert!(out.content.contains("at most 4"), "{}", out.content);
    let (_, after) = run(&reg, "alice", &scope, "list_edges", json!({})).await;
    assert_eq!(after, edges);
}
