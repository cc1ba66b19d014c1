//! The search tools: text search over names, descriptions and document
//! content, across the user's workspace or in the scope's project. Hits
//! carry ids for follow-up reads.

use super::call::{to_json, Call};
use super::outcome::{Done, Op, Refusal};
use super::{Tool, ToolName};
use crate::ids::ProjectId;
use crate::sse::OperationAction;
use serde::Deserialize;
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const SearchWorkspace: ToolName = ToolName::of(&SearchWorkspace);
    pub const SearchProject: ToolName = ToolName::of(&SearchProject);
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Case-insensitive text to find in names, descriptions and document content.
    pub query: String,
    /// At most this many hits.
    #[serde(default)]
    pub limit: Option<usize>,
}

async fn search(c: &Call<'_>, a: SearchArgs, in_project: Option<&ProjectId>) -> Done {
    let r = c.svc.search(c.user, &a.query, in_project, a.limit).await;
    let op =
        Op { action: OperationAction::Search, entity_type: "project", name: format!("“{}”", a.query), id: None };
    Done::read(r.map(|s| to_json(&s)), op)
}

pub struct SearchWorkspace;

#[async_trait::async_trait]
impl Tool for SearchWorkspace {
    type Args = SearchArgs;
    const NAME: &'static str = "search_workspace";
    const DESCRIPTION: &'static str = "Search names, descriptions and document content across all the user's \
        projects. Returns summaries with ids for follow-up reads.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: SearchArgs) -> Result<Done, Refusal> {
        Ok(search(c, a, None).await)
    }
}

pub struct SearchProject;

#[async_trait::async_trait]
impl Tool for SearchProject {
    type Args = SearchArgs;
    const NAME: &'static str = "search_project";
    const DESCRIPTION: &'static str = "Search names, descriptions and document content in this project. Returns \
        summaries with ids for follow-up reads.";
    const NEEDS_PROJECT: bool = true;

    async fn run(&self, c: &Call<'_>, a: SearchArgs) -> Result<Done, Refusal> {
        Ok(search(c, a, Some(c.project()?)).await)
    }
}
