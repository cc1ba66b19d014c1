//! The in-memory twin of [`super::DynamoApprovalSettings`].

use super::{ApprovalSettings, ApprovalSettingsStore};
use crate::ids::UserId;
use crate::store::StoreError;
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub struct MemoryApprovalSettings {
    by_user: Mutex<HashMap<UserId, ApprovalSettings>>,
}

impl MemoryApprovalSettings {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait::async_trait]
impl ApprovalSettingsStore for MemoryApprovalSettings {
    async fn get(&self, user: &UserId) -> Result<ApprovalSettings, StoreError> {
        Ok(self.by_user.lock().expect("not poisoned").get(user).cloned().unwrap_or_default())
    }

    async fn put(&self, user: &UserId, settings: &ApprovalSettings) -> Result<(), StoreError> {
        self.by_user.lock().expect("not poisoned").insert(user.clone(), settings.clone());
        Ok(())
    }
}
