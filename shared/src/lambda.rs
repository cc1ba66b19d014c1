//! The Lambda runtime loop, kept alive past one invocation's failure.
//!
//! `lambda_runtime` (1.5) ends its loop — and so the function's process — on
//! two failures that belong to one invocation or one poll, not to the
//! process: handing an invocation's answer to the Runtime API fails (a
//! function URL client that hung up mid-stream: `Lambda Runtime API request
//! failed … BodyWrite … Broken pipe`), or the next poll of `/next` is cut
//! (`SendRequest … IncompleteMessage`, as `cargo lambda watch` does after such
//! an invocation). On AWS that costs a cold start; under `cargo lambda watch`,
//! which does not start a function again, every later request hung (issue
//! 43). So [`KeepServing`] logs an invocation's failure and lets the loop take
//! the next invocation, and [`serve`] starts the loop again after a failed
//! poll, with a short backoff, giving up (the process ends, as before) only
//! after [`MAX_FAILED_STARTS`] loops in a row that served nothing.
//!
//! Every function's `main.rs` starts its runtime through [`serve`] or
//! [`serve_concurrent`].

use futures::future::{FutureExt, Map};
use lambda_runtime::{layers::TracingLayer, Error, LambdaInvocation, Runtime, Service};
use std::future::Future;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower::Layer;

/// Loops in a row that ended within [`SHORT_RUN`] after which [`serve`]
/// gives up: the Runtime API is gone, not one request.
pub const MAX_FAILED_STARTS: u32 = 20;
const SHORT_RUN: Duration = Duration::from_secs(1);

/// Runs the runtime `make` builds — with the tracing layer the crate's own
/// `run` adds and [`KeepServing`] inside it, so its warning carries the
/// invocation's span — one invocation at a time, and starts it again when its
/// loop ends on a failed poll (see the module doc).
pub async fn serve<S>(make: impl Fn() -> Runtime<S>) -> Result<(), Error>
where
    S: Service<LambdaInvocation, Response = (), Error = Error>,
{
    restarting(|| make().layer(KeepServing).layer(TracingLayer::new()).run()).await
}

/// As [`serve`], concurrently where the environment allows
/// (`AWS_LAMBDA_MAX_CONCURRENCY` on Lambda Managed Instances), one
/// invocation at a time elsewhere.
pub async fn serve_concurrent<S>(make: impl Fn() -> Runtime<S>) -> Result<(), Error>
where
    S: Service<LambdaInvocation, Response = (), Error = Error> + Clone + Send + 'static,
    S::Future: Send,
{
    restarting(|| make().layer(KeepServing).layer(TracingLayer::new()).run_concurrent()).await
}

async fn restarting<F: Future<Output = Result<(), Error>>>(run: impl Fn() -> F) -> Result<(), Error> {
    let mut failed_starts = 0;
    loop {
        let started = Instant::now();
        let Err(error) = run().await else { return Ok(()) };
        failed_starts = if started.elapsed() < SHORT_RUN { failed_starts + 1 } else { 1 };
        if failed_starts >= MAX_FAILED_STARTS {
            return Err(error);
        }
        tracing::warn!(%error, failed_starts, "the runtime's loop ended; starting it again");
        tokio::time::sleep(Duration::from_millis(50) * failed_starts).await;
    }
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

type Answered = fn(Result<(), Error>) -> Result<(), Error>;

fn forgive(answered: Result<(), Error>) -> Result<(), Error> {
    if let Err(error) = answered {
        tracing::warn!(%error, "an invocation's answer did not reach the Runtime API (client gone?); serving the next one");
    }
    Ok(())
}

impl<S> Service<LambdaInvocation> for KeepServingService<S>
where
    S: Service<LambdaInvocation, Response = (), Error = Error>,
{
    type Response = ();
    type Error = Error;
    type Future = Map<S::Future, Answered>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, invocation: LambdaInvocation) -> Self::Future {
        self.inner.call(invocation).map(forgive as Answered)
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
        assert!(failing.oneshot(invocation()).await.is_err());
        assert!(KeepServing.layer(failing).oneshot(invocation()).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_loop_ended_by_a_failed_poll_starts_again() {
        let runs = std::sync::atomic::AtomicU32::new(0);
        let run = || {
            let n = runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                if n < 2 {
                    Err::<(), Error>("SendRequest: IncompleteMessage".into())
                } else {
                    Ok(())
                }
            }
        };
        assert!(restarting(run).await.is_ok());
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_runtime_api_that_is_gone_ends_the_process() {
        let runs = std::sync::atomic::AtomicU32::new(0);
        let run = || {
            runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Err::<(), Error>("connection refused".into()) }
        };
        assert!(restarting(run).await.is_err());
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), MAX_FAILED_STARTS);
    }
}
