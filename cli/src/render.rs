//! How a turn reads in a terminal: the answer's text inline as it arrives,
//! every other event as one short line in human terms (operations with the
//! entity's name, a patch as one line, a tool call with its name and a short
//! summary of its arguments).
//!
//! Pure: a [`Renderer`] turns each [`StreamEvent`] (the one definition in
//! `shared::sse`) into the exact text to print, and remembers only what it
//! needs for that (whether the cursor is mid-line, the names of projects it
//! has seen). The caller writes the text; `--raw` bypasses all of this.

use shared::entities::{Change, EntityPatch, Record, RecordKind};
use shared::sse::{AgentActivity, CheckVerdict, DoneReason, OperationAction, OperationStatus, StreamEvent};
use std::collections::HashMap;

/// Longest argument summary on a `tool_call` line, in characters.
const ARGS_CHARS: usize = 100;
/// Longest string value inside that summary.
const VALUE_CHARS: usize = 40;
/// Longest failed `tool_result` preview shown.
const PREVIEW_CHARS: usize = 100;

/// The progress label between tool calls.
const RUNNING_TOOLS: &str = "running tools";

/// What the progress indicator should say, if anything, after an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// The model is working and nothing is streaming: show this label.
    On(String),
    /// Text is streaming, or the turn ended: show nothing.
    Off,
    /// This event does not change it.
    Same,
}

/// Turns events into printable text. One per conversation (it keeps project
/// names across turns).
#[derive(Debug, Default)]
pub struct Renderer {
    /// True when the last character printed ended a line (or nothing was printed).
    mid_line: bool,
    /// Project names by id, from the scope, patches and operations seen.
    projects: HashMap<String, String>,
    /// The project this conversation is scoped to, when there is one.
    scope_project: Option<String>,
}

