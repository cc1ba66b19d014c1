//! The session stores in memory: the twin of [`super::dynamo`] for unit
//! tests, held to the same [`super::contract`].
//!
//! It keeps what DynamoDB keeps, item for item: the session items, the user's
//! run claims, and each session's partition as a map sorted by the same sort
//! keys ([`crate::store::keys`]): messages, the body chunks of large ones,
//! turn records, tool-output chunks. So a delete sweeps the same items in the
//! same pages of 25 and counts them alike, and every write checks what the
//! DynamoDB one's conditions check (lease holder, message slots, run claims,
//! a delete that began), all before changing anything, as a transaction does.
//! Run claims do not expire here (DynamoDB's TTL is 7 days).

use super::{
    DeleteProgress, Lease, Leases, MessagesFrom, RunClaim, SessionLog, Sessions, SessionsPage, StopSignals,
    ToolOutputs, TurnEnd, TurnStart,
};
use crate::ids::{RunId, SessionId, TurnId, UserId};
use crate::message::StoredMessage;
use crate::session::{Session, SessionStatus, SessionView, TurnRecord};
use crate::store::dynamo::{utf8_chunks, CHUNK_BYTES, DELETE_BATCH};
use crate::store::keys;
use crate::store::StoreError;
use base64::Engine;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

/// The session stores, in memory.
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

type Key = (UserId, SessionId);

#[derive(Default)]
struct State {
    sessions: HashMap<Key, SessionItem>,
    claims: HashMap<(UserId, RunId), RunClaim>,
    /// Each session's items but the session item, by sort key.
    partitions: HashMap<Key, BTreeMap<String, Entry>>,
}

/// The session item, with what never leaves the store.
#[derive(Clone)]
struct SessionItem {
    session: Session,
    /// A delete began: invisible, and every write of a turn fails.
    deleting: bool,
    stop_turn: Option<TurnId>,
}

enum Entry {
    Message(Box<StoredMessage>),
    /// A chunk of a large message's body (the message holds it whole here).
    Body,
    Turn(TurnRecord),
    /// A chunk of a tool output; the first counts them.
    Output {
        data: String,
        chunks: Option<usize>,
    },
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panicking test; the data is plain.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The session twin is the feature twins' gate, so in an all-memory world a
/// delete begun here refuses plan, agent-state and summary writes as the
/// DynamoDB stores' session checks do.
impl crate::store::gate::SessionGate for MemoryStore {
    fn alive(&self, user: &UserId, session: &SessionId) -> bool {
        self.lock().visible(user, session).is_some()
    }
}

/// Opens a session (no lease left behind) or begins its delete through the
/// session store's own operations, for the feature stores' contract suites.
#[cfg(any(test, feature = "testkit"))]
#[async_trait::async_trait]
impl crate::store::gate::SessionFixture for std::sync::Arc<MemoryStore> {
    async fn open(&self, user: &UserId, session: &SessionId) {
        let global = crate::session::ContextType::Global;
        let view = SessionView { id: session.clone(), ..SessionView::new(global, None, None) };
        let turn = TurnId::new();
        let lease = Lease { turn_id: turn.clone(), until_ms: crate::now_ms() + 60_000 };
        let run = RunId::parse(turn.as_str()).expect("turn ids are valid run ids");
        self.create_session(user, &view, &lease, &run).await.expect("create the session");
        self.release_lease(user, session, &turn).await.expect("release the lease");
    }
    async fn begin_delete(&self, user: &UserId, session: &SessionId) {
        // A budget of one item: the mark is made, the sweep has only begun.
        self.delete_session(user, session, Some(1)).await.expect("begin the delete");
    }
}

impl State {
    fn item(&self, user: &UserId, sid: &SessionId) -> Option<&SessionItem> {
        self.sessions.get(&(user.clone(), sid.clone()))
    }

    fn visible(&self, user: &UserId, sid: &SessionId) -> Option<&SessionItem> {
        self.item(user, sid).filter(|i| !i.deleting)
    }

    fn partition(&mut self, user: &UserId, sid: &SessionId) -> &mut BTreeMap<String, Entry> {
        self.partitions.entry((user.clone(), sid.clone())).or_default()
    }

