//! The entities function end to end: its real handler (and, where clearer,
//! the service it wraps) against DynamoDB Local.

use serde_json::{json, Value};
use shared::edge::entities::{openapi_json, routes};
use shared::entities::{CreateEntity, EntityFields, EntityKind, TaskFields, TaskState};
use shared::ids::{ProjectId, UserId};
use tests::entities::EntitiesTest;

fn create_body(kind: EntityKind, name: &str) -> Value {
    match kind {
        EntityKind::Document | EntityKind::Task | EntityKind::Milestone | EntityKind::Risk => json!({ "title": name }),
        _ => json!({ "name": name }),
    }
}

fn name_field(kind: EntityKind) -> &'static str {
    match kind {
        EntityKind::Document | EntityKind::Task | EntityKind::Milestone | EntityKind::Risk => "title",
        _ => "name",
    }
}

#[tokio::test]
async fn crud_round_trip_for_every_kind_bumps_the_version_once_per_write() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "Launch").await;
    let mut version = t.version("alice", &p).await;
    assert_eq!(version, 1);
    for kind in EntityKind::ALL {
        let plural = kind.plural();
        let a = t.call("alice", "POST", &format!("/projects/{p}/{plural}"), Some(create_body(kind, "First"))).await;
        assert_eq!(a.status, 201, "{kind:?}: {a:?}");
        version += 1;
        assert_eq!(a.json["patch"]["version"], version);
        assert_eq!(a.json["patch"]["changes"][0]["op"], "created");
        assert_eq!(a.json["patch"]["changes"][0]["kind"], kind.as_str());
        let id = a.json["data"]["id"].as_str().unwrap().to_string();
        assert_eq!(a.json["data"]["version"], 1);
        assert_eq!(a.json["data"]["kind"], kind.as_str());

        let url = format!("/projects/{p}/{plural}/{id}");
        let got = t.get("alice", &url).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.json["fields"][name_field(kind)], "First");

        let listed = t.get("alice", &format!("/projects/{p}/{plural}")).await;
        assert!(listed.json["items"].as_array().unwrap().iter().any(|e| e["id"] == id.as_str()));

        let upd = t
            .raw(
                Some("alice"),
                "PATCH",
                &url,
                serde_json::to_vec(&json!({ name_field(kind): "Renamed", "description": "Now described" })).unwrap(),
                &[("if-match", "\"1\"")],
            )
            .await;
        assert_eq!(upd.status, 200, "{kind:?}: {upd:?}");
        version += 1;
        assert_eq!(upd.json["data"]["version"], 2);
        assert_eq!(upd.json["patch"]["version"], version);
        assert_eq!(upd.json["patch"]["changes"][0]["op"], "updated");
        let got = t.get("alice", &url).await;
        assert_eq!(got.json["fields"][name_field(kind)], "Renamed");
        assert_eq!(got.json["fields"]["description"], "Now described");

        // `null` clears an optional field.
        let cleared = t.call("alice", "PATCH", &url, Some(json!({ "description": null }))).await;
        assert_eq!(cleared.status, 200);
        version += 1;
        assert!(cleared.json["data"]["fields"].get("description").is_none());

        let del = t.call("alice", "DELETE", &url, None).await;
        assert_eq!(del.status, 200, "{del:?}");
        version += 1;
        assert_eq!(del.json["patch"]["changes"][0]["op"], "deleted");
        assert_eq!(t.get("alice", &url).await.status, 404);
        assert_eq!(t.version("alice", &p).await, version);
    }
    // Kind-specific fields and states are typed.
    let task = t
        .call(
            "alice",
            "POST",
            &format!("/projects/{p}/tasks"),
            Some(json!({"title": "T", "state": "in_progress", "priority": 2})),
        )
        .await;
    assert_eq!(task.json["data"]["fields"]["state"], "in_progress");
    let bad_state =
        t.call("alice", "POST", &format!("/projects/{p}/tasks"), Some(json!({"title": "T", "state": "nah"}))).await;
    assert_eq!((bad_state.status, bad_state.code()), (400, "invalid_value"));

    // The project itself: read, update, delete.
    let upd = t.call("alice", "PATCH", &format!("/projects/{p}"), Some(json!({"state": "paused"}))).await;
    assert_eq!(upd.status, 200, "{upd:?}");
    assert_eq!(upd.json["data"]["state"], "paused");
    let del = t.call("alice", "DELETE", &format!("/projects/{p}"), None).await;
    assert_eq!(del.status, 200);
    assert_eq!(t.get("alice", &format!("/projects/{p}")).await.status, 404);
    assert_eq!(t.get("alice", &format!("/projects/{p}/tasks")).await.status, 404);
    assert!(t.get("alice", "/projects").await.json["items"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn project_creation_is_compound_and_makes_the_context_document() {
    let t = EntitiesTest::new().await;
    let a = t
        .call("alice", "POST", "/projects", Some(json!({"name": "Garden", "context": "Grow tomatoes on the balcony."})))
        .await;
    assert_eq!(a.status, 201);
    let d = &a.json["data"];
    let doc = d["entities_created"][0].clone();
    assert_eq!(doc["kind"], "document");
    assert_eq!(d["project"]["context_document_id"], doc["id"]);
    assert_eq!(d["edges_created"], json!([]));
    let kinds: Vec<&str> =
        a.json["patch"]["changes"].as_array().unwrap().iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["project", "document"]);
    assert_eq!(a.json["patch"]["doc_structure"]["root"][0]["id"], doc["id"]);
    let p = d["project"]["id"].as_str().unwrap();
    let got = t.get("alice", &format!("/projects/{p}/documents/{}", doc["id"].as_str().unwrap())).await;
    assert_eq!(got.json["content"], "Grow tomatoes on the balcony.");
}

#[tokio::test]
async fn listings_page_with_cursors() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "P").await;
    let mut made = vec![];
    for i in 0..5 {
        made.push(t.create("alice", &p, "tasks", json!({"title": format!("task {i}")})).await);
    }
    let mut seen = vec![];
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let url = match &cursor {
            Some(c) => format!("/projects/{p}/tasks?limit=2&cursor={c}"),
            None => format!("/projects/{p}/tasks?limit=2"),
        };
        let a = t.get("alice", &url).await;
        assert_eq!(a.status, 200, "{a:?}");
        pages += 1;
        seen.extend(a.json["items"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_string()));
        match a.json["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, made, "every task once, in creation order");
    assert!(pages >= 3);
    assert_eq!(t.get("alice", &format!("/projects/{p}/tasks?limit=0")).await.code(), "invalid_value");

    for i in 0..3 {
        t.project("alice", &format!("more {i}")).await;
    }
    let first = t.get("alice", "/projects?limit=3").await;
    assert_eq!(first.json["items"].as_array().unwrap().len(), 3);
    let c = first.json["next_cursor"].as_str().unwrap();
    let second = t.get("alice", &format!("/projects?limit=3&cursor={c}")).await;
    assert_eq!(second.json["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn search_is_case_insensitive_over_names_descriptions_and_content() {
    let t = EntitiesTest::new().await;
    let (a, _) = t.project("alice", "Alpha").await;
    let (b, _) = t.project("alice", "Beta").await;
    let doc = t.create("alice", &a, "documents", json!({"title": "Notes", "content": "the ZEBRA crossing"})).await;
    let task = t.create("alice", &b, "tasks", json!({"title": "Feed the zebra"})).await;
    let goal = t.create("alice", &b, "goals", json!({"name": "G", "description": "Zebras everywhere"})).await;
    t.create("alice", &b, "tasks", json!({"title": "unrelated"})).await;
    t.project("bob", "Zebra farm").await;

    let all = t.get("alice", "/search?q=Zebra").await;
    assert_eq!(all.status, 200, "{all:?}");
    let mut hits: Vec<(String, String)> = all.json["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["id"].as_str().unwrap().to_string(), h["matched_in"].as_str().unwrap().to_string()))
        .collect();
    hits.sort();
    let mut want = vec![(doc.clone(), "content".into()), (task, "name".into()), (goal, "description".into())];
    want.sort();
    assert_eq!(hits, want, "bob's project is not in alice's workspace");

    let within = t.get("alice", &format!("/search?q=zebra&project_id={a}")).await;
    let ids: Vec<&str> = within.json["hits"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![doc.as_str()]);
    let limited = t.get("alice", "/search?q=zebra&limit=1").await;
    assert_eq!(limited.json["hits"].as_array().unwrap().len(), 1);
    assert_eq!(limited.json["truncated"], true);
    assert_eq!(t.get("alice", "/search?q=%20").await.code(), "invalid_value");
}

#[tokio::test]
async fn edges_link_unlink_and_go_with_their_entity() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "P").await;
    let task = t.create("alice", &p, "tasks", json!({"title": "Write copy"})).await;
    let goal = t.create("alice", &p, "goals", json!({"name": "Launch"})).await;
    let edge =
        json!({"from": {"kind": "task", "id": task}, "relation": "supports", "to": {"kind": "goal", "id": goal}});
    let linked = t.call("alice", "POST", &format!("/projects/{p}/edges"), Some(edge.clone())).await;
    assert_eq!(linked.status, 201, "{linked:?}");
    assert_eq!(linked.json["patch"]["changes"][0]["op"], "linked");
    let again = t.call("alice", "POST", &format!("/projects/{p}/edges"), Some(edge.clone())).await;
    assert_eq!((again.status, again.code()), (409, "edge_exists"));
    let of_goal = t.get("alice", &format!("/projects/{p}/edges?entity_id={goal}")).await;
    assert_eq!(of_goal.json["items"], json!([edge]));

    let unlinked = t.call("alice", "DELETE", &format!("/projects/{p}/edges"), Some(edge.clone())).await;
    assert_eq!(unlinked.status, 200);
    assert_eq!(t.get("alice", &format!("/projects/{p}/edges")).await.json["items"], json!([]));
    let gone = t.call("alice", "DELETE", &format!("/projects/{p}/edges"), Some(edge.clone())).await;
    assert_eq!((gone.status, gone.code()), (404, "edge_not_found"));

    // Deleting an entity removes its edges, in one transaction or (many edges) several.
    t.call("alice", "POST", &format!("/projects/{p}/edges"), Some(edge.clone())).await;
    let mut others = vec![];
    for i in 0..6 {
        let r = t.create("alice", &p, "risks", json!({"title": format!("risk {i}")})).await;
        let e = json!({"from": {"kind": "risk", "id": r}, "relation": "threatens", "to": {"kind": "goal", "id": goal}});
        assert_eq!(t.call("alice", "POST", &format!("/projects/{p}/edges"), Some(e)).await.status, 201);
        others.push(r);
    }
    let before = t.version("alice", &p).await;
    let del = t.call("alice", "DELETE", &format!("/projects/{p}/goals/{goal}"), None).await;
    assert_eq!(del.status, 200, "{del:?}");
    assert_eq!(del.json["data"]["edges_removed"].as_array().unwrap().len(), 7);
    let changes = del.json["patch"]["changes"].as_array().unwrap();
    assert_eq!(changes.iter().filter(|c| c["op"] == "unlinked").count(), 7);
    assert_eq!(changes.last().unwrap()["op"], "deleted");
    let after = t.version("alice", &p).await;
    assert_eq!(del.json["patch"]["version"], after);
    assert!(after > before + 1, "a delete with many edges takes several steps, each one version");
    assert_eq!(t.get("alice", &format!("/projects/{p}/edges")).await.json["items"], json!([]));
    for r in &others {
        assert_eq!(t.get("alice", &format!("/projects/{p}/edges?entity_id={r}")).await.json["items"], json!([]));
    }

    // A few edges: one transaction, one version.
    let g2 = t.create("alice", &p, "goals", json!({"name": "G2"})).await;
    let e = json!({"from": {"kind": "task", "id": task}, "relation": "supports", "to": {"kind": "goal", "id": g2}});
    t.call("alice", "POST", &format!("/projects/{p}/edges"), Some(e)).await;
    let before = t.version("alice", &p).await;
    let del = t.call("alice", "DELETE", &format!("/projects/{p}/tasks/{task}"), None).await;
    assert_eq!(del.json["patch"]["version"], before + 1);
    assert_eq!(t.get("alice", &format!("/projects/{p}/edges")).await.json["items"], json!([]));
}

fn tree_shape(root: &Value) -> String {
    root.as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let kids = n["children"].as_array().map(|c| c.len()).unwrap_or(0);
            let id = n["id"].as_str().unwrap();
            if kids == 0 {
                format!("{id}@{}", n["order"])
            } else {
                format!("{id}@{}({})", n["order"], tree_shape(&n["children"]))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn the_document_tree_creates_moves_reorders_and_deletes_without_orphans() {
    let t = EntitiesTest::new().await;
    let (p, ctx) = t.project("alice", "P").await;
    let a = t.create("alice", &p, "documents", json!({"title": "A"})).await;
    let b = t.create("alice", &p, "documents", json!({"title": "B", "parent_id": a})).await;
    let c = t.create("alice", &p, "documents", json!({"title": "C", "parent_id": a, "position": 0})).await;
    let d = t.create("alice", &p, "documents", json!({"title": "D", "parent_id": b})).await;
    let tree = t.get("alice", &format!("/projects/{p}/doc-structure")).await;
    assert_eq!(tree_shape(&tree.json["root"]), format!("{ctx}@0 {a}@1({c}@0 {b}@1({d}@0))"));
    assert_eq!(tree.json["version"], t.version("alice", &p).await);

    let mv = |doc: &str, parent: Option<&str>, pos: Option<u32>| json!({"document_id": doc, "new_parent_id": parent, "position": pos});
    let url = format!("/projects/{p}/doc-structure/move");
    let before = t.version("alice", &p).await;
    let cyc = t.call("alice", "POST", &url, Some(mv(&a, Some(&d), None))).await;
    assert_eq!((cyc.status, cyc.code()), (422, "tree_cycle"));
    let selfcyc = t.call("alice", "POST", &url, Some(mv(&a, Some(&a), None))).await;
    assert_eq!(selfcyc.code(), "tree_cycle");
    assert_eq!(t.version("alice", &p).await, before, "a refused move writes nothing");

    let moved = t.call("alice", "POST", &url, Some(mv(&d, None, Some(0)))).await;
    assert_eq!(moved.status, 200, "{moved:?}");
    assert_eq!(tree_shape(&moved.json["data"]["root"]), format!("{d}@0 {ctx}@1 {a}@2({c}@0 {b}@1)"));
    assert_eq!(moved.json["patch"]["doc_structure"], moved.json["data"]);
    let reordered = t.call("alice", "POST", &url, Some(mv(&b, Some(&a), Some(0)))).await;
    assert_eq!(tree_shape(&reordered.json["data"]["root"]), format!("{d}@0 {ctx}@1 {a}@2({b}@0 {c}@1)"));
    let under = t.call("alice", "POST", &url, Some(mv(&d, Some(&c), None))).await;
    assert_eq!(tree_shape(&under.json["data"]["root"]), format!("{ctx}@0 {a}@1({b}@0 {c}@1({d}@0))"));

    // Deleting a document with children: they take its place under its parent.
    let del = t.call("alice", "DELETE", &format!("/projects/{p}/documents/{a}"), None).await;
    assert_eq!(del.status, 200, "{del:?}");
    assert_eq!(tree_shape(&del.json["patch"]["doc_structure"]["root"]), format!("{ctx}@0 {b}@1 {c}@2({d}@0)"));
    let tree = t.get("alice", &format!("/projects/{p}/doc-structure")).await;
    assert_eq!(tree_shape(&tree.json["root"]), format!("{ctx}@0 {b}@1 {c}@2({d}@0)"));

    let ctx_del = t.call("alice", "DELETE", &format!("/projects/{p}/documents/{ctx}"), None).await;
    assert_eq!((ctx_del.status, ctx_del.code()), (409, "context_document_protected"));
    let orphan =
        t.call("alice", "POST", &format!("/projects/{p}/documents"), Some(json!({"title": "X", "parent_id": a}))).await;
    assert_eq!((orphan.status, orphan.code()), (422, "parent_not_found"));
}

/// `POST /projects/{id}/reorganize` on DynamoDB Local: refused whole (stale,
/// past one transaction, any bad part), else one version for every change.
/// A concurrent edit is the contract suite's (`a_reorganize_is_all_or_nothing`).
#[tokio::test]
async fn reorganize_moves_and_relinks_in_one_version_or_not_at_all() {
    let t = EntitiesTest::new().await;
    let (p, ctx) = t.project("alice", "P").await;
    let a = t.create("alice", &p, "documents", json!({"title": "A"})).await;
    let b = t.create("alice", &p, "documents", json!({"title": "B"})).await;
    let (t1, t2) = (
        t.create("alice", &p, "tasks", json!({"title": "t1"})).await,
        t.create("alice", &p, "tasks", json!({"title": "t2"})).await,
    );
    let g = t.create("alice", &p, "goals", json!({"name": "G"})).await;
    let edge = |from: &str, to: &str| json!({"from": {"kind": "task", "id": from}, "relation": "supports", "to": {"kind": "goal", "id": to}});
    assert_eq!(t.call("alice", "POST", &format!("/projects/{p}/edges"), Some(edge(&t1, &g))).await.status, 201);
    let url = format!("/projects/{p}/reorganize");
    let v = t.version("alice", &p).await;
    let edges_now = || async { t.get("alice", &format!("/projects/{p}/edges")).await.json["items"].clone() };
    let before = edges_now().await;
    let batch = |version: u64| {
        json!({"expected_version": version, "moves": [{"document_id": b, "new_parent_id": a}],
               "unlink": [edge(&t1, &g)], "link": [edge(&t2, &g)]})
    };

    let stale = t.call("alice", "POST", &url, Some(batch(v - 1))).await;
    assert_eq!(
        (stale.status, stale.code(), &stale.json["error"]["current_version"]),
        (409, "version_conflict", &json!(v))
    );
    let mut wide = batch(v);
    let more: Vec<Value> = (0..4).map(|_| edge(&t2, &g)).collect();
    wide["link"] = json!(more);
    let over = t.call("alice", "POST", &url, Some(wide)).await;
    assert_eq!((over.status, over.code()), (400, "too_many_changes"), "{over:?}");
    assert!(over.json["error"]["message"].as_str().unwrap().contains("at most 4"), "{over:?}");
    let missing = shared::ids::EntityId::new().to_string();
    // Each a valid batch but for one part; each refuses it whole.
    let mv = |doc: &str, parent: &str| json!([{"document_id": doc, "new_parent_id": parent}]);
    let parts = [
        (json!({"moves": mv(&a, &a), "link": [edge(&t2, &g)]}), 422, "tree_cycle"),
        (json!({"moves": mv(&missing, &a), "link": [edge(&t2, &g)]}), 404, "entity_not_found"),
        (json!({"moves": mv(&b, &a), "unlink": [edge(&t2, &g)]}), 404, "edge_not_found"),
        (json!({"moves": mv(&b, &a), "link": [edge(&t2, &g), edge(&t1, &g)]}), 409, "edge_exists"),
        (json!({"moves": mv(&b, &a), "link": [edge(&t2, &g), edge(&missing, &g)]}), 422, "edge_endpoint_not_found"),
        (json!({"moves": mv(&b, &a), "link": [edge(&t2, &t2)]}), 422, "edge_self_loop"),
        (json!({"unlink": [edge(&t1, &g)], "link": [edge(&t1, &g)]}), 400, "invalid_value"),
    ];
    for (body, status, code) in parts {
        let r = t.call("alice", "POST", &url, Some(body.clone())).await;
        assert_eq!((r.status, r.code()), (status, code), "{body}: {r:?}");
    }
    for (body, code) in [(json!({}), "invalid_value"), (json!({"moves": [], "shuffle": true}), "unknown_field")] {
        let r = t.call("alice", "POST", &url, Some(body)).await;
        assert_eq!((r.status, r.code()), (400, code), "{r:?}");
    }
    assert_eq!(t.version("alice", &p).await, v, "nothing refused wrote anything");
    assert_eq!(edges_now().await, before);
    let tree = t.get("alice", &format!("/projects/{p}/doc-structure")).await;
    assert_eq!(tree_shape(&tree.json["root"]), format!("{ctx}@0 {a}@1 {b}@2"));

    let ok = t.call("alice", "POST", &url, Some(batch(v))).await;
    assert_eq!(ok.status, 200, "{ok:?}");
    assert_eq!(ok.json["patch"]["version"], v + 1);
    assert_eq!(t.version("alice", &p).await, v + 1, "one version for the batch");
    let ops: Vec<&str> =
        ok.json["patch"]["changes"].as_array().unwrap().iter().map(|c| c["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["unlinked", "linked"]);
    assert_eq!(ok.json["patch"]["doc_structure"], ok.json["data"]["doc_structure"]);
    assert_eq!(tree_shape(&ok.json["data"]["doc_structure"]["root"]), format!("{ctx}@0 {a}@1({b}@0)"));
    assert_eq!(edges_now().await, json!([edge(&t2, &g)]));
}

#[tokio::test]
async fn metadata_batch_never_returns_content() {
    let t = EntitiesTest::new().await;
    let (p, ctx) = t.project("alice", "P").await;
    let a =
        t.create("alice", &p, "documents", json!({"title": "A", "description": "about a", "content": "héllo"})).await;
    let task = t.create("alice", &p, "tasks", json!({"title": "not a doc"})).await;
    let a2 = t
        .call(
            "alice",
            "POST",
            &format!("/projects/{p}/documents/metadata"),
            Some(json!({"document_ids": [a, "missing-id", task, ctx]})),
        )
        .await;
    assert_eq!(a2.status, 200, "{a2:?}");
    let docs = a2.json["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 2, "unknown ids and non-documents are left out");
    assert_eq!(docs[0]["id"], a.as_str());
    assert_eq!(docs[0]["title"], "A");
    assert_eq!(docs[0]["description"], "about a");
    assert_eq!(docs[0]["content_length"], 6);
    assert!(docs[0]["updated_at"].as_i64().unwrap() > 0);
    assert!(docs.iter().all(|d| d.get("content").is_none()));
    // Lists never carry content either.
    let listed = t.get("alice", &format!("/projects/{p}/documents")).await;
    assert!(listed.json["items"].as_array().unwrap().iter().all(|d| d.get("content").is_none()));
}

#[tokio::test]
async fn a_document_of_more_than_a_mebibyte_survives_intact() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "P").await;
    // Multi-byte characters straddle the chunk boundaries.
    let content: String = (0..(1024 * 1024 / 8 + 100)).map(|i| format!("é{:05}\n", i % 100_000)).collect();
    assert!(content.len() > 1024 * 1024);
    let id = t.create("alice", &p, "documents", json!({"title": "Big", "content": content})).await;
    let got = t.get("alice", &format!("/projects/{p}/documents/{id}")).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json["content_length"], content.len());
    assert!(got.json["content"].as_str().unwrap() == content, "content differs");

    let replaced = format!("{content}and more");
    let upd =
        t.call("alice", "PATCH", &format!("/projects/{p}/documents/{id}"), Some(json!({"content": replaced}))).await;
    assert_eq!(upd.status, 200);
    let got = t.get("alice", &format!("/projects/{p}/documents/{id}")).await;
    assert!(got.json["content"].as_str().unwrap() == replaced);
    // The old revision's chunks are gone: only the new one's remain.
    let chunks = t
        .dynamo
        .query()
        .table_name(&t.table)
        .key_condition_expression("pk = :pk AND begins_with(sk, :c)")
        .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(format!("U#alice#P#{p}")))
        .expression_attribute_values(":c", aws_sdk_dynamodb::types::AttributeValue::S(format!("C#{id}#")))
        .send()
        .await
        .unwrap();
    assert_eq!(chunks.count as usize, replaced.len().div_ceil(shared::entities::store::CHUNK_BYTES));
}

#[tokio::test]
async fn stale_versions_get_409_and_write_nothing() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "P").await;
    let id = t.create("alice", &p, "tasks", json!({"title": "v1"})).await;
    let url = format!("/projects/{p}/tasks/{id}");
    let first = t.call("alice", "PATCH", &url, Some(json!({"title": "mine", "expected_version": 1}))).await;
    assert_eq!(first.status, 200);
    let before = t.version("alice", &p).await;
    let second = t.call("alice", "PATCH", &url, Some(json!({"title": "theirs", "expected_version": 1}))).await;
    assert_eq!((second.status, second.code()), (409, "version_conflict"));
    assert_eq!(second.json["error"]["current_version"], 2);
    let via_header =
        t.raw(Some("alice"), "PATCH", &url, br#"{"title":"theirs"}"#.to_vec(), &[("if-match", "W/\"1\"")]).await;
    assert_eq!(via_header.status, 409);
    let del = t.raw(Some("alice"), "DELETE", &url, vec![], &[("if-match", "1")]).await;
    assert_eq!(del.status, 409);
    assert_eq!(t.get("alice", &url).await.json["fields"]["title"], "mine");
    assert_eq!(t.version("alice", &p).await, before, "nothing written");

    // The project's own updates compare against the project version.
    let stale = t
        .raw(Some("alice"), "PATCH", &format!("/projects/{p}"), br#"{"name":"x"}"#.to_vec(), &[("if-match", "1")])
        .await;
    assert_eq!((stale.status, stale.json["error"]["current_version"].as_u64()), (409, Some(before)));

    // Concurrent writers to one project are serialized: every write lands once.
    let svc = t.app.service.clone();
    let user = UserId::parse("alice").unwrap();
    let pid = ProjectId::parse(p.clone()).unwrap();
    let writes = (0..8).map(|i| {
        let (svc, user, pid) = (svc.clone(), user.clone(), pid.clone());
        tokio::spawn(async move {
            let f = TaskFields {
                title: format!("c{i}"),
                description: None,
                state: TaskState::Todo,
                priority: None,
                due_at: None,
            };
            svc.create(&user, &pid, CreateEntity::new(EntityFields::Task(f))).await.map(|w| w.patch.version)
        })
    });
    let mut versions: Vec<u64> = vec![];
    for w in writes {
        versions.push(w.await.unwrap().expect("each concurrent create lands"));
    }
    versions.sort();
    assert_eq!(versions, (before + 1..=before + 8).collect::<Vec<_>>(), "one version per write, none repeated");
}

#[tokio::test]
async fn bad_input_is_refused_with_a_code_and_nothing_written() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "P").await;
    let task = t.create("alice", &p, "tasks", json!({"title": "t"})).await;
    let before = t.version("alice", &p).await;
    let post = |path: String, body: Value| {
        let t = &t;
        async move { t.call("alice", "POST", &path, Some(body)).await }
    };
    let cases: Vec<(tests::entities::Answer, u16, &str)> = vec![
        (post(format!("/projects/{p}/widgets"), json!({"title": "x"})).await, 400, "unknown_kind"),
        (post(format!("/projects/{p}/tasks"), json!({"description": "no title"})).await, 400, "missing_field"),
        (post(format!("/projects/{p}/tasks"), json!({"title": 5})).await, 400, "wrong_type"),
        (post(format!("/projects/{p}/tasks"), json!({"title": "x", "colour": "red"})).await, 400, "unknown_field"),
        (post(format!("/projects/{p}/tasks"), json!({"title": "  "})).await, 400, "invalid_value"),
        (post(format!("/projects/{p}/tasks"), json!({"title": "x", "priority": 9})).await, 400, "invalid_value"),
        (post(format!("/projects/{p}/goals"), json!({"name": "x", "content": "docs only"})).await, 400, "unknown_field"),
        (post("/projects".into(), json!({"name": "x", "owner": "bob"})).await, 400, "unknown_field"),
        (
            t.raw(Some("alice"), "POST", &format!("/projects/{p}/tasks"), b"{not json".to_vec(), &[]).await,
            400,
            "invalid_json",
        ),
        (
            t.call("alice", "PATCH", &format!("/projects/{p}/tasks/{task}"), Some(json!({"title": null}))).await,
            400,
            "missing_field",
        ),
        (
            t.call("alice", "PATCH", &format!("/projects/{p}/tasks/{task}"), Some(json!({"state": 3}))).await,
            400,
            "wrong_type",
        ),
        (
            t.call("alice", "PATCH", &format!("/projects/{p}/tasks/{task}"), Some(json!({"nope": 1}))).await,
            400,
            "unknown_field",
        ),
        (t.get("alice", &format!("/projects/{p}/tasks/bad*id")).await, 400, "invalid_id"),
        (t.get("alice", "/projects/bad*id").await, 400, "invalid_id"),
        (
            post(format!("/projects/{p}/documents"), json!({"title": "x", "parent_id": "a#b"})).await,
            400,
            "invalid_id",
        ),
        (
            post(
                format!("/projects/{p}/edges"),
                json!({"from": {"kind": "task", "id": task}, "relation": "blocks", "to": {"kind": "goal", "id": "nope"}}),
            )
            .await,
            422,
            "edge_endpoint_not_found",
        ),
        (
            post(
                format!("/projects/{p}/edges"),
                json!({"from": {"kind": "goal", "id": task}, "relation": "blocks", "to": {"kind": "task", "id": task}}),
            )
            .await,
            422,
            "edge_self_loop",
        ),
        (
            post(
                format!("/projects/{p}/edges"),
                json!({"from": {"kind": "task", "id": task}, "relation": "Bad Rel", "to": {"kind": "goal", "id": "g"}}),
            )
            .await,
            400,
            "invalid_value",
        ),
        (
            post(format!("/projects/{p}/doc-structure/move"), json!({"document_id": task})).await,
            404,
            "entity_not_found",
        ),
        (
            t.raw(Some("alice"), "POST", &format!("/projects/{p}/documents"), vec![b' '; 3 * 1024 * 1024 + 1], &[]).await,
            413,
            "too_large",
        ),
        (t.get("alice", "/nowhere").await, 404, "route_not_found"),
        (t.call("alice", "PUT", "/projects", None).await, 405, "method_not_allowed"),
        (t.raw(None, "GET", "/projects", vec![], &[]).await, 401, "missing_token"),
    ];
    for (i, (a, status, code)) in cases.iter().enumerate() {
        assert_eq!((a.status, a.code()), (*status, *code), "case {i}: {a:?}");
        assert!(!a.json["error"]["message"].as_str().unwrap().is_empty());
    }
    // Too-large content inside an acceptable body.
    let big = "x".repeat(shared::entities::service::MAX_CONTENT_BYTES + 1);
    let a = post(format!("/projects/{p}/documents"), json!({"title": "big", "content": big})).await;
    assert_eq!((a.status, a.code()), (413, "too_large"));
    assert_eq!(t.version("alice", &p).await, before, "nothing was written");
    assert_eq!(t.get("alice", &format!("/projects/{p}/tasks")).await.json["items"].as_array().unwrap().len(), 1);
    assert_eq!(t.get("alice", "/projects").await.json["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn another_users_ids_are_404_on_every_route() {
    let t = EntitiesTest::new().await;
    let (p, ctx) = t.project("alice", "Alice's").await;
    let mut ids = std::collections::HashMap::new();
    for kind in EntityKind::ALL {
        ids.insert(kind, t.create("alice", &p, kind.plural(), create_body(kind, "mine")).await);
    }
    t.project("bob", "Bob's").await;
    let before = t.version("alice", &p).await;
    let mut checked = 0;
    for rt in routes() {
        if !rt.path.contains("{project_id}") {
            continue;
        }
        let kind = EntityKind::ALL.into_iter().find(|k| rt.path.contains(&format!("/{}", k.plural())));
        let path =
            rt.path.replace("{project_id}", &p).replace("{entity_id}", kind.map(|k| ids[&k].as_str()).unwrap_or(""));
        let body = match (rt.method.as_str(), rt.body.as_deref()) {
            (_, Some("Edge")) => Some(json!({
                "from": {"kind": "task", "id": ids[&EntityKind::Task]}, "relation": "r",
                "to": {"kind": "goal", "id": ids[&EntityKind::Goal]}})),
            (_, Some("MoveDocument")) => Some(json!({"document_id": ctx})),
            (_, Some("Reorganize")) => Some(json!({"moves": [{"document_id": ctx}]})),
            (_, Some("MetadataRequest")) => Some(json!({"document_ids": [ctx]})),
            (_, Some("NewProject" | "ProjectFields")) => Some(json!({"name": "stolen"})),
            (_, Some(_)) => Some(kind.map(|k| create_body(k, "stolen")).unwrap_or(json!({}))),
            _ => None,
        };
        let a = t.call("bob", rt.method.as_str(), &path, body).await;
        assert_eq!((a.status, a.code()), (404, "project_not_found"), "{} {path}: {a:?}", rt.method);
        checked += 1;
    }
    assert_eq!(checked, 10 + 5 * 7, "every project-scoped route");
    let s = t.get("bob", &format!("/search?q=mine&project_id={p}")).await;
    assert_eq!((s.status, s.code()), (404, "project_not_found"));
    assert!(t.get("bob", "/search?q=mine").await.json["hits"].as_array().unwrap().is_empty());
    let bobs = t.get("bob", "/projects").await;
    assert_eq!(bobs.json["items"].as_array().unwrap().len(), 1);
    assert_eq!(bobs.json["items"][0]["name"], "Bob's");
    // A project id that exists nowhere answers the same.
    let missing = t.get("alice", "/projects/no-such-project").await;
    assert_eq!((missing.status, missing.code()), (404, "project_not_found"));
    assert_eq!(t.version("alice", &p).await, before, "bob changed nothing");
}

#[tokio::test]
async fn the_openapi_document_parses_lists_every_route_and_matches_the_docs_copy() {
    let t = EntitiesTest::new().await;
    let a = t.raw(None, "GET", "/openapi.json", vec![], &[]).await;
    assert_eq!(a.status, 200);
    let doc = &a.json;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for rt in routes() {
        let op = &doc["paths"][&rt.path][rt.method.as_str().to_lowercase()];
        assert!(op.is_object(), "{} {} is in the document", rt.method, rt.path);
    }
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in ["Entity", "EntityPatch", "Project", "TaskFields", "NewDocument", "Edge", "DocStructure", "Error"] {
        assert!(schemas.contains_key(name), "{name} is a component");
    }
    // Every $ref points at a component.
    let text = serde_json::to_string(doc).unwrap();
    for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = part.split('"').next().unwrap();
        assert!(schemas.contains_key(name), "dangling $ref {name}");
    }

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
    let served = openapi_json();
    if std::env::var("UPDATE_OPENAPI").is_ok() {
        std::fs::write(&path, format!("{served}\n")).unwrap();
    }
    let copy = std::fs::read_to_string(&path).expect("docs/openapi.json exists");
    assert_eq!(
        copy.trim_end(),
        served,
        "docs/openapi.json is stale: regenerate it with UPDATE_OPENAPI=1 bash scripts/test.sh -E 'binary(entities)'"
    );
}

/// A request through the real handler, with the answer's headers: (status,
/// `Allow`, error code).
async fn with_headers(t: &EntitiesTest, method: &str, uri: &str) -> (u16, Option<String>, String) {
    use http_body_util::BodyExt;
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {}", tests::token("alice")))
        .body(lambda_http::Body::Empty)
        .unwrap();
    let resp = shared::edge::entities::handle_entities(&t.app, lambda_http::Request::from(req)).await;
    let status = resp.status().as_u16();
    let allow = resp.headers().get("allow").map(|v| v.to_str().unwrap().to_string());
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, allow, json["error"]["code"].as_str().unwrap_or("").to_string())
}

