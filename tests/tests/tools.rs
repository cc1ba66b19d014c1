//! The chat's tool registry against DynamoDB Local: schemas, gating by scope,
//! and calls run through the real entities service.

use serde_json::{json, Value};
use shared::entities::store::DynamoEntityStore;
use shared::entities::{Change, EntityKind, EntityService, NewProject, PageRequest};
use shared::ids::{EntityId, ProjectId, UserId};
use shared::message::{FunctionCall, ToolCall};
use shared::session::ContextType;
use shared::sse::{OperationAction, OperationStatus, StreamEvent};
use shared::tools::{ToolContext, ToolName, ToolOutcome, ToolRegistry, ToolScope};
use std::collections::HashSet;
use tests::{dynamo_client, fresh_table};

struct Fixture {
    svc: EntityService,
    tools: ToolRegistry,
}

async fn fixture() -> Fixture {
    let dynamo = dynamo_client().await;
    let table = fresh_table(&dynamo).await;
    let svc = EntityService::new(DynamoEntityStore::new(dynamo, table));
    Fixture { tools: ToolRegistry::new(svc.clone()), svc }
}

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

/// A project of `u`: its id and its context document's id.
async fn project(f: &Fixture, u: &str, name: &str) -> (ProjectId, EntityId) {
    let new = NewProject { name: name.into(), description: None, state: Default::default(), context: None };
    let w = f.svc.create_project(&user(u), new).await.unwrap();
    (w.data.project.id, w.data.project.context_document_id)
}

fn ctx(u: &str, scope: ToolScope) -> ToolContext {
    ToolContext { user: user(u), scope, zone: None }
}

fn in_project(u: &str, p: &ProjectId) -> ToolContext {
    ctx(u, ToolScope::Project { project: p.clone() })
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: format!("call_{name}"),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: arguments.into() },
    }
}

async fn run(f: &Fixture, c: &ToolContext, name: &str, args: Value) -> ToolOutcome {
    f.tools.execute(c, &call(name, &args.to_string())).await
}

fn content(o: &ToolOutcome) -> Value {
    serde_json::from_str(&o.content).expect("content is JSON")
}

/// (action, entity_type, entity_name, status) of each operation event.
fn ops(o: &ToolOutcome) -> Vec<(OperationAction, String, String, OperationStatus)> {
    o.operations
        .iter()
        .map(|e| match e {
            StreamEvent::Operation { action, entity_type, entity_name, status, .. } => {
                (*action, entity_type.clone(), entity_name.clone(), *status)
            }
            other => panic!("not an operation: {other:?}"),
        })
        .collect()
}

fn names(tools: &[ToolName]) -> Vec<&'static str> {
    tools.iter().map(|t| t.as_str()).collect()
}

#[test]
fn every_tool_has_a_unique_name_and_an_object_schema_the_model_can_take() {
    let mut seen = HashSet::new();
    for &tool in ToolName::ALL {
        assert!(seen.insert(tool.as_str()), "duplicate tool name {}", tool.as_str());
        assert_eq!(ToolName::parse(tool.as_str()), Some(tool));
        let def = tool.definition();
        assert_eq!(def["type"], "function");
        assert_eq!(def["function"]["name"], tool.as_str());
        assert!(!def["function"]["description"].as_str().unwrap().is_empty());
        let p = &def["function"]["parameters"];
        assert_eq!(p["type"], "object", "{}: {p}", tool.as_str());
        // deny_unknown_fields is in the schema too: the model is told.
        assert_eq!(p["additionalProperties"], false, "{}: {p}", tool.as_str());
        let text = p.to_string();
        assert!(!text.contains("$ref") && !text.contains("$schema"), "{}: not self-contained: {p}", tool.as_str());
        let props = p["properties"].as_object().map(|o| o.keys().cloned().collect::<HashSet<_>>()).unwrap_or_default();
        for r in p["required"].as_array().into_iter().flatten() {
            assert!(props.contains(r.as_str().unwrap()), "{}: required {r} is not a property", tool.as_str());
        }
    }
    let create_task = ToolName::CreateTask.parameters();
    assert_eq!(create_task["required"], json!(["title"]));
    assert_eq!(create_task["properties"]["priority"]["type"], json!("integer"));
    let kinds = &ToolName::GetEntity.parameters()["properties"]["kind"]["enum"];
    assert_eq!(kinds.as_array().unwrap().len(), EntityKind::ALL.len());
}