    fn has(&self, user: &UserId, sid: &SessionId, sk: &str) -> bool {
        self.partitions.get(&(user.clone(), sid.clone())).is_some_and(|p| p.contains_key(sk))
    }

    /// Whether our turn may write: it holds the lease (expired or not, as
    /// long as no one took it) and no delete began.
    fn writable(&self, user: &UserId, sid: &SessionId, turn: &TurnId) -> bool {
        self.item(user, sid).is_some_and(|i| !i.deleting && i.session.lease.as_ref().is_some_and(|(t, _)| t == turn))
    }

    /// Why a turn's write failed: the session is gone, or the lease not ours.
    fn lost_or_gone(&self, user: &UserId, sid: &SessionId) -> StoreError {
        match self.visible(user, sid) {
            None => StoreError::NotFound,
            Some(_) => StoreError::LeaseLost,
        }
    }

    /// Whether none of `messages` has its slot taken.
    fn slots_free(&self, user: &UserId, sid: &SessionId, messages: &[StoredMessage]) -> bool {
        messages.iter().all(|m| !self.has(user, sid, &keys::message_sk(m.seq)))
    }

    fn put_messages(&mut self, user: &UserId, sid: &SessionId, messages: &[StoredMessage]) {
        let part = self.partition(user, sid);
        for m in messages {
            let json = serde_json::to_string(m).map(|j| j.len()).unwrap_or(0);
            if json > super::dynamo::MESSAGE_INLINE_BYTES {
                for i in 0..json.div_ceil(CHUNK_BYTES) {
                    part.insert(keys::message_body_sk(m.seq, &m.id, i), Entry::Body);
                }
            }
            part.insert(keys::message_sk(m.seq), Entry::Message(Box::new(m.clone())));
        }
    }

    /// Why creating a session failed: another turn's claim, our own earlier
    /// write (success), or an id already taken.
    fn why_not_created(
        &self,
        user: &UserId,
        view: &SessionView,
        lease: &Lease,
        run: Option<&RunId>,
    ) -> Result<Session, StoreError> {
        let claim = run.and_then(|run| self.claims.get(&(user.clone(), run.clone())));
        let ours = RunClaim { session_id: view.id.clone(), turn_id: lease.turn_id.clone() };
        match (claim, self.item(user, &view.id)) {
            (Some(c), _) if *c != ours => Err(StoreError::DuplicateRun),
            (c, Some(i))
                if (c.is_some() || run.is_none())
                    && !i.deleting
                    && i.session.lease.as_ref().is_some_and(|(t, _)| *t == lease.turn_id) =>
            {
                Ok(i.session.clone())
            }
            (_, Some(_)) => Err(StoreError::Busy),
            (_, None) => Err(StoreError::NotFound),
        }
    }

    /// Creates the session item and the claim (`run`; none: no claim), when
    /// neither exists.
    fn create(&mut self, user: &UserId, view: &SessionView, lease: &Lease, run: Option<&RunId>) -> Option<Session> {
        let key = (user.clone(), view.id.clone());
        let claim_key = run.map(|run| (user.clone(), run.clone()));
        if self.sessions.contains_key(&key) || claim_key.as_ref().is_some_and(|k| self.claims.contains_key(k)) {
            return None;
        }
        let session = Session {
            user_id: user.clone(),
            view: SessionView { status: SessionStatus::Active, ..view.clone() },
            prompt_tokens: 0,
            completion_tokens: 0,
            lease: Some((lease.turn_id.clone(), lease.until_ms)),
        };
        let item = SessionItem { session: session.clone(), deleting: false, stop_turn: None };
        self.sessions.insert(key, item);
        if let Some(claim_key) = claim_key {
            self.claims.insert(claim_key, RunClaim { session_id: view.id.clone(), turn_id: lease.turn_id.clone() });
        }
        Some(session)
    }

