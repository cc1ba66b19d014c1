//! The plan tools the planner model calls (docs/plans.md). They are run by the
//! turn itself ([`crate::plan::run`]), not by the registry: a plan needs the
//! model (its executors) and the stream (its events). They are offered in a
//! project scope, where steps have tools to work with; steps never get them.

use crate::plan::AgentPlan;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

pub const AGENT_CREATE_PLAN: &str = "agent_create_plan";
pub const AGENT_CONTINUE_PLAN: &str = "agent_continue_plan";

/// Whether `name` is one of the plan tools.
pub fn is_plan_tool(name: &str) -> bool {
    name == AGENT_CREATE_PLAN || name == AGENT_CONTINUE_PLAN
}

/// What the user said about an open plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanDecision {
    /// Run a draft plan.
    Approve,
    /// Drop a draft plan.
    Reject,
    /// Resume a plan that was cut off, at its first unfinished step.
    Continue,
}

/// The arguments of `agent_continue_plan`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinuePlanArgs {
    pub decision: PlanDecision,
    /// The plan; when left out, the conversation's current plan (its newest), if it is still open.
    #[serde(default)]
    pub plan_id: Option<String>,
    /// The user's reason, for a rejection.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `agent_create_plan`'s arguments with the plan's bounds ([`crate::plan::MAX_STAGES`],
/// [`crate::plan::MAX_STEPS`]) as `maxItems`: a model server that constrains output to
/// the schema then closes the lists, where a small model otherwise repeated
/// a stage until the token limit and the call never closed (issue 31). Set
/// here, not on [`AgentPlan`]'s type, whose API schema and web types would
/// turn a bound into tuples.
///
/// A step's `tools` are named from `step_tools` (an `enum`), the tools
/// offered beside the plan tools: a model server that constrains output to
/// the schema then writes only real names, where a small model wrote steps
/// with `research` or `create` and the plan was refused (issue 31). The
/// plan's validation still takes any tool the scope allows.
fn plan_schema(step_tools: &[&str]) -> Value {
    let mut s = super::schema::of::<AgentPlan>();
    let stages = &mut s["properties"]["stages"];
    stages["minItems"] = json!(1);
    stages["maxItems"] = json!(crate::plan::MAX_STAGES);
    let steps = &mut stages["items"]["properties"]["steps"];
    steps["minItems"] = json!(1);
    steps["maxItems"] = json!(crate::plan::MAX_STEPS);
    let step = &mut steps["items"];
    if !step_tools.is_empty() {
        step["properties"]["tools"]["items"]["enum"] = json!(step_tools);
    }
    small_step(step);
    s
}

/// A step as the model is asked to write it: an id, a title in words and
/// its tools (at least one). `intent`, `executor` and `outputs` are not
/// offered ([`crate::plan::PlanStep`] reads the first two from the tools):
/// the schema's fields go in name order, so a small model wrote `executor`
/// and `intent` first and let them lead — "research", "analysis", "edit the
/// draft" — for "create a task Draft the agenda", twelve steps a stage.
fn small_step(step: &mut Value) {
    if let Some(props) = step["properties"].as_object_mut() {
        for unsaid in ["executor", "intent", "outputs"] {
            props.remove(unsaid);
        }
    }
    step["required"] = json!(["id", "title", "tools"]);
    step["properties"]["tools"]["minItems"] = json!(1);
    step["properties"]["tools"]["maxItems"] = json!(crate::plan::MAX_STEP_TOOLS);
}

/// The OpenAI `tools` entries of the plan tools, steps working with
/// `step_tools` (see [`plan_schema`]; empty: any name).
pub fn plan_definitions(step_tools: &[&str]) -> Vec<Value> {
    vec![
        json!({"type": "function", "function": {
            "name": AGENT_CREATE_PLAN,
            "description": "Plan multi-step work as stages of steps and run it: steps of a parallel stage run at the same \
                time, stages in order. Each step gets its own executor with only the tools you list for it and the \
                results of its inputs. Use it for work of 3 or more steps; you then answer from the steps' results. \
                mode: auto_execute (default), draft_only (show the plan to the user first), agent_review.",
            "parameters": plan_schema(step_tools),
        }}),
        json!({"type": "function", "function": {
            "name": AGENT_CONTINUE_PLAN,
            "description": "Act on an open plan when the user answers about it: approve or reject a draft, or \
                continue a plan that was cut off. (A plan step's delete or bulk update asks the user itself, \
                with Approve / Deny; their answer resumes the plan without this tool.)",
            "parameters": super::schema::of::<ContinuePlanArgs>(),
        }}),
    ]
}