/// Every definition goes out on every request; on a local model each token
/// of it is computed before the first token of the answer. Nothing in them
/// may be noise: no `"default": null`, no `"null"` type, no integer format.
#[test]
fn tool_definitions_carry_no_noise() {
    // What the project scope sends (18 tools) stays well under a small
    // model's window; it was 10 662 bytes before the noise went, 9 836
    // after, 10 929 with the three utility tools (issue 28) in 24 tools;
    // `reorganize_project` (issue 44) kept to fit; 11 450 once the dates
    // went as text with their rule (issue 40: no epoch numbers invented).
    // The project head is computed once and kept by the local model server
    // (warm/project.json), so the bound is the window's, not a first turn's.
    let project = ToolScope::Project { project: ProjectId::new() };
    let bytes: usize = project.offered().iter().map(|t| t.definition().to_string().len()).sum();
    println!("project-scope tool definitions: {bytes} bytes");
    assert!(bytes < 11_600, "project-scope tool definitions are {bytes} bytes");
    for &tool in ToolName::ALL {
        let text = tool.definition().to_string();
        for noise in [r#""default":null"#, r#""null""#, r#""format""#] {
            assert!(!text.contains(noise), "{}: {noise} in {text}", tool.as_str());
        }
    }
}

#[test]
fn scopes_offer_small_sets_and_allow_what_their_project_permits() {
    let p = ProjectId::new();
    let e = EntityId::new();
    let global = ToolScope::from_context(ContextType::Global, None, None);
    let project = ToolScope::from_context(ContextType::Project, Some(p.clone()), None);
    let entity =
        ToolScope::from_context(ContextType::Entity, Some(p.clone()), Some((Some(EntityKind::Task), e.clone())));
    assert_eq!(global, ToolScope::Global);
    assert_eq!(project, ToolScope::Project { project: p.clone() });
    // An entity context without its entity is a project turn.
    assert_eq!(ToolScope::from_context(ContextType::Entity, Some(p.clone()), None), project);

    assert_eq!(
        names(&global.offered()),
        [
            "list_projects",
            "search_workspace",
            "get_project",
            "create_project",
            "update_project",
            "get_field_info",
            "get_buildos_overview"
        ]
    );
    let in_project = names(&project.offered());
    for t in ["create_task", "create_document", "link_entities", "read_document", "update_entity"] {
        assert!(in_project.contains(&t), "project scope lacks {t}");
    }
    // Not offered in a project, still allowed: the pack has the tree and the project.
    for t in [ToolName::GetDocStructure, ToolName::GetDocumentMetadata, ToolName::UpdateProject, ToolName::GetEntity] {
        assert!(!in_project.contains(&t.as_str()) && project.allows(t), "{t:?}");
    }
    assert!(!in_project.contains(&"create_project") && !in_project.contains(&"list_projects"));
    assert_eq!(
        names(&entity.offered()),
        [
            "get_entity",
            "update_entity",
            "list_edges",
            "link_entities",
            "unlink_entities",
            "search_project",
            "get_field_info",
            "get_entity_relationships",
            "get_linked_entities"
        ]
    );

    for scope in [&global, &project, &entity] {
        let offered = scope.offered();
        assert!(offered.iter().all(|t| scope.allows(*t)));
        let defs = shared::tools::ToolName::ALL.len();
        assert!(offered.len() < defs);
        let unique: HashSet<_> = offered.iter().collect();
        assert_eq!(unique.len(), offered.len());
    }
    assert!(!global.allows(ToolName::CreateTask));
    // The stream's view of a session: focus metadata from the client.
    let focus = json!({ "projectId": p.to_string(), "entityType": "task" });
    assert_eq!(ToolScope::from_focus(ContextType::Entity, Some(e.as_str()), Some(&focus)), entity);
    assert_eq!(ToolScope::from_focus(ContextType::Project, None, Some(&focus)), project);
    assert_eq!(ToolScope::from_focus(ContextType::Project, None, Some(&json!({ "projectId": "a#b" }))), global);
    assert!(entity.allows(ToolName::CreateTask) && entity.allows(ToolName::CreateProject));
}

