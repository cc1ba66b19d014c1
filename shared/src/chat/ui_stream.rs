//! The second wire format: the Vercel AI SDK's **UI message stream
//! protocol v1**, the one `useChat` (`DefaultChatTransport`) reads. Same
//! [`StreamEvent`]s as the native format, another encoder; the mapping table
//! is in `docs/chat-protocol.md`.
//!
//! A frame is `data: <one line of JSON>\n\n` (no `id:`, no `event:`: the
//! client reads only `data:`), and the stream ends with `data: [DONE]\n\n`.
//! The response carries `x-vercel-ai-ui-message-stream: v1` ([`HEADER`]).
//!
//! Contract (what the client's `processUIMessageStream` throws on, or loses):
//! - `start` (with the turn's `messageId`) is the first part, `finish` and then
//!   `[DONE]` the last; nothing is written after `[DONE]`;
//! - a `text-delta` is always inside its `text-start` / `text-end`; open text
//!   is ended before a tool part, an `error`, a `finish-step` and `finish`;
//! - a `tool-output-*` is sent only for a call id this stream announced with
//!   `tool-input-*`; a result for any other id travels as a `data-tool-result`
//!   part instead;
//! - a model round is a step: `start-step` before its first text or tool
//!   call, `finish-step` when the next round begins (text or a call after a
//!   tool result) and before `finish`;
//! - our own events are `data-<kind, with dashes>` parts carrying the event's
//!   JSON without its `type`; any kind without an arm below (a new variant
//!   included) takes that form, so the mapping never lags the event model.
//!
//! The encoder is deterministic in the event sequence: the same events through
//! a fresh encoder with the same `messageId` give the same bytes, which is
//! what lets a resumed stream replay a turn from its start (as the same
//! message: the replay's sink may merge text deltas, so not the same bytes).

use crate::message::ToolCall;
use crate::sse::{DoneReason, FrameEncoder, StreamEvent};
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

/// The response header that names the protocol.
pub const HEADER: (&str, &str) = ("x-vercel-ai-ui-message-stream", "v1");

/// The stream's last frame.
const DONE: &str = "data: [DONE]\n\n";

/// Encodes one turn's events as UI message stream parts. One per response.
#[derive(Debug)]
pub struct UiEncoder {
    message_id: String,
    started: bool,
    /// A step is open (`start-step` sent, `finish-step` not yet).
    step_open: bool,
    /// The open step has seen a tool result: the next text or call is a new round.
    step_has_results: bool,
    /// The id of the open text part, if any.
    open_text: Option<String>,
    /// Text parts started so far (their ids are `text-<n>`).
    texts: u32,
    /// Call ids announced with `tool-input-*`, or answered (an approval's
    /// continuation: the client has the call in the message it continues).
    calls: HashSet<String>,
    /// Calls the user denied: their `tool-output-denied` is their result.
    denied: HashSet<String>,
    /// A replay (`GET /chat/{id}/stream`): the client starts the message
    /// afresh, so an answered call it no longer holds is not a tool part.
    replay: bool,
    /// An `error` part was sent.
    errored: bool,
    finished: bool,
}

impl UiEncoder {
    /// `message_id` is the assistant message's id on the client: the turn id,
    /// so that a replay of the turn names the same message.
    pub fn new(message_id: impl Into<String>) -> Self {
        UiEncoder {
            message_id: message_id.into(),
            started: false,
            step_open: false,
            step_has_results: false,
            open_text: None,
            texts: 0,
            calls: HashSet::new(),
            denied: HashSet::new(),
            replay: false,
            errored: false,
            finished: false,
        }
    }

    /// The encoder of a replay: the same parts, except that the calls an
    /// approval's continuation answers (announced in an earlier turn) become
    /// `data-approval-answered` and `data-tool-result` parts, not tool parts
    /// of a message the client emptied at `start`.
    pub fn replaying(message_id: impl Into<String>) -> Self {
        UiEncoder { replay: true, ..UiEncoder::new(message_id) }
    }