/// RFC 9110 §15.5.6: a 405 names the methods the path takes in `Allow`. Every
/// documented path, every method it does not take, including a POST to
/// `/doc-structure` (was read as a kind: 400 unknown_kind) and a GET of
/// `/documents/metadata` (was read as a document id).
#[tokio::test]
async fn undeclared_methods_get_405_with_allow_naming_the_paths_methods() {
    let t = EntitiesTest::new().await;
    let (p, doc) = t.project("alice", "P").await;
    let mut by_path: Vec<(String, Vec<String>)> = vec![];
    for rt in routes() {
        match by_path.iter_mut().find(|(path, _)| *path == rt.path) {
            Some((_, methods)) => methods.push(rt.method.to_string()),
            None => by_path.push((rt.path.clone(), vec![rt.method.to_string()])),
        }
    }
    let mut checked = 0;
    for (template, methods) in &by_path {
        let uri = template.replace("{project_id}", &p).replace("{entity_id}", &doc);
        let expected = if template.ends_with("/documents/metadata") { "POST".to_string() } else { methods.join(", ") };
        for m in ["GET", "POST", "PUT", "PATCH", "DELETE", "TRACE"] {
            if methods.iter().any(|x| x == m) {
                continue;
            }
            let (status, allow, code) = with_headers(&t, m, &uri).await;
            assert_eq!((status, code.as_str()), (405, "method_not_allowed"), "{m} {template}");
            assert_eq!(allow.as_deref(), Some(expected.as_str()), "{m} {template}");
            checked += 1;
        }
    }
    assert!(checked >= 3 * by_path.len(), "every path takes at most 3 of the 6 methods: {checked}");
    let (status, allow, _) = with_headers(&t, "GET", &format!("/projects/{p}/documents/metadata")).await;
    assert_eq!((status, allow.as_deref()), (405, Some("POST")));
}

