//! The extractors every router shares: the authenticated [`User`], the
//! query string ([`Params`], decoded once, by `serde_urlencoded`), path
//! segments ([`Segments`], percent-decoded by axum), and the invocation's
//! [`Deadline`]. Their refusals are JSON error answers.

use super::ApiError;
use crate::auth::Authenticator;
use crate::ids::UserId;
use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use http::request::Parts;
use std::collections::HashMap;
use std::time::Duration;

/// A function's state that can check bearer tokens.
pub trait HasAuth {
    fn authenticator(&self) -> &Authenticator;
}

/// The user the request's bearer token names; refused (401, or 503 when the
/// token keys cannot be fetched) before any body is read.
pub struct User(pub UserId);

impl<S: HasAuth + Send + Sync> FromRequestParts<S> for User {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Ok(User(state.authenticator().authenticate(&parts.headers).await?))
    }
}

/// The query string's parameters: percent-decoded, `+` a space, a later
/// repeat of a key wins, invalid UTF-8 as U+FFFD.
pub struct Params(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let pairs = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri).map(|q| q.0);
        Ok(Params(pairs.unwrap_or_default().into_iter().collect()))
    }
}

impl Params {
    pub fn get(&self, key: &str) -> Option<&String> {
        self.0.get(key)
    }

    /// A whole number up to `max`; `Err` holds the message of a 400.
    pub fn number(&self, key: &str, max: u64) -> Result<Option<u64>, String> {
        match self.0.get(key) {
            None => Ok(None),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n <= max => Ok(Some(n)),
                _ => Err(format!("`{key}` must be a whole number up to {max}")),
            },
        }
    }
}

/// The path's parameters, each percent-decoded into its own segment (an
/// escaped `/` stays in its segment), in the template's order.
pub struct Segments(pub Vec<String>);

impl<S: Send + Sync> FromRequestParts<S> for Segments {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        use axum::extract::RawPathParams;
        let raw = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request("invalid_id", e.body_text()))?;
        // Escapes that decode to bytes that are not UTF-8 name no id: `invalid_id`.
        Ok(Segments(raw.iter().map(|(_, v)| v.to_string()).collect()))
    }
}

/// The `Last-Event-ID` header, trimmed; a value that is not text reads as `x`
/// (no frame id).
pub struct LastEventId(pub String);

impl<S: Send + Sync> OptionalFromRequestParts<S> for LastEventId {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Self::Rejection> {
        let value = parts.headers.get("last-event-id").map(|v| v.to_str().unwrap_or("x").trim().to_string());
        Ok(value.map(LastEventId))
    }
}

/// When this invocation ends ([`super::deadline::of_request`]); the fallback
/// comes from the state.
pub struct Deadline(pub tokio::time::Instant);

/// A function's state that knows how long an invocation may run when the
/// runtime does not say.
pub trait HasTimeout {
    fn fallback_timeout(&self) -> Duration;
}

impl<S: HasTimeout + Send + Sync> FromRequestParts<S> for Deadline {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Deadline(super::deadline::of_request(&parts.extensions, state.fallback_timeout())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn params(uri: &str) -> HashMap<String, String> {
        let (mut parts, ()) = http::Request::get(uri).body(()).unwrap().into_parts();
        Params::from_request_parts(&mut parts, &()).await.unwrap().0
    }

    #[tokio::test]
    async fn query_strings_are_decoded_once_by_the_extractor() {
        let q = params("/x?a=x%20y+z&b=%C3%A9t%C3%A9&d&e%5B%5D=1&a=last").await;
        assert_eq!(q["a"], "last", "a later repeat wins");
        assert_eq!(q["b"], "été");
        assert_eq!(q["d"], "");
        assert_eq!(q["e[]"], "1", "keys are decoded too");
        assert!(params("/x").await.is_empty());
        assert_eq!(params("/x?c=%FF").await["c"], "\u{fffd}");
    }

    #[tokio::test]
    async fn numbers_are_whole_and_bounded() {
        let p = Params(params("/x?limit=7&big=101&neg=-1").await);
        assert_eq!(p.number("limit", 100), Ok(Some(7)));
        assert_eq!(p.number("absent", 100), Ok(None));
        assert!(p.number("big", 100).unwrap_err().contains("up to 100"));
        assert!(p.number("neg", 100).is_err());
    }
}
