//! What every HTTP edge shares (the stream, sessions, entities and prewarm
//! routes): the response body type, JSON answers and errors, the one
//! query-string decoder, the authenticator built from config, and CORS for
//! local stacks. A leaf: it knows no route and no domain.

use crate::auth::Authenticator;
use crate::config::AuthConfig;
use crate::sse::SseBody;
use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body::{Body, Frame};
use serde::Serialize;
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// A response body: a whole JSON document, or a live event stream.
pub enum ResponseBody {
    Full(Option<Bytes>),
    Sse(SseBody),
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ResponseBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Sse(s) => Pin::new(s).poll_frame(cx),
        }
    }
}

/// The JSON body of every error answered over plain HTTP.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Machine-readable, stable.
    pub code: String,
    pub message: String,
}

pub fn json_error(status: StatusCode, code: &str, message: impl Into<String>) -> Response<ResponseBody> {
    let body = ErrorBody { error: ErrorDetail { code: code.to_string(), message: message.into() } };
    json(status, &body)
}

pub fn json<T: Serialize>(status: StatusCode, body: &T) -> Response<ResponseBody> {
    let bytes = serde_json::to_vec(body).expect("response bodies serialize");
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(ResponseBody::Full(Some(Bytes::from(bytes))))
        .expect("static response parts are valid")
}

/// An empty answer (204 No Content).
pub fn no_content() -> Response<ResponseBody> {
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(ResponseBody::Full(None))
        .expect("static response parts are valid")
}

/// Runs one request's handler. A panic becomes a logged, plain `500
/// internal_error`: left to the runtime, it is reported as the invocation's
/// error and the function URL (and `cargo lambda watch`) hands the panic's
/// text — file, line, values — to the client.
pub async fn or_internal_error(
    handler: impl std::future::Future<Output = Response<ResponseBody>>,
) -> Response<ResponseBody> {
    use futures::FutureExt;
    // Boxed: a route's future is large, and on a thread's stack (a test's
    // 2 MB, debug build) the wrapper around it overflowed.
    match std::panic::AssertUnwindSafe(Box::pin(handler)).catch_unwind().await {
        Ok(resp) => resp,
        Err(_) => {
            tracing::error!("the request's handler panicked");
            json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "the request failed inside the function")
        }
    }
}

/// What a browser page may send: the bearer token, a JSON body, and the
/// `Last-Event-ID` of a resumed stream. Kept equal to `infra/template.yaml`'s
/// function URL `Cors` (the one that applies on AWS).
pub const CORS_ALLOW_HEADERS: &str = "authorization, content-type, last-event-id";
/// What a page may read: the AI SDK checks this header on `POST /chat`.
pub const CORS_EXPOSE_HEADERS: &str = "x-vercel-ai-ui-message-stream";
pub const CORS_ALLOW_METHODS: &str = "GET, POST, PATCH, DELETE";

/// The answer with CORS headers for `allow_origin` (config
/// `CORS_ALLOW_ORIGIN`), or unchanged without one. Local stacks only: on AWS
/// the function URL's `Cors` adds these headers itself, and returning them
/// too would duplicate them (a browser refuses an answer with two
/// `Access-Control-Allow-Origin` values), so there the setting stays unset.
pub fn with_cors(allow_origin: Option<&str>, mut resp: Response<ResponseBody>) -> Response<ResponseBody> {
    let Some(origin) = allow_origin.and_then(|o| header::HeaderValue::from_str(o).ok()) else { return resp };
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, header::HeaderValue::from_static(CORS_ALLOW_HEADERS));
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, header::HeaderValue::from_static(CORS_ALLOW_METHODS));
    h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, header::HeaderValue::from_static(CORS_EXPOSE_HEADERS));
    h.insert(header::ACCESS_CONTROL_MAX_AGE, header::HeaderValue::from_static("600"));
    resp
}

/// A query string's parameters, percent-decoded (`+` is a space); a later
/// repeat of a key wins; invalid UTF-8 becomes U+FFFD.
pub fn query_params(query: Option<&str>) -> HashMap<String, String> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // Two hex digits exactly (`from_str_radix` alone would take `+1`).
        let hex = b
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (c, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The bearer-token authenticator every function uses, with its one HTTP
/// client (for JWKS), built once per container.
pub fn authenticator(cfg: &AuthConfig) -> Authenticator {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a plain reqwest client builds");
    Authenticator::new(cfg.clone(), http)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_decoded() {
        let q = query_params(Some("a=x%20y+z&b=%C3%A9t%C3%A9&c=%2&d&e%5B%5D=1&a=last"));
        assert_eq!(q["a"], "last");
        assert_eq!(q["b"], "été");
        assert_eq!(q["c"], "%2", "an incomplete escape is kept as it is");
        assert_eq!(q["d"], "");
        assert_eq!(q["e[]"], "1", "keys are decoded too");
        assert!(query_params(None).is_empty());
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%-1%+1"), "%-1% 1", "a sign is not a hex digit");
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_a_plain_500_without_the_panic_text() {
        let resp = or_internal_error(async {
            let after: u64 = std::hint::black_box(u64::MAX);
            if after == u64::MAX {
                panic!("attempt to add with overflow at secret/path.rs:90");
            }
            no_content()
        })
        .await;
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let ResponseBody::Full(Some(body)) = resp.into_body() else { panic!("a JSON body") };
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("internal_error") && !text.contains("overflow") && !text.contains("secret"), "{text}");
    }
}
