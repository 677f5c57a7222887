//! The artifact through `sam local invoke` and `sam local start-api`, as the
//! full run prepared it.

use std::time::Duration;

use plant_store_admin::acceptance::Api;
use plant_store_local_support::function::Env;
use plant_store_local_support::process::{Started, free_port};
pub use plant_store_local_support::sam_local::SamLocal;
use plant_store_local_support::tools::temp_dir;
use tempfile::TempDir;

use crate::{ApiGatewayEvent, TestResponse};

/// `sam local invoke` of `event`: the function's response.
pub async fn invoke(sam: &SamLocal, event: &str, env: &Env) -> TestResponse {
    let dir = temp_dir("sam-invoke").unwrap();
    let response = sam.invoke(event, env, dir.path());
    TestResponse::from_lambda_response(&response.unwrap_or_else(|error| panic!("{error}")))
}

/// A running `sam local start-api`; stopped (with its containers) on drop.
pub struct SamApi<'a> {
    pub url: String,
    sam: &'a SamLocal,
    api: Api,
    process: Started,
    dir: TempDir,
}

impl<'a> SamApi<'a> {
    /// `sam local start-api` on a free port of 127.0.0.1 with these
    /// template parameters (`NAME=VALUE`), once the function answers.
    pub fn start(sam: &'a SamLocal, env: &Env, parameters: &[&str]) -> Self {
        let dir = temp_dir("sam-start-api").unwrap();
        let port = free_port();
        let process = sam
            .start_api(env, port, parameters, Some(&dir.path().join("sam.log")))
            .unwrap_or_else(|error| panic!("{error}"));
        let url = format!("http://127.0.0.1:{port}");
        Self { api: Api::new(&url), url, sam, process, dir }
    }

    /// What `sam local start-api` has printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sam.log")).unwrap_or_default()
    }

    /// Sends `request` over HTTP to the API: its answer, the body read as
    /// JSON if it is JSON.
    pub async fn send(&self, request: ApiGatewayEvent) -> TestResponse {
        let mut path = request.path;
        if !request.query.is_empty() {
            path = format!("{path}?{}", request.query);
        }
        let headers: Vec<(&str, &str)> =
            (request.headers.iter()).map(|(name, value)| (name.as_str(), value.as_str())).collect();
        let method = request.method.parse().unwrap();
        let sent = self.api.request(method, &path, &headers, request.body);
        let answered = tokio::time::timeout(Duration::from_secs(60), sent).await;
        let (status, headers, body) = answered
            .map_err(|_| "no answer within 60 s".to_owned())
            .and_then(|answer| answer)
            .unwrap_or_else(|error| panic!("{error}:\n{}", self.log()));
        TestResponse::new(status.as_u16(), headers, &body)
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
