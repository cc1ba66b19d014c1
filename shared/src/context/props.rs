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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn builder_invariants(
        steps in prop::collection::vec(step(), 0..40),
        start in 0usize..10,
        summary_through in prop::option::of(0u64..30),
        b in budget(),
        current_len in 1usize..600,
    ) {
        let log = log_from(&steps);
        // The loaded window may start mid-log, even mid tool group.
        let history = &log[start.min(log.len())..];
        let current = msg(log.len() as u64 + 1, Role::User, Some(&"q".repeat(current_len)));
        let summary = summary_through.map(|t| SummaryRef { text: "earlier: things happened", through_seq: t });
        let input = ContextInput { system_prompt: "You are helpful.", summary, history, current: &current };
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
