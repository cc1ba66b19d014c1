//! [`ApprovalSettingsStore`] over DynamoDB (the item is described in the
//! module above).

use super::keys::{settings_pk, APPROVALS_SK};
use super::{ApprovalSettings, ApprovalSettingsStore};
use crate::ids::UserId;
use crate::store::attr::{backend, get_s, s};
use crate::store::StoreError;
use aws_sdk_dynamodb::Client;

#[derive(Clone)]
pub struct DynamoApprovalSettings {
    client: Client,
    table: String,
}

impl DynamoApprovalSettings {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into() }
    }
}

#[async_trait::async_trait]
impl ApprovalSettingsStore for DynamoApprovalSettings {
    async fn get(&self, user: &UserId) -> Result<ApprovalSettings, StoreError> {
        let out = (self.client.get_item().table_name(&self.table))
            .key("pk", s(settings_pk(user)))
            .key("sk", s(APPROVALS_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        let Some(data) = out.item.as_ref().and_then(|i| get_s(i, "data")) else {
            return Ok(ApprovalSettings::default());
        };
        serde_json::from_str(data).map_err(|e| StoreError::Corrupt(format!("approval settings: {e}")))
    }

    async fn put(&self, user: &UserId, settings: &ApprovalSettings) -> Result<(), StoreError> {
        let data = serde_json::to_string(settings).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        (self.client.put_item().table_name(&self.table))
            .item("pk", s(settings_pk(user)))
            .item("sk", s(APPROVALS_SK))
            .item("kind", s("approval_settings"))
            .item("data", s(data))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }
}
