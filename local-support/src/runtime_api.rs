//! A stand-in for the Lambda Runtime API on 127.0.0.1 that runs the
//! function's binary as Lambda does, timing init and each answer, and keeps
//! every line it writes.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::function::Env;
use crate::http_server::{Reply, body_bytes, listen, respond, serve};

const PREFIX: &str = "/2018-06-01/runtime";
const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:plant-store";
/// Generous: under qemu-user every instruction is emulated.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// One event handed to the function, with the ids Lambda gives it.
struct Pending {
    request_id: String,
    trace_id: String,
    event: String,
    /// The invocation's time: its deadline, from when it is handed out.
    timeout: Duration,
}

/// What the function returned for an invocation.
enum Returned {
    Response(Value),
    Error(String),
}

/// An invocation handed out (or about to be), waiting for its answer.
struct Waiting {
    answered: oneshot::Sender<(Duration, Returned)>,
    handed_out: Option<Instant>,
}

struct State {
    /// Waiting `/next` calls take events in turn (tokio's mutex is fair).
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Pending>>,
    waiting: Mutex<HashMap<String, Waiting>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// How init ended: the first `/next` (ready, at that instant) or
    /// `/init/error`.
    init: watch::Sender<Option<Result<Instant, String>>>,
}

/// One execution environment: the Runtime API and the function's process.
pub struct LambdaProcess {
    state: Arc<State>,
    submit: mpsc::UnboundedSender<Pending>,
    next_id: AtomicUsize,
    output: Arc<Mutex<Vec<String>>>,
    child: Child,
    server: JoinHandle<()>,
    init_duration: Duration,
}

/// The function's answer to one invocation, with the ids it was given.
pub struct Invoked {
    pub request_id: String,
    pub trace_id: String,
    /// The Lambda response document (`statusCode`, `headers`, `body`...).
    pub response: Value,
    /// From the event handed out (the function's `/next` answered) to its
    /// answer received: the invocation as Lambda bills it.
    pub duration: Duration,
}