    /// Up to `limit` messages with seq in `range`, in log order.
    fn messages(
        &self,
        user: &UserId,
        sid: &SessionId,
        range: std::ops::RangeInclusive<u64>,
        newest: bool,
        limit: usize,
    ) -> Vec<StoredMessage> {
        let Some(part) = self.partitions.get(&(user.clone(), sid.clone())) else { return vec![] };
        let (lo, hi) = (keys::message_sk(*range.start()), keys::message_sk(*range.end()));
        let found = part.range(lo..=hi).filter_map(|(_, e)| match e {
            Entry::Message(m) => Some((**m).clone()),
            _ => None,
        });
        if !newest {
            return found.take(limit).collect();
        }
        let mut out: Vec<_> = found.rev().take(limit).collect();
        out.reverse();
        out
    }

    /// The turn's closing write, when its conditions hold (checked by the caller).
    fn finish(&mut self, user: &UserId, sid: &SessionId, end: &TurnEnd, closing: &[StoredMessage]) {
        let now = crate::now_ms();
        self.put_messages(user, sid, closing);
        if let Some(Entry::Turn(t)) = self.partition(user, sid).get_mut(&keys::turn_sk(&end.run_id)) {
            t.status = end.status;
            t.ended_at = Some(now);
            t.assistant_message_seq = end.messages.last().map(|m| m.seq).filter(|s| *s > 0);
        }
        let item = self.sessions.get_mut(&(user.clone(), sid.clone())).expect("checked by the caller");
        let s = &mut item.session;
        s.view.message_count += closing.len() as u64;
        s.prompt_tokens += end.usage.prompt_tokens;
        s.completion_tokens += end.usage.completion_tokens;
        s.lease = None;
        item.stop_turn = None;
        if let Some(scope) = &end.scope {
            s.view.context_type = scope.context_type;
            s.view.entity_id = scope.entity_id.clone();
            s.view.focus = scope.focus.clone();
        }
    }

    fn turn_matches(&self, user: &UserId, sid: &SessionId, run: &RunId, turn: &TurnId) -> bool {
        let part = self.partitions.get(&(user.clone(), sid.clone()));
        matches!(part.and_then(|p| p.get(&keys::turn_sk(run))), Some(Entry::Turn(t)) if t.turn_id == *turn)
    }
}

#[async_trait::async_trait]
impl Sessions for MemoryStore {
    async fn create_session(
        &self,
        user: &UserId,
        view: &SessionView,
        lease: &Lease,
        run: &RunId,
    ) -> Result<Session, StoreError> {
        let mut st = self.lock();
        match st.create(user, view, lease, Some(run)) {
            Some(session) => Ok(session),
            None => st.why_not_created(user, view, lease, Some(run)),
        }
    }

    async fn open_session(
        &self,
        user: &UserId,
        view: &SessionView,
        lease: &Lease,
        start: &TurnStart,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        let (run, sid, message) = (&start.turn.run_id, &view.id, &start.user_message);
        let stored = SessionView {
            message_count: message.seq,
            last_activity_at: message.created_at,
            title: view.title.clone().or_else(|| start.title.clone()),
            ..view.clone()
        };
        let free = !st.has(user, sid, &keys::turn_sk(run)) && st.slots_free(user, sid, std::slice::from_ref(message));
        let created = free && !st.sessions.contains_key(&(user.clone(), sid.clone()));
        let claimed = start.claims_run().then_some(run);
        if !created || st.create(user, &stored, lease, claimed).is_none() {
            return st.why_not_created(user, view, lease, claimed).map(|_| ());
        }
        if start.claims_run() {
            st.partition(user, sid).insert(keys::turn_sk(run), Entry::Turn(start.turn.clone()));
        }
        st.put_messages(user, sid, std::slice::from_ref(message));
        Ok(())
    }

