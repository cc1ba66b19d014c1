//! Why an ontology operation was refused. Each error has a stable machine
//! `code` and an HTTP status; the edge ([`super::http`]) maps them once. In
//! every case but `Store`, nothing was written.

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EntityError {
    /// Missing, deleted, or another user's: indistinguishable on purpose.
    #[error("{0} not found")]
    NotFound(Missing),
    #[error("unknown kind {0:?}: one of documents, tasks, goals, plans, milestones, risks, requirements")]
    UnknownKind(String),
    /// A malformed path id, body id or cursor.
    #[error("{0}")]
    InvalidId(String),
    /// The body is not what the route takes. `code` is one of `invalid_json`,
    /// `missing_field`, `unknown_field`, `wrong_type`, `invalid_value`.
    #[error("{message}")]
    BadInput { code: &'static str, message: String },
    #[error("{what} is larger than {limit} bytes")]
    TooLarge { what: &'static str, limit: usize },
    /// A reorganize naming more edge changes than its one transaction holds.
    #[error(
        "{edges} edge changes in one reorganize: at most {limit} fit its one transaction (the project \
         item and 2 items per edge, within {items} items); nothing was written, split the batch"
    )]
    TooManyChanges { edges: usize, limit: usize, items: usize },
    #[error("the edge's {0} end is not an entity of this project")]
    EdgeEndpointMissing(&'static str),
    /// Well-formed, but an edge needs two different entities.
    #[error("an edge needs two different entities")]
    SelfEdge,
    #[error("this edge already exists")]
    EdgeExists,
    #[error("the parent document is not in this project's tree")]
    ParentNotFound,
    #[error("moving a document under itself or its own descendant would make a cycle")]
    Cycle,
    /// The caller's expected version is stale; `current_version` is the one to retry with.
    #[error("version conflict: expected {expected}, current is {current_version}")]
    Conflict { expected: u64, current_version: u64 },
    #[error("a project's context document cannot be deleted")]
    ContextDocumentProtected,
    /// Concurrent writes to the project kept winning; retrying later will do.
    #[error("the project is busy with other writes, retry")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What was not found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    Project,
    Entity,
    Edge,
    /// A page cursor whose record is gone (or was never the caller's).
    Cursor,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Missing::Project => "project",
            Missing::Entity => "entity",
            Missing::Edge => "edge",
            Missing::Cursor => "cursor",
        })
    }
}

impl EntityError {
    pub fn bad(code: &'static str, message: impl Into<String>) -> Self {
        EntityError::BadInput { code, message: message.into() }
    }

    /// Classifies a body's JSON error into the codes clients act on.
    pub fn from_json(e: &serde_json::Error) -> Self {
        use serde_json::error::Category;
        let msg = e.to_string();
        let code = match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => "invalid_json",
            Category::Data if msg.starts_with("missing field") => "missing_field",
            Category::Data if msg.starts_with("unknown field") => "unknown_field",
            Category::Data if msg.starts_with("invalid type") => "wrong_type",
            Category::Data if msg.starts_with("invalid entity id") || msg.starts_with("invalid project id") => {
                return EntityError::InvalidId(msg)
            }
            Category::Data => "invalid_value",
        };
        EntityError::bad(code, msg)
    }

    pub fn code(&self) -> &'static str {
        match self {
            EntityError::NotFound(Missing::Project) => "project_not_found",
            EntityError::NotFound(Missing::Entity) => "entity_not_found",
            EntityError::NotFound(Missing::Edge) => "edge_not_found",
            EntityError::NotFound(Missing::Cursor) => "cursor_not_found",
            EntityError::UnknownKind(_) => "unknown_kind",
            EntityError::InvalidId(_) => "invalid_id",
            EntityError::BadInput { code, .. } => code,
            EntityError::TooLarge { .. } => "too_large",
            EntityError::TooManyChanges { .. } => "too_many_changes",
            EntityError::EdgeEndpointMissing(_) => "edge_endpoint_not_found",
            EntityError::SelfEdge => "edge_self_loop",
            EntityError::EdgeExists => "edge_exists",
            EntityError::ParentNotFound => "parent_not_found",
            EntityError::Cycle => "tree_cycle",
            EntityError::Conflict { .. } => "version_conflict",
            EntityError::ContextDocumentProtected => "context_document_protected",
            EntityError::Busy => "project_busy",
            EntityError::Store(StoreError::Corrupt(_)) => "store_corrupt",
            EntityError::Store(_) => "store_unavailable",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            EntityError::NotFound(_) => 404,
            EntityError::UnknownKind(_) | EntityError::InvalidId(_) | EntityError::BadInput { .. } => 400,
            EntityError::TooLarge { .. } => 413,
            // A batch its schema already bounds (`maxItems`): the request is
            // invalid as sent, not too large for a body.
            EntityError::TooManyChanges { .. } => 400,
            EntityError::EdgeEndpointMissing(_)
            | EntityError::SelfEdge
            | EntityError::ParentNotFound
            | EntityError::Cycle => 422,
            EntityError::EdgeExists | EntityError::Conflict { .. } | EntityError::ContextDocumentProtected => 409,
            EntityError::Busy => 503,
            EntityError::Store(StoreError::Corrupt(_)) => 500,
            EntityError::Store(_) => 503,
        }
    }
}
