//! Approvals: the one way a tool call waits for the user's yes
//! (docs/chat-protocol.md#approvals, docs/events.md#approval_required).
//!
//! Contract:
//! - [`policy`] says which calls wait, per tool; the turn's model loop runs
//!   the round's other calls and ends the turn with these waiting
//!   ([`crate::model_loop::ApprovalGate`], implemented by [`Gate`]). The
//!   stored assistant message holds the calls (their arguments, the only
//!   ones an approval ever runs) and a [`PendingApproval`] each; the calls
//!   have no result yet (the context builder sends such a message as text
//!   only, so the log stays valid for strict model servers meanwhile);
//! - an approval id is signed ([`sign`]): HMAC over user, session, call id,
//!   tool, the arguments' hash and the expiry. An id that matches no waiting
//!   call of this user's session (forged, another user's, another
//!   session's, superseded) is `approval_not_found`; a call that already has
//!   its result `approval_used`; one past its expiry `approval_expired`.
//!   Nothing runs for any of them;
//! - the answer is a turn ([`settle`]): under the session's lease, it checks
//!   the answers again against the log, runs the approved calls, stores
//!   every waiting call's result in the turn's first write — the approved
//!   call's own, a denial (`denied by the user: <reason>`), or, for a call
//!   the answer left open, not run — and the model goes on. One writer per
//!   session and the result in the log make an approval single use: the
//!   second of two identical answers finds the result (or the lease) and
//!   runs nothing;
//! - the user's own rules ([`settings`], `GET`/`PUT /me/approvals`) are read
//!   only when the model begins a tool call ([`read_settings`]), beside the
//!   rest of its answer; a talk-only turn never reads them;
//! - a turn with a new user message while calls wait stores each one's
//!   result first (not run: the user wrote instead of answering; or the
//!   approval expired), so every call in the log has exactly one result.
//! - a plan step's calls wait the same way (the executor's loop asks the
//!   same gate; [`crate::planner`]): their approvals name the step
//!   ([`crate::message::PlanStepRef`]), the turn's log holds them after the
//!   plan call's result, and their results also go to the plan record,
//!   whose step then goes on from them.

pub mod policy;
pub mod settings;
pub mod settle;
pub mod sign;

pub use sign::Signer;

use crate::calendar::CalendarService;
use crate::entities::EntityService;
use crate::ids::{ProjectId, SessionId, UserId};
use crate::message::{PendingApproval, Role, StoredMessage, ToolCall};
use crate::model_loop::ApprovalGate;
use crate::store::StoreError;
use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use serde::{Deserialize, Serialize};
use settings::{ApprovalSettings, ApprovalSettingsStore};
use std::sync::Arc;
use std::time::Duration;

