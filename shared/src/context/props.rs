//! Property tests of the builder's invariants over random logs.

use super::tests::{call, msg};
use super::*;
use crate::message::MessageError;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

/// One random exchange step, turned into log messages by [`log_from`].
#[derive(Debug, Clone)]
enum Step {
    User(usize),
    Assistant(usize),
    /// An assistant message calling `n` tools, and how many results were stored.
    Tools {
        calls: usize,
        answered: usize,
        text: bool,
    },
    Errored(usize),
    UiOnly,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1usize..3_000).prop_map(Step::User),
        4 => (1usize..2_000).prop_map(Step::Assistant),
        3 => (1usize..4, 0usize..4, any::<bool>())
            .prop_map(|(calls, a, text)| Step::Tools { calls, answered: a.min(calls), text }),
        1 => (0usize..500).prop_map(Step::Errored),
        1 => Just(Step::UiOnly),
    ]
}

fn log_from(steps: &[Step]) -> Vec<StoredMessage> {
    fn push(out: &mut Vec<StoredMessage>, role: Role, content: Option<String>) -> &mut StoredMessage {
        let m = msg(out.len() as u64 + 1, role, content.as_deref());
        out.push(m);
        out.last_mut().expect("just pushed")
    }
    let mut out: Vec<StoredMessage> = Vec::new();
    for (k, s) in steps.iter().enumerate() {
        match s {
            Step::User(n) => {
                push(&mut out, Role::User, Some("u".repeat(*n)));
            }
            Step::Assistant(n) => {
                push(&mut out, Role::Assistant, Some("a".repeat(*n)));
            }
            Step::Tools { calls, answered, text } => {
                let ids: Vec<String> = (0..*calls).map(|c| format!("call-{k}-{c}")).collect();
                push(&mut out, Role::Assistant, text.then(|| "calling".to_string())).tool_calls =
                    ids.iter().map(|id| call(id)).collect();
                // Results in reverse order: parallel calls finish in any order.
                for id in ids.iter().rev().take(*answered) {
                    push(&mut out, Role::Tool, Some(format!("result of {id}"))).tool_call_id = Some(id.clone());
                }
            }
            Step::Errored(n) => {
                push(&mut out, Role::Assistant, Some("p".repeat(*n))).error =
                    Some(MessageError { code: "llm_stream_error".into(), message: "cut".into() });
            }
            Step::UiOnly => {
                push(&mut out, Role::Assistant, Some("ui".into())).include_in_context = false;
            }
        }
    }
    out
}

fn budget() -> impl Strategy<Value = ContextBudget> {
    (1usize..30, 200usize..20_000, 50u64..5_000, 500usize..4_000).prop_map(|(m, c, t, p)| ContextBudget {
        max_messages: m,
        max_chars: c,
        max_tokens: t,
        large_paste_chars: p,
    })
}

/// One random input: the loaded window of a random log (it may start
/// mid-log, even mid tool group), the current message, maybe a summary.
#[derive(Debug, Clone)]
struct Case {
    history: Vec<StoredMessage>,
    current: StoredMessage,
    summary_through: Option<u64>,
    /// A second system message (the per-project part of the prompt).
    context: bool,
}

impl Case {
    fn input(&self) -> ContextInput<'_> {
        ContextInput {
            system_prompt: "You are helpful.",
            system_context: self.context.then_some("Context (JSON): {}"),
            summary: self.summary_through.map(|t| SummaryRef { text: "earlier: things happened", through_seq: t }),
            history: &self.history,
            current: &self.current,
        }
    }
}