    /// Whether `[DONE]` has been written.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The frames one event becomes (none after `[DONE]`).
    pub fn encode(&mut self, event: &StreamEvent) -> Bytes {
        if self.finished {
            return Bytes::new();
        }
        let mut parts = Vec::new();
        if !self.started {
            self.started = true;
            parts.push(json!({"type": "start", "messageId": self.message_id}));
        }
        match event {
            StreamEvent::TextDelta { content } if content.is_empty() => {}
            StreamEvent::TextDelta { content } => self.text(content, &mut parts),
            StreamEvent::ToolCall { tool_call, .. } => self.tool_call(tool_call, &mut parts),
            StreamEvent::ToolResult { tool_call_id, .. } if self.denied.contains(tool_call_id) => {}
            StreamEvent::ApprovalRequired { approval_id, tool_call_id, .. } if self.calls.contains(tool_call_id) => {
                self.end_text(&mut parts);
                parts.push(
                    json!({"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": tool_call_id}),
                );
                // The operation in human words, for the client to show beside it.
                parts.push(data_part(event));
            }
            StreamEvent::ApprovalAnswered { .. } if self.replay => parts.push(data_part(event)),
            StreamEvent::ApprovalAnswered { tool_call_id, approved, .. } => {
                self.calls.insert(tool_call_id.clone());
                if !approved {
                    self.end_text(&mut parts);
                    self.step_has_results = true;
                    self.denied.insert(tool_call_id.clone());
                    parts.push(json!({"type": "tool-output-denied", "toolCallId": tool_call_id}));
                }
            }
            StreamEvent::ToolResult { tool_call_id, ok, preview, .. } if self.calls.contains(tool_call_id) => {
                self.tool_output(tool_call_id, *ok, preview, &mut parts)
            }
            StreamEvent::Error { message, .. } => {
                self.end_text(&mut parts);
                self.errored = true;
                parts.push(json!({"type": "error", "errorText": message}));
            }
            // The text before a check is its own part: an answer asked
            // again is followed by another text, not glued to it.
            StreamEvent::AnswerCheck { .. } => {
                self.end_text(&mut parts);
                parts.push(data_part(event));
            }
            StreamEvent::Done { reason, session_id, turn_id, usage, replayed } => {
                let metadata = json!({
                    "reason": reason, "session_id": session_id, "turn_id": turn_id,
                    "usage": usage, "replayed": replayed,
                });
                self.finish(*reason, metadata, &mut parts);
            }
            other => parts.push(data_part(other)),
        }
        frames(&parts, self.finished)
    }

    /// A text delta, inside the open text part (one is started if none is).
    fn text(&mut self, content: &str, parts: &mut Vec<Value>) {
        self.round(parts);
        let id = match &self.open_text {
            Some(id) => id.clone(),
            None => {
                self.texts += 1;
                let id = format!("text-{}", self.texts);
                parts.push(json!({"type": "text-start", "id": id}));
                self.open_text = Some(id.clone());
                id
            }
        };
        parts.push(json!({"type": "text-delta", "id": id, "delta": content}));
    }

    /// A call, announced whole: the model's arguments arrive complete.
    fn tool_call(&mut self, tool_call: &ToolCall, parts: &mut Vec<Value>) {
        self.round(parts);
        self.end_text(parts);
        let (id, name) = (&tool_call.id, &tool_call.function.name);
        self.calls.insert(id.clone());
        parts.push(json!({"type": "tool-input-start", "toolCallId": id, "toolName": name}));
        parts.push(match serde_json::from_str::<Value>(&tool_call.function.arguments) {
            Ok(input) => json!({"type": "tool-input-available", "toolCallId": id, "toolName": name, "input": input}),
            // The model's arguments are not JSON: the client shows the raw text.
            Err(e) => json!({
                "type": "tool-input-error", "toolCallId": id, "toolName": name,
                "input": tool_call.function.arguments, "errorText": format!("the arguments are not JSON: {e}"),
            }),
        });
    }

    /// The result of a call this stream announced; it closes the round.
    fn tool_output(&mut self, tool_call_id: &str, ok: bool, preview: &str, parts: &mut Vec<Value>) {
        self.end_text(parts);
        self.step_has_results = true;
        parts.push(if ok {
            json!({"type": "tool-output-available", "toolCallId": tool_call_id, "output": preview})
        } else {
            json!({"type": "tool-output-error", "toolCallId": tool_call_id, "errorText": preview})
        });
    }

