//! The feature stores' contract suites against DynamoDB Local: the same cases
//! the in-memory twins pass in `cargo test -p shared --lib` (entities, plans,
//! agent state, summaries, the context cache, calendar events, approval
//! settings), so the two
//! cannot drift.
//! Sessions are plain session items written here, as the sessions store
//! leaves them: live (`status` active) or being deleted.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::agent_state::store::DynamoAgentStateStore;
use shared::calendar::store::DynamoEventStore;
use shared::context::cache::DynamoContextCache;
use shared::entities::store::DynamoEntityStore;
use shared::ids::{SessionId, UserId};
use shared::plan::store::DynamoPlanStore;
use shared::store::gate::SessionFixture;
use shared::store::keys::{session_pk, SESSION_SK};
use shared::summary::store::DynamoSummaryStore;
use tests::{dynamo_client, fresh_table};

/// Session items in the table the stores under test use.
struct Sessions {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl Sessions {
    async fn set_status(&self, user: &UserId, session: &SessionId, status: &str) {
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(session_pk(user, session)))
            .item("sk", AttributeValue::S(SESSION_SK.into()))
            .item("session_id", AttributeValue::S(session.to_string()))
            .item("status", AttributeValue::S(status.into()))
            .send()
            .await
            .expect("session item written");
    }
}

#[async_trait::async_trait]
impl SessionFixture for Sessions {
    async fn open(&self, user: &UserId, session: &SessionId) {
        self.set_status(user, session, "active").await
    }

    async fn begin_delete(&self, user: &UserId, session: &SessionId) {
        self.set_status(user, session, "deleting").await
    }
}

async fn table() -> (aws_sdk_dynamodb::Client, String) {
    let client = dynamo_client().await;
    let table = fresh_table(&client).await;
    (client, table)
}

mod entities {
    use super::*;

    async fn store() -> DynamoEntityStore {
        let (client, table) = table().await;
        DynamoEntityStore::new(client, table)
    }

    shared::entity_store_contract!(store);
}

mod plans {
    use super::*;

    async fn world() -> (DynamoPlanStore, Sessions) {
        let (client, table) = table().await;
        (DynamoPlanStore::new(client.clone(), table.clone()), Sessions { client, table })
    }

    shared::plan_store_contract!(world);
}

mod agent_state {
    use super::*;

    async fn world() -> (DynamoAgentStateStore, Sessions) {
        let (client, table) = table().await;
        (DynamoAgentStateStore::new(client.clone(), table.clone()), Sessions { client, table })
    }

    shared::agent_state_store_contract!(world);
}

mod summaries {
    use super::*;

    async fn world() -> (DynamoSummaryStore, DynamoAgentStateStore, Sessions) {
        let (client, table) = table().await;
        let states = DynamoAgentStateStore::new(client.clone(), table.clone());
        (DynamoSummaryStore::new(client.clone(), table.clone()), states, Sessions { client, table })
    }

    shared::summary_store_contract!(world);
}

mod context_cache {
    use super::*;

    async fn cache() -> DynamoContextCache {
        let (client, table) = table().await;
        DynamoContextCache::new(client, table)
    }

    shared::context_cache_contract!(cache);
}

mod calendar_events {
    use super::*;

    async fn store() -> DynamoEventStore {
        let (client, table) = table().await;
        DynamoEventStore::new(client, table)
    }

    shared::event_store_contract!(store);
}

mod approval_settings {
    use super::*;
    use shared::approval::settings::DynamoApprovalSettings;

    async fn store() -> DynamoApprovalSettings {
        let (client, table) = table().await;
        DynamoApprovalSettings::new(client, table)
    }

    shared::approval_settings_contract!(store);
}
