//! Deterministic updates after a tool call (AGENT_STATE_SPEC §5.1, §6, §8):
//! entity patches → `current_understanding`, and the expectation matcher.

use super::{AgentState, DeltaError, Dependency, Expectation, ExpectationStatus, KnownEntity};
use crate::entities::{Change, EntityPatch, Record, RecordKind};
use serde_json::Value;

/// The confidence of the assumption a failed expectation adds (§6.3).
const MISMATCH_CONFIDENCE: f64 = 0.7;

/// One finished tool call, as the turn loop has it.
#[derive(Debug, Clone, Copy)]
pub struct ToolObservation<'a> {
    /// The `tool_call_id`: recorded as evidence of a mismatch.
    pub call_id: &'a str,
    /// The tool's name (`create_task`, ...): what expectations' `action` names.
    pub tool: &'a str,
    /// The parsed arguments (`Value::Null` when they did not parse).
    pub args: &'a Value,
    pub ok: bool,
    /// The failure's machine code (`ToolOutcome::error_code`) when `!ok`.
    pub error_code: Option<&'a str>,
    /// What the service's writes returned, in order (`ToolOutcome::patches`).
    pub patches: &'a [EntityPatch],
}

/// The structured facts of one result that the matcher compares (§8's
/// `toolResult.ids`, `.types`, `.count`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutcomeFacts {
    pub ok: bool,
    pub error_code: Option<String>,
    /// Every id the patches touched: changed records, then both ends of edges.
    pub ids: Vec<String>,
    /// The kinds of those ids (`task`, `project`, ...), without duplicates.
    pub types: Vec<String>,
    /// The records (id, kind) created, updated or deleted, without duplicates.
    pub records: Vec<(String, String)>,
    /// Edges linked or unlinked.
    pub edges: usize,
}

impl ToolOutcomeFacts {
    pub fn from_observation(obs: &ToolObservation<'_>) -> Self {
        let mut f =
            ToolOutcomeFacts { ok: obs.ok, error_code: obs.error_code.map(str::to_string), ..Default::default() };
        fn push(v: &mut Vec<String>, s: &str) {
            if !v.iter().any(|x| x == s) {
                v.push(s.to_string());
            }
        }
        for change in obs.patches.iter().flat_map(|p| &p.changes) {
            match change {
                Change::Created { kind, id, .. } | Change::Updated { kind, id, .. } | Change::Deleted { kind, id } => {
                    let k = record_kind(*kind);
                    push(&mut f.ids, id);
                    push(&mut f.types, &k);
                    if !f.records.iter().any(|(i, _)| i == id) {
                        f.records.push((id.clone(), k));
                    }
                }
                Change::Linked { edge } | Change::Unlinked { edge } => {
                    f.edges += 1;
                    for end in [&edge.from, &edge.to] {
                        push(&mut f.ids, end.id.as_str());
                        push(&mut f.types, end.kind.as_str());
                    }
                }
            }
        }
        f
    }

    /// Whether there is anything to compare: a failure, or at least one change.
    pub fn structured(&self) -> bool {
        !self.ok || !self.ids.is_empty()
    }

    /// §8's count: records of `kind` (all records when `None`); edges when
    /// the call changed edges only.
    pub fn count(&self, kind: Option<&str>) -> u32 {
        let records = self.records.iter().filter(|(_, k)| kind.is_none_or(|t| t == k)).count();
        if self.records.is_empty() {
            self.edges as u32
        } else {
            records as u32
        }
    }

    /// A short description for a mismatch's hypothesis.
    pub fn summary(&self) -> String {
        if !self.ok {
            return format!("error {}", self.error_code.as_deref().unwrap_or("unknown"));
        }
        format!("ids {:?}, types {:?}, count {}", self.ids, self.types, self.count(None))
    }
}

/// The matcher's answer for one expectation and one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Match,
    Mismatch,
    /// Not enough structure on either side: do not guess (§8.4).
    Skip,
}

/// The deterministic matcher (§8): every structured field the expectation
/// has must hold (ids all present, type present, count equal); a failed call
/// matches nothing. Vague expectations and unstructured results are skipped.
pub fn verify(e: &Expectation, facts: &ToolOutcomeFacts) -> Check {
    let has_structure = !e.expected_ids.is_empty() || e.expected_type.is_some() || e.expected_count.is_some();
    if !has_structure || !facts.structured() {
        return Check::Skip;
    }
    if !facts.ok {
        return Check::Mismatch;
    }
    let ids = e.expected_ids.iter().all(|id| facts.ids.contains(id));
    let ty = e.expected_type.as_ref().is_none_or(|t| facts.types.contains(t));
    let count = e.expected_count.is_none_or(|n| facts.count(e.expected_type.as_deref()) == n);
    if ids && ty && count {
        Check::Match
    } else {
        Check::Mismatch
    }
}

/// How one expectation was settled by a tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    pub expectation_id: String,
    /// `Confirmed` or `Failed`.
    pub status: ExpectationStatus,
    /// The assumption a mismatch added.
    pub assumption_id: Option<String>,
}

