use super::*;
use crate::entities::{
    Change, Edge, EdgeEnd, Entity, EntityFields, EntityKind, EntityPatch, GoalFields, Record, RecordKind, TaskFields,
};
use crate::ids::{EntityId, ProjectId};
use serde_json::{json, Value};

fn pid() -> ProjectId {
    ProjectId::parse("p1").unwrap()
}

fn task(id: &str, title: &str) -> Entity {
    Entity {
        id: EntityId::parse(id).unwrap(),
        project_id: pid(),
        fields: EntityFields::Task(TaskFields {
            title: title.into(),
            description: None,
            state: Default::default(),
            priority: None,
            due_at: None,
        }),
        version: 1,
        created_at: 1,
        updated_at: 1,
        content_length: None,
        content: None,
    }
}

fn goal(id: &str, name: &str) -> Entity {
    Entity {
        fields: EntityFields::Goal(GoalFields {
            name: name.into(),
            description: None,
            state: Default::default(),
            target_at: None,
        }),
        ..task(id, "")
    }
}

fn patch(changes: Vec<Change>) -> EntityPatch {
    EntityPatch { project_id: pid(), version: 2, changes, doc_structure: None }
}

fn created(e: Entity) -> Change {
    Change::Created { kind: e.kind().into(), id: e.id.to_string(), entity: Record::Entity(Box::new(e)) }
}

fn updated(e: Entity) -> Change {
    Change::Updated { kind: e.kind().into(), id: e.id.to_string(), entity: Record::Entity(Box::new(e)) }
}

fn edge(from: (&str, EntityKind), rel: &str, to: (&str, EntityKind)) -> Edge {
    Edge {
        from: EdgeEnd { kind: from.1, id: EntityId::parse(from.0).unwrap() },
        relation: rel.into(),
        to: EdgeEnd { kind: to.1, id: EntityId::parse(to.0).unwrap() },
    }
}

/// Observes one successful write of `tool` with `patches`.
fn observe(state: &mut AgentState, call: &str, tool: &str, patches: &[EntityPatch]) -> Option<Verification> {
    let args = json!({});
    let obs = ToolObservation { call_id: call, tool, args: &args, ok: true, error_code: None, patches };
    observe_tool_result(state, &obs, 100)
}

fn observe_err(state: &mut AgentState, call: &str, tool: &str, args: Value, code: &str) -> Option<Verification> {
    let obs = ToolObservation { call_id: call, tool, args: &args, ok: false, error_code: Some(code), patches: &[] };
    observe_tool_result(state, &obs, 100)
}

fn dep(from: &str, rel: &str, to: &str) -> Dependency {
    Dependency { from: from.into(), to: to.into(), rel: Some(rel.into()) }
}

#[test]
fn a_created_entity_appears_with_its_kind_and_name() {
    let mut s = AgentState::new("s1");
    assert_eq!(observe(&mut s, "c1", "create_task", &[patch(vec![created(task("t1", "Write spec"))])]), None);
    assert_eq!(
        s.current_understanding.entities,
        vec![KnownEntity { id: "t1".into(), kind: "task".into(), name: Some("Write spec".into()) }]
    );
    // An update renames it in place of a duplicate.
    observe(&mut s, "c2", "update_entity", &[patch(vec![updated(task("t1", "Write the spec"))])]);
    assert_eq!(s.current_understanding.entities.len(), 1);
    assert_eq!(s.entity("t1").unwrap().name.as_deref(), Some("Write the spec"));
}

#[test]
fn a_created_project_is_known_with_its_name() {
    let project = crate::entities::Project {
        id: pid(),
        name: "Launch".into(),
        description: None,
        state: Default::default(),
        context_document_id: EntityId::parse("d1").unwrap(),
        version: 1,
        created_at: 1,
        updated_at: 1,
    };
    let change =
        Change::Created { kind: RecordKind::Project, id: "p1".into(), entity: Record::Project(Box::new(project)) };
    let mut s = AgentState::new("s1");
    observe(&mut s, "c1", "create_project", &[patch(vec![change])]);
    assert_eq!(s.entity("p1").unwrap().kind, "project");
    assert_eq!(s.entity("p1").unwrap().name.as_deref(), Some("Launch"));
}

