//! The function's binary run the way Lambda runs it: a stand-in for the
//! Lambda Runtime API on 127.0.0.1, as documented
//! (<https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html>), starts
//! the `bootstrap` with the Lambda environment, hands it events through
//! `GET /2018-06-01/runtime/invocation/next` and takes its answers from
//! `POST .../invocation/{id}/response` (or `/error`, or `.../init/error`).
//!
//! It records how many invocations were in flight at once, as Lambda Managed
//! Instances would see them, and keeps every line the function writes.
//! (`scripts/lib/runtime_api.py` is the benchmark's stand-in: the benchmark
//! drives the function from Python, outside any test binary.)

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::TestResponse;

const PREFIX: &str = "/2018-06-01/runtime";
const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:plant-store";
/// Generous: under qemu-user every instruction is emulated.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// One event handed to the function, with the ids Lambda gives it.
struct Pending {
    request_id: String,
    trace_id: String,
    event: String,
}

enum Answer {
    Response(Value),
    Error(String),
}

struct State {
    /// Waiting `/next` calls take events in turn (tokio's mutex is fair).
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Pending>>,
    answers: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// How init ended: the first `/next` (ready) or `/init/error`.
    init: watch::Sender<Option<Result<(), String>>>,
}

/// One execution environment: the Runtime API and the function's process.
pub struct LambdaProcess {
    state: Arc<State>,
    submit: mpsc::UnboundedSender<Pending>,
    next_id: AtomicUsize,
    output: Arc<Mutex<Vec<String>>>,
    child: Child,
    server: JoinHandle<()>,
}

/// The function's answer to one invocation, with the ids it was given.
pub struct Invoked {
    pub request_id: String,
    pub trace_id: String,
    /// The Lambda response document (`statusCode`, `headers`, `body`...).
    pub response: Value,
}

impl LambdaProcess {
    /// Starts `command` as Lambda starts a `bootstrap`: with only the Lambda
    /// environment and `env`; returns once it asks for its first event.
    pub async fn start(command: &[String], env: &[(String, String)]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (submit, queue) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            queue: tokio::sync::Mutex::new(queue),
            answers: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            init: watch::channel(None).0,
        });
        let server = tokio::spawn(accept(listener, state.clone()));

        let mut child = Command::new(&command[0]);
        child
            .args(&command[1..])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", &address)
            .env("AWS_LAMBDA_FUNCTION_NAME", "plant-store")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/plant-store")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = child
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
        let output = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            tokio::spawn(keep_lines(child.stdout.take().unwrap(), output.clone())),
            tokio::spawn(keep_lines(child.stderr.take().unwrap(), output.clone())),
        ];

        let mut process = Self {
            state,
            submit,
            next_id: AtomicUsize::new(1),
            output,
            child,
            server,
        };
        process.wait_until_ready(command, readers).await;
        process
    }

    async fn wait_until_ready(&mut self, command: &[String], readers: Vec<JoinHandle<()>>) {
        let mut init = self.state.init.subscribe();
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(ANSWER_TIMEOUT, init.wait_for(Option::is_some)) => {
                outcome.ok().and_then(Result::ok).map(|outcome| outcome.clone())
            }
            exit = self.child.wait() => {
                Some(Some(Err(format!("it exited ({:?})", exit.map(|status| status.code())))))
            }
        };
        let failure = match outcome {
            Some(Some(Ok(()))) => return,
            Some(Some(Err(error))) => format!("failed its init: {error}"),
            _ => "never asked for an event".to_owned(),
        };
        // Its pipes close with it: the readers then have its last lines.
        let _ = self.child.start_kill();
        for reader in readers {
            let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
        }
        panic!(
            "{command:?} {failure}; its output:\n{}",
            self.output().join("\n")
        );
    }

    /// Hands `event` to the function and waits for its answer. An invocation
    /// error (the function failing instead of answering) panics.
    pub async fn invoke(&self, event: &str) -> Invoked {
        let number = self.next_id.fetch_add(1, Ordering::SeqCst);
        let request_id = format!("00000000-0000-4000-8000-{number:012}");
        let trace_id = format!("Root=1-6740e000-{number:024x};Parent={number:016x};Sampled=0");
        let (answered, answer) = oneshot::channel();
        self.state
            .answers
            .lock()
            .unwrap()
            .insert(request_id.clone(), answered);
        self.submit
            .send(Pending {
                request_id: request_id.clone(),
                trace_id: trace_id.clone(),
                event: event.to_owned(),
            })
            .unwrap();
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, answer)
            .await
            .unwrap_or_else(|_| panic!("no answer to {request_id} within {ANSWER_TIMEOUT:?}"))
            .unwrap();
        match answer {
            Answer::Response(response) => Invoked {
                request_id,
                trace_id,
                response,
            },
            Answer::Error(error) => panic!("invocation {request_id} failed: {error}"),
        }
    }

    /// The most invocations the function held at once (handed out, not yet
    /// answered).
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every line the function has written to stdout and stderr so far.
    pub fn output(&self) -> Vec<String> {
        self.output.lock().unwrap().clone()
    }
}