impl Renderer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the cursor sits at the start of a line (a progress indicator may draw).
    pub fn at_line_start(&self) -> bool {
        !self.mid_line
    }

    /// The project the turns run in (its id and name), so operations can say
    /// "in Launch"; `None` for the workspace.
    pub fn set_scope(&mut self, project: Option<(&str, &str)>) {
        self.scope_project = project.map(|(id, name)| {
            self.projects.insert(id.to_string(), name.to_string());
            id.to_string()
        });
    }

    /// A project's name when known, else its id.
    pub fn project_name(&self, id: &str) -> String {
        self.projects.get(id).cloned().unwrap_or_else(|| id.to_string())
    }

    /// The text to print for `event` (possibly empty), and what the progress
    /// indicator should do. Lines end with `\n`; text deltas do not.
    pub fn event(&mut self, event: &StreamEvent) -> (String, Waiting) {
        let (text, waiting) = match event {
            StreamEvent::TextDelta { content } => return (self.inline(content), Waiting::Off),
            StreamEvent::AgentState { state, details } => {
                let label = match state {
                    AgentActivity::Thinking => "thinking",
                    AgentActivity::Executing => RUNNING_TOOLS,
                    AgentActivity::WaitingOnUser => return (String::new(), Waiting::Off),
                };
                let label = details.as_deref().map_or(label.to_string(), |d| d.trim_end_matches('…').to_lowercase());
                (None, Waiting::On(label))
            }
            StreamEvent::Session { session } if session.message_count == 0 => {
                (Some(format!("· new session {} ({})", session.id, session.context_type.as_str())), Waiting::Same)
            }
            StreamEvent::Session { .. } => (None, Waiting::Same),
            StreamEvent::FocusChanged { previous, current } => {
                let show = |f: &shared::sse::Focus| {
                    let project = f.focus.as_ref().and_then(|v| v.get("projectId")).and_then(|p| p.as_str());
                    match project {
                        Some(p) => format!("{} {}", f.context_type.as_str(), self.project_name(p)),
                        None => f.context_type.as_str().to_string(),
                    }
                };
                (Some(format!("· scope {} → {}", show(previous), show(current))), Waiting::Same)
            }
            StreamEvent::ContextUsage(u) => {
                let cache = u
                    .cache
                    .map(|c| format!(", cache {}", if c == shared::sse::CacheStatus::Hit { "hit" } else { "miss" }));
                let dropped =
                    if u.messages_dropped > 0 { format!(", {} left out", u.messages_dropped) } else { String::new() };
                let line = format!(
                    "· context {} of {} tokens, {} message{}{dropped}{}",
                    u.tokens_used,
                    u.token_budget,
                    u.messages_kept,
                    if u.messages_kept == 1 { "" } else { "s" },
                    cache.unwrap_or_default()
                );
                (Some(line), Waiting::Same)
            }
            StreamEvent::ToolCall { tool_call, .. } => {
                let f = &tool_call.function;
                (Some(format!("→ {}({})", f.name, args_summary(&f.arguments))), Waiting::Same)
            }
            // A calendar step says itself in a sentence.
            StreamEvent::Operation { status: OperationStatus::Success, summary: Some(sentence), .. } => {
                (Some(format!("✓ {sentence}")), Waiting::On(RUNNING_TOOLS.into()))
            }
            StreamEvent::Operation { action, entity_type, entity_name, status, .. } => {
                let what = operation_phrase(*action, entity_type, entity_name);
                match status {
                    OperationStatus::Start => (None, Waiting::On(format!("{}…", present(*action, &what)))),
                    OperationStatus::Success => {
                        let place = match (&self.scope_project, entity_type.as_str()) {
                            (Some(p), t) if t != "project" => format!(" in {}", self.project_name(p)),
                            _ => String::new(),
                        };
                        (Some(format!("✓ {}{place}", past(*action, &what))), Waiting::On(RUNNING_TOOLS.into()))
                    }
                    OperationStatus::Error => {
                        (Some(format!("✗ could not {}", infinitive(*action, &what))), Waiting::On(RUNNING_TOOLS.into()))
                    }
                }
            }
            StreamEvent::EntityPatch { patch } => (Some(self.patch_line(patch)), Waiting::Same),
            // Its operation line said what changed.
            StreamEvent::CalendarPatch { .. } => (None, Waiting::Same),
            // A result that went well is already told by its operation and
            // patch lines; a failure is what the model reads next, so show it.
            StreamEvent::ToolResult { ok: true, .. } => (None, Waiting::Same),
            StreamEvent::ToolResult { name, preview, .. } => {
                (Some(format!("✗ {name}: {}", shorten(&one_line(preview), PREVIEW_CHARS))), Waiting::Same)
            }
            StreamEvent::Error { code, message, retryable } => {
                let again = if *retryable { " (retryable)" } else { "" };
                (Some(format!("error {code}: {message}{again}")), Waiting::Same)
            }
            StreamEvent::PlanCreated { plan, .. } => {
                let steps: usize = plan.stages.iter().map(|s| s.steps.len()).sum();
                let line = format!("· plan “{}”: {} stages, {steps} steps", plan.goal, plan.stages.len());
                (Some(line), Waiting::Same)
            }
            StreamEvent::PlanReadyForReview { .. } => {
                (Some("· the plan waits for your approval".to_string()), Waiting::Off)
            }
            StreamEvent::PlanReview { approved, reason, .. } => {
                let verdict = if *approved { "approved" } else { "rejected" };
                (Some(format!("· reviewer {verdict} the plan: {reason}")), Waiting::Same)
            }
            StreamEvent::StepStart { step_id, title, .. } => {
                (Some(format!("▸ step {step_id}: {title}")), Waiting::On(format!("step {step_id}")))
            }
            StreamEvent::ExecutorSpawned { .. } | StreamEvent::ExecutorResult { ok: true, .. } => (None, Waiting::Same),
            StreamEvent::ExecutorResult { step_id, summary, .. } => {
                (Some(format!("✗ step {step_id}: {}", shorten(&one_line(summary), PREVIEW_CHARS))), Waiting::Same)
            }
            StreamEvent::StepComplete { step_id, status, .. } => {
                let status = serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_owned));
                (Some(format!("▪ step {step_id} {}", status.unwrap_or_default())), Waiting::Same)
            }
            StreamEvent::ApprovalRequired { summary, .. } => (Some(format!("? approve: {summary}")), Waiting::Off),
            StreamEvent::ApprovalAnswered { approved: true, .. } => (Some("✓ approved".to_string()), Waiting::Same),
            StreamEvent::ApprovalAnswered { reason, .. } => {
                let why = reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                (Some(format!("✗ denied{why}")), Waiting::Same)
            }
            StreamEvent::ContextShift { current, entity_name, .. } => {
                let project = current.focus.as_ref().and_then(|f| f.get("projectId")).and_then(|p| p.as_str());
                if let Some(p) = project {
                    self.projects.insert(p.to_string(), entity_name.clone());
                }
                (Some(format!("· moved into {} {entity_name}", current.context_type.as_str())), Waiting::Same)
            }
            // The questions are also the answer's text.
            StreamEvent::ClarifyingQuestions { .. } => (None, Waiting::Same),
            StreamEvent::AnswerCheck { verdict, mismatches } => {
                (Some(answer_check(*verdict, mismatches)), Waiting::Same)
            }
            StreamEvent::CutOff { reason } => {
                (Some(format!("· cut off: the answer {}", reason.describe())), Waiting::Same)
            }
            StreamEvent::Telemetry(_) | StreamEvent::DebugContext(_) => (None, Waiting::Same),
            StreamEvent::Done { reason, replayed, .. } => {
                let line = match (reason, replayed) {
                    (_, true) => Some("· (a replay of a turn that had already ended)".to_string()),
                    (DoneReason::Stopped, _) => Some("· stopped; the partial answer was kept".to_string()),
                    _ => None,
                };
                (line, Waiting::Off)
            }
        };
        (text.map(|t| self.line(&t)).unwrap_or_default(), waiting)
    }

    /// Ends the current line if text left the cursor mid-line.
    pub fn end_line(&mut self) -> String {
        if std::mem::take(&mut self.mid_line) {
            "\n".into()
        } else {
            String::new()
        }
    }

    fn inline(&mut self, content: &str) -> String {
        if !content.is_empty() {
            self.mid_line = !content.ends_with('\n');
        }
        content.to_string()
    }

    fn line(&mut self, text: &str) -> String {
        let mut out = self.end_line();
        out.push_str(text);
        out.push('\n');
        out
    }

    /// `· Launch v3: +task “Write the blog post”, ~document “Spec”`.
    fn patch_line(&mut self, patch: &EntityPatch) -> String {
        let pid = patch.project_id.to_string();
        let mut parts = Vec::new();
        for change in &patch.changes {
            match change {
                Change::Created { entity, .. } | Change::Updated { entity, .. } => {
                    let sign = if matches!(change, Change::Created { .. }) { '+' } else { '~' };
                    let (kind, name) = match entity {
                        Record::Project(p) => {
                            self.projects.insert(p.id.to_string(), p.name.clone());
                            ("project", p.name.clone())
                        }
                        Record::Entity(e) => (e.kind().as_str(), e.fields.name().to_string()),
                    };
                    parts.push(format!("{sign}{kind} “{}”", shorten(&name, VALUE_CHARS)));
                }
                Change::Deleted { kind, id } => parts.push(format!("-{} {id}", record_kind(*kind))),
                Change::Linked { edge } => parts.push(format!("+link {}", edge.relation)),
                Change::Unlinked { edge } => parts.push(format!("-link {}", edge.relation)),
            }
        }
        if patch.doc_structure.is_some() {
            parts.push("document tree".into());
        }
        format!("· {} v{}: {}", self.project_name(&pid), patch.version, parts.join(", "))
    }
}

