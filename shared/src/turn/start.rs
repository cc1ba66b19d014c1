//! Phase 1 of a turn: resolve the session and take its lease, and read what
//! the prompt needs in that same round trip: the log (history, summary and
//! agent state in one query), the run check, and the context pack when the
//! request names its scope. A new session reads nothing but, with a
//! `stream_run_id`, that run's claim (beside the budgets' admission, so that a
//! retried first turn never calls the model again); its one write (the
//! session, the run claim, the turn record and the user message) goes out
//! beside the model call.
//!
//! Contract: either the turn may go on ([`Started`], holding the lease in a
//! guard), or it is [`Refused`] with nothing written by this turn; a retried
//! `stream_run_id` is recognised per user, across sessions, and answered from
//! what the first request stored ([`super::retry`]).
//!
//! Two ways in for the chat route ([`ValidTurn::session_may_be_new`],
//! [`ValidTurn::regenerate`]): a named session that does not exist is opened
//! under that name (one extra round trip, on a chat's first turn only); and a
//! regenerating turn writes, instead of a user message, a marker that
//! supersedes the previous answer, and answers the stored user message again.

use super::context::{self, LoadedPack};
use super::history::RecentLog;
use super::lease::{Exit, LeaseGuard};
use super::{TurnDeps, ValidTurn};
use crate::agent_state::AgentState;
use crate::budget::{Gate, OverBudget, TokenAllowance, Verdict};
use crate::calendar::agenda::Agenda;
use crate::ids::{RunId, SessionId, TurnId, UserId};
use crate::message::{without_superseded, Role, StoredMessage};
use crate::session::store::{Lease, RunClaim, TurnStart};
use crate::session::{title_from_message, Session, SessionView, TurnRecord, TurnStatus};
use crate::sse::{EventSink, Focus, StreamEvent};
use crate::store::StoreError;
use crate::summary::store::SessionSummary;
use futures::future::OptionFuture;
use futures::FutureExt;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// A turn that holds its session and may call the model.
pub struct Started {
    /// The session as it was before this turn.
    pub session: Session,
    /// The session with this request's scope applied (what `session` announced).
    pub view: SessionView,
    pub history: Vec<StoredMessage>,
    pub summary: Option<SessionSummary>,
    /// The agent state and its stored version (0: none stored); `None`: not
    /// kept this turn.
    pub agent_state: Option<(AgentState, u64)>,
    /// The context pack, when it was read in this phase.
    pub pack: Option<LoadedPack>,
    /// The calendar block, in the calendar and daily-brief scopes.
    pub agenda: Option<Agenda>,
    /// The zone the request named.
    pub timezone: Option<crate::calendar::Zone>,
    pub lease: LeaseGuard,
    pub run_id: RunId,
    /// The message this turn's start wrote: the user message, or a
    /// regenerating turn's marker.
    pub user_message: StoredMessage,
    /// A regenerating turn: the stored user message it answers again.
    pub answers: Option<StoredMessage>,
    /// The start record's write, running beside the model call (done already
    /// when it had to be awaited).
    pub persist_user: JoinHandle<Result<(), StoreError>>,
    /// A new session's admission, still running beside the model call: the
    /// model loop relays nothing before it admits, and a refusal ends the
    /// turn `quota_exceeded` with nothing stored. `None`: decided already.
    pub admission: Option<Verdict>,
}

/// Why a turn did not start.
pub enum Refused {
    /// The store said no (busy, closed, not found, failed); nothing was written.
    Store(Option<SessionId>, StoreError),
    /// This user already sent this `stream_run_id`, in this session.
    Retry { session: SessionId },
    /// The client went away before the turn began; nothing was written.
    Gone(SessionId),
    /// A regenerate found no user message in the session's recent log.
    NothingToRegenerate(SessionId),
    /// The answers name no call that may run now; nothing ran.
    Approval(SessionId, crate::approval::ApprovalError),
    /// A budget of the user's is spent; nothing was stored (an existing
    /// session's lease, taken in the same round trip, is given back).
    OverBudget(Option<SessionId>, OverBudget),
}

