//! The OpenAI streaming Chat Completions body, turned into [`LlmEvent`]s.
//!
//! Accepts what OpenAI and the usual compatible servers (llama.cpp, vLLM,
//! Ollama, LM Studio, proxies) send: `chat.completion.chunk` objects, one per
//! SSE frame, then `data: [DONE]`. Only choice 0 is read.

use super::{LlmError, LlmEvent};
use crate::message::Usage;
use crate::sse::{SseDecoder, SseFrame};
use serde::Deserialize;
use std::borrow::Cow;

/// Turns body bytes into [`LlmEvent`]s, incrementally.
///
/// - `choices[0].delta.content` → [`LlmEvent::TextDelta`] (empty strings dropped);
/// - `choices[0].delta.tool_calls[]` → [`LlmEvent::ToolCallDelta`]; a missing
///   `index` is assigned by the order in which new ids appear, and a piece
///   with neither index nor id continues the most recent call;
/// - `choices[0].finish_reason` → [`LlmEvent::Finish`];
/// - a top-level `usage` object (OpenAI's `stream_options.include_usage`
///   chunk, or alongside the last choice as llama.cpp sends it; failing that,
///   llama.cpp's `timings` on the finishing chunk) → [`LlmEvent::Usage`];
/// - role-only chunks, keep-alive comments and empty `data:` frames → nothing;
/// - an `{"error": ...}` object (or vLLM's `{"object": "error", ...}`, or an
///   `event: error` frame) → [`LlmError::Api`];
/// - invalid JSON, or an SSE line over the decoder's limit → [`LlmError::Decode`].
///
/// Within one chunk, events come in the order deltas, finish, usage. A server
/// that reports usage on every chunk gives a `Usage` event each time: the last
/// one is the total.
/// `data: [DONE]` ends the stream: anything after it is ignored.
#[derive(Debug, Default)]
pub struct ChunkParser {
    sse: SseDecoder,
    frames: Vec<SseFrame>,
    done: bool,
    finished: bool,
    tools: ToolIndexer,
}

impl ChunkParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes `bytes`, appending the events they complete to `out`. On error,
    /// `out` holds the events decoded before it; the stream is then unusable.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        if self.done {
            return Ok(());
        }
        let decoded = self.sse.feed_into(bytes, &mut self.frames);
        // Frames completed before a decode error still count, in order.
        let frames = std::mem::take(&mut self.frames);
        let r = self.frames(&frames, out);
        self.frames = frames;
        self.frames.clear();
        r?;
        decoded.map_err(|e| LlmError::Decode(e.to_string()))
    }

    /// Ends the body: decodes a last frame that lacked its blank line.
    pub fn finish(&mut self, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        if self.done {
            return Ok(());
        }
        match self.sse.finish() {
            Some(frame) => self.frame(&frame, out),
            None => Ok(()),
        }
    }

    /// `data: [DONE]` was seen.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// A `finish_reason` was seen.
    pub fn saw_finish(&self) -> bool {
        self.finished
    }

    fn frames(&mut self, frames: &[SseFrame], out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        for f in frames {
            if self.done {
                break;
            }
            self.frame(f, out)?;
        }
        Ok(())
    }

    /// Interprets one SSE frame.
    pub fn frame(&mut self, frame: &SseFrame, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        let data = frame.data.trim();
        if frame.event.as_deref() == Some("error") {
            return Err(LlmError::Api(error_message_from_text(data)));
        }
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        self.chunk(data, out)
    }

    /// Interprets one chunk's JSON.
    fn chunk(&mut self, data: &str, out: &mut Vec<LlmEvent>) -> Result<(), LlmError> {
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| LlmError::Decode(format!("{e} in chunk {}", snippet(data, 200))))?;
        if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
            return Err(LlmError::Api(error_message(&err).unwrap_or_else(|| snippet(data, 500))));
        }
        if chunk.object.as_deref() == Some("error") {
            return Err(LlmError::Api(chunk.message.unwrap_or_else(|| snippet(data, 500))));
        }
        let mut finishing = false;
        if let Some(choice) = chunk.choices.into_iter().flatten().find(|c| c.index.unwrap_or(0) == 0) {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push(LlmEvent::TextDelta(text));
                }
                for tc in delta.tool_calls.into_iter().flatten() {
                    let id = tc.id.filter(|id| !id.is_empty());
                    let index = self.tools.index(tc.index, id.as_deref());
                    let (name, arguments) = match tc.function {
                        Some(f) => (f.name.filter(|n| !n.is_empty()), f.arguments.unwrap_or_default()),
                        None => (None, String::new()),
                    };
                    out.push(LlmEvent::ToolCallDelta { index, id, name, arguments });
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finished = true;
                finishing = true;
                out.push(LlmEvent::Finish { reason });
            }
        }
        if let Some(u) = chunk.usage {
            out.push(LlmEvent::Usage(u.into_usage()));
        } else if finishing {
            if let Some(t) = chunk.timings.and_then(Timings::into_usage) {
                out.push(LlmEvent::Usage(t));
            }
        }
        Ok(())
    }
}

