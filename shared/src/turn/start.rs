//! Phase 1 of a turn: resolve the session and take its lease, load what the
//! prompt needs from the log (history, summary) in the same round trip, check
//! the run id, announce the session, and start storing the user message while
//! the model works.
//!
//! Contract: either the turn may go on ([`Started`], holding the lease in a
//! guard), or it is [`Refused`] with nothing written by this turn; a retried
//! `stream_run_id` is recognised per user, across sessions, and answered from
//! what the first request stored ([`super::retry`]).

use super::lease::{Exit, LeaseGuard};
use super::{TurnDeps, ValidTurn};
use crate::ids::{RunId, SessionId, TurnId, UserId};
use crate::message::{Role, StoredMessage};
use crate::session::{title_from_message, Session, SessionView, TurnRecord, TurnStatus};
use crate::sse::{EventSink, Focus, StreamEvent};
use crate::store::summary::SessionSummary;
use crate::store::{Lease, StoreError, TurnStart};
use tokio::task::JoinHandle;

/// A turn that holds its session and may call the model.
pub struct Started {
    /// The session as it was before this turn.
    pub session: Session,
    /// The session with this request's scope applied (what `session` announced).
    pub view: SessionView,
    pub history: Vec<StoredMessage>,
    pub summary: Option<SessionSummary>,
    pub lease: LeaseGuard,
    pub run_id: RunId,
    pub user_message: StoredMessage,
    /// The start record's write, running beside the model call.
    pub persist_user: JoinHandle<Result<(), StoreError>>,
}

/// Why a turn did not start.
pub enum Refused {
    /// The store said no (busy, closed, not found, failed); nothing was written.
    Store(Option<SessionId>, StoreError),
    /// This user already sent this `stream_run_id`, in this session.
    Retry { session: SessionId },
    /// The client went away before the turn began; nothing was written.
    Gone(SessionId),
}

pub async fn start(
    deps: &TurnDeps,
    user: &UserId,
    turn: &ValidTurn,
    turn_id: &TurnId,
    sink: &mut EventSink,
    exit: &Exit,
) -> Result<Started, Refused> {
    let run_id =
        turn.run_id.clone().unwrap_or_else(|| RunId::parse(turn_id.as_str()).expect("turn ids are valid run ids"));
    let lease =
        Lease { turn_id: turn_id.clone(), until_ms: crate::now_ms() + deps.config.session_lease.as_millis() as i64 };
    let (session, lease, history, summary) = match &turn.session_id {
        None => {
            let session = create(deps, user, turn, &lease, &run_id).await?;
            let guard = LeaseGuard::new(deps.store.clone(), user, &session.view.id, turn_id, exit);
            (session, guard, Vec::new(), None)
        }
        Some(sid) => resume(deps, user, sid, turn.run_id.as_ref(), &lease, exit).await?,
    };
    let sid = session.view.id.clone();
    tracing::Span::current().record("session_id", tracing::field::display(&sid));
    tracing::info!(history = history.len(), "session resolved");

    let view = scoped_view(&session.view, turn);
    announce(sink, &session.view, &view).await.map_err(|()| Refused::Gone(sid.clone()))?;
    let (user_message, persist_user) = persist_user_message(deps, user, turn, turn_id, &run_id, &session, &view);
    Ok(Started { session, view, history, summary, lease, run_id, user_message, persist_user })
}

/// A new session, already leased to this turn, and the run id claimed for
/// the user: one write, nothing to read. A run id already claimed is a retry.
async fn create(
    deps: &TurnDeps,
    user: &UserId,
    turn: &ValidTurn,
    lease: &Lease,
    run: &RunId,
) -> Result<Session, Refused> {
    let view = SessionView::new(turn.context_type.unwrap_or_default(), turn.entity_id.clone(), turn.focus.clone());
    match deps.store.create_session(user, &view, lease, run).await {
        Ok(session) => Ok(session),
        Err(StoreError::DuplicateRun) => match deps.store.run_claim(user, run).await {
            Ok(Some(claim)) => Err(Refused::Retry { session: claim.session_id }),
            Ok(None) => Err(Refused::Store(None, StoreError::DuplicateRun)),
            Err(e) => Err(Refused::Store(None, e)),
        },
        Err(e) => Err(Refused::Store(None, e)),
    }
}

