//! The context builder: the only place that turns the stored log into the
//! model's `messages[]` (UNIFIED_CONVERSATION_LOG_SPEC §4.2, AGENTIC_CHAT_V2_SPEC §5).
//!
//! Contract of [`build_context`]:
//! - the output is: the per-turn system prompt, the rolling summary (as a
//!   second system message) when there is one, the kept history in log order,
//!   and the current user message — always, even when it alone is over budget;
//! - history covered by the summary (`seq <= through_seq`), UI-only entries
//!   and stored system messages are never sent;
//! - budgets are message count, characters and tokens (as [`TokenCounter`]
//!   counts them; the stream scales the token budget by what the model
//!   reports, [`TokenCalibration`]); history is trimmed oldest first and
//!   what is kept is a contiguous recent window, so the model never sees a gap
//!   in the middle of what it is shown;
//! - tool-call groups are atomic: an assistant message with `tool_calls` is
//!   kept together with all of its results (parallel calls included) or not at
//!   all, and a `tool` message is never sent without its call. A call whose
//!   results were never stored (a turn that died mid-tool) is sent as its
//!   text only, without `tool_calls`, because the protocol forbids an
//!   unanswered call; without text it is dropped;
//! - an errored or stopped assistant message is kept like any other, as its
//!   partial text after a system note saying what cut it off
//!   ([`crate::message::to_model`]), so "continue" works and the model never
//!   sees a marker in its own words to imitate;
//! - large-paste exception (§5.3): the most recent user message of at least
//!   `large_paste_chars` in the window is what the conversation is about, so
//!   it is reserved right after the current message and other history goes
//!   first.
//!
//! It returns what it kept, dropped and left to the summary, and the token
//! counts, for the stream's `context_usage` event ([`BuiltContext::usage`]).

pub mod cache;
mod calibration;
mod config;
mod estimate;
pub mod modes;
pub mod pack;
mod tokens;

#[cfg(test)]
mod props;

pub use calibration::{Line as CalibrationLine, TokenCalibration};
pub use config::ContextConfig;
pub use tokens::{TokenCounter, PER_MESSAGE_OVERHEAD, REPLY_PRIMING};

use crate::message::{ChatMessage, Role, StoredMessage};
use crate::sse::ContextUsage;

/// The limits one request's `messages[]` must fit in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    /// Conversation messages sent (history plus the current message; the
    /// system prompt and the summary are not counted here).
    pub max_messages: usize,
    /// Characters of every message's text, system prompt and summary included.
    pub max_chars: usize,
    /// Tokens of the whole request as [`TokenCounter`] counts them.
    pub max_tokens: u64,
    /// A user message at least this long is a pasted document (§5.3).
    pub large_paste_chars: usize,
}

impl Default for ContextBudget {
    fn default() -> Self {
        Self { max_messages: 40, max_chars: 60_000, max_tokens: 12_000, large_paste_chars: 8_000 }
    }
}

/// The session's rolling summary as the builder needs it.
#[derive(Debug, Clone, Copy)]
pub struct SummaryRef<'a> {
    pub text: &'a str,
    /// The last message seq the summary covers.
    pub through_seq: u64,
}

/// Everything one request is built from.
#[derive(Debug, Clone, Copy)]
pub struct ContextInput<'a> {
    /// Built per turn, never stored: the rules, the same for every project
    /// of a scope (first, so a model server's prompt cache covers them and
    /// the tool definitions rendered after them across turns and projects).
    pub system_prompt: &'a str,
    /// What changes per project and per turn (the context pack, the agenda,
    /// the agent state): a second system message right after the first.
    pub system_context: Option<&'a str>,
    pub summary: Option<SummaryRef<'a>>,
    /// The stored log before the current message, oldest first (it may start
    /// mid-way; anything at or after `current.seq` is ignored).
    pub history: &'a [StoredMessage],
    /// The user message this turn answers.
    pub current: &'a StoredMessage,
}