/// Records a pending expectation for the next call of `e.action` (a tool
/// name) and returns its id (`e.id`, or `exp-<n>` when absent). Refused when
/// `action` or `expected_outcome` is empty or the id is taken.
pub fn expect(state: &mut AgentState, mut e: Expectation) -> Result<String, DeltaError> {
    if e.action.trim().is_empty() || e.expected_outcome.trim().is_empty() {
        return Err(DeltaError::Invalid("an expectation needs an action and an expected_outcome".into()));
    }
    let id = match e.id.take() {
        Some(id) if state.expectation(&id).is_some() => return Err(DeltaError::DuplicateId(id)),
        Some(id) if id.trim().is_empty() => return Err(DeltaError::Invalid("an expectation id is empty".into())),
        Some(id) => id,
        None => next_id(state, "exp"),
    };
    e.id = Some(id.clone());
    e.status = ExpectationStatus::Pending;
    e.last_checked_at = None;
    state.expectations.push(e);
    Ok(id)
}

fn next_id(state: &AgentState, prefix: &str) -> String {
    let mut n = state.expectations.len() + 1;
    loop {
        let id = format!("{prefix}-{n}");
        if state.expectation(&id).is_none() {
            return id;
        }
        n += 1;
    }
}

/// The deterministic update after one tool call: patches (and, for reads,
/// the arguments) update `current_understanding`; then the oldest pending
/// expectation for this tool that has structure is verified. Returns the
/// verification, if one happened.
pub fn observe_tool_result(state: &mut AgentState, obs: &ToolObservation<'_>, now_ms: i64) -> Option<Verification> {
    for change in obs.patches.iter().flat_map(|p| &p.changes) {
        apply_change(state, change);
    }
    if obs.patches.is_empty() {
        apply_args(state, obs);
    }

    let facts = ToolOutcomeFacts::from_observation(obs);
    let pos = state.expectations.iter().position(|e| {
        e.status == ExpectationStatus::Pending && e.action == obs.tool && verify(e, &facts) != Check::Skip
    })?;
    let check = verify(&state.expectations[pos], &facts);
    let e = &mut state.expectations[pos];
    let expectation_id = match &e.id {
        Some(id) => id.clone(),
        None => {
            // Only expectations added around `expect` lack an id.
            let id = format!("exp-at-{pos}");
            e.id = Some(id.clone());
            id
        }
    };
    e.last_checked_at = Some(now_ms);
    let verification = if check == Check::Match {
        e.status = ExpectationStatus::Confirmed;
        Verification { expectation_id, status: ExpectationStatus::Confirmed, assumption_id: None }
    } else {
        e.status = ExpectationStatus::Failed;
        let hypothesis = format!("Expected \"{}\" but got \"{}\"", e.expected_outcome, facts.summary());
        let assumption_id = format!("mismatch-{expectation_id}");
        let assumption = super::Assumption {
            id: assumption_id.clone(),
            hypothesis,
            confidence: MISMATCH_CONFIDENCE,
            evidence: vec![obs.call_id.to_string()],
        };
        match state.assumptions.iter_mut().find(|a| a.id == assumption_id) {
            Some(a) => *a = assumption,
            None => state.assumptions.push(assumption),
        }
        Verification { expectation_id, status: ExpectationStatus::Failed, assumption_id: Some(assumption_id) }
    };
    state.trim_expectations();
    Some(verification)
}

fn record_kind(k: RecordKind) -> String {
    match serde_json::to_value(k) {
        Ok(Value::String(s)) => s,
        _ => "unknown".to_string(),
    }
}

fn apply_change(state: &mut AgentState, change: &Change) {
    match change {
        Change::Created { kind, id, entity } | Change::Updated { kind, id, entity } => {
            let name = match entity {
                Record::Entity(e) => e.fields.name().to_string(),
                Record::Project(p) => p.name.clone(),
            };
            let name = (!name.is_empty()).then_some(name);
            state.upsert_entity(KnownEntity { id: id.clone(), kind: record_kind(*kind), name });
        }
        Change::Deleted { id, .. } => state.remove_entity(id),
        Change::Linked { edge } => state.add_dependency(dependency(edge)),
        Change::Unlinked { edge } => state.remove_dependency(&dependency(edge)),
    }
}

fn dependency(edge: &crate::entities::Edge) -> Dependency {
    Dependency { from: edge.from.id.to_string(), to: edge.to.id.to_string(), rel: Some(edge.relation.clone()) }
}

/// Reads name the entity they read; a "not found" says it is not there.
fn apply_args(state: &mut AgentState, obs: &ToolObservation<'_>) {
    let arg = |k: &str| obs.args.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let target = match obs.tool {
        "get_entity" | "delete_entity" | "update_entity" => arg("id").zip(arg("kind").map(str::to_string)),
        "read_document" => arg("document_id").map(|id| (id, "document".to_string())),
        "get_project" | "update_project" => arg("project_id").map(|id| (id, "project".to_string())),
        _ => None,
    };
    let Some((id, kind)) = target else { return };
    if obs.ok && matches!(obs.tool, "get_entity" | "read_document" | "get_project") {
        state.upsert_entity(KnownEntity { id: id.to_string(), kind, name: None });
    } else if !obs.ok && matches!(obs.error_code, Some("entity_not_found") | Some("project_not_found")) {
        state.remove_entity(id);
    }
}
