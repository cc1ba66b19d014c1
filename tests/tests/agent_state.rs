//! The session agent state against DynamoDB Local: round trip, the
//! compare-and-set under concurrency, and clear.

use shared::agent_state::store::{AgentStateStore, DynamoAgentStateStore, SaveError};
use shared::agent_state::{observe_tool_result, AgentState, ToolObservation};
use shared::entities::{Change, Edge, EdgeEnd, EntityKind, EntityPatch};
use shared::ids::{EntityId, ProjectId, SessionId, UserId};
use shared::session::store::Sessions;
use shared::store::dynamo::DynamoStore;
use tests::{dynamo_client, fresh_table};

/// The agent-state store, and the session store on the same table.
async fn store() -> (DynamoAgentStateStore, DynamoStore) {
    let client = dynamo_client().await;
    let table = fresh_table(&client).await;
    (DynamoAgentStateStore::new(client.clone(), table.clone()), DynamoStore::new(client, table))
}

/// A new session of `u`: a state is only saved to a live one.
async fn new_session(sessions: &DynamoStore, u: &UserId) -> SessionId {
    let turn = shared::ids::TurnId::new();
    let run = shared::ids::RunId::parse(turn.as_str()).unwrap();
    let view = shared::session::SessionView::new(Default::default(), None, None);
    let lease = shared::session::store::Lease { turn_id: turn, until_ms: 0 };
    sessions.create_session(u, &view, &lease, &run).await.unwrap().view.id
}

fn user(u: &str) -> UserId {
    UserId::parse(u).unwrap()
}

/// A state with one dependency, as a link tool call leaves it.
fn linked_state(session: &SessionId) -> AgentState {
    let mut s = AgentState::new(session.to_string());
    let edge = Edge {
        from: EdgeEnd { kind: EntityKind::Task, id: EntityId::parse("t1").unwrap() },
        relation: "supports".into(),
        to: EdgeEnd { kind: EntityKind::Goal, id: EntityId::parse("g1").unwrap() },
    };
    let patch = EntityPatch {
        project_id: ProjectId::parse("p1").unwrap(),
        version: 3,
        changes: vec![Change::Linked { edge }],
        doc_structure: None,
    };
    let args = serde_json::json!({});
    let obs = ToolObservation {
        call_id: "c1",
        tool: "link_entities",
        args: &args,
        ok: true,
        error_code: None,
        patches: std::slice::from_ref(&patch),
    };
    observe_tool_result(&mut s, &obs, 1);
    s
}

#[tokio::test]
async fn save_then_load_round_trips_with_versions() {
    let (store, sessions) = store().await;
    let u = user("alice");
    let session = new_session(&sessions, &u).await;
    assert!(store.load(&u, &session).await.unwrap().is_none());

    let state = linked_state(&session);
    let v1 = store.save(&u, &session, &state, 0).await.unwrap();
    assert_eq!(v1, 1);
    let (loaded, version) = store.load(&u, &session).await.unwrap().unwrap();
    assert_eq!((&loaded, version), (&state, 1));
    assert_eq!(loaded.current_understanding.dependencies.len(), 1);

    let mut next = loaded.clone();
    next.current_understanding.dependencies.clear();
    assert_eq!(store.save(&u, &session, &next, 1).await.unwrap(), 2);
    assert_eq!(store.load(&u, &session).await.unwrap().unwrap(), (next.clone(), 2));

    // A stale version, or "new" when one exists, is refused and writes nothing.
    assert!(matches!(store.save(&u, &session, &state, 1).await, Err(SaveError::Conflict)));
    assert!(matches!(store.save(&u, &session, &state, 0).await, Err(SaveError::Conflict)));
    assert_eq!(store.load(&u, &session).await.unwrap().unwrap(), (next, 2));

    // Keys are per user: another user sees nothing under the same session id.
    assert!(store.load(&user("bob"), &session).await.unwrap().is_none());
}

#[tokio::test]
async fn concurrent_saves_of_one_version_have_exactly_one_winner() {
    let (store, sessions) = store().await;
    let u = user("alice");
    let session = new_session(&sessions, &u).await;
    for expected in [0u64, 1] {
        let saves = (0..8).map(|i| {
            let (store, u, session) = (store.clone(), u.clone(), session.clone());
            async move {
                let mut s = AgentState::new(session.to_string());
                s.last_summarized_at = Some(i);
                (i, store.save(&u, &session, &s, expected).await)
            }
        });
        let results = futures::future::join_all(saves).await;
        let winners: Vec<i64> = results.iter().filter(|(_, r)| r.is_ok()).map(|(i, _)| *i).collect();
        assert_eq!(winners.len(), 1, "expected {expected}: {results:?}");
        for (_, r) in &results {
            match r {
                Ok(v) => assert_eq!(*v, expected + 1),
                Err(e) => assert!(matches!(e, SaveError::Conflict), "{e:?}"),
            }
        }
        let (stored, version) = store.load(&u, &session).await.unwrap().unwrap();
        assert_eq!(version, expected + 1);
        assert_eq!(stored.last_summarized_at, Some(winners[0]), "the winner's state is the stored one");
    }
}

#[tokio::test]
async fn clear_removes_the_state_and_a_new_one_starts_at_version_one() {
    let (store, sessions) = store().await;
    let u = user("alice");
    let session = new_session(&sessions, &u).await;
    let other = new_session(&sessions, &u).await;
    let state = linked_state(&session);
    store.save(&u, &session, &state, 0).await.unwrap();
    store.save(&u, &other, &AgentState::new(other.to_string()), 0).await.unwrap();

    store.clear(&u, &session).await.unwrap();
    assert!(store.load(&u, &session).await.unwrap().is_none());
    store.clear(&u, &session).await.unwrap(); // clearing nothing is fine
    assert!(store.load(&u, &other).await.unwrap().is_some(), "other sessions are untouched");
    assert_eq!(store.save(&u, &session, &state, 0).await.unwrap(), 1);
}

#[tokio::test]
async fn concurrent_updates_with_retry_lose_nothing() {
    use shared::agent_state::store::update;
    use shared::agent_state::{apply_delta, AgentStateDelta};
    let (store, sessions) = store().await;
    let u = user("alice");
    let session = new_session(&sessions, &u).await;
    let updates = (0..6).map(|i| {
        let (store, u, session) = (store.clone(), u.clone(), session.clone());
        async move {
            let delta: AgentStateDelta = serde_json::from_value(serde_json::json!({
                "agent_state_updates": {"assumptions": [{"id": format!("a{i}"), "hypothesis": "h", "confidence": 0.5}]}
            }))
            .unwrap();
            update(&store, &u, &session, 20, |s| {
                *s = apply_delta(s, &delta, 1)?;
                Ok(())
            })
            .await
        }
    });
    for r in futures::future::join_all(updates).await {
        r.unwrap();
    }
    let (state, version) = store.load(&u, &session).await.unwrap().unwrap();
    assert_eq!(version, 6);
    assert_eq!(state.assumptions.len(), 6, "every update survived: {:?}", state.assumptions);

    // A refused change writes nothing.
    let bad: AgentStateDelta = serde_json::from_value(serde_json::json!({
        "agent_state_item_updates": [{"op": "remove", "id": "missing"}]
    }))
    .unwrap();
    let r = update(&store, &u, &session, 3, |s| {
        *s = apply_delta(s, &bad, 2)?;
        Ok(())
    })
    .await;
    assert!(matches!(r, Err(shared::agent_state::store::UpdateError::Delta(_))), "{r:?}");
    assert_eq!(store.load(&u, &session).await.unwrap().unwrap().1, 6);
}
