//! The function as `sam local` runs it: `sam build`'s artifact in the Lambda
//! container, through `sam local invoke` (one event) and `sam local
//! start-api` (SAM's emulation of the HTTP API, on 127.0.0.1), as the full
//! run prepared it ([`SamLocal::from_env`]); the local-support crate runs
//! `sam`, this side sends the requests and reads the answers.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use lambda_http::http;
use plant_store_local_support::function::Env;
use plant_store_local_support::process::{Started, free_port};
pub use plant_store_local_support::sam_local::SamLocal;
use plant_store_local_support::tools::TempDir;

use crate::{ApiGatewayEvent, TestResponse};

/// `sam local invoke` of `event`: the function's response.
pub async fn invoke(sam: &SamLocal, event: &str, env: &Env) -> TestResponse {
    let dir = TempDir::new("sam-invoke").unwrap();
    let response = sam.invoke(event, env, &dir.0);
    TestResponse::from_lambda_response(&response.unwrap_or_else(|error| panic!("{error}")))
}

/// A running `sam local start-api`; stopped (with its containers) on drop.
pub struct SamApi<'a> {
    pub url: String,
    sam: &'a SamLocal,
    client: Client<HttpConnector, Full<Bytes>>,
    process: Started,
    dir: TempDir,
}

impl<'a> SamApi<'a> {
    /// `sam local start-api` on a free port of 127.0.0.1 with these
    /// template parameters (`NAME=VALUE`), once the function answers.
    pub fn start(sam: &'a SamLocal, env: &Env, parameters: &[&str]) -> Self {
        let dir = TempDir::new("sam-start-api").unwrap();
        let port = free_port();
        let process = sam
            .start_api(env, port, parameters, Some(&dir.0.join("sam.log")))
            .unwrap_or_else(|error| panic!("{error}"));
        Self {
            url: format!("http://127.0.0.1:{port}"),
            sam,
            client: Client::builder(TokioExecutor::new()).build_http(),
            process,
            dir,
        }
    }

    /// What `sam local start-api` has printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("sam.log")).unwrap_or_default()
    }

    /// Sends `request` over HTTP to the API; the answer's body must be JSON.
    pub async fn send(&self, request: ApiGatewayEvent) -> TestResponse {
        let (status, headers, body) = self
            .send_raw(request)
            .await
            .unwrap_or_else(|error| panic!("{error}:\n{}", self.log()));
        TestResponse::new(status, headers, &body)
    }

    /// Sends `request`; its status, headers and body, whatever the body is.
    pub async fn send_raw(
        &self,
        request: ApiGatewayEvent,
    ) -> Result<(u16, http::HeaderMap, String), String> {
        let mut uri = format!("{}{}", self.url, request.path);
        if !request.query.is_empty() {
            uri = format!("{uri}?{}", request.query);
        }
        let mut builder = http::Request::builder()
            .method(request.method.as_str())
            .uri(uri);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let body = Full::new(Bytes::from(request.body.unwrap_or_default()));
        let response = tokio::time::timeout(
            Duration::from_secs(60),
            self.client.request(builder.body(body).unwrap()),
        )
        .await
        .map_err(|_| "no answer within 60 s".to_owned())?
        .map_err(|error| format!("request failed: {error}"))?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|error| format!("reading the body: {error}"))?
            .to_bytes();
        Ok((
            parts.status.as_u16(),
            parts.headers,
            String::from_utf8_lossy(&body).into_owned(),
        ))
    }
}

impl Drop for SamApi<'_> {
    /// When a test fails, SAM's log (its own lines and the function's) is
    /// printed with it: an answer such as SAM's 502 is explained only there.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("sam local start-api printed:\n{}", self.log());
        }
        self.process.stop();
        self.sam.remove_lambda_containers();
    }
}
