//! The prewarm function's edge: one binary for its function URL (buffered)
//! and its EventBridge schedule. [`invoke`] tells the payloads apart: the
//! schedule runs the refresh and answers its report; anything else is a
//! function-URL request, routed by [`router`] and answered in the payload-2.0
//! response shape (`statusCode`, `headers`, `body`, `isBase64Encoded`,
//! `cookies`).

use super::body::JsonBody;
use super::error::ErrorBody;
use super::extract::{HasAuth, User};
use super::{json, json_error, OpenApiRouter, ResponseBody};
use crate::auth::Authenticator;
use crate::prewarm::{is_scheduled_event, prewarm, refresh, PrewarmApp, MAX_BODY_BYTES};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use utoipa_axum::routes;

impl HasAuth for Arc<PrewarmApp> {
    fn authenticator(&self) -> &Authenticator {
        &self.auth
    }
}

/// The prewarm routes with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<PrewarmApp>> {
    OpenApiRouter::new().routes(routes!(post_prewarm))
}

/// The prewarm function's router (CORS when `cors_allow_origin` is set).
pub fn router(app: Arc<PrewarmApp>, cors_allow_origin: Option<&str>) -> axum::Router {
    let (routes, _) = routes().split_for_parts();
    // The function URL is the route: any path prewarms.
    let routes = routes.fallback(post_any).with_state(app);
    super::finish(routes, cors_allow_origin)
}

/// One request through the prewarm router, in process (tests, local adapters).
pub async fn handle_prewarm(app: &PrewarmApp, req: lambda_http::Request) -> http::Response<ResponseBody> {
    let resp = router(Arc::new(app.clone()), None).oneshot(req.map(ResponseBody::new)).await;
    resp.unwrap_or_else(|never| match never {})
}

/// Builds a session's context pack before the user types.
#[utoipa::path(post, path = "/", tag = "prewarm", security(("bearer" = [])),
    request_body(content = serde_json::Value, description = "`{session_id?, context_type, project_id?, entity_id?, entity_type?, timezone?}`"),
    responses((status = 200, description = "`{session, cached: {scope, bytes, version, build_ms, stored}}`", body = serde_json::Value),
        (status = 400, body = ErrorBody, description = "`invalid_json`, `invalid_id`, `invalid_value`, `missing_field`"),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody, description = "`project_not_found`, `session_not_found`"),
        (status = 405, body = ErrorBody, description = "`method_not_allowed`"),
        (status = 409, body = ErrorBody, description = "`session_closed`"),
        (status = 413, body = ErrorBody, description = "`too_large`"), (status = 503, body = ErrorBody)))]
async fn post_prewarm(State(app): State<Arc<PrewarmApp>>, User(user): User, JsonBody(body): JsonBody) -> Response {
    if body.len() > MAX_BODY_BYTES {
        return json_error(StatusCode::PAYLOAD_TOO_LARGE, "too_large", "the request body is too large");
    }
    match prewarm(&app, &user, &body).await {
        Ok(r) => json(StatusCode::OK, &r),
        Err(e) => e.into_response(),
    }
}

/// The prewarm body as the document states it, with the rules
/// `crate::prewarm` checks: no unknown field; ids as [`crate::ids`] reads
/// them; `project` needs `project_id`, `entity` both ids (one branch each).
pub(super) fn prewarm_request_schema() -> serde_json::Value {
    use crate::entities::EntityKind;
    use crate::session::ContextType;
    let id = |d: &str| serde_json::json!({"type": ["string", "null"], "pattern": super::stream::ID_PATTERN, "description": d});
    let kinds: Vec<Value> = EntityKind::ALL.iter().map(|k| k.as_str().into()).chain([Value::Null]).collect();
    let properties = serde_json::json!({
        "session_id": id("The session to record the focus on; absent: a new session."),
        "context_type": {"$ref": "#/components/schemas/ContextType"},
        "project_id": id("The project (needed by `project` and `entity`)."),
        "entity_id": id("The focused entity (needed by `entity`)."),
        "entity_type": {"enum": kinds, "description": "The focused entity's kind, when known."},
        "timezone": {"type": ["string", "null"], "description":
            "The user's IANA zone: the days a mode's block reads (docs/modes.md); else the calendar's, else UTC."},
    });
    // Every other context type, from the type's own schema.
    let all = serde_json::to_value(<ContextType as utoipa::PartialSchema>::schema()).expect("schemas serialize");
    let others: Vec<Value> = all["enum"]
        .as_array()
        .expect("ContextType's schema is an enum")
        .iter()
        .filter(|c| !matches!(c.as_str(), Some("project" | "entity")))
        .cloned()
        .collect();
    let branch = |context: Value, required: &[&str]| {
        let mut required: Vec<&str> = required.to_vec();
        required.insert(0, "context_type");
        let mut props = properties.clone();
        props["context_type"] = context;
        for field in &required[1..] {
            props[*field]["type"] = "string".into();
        }
        serde_json::json!({"type": "object", "additionalProperties": false, "required": required, "properties": props})
    };
    serde_json::json!({"oneOf": [
        branch(serde_json::json!({"enum": ["project"]}), &["project_id"]),
        branch(serde_json::json!({"enum": ["entity"]}), &["project_id", "entity_id"]),
        branch(serde_json::json!({"enum": others}), &[]),
    ]})
}

