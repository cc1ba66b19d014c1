//! [`EventStore`] in memory: the twin the service and tool tests run on.

use super::{EventStore, Settings, WriteError};
use crate::calendar::model::CalendarEvent;
use crate::ids::{EventId, UserId};
use crate::store::StoreError;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

#[derive(Default)]
pub struct MemoryEventStore {
    events: Mutex<BTreeMap<(UserId, EventId), CalendarEvent>>,
    settings: Mutex<HashMap<UserId, Settings>>,
}

impl MemoryEventStore {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait::async_trait]
impl EventStore for MemoryEventStore {
    async fn get(&self, user: &UserId, id: &EventId) -> Result<Option<CalendarEvent>, StoreError> {
        Ok(self.events.lock().unwrap().get(&(user.clone(), id.clone())).cloned())
    }

    async fn list(&self, user: &UserId) -> Result<Vec<CalendarEvent>, StoreError> {
        let events = self.events.lock().unwrap();
        Ok(events.iter().filter(|((u, _), _)| u == user).map(|(_, e)| e.clone()).collect())
    }

    async fn put(&self, user: &UserId, event: &CalendarEvent, expected: Option<u64>) -> Result<(), WriteError> {
        let mut events = self.events.lock().unwrap();
        let key = (user.clone(), event.id.clone());
        let current = events.get(&key).map(|e| e.version);
        if current != expected {
            return Err(WriteError::Conflict { current });
        }
        events.insert(key, event.clone());
        Ok(())
    }

    async fn delete(&self, user: &UserId, id: &EventId, expected: u64) -> Result<(), WriteError> {
        let mut events = self.events.lock().unwrap();
        let key = (user.clone(), id.clone());
        let current = events.get(&key).map(|e| e.version);
        if current != Some(expected) {
            return Err(WriteError::Conflict { current });
        }
        events.remove(&key);
        Ok(())
    }

    async fn settings(&self, user: &UserId) -> Result<Settings, StoreError> {
        Ok(self.settings.lock().unwrap().get(user).cloned().unwrap_or_default())
    }

    async fn save_settings(&self, user: &UserId, settings: &Settings) -> Result<(), StoreError> {
        self.settings.lock().unwrap().insert(user.clone(), settings.clone());
        Ok(())
    }
}