    /// `done`: open text and step closed, an `error` if the turn failed
    /// without one, then `finish` carrying `done`'s fields as metadata.
    fn finish(&mut self, reason: DoneReason, metadata: Value, parts: &mut Vec<Value>) {
        self.end_text(parts);
        self.end_step(parts);
        if reason == DoneReason::Error && !self.errored {
            // The native stream always sends `error` first; should it
            // not, the client still learns that the turn failed.
            parts.push(json!({"type": "error", "errorText": "the turn failed"}));
        }
        let finish_reason = match reason {
            DoneReason::Complete => "stop",
            DoneReason::Error => "error",
            DoneReason::Stopped => "other",
            DoneReason::CutOff => "length",
        };
        parts.push(json!({"type": "finish", "finishReason": finish_reason, "messageMetadata": metadata}));
        self.finished = true;
    }

    /// Opens the step a text or a call belongs to: a new one after a round's
    /// tool results.
    fn round(&mut self, parts: &mut Vec<Value>) {
        if self.step_open && self.step_has_results {
            self.end_text(parts);
            self.end_step(parts);
        }
        if !self.step_open {
            self.step_open = true;
            self.step_has_results = false;
            parts.push(json!({"type": "start-step"}));
        }
    }

    fn end_text(&mut self, parts: &mut Vec<Value>) {
        if let Some(id) = self.open_text.take() {
            parts.push(json!({"type": "text-end", "id": id}));
        }
    }

    fn end_step(&mut self, parts: &mut Vec<Value>) {
        if std::mem::take(&mut self.step_open) {
            parts.push(json!({"type": "finish-step"}));
        }
    }
}

impl FrameEncoder for UiEncoder {
    /// The frame's number is not on this wire: the client reads only `data:`.
    fn encode(&mut self, _id: u64, event: &StreamEvent) -> Bytes {
        UiEncoder::encode(self, event)
    }
}

/// The parts as frames, then `[DONE]` after the last (`finish`).
fn frames(parts: &[Value], finished: bool) -> Bytes {
    let mut out = String::new();
    for p in parts {
        // serde_json escapes control characters: one line per part, and no
        // payload can forge a frame boundary.
        out.push_str("data: ");
        out.push_str(&p.to_string());
        out.push_str("\n\n");
    }
    if finished {
        out.push_str(DONE);
    }
    Bytes::from(out)
}

/// `data-<kind>`: the event's JSON without `type`. `agent_state` is
/// transient (a status line, not part of the message); an entity patch has an
/// id derived from what it changed, so a later patch of the same entities
/// replaces it in the message instead of piling up.
fn data_part(event: &StreamEvent) -> Value {
    let mut data = match serde_json::to_value(event).expect("events always serialize") {
        Value::Object(m) => m,
        other => Map::from_iter([("value".to_string(), other)]),
    };
    data.remove("type");
    let mut part = Map::new();
    part.insert("type".into(), Value::String(format!("data-{}", event.kind().replace('_', "-"))));
    match event {
        StreamEvent::AgentState { .. } => {
            part.insert("transient".into(), Value::Bool(true));
        }
        StreamEvent::EntityPatch { .. } => {
            part.insert("id".into(), Value::String(patch_part_id(&data)));
        }
        _ => {}
    }
    part.insert("data".into(), Value::Object(data));
    Value::Object(part)
}

