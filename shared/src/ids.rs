//! Newtypes for every identifier, so a session id can never be passed where a
//! user id is expected. Ids that come from outside are validated on parse: they
//! end up inside DynamoDB keys, so the characters we use as separators (`#`) and
//! anything unprintable are refused.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why an id from outside was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("invalid {kind}: {reason}")]
pub struct InvalidId {
    pub kind: &'static str,
    pub reason: &'static str,
}

fn check(kind: &'static str, s: &str, max: usize) -> Result<(), InvalidId> {
    if s.is_empty() {
        return Err(InvalidId { kind, reason: "empty" });
    }
    if s.len() > max {
        return Err(InvalidId { kind, reason: "too long" });
    }
    if !s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'|' | b'@')) {
        return Err(InvalidId { kind, reason: "only letters, digits and - _ . : | @ are allowed" });
    }
    Ok(())
}

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident, $kind:literal, $max:literal) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validates an id that came from outside.
            pub fn parse(s: impl Into<String>) -> Result<Self, InvalidId> {
                let s = s.into();
                check($kind, &s, $max)?;
                Ok(Self(s))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(s: String) -> Result<Self, InvalidId> {
                Self::parse(s)
            }
        }
        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// The JWT `sub`: every key in the store is scoped to it.
    UserId, "user id", 128
);
id_type!(
    /// A chat session (UUID v7 when we mint it, so ids sort by creation time).
    SessionId, "session id", 64
);
id_type!(
    /// One chat turn (one POST to the stream function).
    TurnId, "turn id", 64
);
id_type!(
    /// One stored message.
    MessageId, "message id", 64
);
id_type!(
    /// An ontology entity (project, document, task, ...).
    EntityId, "entity id", 64
);
id_type!(
    /// A project: the unit of ownership and versioning of the ontology.
    ProjectId, "project id", 64
);
id_type!(
    /// The client's `stream_run_id`: the idempotency key of a turn.
    RunId, "stream_run_id", 128
);

id_type!(
    /// A calendar event (a single event or a whole series).
    EventId, "event id", 64
);

impl EventId {
    pub fn new() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}
impl Default for EventId {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionId {
    pub fn new() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}
impl TurnId {
    pub fn new() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}
impl MessageId {
    pub fn new() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}
impl EntityId {
    pub fn new() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}
impl ProjectId {
    pub fn new() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }
}
impl Default for EntityId {
    fn default() -> Self {
        Self::new()
    }
}
impl Default for ProjectId {
    fn default() -> Self {
        Self::new()
    }
}
impl Default for SessionId {
    fn default() -> Self {
        Self::new()
    }
}
impl Default for TurnId {
    fn default() -> Self {
        Self::new()
    }
}
impl Default for MessageId {
    fn default() -> Self {
        Self::new()
    }
}

/// The ids the entities API (and the web client's generated types) expose are
/// plain strings in its OpenAPI document; all of these are checked at 64.
macro_rules! string_schema {
    ($($t:ty),*) => {$(
        impl utoipa::PartialSchema for $t {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .pattern(Some("^[A-Za-z0-9._:|@-]{1,64}$"))
                    .into()
            }
        }
        impl utoipa::ToSchema for $t {}
    )*};
}
string_schema!(EntityId, ProjectId, SessionId, TurnId, EventId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_refuse_key_separators_and_empty() {
        assert!(SessionId::parse("abc-123").is_ok());
        assert_eq!(SessionId::parse("").unwrap_err().reason, "empty");
        assert!(SessionId::parse("a#b").is_err());
        assert!(UserId::parse("x".repeat(129)).is_err());
        let v: Result<SessionId, _> = serde_json::from_str("\"a b\"");
        assert!(v.is_err());
    }
}
