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
