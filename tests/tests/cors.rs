//! CORS on a local stack (`CORS_ALLOW_ORIGIN`): the stream and entities
//! functions answer a browser's preflight and mark every answer, errors and
//! streams included, for the configured origin; unset (as on AWS, where the
//! function URL's `Cors` does it), they add nothing.

use reqwest::{Method, Response};
use tests::function_urls::FunctionUrls;
use tests::token;

const ORIGIN: &str = "http://127.0.0.1:5173";

async fn preflight(f: &FunctionUrls, function: &str, path: &str, method: &str) -> Response {
    reqwest::Client::new()
        .request(Method::OPTIONS, format!("{}{path}", f.url(function)))
        .header("origin", ORIGIN)
        .header("access-control-request-method", method)
        .header("access-control-request-headers", "authorization,content-type,last-event-id")
        .send()
        .await
        .unwrap()
}

async fn get(f: &FunctionUrls, function: &str, path: &str, bearer: Option<&str>) -> Response {
    let mut req = reqwest::Client::new().get(format!("{}{path}", f.url(function))).header("origin", ORIGIN);
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test]
async fn configured_the_functions_answer_preflights_and_mark_every_answer() {
    let f = FunctionUrls::with_config(|c| c.cors_allow_origin = Some(ORIGIN.into())).await;
    let alice = token("alice");
    for (function, path, method) in [
        ("stream", "chat", "POST"),
        ("stream", "sessions", "GET"),
        ("stream", "me/approvals", "PUT"),
        ("entities", "projects", "GET"),
    ] {
        let r = preflight(&f, function, path, method).await;
        assert_eq!(r.status(), 204, "{function} {path}");
        assert_eq!(header(&r, "access-control-allow-origin"), Some(ORIGIN));
        let headers = header(&r, "access-control-allow-headers").unwrap();
        for h in ["authorization", "content-type", "last-event-id"] {
            assert!(headers.contains(h), "{function}: {h} not allowed: {headers}");
        }
        assert!(header(&r, "access-control-allow-methods").unwrap().contains(method));
    }
    for (function, path) in [("stream", "sessions"), ("entities", "projects")] {
        let ok = get(&f, function, path, Some(&alice)).await;
        assert_eq!(ok.status(), 200, "{function}");
        assert_eq!(header(&ok, "access-control-allow-origin"), Some(ORIGIN), "{function} GET");
        // What a page may read is said on the answer it reads (the fetch
        // standard reads it there, not on the preflight).
        assert_eq!(header(&ok, "access-control-expose-headers"), Some("x-vercel-ai-ui-message-stream"));
        // An error answer is readable by the page too.
        let refused = get(&f, function, path, None).await;
        assert_eq!(refused.status(), 401, "{function}");
        assert_eq!(header(&refused, "access-control-allow-origin"), Some(ORIGIN), "{function} 401");
    }
    // A streamed turn (the native protocol) carries it in its head.
    f.t.llm.push(tests::Reply::text(&["hi"]));
    let turn = reqwest::Client::new()
        .post(f.url("stream"))
        .header("origin", ORIGIN)
        .bearer_auth(&alice)
        .json(&serde_json::json!({ "message": "hello" }))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&turn, "content-type"), Some("text/event-stream"));
    assert_eq!(header(&turn, "access-control-allow-origin"), Some(ORIGIN));
    assert!(turn.text().await.unwrap().contains("\"done\""));
}

#[tokio::test]
async fn unconfigured_nothing_is_added() {
    let f = FunctionUrls::start().await;
    for (function, path) in [("stream", "sessions"), ("entities", "projects")] {
        let r = preflight(&f, function, path, "GET").await;
        assert_eq!(r.status(), 204, "a preflight is still not refused");
        let ok = get(&f, function, path, Some(&token("alice"))).await;
        assert_eq!(ok.status(), 200);
        for resp in [&r, &ok] {
            let cors: Vec<_> = resp.headers().keys().filter(|k| k.as_str().starts_with("access-control-")).collect();
            assert!(cors.is_empty(), "{function}: {cors:?}");
        }
    }
}