    async fn session(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError> {
        Ok(self.lock().visible(user, session).map(|i| i.session.clone()))
    }

    async fn list_sessions(
        &self,
        user: &UserId,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<SessionsPage, StoreError> {
        let after = match cursor {
            None => None,
            Some(c) => Some(decode_cursor(user, c).ok_or(StoreError::NotFound)?),
        };
        let st = self.lock();
        let mut listed: Vec<(String, SessionView)> = st
            .sessions
            .iter()
            .filter(|((u, _), i)| u == user && !i.deleting)
            .map(|(_, i)| (gsi_sk(&i.session.view), i.session.view.clone()))
            .filter(|(sk, _)| after.as_ref().is_none_or(|a| sk < a))
            .collect();
        listed.sort_by(|a, b| b.0.cmp(&a.0));
        let limit = limit.clamp(1, 100);
        listed.truncate(limit);
        // As DynamoDB: a full page has a next one, which may be empty.
        let cursor = (listed.len() == limit).then(|| encode_cursor(user, &listed[limit - 1].0));
        Ok(SessionsPage { sessions: listed.into_iter().map(|(_, v)| v).collect(), cursor })
    }

    async fn rename_session(&self, user: &UserId, session: &SessionId, title: &str) -> Result<Session, StoreError> {
        self.update_visible(user, session, |s| s.view.title = Some(title.to_string()))
    }

    async fn close_session(&self, user: &UserId, session: &SessionId) -> Result<Session, StoreError> {
        self.update_visible(user, session, |s| s.view.status = SessionStatus::Closed)
    }

    async fn delete_session(
        &self,
        user: &UserId,
        session: &SessionId,
        budget: Option<usize>,
    ) -> Result<DeleteProgress, StoreError> {
        let mut st = self.lock();
        let key = (user.clone(), session.clone());
        let marked = st.sessions.get_mut(&key).map(|i| i.deleting = true).is_some();
        let part = st.partitions.entry(key.clone()).or_default();
        let (mut deleted, mut batches) = (0, 0);
        while !part.is_empty() {
            if budget.is_some_and(|b| batches >= b) {
                return Ok(DeleteProgress::Partial { items_deleted: deleted });
            }
            let page: Vec<String> = part.keys().take(DELETE_BATCH).cloned().collect();
            for k in &page {
                part.remove(k);
            }
            deleted += page.len();
            batches += 1;
        }
        st.partitions.remove(&key);
        match (marked, deleted) {
            (false, 0) => Err(StoreError::NotFound),
            (false, _) => Ok(DeleteProgress::Done { items_deleted: deleted }),
            (true, _) => {
                st.sessions.remove(&key);
                Ok(DeleteProgress::Done { items_deleted: deleted + 1 })
            }
        }
    }
}

impl MemoryStore {
    /// Changes a session no delete has begun on; `NotFound` otherwise.
    fn update_visible(
        &self,
        user: &UserId,
        sid: &SessionId,
        change: impl FnOnce(&mut Session),
    ) -> Result<Session, StoreError> {
        let mut st = self.lock();
        let item = st.sessions.get_mut(&(user.clone(), sid.clone())).filter(|i| !i.deleting);
        let item = item.ok_or(StoreError::NotFound)?;
        change(&mut item.session);
        Ok(item.session.clone())
    }
}

#[async_trait::async_trait]
impl SessionLog for MemoryStore {
    async fn run_claim(&self, user: &UserId, run: &RunId) -> Result<Option<RunClaim>, StoreError> {
        Ok(self.lock().claims.get(&(user.clone(), run.clone())).cloned())
    }

    async fn turn_by_run(
        &self,
        user: &UserId,
        session: &SessionId,
        run: &RunId,
    ) -> Result<Option<TurnRecord>, StoreError> {
        let st = self.lock();
        let part = st.partitions.get(&(user.clone(), session.clone()));
        Ok(match part.and_then(|p| p.get(&keys::turn_sk(run))) {
            Some(Entry::Turn(t)) => Some(t.clone()),
            _ => None,
        })
    }

    async fn start_turn(&self, user: &UserId, session: &SessionId, start: &TurnStart) -> Result<(), StoreError> {
        let mut st = self.lock();
        let (turn, run, message) = (&start.turn.turn_id, &start.turn.run_id, &start.user_message);
        let claim = st.claims.get(&(user.clone(), run.clone()));
        let claim_free = claim.is_none_or(|c| c.turn_id == *turn && c.session_id == *session);
        if start.claims_run() && (st.has(user, session, &keys::turn_sk(run)) || !claim_free) {
            return Err(StoreError::DuplicateRun);
        }
        // Without a claim the count may be behind (`dynamo::plain`); with one
        // it is caught up with the log first (`count_caught_up`).
        let before_stored = st.has(user, session, &keys::message_sk(message.seq.saturating_sub(1)));
        let counted = st.item(user, session).is_some_and(|i| match start.claims_run() {
            true => i.session.view.message_count + 1 == message.seq || before_stored,
            false => i.session.view.message_count < message.seq,
        });
        if !st.writable(user, session, turn) || !counted || !st.slots_free(user, session, std::slice::from_ref(message))
        {
            return Err(st.lost_or_gone(user, session));
        }
        if start.claims_run() {
            let claim = RunClaim { session_id: session.clone(), turn_id: turn.clone() };
            st.claims.insert((user.clone(), run.clone()), claim);
            st.partition(user, session).insert(keys::turn_sk(run), Entry::Turn(start.turn.clone()));
        }
        st.put_messages(user, session, std::slice::from_ref(message));
        let s = &mut st.sessions.get_mut(&(user.clone(), session.clone())).expect("writable").session;
        s.view.message_count = message.seq;
        s.view.context_type = start.context_type;
        s.view.entity_id = start.entity_id.clone();
        s.view.focus = start.focus.clone();
        if s.view.title.is_none() {
            s.view.title = start.title.clone();
        }
        Ok(())
    }

    async fn append_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: &TurnId,
        messages: &[StoredMessage],
    ) -> Result<(), StoreError> {
        // In writes of 9, as DynamoDB's transactions: earlier ones stay.
        for chunk in messages.chunks(9) {
            let mut st = self.lock();
            if !st.writable(user, session, turn) || !st.slots_free(user, session, chunk) {
                return Err(st.lost_or_gone(user, session));
            }
            st.put_messages(user, session, chunk);
            st.sessions.get_mut(&(user.clone(), session.clone())).expect("writable").session.view.message_count +=
                chunk.len() as u64;
        }
        Ok(())
    }

    async fn finish_turn(&self, user: &UserId, session: &SessionId, end: &TurnEnd) -> Result<(), StoreError> {
        let (earlier, closing) = end.messages.split_at(end.messages.len().saturating_sub(8));
        if !earlier.is_empty() {
            self.append_messages(user, session, &end.turn_id, earlier).await?;
        }
        let mut st = self.lock();
        let recorded = !end.claims_run() || st.turn_matches(user, session, &end.run_id, &end.turn_id);
        if !recorded || !st.writable(user, session, &end.turn_id) || !st.slots_free(user, session, closing) {
            return Err(st.lost_or_gone(user, session));
        }
        st.finish(user, session, end, closing);
        Ok(())
    }

    async fn recent_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        Ok(self.lock().messages(user, session, 0..=u64::MAX, true, limit.clamp(1, 1000)))
    }

