//! Plans (AGENTIC_CHAT_V2_SPEC §10, docs/plans.md): staged work the planner
//! model hands to executors. [`AgentPlan`] is what the model writes (the
//! arguments of `agent_create_plan`); [`validate`] turns it into a
//! [`ValidPlan`] or the problems the model reads; [`PlanRecord`] is the one
//! stored record with each step's status. Running plans is not here: that is
//! a tool layer of the turn ([`crate::planner`]), and this module imports
//! neither it nor the model loop.
//!
//! Contract:
//! - nothing runs before the plan is valid: step ids unique, `inputs` naming
//!   earlier steps only (so no cycle can exist), caps on stages and steps,
//!   every step tool one the scope allows (plan tools never nest);
//! - a step's status is stored as the step ends, so a turn cut off at any
//!   point leaves a record that resumes at its first unfinished step, and a
//!   finished step never runs again;
//! - a step's call that must wait for the user's yes (the approval policy)
//!   never runs unapproved: the step waits with it (`waiting`, and its
//!   executor's messages in `resume`), the plan pauses after that stage, and
//!   only the user's signed approval runs it (a denial is its result).

pub mod store;
pub mod validate;

pub use validate::{validate, StepTool, ValidPlan, MAX_STAGES, MAX_STEPS, MAX_STEP_TOOLS};

use crate::ids::TurnId;
use serde::{Deserialize, Serialize};

/// How the steps of one stage run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StageMode {
    /// Concurrently, at most `PLAN_STEP_CONCURRENCY` at once.
    Parallel,
    /// One after another, in the order given.
    Sequence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepIntent {
    Research,
    Analysis,
    Draft,
    Edit,
    Create,
    Update,
    Review,
}

impl StepIntent {
    /// Whether the step is meant to change the ontology (it then needs a tool).
    pub fn writes(self) -> bool {
        matches!(self, StepIntent::Draft | StepIntent::Edit | StepIntent::Create | StepIntent::Update)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    Planner,
    Research,
    Writer,
    Editor,
    Tooling,
}

/// One unit of work, run by one executor. The model may leave `intent` and
/// `executor` out ([`StepAsWritten`]): the plan tool does not offer them, as
/// the local model filled a two-step plan with invented "research / review /
/// edit the draft" steps led by those two fields and never closed the call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(from = "StepAsWritten", deny_unknown_fields)]
pub struct PlanStep {
    /// Unique in the plan, e.g. "s1".
    pub id: String,
    /// What the step does, in a few words (shown to the user).
    pub title: String,
    pub intent: StepIntent,
    pub executor: ExecutorKind,
    /// The tools this step's executor may call (names of this conversation's tools).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Ids of earlier steps whose results this step reads.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// What the step should produce (e.g. "summary document").
    #[serde(default)]
    pub outputs: Vec<String>,
}

/// A step as the model writes it: what it leaves out is read from its tools.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepAsWritten {
    id: String,
    title: String,
    #[serde(default)]
    intent: Option<StepIntent>,
    #[serde(default)]
    executor: Option<ExecutorKind>,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    inputs: Vec<String>,
    #[serde(default)]
    outputs: Vec<String>,
}

impl From<StepAsWritten> for PlanStep {
    /// A step that left its intent out creates when one of its tools changes
    /// something (by the tools' verbs), else researches; its executor follows
    /// the intent.
    fn from(s: StepAsWritten) -> PlanStep {
        const CHANGES: [&str; 8] =
            ["create_", "update_", "delete_", "link_", "unlink_", "move_", "reorganize_", "propose_"];
        let changes = s.tools.iter().any(|t| CHANGES.iter().any(|v| t.starts_with(v)));
        let intent = s.intent.unwrap_or(if changes { StepIntent::Create } else { StepIntent::Research });
        let executor = s.executor.unwrap_or(match intent {
            StepIntent::Research | StepIntent::Analysis => ExecutorKind::Research,
            StepIntent::Review | StepIntent::Edit => ExecutorKind::Editor,
            StepIntent::Draft | StepIntent::Create | StepIntent::Update => ExecutorKind::Writer,
        });
        PlanStep { id: s.id, title: s.title, intent, executor, tools: s.tools, inputs: s.inputs, outputs: s.outputs }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanStage {
    pub id: String,
    pub name: String,
    pub mode: StageMode,
    pub steps: Vec<PlanStep>,
}

/// How a new plan proceeds (CURRENT_FLOW §6.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanMode {
    /// Run at once.
    #[default]
    AutoExecute,
    /// Show the plan; the user's next turn approves, edits or rejects it.
    DraftOnly,
    /// A reviewer model call approves or rejects it before it runs.
    AgentReview,
}

/// The arguments of `agent_create_plan`: the plan as the model writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentPlan {
    /// What the whole plan achieves.
    pub goal: String,
    /// Run in order; the steps of a `parallel` stage run at the same time.
    pub stages: Vec<PlanStage>,
    #[serde(default)]
    pub constraints: Vec<String>,
    #[serde(default)]
    #[schema(default = PlanMode::default)]
    pub mode: PlanMode,
}