/// The turn's budget: the gate its admission tells and the verdict the
/// turn's parts wait on, the tokens the turn may spend (set by the
/// admission), and when its slot expires (the invocation's deadline: a
/// crashed turn cannot run past it).
pub struct Budget {
    pub gate: Gate,
    pub verdict: Verdict,
    pub allowance: Arc<TokenAllowance>,
    pub expires_ms: i64,
}

impl Budget {
    pub fn new(deadline: tokio::time::Instant) -> Budget {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let expires_ms = crate::now_ms() + left.as_millis() as i64;
        let (gate, verdict) = crate::budget::gate();
        Budget { gate, verdict, allowance: Arc::new(TokenAllowance::default()), expires_ms }
    }
}

/// Admits the turn ([`crate::budget::admit`], no I/O without budgets): tells
/// the verdict at once, keeps the slot in `exit` and the tokens left in the
/// allowance; a refusal that stands until a known time is remembered for
/// the edge ([`crate::budget::KnownRefusals`]). Sent beside the turn's
/// first round trip (or, for a new session, beside the model call, its
/// write chained after it).
fn admission(
    deps: &TurnDeps,
    user: &UserId,
    turn_id: &TurnId,
    budget: Budget,
    exit: &Exit,
) -> impl std::future::Future<Output = Result<(), OverBudget>> + Send + 'static {
    let (store, limits, exit) = (deps.budget.clone(), deps.config.budgets, exit.clone());
    let (user, turn, known) = (user.clone(), turn_id.clone(), deps.refusals.clone());
    async move {
        let Budget { mut gate, allowance, expires_ms, .. } = budget;
        match crate::budget::admit(store.as_ref(), &limits, &user, &turn, expires_ms).await {
            Ok((slot, left)) => {
                allowance.set(left);
                if let Some(slot) = slot {
                    exit.hold_slot(slot);
                }
                gate.tell(Ok(()));
                Ok(())
            }
            Err(over) => {
                tracing::info!(budget = over.budget.as_str(), "over budget: turn refused");
                known.remember(&user, over, crate::now_ms());
                gate.tell(Err(over));
                Err(over)
            }
        }
    }
}

pub async fn start(
    deps: &TurnDeps,
    user: &UserId,
    turn: &ValidTurn,
    turn_id: &TurnId,
    sink: &mut EventSink,
    exit: &Exit,
    budget: Budget,
) -> Result<Started, Refused> {
    let run_id =
        turn.run_id.clone().unwrap_or_else(|| RunId::parse(turn_id.as_str()).expect("turn ids are valid run ids"));
    let lease =
        Lease { turn_id: turn_id.clone(), until_ms: crate::now_ms() + deps.config.session_lease.as_millis() as i64 };
    let ids = Ids { user, turn_id, run_id: &run_id, lease: &lease, expires_ms: budget.expires_ms };
    let verdict = budget.verdict.clone();
    let admitted = admission(deps, user, turn_id, budget, exit);
    let started = match &turn.session_id {
        None => open(deps, &ids, turn, None, sink, exit, (admitted.boxed(), verdict)).await?,
        Some(sid) => {
            // Shared: a chat's first turn tries its named session, then opens it.
            let admitted = admitted.boxed().shared();
            match resume(deps, &ids, sid, turn, sink, exit, admitted.clone().boxed()).await {
                // A chat's first turn: its client named the session.
                Err(Refused::Store(_, StoreError::NotFound)) if turn.session_may_be_new && !turn.regenerate => {
                    open(deps, &ids, turn, Some(sid), sink, exit, (admitted.boxed(), verdict)).await?
                }
                resumed => resumed?,
            }
        }
    };
    tracing::info!(history = started.history.len(), "session resolved");
    Ok(started)
}

/// The turn's admission, awaited where each way in needs it.
type Admission = futures::future::BoxFuture<'static, Result<(), OverBudget>>;