impl LambdaProcess {
    /// Starts `command` as Lambda starts a `bootstrap`: with only the Lambda
    /// environment and `env`, in `share` (if any) from its first instruction;
    /// returns once it asks for its first event.
    pub async fn start(command: &[String], env: &Env, share: Option<&CpuShare>) -> Self {
        let (listener, address) = listen().await;
        let (submit, queue) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            queue: tokio::sync::Mutex::new(queue),
            waiting: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            init: watch::channel(None).0,
        });
        let server = serve(listener, {
            let state = state.clone();
            move |request| route(state.clone(), request)
        });

        let mut lambda = lambda_command(command, env, &address);
        if let Some(share) = share {
            share.enter_on_exec(&mut lambda);
        }
        let started = Instant::now();
        let spawned = lambda.spawn();
        let mut child = spawned.unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
        let output = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            tokio::spawn(keep_lines(child.stdout.take().unwrap(), output.clone())),
            tokio::spawn(keep_lines(child.stderr.take().unwrap(), output.clone())),
        ];
        let (next_id, init_duration) = (AtomicUsize::new(1), Duration::ZERO);
        let mut process = Self { state, submit, next_id, output, child, server, init_duration };
        let ready = process.wait_until_ready(command, readers).await;
        process.init_duration = ready - started;
        process
    }

    async fn wait_until_ready(
        &mut self,
        command: &[String],
        pipes: Vec<JoinHandle<()>>,
    ) -> Instant {
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
            Some(Some(Ok(ready))) => return ready,
            Some(Some(Err(error))) => format!("failed its init: {error}"),
            _ => "never asked for an event".to_owned(),
        };
        // Its pipes close with it: the readers then have its last lines.
        let _ = self.child.start_kill();
        for pipe in pipes {
            let _ = tokio::time::timeout(Duration::from_secs(1), pipe).await;
        }
        panic!("{command:?} {failure}; its output:\n{}", self.output().join("\n"));
    }

    /// Hands `event` to the function, with a trace header of its own that
    /// asks for it to be traced (`Sampled=1`), and waits for its answer. An
    /// invocation error (the function failing instead of answering) panics.
    pub async fn invoke(&self, event: &str) -> Invoked {
        self.invoke_with(event, true, None).await
    }

    /// [`Self::invoke`], with X-Ray's sampling decision `sampled` and its
    /// deadline `within` (if not the default) after it is handed out.
    pub async fn invoke_with(
        &self,
        event: &str,
        sampled: bool,
        within: Option<Duration>,
    ) -> Invoked {
        let timeout = within.unwrap_or(ANSWER_TIMEOUT);
        let number = self.next_id.fetch_add(1, Ordering::SeqCst);
        let request_id = format!("00000000-0000-4000-8000-{number:012}");
        let trace_id = format!(
            "Root=1-6740e000-{number:024x};Parent={:016x};Sampled={}",
            number + 0xa000,
            u8::from(sampled)
        );
        let (answered, answer) = oneshot::channel();
        let waiting = Waiting { answered, handed_out: None };
        self.state.waiting.lock().unwrap().insert(request_id.clone(), waiting);
        let (event, trace) = (event.to_owned(), trace_id.clone());
        self.submit
            .send(Pending { request_id: request_id.clone(), trace_id: trace, event, timeout })
            .unwrap();
        let Ok(Ok((duration, answer))) = tokio::time::timeout(ANSWER_TIMEOUT, answer).await else {
            let (output, within) = (self.output().join("\n"), ANSWER_TIMEOUT);
            panic!("no answer to {request_id} within {within:?}; the function's output:\n{output}")
        };
        match answer {
            Returned::Response(response) => Invoked { request_id, trace_id, response, duration },
            Returned::Error(error) => panic!("invocation {request_id} failed: {error}"),
        }
    }

    /// From the process's start to its first `/next`: Lambda's init phase.
    pub fn init_duration(&self) -> Duration {
        self.init_duration
    }

    /// The most invocations the function held at once (handed out, not yet
    /// answered).
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// The function's peak resident memory so far (`VmHWM`), in KiB (Linux
    /// only; elsewhere `None`).
    pub fn peak_rss_kib(&self) -> Option<u64> {
        #[cfg(target_os = "linux")]
        {
            let status =
                std::fs::read_to_string(format!("/proc/{}/status", self.child.id()?)).ok()?;
            let peak = status.lines().find_map(|line| line.strip_prefix("VmHWM:"))?;
            peak.trim().trim_end_matches("kB").trim().parse().ok()
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// The CPU time the function's threads have had so far, to the
    /// nanosecond: the scheduler's own count (`/proc/PID/task/*/schedstat`,
    /// Linux only; elsewhere `None`).
    pub fn cpu_time(&self) -> Option<Duration> {
        #[cfg(target_os = "linux")]
        {
            let tasks = std::fs::read_dir(format!("/proc/{}/task", self.child.id()?)).ok()?;
            let on_cpu = |task: std::fs::DirEntry| -> Option<u64> {
                let schedstat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
                schedstat.split_whitespace().next()?.parse().ok()
            };
            let nanos = tasks.flatten().filter_map(on_cpu).sum();
            Some(Duration::from_nanos(nanos))
        }
        #[cfg(not(target_os = "linux"))]
        None
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

/// `command` as Lambda starts a `bootstrap`: with only the Lambda
/// environment (its Runtime API at `address`) and `env`.
fn lambda_command(command: &[String], env: &Env, address: &str) -> Command {
    let mut child = Command::new(&command[0]);
    child
        .args(&command[1..])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_LAMBDA_RUNTIME_API", address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "plant-store")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/plant-store")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
        .envs(env.vars().iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    child
}

async fn keep_lines(stream: impl tokio::io::AsyncRead + Unpin, output: Arc<Mutex<Vec<String>>>) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        output.lock().unwrap().push(line);
    }
}

/// The Runtime API's routes; anything else is a 404.
async fn route(state: Arc<State>, request: Request<Incoming>) -> Reply {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let parts: Vec<&str> =
        path.strip_prefix(PREFIX).unwrap_or_default().trim_matches('/').split('/').collect();
    let accepted = || respond(StatusCode::ACCEPTED, &[], r#"{"status":"OK"}"#);
    let response = match (method, parts.as_slice()) {
        (Method::GET, ["invocation", "next"]) => next_invocation(&state).await,
        (Method::POST, ["invocation", request_id, outcome @ ("response" | "error")]) => {
            let body = body_bytes(request.into_body()).await;
            let text = String::from_utf8_lossy(&body);
            let answer = if *outcome == "error" {
                Returned::Error(text.into_owned())
            } else {
                let not_json = |_| Returned::Error(format!("a response that is not JSON: {text}"));
                serde_json::from_slice(&body).map_or_else(not_json, Returned::Response)
            };
            match state.waiting.lock().unwrap().remove(*request_id) {
                Some(Waiting { answered, handed_out: Some(handed_out) }) => {
                    state.in_flight.fetch_sub(1, Ordering::SeqCst);
                    let _ = answered.send((handed_out.elapsed(), answer));
                    accepted()
                }
                _ => respond(StatusCode::BAD_REQUEST, &[], "unknown request id"),
            }
        }
        (Method::POST, ["init", "error"]) => {
            let body = body_bytes(request.into_body()).await;
            state.init.send_replace(Some(Err(String::from_utf8_lossy(&body).into_owned())));
            accepted()
        }
        _ => respond(StatusCode::NOT_FOUND, &[], "not found"),
    };
    Reply::Respond(response)
}

/// Long-polls for the next event, as Lambda does: the answer waits until
/// there is one.
async fn next_invocation(state: &State) -> hyper::Response<crate::http_server::Body> {
    state
        .init
        .send_if_modified(|init| init.is_none() && init.replace(Ok(Instant::now())).is_none());
    let Some(pending) = state.queue.lock().await.recv().await else {
        return respond(StatusCode::GONE, &[], "");
    };
    if let Some(waiting) = state.waiting.lock().unwrap().get_mut(&pending.request_id) {
        waiting.handed_out = Some(Instant::now());
    }
    let in_flight = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(in_flight, Ordering::SeqCst);
    let deadline_ms = (UNIX_EPOCH.elapsed().unwrap() + pending.timeout).as_millis();
    let headers = [
        ("content-type", "application/json".to_owned()),
        ("lambda-runtime-aws-request-id", pending.request_id),
        ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
        ("lambda-runtime-invoked-function-arn", FUNCTION_ARN.into()),
        ("lambda-runtime-trace-id", pending.trace_id),
    ];
    respond(StatusCode::OK, &headers, pending.event)
}

/// A share of one CPU, as Lambda's for a memory size: a Linux cgroup (v2,
/// else v1) made as root, `None` elsewhere; removed on drop.
pub struct CpuShare {
    dir: std::path::PathBuf,
}

impl CpuShare {
    /// The share of a function of `memory_mb` (1,769 MB get one vCPU), in
    /// periods of 1 ms of CPU.
    pub fn of_memory(name: &str, memory_mb: u64) -> Option<Self> {
        Self::new(name, 1000, 1000 * 1769 / memory_mb)
    }

    #[cfg(target_os = "linux")]
    fn new(name: &str, quota: u64, period: u64) -> Option<Self> {
        let v2 = std::path::Path::new("/sys/fs/cgroup");
        let v2_has_cpu = std::fs::read_to_string(v2.join("cgroup.controllers"))
            .is_ok_and(|controllers| controllers.split_whitespace().any(|c| c == "cpu"));
        let made = |dir: std::path::PathBuf, files: &[(&str, String)]| -> Option<Self> {
            std::fs::create_dir_all(&dir).ok()?;
            let share = Self { dir };
            for (file, value) in files {
                std::fs::write(share.dir.join(file), value).ok()?;
            }
            Some(share)
        };
        let name = format!("{name}-{}", std::process::id());
        if v2_has_cpu && std::fs::write(v2.join("cgroup.subtree_control"), "+cpu").is_ok() {
            return made(v2.join(name), &[("cpu.max", format!("{quota} {period}"))]);
        }
        let v1 = std::path::Path::new("/sys/fs/cgroup/cpu").join(name);
        let files =
            [("cpu.cfs_period_us", period.to_string()), ("cpu.cfs_quota_us", quota.to_string())];
        made(v1, &files)
    }

    #[cfg(not(target_os = "linux"))]
    fn new(_name: &str, _quota: u64, _period: u64) -> Option<Self> {
        None
    }

    /// Makes `command`'s process join the share before it runs its program.
    fn enter_on_exec(&self, command: &mut Command) {
        #[cfg(target_os = "linux")]
        if let Ok(procs) =
            std::fs::OpenOptions::new().write(true).open(self.dir.join("cgroup.procs"))
        {
            // SAFETY: between fork and exec only write(2) runs, on a file
            // opened before: no allocation, no lock. "0" is the writer.
            unsafe {
                command.pre_exec(move || std::io::Write::write_all(&mut &procs, b"0"));
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = command;
    }
}

impl Drop for CpuShare {
    /// Removes the cgroup once its processes have gone.
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
