//! The function as `sam local` runs it: `sam build`'s artifact in the Lambda
//! container, through `sam local invoke` (one event) and `sam local
//! start-api` (SAM's emulation of the HTTP API, on 127.0.0.1).
//!
//! What it needs beyond `cargo test` (a container engine, arm64 emulation,
//! the base image, `sam build`, and DynamoDB Local reachable from the
//! containers) is set up by the full run (`scripts/test`, whose
//! `xtask/src/sam_local.rs` prepares it), which passes it in two variables:
//! - `PLANT_STORE_SAM_LOCAL_OPTIONS`: the options every `sam local` command
//!   takes there (template, invoke image, `--skip-pull-image`, ...), split at
//!   spaces;
//! - `PLANT_STORE_SAM_LOCAL_DYNAMODB`: DynamoDB Local's URL as the containers
//!   reach it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use lambda_http::http;
use serde_json::{Map, Value};

use crate::{ApiGatewayEvent, TestResponse};

/// The function's logical id in template.yaml.
const FUNCTION: &str = "PlantsFunction";
/// How long `sam local start-api` may take until the function answers: the
/// container starts and the arm64 binary initialises under emulation.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// `sam local` as scripts/test prepared it.
pub struct SamLocal {
    options: Vec<String>,
    dynamodb_url: String,
}

impl SamLocal {
    /// From the environment scripts/test sets; `Err` says what is missing.
    pub fn from_env() -> Result<Self, String> {
        let var = |name: &str| {
            std::env::var(name)
                .map_err(|_| format!("{name} is not set (scripts/test sets up sam local)"))
        };
        Ok(Self {
            options: var("PLANT_STORE_SAM_LOCAL_OPTIONS")?
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            dynamodb_url: var("PLANT_STORE_SAM_LOCAL_DYNAMODB")?,
        })
    }

    /// The function's environment as an `--env-vars` file: `env` with the
    /// DynamoDB endpoint the containers reach. `sam local` applies only the
    /// variables the template declares, and takes credentials and region
    /// from its own environment (scripts/test gives it dummy ones).
    fn env_vars_file(&self, dir: &std::path::Path, env: &[(String, String)]) -> PathBuf {
        let mut variables: Map<String, Value> = env
            .iter()
            .map(|(name, value)| (name.clone(), Value::from(value.as_str())))
            .collect();
        variables.insert(
            "AWS_ENDPOINT_URL_DYNAMODB".into(),
            self.dynamodb_url.as_str().into(),
        );
        let path = dir.join("env.json");
        let document = serde_json::json!({ FUNCTION: variables });
        std::fs::write(&path, document.to_string()).unwrap();
        path
    }

    fn sam(&self, subcommand: &str) -> Command {
        self.sam_with(subcommand, &[])
    }

    /// `sam local SUBCOMMAND` with these template parameters (`NAME=VALUE`)
    /// added to the ones the options already override (the option takes
    /// every value up to the next option, and the last option wins).
    fn sam_with(&self, subcommand: &str, parameters: &[&str]) -> Command {
        let mut options = self.options.clone();
        let at = match options
            .iter()
            .position(|option| option == "--parameter-overrides")
        {
            Some(flag) => {
                flag + 1
                    + options[flag + 1..]
                        .iter()
                        .take_while(|value| !value.starts_with("--"))
                        .count()
            }
            None => {
                options.push("--parameter-overrides".into());
                options.len()
            }
        };
        options.splice(
            at..at,
            parameters.iter().map(|parameter| parameter.to_string()),
        );
        let mut command = Command::new("sam");
        command.args(["local", subcommand]).args(options);
        command
    }

    /// `sam local invoke -e EVENT`: the function's response to one event.
    /// Each invoke is a cold container whose `bootstrap` runs under
    /// qemu-user, ten or more times slower than on an arm64 CPU, within the
    /// template's 10 s timeout: when the emulator reports that timeout, the
    /// event is sent once more (every event's request is safe to repeat).
    pub async fn invoke(&self, event: &str, env: &[(String, String)]) -> TestResponse {
        let dir = TempDir::new("invoke");
        let env_vars = self.env_vars_file(&dir.0, env);
        let event_file = dir.0.join("event.json");
        std::fs::write(&event_file, event).unwrap();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut command = self.sam("invoke");
            command
                .arg("--env-vars")
                .arg(&env_vars)
                .arg("--event")
                .arg(&event_file)
                .arg(FUNCTION);
            let output = tokio::task::spawn_blocking(move || command.output())
                .await
                .unwrap()
                .expect("sam runs");
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            // sam prints the function's response on stdout, its own lines and
            // the function's log on stderr.
            let response = stdout
                .lines()
                .rev()
                .find_map(|line| serde_json::from_str::<Value>(line).ok());
            match response {
                Some(response) => return TestResponse::from_lambda_response(&response),
                None if attempts == 1 && stderr.contains("timed out after") => {
                    eprintln!("sam local invoke timed out under emulation; once more:\n{stderr}");
                }
                None => panic!(
                    "sam local invoke printed no response ({}, attempt {attempts}):\n{stdout}\n{stderr}",
                    output.status
                ),
            }
        }
    }

    /// `sam local start-api` on a free port of 127.0.0.1, one warm container,
    /// returned once the function itself answers.
    pub async fn start_api(&self, env: &[(String, String)]) -> SamApi {
        self.start_api_with(env, &[]).await
    }

    /// [`Self::start_api`] with these template parameters (`NAME=VALUE`).
    pub async fn start_api_with(&self, env: &[(String, String)], parameters: &[&str]) -> SamApi {
        let dir = TempDir::new("start-api");
        let env_vars = self.env_vars_file(&dir.0, env);
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log_path = dir.0.join("sam.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let child = self
            .sam_with("start-api", parameters)
            .arg("--env-vars")
            .arg(&env_vars)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--warm-containers", "EAGER", "--no-watch"])
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("sam runs");
        let mut api = SamApi {
            url: format!("http://127.0.0.1:{port}"),
            client: Client::builder(TokioExecutor::new()).build_http(),
            child,
            log_path,
            _dir: dir,
        };
        api.wait_until_the_function_answers().await;
        api
    }
}

/// A running `sam local start-api`; stopped (with its containers) on drop.
pub struct SamApi {
    pub url: String,
    client: Client<HttpConnector, Full<Bytes>>,
    child: Child,
    log_path: PathBuf,
    _dir: TempDir,
}

impl SamApi {
    /// The function answers 401 to a request without a token: SAM's own
    /// server answers before the container is ready, with other statuses.
    async fn wait_until_the_function_answers(&mut self) {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("sam local start-api exited ({status}):\n{}", self.log());
            }
            let request = ApiGatewayEvent::new("GET", "/plants");
            if let Ok(response) = self.send_raw(request).await
                && response.0 == 401
            {
                return;
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "the function did not answer through sam local start-api within {START_TIMEOUT:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// What `sam local start-api` has printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
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

impl Drop for SamApi {
    /// SIGTERM, on which SAM removes its warm containers itself. When a test
    /// fails, SAM's log (its own lines and the function's) is printed with
    /// it: an answer such as SAM's 502 is explained only there.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("sam local start-api printed:\n{}", self.log());
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A folder for one `sam local` command's files, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("plant-store-sam-{what}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
