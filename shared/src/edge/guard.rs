//! The panic guard: a handler's panic becomes a logged, plain `500
//! internal_error`. Left to the runtime, it is reported as the invocation's
//! error and the function URL (and `cargo lambda watch`) hands the panic's
//! text — file, line, values — to the client.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use tower_http::catch_panic::CatchPanicLayer;

type Handler = fn(Box<dyn std::any::Any + Send + 'static>) -> Response;

/// The layer every router gets (see [`super::finish`]).
pub fn layer() -> CatchPanicLayer<Handler> {
    CatchPanicLayer::custom(internal_error as Handler)
}

fn internal_error(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("the request's handler panicked");
    super::ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "the request failed inside the function")
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_panicking_handler_answers_a_plain_500_without_the_panic_text() {
        let handler = || async {
            let after: u64 = std::hint::black_box(u64::MAX);
            if after == u64::MAX {
                panic!("attempt to add with overflow at secret/path.rs:90");
            }
            "unreachable"
        };
        let router = super::super::finish(axum::Router::new().route("/", axum::routing::get(handler)), None);
        let resp = router.oneshot(http::Request::get("/").body(axum::body::Body::empty()).unwrap()).await.unwrap();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let text = String::from_utf8(resp.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
        assert!(text.contains("internal_error") && !text.contains("overflow") && !text.contains("secret"), "{text}");
    }
}