/// Who and what the turn is, for the two ways in.
pub(super) struct Ids<'a> {
    pub(super) user: &'a UserId,
    pub(super) turn_id: &'a TurnId,
    run_id: &'a RunId,
    lease: &'a Lease,
    /// The invocation's deadline (epoch ms): approved calls run before it.
    pub(super) expires_ms: i64,
}

/// A new session (named by the client, or a fresh id): nothing to read but a
/// `stream_run_id`'s claim. Its one write goes out beside the model call.
async fn open(
    deps: &TurnDeps,
    ids: &Ids<'_>,
    turn: &ValidTurn,
    named: Option<&SessionId>,
    sink: &mut EventSink,
    exit: &Exit,
    (admitted, verdict): (Admission, Verdict),
) -> Result<Started, Refused> {
    let mut view = SessionView::new(turn.context_type.unwrap_or_default(), turn.entity_id.clone(), turn.focus.clone());
    if let Some(sid) = named {
        // Created with `attribute_not_exists`: a concurrent first turn under
        // the same name makes this one `session_busy`, never a second session.
        view.id = sid.clone();
    }
    let session =
        Session { user_id: ids.user.clone(), view: view.clone(), prompt_tokens: 0, completion_tokens: 0, lease: None };
    record_session(&view.id);
    let (user_message, start) = turn_start(turn, ids, &session, &view, None, 0);
    let pack = OptionFuture::from(
        context::pack_scope(deps, &view).map(|s| context::load_pack(deps, ids.user, s, turn.timezone, exit)),
    );
    let pack = async {
        tokio::join!(pack, context::load_agenda(deps, ids.user, view.context_type, turn.timezone, &turn.message))
    };
    let mut lease = LeaseGuard::new((deps.store.clone(), deps.store.clone()), ids.user, &view.id, ids.turn_id, exit);
    // A `stream_run_id` may be the retry of a first turn that opened a
    // session already: its claim is read beside the budgets' admission (the
    // one round trip before the model), so a retry never calls the model
    // again. Two copies of one request racing within that trip both pass;
    // the second's write then finds the claim (`duplicate_run`) and its turn
    // ends with that error, storing nothing.
    let (admitted, pack, admission) = match &turn.run_id {
        Some(run) => {
            let (claim, admitted, pack) = tokio::join!(deps.store.run_claim(ids.user, run), admitted, pack);
            match claim {
                Ok(Some(claim)) => return Err(Refused::Retry { session: claim.session_id }),
                Ok(None) => {}
                Err(e) => return Err(Refused::Store(None, e)),
            }
            admitted.map_err(|over| Refused::OverBudget(None, over))?;
            (futures::future::ready(Ok(())).boxed(), futures::future::Either::Left(futures::future::ready(pack)), None)
        }
        None => (admitted, futures::future::Either::Right(pack), Some(verdict)),
    };
    let (store, user, leased, opened) = (deps.store.clone(), ids.user.clone(), ids.lease.clone(), view.clone());
    // Written only once the budgets admitted the turn. Refused, the model
    // call this ran beside has relayed nothing (it waits for the verdict
    // before its first token: `Started::admission`) and the turn ends
    // `quota_exceeded`: the error below is not the one the client sees.
    let write = async move {
        admitted.await.map_err(|_| StoreError::Busy)?;
        store.open_session(&user, &opened, &leased, &start).await
    };
    announce(sink, &view, &view).await.map_err(|()| Refused::Gone(view.id.clone()))?;
    let persist_user = lease.first_write(write);
    let (pack, agenda) = pack.await;
    let agent_state = deps.agent_state.as_ref().map(|_| (AgentState::new(view.id.to_string()), 0));
    Ok(Started {
        session,
        view,
        history: Vec::new(),
        summary: None,
        agent_state,
        pack,
        agenda,
        timezone: turn.timezone,
        lease,
        run_id: ids.run_id.clone(),
        user_message,
        answers: None,
        persist_user,
        admission,
    })
}

