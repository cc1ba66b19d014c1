//! The registry without a store: schemas, scopes, argument parsing and
//! every refusal that happens before the service is reached (which is why a
//! registry over an unreachable store serves here).

use super::call::without_nulls;
use super::outcome::{outcome, Done, Op, Refusal};
use super::*;
use crate::entities::{EntityError, EntityKind, TaskFields, TaskState};
use crate::ids::{EntityId, ProjectId};
use crate::message::FunctionCall;
use crate::session::ContextType;
use crate::sse::{OperationAction, OperationStatus, StreamEvent};
use crate::store::StoreError;
use std::collections::HashSet;

/// A registry whose store is never reached by these tests (a call that did
/// reach it would fail with `store_unavailable`, not pass).
fn registry() -> ToolRegistry {
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .endpoint_url("http://127.0.0.1:9")
        .http_client(crate::store::aws::http_client())
        .build();
    let store =
        crate::entities::store::DynamoEntityStore::new(aws_sdk_dynamodb::Client::from_conf(conf), "unreachable");
    ToolRegistry::new(EntityService::new(store))
}

fn ctx(scope: ToolScope) -> ToolContext {
    ToolContext { user: UserId::parse("alice").unwrap(), scope, zone: None }
}

fn project_scope() -> ToolScope {
    ToolScope::Project { project: ProjectId::new() }
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        kind: "function".into(),
        function: FunctionCall { name: name.into(), arguments: arguments.into() },
    }
}

async fn run(scope: ToolScope, name: &str, arguments: Value) -> ToolOutcome {
    registry().execute(&ctx(scope), &call(name, &arguments.to_string())).await
}

fn error(o: &ToolOutcome) -> (String, String) {
    let v: Value = serde_json::from_str(&o.content).unwrap();
    (v["error"]["code"].as_str().unwrap().into(), v["error"]["message"].as_str().unwrap().into())
}

fn names(tools: &[ToolName]) -> Vec<&'static str> {
    tools.iter().map(|t| t.as_str()).collect()
}

fn every_definition() -> Vec<Value> {
    ToolName::ALL.iter().map(|t| t.definition()).chain(plan::plan_definitions(&[])).collect()
}

