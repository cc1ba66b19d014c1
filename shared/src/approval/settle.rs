//! The turn that answers: what becomes of each waiting call, and running
//! the approved ones. Results are the tool messages the turn's first write
//! stores before anything else it writes.

use super::{asked, find, ApprovalAnswer, ApprovalError, Asked, Signer};
use crate::ids::{SessionId, TurnId, UserId};
use crate::message::{Role, StoredMessage};
use crate::model_loop::{ToolRun, TurnScope, TurnTools};
use crate::sse::{EventSink, StreamEvent, ToolOrigin};
use futures::FutureExt;

/// What became of one waiting call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Approved,
    Denied(Option<String>),
    /// A turn answered other calls of the round, not this one.
    Open,
    /// The user sent a new message instead of answering.
    NewMessage,
    /// Its approval expired before an answer came.
    Expired,
}

/// One waiting call and its answer.
#[derive(Debug, Clone)]
pub struct Settled {
    pub asked: Asked,
    pub answer: Answer,
}

/// Every waiting call of `log` with what becomes of it: the `answers` (each
/// must name a call that may run now, else nothing is settled), and for the
/// others expired, left open, or passed over by a new message.
pub fn settle(
    signer: &Signer,
    user: &UserId,
    sid: &SessionId,
    log: &[StoredMessage],
    answers: &[ApprovalAnswer],
    now_ms: i64,
) -> Result<Vec<Settled>, ApprovalError> {
    let all = asked(log);
    let mut named = Vec::with_capacity(answers.len());
    for a in answers {
        named.push((find(signer, user, sid, &all, &a.approval_id, now_ms)?.call.id.clone(), a));
    }
    let settled = all
        .into_iter()
        .filter(|a| !a.answered)
        .map(|asked| {
            let answer = match named.iter().find(|(id, _)| *id == asked.call.id) {
                Some((_, a)) if a.approved => Answer::Approved,
                Some((_, a)) => Answer::Denied(a.reason.clone().filter(|r| !r.trim().is_empty())),
                None if asked.pending.expires_at <= now_ms => Answer::Expired,
                None if answers.is_empty() => Answer::NewMessage,
                None => Answer::Open,
            };
            Settled { asked, answer }
        })
        .collect();
    Ok(settled)
}

/// A refused call's result, in the model's words.
fn not_run(answer: &Answer) -> Option<String> {
    let why = match answer {
        Answer::Approved => return None,
        Answer::Denied(Some(r)) => format!("denied by the user: {r}"),
        Answer::Denied(None) => "denied by the user: no reason given".to_string(),
        Answer::Open => "not run: the user answered the other calls and not this one".to_string(),
        Answer::NewMessage => "not run: the user sent a new message instead of approving it".to_string(),
        Answer::Expired => "not run: the approval expired before the user answered".to_string(),
    };
    Some(why)
}

/// Where the approved calls run.
pub struct RunCx<'a> {
    pub tools: &'a dyn TurnTools,
    pub user: &'a UserId,
    pub sid: &'a SessionId,
    pub turn_id: &'a TurnId,
    pub scope: &'a TurnScope,
    /// When an approved call still running is given up on (the turn's hard
    /// stop before the invocation's deadline).
    pub hard_stop: tokio::time::Instant,
}

/// An approved call the deadline left no time to start.
pub const NOT_STARTED_BY_THE_DEADLINE: &str = "not run: the turn ran out of time before this call started";

/// An approved call cut by the deadline: its effect is unknown.
pub const CUT_BY_THE_DEADLINE: &str = "the turn ran out of time while this call was running; it may or may not \
    have taken effect: check before repeating it";

