//! Drives the entities function's real handler against DynamoDB Local: one
//! fresh table per test, JSON in and out.

use crate::{dynamo_client, fresh_table, test_config, token};
use http_body_util::BodyExt;
use serde_json::Value;
use shared::edge::entities::{handle_entities, EntitiesApp};

pub struct EntitiesTest {
    pub app: EntitiesApp,
    pub dynamo: aws_sdk_dynamodb::Client,
    pub table: String,
}

/// What a client saw: the status and the JSON body (`Null` when empty).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub json: Value,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }
}

impl EntitiesTest {
    pub async fn new() -> EntitiesTest {
        let dynamo = dynamo_client().await;
        let table = fresh_table(&dynamo).await;
        let config = test_config(&table, "http://127.0.0.1:9/unused");
        EntitiesTest { app: EntitiesApp::with_dynamo(config, dynamo.clone()), dynamo, table }
    }

    /// A request with raw body bytes and extra headers.
    pub async fn raw(
        &self,
        user: Option<&str>,
        method: &str,
        uri: &str,
        body: Vec<u8>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut b = http::Request::builder().method(method).uri(uri).header("content-type", "application/json");
        if let Some(u) = user {
            b = b.header("authorization", format!("Bearer {}", token(u)));
        }
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let body = if body.is_empty() { lambda_http::Body::Empty } else { lambda_http::Body::Binary(body) };
        let req = lambda_http::Request::from(b.body(body).expect("request"));
        let resp = handle_entities(&self.app, req).await;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.expect("infallible").to_bytes();
        let json = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("a JSON body") };
        Answer { status, json }
    }

    pub async fn call(&self, user: &str, method: &str, uri: &str, body: Option<Value>) -> Answer {
        let bytes = body.map(|b| serde_json::to_vec(&b).unwrap()).unwrap_or_default();
        self.raw(Some(user), method, uri, bytes, &[]).await
    }

    pub async fn get(&self, user: &str, uri: &str) -> Answer {
        self.call(user, "GET", uri, None).await
    }

    /// Creates a project and returns `(project_id, context_document_id)`.
    pub async fn project(&self, user: &str, name: &str) -> (String, String) {
        let a = self.call(user, "POST", "/projects", Some(serde_json::json!({ "name": name }))).await;
        assert_eq!(a.status, 201, "{a:?}");
        let p = &a.json["data"]["project"];
        (p["id"].as_str().unwrap().to_string(), p["context_document_id"].as_str().unwrap().to_string())
    }

    /// Creates an entity and returns its id.
    pub async fn create(&self, user: &str, project: &str, plural: &str, body: Value) -> String {
        let a = self.call(user, "POST", &format!("/projects/{project}/{plural}"), Some(body)).await;
        assert_eq!(a.status, 201, "{a:?}");
        a.json["data"]["id"].as_str().unwrap().to_string()
    }

    pub async fn version(&self, user: &str, project: &str) -> u64 {
        self.get(user, &format!("/projects/{project}")).await.json["version"].as_u64().unwrap()
    }
}