/// Clients percent-encode the `:`, `|` and `@` ids may hold; the server reads
/// the decoded id (it answered 400 invalid_id to every escaped id).
#[tokio::test]
async fn ids_in_the_path_are_percent_decoded() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "P").await;
    let escaped = p.replace('-', "%2D");
    let a = t.get("alice", &format!("/projects/{escaped}")).await;
    assert_eq!((a.status, a.json["id"].as_str()), (200, Some(p.as_str())), "{a:?}");
    let a = t.get("alice", &format!("/projects/{p}/tasks/a%3Ab%7Cc%40d")).await;
    assert_eq!((a.status, a.code()), (404, "entity_not_found"), "a well-formed id that is not there");
    let a = t.get("alice", &format!("/projects/{p}/tasks/a%23b")).await;
    assert_eq!((a.status, a.code()), (400, "invalid_id"), "`#` is still refused once decoded");
}

/// JSON Schema's integers are values: `2.0` and `-5.0` are the integers 2 and
/// -5, as the document's `type: integer` says (they were 400 wrong_type).
/// Every integer field has the range the document states, enforced exactly.
#[tokio::test]
async fn integers_are_read_by_value_within_the_documented_range() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "P").await;
    let tasks = format!("/projects/{p}/tasks");
    let a = t.call("alice", "POST", &tasks, Some(json!({"title": "t", "priority": 2.0, "due_at": -5.0}))).await;
    assert_eq!(a.status, 201, "{a:?}");
    assert_eq!((&a.json["data"]["fields"]["priority"], &a.json["data"]["fields"]["due_at"]), (&json!(2), &json!(-5)));
    let id = a.json["data"]["id"].as_str().unwrap().to_string();
    let refused = [
        json!({"title": "t", "priority": 2.5}),
        json!({"title": "t", "priority": 0}),
        json!({"title": "t", "priority": 6.0}),
        json!({"title": "t", "due_at": 9_007_199_254_740_992_i64}),
        json!({"title": "t", "due_at": -9_007_199_254_740_992_i64}),
    ];
    for body in refused {
        let a = t.call("alice", "POST", &tasks, Some(body.clone())).await;
        assert_eq!((a.status, a.code()), (400, "invalid_value"), "{body}: {a:?}");
    }
    let ok = t.call("alice", "POST", &tasks, Some(json!({"title": "t", "due_at": 9_007_199_254_740_991_i64}))).await;
    assert_eq!(ok.status, 201, "2^53 - 1 is the largest");

    // Positions: 0 to u32::MAX, past the last sibling means last.
    let docs = format!("/projects/{p}/documents");
    for position in [json!(0.0), json!(4_294_967_295_u64)] {
        let a = t.call("alice", "POST", &docs, Some(json!({"title": "d", "position": position}))).await;
        assert_eq!(a.status, 201, "{position}: {a:?}");
    }
    for position in [json!(4_294_967_296_u64), json!(-1), json!(0.5)] {
        let a = t.call("alice", "POST", &docs, Some(json!({"title": "d", "position": position}))).await;
        assert_eq!((a.status, a.code()), (400, "invalid_value"), "{position}: {a:?}");
    }

    // expected_version and ?limit= too.
    let url = format!("{tasks}/{id}");
    let a = t.call("alice", "PATCH", &url, Some(json!({"title": "u", "expected_version": 1.0}))).await;
    assert_eq!(a.status, 200, "{a:?}");
    let a = t.get("alice", &format!("{tasks}?limit=2.0")).await;
    assert_eq!((a.status, a.json["items"].as_array().map(Vec::len)), (200, Some(2)), "{a:?}");
    for bad in ["", "0", "101", "2.5", "x"] {
        let a = t.get("alice", &format!("{tasks}?limit={bad}")).await;
        assert_eq!((a.status, a.code()), (400, "invalid_value"), "limit={bad}");
    }
}