#[test]
fn link_adds_a_dependency_and_unlink_removes_it() {
    let mut s = AgentState::new("s1");
    observe(&mut s, "c1", "create_task", &[patch(vec![created(task("t1", "Write spec"))])]);
    observe(&mut s, "c2", "create_goal", &[patch(vec![created(goal("g1", "Ship v2"))])]);
    let e = edge(("t1", EntityKind::Task), "supports", ("g1", EntityKind::Goal));
    observe(&mut s, "c3", "link_entities", &[patch(vec![Change::Linked { edge: e.clone() }])]);
    // The same edge twice is one dependency.
    observe(&mut s, "c4", "link_entities", &[patch(vec![Change::Linked { edge: e.clone() }])]);
    assert_eq!(s.current_understanding.dependencies, vec![dep("t1", "supports", "g1")]);
    observe(&mut s, "c5", "unlink_entities", &[patch(vec![Change::Unlinked { edge: e }])]);
    assert!(s.current_understanding.dependencies.is_empty());
}

#[test]
fn delete_removes_the_entity_and_its_dependencies() {
    let mut s = AgentState::new("s1");
    let e = edge(("t1", EntityKind::Task), "supports", ("g1", EntityKind::Goal));
    observe(
        &mut s,
        "c1",
        "create_task",
        &[patch(vec![
            created(task("t1", "Write spec")),
            created(goal("g1", "Ship")),
            Change::Linked { edge: e.clone() },
        ])],
    );
    assert_eq!(s.current_understanding.entities.len(), 2);
    let del = patch(vec![Change::Unlinked { edge: e }, Change::Deleted { kind: RecordKind::Task, id: "t1".into() }]);
    observe(&mut s, "c2", "delete_entity", &[del]);
    assert!(s.entity("t1").is_none());
    assert!(s.entity("g1").is_some());
    assert!(s.current_understanding.dependencies.is_empty());
}

#[test]
fn reads_name_nothing_new_and_not_found_forgets_the_entity() {
    let mut s = AgentState::new("s1");
    observe(&mut s, "c1", "create_task", &[patch(vec![created(task("t1", "Write spec"))])]);
    let args = json!({"kind": "task", "id": "t1"});
    let obs =
        ToolObservation { call_id: "c2", tool: "get_entity", args: &args, ok: true, error_code: None, patches: &[] };
    observe_tool_result(&mut s, &obs, 100);
    assert_eq!(s.entity("t1").unwrap().name.as_deref(), Some("Write spec"), "a read keeps the known name");
    observe_err(&mut s, "c3", "get_entity", args, "entity_not_found");
    assert!(s.entity("t1").is_none());
}

#[test]
fn an_expectation_is_confirmed_by_a_matching_result() {
    let mut s = AgentState::new("s1");
    let mut e = Expectation::new("create_task", "one task is created");
    e.expected_type = Some("task".into());
    e.expected_count = Some(1);
    let id = expect(&mut s, e).unwrap();
    assert_eq!(id, "exp-1");
    // Another tool's result does not touch it.
    assert_eq!(observe(&mut s, "c0", "create_goal", &[patch(vec![created(goal("g1", "Ship"))])]), None);
    let v = observe(&mut s, "c1", "create_task", &[patch(vec![created(task("t1", "Write spec"))])]).unwrap();
    assert_eq!(
        v,
        Verification { expectation_id: id.clone(), status: ExpectationStatus::Confirmed, assumption_id: None }
    );
    let e = s.expectation(&id).unwrap();
    assert_eq!(e.status, ExpectationStatus::Confirmed);
    assert_eq!(e.last_checked_at, Some(100));
    assert!(s.assumptions.is_empty());
}