/// An existing session: the lease, the last N messages, the run check (the
/// user's claim on the run id) and the summary go out together. A seen run id wins over a busy lease: the retry of
/// a running turn is told so, not "busy".
async fn resume(
    deps: &TurnDeps,
    user: &UserId,
    sid: &SessionId,
    run: Option<&RunId>,
    lease: &Lease,
    exit: &Exit,
) -> Result<(Session, LeaseGuard, Vec<StoredMessage>, Option<SessionSummary>), Refused> {
    let store = &deps.store;
    let limit = deps.config.history_limit.unwrap_or_else(|| deps.context.load_limit());
    let seen = async {
        match run {
            Some(run) => store.run_claim(user, run).await,
            None => Ok(None),
        }
    };
    let (leased, history, seen, summary) = tokio::join!(
        store.acquire_lease(user, sid, lease),
        store.recent_messages(user, sid, limit),
        seen,
        deps.summaries.current(user, sid)
    );
    // Taken at once, so that every refusal below gives the lease back.
    let guard = leased.as_ref().ok().map(|_| LeaseGuard::new(store.clone(), user, sid, &lease.turn_id, exit));
    let refuse = |e| Refused::Store(Some(sid.clone()), e);
    match seen {
        Ok(Some(claim)) if claim.session_id == *sid => return Err(Refused::Retry { session: sid.clone() }),
        // The same run id for another session is not a retry of this request.
        Ok(Some(_)) => return Err(refuse(StoreError::DuplicateRun)),
        Ok(None) => {}
        Err(e) => return Err(refuse(e)),
    }
    let session = leased.map_err(refuse)?;
    let guard = guard.expect("a granted lease has its guard");
    let history = history.map_err(refuse)?;
    // Without its summary the turn still works, with a shorter memory.
    let summary = summary.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "summary not loaded");
        None
    });
    Ok((session, guard, history, summary))
}

/// The request's scope wins over the stored one; focus only when given.
fn scoped_view(stored: &SessionView, turn: &ValidTurn) -> SessionView {
    let mut view = stored.clone();
    view.context_type = turn.context_type.unwrap_or(stored.context_type);
    view.entity_id = if turn.context_type.is_some() {
        turn.entity_id.clone()
    } else {
        turn.entity_id.clone().or(stored.entity_id.clone())
    };
    if turn.focus.is_some() {
        view.focus = turn.focus.clone();
    }
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

/// The user message and the turn's start record, written while the model works.
fn persist_user_message(
    deps: &TurnDeps,
    user: &UserId,
    turn: &ValidTurn,
    turn_id: &TurnId,
    run_id: &RunId,
    session: &Session,
    view: &SessionView,
) -> (StoredMessage, JoinHandle<Result<(), StoreError>>) {
    let now = crate::now_ms();
    let seq = session.view.message_count + 1;
    let user_message = StoredMessage {
        created_at: now,
        voice_note_group_id: turn.voice_note_group_id.clone(),
        ..StoredMessage::new(view.id.clone(), seq, turn_id.clone(), Role::User, Some(turn.message.clone()))
    };
    let start = TurnStart {
        turn: TurnRecord {
            turn_id: turn_id.clone(),
            run_id: run_id.clone(),
            status: TurnStatus::Running,
            user_message_seq: seq,
            assistant_message_seq: None,
            started_at: now,
            ended_at: None,
        },
        user_message: user_message.clone(),
        context_type: view.context_type,
        entity_id: view.entity_id.clone(),
        focus: turn.focus.clone(),
        title: session.view.title.is_none().then(|| title_from_message(&turn.message)).flatten(),
    };
    let (store, user, sid) = (deps.store.clone(), user.clone(), view.id.clone());
    (user_message, tokio::spawn(async move { store.start_turn(&user, &sid, &start).await }))
}