/// `If-Match` is read as the document states it: `*` asks for no check (it
/// was 400); two expected versions that disagree cannot both be current: a
/// 409 naming the current one (it was 400), and nothing is written.
#[tokio::test]
async fn if_match_reads_the_documented_grammar_and_a_disagreement_is_a_conflict() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "P").await;
    let id = t.create("alice", &p, "tasks", json!({"title": "v1"})).await;
    let url = format!("/projects/{p}/tasks/{id}");
    let patch = |body: Value, if_match: &'static str| {
        let (t, url) = (&t, url.clone());
        async move {
            t.raw(Some("alice"), "PATCH", &url, serde_json::to_vec(&body).unwrap(), &[("if-match", if_match)]).await
        }
    };
    let a = patch(json!({"title": "v2"}), "*").await;
    assert_eq!(a.status, 200, "{a:?}");
    for bad in ["", "W/2", "\"2", "2.0", "-2"] {
        let a = patch(json!({"title": "x"}), bad).await;
        assert_eq!((a.status, a.code()), (400, "invalid_value"), "If-Match: {bad:?}");
    }
    let before = t.version("alice", &p).await;
    for (header, body) in [("2", 1), ("1", 2)] {
        let a = patch(json!({"title": "x", "expected_version": body}), header).await;
        assert_eq!((a.status, a.code()), (409, "version_conflict"), "If-Match {header}, expected_version {body}");
        assert_eq!(a.json["error"]["current_version"], 2);
    }
    let a = t
        .raw(
            Some("alice"),
            "PATCH",
            &format!("/projects/{p}"),
            br#"{"expected_version":1}"#.to_vec(),
            &[("if-match", "2")],
        )
        .await;
    assert_eq!((a.status, a.json["error"]["current_version"].as_u64()), (409, Some(before)));
    assert_eq!(t.version("alice", &p).await, before, "nothing written");
    assert_eq!(t.get("alice", &url).await.json["fields"]["title"], "v2");
}