    async fn messages_page(
        &self,
        user: &UserId,
        session: &SessionId,
        from: MessagesFrom,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let limit = limit.clamp(1, 200);
        let st = self.lock();
        Ok(match from {
            MessagesFrom::Before(None) => st.messages(user, session, 0..=u64::MAX, true, limit),
            MessagesFrom::Before(Some(0)) => vec![],
            MessagesFrom::Before(Some(b)) => st.messages(user, session, 0..=b - 1, true, limit),
            MessagesFrom::After(a) => st.messages(user, session, a.saturating_add(1)..=u64::MAX, false, limit),
        })
    }
}

#[async_trait::async_trait]
impl Leases for MemoryStore {
    async fn acquire_lease(&self, user: &UserId, session: &SessionId, lease: &Lease) -> Result<Session, StoreError> {
        let mut st = self.lock();
        let item = st.sessions.get_mut(&(user.clone(), session.clone())).filter(|i| !i.deleting);
        let item = item.ok_or(StoreError::NotFound)?;
        if item.session.view.status == SessionStatus::Closed {
            return Err(StoreError::Closed);
        }
        let now = crate::now_ms();
        if matches!(&item.session.lease, Some((t, until)) if *until >= now && *t != lease.turn_id) {
            return Err(StoreError::Busy);
        }
        item.session.lease = Some((lease.turn_id.clone(), lease.until_ms));
        // As on DynamoDB: a session's activity moves when a turn takes it.
        item.session.view.last_activity_at = now;
        Ok(item.session.clone())
    }

