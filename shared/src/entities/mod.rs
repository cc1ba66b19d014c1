//! The ontology: projects and, inside each, documents, tasks, goals, plans,
//! milestones, risks and requirements, the edges between them, and the
//! project's document tree (`doc_structure`).
//!
//! The contract:
//! - One service, [`EntityService`], for HTTP (the edge's `crate::edge::entities`, the entities
//!   function) and for chat tools alike: same validation, same authorization,
//!   same versions, same [`EntityPatch`].
//! - Everything is scoped to the user: another user's project or entity id
//!   answers exactly like a missing one (`*_not_found`, 404).
//! - Every write bumps the project's `version` by exactly one per transaction
//!   and returns the [`EntityPatch`] it caused (the chat stream's
//!   `entity_patch` payload).
//! - Updates may carry the version the caller saw (`If-Match` or
//!   `expected_version`); a stale one is refused ([`EntityError::Conflict`],
//!   409, with the current version) and nothing is written.
//! - Edges are explicit: no create makes one. Deleting an entity removes its
//!   edges. Deleting a document moves its children up to its place in the
//!   tree (no orphaned nodes, no dangling edges); the project's context
//!   document cannot be deleted.
//! - Refused input ([`EntityError`]) writes nothing.
//!
//! - Input rules (lengths, patterns, ranges) are stated once, in [`rules`]:
//!   the validators and the OpenAPI document are both built from them.
//!
//! Storage is [`store`]: the [`store::EntityStore`] trait, its DynamoDB
//! implementation and an in-memory twin.

pub mod error;
pub mod model;
pub mod operation;
pub mod rules;
pub mod service;
pub mod store;
pub mod tree;

pub use error::{EntityError, Missing};
pub use model::*;
pub use operation::{OperationAction, OperationStatus};
pub use service::{EntityService, PageRequest};