impl Drop for LambdaProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        self.server.abort();
    }
}

impl Invoked {
    /// The HTTP response inside the Lambda response document.
    pub fn http(&self) -> TestResponse {
        TestResponse::from_lambda_response(&self.response)
    }
}

async fn keep_lines(stream: impl tokio::io::AsyncRead + Unpin, output: Arc<Mutex<Vec<String>>>) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        output.lock().unwrap().push(line);
    }
}

async fn accept(listener: TcpListener, state: Arc<State>) {
    while let Ok((stream, _)) = listener.accept().await {
        stream.set_nodelay(true).unwrap();
        tokio::spawn(serve(stream, state.clone()));
    }
}

/// One keep-alive connection from the runtime client: requests in turn.
async fn serve(stream: TcpStream, state: Arc<State>) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    while let Some((method, path, body)) = read_request(&mut reader).await {
        let (status, headers, body) = route(&state, &method, &path, body).await;
        let mut head = format!("HTTP/1.1 {status} OK\r\ncontent-length: {}\r\n", body.len());
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let written = async {
            writer.write_all(head.as_bytes()).await?;
            writer.write_all(&body).await
        };
        if written.await.is_err() {
            return;
        }
    }
}

/// Method, path and body of the next request (Content-Length or chunked).
async fn read_request(
    reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .await
        .ok()
        .filter(|&read| read > 0)?;
    let mut request_line = line.split_whitespace();
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let (mut length, mut chunked) = (0, false);
    loop {
        line.clear();
        reader
            .read_line(&mut line)
            .await
            .ok()
            .filter(|&read| read > 0)?;
        let Some((name, value)) = line.trim_end().split_once(':') else {
            break; // the empty line after the headers
        };
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line).await.ok()?;
            let size = usize::from_str_radix(line.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2]; // the chunk and its CRLF
            reader.read_exact(&mut chunk).await.ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body).await.ok()?;
    }
    Some((method, path, body))
}

type Reply = (u16, Vec<(&'static str, String)>, Vec<u8>);

async fn route(state: &State, method: &str, path: &str, body: Vec<u8>) -> Reply {
    let accepted = || (202, Vec::new(), br#"{"status":"OK"}"#.to_vec());
    let parts: Vec<&str> = path
        .strip_prefix(PREFIX)
        .unwrap_or_default()
        .trim_matches('/')
        .split('/')
        .collect();
    let text = || String::from_utf8_lossy(&body).into_owned();
    match (method, parts.as_slice()) {
        ("GET", ["invocation", "next"]) => next_invocation(state).await,
        ("POST", ["invocation", request_id, outcome @ ("response" | "error")]) => {
            let answer = if *outcome == "response" {
                match serde_json::from_slice(&body) {
                    Ok(response) => Answer::Response(response),
                    Err(_) => Answer::Error(format!("a response that is not JSON: {}", text())),
                }
            } else {
                Answer::Error(text())
            };
            let Some(waiting) = state.answers.lock().unwrap().remove(*request_id) else {
                return (400, Vec::new(), b"unknown request id".to_vec());
            };
            state.in_flight.fetch_sub(1, Ordering::SeqCst);
            let _ = waiting.send(answer);
            accepted()
        }
        ("POST", ["init", "error"]) => {
            state.init.send_replace(Some(Err(text())));
            accepted()
        }
        _ => (404, Vec::new(), b"not found".to_vec()),
    }
}

/// Long-polls for the next event, as Lambda does: the answer waits until
/// there is one.
async fn next_invocation(state: &State) -> Reply {
    state
        .init
        .send_if_modified(|init| init.is_none() && init.replace(Ok(())).is_none());
    let Some(pending) = state.queue.lock().await.recv().await else {
        return (410, Vec::new(), Vec::new());
    };
    let in_flight = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(in_flight, Ordering::SeqCst);
    let deadline_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + ANSWER_TIMEOUT.as_millis();
    let headers = vec![
        ("content-type", "application/json".to_owned()),
        ("lambda-runtime-aws-request-id", pending.request_id),
        ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
        (
            "lambda-runtime-invoked-function-arn",
            FUNCTION_ARN.to_owned(),
        ),
        ("lambda-runtime-trace-id", pending.trace_id),
    ];
    (200, headers, pending.event.into_bytes())
}
