//! A plan is checked whole before anything runs; every problem is named, so
//! the model can fix them all in one more call.

use super::{AgentPlan, StageMode};
use std::collections::{HashMap, HashSet};

/// The most stages a plan may have.
pub const MAX_STAGES: usize = 6;
/// The most steps a plan may have, over all stages.
pub const MAX_STEPS: usize = 12;
/// The most tools one step may be given.
pub const MAX_STEP_TOOLS: usize = 8;

/// A plan that passed [`validate`]: the only way to get one.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidPlan(AgentPlan);

impl ValidPlan {
    pub fn plan(&self) -> &AgentPlan {
        &self.0
    }
}

/// Whether a step may be given a tool, as the scope the plan runs in says
/// (the caller knows the tools; plans only name them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepTool {
    Allowed,
    /// A tool, but not one this conversation's scope allows.
    NotInScope,
    /// No tool a step can use (plan tools among them: plans never nest).
    Unknown,
}

/// Checks `plan` against the rules of the module contract, each step tool
/// through `tool`; `Err` lists every problem found.
pub fn validate(mut plan: AgentPlan, tool: impl Fn(&str) -> StepTool) -> Result<ValidPlan, Vec<String>> {
    drop_unknown_inputs(&mut plan);
    let mut problems = vec![];
    if plan.goal.trim().is_empty() {
        problems.push("goal is empty".to_string());
    }
    if plan.stages.is_empty() || plan.stages.len() > MAX_STAGES {
        problems.push(format!("a plan has 1 to {MAX_STAGES} stages; this one has {}", plan.stages.len()));
    }
    let steps: usize = plan.stages.iter().map(|s| s.steps.len()).sum();
    if steps == 0 || steps > MAX_STEPS {
        problems.push(format!("a plan has 1 to {MAX_STEPS} steps; this one has {steps}"));
    }
    // Step id -> (stage index, position in the plan).
    let mut seen: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut stage_ids: Vec<&str> = vec![];
    let mut titles: HashMap<String, &str> = HashMap::new();
    let mut position = 0;
    for (si, stage) in plan.stages.iter().enumerate() {
        if stage.id.trim().is_empty() || stage_ids.contains(&stage.id.as_str()) {
            problems.push(format!("stage {:?}: stage ids must be unique and not empty", stage.id));
        }
        stage_ids.push(&stage.id);
        if stage.steps.is_empty() {
            problems.push(format!("stage {:?} has no steps", stage.id));
        }
        for step in &stage.steps {
            let at = format!("step {:?}", step.id);
            if step.id.trim().is_empty() || seen.contains_key(step.id.as_str()) {
                problems.push(format!("{at}: step ids must be unique and not empty"));
            }
            if step.title.trim().is_empty() {
                problems.push(format!("{at}: title is required"));
            } else if let Some(first) = titles.insert(step.title.trim().to_lowercase(), &step.id) {
                // A step said twice is a model repeating itself, not work:
                // the local model wrote "Edit the draft" four times a stage.
                problems.push(format!("{at}: the same title as step {first:?}; write each step once"));
            }
            for input in &step.inputs {
                match seen.get(input.as_str()) {
                    Some((s, _)) if *s == si && stage.mode == StageMode::Parallel => problems.push(format!(
                        "{at}: input {input:?} runs in the same parallel stage; move this step to a later stage"
                    )),
                    Some(_) => {}
                    None if input == &step.id => problems.push(format!("{at}: a step cannot be its own input")),
                    None => problems.push(format!(
                        "{at}: input {input:?} is not an earlier step (inputs must name steps that run before; \
                         a later one would be a cycle)"
                    )),
                }
            }
            check_tools(&at, &step.tools, step.intent.writes(), &tool, &mut problems);
            seen.insert(&step.id, (si, position));
            position += 1;
        }
    }
    if problems.is_empty() {
        Ok(ValidPlan(plan))
    } else {
        Err(problems)
    }
}

/// Leaves out each input that names no step of the plan: it is no
/// dependency, and nothing can run before it. The local model filled
/// `inputs` with the project's id and the step's own title, and its plan was
/// refused for it. (An input naming a step that runs later is still refused:
/// that is a cycle.)
fn drop_unknown_inputs(plan: &mut AgentPlan) {
    let ids: HashSet<String> = plan.stages.iter().flat_map(|s| s.steps.iter().map(|st| st.id.clone())).collect();
    for step in plan.stages.iter_mut().flat_map(|s| s.steps.iter_mut()) {
        let before = step.inputs.len();
        step.inputs.retain(|i| ids.contains(i));
        if step.inputs.len() < before {
            tracing::info!(step = %step.id, dropped = before - step.inputs.len(), "plan inputs naming no step left out");
        }
    }
}