#[tokio::test]
async fn definitions_are_the_offered_tools() {
    let f = fixture().await;
    let (p, _) = project(&f, "alice", "Launch").await;
    let scope = ToolScope::Project { project: p };
    let defs = f.tools.definitions(&scope);
    let def_names: Vec<_> = defs.iter().map(|d| d["function"]["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(def_names, names(&scope.offered()));
    // The stream runs calls on spawned tasks: the call must be Send.
    fn assert_send<T: Send>(t: T) -> T {
        t
    }
    let c = ToolContext { user: user("alice"), scope, zone: None };
    let o = assert_send(f.tools.execute(&c, &call("get_doc_structure", "{}"))).await;
    assert!(o.ok, "{}", o.content);
}

#[tokio::test]
async fn a_task_created_and_linked_to_a_goal_through_tools_is_in_the_ontology() {
    let f = fixture().await;
    let (p, _) = project(&f, "alice", "Launch").await;
    let c = in_project("alice", &p);

    let goal = run(&f, &c, "create_goal", json!({ "name": "Ship v2" })).await;
    assert!(goal.ok, "{}", goal.content);
    let goal_id = content(&goal)["id"].as_str().unwrap().to_string();

    let task = run(&f, &c, "create_task", json!({ "title": "Write the spec", "priority": 2, "state": null })).await;
    assert!(task.ok, "{}", task.content);
    let task_id = content(&task)["id"].as_str().unwrap().to_string();
    assert_eq!(
        ops(&task),
        [
            (OperationAction::Create, "task".into(), "Write the spec".into(), OperationStatus::Start),
            (OperationAction::Create, "task".into(), "Write the spec".into(), OperationStatus::Success),
        ]
    );
    let StreamEvent::Operation { entity_id, .. } = &task.operations[1] else { unreachable!() };
    assert_eq!(entity_id.as_deref(), Some(task_id.as_str()));
    // The patch is the service's, for this project, announcing the task.
    assert_eq!(task.patches.len(), 1);
    assert_eq!(task.patches[0].project_id, p);
    assert!(matches!(&task.patches[0].changes[..], [Change::Created { id, .. }] if *id == task_id));
    assert!(task.preview.chars().count() <= shared::tools::PREVIEW_CHARS);
    let kinds: Vec<_> = task.events().iter().map(|e| e.kind()).collect();
    assert_eq!(kinds, ["operation", "operation", "entity_patch"]);
    let StreamEvent::EntityPatch { patch } = &task.events()[2] else { unreachable!() };
    assert_eq!(patch, &task.patches[0], "sent exactly as the service returned it");

    let link = run(
        &f,
        &c,
        "link_entities",
        json!({ "from_kind": "task", "from_id": task_id, "relation": "supports", "to_kind": "goal", "to_id": goal_id }),
    )
    .await;
    assert!(link.ok, "{}", link.content);
    assert_eq!(link.patches.len(), 1);
    assert!(matches!(&link.patches[0].changes[..], [Change::Linked { .. }]));
    let link_ops = ops(&link);
    assert_eq!(link_ops[0].2, "Write the spec supports Ship v2");
    assert_eq!(link_ops.iter().map(|o| o.3).collect::<Vec<_>>(), [OperationStatus::Start, OperationStatus::Success]);

    // Visible through the service, as the entities API would show it.
    let alice = user("alice");
    let tid = EntityId::parse(task_id.clone()).unwrap();
    let stored = f.svc.get(&alice, &p, EntityKind::Task, &tid).await.unwrap();
    assert_eq!(stored.fields.name(), "Write the spec");
    let edges = f.svc.edges(&alice, &p, Some(&tid)).await.unwrap();
    assert_eq!(edges.len(), 1);
    assert_eq!((edges[0].relation.as_str(), edges[0].to.id.as_str()), ("supports", goal_id.as_str()));

    // An update names the entity as it is after the write.
    let upd =
        run(&f, &c, "update_entity", json!({ "kind": "task", "id": task_id, "changes": { "title": "Spec v2" } })).await;
    assert!(upd.ok, "{}", upd.content);
    assert_eq!(ops(&upd)[1], (OperationAction::Update, "task".into(), "Spec v2".into(), OperationStatus::Success));

    // A delete names what it removed, resolved before it was gone.
    let del = run(&f, &c, "delete_entity", json!({ "kind": "goal", "id": goal_id })).await;
    assert!(del.ok, "{}", del.content);
    assert_eq!(ops(&del)[0], (OperationAction::Delete, "goal".into(), "Ship v2".into(), OperationStatus::Start));
    assert!(f.svc.edges(&alice, &p, Some(&tid)).await.unwrap().is_empty());
}

#[tokio::test]
async fn documents_are_created_under_a_parent_read_moved_and_named_by_metadata() {
    let f = fixture().await;
    let (p, context_doc) = project(&f, "alice", "Launch").await;
    let c = in_project("alice", &p);

    let doc = run(
        &f,
        &c,
        "create_document",
        json!({ "title": "Competitor scan", "content": "# Findings", "parent_id": context_doc.to_string() }),
    )
    .await;
    assert!(doc.ok, "{}", doc.content);
    let doc_id = content(&doc)["id"].as_str().unwrap().to_string();
    let tree = doc.patches[0].doc_structure.as_ref().expect("a tree change carries the tree");
    assert_eq!(tree.root[0].children[0].id.as_str(), doc_id);

    let read = run(&f, &c, "read_document", json!({ "document_id": doc_id })).await;
    assert_eq!(content(&read)["content"], "# Findings");
    assert_eq!(
        ops(&read)[1],
        (OperationAction::Read, "document".into(), "Competitor scan".into(), OperationStatus::Success)
    );

    let meta = run(&f, &c, "get_document_metadata", json!({ "document_ids": [doc_id, context_doc.to_string()] })).await;
    assert!(meta.ok, "{}", meta.content);
    let docs = content(&meta)["documents"].as_array().unwrap().clone();
    assert_eq!(docs.len(), 2);
    assert!(docs.iter().all(|d| d.get("content").is_none()), "metadata never carries content");

    let mv = run(&f, &c, "move_document", json!({ "document_id": doc_id })).await;
    assert!(mv.ok, "{}", mv.content);
    assert_eq!(ops(&mv)[0].2, "Competitor scan");
    let tree = f.svc.doc_structure(&user("alice"), &p).await.unwrap();
    assert_eq!(tree.root.len(), 2, "moved to the root");

    let structure = run(&f, &c, "get_doc_structure", json!({})).await;
    assert!(structure.ok && structure.operations.is_empty());
    // "" is how models send "no arguments".
    let empty = f.tools.execute(&c, &call("get_doc_structure", "")).await;
    assert!(empty.ok, "{}", empty.content);
}

#[tokio::test]
async fn invalid_arguments_are_a_readable_error_and_write_nothing() {
    let f = fixture().await;
    let (p, _) = project(&f, "alice", "Launch").await;
    let c = in_project("alice", &p);
    let before = f.svc.get_project(&user("alice"), &p).await.unwrap().version;

    let cases = [
        ("create_task", r#"{"title": "unterminated"#.to_string(), "not valid JSON"),
        ("create_task", r#"["title"]"#.to_string(), "JSON object"),
        ("create_task", json!({ "title": "x", "owner": "bob" }).to_string(), "unknown field"),
        ("create_task", json!({ "title": 7 }).to_string(), "invalid type"),
        ("create_task", json!({ "description": "no title" }).to_string(), "missing field"),
        ("create_task", json!({ "title": "x", "state": "someday" }).to_string(), "unknown variant"),
        ("get_entity", json!({ "kind": "widget", "id": "x" }).to_string(), "unknown variant"),
    ];
    for (name, args, says) in cases {
        let o = f.tools.execute(&c, &call(name, &args)).await;
        assert!(!o.ok, "{name} {args} succeeded");
        assert_eq!(o.error_code.as_deref(), Some("invalid_arguments"), "{args}: {}", o.content);
        let message = content(&o)["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(says), "{args}: {message}");
        assert!(o.operations.is_empty() && o.patches.is_empty());
    }
    // Values the service refuses are readable too (and write nothing).
    let o = run(&f, &c, "create_task", json!({ "title": "x", "priority": 9 })).await;
    assert_eq!(o.error_code.as_deref(), Some("invalid_value"), "{}", o.content);
    assert_eq!(ops(&o).last().unwrap().3, OperationStatus::Error);

    assert_eq!(f.svc.get_project(&user("alice"), &p).await.unwrap().version, before);
    let tasks = f.svc.list(&user("alice"), &p, EntityKind::Task, PageRequest::default()).await.unwrap();
    assert!(tasks.items.is_empty());
}

#[tokio::test]
async fn a_missing_entity_or_tool_is_an_error_result() {
    let f = fixture().await;
    let (p, _) = project(&f, "alice", "Launch").await;
    let c = in_project("alice", &p);
    let ghost = EntityId::new().to_string();

    let o = run(&f, &c, "get_entity", json!({ "kind": "task", "id": ghost })).await;
    assert!(!o.ok);
    assert_eq!(o.error_code.as_deref(), Some("entity_not_found"));
    assert_eq!(content(&o)["error"]["message"], "entity not found");
    assert_eq!(
        ops(&o),
        [
            (OperationAction::Read, "task".into(), ghost.clone(), OperationStatus::Start),
            (OperationAction::Read, "task".into(), ghost.clone(), OperationStatus::Error),
        ]
    );
    let o = run(&f, &c, "update_entity", json!({ "kind": "task", "id": ghost, "changes": { "title": "x" } })).await;
    assert_eq!(o.error_code.as_deref(), Some("entity_not_found"));
    assert!(o.patches.is_empty());

    let o = run(&f, &c, "get_entity", json!({ "kind": "task", "id": "bad#id" })).await;
    assert_eq!(o.error_code.as_deref(), Some("invalid_id"), "{}", o.content);

    let o = run(&f, &c, "drop_table", json!({})).await;
    assert_eq!(o.error_code.as_deref(), Some("unknown_tool"));
    assert!(content(&o)["error"]["message"].as_str().unwrap().contains("drop_table"));
}

#[tokio::test]
async fn another_users_ids_read_as_not_found_and_nothing_leaks() {
    let f = fixture().await;
    let (alice_p, _) = project(&f, "alice", "Secret launch").await;
    let secret = run(&f, &in_project("alice", &alice_p), "create_task", json!({ "title": "Confidential plan" })).await;
    let secret_id = content(&secret)["id"].as_str().unwrap().to_string();
    let (bob_p, _) = project(&f, "bob", "Bob's").await;
    let bob = in_project("bob", &bob_p);

    let attempts = [
        ("get_entity", json!({ "kind": "task", "id": secret_id })),
        ("update_entity", json!({ "kind": "task", "id": secret_id, "changes": { "title": "pwned" } })),
        ("delete_entity", json!({ "kind": "task", "id": secret_id })),
    ];
    for (name, args) in &attempts {
        let o = run(&f, &bob, name, args.clone()).await;
        assert_eq!(o.error_code.as_deref(), Some("entity_not_found"), "{name}: {}", o.content);
        let everything = format!("{} {:?}", o.content, o.operations);
        assert!(!everything.contains("Confidential"), "{name} leaked: {everything}");
        assert!(o.patches.is_empty());
    }
    // Bob's scope naming Alice's project, and Bob asking for it by id.
    let o = run(&f, &in_project("bob", &alice_p), "list_entities", json!({ "kind": "task" })).await;
    assert_eq!(o.error_code.as_deref(), Some("project_not_found"));
    let o = run(&f, &ctx("bob", ToolScope::Global), "get_project", json!({ "project_id": alice_p.to_string() })).await;
    assert_eq!(o.error_code.as_deref(), Some("project_not_found"));
    assert!(!format!("{} {:?}", o.content, o.operations).contains("Secret"));
    let o = run(&f, &ctx("bob", ToolScope::Global), "search_workspace", json!({ "query": "confidential" })).await;
    assert!(o.ok && content(&o)["hits"].as_array().unwrap().is_empty(), "{}", o.content);

    let still = f.svc.get(&user("alice"), &alice_p, EntityKind::Task, &EntityId::parse(secret_id).unwrap()).await;
    assert_eq!(still.unwrap().fields.name(), "Confidential plan");
}

#[tokio::test]
async fn a_tool_outside_the_offered_set_runs_when_the_scope_allows_it() {
    let f = fixture().await;
    let (p, _) = project(&f, "alice", "Launch").await;
    let goal = run(&f, &in_project("alice", &p), "create_goal", json!({ "name": "Ship" })).await;
    let goal_id = EntityId::parse(content(&goal)["id"].as_str().unwrap()).unwrap();
    let entity = ctx("alice", ToolScope::Entity { project: p.clone(), kind: Some(EntityKind::Goal), entity: goal_id });
    assert!(!entity.scope.offered().contains(&ToolName::CreateTask));

    let o = run(&f, &entity, "create_task", json!({ "title": "Unoffered but allowed" })).await;
    assert!(o.ok, "{}", o.content);
    assert_eq!(o.patches.len(), 1);
    let tasks = f.svc.list(&user("alice"), &p, EntityKind::Task, PageRequest::default()).await.unwrap();
    assert_eq!(tasks.items.len(), 1);

    // Global turns have no project: project-bound tools are refused there.
    let o = run(&f, &ctx("alice", ToolScope::Global), "create_task", json!({ "title": "Nowhere" })).await;
    assert_eq!(o.error_code.as_deref(), Some("out_of_scope"));
    // Global tools run anywhere.
    let o = run(&f, &entity, "list_projects", json!({})).await;
    assert!(o.ok && content(&o)["items"].as_array().unwrap().len() == 1, "{}", o.content);
    let o =
        run(&f, &ctx("alice", ToolScope::Global), "create_project", json!({ "name": "Next", "context": "Why" })).await;
    assert!(o.ok, "{}", o.content);
    assert_eq!(ops(&o)[1], (OperationAction::Create, "project".into(), "Next".into(), OperationStatus::Success));
}
