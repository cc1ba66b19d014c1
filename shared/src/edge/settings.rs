//! The user's settings on the stream function, plain JSON with the same
//! bearer auth as a turn:
//! - `GET`/`PUT /me/approvals`: the tools the user set to "ask first"
//!   ([`crate::approval::settings`]), whose every call waits for their yes
//!   (the chat page's "Ask me first" panel). A name that is not a tool that
//!   changes something is `400 unknown_tool` and nothing is stored.
//! - `GET`/`PUT /me/settings`: the user's chosen time zone
//!   ([`UserSettings`]), the only way it changes (a turn's own zone is never
//!   stored). A name that is not an IANA zone is `400 invalid_timezone` and
//!   nothing is stored.

use super::body::JsonBody;
use super::error::ErrorBody;
use super::extract::User;
use super::stream::StreamApp;
use super::{json, ApiError, OpenApiRouter};
use crate::approval::settings::{ApprovalSettings, ApprovalSettingsView, SettingsError};
use crate::calendar::{CalendarService, UserSettings};
use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<StreamApp> {
    OpenApiRouter::new().routes(routes!(get_approvals, put_approvals)).routes(routes!(get_settings, put_settings))
}

impl From<SettingsError> for ApiError {
    fn from(e: SettingsError) -> Self {
        ApiError::bad_request(e.code(), e.to_string())
    }
}

fn unavailable() -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "settings_unavailable", "approval settings are not kept here")
}

/// The tools the user set to ask first, and every tool that may be.
#[utoipa::path(get, path = "/me/approvals", tag = "settings", security(("bearer" = [])),
    responses((status = 200, body = ApprovalSettingsView), (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn get_approvals(State(app): State<StreamApp>, User(user): User) -> Result<Response, ApiError> {
    let store = app.deps.approval_settings.as_ref().ok_or_else(unavailable)?;
    let settings = store.get(&user).await?;
    Ok(json(StatusCode::OK, &ApprovalSettingsView::of(&settings)))
}

/// Replaces the tools the user set to ask first (an empty list: none).
/// Each turn reads them at its start.
#[utoipa::path(put, path = "/me/approvals", tag = "settings", security(("bearer" = [])),
    request_body(content = ApprovalSettings, description = "Every tool that asks first, by name."),
    responses((status = 200, body = ApprovalSettingsView, description = "As stored (each name once, in `askable`'s order)"),
        (status = 400, body = ErrorBody, description = "`invalid_json`; `unknown_tool`: a name not in `askable`"),
        (status = 401, body = ErrorBody),
        (status = 413, body = ErrorBody, description = "`too_large`: the body is over 6 MiB"),
        (status = 503, body = ErrorBody)))]
async fn put_approvals(
    State(app): State<StreamApp>,
    User(user): User,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let store = app.deps.approval_settings.as_ref().ok_or_else(unavailable)?;
    let settings: ApprovalSettings =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request("invalid_json", e.to_string()))?;
    let settings = settings.checked()?;
    store.put(&user, &settings).await?;
    Ok(json(StatusCode::OK, &ApprovalSettingsView::of(&settings)))
}

fn calendar(app: &StreamApp) -> Result<&CalendarService, ApiError> {
    let no = || ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "settings_unavailable", "no calendar is kept here");
    app.deps.calendar.as_ref().ok_or_else(no)
}

/// The user's settings: the time zone they chose (`null`: none, UTC).
#[utoipa::path(get, path = "/me/settings", tag = "settings", security(("bearer" = [])),
    responses((status = 200, body = UserSettings), (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn get_settings(State(app): State<StreamApp>, User(user): User) -> Result<Response, ApiError> {
    let zone = calendar(&app)?.stored_zone(&user).await?;
    Ok(json(StatusCode::OK, &UserSettings::of(zone)))
}

/// Replaces the user's settings: `timezone`, the zone turns without their
/// own use (`null` or absent: none, UTC).
#[utoipa::path(put, path = "/me/settings", tag = "settings", security(("bearer" = [])),
    request_body(content = UserSettings, description = "The user's chosen IANA zone, or null."),
    responses((status = 200, body = UserSettings, description = "As stored"),
        (status = 400, body = ErrorBody, description = "`invalid_json`; `invalid_timezone`: not an IANA zone name"),
        (status = 401, body = ErrorBody),
        (status = 413, body = ErrorBody, description = "`too_large`: the body is over 6 MiB"),
        (status = 503, body = ErrorBody)))]
async fn put_settings(
    State(app): State<StreamApp>,
    User(user): User,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let cal = calendar(&app)?;
    let settings: UserSettings =
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request("invalid_json", e.to_string()))?;
    let zone = settings.zone()?;
    cal.set_zone(&user, zone).await?;
    Ok(json(StatusCode::OK, &UserSettings::of(zone)))
}