/// The request's messages and what went into them.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltContext {
    pub messages: Vec<ChatMessage>,
    /// Seqs of the log messages sent, in order, the current message last.
    pub kept: Vec<u64>,
    /// Seqs of history left out for the budget or the tool-call protocol.
    pub dropped: Vec<u64>,
    /// Seqs of history not sent because the summary covers them.
    pub summarized: Vec<u64>,
    pub summary_used: bool,
    pub tokens_used: u64,
    pub token_budget: u64,
    pub chars_used: usize,
    /// False only when the fixed part (system prompt, summary, current
    /// message) alone is over a budget: the current message is never dropped.
    pub within_budget: bool,
}

impl BuiltContext {
    /// The stream's `context_usage` event.
    pub fn usage(&self) -> ContextUsage {
        ContextUsage {
            tokens_used: self.tokens_used,
            token_budget: self.token_budget,
            messages_kept: self.kept.len() as u32,
            messages_dropped: self.dropped.len() as u32,
            summary_used: self.summary_used,
            cache: None,
        }
    }
}

/// How the summary is shown to the model.
pub fn summary_message(text: &str, through_seq: u64) -> ChatMessage {
    ChatMessage::system(format!(
        "Summary of the earlier conversation (messages 1-{through_seq}), for continuity; \
         the messages after it follow verbatim.\n\n{text}"
    ))
}

/// Tokens one chat message costs, as the builder counts them (its text, its
/// tool calls, and the per-message overhead).
pub fn message_tokens(m: &ChatMessage, counter: &TokenCounter) -> u64 {
    Cost::of(m, counter).tokens
}

/// Cost of one message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cost {
    messages: usize,
    chars: usize,
    tokens: u64,
}

impl Cost {
    fn of(m: &ChatMessage, counter: &TokenCounter) -> Cost {
        let mut chars = m.content.as_deref().map_or(0, |c| c.chars().count());
        let mut tokens = PER_MESSAGE_OVERHEAD + m.content.as_deref().map_or(0, |c| counter.count(c));
        for call in &m.tool_calls {
            chars += call.function.name.chars().count() + call.function.arguments.chars().count();
            tokens += PER_MESSAGE_OVERHEAD
                + counter.count(&call.function.name)
                + counter.count(&call.function.arguments)
                + counter.count(&call.id);
        }
        Cost { messages: 1, chars, tokens }
    }

    fn plus(self, o: Cost) -> Cost {
        Cost { messages: self.messages + o.messages, chars: self.chars + o.chars, tokens: self.tokens + o.tokens }
    }

    fn fits(&self, b: &ContextBudget) -> bool {
        self.messages <= b.max_messages && self.chars <= b.max_chars && self.tokens <= b.max_tokens
    }
}

/// Messages that are kept or dropped together: `sendable[start..end]`, a
/// message and the tool results that answer it. Groups are found without
/// pricing them; only the ones the budget loop reaches are priced
/// ([`Group::materialize`]), newest first, so the cost of a turn follows what
/// is sent, not how long the session is (docs/performance.md, finding 5).
#[derive(Debug, Clone, Copy)]
struct Group {
    start: usize,
    end: usize,
    /// A call whose results were not all stored: sent as its text only.
    text_only: bool,
    /// A user message long enough to be a pasted document.
    paste: bool,
}

impl Group {
    fn len(&self) -> usize {
        if self.text_only {
            1
        } else {
            self.end - self.start
        }
    }

    fn seqs<'a>(&self, sendable: &'a [&StoredMessage]) -> impl Iterator<Item = u64> + 'a {
        sendable[self.start..self.start + self.len()].iter().map(|m| m.seq)
    }

    /// The group's chat messages and what they cost.
    fn materialize(&self, sendable: &[&StoredMessage], counter: &TokenCounter) -> (Vec<ChatMessage>, Cost) {
        let mut cost = Cost::default();
        let messages = if self.text_only {
            crate::message::to_model(&sendable[self.start..=self.start], true)
        } else {
            crate::message::to_model(&sendable[self.start..self.end], false)
        };
        for m in &messages {
            cost = cost.plus(Cost::of(m, counter));
        }
        (messages, cost)
    }
}

