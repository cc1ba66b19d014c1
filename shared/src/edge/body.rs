//! Request bodies, read at the edge by one extractor, [`JsonBody`], whose
//! refusals are JSON error answers like every other (no route reads a body
//! another way: axum's own `Bytes` and `Json` answer in plain text, and
//! `Bytes` stops at 2 MiB).
//!
//! - At most [`MAX_BODY_BYTES`]: what a function URL can pass on. More is
//!   `413 too_large`, before anything is parsed.
//! - A body that is there is a JSON object: an array, a string, a number,
//!   `true`/`false` or `null` is `400 invalid_json`, for every route. serde's
//!   derived structs also read a JSON array by position (`[true]` as
//!   `{"approved": true}`), so no route's parser may see one.
//! - An empty body (or only JSON whitespace) passes as empty: the route's
//!   parser decides (a stop's body is optional; every other body is required
//!   and its parser answers `invalid_json`).
//!
//! The body arrives whole (the Lambda runtime hands the function the full
//! request) and is taken as the one buffer it comes in, not copied.

use super::ApiError;
use axum::extract::{FromRequest, Request};
use bytes::Bytes;
use http::StatusCode;

/// The largest body any function reads: 6 MiB, 6,291,456 bytes.
///
/// Lambda refuses an invocation whose payload is not "smaller than 6291456
/// bytes" (its `RequestEntityTooLargeException`; "6 MB" in its quotas, for
/// the buffered and the streamed invoke alike), and a function URL's body
/// travels inside that payload, JSON-escaped or base64-encoded beside the
/// headers, so no body Lambda passes on is this long: the limit refuses
/// nothing Lambda accepted. It bounds what servers without Lambda's limit
/// (`cargo lambda watch`, the bench's local adapter) can make a function read.
pub const MAX_BODY_BYTES: usize = 6 * 1024 * 1024;

/// The request's body: empty, or (by its first byte) a JSON object, at most
/// [`MAX_BODY_BYTES`]. Read after the bearer token is checked (axum runs the
/// body's extractor last).
#[derive(Debug, Clone)]
pub struct JsonBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        JsonBody::read(req.into_body(), MAX_BODY_BYTES).await
    }
}

impl JsonBody {
    /// `body`, read whole up to `limit` bytes, if it is empty or a JSON object.
    pub async fn read(body: axum::body::Body, limit: usize) -> Result<JsonBody, ApiError> {
        let bytes = read(body, limit).await?;
        object_or_empty(&bytes)?;
        Ok(JsonBody(bytes))
    }
}

/// The whole body, up to `limit` bytes (more: `413 too_large`). The body of
/// a Lambda request is one buffer: it is taken as is, not copied.
pub async fn read(body: axum::body::Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let too_long = std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
        if too_long {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", format!("the request body is over {limit} bytes"))
        } else {
            ApiError::bad_request("invalid_json", format!("the request body could not be read: {e}"))
        }
    })
}

/// JSON's whitespace (RFC 8259 §2), which may come before the value.
fn is_json_space(b: &u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Passes a body that is empty or starts a JSON object (the route's parser
/// reads the rest); anything else is `400 invalid_json`, saying which JSON
/// type it is, or why it is no JSON at all.
pub fn object_or_empty(body: &[u8]) -> Result<(), ApiError> {
    let kind = match body.iter().find(|b| !is_json_space(b)) {
        None | Some(b'{') => return Ok(()),
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        Some(_) => "a number",
    };
    let message = match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
        Ok(_) => format!("the body must be a JSON object, not {kind}"),
        Err(e) => format!("the body is not a JSON object: {e}"),
    };
    Err(ApiError::bad_request("invalid_json", message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> Option<String> {
        object_or_empty(body.as_bytes()).err().map(|e| format!("{} {}", e.status.as_u16(), e.code))
    }

    #[test]
    fn only_an_object_or_nothing_passes() {
        for ok in ["", "  \r\n\t", "{}", " \n{\"a\": [1]}", "{not json either"] {
            assert_eq!(code(ok), None, "{ok:?}: the route's parser judges it");
        }
        for (bad, kind) in [
            ("[]", "an array"),
            ("[true]", "an array"),
            (" [[\"create_task\"]]", "an array"),
            ("\"hi\"", "a string"),
            ("1", "a number"),
            ("-0.5e3", "a number"),
            ("true", "a boolean"),
            ("null", "null"),
        ] {
            let e = object_or_empty(bad.as_bytes()).unwrap_err();
            assert_eq!((e.status, e.code.as_str()), (StatusCode::BAD_REQUEST, "invalid_json"), "{bad}");
            assert!(e.message.ends_with(kind), "{bad}: {}", e.message);
        }
        // Not JSON at all (a form feed is not JSON whitespace): why, from the parser.
        for bad in ["nul", "\u{c}{}", "[1,", "'x'"] {
            let e = object_or_empty(bad.as_bytes()).unwrap_err();
            assert!(e.message.starts_with("the body is not a JSON object: "), "{bad}: {}", e.message);
        }
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_413_too_large_and_one_at_it_is_read_without_a_copy() {
        let at = Bytes::from(vec![b' '; 1024]);
        let read_back = read(axum::body::Body::from(at.clone()), 1024).await.unwrap();
        assert_eq!(read_back.as_ptr(), at.as_ptr(), "the same buffer");
        let e = read(axum::body::Body::from(vec![b' '; 1025]), 1024).await.unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (StatusCode::PAYLOAD_TOO_LARGE, "too_large"));
        assert_eq!(MAX_BODY_BYTES, 6_291_456);
    }
}