/// An existing session: the lease, the log (last N messages, summary, agent
/// state), the run check (the user's claim on the run id) and the context
/// pack of the scope the request names go out together. A seen run id wins
/// over a busy lease: the retry of a running turn is told so, not "busy".
async fn resume(
    deps: &TurnDeps,
    ids: &Ids<'_>,
    sid: &SessionId,
    turn: &ValidTurn,
    sink: &mut EventSink,
    exit: &Exit,
    admitted: Admission,
) -> Result<Started, Refused> {
    let (store, user, limit) = (&deps.store, ids.user, deps.config.history_limit);
    let limit = limit.unwrap_or_else(|| deps.context.load_limit());
    let seen = OptionFuture::from(turn.run_id.as_ref().map(|run| store.run_claim(user, run)));
    // The scope as the request names it; the session's stored focus may
    // still narrow it (checked once the lease answers).
    let named = turn.context_type.map(|ct| SessionView::new(ct, turn.entity_id.clone(), turn.focus.clone()));
    let early = named
        .and_then(|v| context::pack_scope(deps, &v))
        .map(|s| context::load_pack(deps, user, s, turn.timezone, exit));
    let early_agenda = OptionFuture::from(early_agenda(deps, user, turn));
    let (leased, log, seen, pack, agenda, admitted) = tokio::join!(
        store.acquire_lease(user, sid, ids.lease),
        deps.history.recent_log_bounded(user, sid, limit, deps.config.history_first_page.unwrap_or(limit)),
        seen,
        OptionFuture::from(early),
        early_agenda,
        admitted
    );
    let leased = match leased {
        Err(StoreError::Busy) => take_over(deps, ids, sid, log.as_ref().ok()).await,
        leased => leased,
    };
    // Taken at once, so that every refusal below gives the lease back.
    let lease =
        leased.as_ref().ok().map(|_| LeaseGuard::new((store.clone(), store.clone()), user, sid, ids.turn_id, exit));
    let refuse = |e| Refused::Store(Some(sid.clone()), e);
    seen_run(seen.transpose(), sid)?;
    admitted.map_err(|over| Refused::OverBudget(Some(sid.clone()), over))?;
    let mut session = leased.map_err(refuse)?;
    let lease = lease.expect("a granted lease has its guard");
    let RecentLog { messages: history, summary, agent_state } = log.map_err(refuse)?;
    // A start cut off between its message and its session write
    // (`session::store::dynamo::plain`) left the count behind the log.
    let logged = history.iter().map(|m| m.seq).max().unwrap_or(0);
    session.view.message_count = session.view.message_count.max(logged);
    let mut history = without_superseded(history);
    let answers = regenerated(turn, &history, sid)?;
    record_session(sid);
    let view = scoped_view(&session.view, turn);
    let said = said_last(turn, &history);
    let (pack, agenda) = settle_reads(deps, user, &view, turn, said, (pack, agenda), exit).await;
    announce(sink, &session.view, &view).await.map_err(|()| Refused::Gone(sid.clone()))?;
    let answered = super::answers::settle_waiting(deps, ids, &session, &view, turn, &mut history, sink).await?;
    let (user_message, start) = turn_start(turn, ids, &session, &view, answers.as_ref(), answered);
    let (store, user, sid) = (deps.store.clone(), user.clone(), sid.clone());
    let persist_user = tokio::spawn(async move { store.start_turn(&user, &sid, &start).await });
    Ok(Started {
        summary: summary.unwrap_or_else(|e| {
            // Without its summary the turn still works, with a shorter memory.
            tracing::warn!(error = %e, "summary not loaded");
            None
        }),
        agent_state: kept_state(deps, &view.id, agent_state),
        session,
        view,
        history,
        pack,
        agenda,
        timezone: turn.timezone,
        lease,
        run_id: ids.run_id.clone(),
        user_message,
        answers,
        persist_user,
        admission: None,
    })
}

