//! The session stores' contract (`shared::session::store::contract`), run
//! against DynamoDB Local: the same cases the in-memory twin passes in
//! `cargo test -p shared --lib`, so the two cannot drift. One fresh table per
//! case, as every test here.

use shared::store::dynamo::DynamoStore;

async fn store() -> DynamoStore {
    let client = tests::dynamo_client().await;
    let table = tests::fresh_table(&client).await;
    DynamoStore::new(client, table)
}

shared::session_store_contract!(store().await);

/// A table made before the sessions had their own index (a local stack's
/// kept data: sessions keyed in `gsi1`): `create_table_if_missing` adds
/// `gsi2` and moves each session's keys there, so the listing still finds
/// them, most recent first, and a turn's lease moves them as usual.
#[tokio::test]
async fn a_table_from_before_the_sessions_index_gets_it_and_keeps_its_sessions() {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
        ProjectionType, ScalarAttributeType,
    };
    use shared::ids::{SessionId, TurnId, UserId};
    use shared::session::store::{Lease, Leases, Sessions};
    let client = tests::dynamo_client().await;
    let table = format!("t-{}", uuid::Uuid::new_v4().simple());
    let attr = |n: &str| {
        AttributeDefinition::builder().attribute_name(n).attribute_type(ScalarAttributeType::S).build().unwrap()
    };
    let key = |n: &str, t| KeySchemaElement::builder().attribute_name(n).key_type(t).build().unwrap();
    client
        .create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(vec![attr("pk"), attr("sk"), attr("gsi1pk"), attr("gsi1sk")]))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name("gsi1")
                .key_schema(key("gsi1pk", KeyType::Hash))
                .key_schema(key("gsi1sk", KeyType::Range))
                .projection(Projection::builder().projection_type(ProjectionType::All).build())
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let user = UserId::parse("alice").unwrap();
    let sessions = [(SessionId::new(), 1_000_000i64), (SessionId::new(), 2_000_000)];
    for (sid, at) in &sessions {
        let s = |v: String| AttributeValue::S(v);
        let n = |v: i64| AttributeValue::N(v.to_string());
        client
            .put_item()
            .table_name(&table)
            .item("pk", s(format!("U#{user}#S#{sid}")))
            .item("sk", s("SESSION".into()))
            .item("kind", s("session".into()))
            .item("gsi1pk", s(format!("U#{user}#SESSIONS")))
            .item("gsi1sk", s(format!("{at:013}#{sid}")))
            .item("user_id", s(user.to_string()))
            .item("session_id", s(sid.to_string()))
            .item("context_type", s("global".into()))
            .item("status", s("active".into()))
            .item("message_count", n(0))
            .item("created_at", n(*at))
            .item("last_activity_at", n(*at))
            .send()
            .await
            .unwrap();
    }
    DynamoStore::create_table_if_missing(&client, &table).await.expect("the index added");
    DynamoStore::create_table_if_missing(&client, &table).await.expect("and again: nothing to do");
    let store = DynamoStore::new(client, table);
    let listed = store.list_sessions(&user, 10, None).await.unwrap().sessions;
    let ids: Vec<_> = listed.iter().map(|v| v.id.clone()).collect();
    assert_eq!(ids, vec![sessions[1].0.clone(), sessions[0].0.clone()], "most recent first");
    let turn = TurnId::new();
    let lease = Lease { turn_id: turn, until_ms: shared::now_ms() + 60_000 };
    store.acquire_lease(&user, &sessions[0].0, &lease).await.unwrap();
    let listed = store.list_sessions(&user, 10, None).await.unwrap().sessions;
    assert_eq!(listed[0].id, sessions[0].0, "a turn moves it first");
}