/// `q` is 1 to 200 characters as sent, not blank (the server counted it after
/// trimming and lowercasing: 200 `İ` were refused, 201 characters with
/// padding accepted).
#[tokio::test]
async fn the_search_query_is_counted_as_sent() {
    let t = EntitiesTest::new().await;
    t.project("alice", "P").await;
    let q = |s: &str| format!("/search?q={}", s.replace(' ', "%20"));
    assert_eq!(t.get("alice", &q(&"İ".repeat(200))).await.status, 200);
    for bad in [format!("a{}", " ".repeat(200)), "   ".to_string(), "x".repeat(201)] {
        let a = t.get("alice", &q(&bad)).await;
        assert_eq!((a.status, a.code()), (400, "invalid_value"), "{} chars", bad.chars().count());
    }
}

/// A well-formed cursor whose project is gone cannot be continued from: 404
/// cursor_not_found (it was 400 invalid_id, for a request the document allows).
#[tokio::test]
async fn a_projects_cursor_whose_project_is_gone_is_404() {
    let t = EntitiesTest::new().await;
    let (first, _) = t.project("alice", "A").await;
    t.project("alice", "B").await;
    let page = t.get("alice", "/projects?limit=1").await;
    assert_eq!(page.json["next_cursor"], first.as_str());
    assert_eq!(t.call("alice", "DELETE", &format!("/projects/{first}"), None).await.status, 200);
    let a = t.get("alice", &format!("/projects?cursor={first}")).await;
    assert_eq!((a.status, a.code()), (404, "cursor_not_found"), "{a:?}");
    let a = t.get("alice", "/projects?cursor=bad*id").await;
    assert_eq!((a.status, a.code()), (400, "invalid_id"));
}

