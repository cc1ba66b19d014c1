//! The turn's hold on its session: a [`LeaseGuard`] that gives the lease back
//! on every exit — an early return, an error, a panic — unless a write that
//! ends the turn released it already ([`LeaseGuard::released_by_write`]); and
//! the [`Watch`] that keeps the lease alive and listens for Stop.
//!
//! `Drop` cannot await, so the guard spawns the release and leaves its handle
//! in the turn's [`Exit`]; the turn awaits every pending release before `done`,
//! because Lambda freezes the process once the body ends.

use crate::config::Config;
use crate::ids::{SessionId, TurnId, UserId};
use crate::session::store::{Lease, Leases, StopSignals};
use crate::store::StoreError;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What a turn leaves for its last step: writes still in flight (lease
/// releases, bookkeeping kept off the model's path), and the session it
/// resolved (so even a panicking turn's `done` names it).
#[derive(Clone, Default)]
pub struct Exit(Arc<Mutex<ExitInner>>);

#[derive(Default)]
struct ExitInner {
    pending: Vec<JoinHandle<()>>,
    session: Option<SessionId>,
    /// The turn's budget slot, given back after `done` with its tokens.
    slot: Option<crate::budget::Slot>,
    /// Bookkeeping the next turn can repair, written after `done`.
    after_done: Vec<futures::future::BoxFuture<'static, ()>>,
}

impl Exit {
    pub fn set_session(&self, sid: &SessionId) {
        self.lock().session = Some(sid.clone());
    }

    pub fn session(&self) -> Option<SessionId> {
        self.lock().session.clone()
    }

    /// Keeps the turn's budget slot until [`Exit::take_slot`] after `done`
    /// (dropped with the turn otherwise, which gives it back).
    pub fn hold_slot(&self, slot: crate::budget::Slot) {
        self.lock().slot = Some(slot);
    }

    pub fn take_slot(&self) -> Option<crate::budget::Slot> {
        self.lock().slot.take()
    }

    /// A write that follows `done`, in the same invocation (the body stays
    /// open until it is through: Lambda freezes once it ends).
    pub fn after_done(&self, write: futures::future::BoxFuture<'static, ()>) {
        self.lock().after_done.push(write);
    }

    /// The writes left for after `done`, to run now.
    pub fn take_after_done(&self) -> Vec<futures::future::BoxFuture<'static, ()>> {
        std::mem::take(&mut self.lock().after_done)
    }

    /// A write that must land before `done` but not before the model call.
    pub fn defer(&self, write: JoinHandle<()>) {
        self.lock().pending.push(write);
    }

    /// Waits for every deferred write and every release the turn's guards started.
    pub async fn settled(&self) {
        let pending = std::mem::take(&mut self.lock().pending);
        for h in pending {
            let _ = h.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ExitInner> {
        // A poisoned lock only means a panic elsewhere; the data is plain.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Our lease on a session, given back when dropped.
pub struct LeaseGuard {
    leases: Arc<dyn Leases>,
    stops: Arc<dyn StopSignals>,
    user: UserId,
    sid: SessionId,
    turn_id: TurnId,
    exit: Exit,
    held: bool,
    /// Held by the write that creates the session while it runs: a release
    /// waits for it, so that it cannot land before the lease it gives back.
    first_write: Option<Arc<tokio::sync::Mutex<()>>>,
}

impl LeaseGuard {
    /// Takes charge of a lease the store just granted to `turn_id`.
    pub fn new(
        (leases, stops): (Arc<dyn Leases>, Arc<dyn StopSignals>),
        user: &UserId,
        sid: &SessionId,
        turn_id: &TurnId,
        exit: &Exit,
    ) -> LeaseGuard {
        exit.set_session(sid);
        LeaseGuard {
            leases,
            stops,
            user: user.clone(),
            sid: sid.clone(),
            turn_id: turn_id.clone(),
            exit: exit.clone(),
            held: true,
            first_write: None,
        }
    }

    /// Spawns the write that creates the leased session (a new session's
    /// lease is granted by that very write, which runs beside the model).
    pub fn first_write<F>(&mut self, write: F) -> JoinHandle<Result<(), StoreError>>
    where
        F: std::future::Future<Output = Result<(), StoreError>> + Send + 'static,
    {
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        let held = gate.clone().try_lock_owned().expect("a new lock is free");
        self.first_write = Some(gate);
        tokio::spawn(async move {
            let _held = held;
            write.await
        })
    }

    /// The turn's closing write released the lease in its own transaction.
    pub fn released_by_write(mut self) {
        self.held = false;
    }

    /// The turn's answer is stored; `settle` gives the lease back (with the
    /// session's bookkeeping) after `done`.
    pub fn released_after_done(mut self, settle: futures::future::BoxFuture<'static, ()>) {
        self.held = false;
        self.exit.after_done(settle);
    }

    /// Keeps the lease alive and listens for Stop, off the token path: a small
    /// read every `STOP_POLL_MS`, a renewal every third of `SESSION_LEASE_MS`.
    pub fn watch(&self, cfg: &Config) -> Watch {
        let (lease_lost, stopped) = (CancellationToken::new(), CancellationToken::new());
        // A new session's lease exists once its first write landed (beside
        // the model, after the budget's admission): renewing before that
        // finds no session and would end the turn `session_lease_lost`.
        let first_write = self.first_write.clone();
        let task = tokio::spawn(keep_alive(
            first_write,
            (self.leases.clone(), self.stops.clone()),
            (self.user.clone(), self.sid.clone(), self.turn_id.clone()),
            (cfg.session_lease, cfg.stop_poll.max(Duration::from_millis(20))),
            (lease_lost.clone(), stopped.clone()),
        ));
        Watch { lease_lost, stopped, task }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let (store, user, sid, turn) = (self.leases.clone(), self.user.clone(), self.sid.clone(), self.turn_id.clone());
        let first_write = self.first_write.take();
        let release = tokio::spawn(async move {
            if let Some(gate) = first_write {
                let _landed = gate.lock().await;
            }
            if let Err(e) = store.release_lease(&user, &sid, &turn).await {
                tracing::warn!(error = %e, "lease not released; it expires on its own");
            }
        });
        self.exit.defer(release);
    }
}

/// Signals from the lease keeper; dropping it stops the keeper.
pub struct Watch {
    pub lease_lost: CancellationToken,
    pub stopped: CancellationToken,
    task: JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn keep_alive(
    first_write: Option<Arc<tokio::sync::Mutex<()>>>,
    (leases, stops): (Arc<dyn Leases>, Arc<dyn StopSignals>),
    (user, sid, turn_id): (UserId, SessionId, TurnId),
    (lease, poll): (Duration, Duration),
    (lost, stop): (CancellationToken, CancellationToken),
) {
    if let Some(gate) = first_write {
        let _landed = gate.lock().await;
    }
    let mut renew_at = Instant::now() + lease / 3;
    loop {
        tokio::time::sleep(poll.min(renew_at.saturating_duration_since(Instant::now()))).await;
        if Instant::now() >= renew_at {
            let l = Lease { turn_id: turn_id.clone(), until_ms: crate::now_ms() + lease.as_millis() as i64 };
            match leases.renew_lease(&user, &sid, &l).await {
                Ok(()) => renew_at = Instant::now() + lease / 3,
                Err(StoreError::LeaseLost) => {
                    lost.cancel();
                    return;
                }
                // Transient: the lease still has two thirds of its time.
                Err(e) => tracing::warn!(error = %e, "lease renewal failed; retrying"),
            }
        }
        match stops.stop_requested(&user, &sid, &turn_id).await {
            Ok(true) => {
                tracing::info!("stop requested");
                stop.cancel();
                return;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "stop check failed"),
        }
    }
}