/// Assigns tool-call indices for servers that leave `index` out.
#[derive(Debug, Default)]
struct ToolIndexer {
    /// Ids seen so far and their indices.
    ids: Vec<(String, u32)>,
    /// One past the largest index used.
    next: u32,
    /// The index of the most recent piece.
    last: Option<u32>,
}

impl ToolIndexer {
    fn index(&mut self, given: Option<u32>, id: Option<&str>) -> u32 {
        let known = id.and_then(|id| self.ids.iter().find(|(k, _)| k == id).map(|(_, i)| *i));
        let index = match (given, known, id) {
            (Some(i), _, _) => i,
            (None, Some(i), _) => i,
            // A new id: the next call.
            (None, None, Some(_)) => self.next,
            // Neither: the call in progress (or the first one).
            (None, None, None) => self.last.unwrap_or(self.next),
        };
        if let (Some(id), None) = (id, known) {
            self.ids.push((id.to_string(), index));
        }
        self.next = self.next.max(index.saturating_add(1));
        self.last = Some(index);
        index
    }
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    timings: Option<Timings>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    /// vLLM reports errors as `{"object": "error", "message": ...}`.
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
}

impl WireUsage {
    fn into_usage(self) -> Usage {
        let prompt_tokens = self.prompt_tokens.unwrap_or(0);
        let completion_tokens = self.completion_tokens.unwrap_or(0);
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: self.total_tokens.unwrap_or(prompt_tokens + completion_tokens),
        }
    }
}

/// llama.cpp's per-request timings, which carry token counts.
#[derive(Deserialize)]
struct Timings {
    #[serde(default)]
    prompt_n: Option<u64>,
    #[serde(default)]
    predicted_n: Option<u64>,
}

impl Timings {
    fn into_usage(self) -> Option<Usage> {
        let (p, c) = (self.prompt_n?, self.predicted_n?);
        Some(Usage { prompt_tokens: p, completion_tokens: c, total_tokens: p + c })
    }
}

