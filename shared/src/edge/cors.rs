//! CORS for local stacks (`CORS_ALLOW_ORIGIN`): `tower-http`'s [`CorsLayer`]
//! for that one origin. On AWS the setting stays unset: the function URL's
//! `Cors` adds these headers itself, and a second `Access-Control-Allow-Origin`
//! makes a browser refuse the answer.
//!
//! A preflight (`OPTIONS`) is answered 204 with no body, configured or not:
//! on AWS the function URL answers it before us, so one that reaches us comes
//! from a local stack and must not be refused.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::{header, HeaderValue, Method, StatusCode};
use std::time::Duration;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// What a browser page may send: the bearer token, a JSON body, and the
/// `Last-Event-ID` of a resumed stream. Kept equal to `infra/template.yaml`'s
/// function URL `Cors` (the one that applies on AWS).
pub const ALLOW_HEADERS: [header::HeaderName; 3] =
    [header::AUTHORIZATION, header::CONTENT_TYPE, header::HeaderName::from_static("last-event-id")];
/// What a page may read: the AI SDK checks this header on `POST /chat`.
pub const EXPOSE_HEADERS: [header::HeaderName; 1] = [header::HeaderName::from_static("x-vercel-ai-ui-message-stream")];
pub const ALLOW_METHODS: [Method; 5] = [Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE];

/// The layer for `allow_origin`, or none when it is unset (or not header text).
pub fn layer(allow_origin: Option<&str>) -> Option<CorsLayer> {
    let origin = HeaderValue::from_str(allow_origin?).ok()?;
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::exact(origin))
            .allow_headers(ALLOW_HEADERS)
            .allow_methods(ALLOW_METHODS)
            .expose_headers(EXPOSE_HEADERS)
            .max_age(Duration::from_secs(600)),
    )
}

/// Inside the CORS layer: a preflight it did not answer (CORS unset) is 204.
pub async fn answer_preflight(req: Request, next: Next) -> Response {
    if req.method() == Method::OPTIONS {
        return super::no_content();
    }
    next.run(req).await
}

/// Outside the CORS layer: its preflight answers (200) are 204 like ours.
pub async fn preflight_is_no_content(req: Request, next: Next) -> Response {
    let preflight = req.method() == Method::OPTIONS;
    let mut resp = next.run(req).await;
    if preflight && resp.status() == StatusCode::OK {
        *resp.status_mut() = StatusCode::NO_CONTENT;
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tower::ServiceExt;

    fn router(origin: Option<&str>) -> axum::Router {
        super::super::finish(axum::Router::new().route("/sessions", get(|| async { "ok" })), origin)
    }

    fn preflight() -> http::Request<axum::body::Body> {
        http::Request::builder()
            .method(Method::OPTIONS)
            .uri("/sessions")
            .header("origin", "http://app.example")
            .header("access-control-request-method", "GET")
            .header("access-control-request-headers", "authorization,last-event-id")
            .body(axum::body::Body::empty())
            .unwrap()
    }

    #[tokio::test]
    async fn configured_a_preflight_is_204_with_the_origin_and_headers() {
        let resp = router(Some("http://app.example")).oneshot(preflight()).await.unwrap();
        assert_eq!(resp.status(), StatusCode::NO_CONTENT);
        let h = resp.headers();
        assert_eq!(h["access-control-allow-origin"], "http://app.example");
        assert!(h["access-control-allow-headers"].to_str().unwrap().contains("last-event-id"));
        assert!(h["access-control-allow-methods"].to_str().unwrap().contains("PATCH"));
        assert_eq!(h["access-control-max-age"], "600");
    }

    #[tokio::test]
    async fn unconfigured_a_preflight_is_204_and_nothing_is_added() {
        let resp = router(None).oneshot(preflight()).await.unwrap();
        assert_eq!(resp.status(), StatusCode::NO_CONTENT);
        assert!(resp.headers().keys().all(|k| !k.as_str().starts_with("access-control-")));
    }

    #[tokio::test]
    async fn configured_an_answer_exposes_the_ai_sdk_header() {
        let req = http::Request::get("/sessions").body(axum::body::Body::empty()).unwrap();
        let resp = router(Some("http://app.example")).oneshot(req).await.unwrap();
        assert_eq!(resp.headers()["access-control-allow-origin"], "http://app.example");
        assert_eq!(resp.headers()["access-control-expose-headers"], "x-vercel-ai-ui-message-stream");
    }
}