#[test]
fn expected_ids_must_all_be_in_the_result() {
    let mut s = AgentState::new("s1");
    let mut e = Expectation::new("link_entities", "t1 supports g1");
    e.expected_ids = vec!["t1".into(), "g1".into()];
    expect(&mut s, e).unwrap();
    let edge = edge(("t1", EntityKind::Task), "supports", ("g1", EntityKind::Goal));
    let v = observe(&mut s, "c1", "link_entities", &[patch(vec![Change::Linked { edge }])]).unwrap();
    assert_eq!(v.status, ExpectationStatus::Confirmed);
}

#[test]
fn a_mismatch_fails_the_expectation_and_adds_an_assumption() {
    let mut s = AgentState::new("s1");
    let mut e = Expectation::new("create_task", "two tasks are created");
    e.expected_count = Some(2);
    let id = expect(&mut s, e).unwrap();
    let v = observe(&mut s, "c1", "create_task", &[patch(vec![created(task("t1", "Write spec"))])]).unwrap();
    assert_eq!(v.status, ExpectationStatus::Failed);
    assert_eq!(s.expectation(&id).unwrap().status, ExpectationStatus::Failed);
    let a = s.assumption(v.assumption_id.as_deref().unwrap()).unwrap();
    assert!(a.hypothesis.starts_with("Expected \"two tasks are created\" but got"), "{}", a.hypothesis);
    assert!(a.confidence > 0.0 && a.confidence <= 1.0);
    assert_eq!(a.evidence, vec!["c1".to_string()]);
}

#[test]
fn a_failed_call_fails_its_expectation() {
    let mut s = AgentState::new("s1");
    let mut e = Expectation::new("create_task", "the task is created");
    e.expected_type = Some("task".into());
    expect(&mut s, e).unwrap();
    let v = observe_err(&mut s, "c1", "create_task", json!({"title": "x"}), "project_not_found").unwrap();
    assert_eq!(v.status, ExpectationStatus::Failed);
    assert!(s.assumptions[0].hypothesis.contains("error project_not_found"));
}

#[test]
fn vague_expectations_and_unstructured_results_are_not_guessed() {
    let mut s = AgentState::new("s1");
    expect(&mut s, Expectation::new("create_task", "something useful")).unwrap();
    assert_eq!(observe(&mut s, "c1", "create_task", &[patch(vec![created(task("t1", "A"))])]), None);
    assert_eq!(s.expectations[0].status, ExpectationStatus::Pending);

    let mut e = Expectation::new("get_entity", "finds t1");
    e.expected_ids = vec!["t1".into()];
    expect(&mut s, e).unwrap();
    // A successful read returns no patch: nothing structured to compare.
    assert_eq!(observe(&mut s, "c2", "get_entity", &[]), None);
    assert!(s.expectations.iter().all(|e| e.status == ExpectationStatus::Pending));
}

#[test]
fn expect_refuses_empty_and_duplicate_expectations() {
    let mut s = AgentState::new("s1");
    assert!(matches!(expect(&mut s, Expectation::new("", "x")), Err(DeltaError::Invalid(_))));
    let mut e = Expectation::new("create_task", "x");
    e.id = Some("e".into());
    expect(&mut s, e.clone()).unwrap();
    assert_eq!(expect(&mut s, e), Err(DeltaError::DuplicateId("e".into())));
}

fn delta(v: Value) -> AgentStateDelta {
    serde_json::from_value(v).unwrap()
}

fn item(id: &str, title: &str) -> Value {
    json!({"id": id, "kind": "task", "title": title, "status": "active"})
}