/// The human part of an OpenAI-style error value: `{"message": ...}` or a string.
pub(crate) fn error_message(err: &serde_json::Value) -> Option<String> {
    match err {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Object(o) => match o.get("message") {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
            _ => Some(err.to_string()),
        },
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// The message of an error body: `error.message`, a top-level `message`
/// (vLLM), `error` as a string, or else the text itself (trimmed, bounded).
pub(crate) fn error_message_from_text(text: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        if let Some(m) = v.get("error").and_then(error_message) {
            return m;
        }
        if let Some(serde_json::Value::String(m)) = v.get("message") {
            return m.clone();
        }
    }
    snippet(text.trim(), 1000)
}

/// At most `max` bytes of `s`, cut at a character boundary, marked when cut.
pub(crate) fn snippet(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<Vec<LlmEvent>, (Vec<LlmEvent>, LlmError)> {
        let mut p = ChunkParser::new();
        let mut out = Vec::new();
        match p.feed(body.as_bytes(), &mut out).and_then(|_| p.finish(&mut out)) {
            Ok(()) => Ok(out),
            Err(e) => Err((out, e)),
        }
    }

    fn text(s: &str) -> LlmEvent {
        LlmEvent::TextDelta(s.into())
    }

    fn tool(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> LlmEvent {
        LlmEvent::ToolCallDelta {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments: arguments.into(),
        }
    }

    fn finish(reason: &str) -> LlmEvent {
        LlmEvent::Finish { reason: reason.into() }
    }

    fn usage(p: u64, c: u64, t: u64) -> LlmEvent {
        LlmEvent::Usage(Usage { prompt_tokens: p, completion_tokens: c, total_tokens: t })
    }

    #[test]
    fn text_role_only_and_empty_content() {
        let body = concat!(
            "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}],\"usage\":null}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo \\\"you\\\" \\u00e9\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(parse(body).unwrap(), vec![text("Hel"), text("lo \"you\" é"), finish("stop")]);
    }

    #[test]
    fn done_stops_everything_after_it() {
        let mut p = ChunkParser::new();
        let mut out = Vec::new();
        p.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n", &mut out).unwrap();
        assert!(p.is_done());
        p.feed(b"data: not json\n\n", &mut out).unwrap();
        p.finish(&mut out).unwrap();
        assert_eq!(out, vec![text("a")]);
    }

    #[test]
    fn keep_alives_and_empty_frames_are_nothing() {
        let body = ": keep-alive\n\n:\n\ndata:\n\ndata: \n\nevent: ping\ndata: {}\n\ndata: {\"choices\":[]}\n\n";
        assert_eq!(parse(body).unwrap(), vec![]);
    }

    #[test]
    fn finish_without_blank_line() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]";
        let mut p = ChunkParser::new();
        let mut out = Vec::new();
        p.feed(body.as_bytes(), &mut out).unwrap();
        assert!(!p.is_done());
        p.finish(&mut out).unwrap();
        assert!(p.is_done());
        assert_eq!(out, vec![text("x")]);
    }

    #[test]
    fn openai_tool_calls_with_index() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"search\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"q\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"function\":{\"name\":\"read\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            parse(body).unwrap(),
            vec![
                tool(0, Some("call_a"), Some("search"), ""),
                tool(0, None, None, "{\"q\":"),
                tool(1, Some("call_b"), Some("read"), "{}"),
                tool(0, None, None, "1}"),
                finish("tool_calls"),
            ]
        );
    }

    #[test]
    fn tool_calls_without_index_get_one_by_order_of_ids() {
        let body = concat!(
            // Two complete calls in one chunk (Gemini-style).
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"x\",\"function\":{\"name\":\"a\",\"arguments\":\"{}\"}},{\"id\":\"y\",\"function\":{\"name\":\"b\",\"arguments\":\"{\"}}]}}]}\n\n",
            // No index, no id: continues the most recent call (y).
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"}\"}}]}}]}\n\n",
            // A known id repeated: its own index.
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"x\",\"function\":{\"arguments\":\" \"}}]}}]}\n\n",
            // A new id: the next index.
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"z\",\"type\":\"function\",\"function\":{\"name\":\"c\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"[]\"}}]}}]}\n\n",
        );
        assert_eq!(
            parse(body).unwrap(),
            vec![
                tool(0, Some("x"), Some("a"), "{}"),
                tool(1, Some("y"), Some("b"), "{"),
                tool(1, None, None, "}"),
                tool(0, Some("x"), None, " "),
                tool(2, Some("z"), Some("c"), ""),
                tool(2, None, None, "[]"),
            ]
        );
    }

    #[test]
    fn a_first_tool_piece_without_index_or_id_is_call_zero() {
        let body = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"}\"}}]}}]}\n\n";
        assert_eq!(parse(body).unwrap(), vec![tool(0, None, Some("f"), "{"), tool(0, None, None, "}")]);
    }

    #[test]
    fn usage_openai_final_chunk_and_llama_cpp_style() {
        // OpenAI: usage in its own chunk with empty choices.
        let body = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],\"usage\":null}\n\n\
                    data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":12,\"total_tokens\":21}}\n\ndata: [DONE]\n\n";
        assert_eq!(parse(body).unwrap(), vec![finish("length"), usage(9, 12, 21)]);
        // llama.cpp: usage next to the finishing choice; finish comes first.
        let body = "data: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{}}],\"usage\":{\"completion_tokens\":3,\"prompt_tokens\":5,\"total_tokens\":8},\"timings\":{\"prompt_n\":5,\"predicted_n\":3}}\n\n";
        assert_eq!(parse(body).unwrap(), vec![finish("stop"), usage(5, 3, 8)]);
        // Only timings: used on the finishing chunk only.
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"timings\":{\"prompt_n\":5,\"predicted_n\":1}}\n\n\
                    data: {\"choices\":[{\"finish_reason\":\"stop\",\"delta\":{}}],\"timings\":{\"prompt_n\":5,\"predicted_n\":2}}\n\n";
        assert_eq!(parse(body).unwrap(), vec![text("a"), finish("stop"), usage(5, 2, 7)]);
        // Missing total: computed.
        let body = "data: {\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":3}}\n\n";
        assert_eq!(parse(body).unwrap(), vec![usage(2, 3, 5)]);
    }

    #[test]
    fn other_choices_are_ignored() {
        let body = "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"no\"}},{\"index\":0,\"delta\":{\"content\":\"yes\"}}]}\n\n";
        assert_eq!(parse(body).unwrap(), vec![text("yes")]);
    }

    #[test]
    fn error_objects_in_the_stream() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"partial\"}}]}\n\n\
                    data: {\"error\":{\"message\":\"context length exceeded\",\"type\":\"invalid_request_error\",\"code\":400}}\n\n\
                    data: {\"choices\":[{\"delta\":{\"content\":\"never\"}}]}\n\n";
        let (events, err) = parse(body).unwrap_err();
        assert_eq!(events, vec![text("partial")]);
        assert_eq!(err, LlmError::Api("context length exceeded".into()));

        let (_, err) = parse("data: {\"error\":\"overloaded\"}\n\n").unwrap_err();
        assert_eq!(err, LlmError::Api("overloaded".into()));
        let (_, err) = parse("data: {\"object\":\"error\",\"message\":\"bad things\",\"code\":500}\n\n").unwrap_err();
        assert_eq!(err, LlmError::Api("bad things".into()));
        let (_, err) = parse("event: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\n").unwrap_err();
        assert_eq!(err, LlmError::Api("boom".into()));
        let (_, err) = parse("event: error\ndata: plain words\n\n").unwrap_err();
        assert_eq!(err, LlmError::Api("plain words".into()));
        // `"error": null` is not an error.
        assert_eq!(
            parse("data: {\"error\":null,\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\n").unwrap(),
            vec![text("ok")]
        );
    }

    #[test]
    fn invalid_json_is_a_decode_error() {
        let (events, err) =
            parse("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\": [\n\n").unwrap_err();
        assert_eq!(events, vec![text("a")]);
        assert!(matches!(err, LlmError::Decode(_)), "{err:?}");
        let (_, err) = parse("data: {\"choices\":{\"not\":\"a list\"}}\n\n").unwrap_err();
        assert!(matches!(err, LlmError::Decode(_)), "{err:?}");
    }

    #[test]
    fn an_over_long_line_is_a_decode_error() {
        let mut p = ChunkParser { sse: SseDecoder::with_limit(64), ..Default::default() };
        let mut out = Vec::new();
        p.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", &mut out).unwrap();
        let err = p.feed(&[b'x'; 100], &mut out).unwrap_err();
        assert!(matches!(err, LlmError::Decode(_)), "{err:?}");
        assert_eq!(out, vec![text("a")]);
    }

    #[test]
    fn snippet_cuts_at_char_boundaries() {
        assert_eq!(snippet("héllo", 2), "h…");
        assert_eq!(snippet("abc", 3), "abc");
    }

    /// A realistic llama.cpp / OpenAI style body with CRLFs, keep-alives,
    /// role-only chunks, text, tool calls, finish, usage and [DONE].
    const REALISTIC: &str = concat!(
        ": keep-alive\r\n\r\n",
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null},\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me look \"},\"finish_reason\":null}]}\r\n\r\n",
        ": keep-alive\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"that up — 🦀 ✓\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_Xy\",\"type\":\"function\",\"function\":{\"name\":\"search_tasks\",\"arguments\":\"\"}}]}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"query\\\": \\\"ünïcode\"}}]}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"}\"}}]}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\r\n\r\n",
        ": keep-alive\r\n\r\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":17,\"total_tokens\":137}}\r\n\r\n",
        "data: [DONE]\r\n\r\n",
    );

    fn realistic_events() -> Vec<LlmEvent> {
        vec![
            text("Let me look "),
            text("that up — 🦀 ✓"),
            tool(0, Some("call_Xy"), Some("search_tasks"), ""),
            tool(0, None, None, "{\"query\": \"ünïcode"),
            tool(0, None, None, "\"}"),
            finish("tool_calls"),
            usage(120, 17, 137),
        ]
    }

    fn parse_pieces<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> (Vec<LlmEvent>, bool) {
        let mut p = ChunkParser::new();
        let mut out = Vec::new();
        for piece in pieces {
            p.feed(piece, &mut out).unwrap();
        }
        p.finish(&mut out).unwrap();
        (out, p.is_done())
    }

    #[test]
    fn realistic_stream_split_at_every_offset() {
        let body = REALISTIC.as_bytes();
        let want = realistic_events();
        assert_eq!(parse_pieces([body]), (want.clone(), true));
        for cut in 0..=body.len() {
            assert_eq!(parse_pieces([&body[..cut], &body[cut..]]), (want.clone(), true), "split at {cut}");
        }
        assert_eq!(parse_pieces(body.chunks(1)), (want.clone(), true), "byte by byte");
        for size in [2, 3, 5, 7, 64] {
            assert_eq!(parse_pieces(body.chunks(size)), (want.clone(), true), "chunks of {size}");
        }
    }
}