/// Splits the sendable history into atomic groups; protocol-violating
/// leftovers (orphan results, results of an unanswered call, an unanswered
/// call without text) go to `dropped`.
fn groups(sendable: &[&StoredMessage], budget: &ContextBudget, dropped: &mut Vec<u64>) -> Vec<Group> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < sendable.len() {
        let m = sendable[i];
        let start = i;
        i += 1;
        if m.role == Role::Tool {
            // Its call is not in the window (summarized, or before the load limit).
            dropped.push(m.seq);
            continue;
        }
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            let mut pending: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
            while i < sendable.len() && sendable[i].role == Role::Tool {
                let Some(pos) =
                    sendable[i].tool_call_id.as_deref().and_then(|id| pending.iter().position(|p| *p == id))
                else {
                    break;
                };
                pending.swap_remove(pos);
                i += 1;
            }
            if pending.is_empty() {
                out.push(Group { start, end: i, text_only: false, paste: false });
            } else {
                dropped.extend(sendable[start + 1..i].iter().map(|r| r.seq));
                if m.content.as_deref().is_some_and(|c| !c.is_empty()) || m.error.is_some() || m.stopped {
                    out.push(Group { start, end: i, text_only: true, paste: false });
                } else {
                    dropped.push(m.seq);
                }
            }
            continue;
        }
        // Bytes bound chars from above: most messages are ruled out without counting.
        let paste = m.role == Role::User
            && m.content
                .as_deref()
                .is_some_and(|c| c.len() >= budget.large_paste_chars && c.chars().count() >= budget.large_paste_chars);
        out.push(Group { start, end: i, text_only: false, paste });
    }
    out
}

/// Builds one request's `messages[]` within `budget` (see the module contract).
pub fn build_context(input: &ContextInput<'_>, budget: &ContextBudget, counter: &TokenCounter) -> BuiltContext {
    let (sendable, summarized) = partition_history(input);
    let mut dropped = Vec::new();
    let groups = groups(&sendable, budget, &mut dropped);

    let system = ChatMessage::system(input.system_prompt);
    let context = input.system_context.filter(|c| !c.is_empty()).map(ChatMessage::system);
    let summary = input.summary.map(|s| summary_message(s.text, s.through_seq));
    // A marker (a turn that answered waiting calls: their results are the
    // last of the history) is not sent.
    let current = input.current.include_in_context.then(|| input.current.to_chat());
    let mut used = current.as_ref().map(|c| Cost::of(c, counter)).unwrap_or_default();
    for fixed in std::iter::once(&system).chain(context.as_ref()).chain(summary.as_ref()) {
        let c = Cost::of(fixed, counter);
        used.tokens += c.tokens;
        used.chars += c.chars;
    }
    used.tokens += REPLY_PRIMING;
    let within_budget = used.fits(budget);
    let keep = choose_groups(&groups, &sendable, budget, counter, &mut used);

    let mut messages = Vec::with_capacity(keep.iter().map(|(_, m)| m.len()).sum::<usize>() + 4);
    messages.push(system);
    messages.extend(context);
    messages.extend(summary);
    let mut kept = Vec::with_capacity(messages.capacity());
    let mut next = keep.into_iter().peekable();
    for (i, g) in groups.iter().enumerate() {
        if next.peek().is_some_and(|(k, _)| *k == i) {
            let (_, group_messages) = next.next().expect("peeked");
            kept.extend(g.seqs(&sendable));
            messages.extend(group_messages);
        } else {
            dropped.extend(g.seqs(&sendable));
        }
    }
    if let Some(current) = current {
        kept.push(input.current.seq);
        messages.push(current);
    }
    dropped.sort_unstable();
    BuiltContext {
        messages,
        kept,
        dropped,
        summarized,
        summary_used: input.summary.is_some(),
        tokens_used: used.tokens,
        token_budget: budget.max_tokens,
        chars_used: used.chars,
        within_budget,
    }
}