/// A step's tools: known, allowed in this scope, not a plan tool, few; a
/// writing step needs one.
fn check_tools(at: &str, tools: &[String], writes: bool, tool: &dyn Fn(&str) -> StepTool, problems: &mut Vec<String>) {
    if tools.len() > MAX_STEP_TOOLS {
        problems.push(format!("{at}: at most {MAX_STEP_TOOLS} tools per step"));
    }
    if writes && tools.is_empty() {
        problems.push(format!("{at}: a step that writes needs the tools it writes with"));
    }
    for t in tools {
        match tool(t) {
            StepTool::Allowed => {}
            StepTool::NotInScope => {
                problems.push(format!("{at}: tool {t:?} is not available in this conversation's scope"))
            }
            StepTool::Unknown => problems.push(format!("{at}: there is no tool named {t:?} a step can use")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ProjectId;
    use crate::plan::{ExecutorKind, PlanMode, PlanStage, PlanStep, StepIntent};
    use crate::planner::step_tool_in;
    use crate::tools::ToolScope;

    /// `plan` checked against `scope`'s tools, as the planner checks it.
    fn validate(plan: AgentPlan, scope: &ToolScope) -> Result<ValidPlan, Vec<String>> {
        super::validate(plan, step_tool_in(scope))
    }

    fn step(id: &str, tools: &[&str], inputs: &[&str]) -> PlanStep {
        PlanStep {
            id: id.into(),
            title: format!("do {id}"),
            intent: StepIntent::Research,
            executor: ExecutorKind::Research,
            tools: tools.iter().map(|t| t.to_string()).collect(),
            inputs: inputs.iter().map(|t| t.to_string()).collect(),
            outputs: vec![],
        }
    }

    fn plan(stages: Vec<(StageMode, Vec<PlanStep>)>) -> AgentPlan {
        AgentPlan {
            goal: "g".into(),
            stages: stages
                .into_iter()
                .enumerate()
                .map(|(i, (mode, steps))| PlanStage { id: format!("st{i}"), name: "n".into(), mode, steps })
                .collect(),
            constraints: vec![],
            mode: PlanMode::AutoExecute,
        }
    }

    fn project() -> ToolScope {
        ToolScope::Project { project: ProjectId::new() }
    }

    #[test]
    fn a_two_stage_plan_is_valid() {
        let p = plan(vec![
            (StageMode::Parallel, vec![step("a", &["search_project"], &[]), step("b", &[], &[])]),
            (StageMode::Sequence, vec![step("c", &["create_document"], &["a", "b"]), step("d", &[], &["c"])]),
        ]);
        assert!(validate(p, &project()).is_ok());
    }

    #[test]
    fn inputs_must_name_earlier_steps() {
        let p = plan(vec![
            (StageMode::Parallel, vec![step("a", &[], &["b"]), step("b", &[], &["a"])]),
            (StageMode::Sequence, vec![step("c", &[], &["c"]), step("d", &["search_project"], &["zz", "a"])]),
        ]);
        let problems = validate(p, &project()).unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("not an earlier step"), "{problems:?}");
        assert!(problems[1].contains("same parallel stage"), "{problems:?}");
        assert!(problems[2].contains("its own input"), "{problems:?}");
    }

    #[test]
    fn tools_must_pass_the_scope_gate_and_caps_hold() {
        let p = plan(vec![(StageMode::Sequence, vec![step("a", &["create_task", "agent_create_plan"], &[])])]);
        let problems = validate(p, &ToolScope::Global).unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        let many = plan(vec![(StageMode::Parallel, (0..13).map(|i| step(&format!("s{i}"), &[], &[])).collect())]);
        assert!(validate(many, &project()).unwrap_err()[0].contains("1 to 12 steps"));
        let dup = plan(vec![(StageMode::Parallel, vec![step("a", &[], &[]), step("a", &[], &[])])]);
        assert!(validate(dup, &project()).unwrap_err()[0].contains("unique"));
    }

    /// An input that names no step is no dependency: left out, not refused
    /// (the local model wrote the project's id and the step's own title).
    #[test]
    fn an_input_naming_no_step_is_left_out() {
        let p = plan(vec![(
            StageMode::Sequence,
            vec![
                step("a", &["search_project"], &["01a2530f-fb3d-75a8", "Draft the agenda"]),
                step("b", &[], &["a", "x"]),
            ],
        )]);
        let valid = validate(p, &project()).expect("valid");
        let inputs: Vec<&Vec<String>> = valid.0.stages[0].steps.iter().map(|s| &s.inputs).collect();
        assert_eq!(inputs, [&Vec::<String>::new(), &vec!["a".to_string()]]);
    }

    /// The local model's runaway plan said "Edit the draft" four times in a
    /// stage: a step said twice is refused, naming the first.
    #[test]
    fn a_step_said_twice_is_refused() {
        let mut again = step("b", &["search_project"], &[]);
        again.title = " Do A".into();
        let p = plan(vec![(StageMode::Sequence, vec![step("a", &["search_project"], &[]), again])]);
        let problems = validate(p, &project()).unwrap_err();
        assert_eq!(problems, [r#"step "b": the same title as step "a"; write each step once"#]);
    }

    /// A step written without intent or executor takes them from its tools:
    /// one that changes something creates (and needs its tools), else it
    /// researches.
    #[test]
    fn a_step_without_intent_reads_it_from_its_tools() {
        let step = |tools: serde_json::Value| -> PlanStep {
            serde_json::from_value(serde_json::json!({"id": "s1", "title": "Create the task", "tools": tools})).unwrap()
        };
        let writes = step(serde_json::json!(["search_project", "create_task"]));
        assert_eq!((writes.intent, writes.executor), (StepIntent::Create, ExecutorKind::Writer));
        let reads = step(serde_json::json!(["search_project"]));
        assert_eq!((reads.intent, reads.executor), (StepIntent::Research, ExecutorKind::Research));
        let said: PlanStep = serde_json::from_value(
            serde_json::json!({"id": "s", "title": "t", "intent": "review", "executor": "tooling", "tools": []}),
        )
        .unwrap();
        assert_eq!((said.intent, said.executor), (StepIntent::Review, ExecutorKind::Tooling));
        let unknown = serde_json::json!({"id": "s", "title": "t", "tools": [], "owner": "x"});
        assert!(serde_json::from_value::<PlanStep>(unknown).is_err(), "unknown fields are still refused");
        let round = serde_json::to_value(&writes).unwrap();
        assert_eq!(serde_json::from_value::<PlanStep>(round).unwrap(), writes);
    }
}