/// A body that is not UTF-8 is not JSON: 400 invalid_json from the handler,
/// whatever the content type (a function URL hands it over base64-encoded;
/// `cargo lambda watch` refuses it itself with a 500, see docs/entities.md).
#[tokio::test]
async fn a_body_that_is_not_utf8_is_400_invalid_json() {
    let t = EntitiesTest::new().await;
    let (p, _) = t.project("alice", "P").await;
    let before = t.version("alice", &p).await;
    for body in [vec![0xff, 0xfe, 0x17], b"{\"title\": \"\xff\"}".to_vec(), b"\"\xc3".to_vec()] {
        for path in [format!("/projects/{p}/tasks"), format!("/projects/{p}"), "/projects".to_string()] {
            let method = if path.ends_with(&p) { "PATCH" } else { "POST" };
            let a = t.raw(Some("alice"), method, &path, body.clone(), &[]).await;
            assert_eq!((a.status, a.code()), (400, "invalid_json"), "{method} {path} {body:?}");
        }
    }
    assert_eq!(t.version("alice", &p).await, before);
}

/// The document states the rules: no catch-all `default` answer (each
/// operation lists its statuses), bearer security on every route but this
/// document, ids in paths with the id schema, and the integer ranges and
/// text rules of `shared::entities::rules`.
#[tokio::test]
async fn the_document_states_each_rule_the_server_enforces() {
    use shared::entities::rules;
    let doc: Value = serde_json::from_str(&openapi_json()).unwrap();
    for rt in routes() {
        let op = &doc["paths"][&rt.path][rt.method.as_str().to_lowercase()];
        let responses = op["responses"].as_object().unwrap();
        assert!(!responses.contains_key("default"), "{} {}", rt.method, rt.path);
        assert!(responses.contains_key(&rt.status.to_string()));
        if rt.path == "/openapi.json" {
            assert!(op.get("security").is_none());
            continue;
        }
        assert_eq!(op["security"], json!([{"bearer": []}]), "{} {}", rt.method, rt.path);
        for status in ["401", "413", "503"] {
            assert!(responses.contains_key(status), "{} {} lists {status}", rt.method, rt.path);
        }
        for p in op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "path") {
            let id = match p["name"].as_str() {
                Some("project_id") => "ProjectId",
                Some("event_id") => "EventId",
                _ => "EntityId",
            };
            assert_eq!(p["schema"]["$ref"], format!("#/components/schemas/{id}"));
        }
        if rt.takes_if_match() {
            assert!(responses.contains_key("409"), "{} {} lists 409", rt.method, rt.path);
        }
    }
    let s = &doc["components"]["schemas"];
    let range = |v: &Value| (v["minimum"].as_i64().unwrap() as i128, v["maximum"].as_u64().unwrap() as i128);
    for schema in ["NewDocument", "MoveDocument"] {
        assert_eq!(range(&s[schema]["properties"]["position"]), (rules::POSITION.min, rules::POSITION.max));
    }
    assert_eq!(range(&s["TaskFields"]["properties"]["priority"]), (1, 5));
    assert_eq!(range(&s["TaskPatch"]["properties"]["expected_version"]), (0, rules::MAX_SAFE_INTEGER));
    assert_eq!(s["Name"]["pattern"], rules::not_blank_pattern());
    assert_eq!(s["Name"]["maxLength"], rules::NAME.max_chars);
    assert_eq!(s["Edge"]["properties"]["relation"]["pattern"], rules::relation_pattern());
    assert!(s["TaskPatch"]["required"].is_null(), "a partial update requires nothing");
    assert_eq!(s["TaskPatch"]["additionalProperties"], false);
    let search = &doc["paths"]["/search"]["get"]["parameters"];
    let q = search.as_array().unwrap().iter().find(|p| p["name"] == "q").unwrap();
    assert_eq!(q["schema"]["maxLength"], rules::SEARCH_QUERY.max_chars);
}