/// `<project>:<what each change is about>`, e.g. `p1:task:t1` or
/// `p1:task:t1,edge:t1>supports>g1`.
fn patch_part_id(data: &Map<String, Value>) -> String {
    let patch = &data["patch"];
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let about: Vec<String> = patch["changes"]
        .as_array()
        .map(|changes| {
            changes
                .iter()
                .map(|c| match c.get("edge") {
                    Some(e) => format!("edge:{}>{}>{}", s(&e["from"]["id"]), s(&e["relation"]), s(&e["to"]["id"])),
                    None => format!("{}:{}", s(&c["kind"]), s(&c["id"])),
                })
                .collect()
        })
        .unwrap_or_default();
    format!("{}:{}", s(&patch["project_id"]), about.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TurnId;
    use crate::message::FunctionCall;
    use crate::sse::{AgentActivity, EventSink, OperationAction, OperationStatus, CHANNEL_FRAMES};
    use http_body_util::BodyExt;

    fn call(id: &str, args: &str) -> StreamEvent {
        StreamEvent::ToolCall {
            tool_call: ToolCall {
                id: id.into(),
                kind: "function".into(),
                function: FunctionCall { name: "create_task".into(), arguments: args.into() },
            },
            origin: Default::default(),
        }
    }

    fn result(id: &str, ok: bool) -> StreamEvent {
        StreamEvent::ToolResult {
            tool_call_id: id.into(),
            name: "create_task".into(),
            ok,
            preview: "{}".into(),
            origin: Default::default(),
        }
    }

    fn done(reason: DoneReason) -> StreamEvent {
        StreamEvent::Done { reason, session_id: None, turn_id: TurnId::new(), usage: None, replayed: false }
    }

    fn parts(events: &[StreamEvent]) -> (Vec<Value>, String) {
        let mut enc = UiEncoder::new("m1");
        let wire: String =
            events.iter().map(|e| String::from_utf8(enc.encode(e).to_vec()).unwrap()).collect::<Vec<_>>().concat();
        let parts = wire
            .split("\n\n")
            .filter(|f| !f.is_empty() && *f != "data: [DONE]")
            .map(|f| serde_json::from_str(f.strip_prefix("data: ").unwrap()).unwrap())
            .collect();
        (parts, wire)
    }

    fn types(parts: &[Value]) -> Vec<&str> {
        parts.iter().map(|p| p["type"].as_str().unwrap()).collect()
    }

    #[test]
    fn an_answer_asked_again_is_its_own_text_part_and_a_cut_answer_finishes_length() {
        let text = |t: &str| StreamEvent::TextDelta { content: t.into() };
        let check = StreamEvent::AnswerCheck { verdict: crate::sse::CheckVerdict::AskedAgain, mismatches: vec![] };
        let cut = StreamEvent::CutOff { reason: crate::message::CutReason::Length };
        let (p, _) =
            parts(&[text("I deleted it."), check, text("Nothing was deleted."), cut, done(DoneReason::CutOff)]);
        assert_eq!(
            types(&p),
            [
                "start",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "data-answer-check",
                "text-start",
                "text-delta",
                "data-cut-off",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
        assert_eq!(p[5]["data"]["verdict"], "asked_again");
        assert_ne!(p[2]["id"], p[6]["id"], "two text parts");
        assert_eq!(p[8]["data"]["reason"], "length");
        assert_eq!(p[11]["finishReason"], "length");
    }

    #[test]
    fn a_waiting_call_is_asked_then_answered_in_the_continued_message() {
        let asked = StreamEvent::ApprovalRequired {
            approval_id: "apv1.1.x".into(),
            tool_call_id: "c1".into(),
            tool: "create_task".into(),
            summary: "Delete the task".into(),
            arguments: json!({}),
            expires_at: 1,
            origin: Default::default(),
        };
        let (p, _) = parts(&[call("c1", "{}"), asked, done(DoneReason::Complete)]);
        assert_eq!(
            types(&p),
            [
                "start",
                "start-step",
                "tool-input-start",
                "tool-input-available",
                "tool-approval-request",
                "data-approval-required",
                "finish-step",
                "finish"
            ]
        );
        assert_eq!((p[4]["approvalId"].as_str(), p[4]["toolCallId"].as_str()), (Some("apv1.1.x"), Some("c1")));
        let answered = |approved| StreamEvent::ApprovalAnswered {
            approval_id: "apv1.1.x".into(),
            tool_call_id: "c1".into(),
            tool: "create_task".into(),
            approved,
            reason: None,
        };
        let text = StreamEvent::TextDelta { content: "ok".into() };
        let (p, _) = parts(&[answered(false), result("c1", false), text.clone(), done(DoneReason::Complete)]);
        assert_eq!(
            types(&p),
            [
                "start",
                "tool-output-denied",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
        let (p, _) = parts(&[answered(true), result("c1", true), text, done(DoneReason::Complete)]);
        assert_eq!(types(&p)[1], "tool-output-available", "no repeated tool-input: {p:?}");
    }

    #[test]
    fn a_tool_round_then_text_is_two_steps_with_text_closed_around_tools() {
        let (p, wire) = parts(&[
            StreamEvent::AgentState { state: AgentActivity::Thinking, details: None },
            StreamEvent::TextDelta { content: "Let me ".into() },
            call("c1", r#"{"title":"x"}"#),
            StreamEvent::Operation {
                action: OperationAction::Create,
                entity_type: "task".into(),
                entity_name: "x".into(),
                status: OperationStatus::Success,
                entity_id: None,
                summary: None,
            },
            result("c1", true),
            result("unknown", false),
            StreamEvent::TextDelta { content: "done".into() },
            done(DoneReason::Complete),
            StreamEvent::TextDelta { content: "after the end".into() },
        ]);
        assert_eq!(
            types(&p),
            [
                "start",
                "data-agent-state",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "tool-input-start",
                "tool-input-available",
                "data-operation",
                "tool-output-available",
                "data-tool-result",
                "finish-step",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
        assert_eq!(p[0]["messageId"], "m1");
        assert_eq!(p[1]["transient"], true);
        assert_eq!(p[1]["data"]["state"], "thinking");
        assert_eq!(p[7]["input"]["title"], "x");
        assert_ne!(p[3]["id"], p[13]["id"], "each text part has its own id");
        assert_eq!(p.last().unwrap()["finishReason"], "stop");
        assert!(wire.ends_with("data: [DONE]\n\n") && wire.matches("[DONE]").count() == 1);
    }

    #[test]
    fn invalid_arguments_are_a_tool_input_error_and_error_precedes_finish() {
        let (p, _) = parts(&[
            call("c1", "{not json"),
            result("c1", false),
            StreamEvent::TextDelta { content: "oops".into() },
            StreamEvent::error("llm_timeout", "the model timed out", true),
            done(DoneReason::Error),
        ]);
        let t = types(&p);
        assert_eq!(t[3], "tool-input-error");
        assert_eq!(p[3]["input"], "{not json");
        assert_eq!(t[4], "tool-output-error");
        let err = t.iter().position(|t| *t == "error").unwrap();
        assert_eq!(t[err - 1], "text-end", "text is closed before the error");
        assert_eq!(p[err]["errorText"], "the model timed out");
        assert_eq!(t[t.len() - 1], "finish");
        assert_eq!(p[t.len() - 1]["finishReason"], "error");
    }

    #[test]
    fn every_other_kind_is_a_data_part_and_patches_have_ids_from_their_entities() {
        let patch: crate::entities::EntityPatch = serde_json::from_value(json!({
            "project_id": "p1", "version": 3,
            "changes": [{"op": "deleted", "kind": "task", "id": "t1"}],
        }))
        .unwrap();
        let usage = crate::sse::ContextUsage {
            tokens_used: 1,
            token_budget: 2,
            messages_kept: 1,
            messages_dropped: 0,
            summary_used: false,
            cache: None,
        };
        let (p, _) = parts(&[StreamEvent::EntityPatch { patch }, StreamEvent::ContextUsage(usage)]);
        assert_eq!(p[1]["type"], "data-entity-patch");
        assert_eq!(p[1]["id"], "p1:task:t1");
        assert_eq!(p[1]["data"]["patch"]["version"], 3);
        assert_eq!(p[2]["type"], "data-context-usage");
        assert_eq!(p[2]["data"]["token_budget"], 2);
        assert!(p[2].get("data").unwrap().get("type").is_none());
    }

    /// One event of a generated turn: text, a call or a result (call ids
    /// from a small set, so results for unknown and repeated ids happen), an
    /// error, or a data event.
    fn any_event() -> impl proptest::strategy::Strategy<Value = StreamEvent> {
        use proptest::prelude::*;
        prop_oneof![
            3 => "[a-z ]{0,3}".prop_map(|content| StreamEvent::TextDelta { content }),
            2 => (0..3u8, any::<bool>()).prop_map(|(i, json)| call(&format!("c{i}"), if json { "{}" } else { "{" })),
            2 => (0..3u8, any::<bool>()).prop_map(|(i, ok)| result(&format!("c{i}"), ok)),
            1 => Just(StreamEvent::error("e", "failed", false)),
            1 => Just(StreamEvent::AgentState { state: AgentActivity::Executing, details: None }),
        ]
    }

    proptest::proptest! {
        /// Whatever the order of events, the stream is one the client reads:
        /// `start` first, text deltas and ends only in an open text part
        /// (`finish-step` closes them), outputs only for announced calls, no
        /// text open at `finish`, `finish` last, then `[DONE]` once.
        #[test]
        fn any_event_order_gives_a_stream_the_client_reads(
            events in proptest::collection::vec(any_event(), 0..40),
            reason in proptest::prop_oneof![
                proptest::strategy::Just(DoneReason::Complete),
                proptest::strategy::Just(DoneReason::Error),
                proptest::strategy::Just(DoneReason::Stopped),
            ],
        ) {
            let mut all = events;
            all.push(done(reason));
            let (p, wire) = parts(&all);
            proptest::prop_assert!(wire.ends_with("data: [DONE]\n\n") && wire.matches("[DONE]").count() == 1);
            let (mut open, mut calls) = (HashSet::new(), HashSet::new());
            for (i, part) in p.iter().enumerate() {
                let ty = part["type"].as_str().unwrap();
                let id = |k: &str| part[k].as_str().unwrap().to_string();
                proptest::prop_assert_eq!(i == 0, ty == "start");
                match ty {
                    "text-start" => { open.insert(id("id")); }
                    "text-delta" => proptest::prop_assert!(open.contains(&id("id")), "delta outside its part"),
                    "text-end" => proptest::prop_assert!(open.remove(&id("id")), "end of a part not open"),
                    "finish-step" | "tool-input-start" | "error" => proptest::prop_assert!(open.is_empty(), "text left open at {}", ty),
                    "tool-input-available" | "tool-input-error" => { calls.insert(id("toolCallId")); }
                    "tool-output-available" | "tool-output-error" => proptest::prop_assert!(calls.contains(&id("toolCallId"))),
                    "finish" => {
                        proptest::prop_assert!(open.is_empty());
                        proptest::prop_assert_eq!(i, p.len() - 1);
                    }
                    _ => {}
                }
            }
            proptest::prop_assert_eq!(p.last().unwrap()["type"].as_str(), Some("finish"));
            if reason == DoneReason::Error {
                proptest::prop_assert!(p.iter().any(|x| x["type"] == "error"), "a failed turn has an error part");
            }
        }
    }

    #[test]
    fn the_same_events_encode_to_the_same_bytes() {
        let events = [
            StreamEvent::TextDelta { content: "a".into() },
            call("c1", "{}"),
            result("c1", true),
            done(DoneReason::Stopped),
        ];
        assert_eq!(parts(&events).1, parts(&events).1);
    }

    #[tokio::test]
    async fn a_slow_ui_client_gets_coalesced_text_inside_one_text_part() {
        let (mut sink, mut body) = EventSink::channel_with(Box::new(UiEncoder::new("m1")));
        sink.send(crate::turn::thinking()).await.unwrap();
        for i in 0..(CHANNEL_FRAMES * 3) {
            sink.text(&format!("{i},")).unwrap();
        }
        let reader = tokio::spawn(async move {
            let mut wire = Vec::new();
            while let Some(f) = body.frame().await {
                wire.extend_from_slice(f.unwrap().data_ref().unwrap());
            }
            String::from_utf8(wire).unwrap()
        });
        let done = StreamEvent::Done {
            reason: DoneReason::Complete,
            session_id: None,
            turn_id: TurnId::new(),
            usage: None,
            replayed: false,
        };
        sink.send(done).await.unwrap();
        assert!(sink.frames_sent() <= CHANNEL_FRAMES as u64 + 3, "text was coalesced: {}", sink.frames_sent());
        drop(sink);
        let wire = reader.await.unwrap();
        let parts: Vec<serde_json::Value> = wire
            .split_terminator("\n\n")
            .filter(|f| *f != "data: [DONE]")
            .map(|f| serde_json::from_str(f.strip_prefix("data: ").unwrap()).unwrap())
            .collect();
        assert!(wire.ends_with("data: [DONE]\n\n"));
        let types: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
        assert_eq!(types.iter().filter(|t| **t == "text-start").count(), 1);
        assert_eq!(types[types.len() - 3..], ["text-end", "finish-step", "finish"]);
        let text: String = parts.iter().filter_map(|p| p["delta"].as_str()).collect();
        let expected: String = (0..CHANNEL_FRAMES * 3).map(|i| format!("{i},")).collect();
        assert_eq!(text, expected);
    }
}