/// The run check's answer: a run id already claimed for this session is a
/// retry of a running turn; claimed for another session, a duplicate.
fn seen_run(seen: Result<Option<Option<RunClaim>>, StoreError>, sid: &SessionId) -> Result<(), Refused> {
    let refuse = |e| Refused::Store(Some(sid.clone()), e);
    match seen {
        Ok(Some(Some(claim))) if claim.session_id == *sid => Err(Refused::Retry { session: sid.clone() }),
        // The same run id for another session is not a retry of this request.
        Ok(Some(Some(_))) => Err(refuse(StoreError::DuplicateRun)),
        Ok(_) => Ok(()),
        Err(e) => Err(refuse(e)),
    }
}

/// The session is busy; when the log shows the holder's answer stored (its
/// turn is past `done`, its bookkeeping still on its way or lost), its
/// lease is taken over with that bookkeeping done in the same write; if
/// that turn's own write landed in between, the lease is free: asked again.
/// A round trip more, only on this path.
async fn take_over(
    deps: &TurnDeps,
    ids: &Ids<'_>,
    sid: &SessionId,
    log: Option<&RecentLog>,
) -> Result<Session, StoreError> {
    let Some(ended) = log.and_then(|l| crate::session::store::Bookkeeping::left_by(&l.messages)) else {
        return Err(StoreError::Busy);
    };
    match deps.store.take_over_lease(ids.user, sid, ids.lease, &ended).await {
        Err(StoreError::Busy) => deps.store.acquire_lease(ids.user, sid, ids.lease).await,
        taken => taken,
    }
}

/// A regenerating turn's user message: the last one of the log.
fn regenerated(turn: &ValidTurn, history: &[StoredMessage], sid: &SessionId) -> Result<Option<StoredMessage>, Refused> {
    if !turn.regenerate {
        return Ok(None);
    }
    let last = history.iter().rev().find(|m| m.role == Role::User).cloned();
    last.map(Some).ok_or(Refused::NothingToRegenerate(sid.clone()))
}

/// The pack and the calendar block for the scope the turn runs in: the
/// early reads when they were for it; else (the request did not name its
/// scope) read now, a second round trip.
async fn settle_reads(
    deps: &TurnDeps,
    user: &UserId,
    view: &SessionView,
    turn: &ValidTurn,
    said: &str,
    early: (Option<LoadedPack>, Option<Option<Agenda>>),
    exit: &Exit,
) -> (Option<LoadedPack>, Option<Agenda>) {
    let pack = match (early.0, context::pack_scope(deps, view)) {
        (Some(p), Some(wanted)) if p.key == wanted => Some(p),
        (_, Some(wanted)) => Some(context::load_pack(deps, user, wanted, turn.timezone, exit).await),
        (_, None) => None,
    };
    let agenda = match early.1 {
        Some(a) => a,
        None => context::load_agenda(deps, user, view.context_type, turn.timezone, said).await,
    };
    (pack, agenda)
}

/// The calendar block read beside the log, when the request names its
/// scope. A turn with no message of its own (an approval's answer, a
/// regenerate) reads it after the log: the block reads the message it answers.
fn early_agenda<'a>(
    deps: &'a TurnDeps,
    user: &'a UserId,
    turn: &'a ValidTurn,
) -> Option<impl std::future::Future<Output = Option<Agenda>> + 'a> {
    let ct = turn.context_type.filter(|_| !turn.message.is_empty())?;
    Some(context::load_agenda(deps, user, ct, turn.timezone, &turn.message))
}

/// The message a turn answers: its own, else (an approval's answer, a
/// regenerate) the last user message of the log — the approval's
/// continuation had no reading and the local model copied the week instead.
fn said_last<'a>(turn: &'a ValidTurn, history: &'a [StoredMessage]) -> &'a str {
    if !turn.message.is_empty() {
        return &turn.message;
    }
    let last = history.iter().rev().find(|m| m.role == Role::User);
    last.and_then(|m| m.content.as_deref()).unwrap_or_default()
}