async fn post_any(State(app): State<Arc<PrewarmApp>>, req: axum::extract::Request) -> Response {
    use axum::extract::FromRequestParts;
    let (mut parts, body) = req.into_parts();
    let user = match User::from_request_parts(&mut parts, &app).await {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    if parts.method != http::Method::POST {
        let mut resp = json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "prewarm takes POST");
        resp.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
        return resp;
    }
    match JsonBody::read(body, MAX_BODY_BYTES).await {
        Ok(body) => post_prewarm(State(app), user, body).await,
        Err(e) => e.into_response(),
    }
}

/// What one invocation of the prewarm binary answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PrewarmAnswer {
    /// To the EventBridge schedule: the refresh's report.
    Refresh(refresh::RefreshReport),
    /// To a function-URL request: the payload-2.0 response, the type
    /// `lambda_http` answers with for the other functions.
    Url(ApiGatewayV2httpResponse),
}

/// The one entry point of the Lambda binary; `deadline` is the invocation's
/// ([`runtime_deadline`]).
pub async fn invoke(app: &PrewarmApp, payload: Value, deadline: std::time::Instant) -> PrewarmAnswer {
    if is_scheduled_event(&payload) {
        return PrewarmAnswer::Refresh(refresh::refresh_active(&app.cache, &app.service, &app.config, deadline).await);
    }
    let resp = match serde_json::from_value::<lambda_http::request::LambdaRequest>(payload) {
        Ok(req) => {
            let req: http::Request<lambda_http::Body> = req.into();
            handle_prewarm(app, lambda_http::Request::from(req)).await
        }
        Err(e) => json_error(StatusCode::BAD_REQUEST, "invalid_event", format!("not a function-URL request: {e}")),
    };
    PrewarmAnswer::Url(url_response(resp).await)
}

/// The invocation's deadline from the runtime's `deadline` (see
/// [`super::deadline::from_runtime`]; none is now: nothing runs past it).
pub fn runtime_deadline(deadline_ms: u64) -> std::time::Instant {
    super::deadline::from_runtime(deadline_ms, crate::now_ms(), Duration::ZERO).into_std()
}

/// A buffered response in the function-URL (payload 2.0) response shape, as
/// `lambda_http` builds it: `Set-Cookie` headers go to `cookies` (always
/// present, `[]` when none: the function-URL protocol, and `cargo lambda
/// watch`'s local server, require the field), a body that is not UTF-8 is
/// sent base64-encoded.
pub async fn url_response(resp: http::Response<ResponseBody>) -> ApiGatewayV2httpResponse {
    let (parts, body) = resp.into_parts();
    let mut headers = parts.headers;
    let cookies =
        headers.get_all(http::header::SET_COOKIE).iter().filter_map(|v| v.to_str().ok().map(String::from)).collect();
    headers.remove(http::header::SET_COOKIE);
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let (body, is_base64_encoded) = match String::from_utf8(bytes.to_vec()) {
        _ if bytes.is_empty() => (None, false),
        Ok(text) => (Some(lambda_http::Body::Text(text)), false),
        Err(e) => (Some(lambda_http::Body::Binary(e.into_bytes())), true),
    };
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(parts.status.as_u16());
    out.headers = headers;
    out.body = body;
    out.is_base64_encoded = is_base64_encoded;
    out.cookies = cookies;
    out
}