/// The user's answer to one waiting call, as a request carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApprovalAnswer {
    pub approval_id: String,
    pub approved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The body of `POST /sessions/{id}/approvals/{approval_id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApprovalBody {
    pub approved: bool,
    /// Why, in the user's words (a denial's reason reaches the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Answers to the round's other waiting calls, in the same request (a
    /// waiting call the request leaves unanswered does not run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<ApprovalAnswer>,
}

/// Why an answer was refused (nothing ran).
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("no call of this session waits for this approval")]
    NotFound,
    #[error("this approval was already answered")]
    Used,
    #[error("this approval expired; the call did not run")]
    Expired,
    #[error("the session is not found")]
    SessionNotFound,
    #[error(transparent)]
    Store(StoreError),
}

impl ApprovalError {
    pub fn code(&self) -> &'static str {
        match self {
            ApprovalError::NotFound => "approval_not_found",
            ApprovalError::Used => "approval_used",
            ApprovalError::Expired => "approval_expired",
            ApprovalError::SessionNotFound => "session_not_found",
            ApprovalError::Store(e) => e.code(),
        }
    }

    pub fn status(&self) -> http::StatusCode {
        match self {
            ApprovalError::NotFound | ApprovalError::SessionNotFound => http::StatusCode::NOT_FOUND,
            ApprovalError::Used => http::StatusCode::CONFLICT,
            ApprovalError::Expired => http::StatusCode::GONE,
            ApprovalError::Store(StoreError::Busy) => http::StatusCode::CONFLICT,
            ApprovalError::Store(_) => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// One call with an approval in the log, and whether its result is stored.
#[derive(Debug, Clone)]
pub struct Asked {
    pub call: ToolCall,
    pub pending: PendingApproval,
    pub answered: bool,
}

/// Every call of `log` that asked for an approval (oldest first).
pub fn asked(log: &[StoredMessage]) -> Vec<Asked> {
    let mut out = Vec::new();
    for (i, m) in log.iter().enumerate() {
        for p in &m.approvals {
            let Some(call) = m.tool_calls.iter().find(|c| c.id == p.tool_call_id) else { continue };
            let answered = log[i + 1..].iter().any(|r| r.role == Role::Tool && r.tool_call_id == Some(call.id.clone()));
            out.push(Asked { call: call.clone(), pending: p.clone(), answered });
        }
    }
    out
}

/// The calls of `log` that still wait.
pub fn waiting(log: &[StoredMessage]) -> Vec<Asked> {
    asked(log).into_iter().filter(|a| !a.answered).collect()
}

/// The asked call `approval_id` names in `log`, if it may run now.
pub fn find<'a>(
    signer: &Signer,
    user: &UserId,
    sid: &SessionId,
    asked: &'a [Asked],
    approval_id: &str,
    now_ms: i64,
) -> Result<&'a Asked, ApprovalError> {
    let a = asked
        .iter()
        .find(|a| a.pending.approval_id == approval_id && signer.verify(approval_id, user, sid, &a.call))
        .ok_or(ApprovalError::NotFound)?;
    if a.answered {
        return Err(ApprovalError::Used);
    }
    if a.pending.expires_at <= now_ms {
        return Err(ApprovalError::Expired);
    }
    Ok(a)
}

/// How many recent messages an answer's check reads: the waiting message
/// is the log's last assistant message.
pub const LOG_WINDOW: usize = 50;

/// The answers checked against the session's log before a stream opens
/// (the turn checks them again under the lease): a refusal is a 4xx.
pub async fn check(
    store: &dyn crate::session::store::SessionStore,
    signer: &Signer,
    user: &UserId,
    sid: &SessionId,
    answers: &[ApprovalAnswer],
) -> Result<(), ApprovalError> {
    let (session, log) = tokio::join!(store.session(user, sid), store.recent_messages(user, sid, LOG_WINDOW));
    session.map_err(ApprovalError::Store)?.ok_or(ApprovalError::SessionNotFound)?;
    let log = crate::message::without_superseded(log.map_err(ApprovalError::Store)?);
    let asked = asked(&log);
    for a in answers {
        find(signer, user, sid, &asked, &a.approval_id, crate::now_ms())?;
    }
    Ok(())
}

/// The user's approval settings as a turn reads them: started when the
/// model begins its first tool call ([`ApprovalGate::prefetch`]) and awaited
/// when a call is decided; a turn whose model calls no tool never reads them.
pub type SettingsRead = Shared<BoxFuture<'static, ApprovalSettings>>;

/// `user`'s settings, read when first polled (`None`: no store; the
/// defaults). A read that fails makes every tool of [`policy::ASKABLE`] ask
/// first: a setting the turn could not read must not be skipped.
pub fn read_settings(store: Option<Arc<dyn ApprovalSettingsStore>>, user: &UserId) -> SettingsRead {
    let Some(store) = store else { return futures::future::ready(ApprovalSettings::default()).boxed().shared() };
    let user = user.clone();
    async move {
        match store.get(&user).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "approval settings not read; every write asks first");
                let ask_first = policy::ASKABLE.iter().map(|t| t.as_str().to_string()).collect();
                ApprovalSettings { ask_first }
            }
        }
    }
    .boxed()
    .shared()
}

/// The turn's [`ApprovalGate`]: the policy, signed for this user's session.
pub struct Gate<'a> {
    pub signer: Signer,
    pub user: &'a UserId,
    pub sid: &'a SessionId,
    pub ttl: Duration,
    /// The user's "ask first" tools.
    pub settings: SettingsRead,
    /// Whose events the calendar calls change.
    pub calendar: Option<&'a CalendarService>,
    /// For the entity names in the question.
    pub entities: Option<&'a EntityService>,
    pub project: Option<ProjectId>,
    /// The zone the question shows dates in (the request's; UTC without one).
    pub zone: Option<crate::calendar::Zone>,
}

#[async_trait::async_trait]
impl ApprovalGate for Gate<'_> {
    fn prefetch(&self) {
        // Polled on its own task: the read runs while the model still
        // streams its call; `waits` then finds it done (or joins it).
        let read = self.settings.clone();
        if read.peek().is_none() {
            tokio::spawn(read);
        }
    }

    async fn waits(&self, calls: &[ToolCall]) -> Vec<Option<PendingApproval>> {
        let expires_at = crate::now_ms() + self.ttl.as_millis() as i64;
        let settings = self.settings.clone().await;
        let at = policy::Lookup {
            user: self.user,
            settings: &settings,
            calendar: self.calendar,
            entities: self.entities,
            project: self.project.as_ref(),
            zone: self.zone.unwrap_or(crate::calendar::Zone::UTC),
        };
        let mut out = Vec::with_capacity(calls.len());
        for call in calls {
            if policy::why(call, calls, &at).await.is_none() {
                out.push(None);
                continue;
            }
            let summary = policy::summary(call, &at).await;
            out.push(Some(PendingApproval {
                tool_call_id: call.id.clone(),
                approval_id: self.signer.sign(self.user, self.sid, call, expires_at),
                tool: call.function.name.clone(),
                summary,
                expires_at,
                step: None,
            }));
        }
        out
    }
}