fn case(max_steps: usize) -> impl Strategy<Value = Case> {
    (prop::collection::vec(step(), 0..max_steps), 0usize..10, prop::option::of(0u64..30), 1usize..600, any::<bool>())
        .prop_map(|(steps, start, summary_through, current_len, context)| {
            let log = log_from(&steps);
            let current = msg(log.len() as u64 + 1, Role::User, Some(&"q".repeat(current_len)));
            Case { history: log[start.min(log.len())..].to_vec(), current, summary_through, context }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn builder_invariants(c in case(40), b in budget()) {
        let (history, current, summary_through) = (&c.history[..], &c.current, c.summary_through);
        let input = c.input();
        let summary = input.summary;
        let counter = TokenCounter::Estimate;
        let built = build_context(&input, &b, &counter);
        let sent = &built.messages;

        // The latest user message is present, last.
        prop_assert_eq!(sent.last().unwrap(), &current.to_chat());
        prop_assert_eq!(*built.kept.last().unwrap(), current.seq);

        // Order preserved; every history message accounted for exactly once.
        prop_assert!(built.kept.windows(2).all(|w| w[0] < w[1]));
        let mut all: Vec<u64> =
            built.kept.iter().chain(&built.dropped).chain(&built.summarized).copied().collect();
        all.sort_unstable();
        let sendable: Vec<u64> = history.iter()
            .filter(|m| m.seq <= summary_through.unwrap_or(0) || (m.include_in_context && m.role != Role::System))
            .map(|m| m.seq).chain([current.seq]).collect();
        prop_assert_eq!(all, sendable);

        // No orphan tool result, no call without all of its results, results
        // right after their call.
        let mut open: HashSet<String> = HashSet::new();
        for m in sent {
            match m.role {
                Role::Tool => {
                    let id = m.tool_call_id.clone().unwrap();
                    prop_assert!(open.remove(&id), "orphan tool result {id}");
                }
                _ => {
                    prop_assert!(open.is_empty(), "call without results: {:?}", open);
                    open.extend(m.tool_calls.iter().map(|c| c.id.clone()));
                }
            }
        }
        prop_assert!(open.is_empty(), "call without results at the end: {:?}", open);

        // Nothing summarized or UI-only is sent.
        let by_seq: HashMap<u64, &StoredMessage> = history.iter().map(|m| (m.seq, m)).collect();
        for s in &built.kept[..built.kept.len() - 1] {
            let m = by_seq[s];
            prop_assert!(m.include_in_context);
            prop_assert!(summary_through.is_none_or(|t| m.seq > t));
        }

        // Within budget whenever the fixed part fits; the counts are honest.
        let chars: usize = sent.iter().map(|m| {
            m.content.as_deref().map_or(0, |c| c.chars().count())
                + m.tool_calls.iter().map(|c| c.function.name.len() + c.function.arguments.len()).sum::<usize>()
        }).sum();
        prop_assert_eq!(chars, built.chars_used);
        if built.within_budget {
            prop_assert!(built.kept.len() <= b.max_messages);
            prop_assert!(built.chars_used <= b.max_chars);
            prop_assert!(built.tokens_used <= b.max_tokens);
        } else {
            prop_assert_eq!(built.kept.len(), 1);
        }
        prop_assert_eq!(built.summary_used, summary.is_some());
    }
}

/// The builder as it was before it priced groups lazily (it encoded the whole
/// loaded history first): kept as the oracle the faster one must agree with.
mod reference {
    use super::super::*;
    use crate::message::to_model;

    /// Messages that are kept or dropped together.
    struct Group {
        seqs: Vec<u64>,
        messages: Vec<ChatMessage>,
        cost: Cost,
        /// A user message long enough to be a pasted document.
        paste: bool,
    }

    /// Splits the sendable history into atomic groups; protocol-violating
    /// leftovers (orphan results, results of an unanswered call) go to `dropped`.
    fn groups(
        history: &[&StoredMessage],
        counter: &TokenCounter,
        budget: &ContextBudget,
        dropped: &mut Vec<u64>,
    ) -> Vec<Group> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < history.len() {
            let m = history[i];
            i += 1;
            if m.role == Role::Tool {
                // Its call is not in the window (summarized, or before the load limit).
                dropped.push(m.seq);
                continue;
            }
            if m.role == Role::Assistant && !m.tool_calls.is_empty() {
                let mut pending: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
                let mut results = Vec::new();
                while i < history.len() && history[i].role == Role::Tool {
                    let Some(pos) =
                        history[i].tool_call_id.as_deref().and_then(|id| pending.iter().position(|p| *p == id))
                    else {
                        break;
                    };
                    pending.swap_remove(pos);
                    results.push(history[i]);
                    i += 1;
                }
                if pending.is_empty() {
                    let mut g = Group { seqs: vec![m.seq], messages: vec![], cost: Cost::default(), paste: false };
                    g.seqs.extend(results.iter().map(|r| r.seq));
                    let whole: Vec<&StoredMessage> = std::iter::once(m).chain(results).collect();
                    g.messages = to_model(&whole, false);
                    g.cost = g.messages.iter().fold(Cost::default(), |c, m| c.plus(Cost::of(m, counter)));
                    out.push(g);
                } else {
                    dropped.extend(results.iter().map(|r| r.seq));
                    let chats = to_model(&[m], true);
                    if chats.iter().any(|c| c.content.as_deref().is_some_and(|c| !c.is_empty())) {
                        let cost = chats.iter().fold(Cost::default(), |c, m| c.plus(Cost::of(m, counter)));
                        out.push(Group { seqs: vec![m.seq], messages: chats, cost, paste: false });
                    } else {
                        dropped.push(m.seq);
                    }
                }
                continue;
            }
            let chats = to_model(&[m], false);
            let cost = chats.iter().fold(Cost::default(), |c, m| c.plus(Cost::of(m, counter)));
            let paste = m.role == Role::User && cost.chars >= budget.large_paste_chars;
            out.push(Group { seqs: vec![m.seq], messages: chats, cost, paste });
        }
        out
    }

    /// Builds one request's `messages[]` within `budget` (see the module contract).
    pub(super) fn build_context(
        input: &ContextInput<'_>,
        budget: &ContextBudget,
        counter: &TokenCounter,
    ) -> BuiltContext {
        let through = input.summary.map_or(0, |s| s.through_seq);
        let mut summarized = Vec::new();
        let mut dropped = Vec::new();
        let mut sendable = Vec::new();
        for m in input.history.iter().filter(|m| m.seq < input.current.seq) {
            if m.seq <= through && input.summary.is_some() {
                summarized.push(m.seq);
            } else if m.include_in_context && m.role != Role::System {
                sendable.push(m);
            }
        }
        let groups = groups(&sendable, counter, budget, &mut dropped);

        let system = ChatMessage::system(input.system_prompt);
        let context = input.system_context.map(ChatMessage::system);
        let summary = input.summary.map(|s| summary_message(s.text, s.through_seq));
        let current = input.current.to_chat();
        let mut used = Cost::of(&current, counter);
        let mut fixed_tokens = Cost::of(&system, counter).tokens + REPLY_PRIMING;
        let mut fixed_chars = Cost::of(&system, counter).chars;
        for s in context.iter().chain(summary.as_ref()) {
            let c = Cost::of(s, counter);
            fixed_tokens += c.tokens;
            fixed_chars += c.chars;
        }
        used.tokens += fixed_tokens;
        used.chars += fixed_chars;
        let within_budget = used.fits(budget);

        let mut keep = vec![false; groups.len()];
        // The pasted document the conversation is about is reserved first.
        if let Some(p) = groups.iter().rposition(|g| g.paste) {
            if used.plus(groups[p].cost).fits(budget) {
                used = used.plus(groups[p].cost);
                keep[p] = true;
            }
        }
        for (i, g) in groups.iter().enumerate().rev() {
            if keep[i] {
                continue;
            }
            if !used.plus(g.cost).fits(budget) {
                break;
            }
            used = used.plus(g.cost);
            keep[i] = true;
        }

        let mut messages: Vec<ChatMessage> = std::iter::once(system).chain(context).chain(summary).collect();
        let mut kept = Vec::new();
        for (g, k) in groups.into_iter().zip(keep) {
            if k {
                kept.extend(g.seqs);
                messages.extend(g.messages);
            } else {
                dropped.extend(g.seqs);
            }
        }
        kept.push(input.current.seq);
        messages.push(current);
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
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Pricing newest first and stopping early changes the cost, never the result.
    #[test]
    fn same_result_as_the_reference_builder(c in case(60), b in budget()) {
        let input = c.input();
        let counter = TokenCounter::Estimate;
        prop_assert_eq!(build_context(&input, &b, &counter), reference::build_context(&input, &b, &counter));
    }
}