/// Where a plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// `draft_only`: waiting for the user to approve, edit or reject it.
    AwaitingApproval,
    /// Running now, or cut off (deadline, Stop, crash): resumable.
    Running,
    /// Paused: a step's call waits for the user's approval
    /// ([`crate::approval`]); the answer resumes the plan at that step.
    #[serde(alias = "awaiting_confirmation")]
    WaitingForApproval,
    Completed,
    /// Ended with at least one failed step.
    Failed,
    /// Rejected by the user or the reviewer.
    Rejected,
    /// Stopped before it ended (records from before approvals: the user
    /// declined a held change).
    Cancelled,
    /// Replaced by a newer plan of the same session before it finished (the
    /// planner's way to edit a draft is a new `agent_create_plan`): never runs
    /// again, so a later "approve" cannot reach it. `superseded_by` names the
    /// plan that replaced it.
    Superseded,
}

impl PlanStatus {
    /// Whether a later turn can still act on it (approve, continue, answer
    /// its waiting calls).
    pub fn is_open(self) -> bool {
        matches!(self, PlanStatus::AwaitingApproval | PlanStatus::Running | PlanStatus::WaitingForApproval)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not run yet, or cut off while running (it runs again on resume).
    Pending,
    Done,
    Failed,
    /// Its executor made calls that wait for the user's approval; the
    /// answer resumes it ([`StepState::resume`]).
    #[serde(alias = "awaiting_confirmation")]
    WaitingForApproval,
    /// An input failed.
    Skipped,
}

/// What a step made or changed, by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StepOutputs {
    /// Every entity created or changed (documents included).
    #[serde(default)]
    pub entity_ids: Vec<String>,
    /// The documents among them.
    #[serde(default)]
    pub doc_ids: Vec<String>,
}

/// One tool call an executor made, as persisted: the origin is the step that
/// holds it (`plan_step`), so the log tells it from the planner's calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StepCall {
    pub tool_call: crate::message::ToolCall,
    pub ok: bool,
    /// The result the executor read.
    pub result: String,
}

/// A step's call that waits for the user's approval: the call as its
/// executor made it (the one an approval runs) and the question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WaitingCall {
    pub tool_call: crate::message::ToolCall,
    pub approval_id: String,
    /// The operation in human words.
    pub summary: String,
}

/// A step's state in the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StepState {
    pub step_id: String,
    pub status: StepStatus,
    /// The executor's closing words (what the planner reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default)]
    pub outputs: StepOutputs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Calls that ran, in every attempt (a resumed step is told of them).
    #[serde(default)]
    pub calls: Vec<StepCall>,
    /// Its calls that wait for the user's approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<WaitingCall>,
    /// The executor's messages up to the wait; once every waiting call has
    /// its result (the approved call's own, or the denial) they end with
    /// those results, and the step's next attempt goes on from them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub resume: Vec<crate::message::ChatMessage>,
    pub attempts: u32,
}

/// The stored plan: one item under the session (`sk = PLAN#<id>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanRecord {
    /// UUID v7: plans sort by creation.
    pub id: String,
    /// The turn that created it.
    pub turn_id: TurnId,
    pub plan: AgentPlan,
    pub status: PlanStatus,
    /// One per step, in plan order.
    pub steps: Vec<StepState>,
    /// The reviewer's reason, or the user's, when rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The plan that replaced this one (status `superseded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// The open plans this one replaced when it was created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl PlanRecord {
    pub fn new(valid: &ValidPlan, turn_id: TurnId) -> PlanRecord {
        let plan = valid.plan().clone();
        let steps = plan
            .stages
            .iter()
            .flat_map(|s| &s.steps)
            .map(|s| StepState {
                step_id: s.id.clone(),
                status: StepStatus::Pending,
                summary: None,
                outputs: StepOutputs::default(),
                error: None,
                calls: vec![],
                waiting: vec![],
                resume: vec![],
                attempts: 0,
            })
            .collect();
        let status = match plan.mode {
            PlanMode::DraftOnly => PlanStatus::AwaitingApproval,
            _ => PlanStatus::Running,
        };
        let now = crate::now_ms();
        PlanRecord {
            id: uuid::Uuid::now_v7().to_string(),
            turn_id,
            plan,
            status,
            steps,
            reason: None,
            superseded_by: None,
            supersedes: vec![],
            created_at: now,
            updated_at: now,
        }
    }

    pub fn step(&self, id: &str) -> &StepState {
        self.steps.iter().find(|s| s.step_id == id).expect("a step of this plan")
    }

    pub fn step_mut(&mut self, id: &str) -> &mut StepState {
        self.steps.iter_mut().find(|s| s.step_id == id).expect("a step of this plan")
    }

    /// What the planner reads back: the plan's status and each step's result.
    pub fn result(&self) -> serde_json::Value {
        let steps: Vec<_> = self
            .plan
            .stages
            .iter()
            .flat_map(|s| &s.steps)
            .map(|p| {
                let st = self.step(&p.id);
                serde_json::json!({"id": p.id, "title": p.title, "status": st.status, "summary": st.summary,
                    "outputs": st.outputs, "error": st.error,
                    "waiting_for_approval": st.waiting.iter().map(|w| &w.summary).collect::<Vec<_>>()})
            })
            .collect();
        let mut v = serde_json::json!({"plan_id": self.id, "goal": self.plan.goal, "status": self.status,
            "reason": self.reason, "steps": steps});
        if let Some(by) = &self.superseded_by {
            v["superseded_by"] = serde_json::Value::String(by.clone());
        }
        v
    }
}

/// Where a tool event comes from: the planner's own loop, or one plan step's
/// executor (gap 4 of CURRENT_FLOW §9).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum ToolOrigin {
    #[default]
    Planner,
    PlanStep {
        plan_id: String,
        step_id: String,
    },
}
