//! Folding streamed tool-call pieces into whole [`ToolCall`]s.

use super::LlmEvent;
use crate::message::{FunctionCall, ToolCall};
use std::collections::BTreeMap;

/// Collects [`LlmEvent::ToolCallDelta`]s and yields the assistant's complete
/// tool calls, in `index` order.
///
/// Per index: the first id wins (servers that repeat it on every delta are
/// fine); the name is taken from the first delta that has one, and a later
/// delta repeating the same name is ignored while a different one is appended
/// (a name streamed in pieces); argument fragments are concatenated as they
/// come. A call that never got an id gets a fresh random one (`call_<24 hex>`):
/// a position-based id would repeat in every turn of the session, and the log
/// (and anything keyed by call id) must never see one id twice.
#[derive(Debug, Default, Clone)]
pub struct ToolCallAccumulator {
    calls: BTreeMap<u32, Partial>,
}

#[derive(Debug, Default, Clone)]
struct Partial {
    id: Option<String>,
    name: String,
    arguments: String,
}

impl ToolCallAccumulator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one piece of the call at `index`.
    pub fn push(&mut self, index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) {
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            if call.id.is_none() {
                call.id = Some(id.to_string());
            }
        }
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            if call.name != name {
                call.name.push_str(name);
            }
        }
        call.arguments.push_str(arguments);
    }

    /// Adds the event if it is a [`LlmEvent::ToolCallDelta`]; returns whether it was.
    pub fn push_event(&mut self, event: &LlmEvent) -> bool {
        match event {
            LlmEvent::ToolCallDelta { index, id, name, arguments } => {
                self.push(*index, id.as_deref(), name.as_deref(), arguments);
                true
            }
            _ => false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// How many distinct calls so far.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// The complete calls, in index order.
    pub fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_values()
            .map(|c| {
                let id = c.id.unwrap_or_else(|| format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..24]));
                ToolCall {
                    id,
                    kind: "function".to_string(),
                    function: FunctionCall { name: c.name, arguments: c.arguments },
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            function: FunctionCall { name: name.into(), arguments: arguments.into() },
        }
    }

    #[test]
    fn empty() {
        let acc = ToolCallAccumulator::new();
        assert!(acc.is_empty());
        assert_eq!(acc.len(), 0);
        assert_eq!(acc.finish(), vec![]);
    }

    #[test]
    fn openai_style_deltas_fold_in_index_order() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(0, Some("call_a"), Some("search"), "");
        acc.push(0, None, None, "{\"q\":");
        acc.push(1, Some("call_b"), Some("read"), "{\"id\"");
        acc.push(0, None, None, "\"rust\"}");
        acc.push(1, None, None, ":7}");
        assert!(!acc.is_empty());
        assert_eq!(acc.len(), 2);
        assert_eq!(
            acc.finish(),
            vec![call("call_a", "search", "{\"q\":\"rust\"}"), call("call_b", "read", "{\"id\":7}")]
        );
    }

    #[test]
    fn out_of_order_and_sparse_indices_come_out_sorted() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(5, Some("x"), Some("late"), "{}");
        acc.push(2, Some("y"), Some("early"), "{}");
        let got = acc.finish();
        assert_eq!(got, vec![call("y", "early", "{}"), call("x", "late", "{}")]);
    }

    #[test]
    fn repeated_id_and_name_are_not_duplicated() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(0, Some("call_1"), Some("create_task"), "{\"title\":");
        acc.push(0, Some("call_1"), Some("create_task"), "\"x\"}");
        acc.push(0, Some(""), Some(""), "");
        assert_eq!(acc.finish(), vec![call("call_1", "create_task", "{\"title\":\"x\"}")]);
    }

    #[test]
    fn a_name_streamed_in_pieces_is_joined() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(0, Some("c"), Some("create_"), "");
        acc.push(0, None, Some("task"), "{}");
        assert_eq!(acc.finish(), vec![call("c", "create_task", "{}")]);
    }

    #[test]
    fn missing_ids_are_generated_unique_across_answers() {
        let answer = || {
            let mut acc = ToolCallAccumulator::new();
            acc.push(0, None, Some("a"), "{}");
            acc.push(1, Some("call_2"), Some("b"), "{}");
            acc.push(2, None, Some("c"), "");
            acc.finish()
        };
        let (one, two) = (answer(), answer());
        assert_eq!(one[1], call("call_2", "b", "{}"), "a given id is kept");
        let minted: Vec<&str> = [&one[0], &one[2], &two[0], &two[2]].iter().map(|c| c.id.as_str()).collect();
        assert!(minted.iter().all(|id| id.starts_with("call_") && id.len() == 29), "{minted:?}");
        let distinct: std::collections::HashSet<_> = minted.iter().collect();
        assert_eq!(distinct.len(), 4, "never the same id twice, not even in the next answer: {minted:?}");
        assert_eq!((one[0].function.name.as_str(), one[2].function.name.as_str()), ("a", "c"));
    }

    #[test]
    fn push_event_takes_only_tool_call_deltas() {
        let mut acc = ToolCallAccumulator::new();
        assert!(!acc.push_event(&LlmEvent::TextDelta("hi".into())));
        assert!(!acc.push_event(&LlmEvent::Finish { reason: "tool_calls".into() }));
        assert!(acc.push_event(&LlmEvent::ToolCallDelta {
            index: 0,
            id: Some("id1".into()),
            name: Some("f".into()),
            arguments: "{\"a\":1}".into(),
        }));
        assert_eq!(acc.finish(), vec![call("id1", "f", "{\"a\":1}")]);
    }
}
