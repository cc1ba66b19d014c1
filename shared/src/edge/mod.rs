//! The HTTP edge: every function's routes as an `axum::Router`, served by
//! `lambda_http` (streamed for the stream function, buffered for the others).
//!
//! The contract:
//! - Routes and their OpenAPI operations are declared once, together
//!   (`utoipa-axum`'s [`OpenApiRouter`]); [`openapi`] assembles the documents.
//! - Every refusal is `{"error": {"code", "message"}}` with the status of its
//!   error type's one [`IntoResponse`](axum::response::IntoResponse)
//!   ([`error`]); a path the router knows answered with a method it does not
//!   take is 405 with `Allow`.
//! - Path segments and query strings are decoded by the extractors
//!   ([`extract`]); the bearer token is checked by the [`extract::User`]
//!   extractor, before any body is read. Bodies are read by one extractor,
//!   [`body::JsonBody`]: up to 6 MiB (what a function URL passes on), and a
//!   JSON object or nothing; anything else is refused with the JSON error.
//! - A handler's panic is a plain `500 internal_error` ([`guard`]); CORS headers
//!   are added only when `CORS_ALLOW_ORIGIN` is set ([`cors`]).
//! - Nothing below the edge imports it: features hand it values and errors.

pub mod approvals;
pub mod body;
pub mod chat;
pub mod cors;
pub mod deadline;
pub mod entities;
pub mod entities_doc;
pub mod error;
pub mod events;
pub mod extract;
pub mod guard;
pub mod openapi;
pub mod prewarm;
pub mod sessions;
pub mod settings;
pub mod stream;
pub mod suggestion;
pub mod usage;

use crate::sse::SseBody;
use axum::response::{IntoResponse, Response};
use http::{header, StatusCode};
use serde::Serialize;

pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use utoipa_axum::router::OpenApiRouter;

/// The body of every answer: a whole JSON document or a live event stream.
pub type ResponseBody = axum::body::Body;

/// A JSON answer with `status`.
pub fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    let bytes = serde_json::to_vec(body).expect("response bodies serialize");
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

/// A refusal: `{"error": {"code", "message"}}` with `status`.
pub fn json_error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    ApiError::new(status, code, message).into_response()
}

/// An empty answer (204 No Content).
pub fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// The head of a streamed answer; `ui`: the AI SDK's UI message stream
/// (its header tells the client which protocol it reads).
pub fn sse_response(body: SseBody, ui: bool) -> Response {
    let mut head = http::Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no");
    if ui {
        head = head.header(crate::chat::ui_stream::HEADER.0, crate::chat::ui_stream::HEADER.1);
    }
    head.body(ResponseBody::new(body)).expect("static response parts are valid")
}

/// What every function's router gets around its routes, outermost first:
/// preflights answered 204, CORS for `cors_allow_origin`, the panic guard,
/// and the `/lambda-url/<name>` prefix `cargo lambda watch` may leave on paths.
pub fn finish(router: axum::Router, cors_allow_origin: Option<&str>) -> axum::Router {
    // Around the router, not on its routes: the path is rewritten before routing.
    let service = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn(cors::preflight_is_no_content))
        .option_layer(cors::layer(cors_allow_origin))
        .layer(axum::middleware::from_fn(cors::answer_preflight))
        .layer(axum::middleware::map_request(strip_watch_prefix))
        .layer(guard::layer())
        .layer(axum::middleware::map_response(method_not_allowed))
        .service(router);
    axum::Router::new().fallback_service(service)
}

/// The router's 405 (a known path, another method) as a JSON refusal whose
/// `Allow` lists the path's methods in the order its routes declare them (the
/// implicit `HEAD` of a `GET` is not one a client is told about).
async fn method_not_allowed(resp: Response) -> Response {
    let routers_own =
        resp.status() == StatusCode::METHOD_NOT_ALLOWED && !resp.headers().contains_key(header::CONTENT_TYPE);
    if !routers_own {
        return resp;
    }
    let allow = resp.headers().get(header::ALLOW).and_then(|v| v.to_str().ok()).unwrap_or("");
    let allow =
        allow.split(',').map(str::trim).filter(|m| !m.is_empty() && *m != "HEAD").collect::<Vec<_>>().join(", ");
    let mut out = json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", format!("this route takes {allow}"));
    if let Ok(v) = header::HeaderValue::from_str(&allow) {
        out.headers_mut().insert(header::ALLOW, v);
    }
    out
}

/// `cargo lambda watch` serves a function under `/lambda-url/<name>`; a
/// function URL serves it at `/`. Routes are written for the latter.
async fn strip_watch_prefix(mut req: axum::extract::Request) -> axum::extract::Request {
    let path = req.uri().path();
    let below = match path.strip_prefix("/lambda-url/") {
        Some(rest) => rest.split_once('/').map(|(_, below)| below).unwrap_or(""),
        None => path.trim_start_matches('/'),
    };
    // A trailing `/` names the same resource (`/sessions/` is `/sessions`).
    let below = below.trim_end_matches('/');
    if below.len() + 1 != path.len() {
        let query = req.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
        if let Ok(uri) = format!("/{below}{query}").parse() {
            *req.uri_mut() = uri;
        }
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tower::ServiceExt;

    #[tokio::test]
    async fn the_watch_prefix_is_removed_before_routing() {
        let router = finish(axum::Router::new().route("/projects", get(|| async { "listed" })), None);
        let req = http::Request::get("/lambda-url/entities/projects?limit=1").body(ResponseBody::empty()).unwrap();
        let resp = router.oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let req = http::Request::get("/projects/").body(ResponseBody::empty()).unwrap();
        assert_eq!(
            finish(axum::Router::new().route("/projects", get(|| async { "listed" })), None)
                .oneshot(req)
                .await
                .unwrap()
                .status(),
            StatusCode::OK
        );
    }

    #[tokio::test]
    async fn a_known_path_with_another_method_is_405_with_allow_in_declared_order() {
        use http_body_util::BodyExt;
        let routes =
            axum::Router::new().route("/x", get(|| async { "" }).patch(|| async { "" }).delete(|| async { "" }));
        let req = http::Request::put("/x").body(ResponseBody::empty()).unwrap();
        let resp = finish(routes, None).oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(resp.headers()[header::ALLOW], "GET, PATCH, DELETE");
        let body: serde_json::Value =
            serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(body["error"]["code"], "method_not_allowed");
    }
}