    async fn renew_lease(&self, user: &UserId, session: &SessionId, lease: &Lease) -> Result<(), StoreError> {
        let mut st = self.lock();
        if !st.writable(user, session, &lease.turn_id) {
            return Err(StoreError::LeaseLost);
        }
        let item = st.sessions.get_mut(&(user.clone(), session.clone())).expect("writable");
        item.session.lease = Some((lease.turn_id.clone(), lease.until_ms));
        Ok(())
    }

    async fn release_lease(&self, user: &UserId, session: &SessionId, turn: &TurnId) -> Result<(), StoreError> {
        let mut st = self.lock();
        if let Some(item) = st.sessions.get_mut(&(user.clone(), session.clone())) {
            if item.session.lease.as_ref().is_some_and(|(t, _)| t == turn) {
                item.session.lease = None;
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl StopSignals for MemoryStore {
    async fn request_stop(
        &self,
        user: &UserId,
        session: &SessionId,
        run: Option<&RunId>,
    ) -> Result<Option<TurnId>, StoreError> {
        let mut st = self.lock();
        let item = st.visible(user, session).ok_or(StoreError::NotFound)?;
        let Some((turn, until)) = item.session.lease.clone() else { return Ok(None) };
        // A turn under its own id has no turn record (`TurnStart::claims_run`).
        let other_run = |r: &RunId| r.as_str() != turn.as_str() && !st.turn_matches(user, session, r, &turn);
        if until < crate::now_ms() || run.is_some_and(other_run) {
            return Ok(None);
        }
        st.sessions.get_mut(&(user.clone(), session.clone())).expect("visible").stop_turn = Some(turn.clone());
        Ok(Some(turn))
    }

    async fn stop_requested(&self, user: &UserId, session: &SessionId, turn: &TurnId) -> Result<bool, StoreError> {
        Ok(self.lock().item(user, session).and_then(|i| i.stop_turn.as_ref()) == Some(turn))
    }
}

#[async_trait::async_trait]
impl ToolOutputs for MemoryStore {
    async fn put_tool_output(
        &self,
        user: &UserId,
        session: &SessionId,
        call_id: &str,
        content: &str,
    ) -> Result<(), StoreError> {
        let mut st = self.lock();
        if st.visible(user, session).is_none() {
            return Err(StoreError::NotFound);
        }
        let prefix = keys::tool_output_prefix(call_id);
        let chunks: Vec<&str> = utf8_chunks(content, CHUNK_BYTES).collect();
        let part = st.partition(user, session);
        for (i, chunk) in chunks.iter().enumerate() {
            let entry = Entry::Output { data: chunk.to_string(), chunks: (i == 0).then_some(chunks.len()) };
            part.insert(format!("{prefix}{i:04}"), entry);
        }
        Ok(())
    }

    async fn tool_output(
        &self,
        user: &UserId,
        session: &SessionId,
        call_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let st = self.lock();
        let Some(part) = st.partitions.get(&(user.clone(), session.clone())) else { return Ok(None) };
        let prefix = keys::tool_output_prefix(call_id);
        let mut found = part.range(prefix.clone()..).take_while(|(k, _)| k.starts_with(&prefix)).peekable();
        let expected = match found.peek() {
            None => return Ok(None),
            Some((_, Entry::Output { chunks, .. })) => chunks.unwrap_or(usize::MAX),
            Some(_) => usize::MAX,
        };
        let data = found.take(expected).filter_map(|(_, e)| match e {
            Entry::Output { data, .. } => Some(data.as_str()),
            _ => None,
        });
        Ok(Some(data.collect()))
    }
}

/// The sessions index's sort key: most recently active first when descending.
fn gsi_sk(view: &SessionView) -> String {
    keys::sessions_gsi_sk(view.last_activity_at, &view.id)
}

/// A cursor names its user (as DynamoDB's names the index partition), so
/// another user's is refused.
fn encode_cursor(user: &UserId, sk: &str) -> String {
    let json = serde_json::json!({ "gsi1pk": keys::sessions_gsi_pk(user), "gsi1sk": sk });
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json.to_string())
}

fn decode_cursor(user: &UserId, cursor: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    (json["gsi1pk"].as_str()? == keys::sessions_gsi_pk(user)).then(|| json["gsi1sk"].as_str().map(String::from))?
}