fn property_names(schema: &Value) -> Vec<String> {
    schema["properties"].as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

// ---- the registration list and its schemas ---------------------------------

#[test]
fn every_tool_is_registered_once_and_found_by_its_name() {
    let unique: HashSet<_> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
    assert_eq!(unique.len(), ToolName::ALL.len());
    for &t in ToolName::ALL {
        assert_eq!(ToolName::parse(t.as_str()), Some(t));
        assert_eq!(format!("{t:?}"), t.as_str());
        assert!(!t.description().is_empty(), "{t:?}");
    }
    assert_eq!(ToolName::parse("drop_table"), None);
    // The plan tools are run by the turn, not the registry.
    assert_eq!(ToolName::parse(plan::AGENT_CREATE_PLAN), None);
}

#[test]
fn every_schema_is_a_self_contained_object_whose_required_fields_exist() {
    for def in every_definition() {
        let name = def["function"]["name"].as_str().unwrap();
        let p = &def["function"]["parameters"];
        assert_eq!(p["type"], "object", "{name}: {p}");
        assert_eq!(p["additionalProperties"], false, "{name}: unknown arguments must be refused: {p}");
        let text = p.to_string();
        for absent in ["$ref", "$schema", r#""null""#, r#""format""#, r#""pattern""#, r#""title":"#] {
            // `"title":` as a key of `properties` is a field; as a keyword it is noise.
            let as_keyword = absent != r#""title":"#
                || text.matches(absent).count() > p["properties"].get("title").map_or(0, |_| 1) + nested_titles(p);
            assert!(!(text.contains(absent) && as_keyword), "{name}: {absent} in {text}");
        }
        let props: HashSet<_> = property_names(p).into_iter().collect();
        for r in p["required"].as_array().into_iter().flatten() {
            assert!(props.contains(r.as_str().unwrap()), "{name}: required {r} is not a property");
        }
    }
}

/// Objects below the root that have a `title` property (plan steps).
fn nested_titles(v: &Value) -> usize {
    let here = |v: &Value| usize::from(v["properties"].get("title").is_some());
    match v {
        Value::Object(o) => o.values().map(|c| here(c) + nested_titles(c)).sum(),
        Value::Array(items) => items.iter().map(|c| here(c) + nested_titles(c)).sum(),
        _ => 0,
    }
}

/// The property names of the schema utoipa derives for `T` (the HTTP edge's).
fn http_fields<T: utoipa::ToSchema>() -> Vec<String> {
    let v = serde_json::to_value(T::schema()).unwrap();
    property_names(&v)
}

#[test]
fn a_create_tool_takes_exactly_its_kinds_fields() {
    use crate::entities::{GoalFields, MilestoneFields, PlanFields, RequirementFields, RiskFields};
    for (tool, fields) in [
        (ToolName::CreateTask, http_fields::<TaskFields>()),
        (ToolName::CreateGoal, http_fields::<GoalFields>()),
        (ToolName::CreatePlan, http_fields::<PlanFields>()),
        (ToolName::CreateMilestone, http_fields::<MilestoneFields>()),
        (ToolName::CreateRisk, http_fields::<RiskFields>()),
        (ToolName::CreateRequirement, http_fields::<RequirementFields>()),
    ] {
        let p = tool.parameters();
        assert_eq!(property_names(&p), fields, "{tool:?}");
        assert_eq!(p["required"].as_array().unwrap().len(), 1, "{tool:?}: only the name or title is required");
    }
}

#[test]
fn the_task_schema_carries_the_field_rules() {
    let p = ToolName::CreateTask.parameters();
    assert_eq!(p["required"], json!(["title"]));
    assert_eq!(p["properties"]["priority"]["type"], "integer");
    assert_eq!(
        (p["properties"]["priority"]["minimum"].clone(), p["properties"]["priority"]["maximum"].clone()),
        (json!(1), json!(5))
    );
    let states: Vec<TaskState> = serde_json::from_value(p["properties"]["state"]["enum"].clone()).unwrap();
    assert_eq!(states, [TaskState::Todo, TaskState::InProgress, TaskState::Blocked, TaskState::Done]);
    // The model gives a due date as text in the user's zone (tools/dates.rs).
    assert_eq!(p["properties"]["due_at"]["type"], "string");
    assert!(p["properties"]["due_at"]["description"].as_str().unwrap().contains("2026-12-10"));
}

#[test]
fn kinds_are_the_entity_kinds() {
    let kinds: Vec<EntityKind> =
        serde_json::from_value(ToolName::GetEntity.parameters()["properties"]["kind"]["enum"].clone()).unwrap();
    assert_eq!(kinds, EntityKind::ALL);
    for t in [ToolName::LinkEntities, ToolName::UnlinkEntities] {
        let p = t.parameters();
        assert_eq!(p["properties"]["from_kind"], p["properties"]["to_kind"]);
        assert_eq!(p["properties"]["from_kind"]["enum"].as_array().unwrap().len(), EntityKind::ALL.len());
    }
}

#[test]
fn the_plan_tools_schemas_name_their_choices() {
    let defs = plan::plan_definitions(&[]);
    let create = &defs[0]["function"]["parameters"];
    assert_eq!(create["required"], json!(["goal", "stages"]));
    assert_eq!(create["properties"]["mode"]["enum"], json!(["auto_execute", "draft_only", "agent_review"]));
    assert_eq!(create["properties"]["mode"]["default"], "auto_execute");
    let step = &create["properties"]["stages"]["items"]["properties"]["steps"]["items"];
    // A step is what it does in words and its tools; its intent and
    // executor are read from those (a small model let invented ones lead).
    assert_eq!(step["required"], json!(["id", "title", "tools"]));
    let offered: Vec<&String> = step["properties"].as_object().unwrap().keys().collect();
    assert_eq!(offered, ["id", "inputs", "title", "tools"]);
    assert_eq!(step["properties"]["tools"]["minItems"], 1);
    assert_eq!(step["additionalProperties"], false);
    let decide = &defs[1]["function"]["parameters"];
    assert_eq!(decide["properties"]["decision"]["enum"], json!(["approve", "reject", "continue"]));
}

// ---- schema generation --------------------------------------------------------

#[test]
fn compact_keeps_property_names_and_drops_only_keywords() {
    let mut v = json!({
        "type": "object", "title": "Args",
        "properties": {
            "title": { "type": ["string", "null"], "maxLength": 500, "pattern": "[^ ]", "default": null },
            "format": { "type": "integer", "format": "int64", "minimum": 0, "maximum": 4294967295u64 },
            "impact": { "oneOf": [{ "type": "null" }, { "type": "string", "enum": ["low", null] }], "description": "How bad." },
        },
    });
    schema::compact(&mut v);
    assert_eq!(
        v,
        json!({
            "type": "object",
            "properties": {
                "title": { "type": "string" },
                "format": { "type": "integer", "minimum": 0 },
                "impact": { "type": "string", "enum": ["low"], "description": "How bad." },
            },
        })
    );
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
struct Referring {
    /// What this field is for.
    kind: EntityKind,
    other: Option<EntityKind>,
}

#[test]
fn references_are_inlined_and_a_fields_own_description_wins() {
    let v = schema::of::<Referring>();
    assert!(!v.to_string().contains("$ref"), "{v}");
    assert_eq!(v["properties"]["kind"]["description"], "What this field is for.");
    assert_eq!(v["properties"]["kind"]["enum"].as_array().unwrap().len(), 7);
    assert_eq!(v["properties"]["other"]["enum"], v["properties"]["kind"]["enum"]);
    assert_eq!(v["required"], json!(["kind"]));
}

// ---- scopes -------------------------------------------------------------------

#[test]
fn scopes_offer_the_same_names_as_before() {
    let p = ProjectId::new();
    let e = EntityId::new();
    assert_eq!(
        names(&ToolScope::Global.offered()),
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
    let task = ToolScope::Entity { project: p.clone(), kind: Some(EntityKind::Task), entity: e.clone() };
    let entity_tools = [
        "get_entity",
        "update_entity",
        "list_edges",
        "link_entities",
        "unlink_entities",
        "search_project",
        "get_field_info",
        "get_entity_relationships",
        "get_linked_entities",
    ];
    assert_eq!(names(&task.offered()), entity_tools);
    let document = ToolScope::Entity { project: p.clone(), kind: None, entity: e };
    assert_eq!(names(&document.offered())[9..], ["read_document", "get_document_metadata"]);
    let project = names(&ToolScope::Project { project: p }.offered());
    assert_eq!(project.len(), 18);
    assert!(project.contains(&"reorganize_project"), "one step for a batch of moves and relation changes");
    assert!(!project.contains(&"create_project") && !project.contains(&"list_projects"));
    // One update tool for what lives in the project: "rename the task" cannot
    // pick the project's.
    assert!(!project.contains(&"update_project") && !project.contains(&"get_project"));
    assert!(!project.contains(&"get_entity"));
    assert!(project.contains(&"update_entity") && project.contains(&"read_document"));
    assert!(!project.contains(&"ask_clarifying_questions") && !project.contains(&"create_onto_project"));
}

#[test]
fn project_create_offers_its_own_tools_until_it_has_a_project() {
    assert_eq!(
        names(&ToolScope::Global.offered_in(ContextType::ProjectCreate)),
        ["ask_clarifying_questions", "create_onto_project", "list_projects", "search_workspace"]
    );
    let project = project_scope();
    assert_eq!(project.offered_in(ContextType::ProjectCreate), project.offered());
    // The global, project and brain-dump context types add the web tools.
    let with_web = [ToolScope::Global.offered(), crate::tools::WEB_TOOLS.to_vec()].concat();
    assert_eq!(ToolScope::Global.offered_in(ContextType::Global), with_web);
    let in_project = [project.offered(), crate::tools::WEB_TOOLS.to_vec()].concat();
    assert_eq!(project.offered_in(ContextType::Project), in_project);
    assert_eq!(project.offered_in(ContextType::Ontology), project.offered());
}

#[test]
fn a_brain_dump_offers_reads_and_one_batch_a_forecast_the_calendars_reads() {
    let project = project_scope();
    let dump = names(&project.offered_in(ContextType::BrainDump));
    assert!(dump.contains(&"propose_entities") && dump.contains(&"search_project"), "{dump:?}");
    let writes = crate::tools::ASKABLE.iter().filter(|t| **t != ToolName::ProposeEntities);
    assert!(writes.clone().all(|w| !dump.contains(&w.as_str())), "no direct write in a brain dump: {dump:?}");
    let global = names(&ToolScope::Global.offered_in(ContextType::BrainDump));
    assert!(global.contains(&"list_projects") && !global.contains(&"create_project"), "{global:?}");
    let forecast = names(&project.offered_in(ContextType::ProjectForecast));
    assert!(forecast.contains(&"find_free_time") && forecast.contains(&"list_calendar_events"), "{forecast:?}");
    assert!(!forecast.contains(&"create_calendar_event"), "reads only: {forecast:?}");
}

#[test]
fn only_project_bound_tools_need_a_project() {
    let global_tools = [
        "list_projects",
        "search_workspace",
        "get_project",
        "create_project",
        "update_project",
        "ask_clarifying_questions",
        "create_onto_project",
        "list_calendar_events",
        "create_calendar_event",
        "update_calendar_event",
        "delete_calendar_event",
        "find_free_time",
        "web_search",
        "web_visit",
        "get_field_info",
        "get_buildos_overview",
    ];
    for &t in ToolName::ALL {
        assert_eq!(!t.needs_project(), global_tools.contains(&t.as_str()), "{t:?}");
        assert_eq!(ToolScope::Global.allows(t), !t.needs_project());
        assert!(project_scope().allows(t));
    }
    // Everything a scope offers it allows.
    for scope in [ToolScope::Global, project_scope()] {
        assert!(scope.offered().iter().all(|t| scope.allows(*t)));
    }
}

// ---- refusals before the service ------------------------------------------------

#[tokio::test]
async fn an_unknown_tool_or_a_project_tool_without_a_project_is_refused() {
    let o = run(project_scope(), "drop_table", json!({})).await;
    assert_eq!(error(&o), ("unknown_tool".into(), r#"there is no tool named "drop_table""#.into()));
    let o = run(ToolScope::Global, "create_task", json!({ "title": "x" })).await;
    assert_eq!(
        error(&o),
        ("out_of_scope".into(), "create_task works inside a project; this conversation has none".into())
    );
    assert!(!o.ok && o.operations.is_empty() && o.patches.is_empty() && o.events().is_empty());
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_refused() {
    let reg = registry();
    let c = ctx(project_scope());
    let o = reg.execute(&c, &call("create_task", r#"{"title": "unterminated"#)).await;
    let (code, message) = error(&o);
    assert_eq!(code, "invalid_arguments");
    assert!(message.starts_with("arguments are not valid JSON: "), "{message}");
    let o = reg.execute(&c, &call("create_task", r#"["title"]"#)).await;
    assert_eq!(error(&o), ("invalid_arguments".into(), "arguments must be a JSON object".into()));
    // "" is how models send "no arguments".
    assert_eq!(super::arguments("  "), Ok(Map::new()));
}

#[tokio::test]
async fn bad_arguments_read_as_serdes_message_after_the_tools_name() {
    let cases = [
        ("create_task", json!({ "title": "x", "owner": "bob" }), "create_task: unknown field `owner`, expected one of `title`, `description`, `state`, `priority`, `due_at`"),
        ("create_task", json!({ "title": 7 }), "create_task: invalid type: integer `7`, expected a string"),
        ("create_task", json!({ "description": "no title" }), "create_task: missing field `title`"),
        ("create_task", json!({ "title": "x", "state": "someday" }), "create_task: unknown variant `someday`, expected one of `todo`, `in_progress`, `blocked`, `done`"),
        ("get_entity", json!({ "kind": "widget", "id": "x" }), "get_entity: unknown variant `widget`, expected one of `document`, `task`, `goal`, `plan`, `milestone`, `risk`, `requirement`"),
        ("link_entities", json!({ "from_kind": "task", "from_id": "a" }), "link_entities: missing field `relation`"),
        ("get_doc_structure", json!({ "depth": 2 }), "get_doc_structure: unknown field `depth`, there are no fields"),
        ("create_onto_project", json!({ "name": "No context" }), "create_onto_project: missing field `context`"),
    ];
    for (tool, args, says) in cases {
        let o = run(project_scope(), tool, args.clone()).await;
        assert_eq!(error(&o), ("invalid_arguments".into(), says.to_string()), "{tool} {args}");
        assert!(o.operations.is_empty() && o.patches.is_empty());
    }
}

#[test]
fn create_arguments_read_null_as_absent() {
    let raw = json!({ "title": "Ship", "state": null, "priority": null, "description": null });
    let fields: TaskFields = super::call::parse(&without_nulls(raw.as_object().unwrap())).unwrap();
    assert_eq!((fields.title.as_str(), fields.state, fields.priority), ("Ship", TaskState::Todo, None));
    // As the HTTP API reads it: an integer written as a float is that integer.
    let raw = json!({ "title": "Ship", "priority": 2.0 });
    let fields: TaskFields = super::call::parse(raw.as_object().unwrap()).unwrap();
    assert_eq!(fields.priority, Some(2));
}

#[tokio::test]
async fn ids_that_do_not_parse_are_invalid_id_not_bad_arguments() {
    let o = run(project_scope(), "get_entity", json!({ "kind": "task", "id": "bad#id" })).await;
    assert_eq!(error(&o).0, "invalid_id");
    let o = run(ToolScope::Global, "get_project", json!({ "project_id": "a#b" })).await;
    let (code, message) = error(&o);
    assert_eq!(code, "invalid_id");
    assert!(message.contains("project_id"), "{message}");
    let o = run(project_scope(), "move_document", json!({ "document_id": "ok", "new_parent_id": "x y" })).await;
    assert!(error(&o).1.contains("new_parent_id"), "{}", o.content);
}

// ---- project creation ---------------------------------------------------------------

#[tokio::test]
async fn clarifying_questions_go_to_the_user_as_a_turn_event() {
    let o =
        run(ToolScope::Global, "ask_clarifying_questions", json!({ "questions": [" Who is it for? ", "When?"] })).await;
    assert!(o.ok, "{}", o.content);
    let content: Value = serde_json::from_str(&o.content).unwrap();
    assert_eq!(content, json!({ "questions": ["Who is it for?", "When?"], "sent_to_user": true }));
    assert!(o.operations.is_empty() && o.patches.is_empty());
    let asked = vec!["Who is it for?".to_string(), "When?".to_string()];
    assert_eq!(o.events(), [StreamEvent::ClarifyingQuestions { questions: asked }]);
}

#[tokio::test]
async fn clarifying_questions_are_refused_outside_their_bounds() {
    let six: Vec<String> = (1..=6).map(|i| format!("Question {i}?")).collect();
    let long = "x".repeat(MAX_QUESTION_CHARS + 1);
    for (questions, says) in [
        (json!([]), "ask 1 to 5 questions, not 0"),
        (json!(six), "ask 1 to 5 questions, not 6"),
        (json!(["  "]), "each question must be 1 to 300 characters"),
        (json!([long]), "each question must be 1 to 300 characters"),
    ] {
        let o = run(ToolScope::Global, "ask_clarifying_questions", json!({ "questions": questions })).await;
        assert_eq!(error(&o), ("invalid_arguments".into(), format!("ask_clarifying_questions: {says}")));
        assert!(o.events().is_empty());
    }
}

#[tokio::test]
async fn a_project_whose_first_entities_are_invalid_is_not_created() {
    // Refused while validating, before the store is reached.
    let o = run(ToolScope::Global, "create_project", json!({ "name": "Launch", "tasks": ["ok", "  "] })).await;
    let (code, message) = error(&o);
    assert_eq!(code, "invalid_value");
    assert!(message.contains("title"), "{message}");
    assert!(o.operations.is_empty() && o.patches.is_empty());
    let o = run(ToolScope::Global, "create_onto_project", json!({ "name": "L", "context": "Why", "goals": [7] })).await;
    assert_eq!(error(&o).0, "invalid_arguments");
}

// ---- outcomes -------------------------------------------------------------------------

fn op(name: &str) -> Op {
    Op { action: OperationAction::Create, entity_type: "task", name: name.into(), id: None }
}

#[test]
fn an_outcome_has_a_start_and_an_end_per_step() {
    let done = Done {
        result: Ok(json!({ "id": "t1" })),
        ops: vec![(op("A"), true), (op("B"), false)],
        patches: vec![],
        turn_events: vec![],
    };
    let o = outcome("create_project", Ok(done));
    assert!(o.ok && o.error_code.is_none());
    let statuses: Vec<_> = o
        .operations
        .iter()
        .map(|e| match e {
            StreamEvent::Operation { entity_name, status, .. } => (entity_name.clone(), *status),
            other => panic!("{other:?}"),
        })
        .collect();
    use OperationStatus::*;
    assert_eq!(statuses, [("A".into(), Start), ("A".into(), Success), ("B".into(), Start), ("B".into(), Error)]);
}

#[test]
fn a_failed_step_is_an_error_result_and_store_details_stay_in_the_logs() {
    let done = Done::read(Err(EntityError::Store(StoreError::Backend("throttled by table xyz".into()))), op("A"));
    let o = outcome("get_entity", Ok(done));
    assert!(!o.ok);
    let (code, message) = error(&o);
    assert_eq!(code, "store_unavailable");
    assert!(!message.contains("xyz"), "{message}");
    assert_eq!(o.operations.len(), 2);
    let refused = outcome("create_task", Err(Refusal::Args("missing field `title`".into())));
    assert_eq!(error(&refused).1, "create_task: missing field `title`");
}

#[test]
fn previews_are_cut_at_the_limit_with_an_ellipsis() {
    let long = json!({ "text": "é".repeat(PREVIEW_CHARS * 2) });
    let o = outcome("read_document", Ok(Done::quiet(Ok(long))));
    assert_eq!(o.preview.chars().count(), PREVIEW_CHARS);
    assert!(o.preview.ends_with('…') && o.content.len() > o.preview.len());
    let short = outcome("list_edges", Ok(Done::quiet(Ok(json!({ "items": [] })))));
    assert_eq!(short.preview, short.content);
}

#[test]
fn docs_tools_md_lists_every_tool() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tools.md")).unwrap();
    let builtin = [plan::AGENT_CREATE_PLAN, plan::AGENT_CONTINUE_PLAN, "read_tool_output"];
    for name in ToolName::ALL.iter().map(|t| t.as_str()).chain(builtin) {
        assert!(doc.contains(&format!("`{name}` |")) || doc.contains(&format!("`{name}` /")), "{name}");
    }
}

/// A plan's bounds are in the schema the model sees: a model server that
/// constrains output to it closes `stages` at six instead of repeating a
/// stage until the token limit (issue 31's `plan_two_steps`); a bound no
/// call reaches (`document_ids`' 100) stays out of the prompt.
#[test]
fn small_list_bounds_reach_the_model_and_large_ones_do_not() {
    let plan = &plan::plan_definitions(&[])[0]["function"]["parameters"];
    let stages = &plan["properties"]["stages"];
    assert_eq!(stages["maxItems"], json!(crate::plan::MAX_STAGES));
    assert_eq!(stages["minItems"], json!(1));
    assert_eq!(stages["items"]["properties"]["steps"]["maxItems"], json!(crate::plan::MAX_STEPS));
    let ids = &ToolName::GetDocumentMetadata.parameters()["properties"]["document_ids"];
    assert!(ids.get("maxItems").is_none(), "{ids}");
}