/// The history before the current message, split into what may be sent
/// (in context, not a system note) and the seqs the summary already covers.
fn partition_history<'m>(input: &ContextInput<'m>) -> (Vec<&'m StoredMessage>, Vec<u64>) {
    let through = input.summary.map_or(0, |s| s.through_seq);
    let mut summarized = Vec::new();
    let mut sendable = Vec::with_capacity(input.history.len());
    for m in input.history.iter().filter(|m| m.seq < input.current.seq) {
        if m.seq <= through && input.summary.is_some() {
            summarized.push(m.seq);
        } else if m.include_in_context && m.role != Role::System {
            sendable.push(m);
        }
    }
    (sendable, summarized)
}

/// The groups kept, by index and sorted, with their messages: the pasted
/// document the conversation is about first, then the newest groups, priced
/// newest first and only until the first group that does not fit. `used`
/// grows by what is kept.
fn choose_groups(
    groups: &[Group],
    sendable: &[&StoredMessage],
    budget: &ContextBudget,
    counter: &TokenCounter,
    used: &mut Cost,
) -> Vec<(usize, Vec<ChatMessage>)> {
    let mut keep: Vec<(usize, Vec<ChatMessage>)> = Vec::new();
    let paste = groups.iter().rposition(|g| g.paste);
    if let Some(p) = paste {
        let (messages, cost) = groups[p].materialize(sendable, counter);
        if used.plus(cost).fits(budget) {
            *used = used.plus(cost);
            keep.push((p, messages));
        }
    }
    let reserved = keep.first().map(|(p, _)| *p);
    for (i, g) in groups.iter().enumerate().rev() {
        if Some(i) == reserved {
            continue;
        }
        // The message count alone rules a group out without pricing it.
        if used.messages + g.len() > budget.max_messages {
            break;
        }
        let (messages, cost) = g.materialize(sendable, counter);
        if !used.plus(cost).fits(budget) {
            break;
        }
        *used = used.plus(cost);
        keep.push((i, messages));
    }
    keep.sort_unstable_by_key(|(i, _)| *i);
    keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{SessionId, TurnId};
    use crate::message::{FunctionCall, MessageError, ToolCall};

    pub(super) fn msg(seq: u64, role: Role, content: Option<&str>) -> StoredMessage {
        let session = SessionId::parse("019a0000-0000-7000-8000-000000000000").unwrap();
        StoredMessage::new(session, seq, TurnId::new(), role, content.map(str::to_string))
    }

    pub(super) fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            function: FunctionCall { name: "search".into(), arguments: format!("{{\"q\":\"{id}\"}}") },
        }
    }

    fn tool(seq: u64, id: &str) -> StoredMessage {
        let mut m = msg(seq, Role::Tool, Some("result"));
        m.tool_call_id = Some(id.into());
        m
    }

    fn est() -> TokenCounter {
        TokenCounter::Estimate
    }

    #[test]
    fn parallel_tool_calls_stay_or_go_together() {
        let mut a = msg(2, Role::Assistant, None);
        a.tool_calls = vec![call("c1"), call("c2"), call("c3")];
        let history = vec![msg(1, Role::User, Some("find things")), a, tool(3, "c2"), tool(4, "c1"), tool(5, "c3")];
        let history = [history, vec![msg(6, Role::Assistant, Some("found"))]].concat();
        let current = msg(7, Role::User, Some("thanks"));
        let input = ContextInput {
            system_prompt: "sys",
            system_context: None,
            summary: None,
            history: &history,
            current: &current,
        };
        let all = build_context(&input, &ContextBudget::default(), &est());
        assert_eq!(all.kept, vec![1, 2, 3, 4, 5, 6, 7]);
        // Room for 3 history messages: the 4-message group cannot be split.
        let tight = ContextBudget { max_messages: 4, ..ContextBudget::default() };
        let b = build_context(&input, &tight, &est());
        assert_eq!(b.kept, vec![6, 7]);
        assert_eq!(b.dropped, vec![1, 2, 3, 4, 5]);
        let five = ContextBudget { max_messages: 6, ..ContextBudget::default() };
        assert_eq!(build_context(&input, &five, &est()).kept, vec![2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn unanswered_call_keeps_its_text_only_and_orphans_never_go_out() {
        let mut a = msg(2, Role::Assistant, Some("let me look"));
        a.tool_calls = vec![call("c1"), call("c2")];
        a.error = Some(MessageError { code: "llm_timeout".into(), message: "slow".into() });
        let history = vec![tool(1, "gone"), a, tool(3, "c1")];
        let current = msg(4, Role::User, Some("continue"));
        let input = ContextInput {
            system_prompt: "sys",
            system_context: None,
            summary: None,
            history: &history,
            current: &current,
        };
        let b = build_context(&input, &ContextBudget::default(), &est());
        assert_eq!(b.kept, vec![2, 4]);
        assert_eq!(b.dropped, vec![1, 3]);
        let note = &b.messages[1];
        assert_eq!(note.role, Role::System);
        assert!(note.content.as_deref().unwrap().contains("llm_timeout"));
        let sent = &b.messages[2];
        assert!(sent.tool_calls.is_empty());
        assert_eq!(sent.content.as_deref(), Some("let me look"), "the partial text, no marker");
        assert_eq!(b.messages[3].content.as_deref(), Some("continue"));
    }

    #[test]
    fn summary_replaces_what_it_covers() {
        let history: Vec<_> =
            (1..=6).map(|s| msg(s, if s % 2 == 1 { Role::User } else { Role::Assistant }, Some("x"))).collect();
        let current = msg(7, Role::User, Some("next"));
        let input = ContextInput {
            system_prompt: "sys",
            system_context: None,
            summary: Some(SummaryRef { text: "they talked", through_seq: 4 }),
            history: &history,
            current: &current,
        };
        let b = build_context(&input, &ContextBudget::default(), &est());
        assert_eq!(b.summarized, vec![1, 2, 3, 4]);
        assert_eq!(b.kept, vec![5, 6, 7]);
        assert!(b.summary_used);
        assert!(b.messages[1].content.as_deref().unwrap().contains("they talked"));
        assert_eq!(b.usage().messages_kept, 3);
    }

    #[test]
    fn large_paste_outlives_newer_chatter() {
        let doc = "lorem ipsum ".repeat(1000);
        let mut history = vec![msg(1, Role::User, Some("hi")), msg(2, Role::Assistant, Some("hello"))];
        history.push(msg(3, Role::User, Some(&doc)));
        history.push(msg(4, Role::Assistant, Some("I read it")));
        for s in 5..=10 {
            history.push(msg(s, if s % 2 == 1 { Role::User } else { Role::Assistant }, Some(&"chat ".repeat(200))));
        }
        let current = msg(11, Role::User, Some("what does section 2 say?"));
        let input = ContextInput {
            system_prompt: "sys",
            system_context: None,
            summary: None,
            history: &history,
            current: &current,
        };
        // Room for the document and about two chat messages.
        let budget = ContextBudget { max_chars: 12_000 + 2_100, large_paste_chars: 8_000, ..ContextBudget::default() };
        let b = build_context(&input, &budget, &est());
        assert!(b.kept.contains(&3), "the document stays: {:?}", b.kept);
        assert_eq!(b.kept, vec![3, 9, 10, 11]);
        assert!(b.within_budget && b.chars_used <= budget.max_chars);
    }

    #[test]
    fn current_message_is_sent_even_alone_over_budget() {
        let current = msg(1, Role::User, Some(&"y".repeat(500)));
        let input =
            ContextInput { system_prompt: "sys", system_context: None, summary: None, history: &[], current: &current };
        let budget = ContextBudget { max_chars: 100, ..ContextBudget::default() };
        let b = build_context(&input, &budget, &est());
        assert_eq!(b.kept, vec![1]);
        assert!(!b.within_budget);
    }
}
