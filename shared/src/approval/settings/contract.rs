//! The [`ApprovalSettingsStore`] contract, written once and run against
//! both implementations: the in-memory twin in `cargo test -p shared --lib`,
//! the DynamoDB store against DynamoDB Local (`tests/tests/contract_features.rs`).

use super::{ApprovalSettings, ApprovalSettingsStore};
use crate::store::gate::fresh_user;

/// Nothing stored reads as the defaults; a put replaces the whole record
/// (an empty list too); another user's settings are their own.
pub async fn settings_are_the_users_own_and_replaced_whole(store: &dyn ApprovalSettingsStore) {
    let (alice, bob) = (fresh_user(), fresh_user());
    assert_eq!(store.get(&alice).await.unwrap(), ApprovalSettings::default());
    let some = ApprovalSettings { ask_first: vec!["create_task".into(), "update_entity".into()] };
    store.put(&alice, &some).await.unwrap();
    assert_eq!(store.get(&alice).await.unwrap(), some);
    assert_eq!(store.get(&bob).await.unwrap(), ApprovalSettings::default(), "bob's are his own");
    store.put(&alice, &ApprovalSettings::default()).await.unwrap();
    assert_eq!(store.get(&alice).await.unwrap(), ApprovalSettings::default(), "cleared");
}

/// The contract's cases as `#[tokio::test]`s over `$setup().await`.
#[macro_export]
macro_rules! approval_settings_contract {
    ($setup:path) => {
        #[tokio::test]
        async fn approval_settings_are_the_users_own_and_replaced_whole() {
            $crate::approval::settings::contract::settings_are_the_users_own_and_replaced_whole(&$setup().await).await;
        }
    };
}

#[cfg(test)]
mod memory {
    async fn store() -> super::super::MemoryApprovalSettings {
        super::super::MemoryApprovalSettings::new()
    }
    crate::approval_settings_contract!(store);
}