/// `task`, `project`: a record kind as the wire spells it.
pub fn record_kind(kind: RecordKind) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// `create task “Write brief”`, `list projects`, `search for “launch”`.
fn operation_phrase(action: OperationAction, entity_type: &str, name: &str) -> String {
    let quoted = if name.starts_with('“') { name.to_string() } else { format!("“{name}”") };
    match action {
        OperationAction::List => name.to_string(),
        OperationAction::Search => format!("for {quoted}"),
        _ => format!("{entity_type} {quoted}"),
    }
}

fn verb(action: OperationAction) -> (&'static str, &'static str, &'static str) {
    match action {
        OperationAction::List => ("list", "listing", "listed"),
        OperationAction::Search => ("search", "searching", "searched"),
        OperationAction::Read => ("read", "reading", "read"),
        OperationAction::Create => ("create", "creating", "created"),
        OperationAction::Update => ("update", "updating", "updated"),
        OperationAction::Delete => ("delete", "deleting", "deleted"),
    }
}

fn infinitive(action: OperationAction, what: &str) -> String {
    format!("{} {what}", verb(action).0)
}

fn present(action: OperationAction, what: &str) -> String {
    format!("{} {what}", verb(action).1)
}

fn past(action: OperationAction, what: &str) -> String {
    format!("{} {what}", verb(action).2)
}

