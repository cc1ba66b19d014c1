//! The tools of a `project_create` conversation before its project exists
//! (CURRENT_FLOW §6.4): ask the user what the project is for, or create it.
//! Each ends with an event about the turn itself: the questions
//! (`clarifying_questions`), or the move into the new project
//! (`context_shift`).

use super::call::Call;
use super::outcome::{Done, Refusal};
use super::projects::{create_project, CreateProjectArgs};
use super::{Tool, ToolName};
use crate::entities::{rules, ProjectState};
use crate::session::ContextType;
use crate::sse::{Focus, ShiftReason, StreamEvent};
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

#[allow(non_upper_case_globals)]
impl ToolName {
    pub const AskClarifyingQuestions: ToolName = ToolName::of(&AskClarifyingQuestions);
    pub const CreateOntoProject: ToolName = ToolName::of(&CreateOntoProject);
}

/// The most questions one `ask_clarifying_questions` call asks.
pub const MAX_CLARIFYING_QUESTIONS: usize = 5;
/// The longest question, in characters.
pub const MAX_QUESTION_CHARS: usize = 300;

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClarifyingQuestionsArgs {
    /// 1 to 5 short questions, each answerable in a sentence: what the project is for, its scope, what done looks like.
    pub questions: Vec<String>,
}

/// The questions, trimmed; refused unless there are 1 to
/// [`MAX_CLARIFYING_QUESTIONS`], none blank or over [`MAX_QUESTION_CHARS`].
pub fn clarifying_questions(a: ClarifyingQuestionsArgs) -> Result<Vec<String>, Refusal> {
    let questions: Vec<String> = a.questions.iter().map(|q| q.trim().to_string()).collect();
    if questions.is_empty() || questions.len() > MAX_CLARIFYING_QUESTIONS {
        return Err(Refusal::Args(format!("ask 1 to {MAX_CLARIFYING_QUESTIONS} questions, not {}", questions.len())));
    }
    if questions.iter().any(|q| q.is_empty() || q.chars().count() > MAX_QUESTION_CHARS) {
        return Err(Refusal::Args(format!("each question must be 1 to {MAX_QUESTION_CHARS} characters")));
    }
    Ok(questions)
}

pub struct AskClarifyingQuestions;

#[async_trait::async_trait]
impl Tool for AskClarifyingQuestions {
    type Args = ClarifyingQuestionsArgs;
    const NAME: &'static str = "ask_clarifying_questions";
    const DESCRIPTION: &'static str = "Ask the user what you need to know before creating anything, when the \
        request is too vague to act on (no clear purpose or scope). The questions are sent to the user and this \
        turn ends; nothing is created.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, _: &Call<'_>, a: ClarifyingQuestionsArgs) -> Result<Done, Refusal> {
        let questions = clarifying_questions(a)?;
        let event = StreamEvent::ClarifyingQuestions { questions: questions.clone() };
        let done = Done::quiet(Ok(json!({ "questions": questions, "sent_to_user": true })));
        Ok(Done { turn_events: vec![event], ..done })
    }
}

// `create_project`'s arguments with the context required: the project is
// created from what the user said it is for.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOntoProjectArgs {
    #[schema(schema_with = rules::name_schema)]
    pub name: String,
    #[serde(default)]
    #[schema(schema_with = rules::description_schema)]
    pub description: Option<String>,
    #[serde(default)]
    pub state: Option<ProjectState>,
    /// The project's context document: purpose, vision and scope in the user's words.
    pub context: String,
    /// Titles of tasks to create in the new project.
    #[serde(default)]
    pub tasks: Option<Vec<String>>,
    /// Names of goals to create in the new project.
    #[serde(default)]
    pub goals: Option<Vec<String>>,
    /// Titles of documents to create in the new project.
    #[serde(default)]
    pub documents: Option<Vec<String>>,
}

impl From<CreateOntoProjectArgs> for CreateProjectArgs {
    fn from(a: CreateOntoProjectArgs) -> Self {
        CreateProjectArgs {
            name: a.name,
            description: a.description,
            state: a.state,
            context: Some(a.context),
            tasks: a.tasks,
            goals: a.goals,
            documents: a.documents,
        }
    }
}

pub struct CreateOntoProject;

#[async_trait::async_trait]
impl Tool for CreateOntoProject {
    type Args = CreateOntoProjectArgs;
    const NAME: &'static str = "create_onto_project";
    const DESCRIPTION: &'static str = "Create the project the user described, with its context document \
        (purpose, vision and scope in their words) and any first tasks, goals and documents; the conversation \
        then moves into the new project.";
    const NEEDS_PROJECT: bool = false;

    async fn run(&self, c: &Call<'_>, a: CreateOntoProjectArgs) -> Result<Done, Refusal> {
        let mut done = create_project(c, a.into()).await?;
        if let Ok(result) = &done.result {
            done.turn_events = moved_into(result);
        }
        Ok(done)
    }
}

/// The move into the project `create_onto_project` made, with its
/// `projectFocus` as a client sends it (id and name).
fn moved_into(result: &Value) -> Vec<StreamEvent> {
    let (Some(id), Some(name)) = (result["project"]["id"].as_str(), result["project"]["name"].as_str()) else {
        return vec![];
    };
    vec![StreamEvent::ContextShift {
        current: Focus {
            context_type: ContextType::Project,
            entity_id: None,
            focus: Some(json!({ "projectId": id, "projectName": name })),
        },
        reason: ShiftReason::ProjectCreated,
        entity_name: name.to_string(),
    }]
}