/// Runs the approved calls (with their stored arguments) and sends what
/// the answers did: for each call the user answered, `approval_answered`,
/// then an approved call's events and `tool_result`, a denied one's
/// `tool_result`. Calls settled without an answer send nothing (the client
/// never shows them again). An approved call reached at `cx.hard_stop` does
/// not start; one still running then is cut: its result says its effect is unknown
/// ([`CUT_BY_THE_DEADLINE`]), and, stored, it spends the approval. The
/// results, as tool messages from `first_seq`.
pub async fn run(settled: &[Settled], cx: RunCx<'_>, first_seq: u64, sink: &mut EventSink) -> Vec<StoredMessage> {
    let mut out = Vec::with_capacity(settled.len());
    for (i, s) in settled.iter().enumerate() {
        let call = &s.asked.call;
        let answered = matches!(s.answer, Answer::Approved | Answer::Denied(_));
        if answered {
            let reason = match &s.answer {
                Answer::Denied(r) => r.clone(),
                _ => None,
            };
            let _ = sink
                .send(StreamEvent::ApprovalAnswered {
                    approval_id: s.asked.pending.approval_id.clone(),
                    tool_call_id: call.id.clone(),
                    tool: call.function.name.clone(),
                    approved: s.answer == Answer::Approved,
                    reason,
                })
                .await;
        }
        let late = s.answer == Answer::Approved && tokio::time::Instant::now() >= cx.hard_stop;
        let run = match not_run(&s.answer) {
            Some(why) => ToolRun { ok: false, preview: why.clone(), ..ToolRun::failed(&why) },
            None if late => ToolRun::failed(NOT_STARTED_BY_THE_DEADLINE),
            None => {
                let ran = std::panic::AssertUnwindSafe(cx.tools.run(cx.user, cx.scope, call)).catch_unwind();
                match tokio::time::timeout_at(cx.hard_stop, ran).await {
                    Ok(ran) => ran.unwrap_or_else(|_| ToolRun::failed("the tool failed unexpectedly")),
                    Err(_) => ToolRun::failed(CUT_BY_THE_DEADLINE),
                }
            }
        };
        let operations = crate::sse::settled_operations(&run.events);
        if answered {
            for ev in run.events {
                let _ = sink.send(ev).await;
            }
            let _ = sink
                .send(StreamEvent::ToolResult {
                    tool_call_id: call.id.clone(),
                    name: call.function.name.clone(),
                    ok: run.ok,
                    preview: run.preview.clone(),
                    origin: origin(&s.asked),
                })
                .await;
        }
        let mut m = StoredMessage::new(cx.sid.clone(), first_seq + i as u64, cx.turn_id.clone(), Role::Tool, None);
        m.operations = operations;
        m.content = Some(run.content);
        m.tool_call_id = Some(call.id.clone());
        out.push(m);
    }
    out
}

