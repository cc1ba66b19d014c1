//! The document tools: create documents in the project's tree, read its
//! structure (ids and order, no content), read documents (metadata in bulk,
//! or one with its content) and move them within the tree.

use super::call::{entity_id, to_json, write, Call};
use super::outcome::{Done, Op, Refusal};
use super::{Tool, ToolName};
use crate::entities::{rules, CreateEntity, DocumentFields, EntityFields, EntityKind, MoveDocument as Move};
use crate::sse::OperationAction;
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const CreateDocument: ToolName = ToolName::of(&CreateDocument);
    pub const GetDocStructure: ToolName = ToolName::of(&GetDocStructure);
    pub const GetDocumentMetadata: ToolName = ToolName::of(&GetDocumentMetadata);
    pub const ReadDocument: ToolName = ToolName::of(&ReadDocument);
    pub const MoveDocument: ToolName = ToolName::of(&MoveDocument);
}

// A document's fields ([`DocumentFields`]), its content and its place in
// the tree. Ids are strings here, parsed at execution, so a malformed one is
// a readable `invalid_id`. (Doc comments on argument types reach the model.)
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDocumentArgs {
    #[schema(schema_with = rules::name_schema)]
    pub title: String,
    #[serde(default)]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    /// Markdown content.
    #[serde(default)]
    #[schema(default = "")]
    pub content: String,
    /// The parent document (e.g. the project's context document); the tree's root when absent.
    #[serde(default)]
    pub parent_id: Option<String>,
    /// Position among the parent's children; last when absent.
    #[serde(default)]
    pub position: Option<u32>,
}

pub struct CreateDocument;

#[async_trait::async_trait]
impl Tool for CreateDocument {
    type Args = CreateDocumentArgs;
    const NAME: &'static str = "create_document";
    const DESCRIPTION: &'static str =
        "Create a document in this project's tree, under a parent document (root when none).";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: CreateDocumentArgs) -> Result<Done, Refusal> {
        let parent_id = a.parent_id.as_deref().map(|p| entity_id("parent_id", p)).transpose()?;
        let new = CreateEntity {
            fields: EntityFields::Document(DocumentFields { title: a.title, description: a.description }),
            content: Some(a.content),
            parent_id,
            position: a.position,
        };
        Ok(c.create(c.project()?, new).await)
    }
}

/// Tools that take nothing.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

pub struct GetDocStructure;

#[async_trait::async_trait]
impl Tool for GetDocStructure {
    type Args = NoArgs;
    const NAME: &'static str = "get_doc_structure";
    const DESCRIPTION: &'static str = "Read this project's document tree (ids and order, no content).";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, _: NoArgs) -> Result<Done, Refusal> {
        let r = c.svc.doc_structure(c.user, c.project()?).await;
        Ok(Done::quiet(r.map(|d| to_json(&d))))
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentMetadataArgs {
    /// Up to 100 document ids (e.g. from the doc structure).
    pub document_ids: Vec<String>,
}

pub struct GetDocumentMetadata;

#[async_trait::async_trait]
impl Tool for GetDocumentMetadata {
    type Args = DocumentMetadataArgs;
    const NAME: &'static str = "get_document_metadata";
    const DESCRIPTION: &'static str = "Titles, descriptions and lengths of several documents at once, without content.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: DocumentMetadataArgs) -> Result<Done, Refusal> {
        let ids = a.document_ids.iter().map(|d| entity_id("document_ids", d)).collect::<Result<Vec<_>, _>>()?;
        let r = c.svc.document_metadata(c.user, c.project()?, &ids).await;
        let name = match &r {
            Ok(docs) if !docs.is_empty() => docs.iter().map(|d| d.title.as_str()).collect::<Vec<_>>().join(", "),
            _ => format!("{} documents", ids.len()),
        };
        let op = Op { action: OperationAction::Read, entity_type: "document", name, id: None };
        Ok(Done::read(r.map(|documents| json!({ "documents": documents })), op))
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadDocumentArgs {
    pub document_id: String,
}

pub struct ReadDocument;

#[async_trait::async_trait]
impl Tool for ReadDocument {
    type Args = ReadDocumentArgs;
    const NAME: &'static str = "read_document";
    const DESCRIPTION: &'static str = "Read one document with its content (the tree has titles only): read it \
        before answering from what a document says.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: ReadDocumentArgs) -> Result<Done, Refusal> {
        let id = entity_id("document_id", &a.document_id)?;
        Ok(c.read_entity(c.project()?, EntityKind::Document, id).await)
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveDocumentArgs {
    pub document_id: String,
    /// The new parent; the tree's root when absent.
    #[serde(default)]
    pub new_parent_id: Option<String>,
    /// Position among the new siblings; last when absent.
    #[serde(default)]
    pub position: Option<u32>,
}

impl MoveDocumentArgs {
    /// The move, its ids read (a malformed one is `invalid_id`).
    pub(super) fn into_move(self) -> Result<Move, Refusal> {
        Ok(Move {
            document_id: entity_id("document_id", &self.document_id)?,
            new_parent_id: self.new_parent_id.as_deref().map(|p| entity_id("new_parent_id", p)).transpose()?,
            position: self.position,
        })
    }
}

pub struct MoveDocument;

#[async_trait::async_trait]
impl Tool for MoveDocument {
    type Args = MoveDocumentArgs;
    const NAME: &'static str = "move_document";
    const DESCRIPTION: &'static str =
        "Move a document (with its subtree) under another parent, or reorder it among its siblings.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: MoveDocumentArgs) -> Result<Done, Refusal> {
        let project = c.project()?;
        let mv = a.into_move()?;
        let name = c.name_of(project, EntityKind::Document, &mv.document_id).await;
        let id = Some(mv.document_id.to_string());
        let r = c.svc.move_document(c.user, project, mv).await;
        Ok(write(r, Op { action: OperationAction::Update, entity_type: "document", name, id }))
    }
}
