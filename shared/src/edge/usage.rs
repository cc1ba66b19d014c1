//! `GET /me/usage` on the stream function: the user's budgets ([`crate::budget`]),
//! what they used and when a spent one lets them go on. Plain JSON, same
//! bearer auth as a turn; the chat page reads it after a 429.

use super::error::ErrorBody;
use super::extract::User;
use super::stream::StreamApp;
use super::{json, ApiError, OpenApiRouter};
use crate::budget::BudgetUsage;
use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<StreamApp> {
    OpenApiRouter::new().routes(routes!(usage))
}

/// The user's use of each budget and its limit (a limit of 0: none).
#[utoipa::path(get, path = "/me/usage", tag = "usage", security(("bearer" = [])),
    responses((status = 200, body = BudgetUsage), (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn usage(State(app): State<StreamApp>, User(user): User) -> Result<Response, ApiError> {
    let limits = app.deps.config.budgets;
    let now = crate::now_ms();
    let usage = match &app.deps.budget {
        Some(store) => store.usage(&user, now, &limits).await?,
        None => crate::budget::usage_of(now, &crate::budget::BudgetConfig::OFF, 0, 0, 0, 0),
    };
    Ok(json(StatusCode::OK, &usage))
}