#[test]
fn item_updates_apply_first_and_in_order() {
    let s = AgentState::new("s1");
    let d = delta(json!({
        "agent_state_item_updates": [
            {"op": "add", "item": item("i1", "Draft outline")},
            {"op": "update", "id": "i1", "patch": {"status": "resolved", "relatedEntityIds": ["t1"]}}
        ],
        "agent_state_updates": {
            "current_understanding": {"entities": [{"id": "t1", "kind": "task", "name": "Outline"}]},
            "tentative_hypotheses": [{"id": "h1", "hypothesis": "the user wants a draft first"}]
        }
    }));
    let next = apply_delta(&s, &d, 500).unwrap();
    let i = next.item("i1").unwrap();
    assert_eq!(i.status, ItemStatus::Resolved);
    assert_eq!(i.related_entity_ids, vec!["t1".to_string()]);
    assert_eq!((i.created_at, i.updated_at), (500, 500));
    assert_eq!(next.entity("t1").unwrap().name.as_deref(), Some("Outline"));
    assert_eq!(next.tentative_hypotheses.len(), 1);
    assert_eq!(s, AgentState::new("s1"), "the input is not changed");

    // Both parts invalid: the item update is checked (and fails) first.
    let bad = delta(json!({
        "agent_state_item_updates": [{"op": "update", "id": "nope", "patch": {"title": "x"}}],
        "agent_state_updates": {"assumptions": [{"id": "a1", "hypothesis": "h", "confidence": 2.0}]}
    }));
    assert_eq!(apply_delta(&next, &bad, 600), Err(DeltaError::UnknownItem("nope".into())));
}

#[test]
fn assumptions_are_never_deleted_only_retracted() {
    let s = AgentState::new("s1");
    let d = delta(json!({"agent_state_updates": {"assumptions": [
        {"id": "a1", "hypothesis": "the goal is Q3", "confidence": 0.6, "evidence": ["m1"]},
        {"id": "a2", "hypothesis": "tasks are small", "confidence": 0.5}
    ]}}));
    let s = apply_delta(&s, &d, 1).unwrap();
    // A later delta that names only a1 (retracting it) leaves a2 alone.
    let d = delta(json!({"agent_state_updates": {"assumptions": [
        {"id": "a1", "hypothesis": "the goal is Q3", "confidence": 0.0, "evidence": ["m2"]}
    ]}}));
    let s = apply_delta(&s, &d, 2).unwrap();
    assert_eq!(s.assumptions.len(), 2);
    let a1 = s.assumption("a1").unwrap();
    assert_eq!(a1.confidence, 0.0);
    assert_eq!(a1.evidence, vec!["m1".to_string(), "m2".to_string()]);
    assert_eq!(s.assumption("a2").unwrap().confidence, 0.5);
    // A retracted assumption is not shown to the model.
    let block = render(&s);
    assert!(!block.contains("the goal is Q3") && block.contains("tasks are small"), "{block}");
}

#[test]
fn remove_discards_an_item_instead_of_deleting_it() {
    let s = apply_delta(
        &AgentState::new("s1"),
        &delta(json!({"agent_state_item_updates": [{"op": "add", "item": item("i1", "Idea")}]})),
        1,
    )
    .unwrap();
    let s = apply_delta(&s, &delta(json!({"agent_state_item_updates": [{"op": "remove", "id": "i1"}]})), 2).unwrap();
    assert_eq!(s.items.len(), 1);
    assert_eq!(s.items[0].status, ItemStatus::Discarded);
}

