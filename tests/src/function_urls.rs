//! The stream, entities and prewarm functions' real handlers behind real HTTP
//! on loopback, at the paths `cargo lambda watch` serves them under
//! (`/lambda-url/stream/…`, `/lambda-url/entities/…`, `/lambda-url/prewarm/`),
//! all on one table and one scripted model: what an HTTP client (the
//! `agentic-chat` CLI) talks to on the local stack, without the stack.

use crate::TestApp;
use http_body_util::BodyExt;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use shared::config::Config;
use shared::edge::entities::{handle_entities, EntitiesApp};
use shared::edge::prewarm::handle_prewarm;
use shared::edge::stream::{handle_stream, StreamApp};
use shared::edge::ResponseBody;
use shared::prewarm::{PrewarmApp, PrewarmConfig};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Clone)]
struct Apps {
    stream: StreamApp,
    entities: EntitiesApp,
    prewarm: Arc<PrewarmApp>,
}

/// The three functions of one [`TestApp`] (its table and scripted model),
/// served until the test's runtime ends.
pub struct FunctionUrls {
    pub t: TestApp,
    pub addr: SocketAddr,
}

impl FunctionUrls {
    pub async fn start() -> FunctionUrls {
        Self::with_config(|_| {}).await
    }

    /// With `tweak` applied to every function's config.
    pub async fn with_config(tweak: impl Fn(&mut Config)) -> FunctionUrls {
        let t = TestApp::with_config(&tweak).await;
        let mut config = crate::test_config(&t.table, &t.llm.base_url());
        tweak(&mut config);
        let apps = Apps {
            stream: t.app.clone(),
            entities: EntitiesApp::with_dynamo(config.clone(), t.dynamo.clone()),
            prewarm: Arc::new(PrewarmApp::with_dynamo(config, PrewarmConfig::default(), t.dynamo.clone())),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let apps = apps.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| serve(apps.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc).await;
                });
            }
        });
        FunctionUrls { t, addr }
    }

    /// `http://127.0.0.1:<port>/lambda-url/<function>/`.
    pub fn url(&self, function: &str) -> String {
        format!("http://{}/lambda-url/{function}/", self.addr)
    }
}

async fn serve(
    apps: Apps,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<http::Response<ResponseBody>, Infallible> {
    let (mut parts, body) = req.into_parts();
    // Like the Lambda runtime: the whole body before the handler runs.
    let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    // Like `cargo lambda watch`: the function sees the path below its URL.
    let path = parts.uri.path().to_string();
    let mut segs = path.trim_start_matches('/').splitn(3, '/');
    let (prefix, function, rest) = (segs.next(), segs.next(), segs.next().unwrap_or(""));
    let query = parts.uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    parts.uri = format!("/{rest}{query}").parse().expect("a path below the function URL");
    let req = lambda_http::Request::from(http::Request::from_parts(parts, lambda_http::Body::Binary(bytes.to_vec())));
    let resp = match (prefix, function) {
        (Some("lambda-url"), Some("stream")) => handle_stream(&apps.stream, req).await,
        (Some("lambda-url"), Some("entities")) => handle_entities(&apps.entities, req).await,
        (Some("lambda-url"), Some("prewarm")) => handle_prewarm(&apps.prewarm, req).await,
        _ => http::Response::builder()
            .status(404)
            .body(ResponseBody::from("no such function"))
            .expect("a static response"),
    };
    Ok(resp)
}