/// `title: "Write the blog post", priority: 2`, in the model's order, at
/// most [`ARGS_CHARS`] characters; arguments that are not a JSON object are
/// shown as sent.
pub fn args_summary(arguments: &str) -> String {
    let summary = match serde_json::from_str::<InOrder>(arguments) {
        Ok(InOrder(fields)) => fields
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::String(s) => format!("{:?}", shorten(s, VALUE_CHARS)),
                    serde_json::Value::Array(a) if a.is_empty() => "[]".into(),
                    serde_json::Value::Array(_) => "[…]".into(),
                    serde_json::Value::Object(o) if o.is_empty() => "{}".into(),
                    serde_json::Value::Object(_) => "{…}".into(),
                    other => other.to_string(),
                };
                format!("{k}: {v}")
            })
            .collect::<Vec<_>>()
            .join(", "),
        Err(_) => one_line(arguments),
    };
    shorten(&summary, ARGS_CHARS)
}

/// A JSON object's fields in the order written. `serde_json::Map` sorts its
/// keys unless the workspace-wide `preserve_order` feature is on, which would
/// change every crate's maps; this reads just the top level in order instead.
struct InOrder(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for InOrder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = InOrder;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<InOrder, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    fields.push(entry);
                }
                Ok(InOrder(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// At most `max` characters, ending with `…` when cut.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The lines of an `answer_check`: what the answer said that the turn's
/// steps contradict, and what happens to it.
fn answer_check(verdict: CheckVerdict, mismatches: &[shared::claims::ClaimMismatch]) -> String {
    let head = match verdict {
        CheckVerdict::AskedAgain => "! the answer above claimed what no tool did; asking again",
        CheckVerdict::Corrected => "! correction",
    };
    let mut out = head.to_string();
    for m in mismatches {
        out.push_str(&format!("\n  {}", m.note));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renders frames' JSON as the wire carries it (through `StreamEvent`).
    fn render(r: &mut Renderer, json: &str) -> (String, Waiting) {
        let event: StreamEvent = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
        r.event(&event)
    }

    fn text(r: &mut Renderer, events: &[&str]) -> String {
        events.iter().map(|e| render(r, e).0).collect()
    }

    #[test]
    fn text_streams_inline_and_lines_start_on_their_own_line() {
        let mut r = Renderer::new();
        let out = text(
            &mut r,
            &[
                r#"{"type":"agent_state","state":"thinking","details":"Thinking…"}"#,
                r#"{"type":"text_delta","content":"Hel"}"#,
                r#"{"type":"text_delta","content":"lo there."}"#,
                r#"{"type":"error","code":"llm_stream_error","message":"cut","retryable":false}"#,
            ],
        );
        assert_eq!(out, "Hello there.\nerror llm_stream_error: cut\n");
        assert!(r.at_line_start());
        assert_eq!(r.end_line(), "");
    }

    #[test]
    fn a_new_session_is_one_line_and_a_continued_one_is_silent() {
        let mut r = Renderer::new();
        let new = r#"{"type":"session","session":{"id":"019aa000-0000-7000-8000-000000000001","context_type":"global","status":"active","message_count":0,"created_at":1,"last_activity_at":1}}"#;
        assert_eq!(render(&mut r, new).0, "· new session 019aa000-0000-7000-8000-000000000001 (global)\n");
        let old = new.replace("\"message_count\":0", "\"message_count\":4");
        assert_eq!(render(&mut r, &old).0, "");
    }

    #[test]
    fn tool_calls_show_name_and_short_arguments() {
        let mut r = Renderer::new();
        let call = r#"{"type":"tool_call","tool_call":{"id":"call_1","type":"function","function":{"name":"create_task","arguments":"{\"title\":\"Write the blog post\",\"priority\":2,\"tags\":[\"a\"]}"}}}"#;
        assert_eq!(render(&mut r, call).0, "→ create_task(title: \"Write the blog post\", priority: 2, tags: […])\n");
        assert_eq!(args_summary("{\"title\":"), "{\"title\":");
        assert_eq!(args_summary(""), "");
        let long = format!("{{\"content\":\"{}\"}}", "x".repeat(500));
        let s = args_summary(&long);
        assert!(s.chars().count() <= ARGS_CHARS && s.ends_with("…\""), "{s}");
    }

    #[test]
    fn operations_read_as_sentences_with_the_scope_project() {
        let mut r = Renderer::new();
        r.set_scope(Some(("p1", "Launch")));
        let start = r#"{"type":"operation","action":"create","entity_type":"task","entity_name":"Write the blog post","status":"start"}"#;
        assert_eq!(render(&mut r, start), (String::new(), Waiting::On("creating task “Write the blog post”…".into())));
        let ok = r#"{"type":"operation","action":"create","entity_type":"task","entity_name":"Write the blog post","status":"success","entity_id":"t1"}"#;
        // Done with this one: the progress line no longer says "creating".
        assert_eq!(
            render(&mut r, ok),
            ("✓ created task “Write the blog post” in Launch\n".into(), Waiting::On("running tools".into()))
        );
        let err =
            r#"{"type":"operation","action":"update","entity_type":"goal","entity_name":"Beta","status":"error"}"#;
        assert_eq!(render(&mut r, err).0, "✗ could not update goal “Beta”\n");
        let search = r#"{"type":"operation","action":"search","entity_type":"project","entity_name":"“launch”","status":"success"}"#;
        assert_eq!(render(&mut r, search).0, "✓ searched for “launch”\n");

        let mut global = Renderer::new();
        let project = r#"{"type":"operation","action":"create","entity_type":"project","entity_name":"Launch","status":"success","entity_id":"p2"}"#;
        assert_eq!(render(&mut global, project).0, "✓ created project “Launch”\n");
        let list = r#"{"type":"operation","action":"list","entity_type":"project","entity_name":"projects","status":"success"}"#;
        assert_eq!(render(&mut global, list).0, "✓ listed projects\n");
    }

    #[test]
    fn a_patch_is_one_line_and_teaches_project_names() {
        let mut r = Renderer::new();
        let created_project = r#"{"type":"entity_patch","patch":{"project_id":"p1","version":1,"changes":[
            {"op":"created","kind":"project","id":"p1","entity":{"id":"p1","name":"Launch","state":"active","context_document_id":"d1","version":1,"created_at":1,"updated_at":1}},
            {"op":"created","kind":"document","id":"d1","entity":{"id":"d1","project_id":"p1","kind":"document","fields":{"title":"Launch context"},"version":1,"created_at":1,"updated_at":1}}],
            "doc_structure":{"version":1,"root":[{"id":"d1","order":0,"children":[]}]}}}"#;
        assert_eq!(
            render(&mut r, created_project).0,
            "· Launch v1: +project “Launch”, +document “Launch context”, document tree\n"
        );
        let task = r#"{"type":"entity_patch","patch":{"project_id":"p1","version":2,"changes":[
            {"op":"created","kind":"task","id":"t1","entity":{"id":"t1","project_id":"p1","kind":"task","fields":{"title":"Write the blog post","state":"todo"},"version":1,"created_at":2,"updated_at":2}},
            {"op":"linked","edge":{"from":{"kind":"task","id":"t1"},"relation":"supports","to":{"kind":"goal","id":"g1"}}},
            {"op":"deleted","kind":"risk","id":"r1"}]}}"#;
        assert_eq!(render(&mut r, task).0, "· Launch v2: +task “Write the blog post”, +link supports, -risk r1\n");
    }

    #[test]
    fn waiting_follows_the_agent_and_stops_for_text_and_done() {
        let mut r = Renderer::new();
        let (_, w) = render(&mut r, r#"{"type":"agent_state","state":"executing"}"#);
        assert_eq!(w, Waiting::On("running tools".into()));
        let (_, w) = render(&mut r, r#"{"type":"text_delta","content":"x"}"#);
        assert_eq!(w, Waiting::Off);
        let (out, w) = render(&mut r, r#"{"type":"done","reason":"complete","session_id":"s","turn_id":"t"}"#);
        assert_eq!((out.as_str(), w), ("", Waiting::Off));
        let (out, _) = render(&mut r, r#"{"type":"done","reason":"stopped","turn_id":"t"}"#);
        assert_eq!(out, "\n· stopped; the partial answer was kept\n");
    }

    #[test]
    fn results_and_context_usage_are_one_short_line() {
        let mut r = Renderer::new();
        let ok =
            r#"{"type":"tool_result","tool_call_id":"c","name":"list_projects","ok":true,"preview":"{\"items\":[]}"}"#;
        assert_eq!(render(&mut r, ok).0, "");
        let failed = r#"{"type":"tool_result","tool_call_id":"c","name":"create_task","ok":false,"preview":"{\"error\":\n{\"code\":\"invalid_arguments\"}}"}"#;
        assert_eq!(render(&mut r, failed).0, "✗ create_task: {\"error\": {\"code\":\"invalid_arguments\"}}\n");
        let usage = r#"{"type":"context_usage","tokens_used":1834,"token_budget":12000,"messages_kept":1,"messages_dropped":0,"summary_used":false,"cache":"hit"}"#;
        assert_eq!(render(&mut r, usage).0, "· context 1834 of 12000 tokens, 1 message, cache hit\n");
    }
}