#[test]
fn invalid_deltas_are_rejected_and_change_nothing() {
    let base = apply_delta(
        &AgentState::new("s1"),
        &delta(json!({"agent_state_item_updates": [{"op": "add", "item": item("i1", "Idea")}]})),
        1,
    )
    .unwrap();
    let cases = [
        json!({"agent_state_item_updates": [{"op": "add", "item": item("i1", "again")}]}),
        json!({"agent_state_item_updates": [{"op": "add", "item": item("i2", " ")}]}),
        json!({"agent_state_item_updates": [{"op": "update", "id": "i1", "patch": {"id": "i9"}}]}),
        json!({"agent_state_item_updates": [{"op": "update", "id": "i1", "patch": {"title": ""}}]}),
        json!({"agent_state_item_updates": [{"op": "remove", "id": "missing"}]}),
        json!({"agent_state_updates": {"assumptions": [{"id": "a", "hypothesis": "h", "confidence": 1.5}]}}),
        json!({"agent_state_updates": {"assumptions": [{"id": "a", "hypothesis": "h", "confidence": -0.1}]}}),
        json!({"agent_state_updates": {"assumptions": [{"id": "", "hypothesis": "h", "confidence": 0.5}]}}),
        json!({"agent_state_updates": {"expectations": [{"action": "", "expected_outcome": "x"}]}}),
        json!({"agent_state_updates": {"current_understanding": {"entities": [{"id": "t1", "kind": ""}]}}}),
        json!({"agent_state_updates": {"current_understanding": {"dependencies": [{"from": "", "to": "x"}]}}}),
        // A valid first part does not survive an invalid second part.
        json!({"agent_state_item_updates": [{"op": "update", "id": "i1", "patch": {"title": "changed"}}],
               "agent_state_updates": {"tentative_hypotheses": [{"id": "h", "hypothesis": ""}]}}),
    ];
    for c in cases {
        let d = delta(c.clone());
        assert!(apply_delta(&base, &d, 2).is_err(), "accepted {c}");
    }
    // Shapes the schema does not have are refused when parsed.
    for c in [
        json!({"agent_state_item_updates": [{"op": "update", "id": "i1", "patch": {"colour": "red"}}]}),
        json!({"agent_state_item_updates": [{"op": "drop", "id": "i1"}]}),
        json!({"agent_state_item_updates": [{"op": "add", "item": {"id": "i3", "kind": "epic", "title": "x"}}]}),
    ] {
        assert!(serde_json::from_value::<AgentStateDelta>(c.clone()).is_err(), "parsed {c}");
    }
}

#[test]
fn deltas_as_the_summary_records_them_parse() {
    // `SessionSummary` stores the updates as a list; items have no timestamps.
    let d = AgentStateDelta::from_json(
        &[json!({"op": "add", "item": {"id": "i1", "kind": "note", "title": "n", "status": "active"}})],
        &json!([{"expectations": [{"action": "create_task", "expected_outcome": "a task", "status": "pending"}]}]),
    )
    .unwrap();
    let s = apply_delta(&AgentState::new("s1"), &d, 7).unwrap();
    assert_eq!(s.items[0].created_at, 7);
    assert_eq!(s.expectations[0].id.as_deref(), Some("exp-1"));
}

#[test]
fn render_is_compact_internal_and_bounded() {
    let mut s = AgentState::new("s1");
    assert_eq!(render(&s), "", "an empty state renders nothing");
    observe(&mut s, "c1", "create_task", &[patch(vec![created(task("t1", "Write spec"))])]);
    observe(&mut s, "c2", "create_goal", &[patch(vec![created(goal("g1", "Ship v2"))])]);
    let e = edge(("t1", EntityKind::Task), "supports", ("g1", EntityKind::Goal));
    observe(&mut s, "c3", "link_entities", &[patch(vec![Change::Linked { edge: e }])]);
    let block = render(&s);
    assert!(block.starts_with("AGENT_STATE (internal, do not show the user):"), "{block}");
    assert!(block.contains("task \"Write spec\" t1"), "{block}");
    assert!(block.contains("\"Write spec\" -supports-> \"Ship v2\""), "{block}");

    for i in 0..300 {
        let id = format!("t{i}");
        observe(&mut s, "c", "create_task", &[patch(vec![created(task(&id, &"long title ".repeat(20)))])]);
    }
    let block = render(&s);
    assert!(block.chars().count() <= RENDER_MAX_CHARS, "{}", block.len());
    assert!(block.contains("earlier)"), "{block}");
    assert!(s.current_understanding.entities.len() <= MAX_ENTITIES);
}

#[test]
fn the_state_round_trips_as_json_with_the_spec_names() {
    let mut s = AgentState::new("s1");
    observe(&mut s, "c1", "create_task", &[patch(vec![created(task("t1", "Write spec"))])]);
    expect(&mut s, Expectation::new("create_goal", "a goal")).unwrap();
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["sessionId"], "s1");
    assert_eq!(v["current_understanding"]["entities"][0]["name"], "Write spec");
    assert_eq!(v["expectations"][0]["status"], "pending");
    let back: AgentState = serde_json::from_value(v).unwrap();
    assert_eq!(back, s);
}
