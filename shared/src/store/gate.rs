//! Whether a session still takes writes, as the in-memory twins of the
//! feature stores (plans, agent state, summaries) see it. The DynamoDB stores
//! read the session item (a condition check, or `attr::session_alive` after a
//! plain put); a twin asks its [`SessionGate`] instead, so a delete that has
//! begun fails their writes the same way.

use crate::ids::{SessionId, UserId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub trait SessionGate: Send + Sync {
    /// The session exists and no delete has begun on it.
    fn alive(&self, user: &UserId, session: &SessionId) -> bool;
}

impl<T: SessionGate + ?Sized> SessionGate for Arc<T> {
    fn alive(&self, user: &UserId, session: &SessionId) -> bool {
        (**self).alive(user, session)
    }
}

/// Sessions as a set: one never opened is not alive, as a missing session
/// item is not. Clones share the set, so a test hands one clone to each twin
/// and opens or deletes sessions through another.
#[derive(Clone, Default)]
pub struct MemorySessions(Arc<Mutex<HashMap<(UserId, SessionId), bool>>>);

impl MemorySessions {
    pub fn open(&self, user: &UserId, session: &SessionId) {
        self.0.lock().expect("sessions lock").insert((user.clone(), session.clone()), true);
    }

    /// Marks the session as being deleted: from now on it takes no writes.
    pub fn begin_delete(&self, user: &UserId, session: &SessionId) {
        self.0.lock().expect("sessions lock").insert((user.clone(), session.clone()), false);
    }
}

impl SessionGate for MemorySessions {
    fn alive(&self, user: &UserId, session: &SessionId) -> bool {
        self.0.lock().expect("sessions lock").get(&(user.clone(), session.clone())).copied().unwrap_or(false)
    }
}

/// A user no other contract case touches (the DynamoDB suites share a table).
#[cfg(any(test, feature = "testkit"))]
pub fn fresh_user() -> UserId {
    UserId::parse(format!("contract-{}", uuid::Uuid::new_v4().simple())).expect("a valid user id")
}

/// How a contract suite opens a session and begins its delete, on whichever
/// implementation it runs against (the twins' [`MemorySessions`], or session
/// items in DynamoDB Local).
#[cfg(any(test, feature = "testkit"))]
#[async_trait::async_trait]
pub trait SessionFixture: Send + Sync {
    async fn open(&self, user: &UserId, session: &SessionId);
    async fn begin_delete(&self, user: &UserId, session: &SessionId);
}

#[cfg(any(test, feature = "testkit"))]
#[async_trait::async_trait]
impl SessionFixture for MemorySessions {
    async fn open(&self, user: &UserId, session: &SessionId) {
        MemorySessions::open(self, user, session)
    }
    async fn begin_delete(&self, user: &UserId, session: &SessionId) {
        MemorySessions::begin_delete(self, user, session)
    }
}
