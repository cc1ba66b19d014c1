//! Large tool outputs, kept apart from the log: the log (and so the model's
//! context) gets a preview and a reference, and the built-in
//! `read_tool_output` reads the whole back in parts.
//!
//! Contract: an output over the inline limit is stored whole before its
//! preview replaces it; `read_tool_output` runs in every loop (a plan step's
//! too) whatever its tools, since only the loop knows what it kept apart.

use super::layer::ToolRun;
use crate::ids::{SessionId, UserId};
use crate::message::ToolCall;
use crate::store::StoreError;
use serde::Deserialize;

/// Where outputs kept apart are stored: the session's store (so deleting the
/// session removes them).
pub use crate::session::store::ToolOutputs;

/// The built-in tool that reads back a tool output kept apart from the log.
pub const READ_TOOL_OUTPUT: &str = "read_tool_output";
/// Characters a `read_tool_output` call returns at most.
const READ_TOOL_OUTPUT_MAX: usize = 12_000;

pub fn read_tool_output_definition() -> serde_json::Value {
    serde_json::json!({"type": "function", "function": {
        "name": READ_TOOL_OUTPUT,
        "description": "Read a part of a large tool output that was kept apart (its result said `full_output`).",
        "parameters": {"type": "object", "additionalProperties": false, "required": ["tool_call_id"], "properties": {
            "tool_call_id": {"type": "string", "description": "The id of the call whose output to read."},
            "offset": {"type": "integer", "minimum": 0, "description": "Character offset to start at (default 0)."},
            "length": {"type": "integer", "minimum": 1, "maximum": READ_TOOL_OUTPUT_MAX}
        }}
    }})
}

pub async fn read_tool_output(store: &dyn ToolOutputs, user: &UserId, sid: &SessionId, call: &ToolCall) -> ToolRun {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Args {
        tool_call_id: String,
        #[serde(default)]
        offset: usize,
        length: Option<usize>,
    }
    let args: Args = match serde_json::from_str(&call.function.arguments) {
        Ok(a) => a,
        Err(e) => return ToolRun::failed(&format!("invalid arguments: {e}")),
    };
    match store.tool_output(user, sid, &args.tool_call_id).await {
        Ok(Some(full)) => {
            let len = args.length.unwrap_or(READ_TOOL_OUTPUT_MAX).min(READ_TOOL_OUTPUT_MAX);
            let part: String = full.chars().skip(args.offset).take(len).collect();
            let total = full.chars().count();
            let next = (args.offset + part.chars().count() < total).then_some(args.offset + part.chars().count());
            let content = serde_json::json!({"ok": true, "offset": args.offset, "total_chars": total,
                "next_offset": next, "text": part})
            .to_string();
            ToolRun {
                ok: true,
                preview: format!("read {} of {total} characters", part.chars().count()),
                content,
                events: vec![],
            }
        }
        Ok(None) => ToolRun::failed("no output is kept apart for that tool_call_id in this session"),
        Err(e) => {
            tracing::error!(error = %e, "tool output not read");
            ToolRun::failed("the stored output could not be read right now")
        }
    }
}

/// A tool output over `inline_bytes` is stored apart in full; the log (and
/// so the model's context) gets a preview and a reference to it.
pub async fn keep_apart(
    store: &dyn ToolOutputs,
    user: &UserId,
    sid: &SessionId,
    call: &ToolCall,
    content: String,
    inline_bytes: usize,
) -> Result<String, StoreError> {
    if content.len() <= inline_bytes {
        return Ok(content);
    }
    store.put_tool_output(user, sid, &call.id, &content).await?;
    let preview: String = content.chars().take(inline_bytes.min(2_000)).collect();
    Ok(serde_json::json!({
        "preview": preview,
        "truncated": true,
        "total_chars": content.chars().count(),
        "full_output": {"tool": READ_TOOL_OUTPUT, "tool_call_id": call.id},
    })
    .to_string())
}