/// The agent state the turn keeps: the stored one, a new one when none is
/// stored, none when it is not kept or could not be read.
fn kept_state(
    deps: &TurnDeps,
    sid: &SessionId,
    stored: Result<Option<(AgentState, u64)>, StoreError>,
) -> Option<(AgentState, u64)> {
    deps.agent_state.as_ref()?;
    match stored {
        Ok(found) => Some(found.unwrap_or_else(|| (AgentState::new(sid.to_string()), 0))),
        Err(e) => {
            tracing::warn!(error = %e, "agent state not loaded");
            None
        }
    }
}

fn record_session(sid: &SessionId) {
    tracing::Span::current().record("session_id", tracing::field::display(sid));
}

/// The request's scope wins over the stored one (gap 1 of the old flow): a
/// named `context_type` replaces the stored one, with the request's own
/// `entity_id`. The stored focus (its project) is kept only while the
/// conversation stays where it was — the same context type, or between the
/// modes of one project ([`crate::session::ContextType::in_project`]) — so naming `global`
/// or `project_create` never runs in the stored project. A given focus
/// always applies.
fn scoped_view(stored: &SessionView, turn: &ValidTurn) -> SessionView {
    let mut view = stored.clone();
    view.context_type = turn.context_type.unwrap_or(stored.context_type);
    view.entity_id = if turn.context_type.is_some() {
        turn.entity_id.clone()
    } else {
        turn.entity_id.clone().or(stored.entity_id.clone())
    };
    let stays = view.context_type == stored.context_type
        || (view.context_type.in_project() && stored.context_type.in_project());
    view.focus = match &turn.focus {
        Some(focus) => Some(focus.clone()),
        None if stays => stored.focus.clone(),
        None => None,
    };
    view
}

/// `session`, then `focus_changed` when an existing session's focus moved (a
/// gap of the old flow: the event was defined but never sent). `Err`: the
/// client is gone.
async fn announce(sink: &mut EventSink, stored: &SessionView, view: &SessionView) -> Result<(), ()> {
    sink.send(StreamEvent::Session { session: view.clone() }).await.map_err(|_| ())?;
    let (previous, current) = (Focus::of(stored), Focus::of(view));
    if stored.message_count > 0 && previous != current {
        let _ = sink.send(StreamEvent::FocusChanged { previous, current }).await;
    }
    Ok(())
}

/// The user message (or, when the turn `answers` a stored user message
/// again, the marker superseding what followed it; when it answers waiting
/// calls, a marker after their `answered` results) and the turn's start record.
fn turn_start(
    turn: &ValidTurn,
    ids: &Ids<'_>,
    session: &Session,
    view: &SessionView,
    answers: Option<&StoredMessage>,
    answered: u64,
) -> (StoredMessage, TurnStart) {
    let now = crate::now_ms();
    let seq = session.view.message_count + answered + 1;
    let user_message = match answers {
        None if !turn.approvals.is_empty() => StoredMessage {
            created_at: now,
            include_in_context: false,
            ..StoredMessage::new(view.id.clone(), seq, ids.turn_id.clone(), Role::Assistant, None)
        },
        None => StoredMessage {
            created_at: now,
            voice_note_group_id: turn.voice_note_group_id.clone(),
            ..StoredMessage::new(view.id.clone(), seq, ids.turn_id.clone(), Role::User, Some(turn.message.clone()))
        },
        Some(answered) => StoredMessage {
            created_at: now,
            include_in_context: false,
            supersedes_from: Some(answered.seq + 1),
            ..StoredMessage::new(view.id.clone(), seq, ids.turn_id.clone(), Role::Assistant, None)
        },
    };
    let start = TurnStart {
        turn: TurnRecord {
            turn_id: ids.turn_id.clone(),
            run_id: ids.run_id.clone(),
            status: TurnStatus::Running,
            user_message_seq: seq,
            assistant_message_seq: None,
            started_at: now,
            ended_at: None,
        },
        user_message: user_message.clone(),
        context_type: view.context_type,
        entity_id: view.entity_id.clone(),
        focus: view.focus.clone(),
        title: (session.view.title.is_none() && answers.is_none() && turn.approvals.is_empty())
            .then(|| title_from_message(&turn.message))
            .flatten(),
    };
    (user_message, start)
}
