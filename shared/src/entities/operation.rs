//! What an operation on the ontology does, as `operation` events and a
//! plan's pending changes name it.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationAction {
    List,
    Search,
    Read,
    Create,
    Update,
    Delete,
}

/// Where a step of a tool call is: begun, or ended well or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    Start,
    Success,
    Error,
}