/// Whose call it is: a plan step's carries its step.
fn origin(asked: &Asked) -> ToolOrigin {
    match &asked.pending.step {
        Some(s) => ToolOrigin::PlanStep { plan_id: s.plan_id.clone(), step_id: s.step_id.clone() },
        None => ToolOrigin::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{FunctionCall, PendingApproval, ToolCall};

    fn log(signer: &Signer, user: &UserId, sid: &SessionId, expires_at: i64) -> Vec<StoredMessage> {
        let t = TurnId::new();
        let mut a = StoredMessage::new(sid.clone(), 2, t.clone(), Role::Assistant, None);
        for id in ["c1", "c2"] {
            let call = ToolCall {
                id: id.into(),
                kind: "function".into(),
                function: FunctionCall { name: "delete_entity".into(), arguments: "{}".into() },
            };
            a.approvals.push(PendingApproval {
                tool_call_id: id.into(),
                approval_id: signer.sign(user, sid, &call, expires_at),
                tool: "delete_entity".into(),
                summary: "Delete".into(),
                expires_at,
                step: None,
            });
            a.tool_calls.push(call);
        }
        vec![StoredMessage::new(sid.clone(), 1, t, Role::User, Some("hi".into())), a]
    }

    #[test]
    fn answers_settle_every_waiting_call_and_bad_ones_settle_nothing() {
        let (signer, user, sid) = (Signer::new(b"k".to_vec()), UserId::parse("u").unwrap(), SessionId::new());
        let l = log(&signer, &user, &sid, 10_000);
        let id = l[1].approvals[0].approval_id.clone();
        let yes = ApprovalAnswer { approval_id: id.clone(), approved: true, reason: None };
        let s = settle(&signer, &user, &sid, &l, std::slice::from_ref(&yes), 5).unwrap();
        assert_eq!(s.iter().map(|s| s.answer.clone()).collect::<Vec<_>>(), [Answer::Approved, Answer::Open]);
        let s = settle(&signer, &user, &sid, &l, &[], 5).unwrap();
        assert_eq!(s.iter().map(|s| s.answer.clone()).collect::<Vec<_>>(), [Answer::NewMessage, Answer::NewMessage]);
        let s = settle(&signer, &user, &sid, &l, &[], 20_000).unwrap();
        assert!(s.iter().all(|s| s.answer == Answer::Expired));
        assert_eq!(
            settle(&signer, &user, &sid, &l, std::slice::from_ref(&yes), 20_000).unwrap_err().code(),
            ApprovalError::Expired.code()
        );
        let flip = if id.ends_with('0') { '1' } else { '0' };
        let forged = ApprovalAnswer { approval_id: format!("{}{flip}", &id[..id.len() - 1]), ..yes.clone() };
        assert_eq!(settle(&signer, &user, &sid, &l, &[forged], 5).unwrap_err().code(), ApprovalError::NotFound.code());
        let other = SessionId::new();
        assert_eq!(
            settle(&signer, &user, &other, &l, std::slice::from_ref(&yes), 5).unwrap_err().code(),
            ApprovalError::NotFound.code()
        );
        let mut answered = l.clone();
        let mut r = StoredMessage::new(sid.clone(), 3, TurnId::new(), Role::Tool, Some("{}".into()));
        r.tool_call_id = Some("c1".into());
        answered.push(r);
        assert_eq!(settle(&signer, &user, &sid, &answered, &[yes], 5).unwrap_err().code(), ApprovalError::Used.code());
    }

    /// A tool that never finishes, counting its starts.
    struct Hangs(std::sync::atomic::AtomicUsize);

    #[async_trait::async_trait]
    impl TurnTools for Hangs {
        fn offered(&self, _: &TurnScope) -> Vec<serde_json::Value> {
            vec![]
        }
        async fn run(&self, _: &UserId, _: &TurnScope, _: &crate::message::ToolCall) -> ToolRun {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::future::pending().await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_approved_call_is_cut_at_the_hard_stop_and_none_starts_after_it() {
        let (signer, user, sid) = (Signer::new(b"k".to_vec()), UserId::parse("u").unwrap(), SessionId::new());
        let l = log(&signer, &user, &sid, i64::MAX);
        let yes = |i: usize| ApprovalAnswer {
            approval_id: l[1].approvals[i].approval_id.clone(),
            approved: true,
            reason: None,
        };
        let settled = settle(&signer, &user, &sid, &l, &[yes(0), yes(1)], 5).unwrap();
        let tools = Hangs(Default::default());
        let scope = TurnScope {
            context_type: crate::session::ContextType::Global,
            entity_id: None,
            focus: None,
            timezone: None,
        };
        let turn_id = TurnId::new();
        let hard_stop = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        let cx = RunCx { tools: &tools, user: &user, sid: &sid, turn_id: &turn_id, scope: &scope, hard_stop };
        let (mut sink, _body) = EventSink::channel();
        let results = run(&settled, cx, 3, &mut sink).await;
        let contents: Vec<String> = results.iter().map(|m| m.content.clone().unwrap_or_default()).collect();
        assert!(contents[0].contains("may or may not have taken effect"), "{contents:?}");
        assert!(contents[1].contains("before this call started"), "{contents:?}");
        assert_eq!(tools.0.load(std::sync::atomic::Ordering::SeqCst), 1, "the second never started");
        assert_eq!(results.iter().map(|m| m.seq).collect::<Vec<_>>(), [3, 4], "a result for each call");
    }
}
