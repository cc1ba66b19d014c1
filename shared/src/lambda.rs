//! The Lambda runtime loop, kept alive past one invocation's failure.
//!
//! `lambda_runtime` (1.5) ends its loop — and so the function's process — when
//! handing one invocation's response to the Runtime API fails: a function URL
//! client that hangs up mid-stream makes the response's body write fail
//! (`Lambda Runtime API request failed … BodyWrite … Broken pipe`), and the
//! error climbs out of `Runtime::run`. On AWS that costs a cold start; under
//! `cargo lambda watch`, which does not start a function again, every later
//! request hangs (issue 43). The failure belongs to that invocation alone
//! (its turn has run to its end and its frames are in the log for a resume),
//! so [`KeepServing`] logs it and lets the loop take the next invocation.
//! Failures outside an invocation (polling `/next`) still end the loop, as the
//! runtime decides.
//!
//! Every function's `main.rs` starts its runtime through [`serve`].

use lambda_runtime::{layers::TracingLayer, Error, LambdaInvocation, Runtime, Service};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower::Layer;

/// Runs `runtime` with the tracing layer the crate's own `run` adds and
/// [`KeepServing`] outside it, concurrently where the environment allows
/// (`AWS_LAMBDA_MAX_CONCURRENCY`), one invocation at a time elsewhere.
pub async fn serve<S>(runtime: Runtime<S>) -> Result<(), Error>
where
    S: Service<LambdaInvocation, Response = (), Error = Error> + Clone + Send + 'static,
    S::Future: Send,
{
    runtime.layer(TracingLayer::new()).layer(KeepServing).run_concurrent().await
}

/// Turns one invocation's failure into a logged warning (see the module doc).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeepServing;

impl<S> Layer<S> for KeepServing {
    type Service = KeepServingService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        KeepServingService { inner }
    }
}

#[derive(Debug, Clone)]
pub struct KeepServingService<S> {
    inner: S,
}

impl<S> Service<LambdaInvocation> for KeepServingService<S>
where
    S: Service<LambdaInvocation, Response = (), Error = Error>,
    S::Future: Send + 'static,
{
    type Response = ();
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, invocation: LambdaInvocation) -> Self::Future {
        let request_id = invocation.context.request_id.clone();
        let answered = self.inner.call(invocation);
        Box::pin(async move {
            if let Err(error) = answered.await {
                tracing::warn!(%request_id, %error, "an invocation's answer did not reach the Runtime API (client gone?); serving the next one");
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{service_fn, ServiceExt};

    fn invocation() -> LambdaInvocation {
        LambdaInvocation {
            parts: http::Response::new(()).into_parts().0,
            body: bytes::Bytes::new(),
            context: lambda_runtime::Context::default(),
        }
    }

    #[tokio::test]
    async fn a_failed_answer_leaves_the_loop_serving() {
        let failing = service_fn(|_: LambdaInvocation| async { Err::<(), Error>("BodyWrite: Broken pipe".into()) });
        // Without the layer the error reaches the runtime's loop, which ends.
        assert!(failing.clone().oneshot(invocation()).await.is_err());
        assert!(KeepServing.layer(failing).oneshot(invocation()).await.is_ok());
    }
}
