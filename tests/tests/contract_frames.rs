//! The frame log's contract suite (`shared::frames::contract`) against
//! DynamoDB Local: the same cases `cargo test -p shared` runs against the
//! in-memory twin, so the two logs cannot drift.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::frames::contract::{Leases, Subject};
use shared::frames::DynamoFrameLog;
use shared::ids::{SessionId, TurnId, UserId};
use shared::store::keys;
use std::sync::Arc;

/// The session item's lease fields, written as the session store writes
/// them (`UpdateItem sk=SESSION`): the log only reads them.
struct SessionItem {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl SessionItem {
    fn update(
        &self,
        user: &UserId,
        session: &SessionId,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(keys::session_pk(user, session)))
            .key("sk", AttributeValue::S(keys::SESSION_SK.into()))
    }
}

#[async_trait::async_trait]
impl Leases for SessionItem {
    async fn set(&self, user: &UserId, session: &SessionId, turn: &TurnId, until_ms: i64) {
        self.update(user, session)
            .update_expression("SET lease_turn = :t, lease_until = :u")
            .expression_attribute_values(":t", AttributeValue::S(turn.to_string()))
            .expression_attribute_values(":u", AttributeValue::N(until_ms.to_string()))
            .send()
            .await
            .expect("set the lease");
    }

    async fn release(&self, user: &UserId, session: &SessionId) {
        self.update(user, session).update_expression("REMOVE lease_turn, lease_until").send().await.expect("release");
    }

    async fn mark_deleting(&self, user: &UserId, session: &SessionId) {
        self.update(user, session)
            .update_expression("SET #st = :d")
            .expression_attribute_names("#st", "status")
            // The store's `DELETING` (crate-private there).
            .expression_attribute_values(":d", AttributeValue::S("deleting".into()))
            .send()
            .await
            .expect("mark deleting");
    }
}

/// A fresh table in DynamoDB Local, with the product's key scheme.
async fn dynamo() -> Subject {
    let client = tests::dynamo_client().await;
    let table = tests::fresh_table(&client).await;
    Subject {
        log: Arc::new(DynamoFrameLog::new(client.clone(), table.clone())),
        leases: Arc::new(SessionItem { client, table }),
    }
}

shared::frame_log_contract!(dynamo);
