//! `cargo xtask bench` (docs/performance.md): the functions as Lambda runs
//! them, against the baselines of the same run: settings and setup here,
//! [`drive`] runs them, [`billing`] prices their calls, [`report`] prints.

mod billing;
mod drive;
mod report;

use std::path::{Path, PathBuf};
use std::process::Command;

use plant_store_local_support::fault_proxy::{Fault, FaultProxy};
use plant_store_local_support::function::Env;
use plant_store_local_support::http_server::{Reply, listen, respond, serve};
use plant_store_local_support::keys::{AUDIENCE, Algorithm, ISSUER, Issuer};
use plant_store_local_support::process::{Scope, free_port, run};
use plant_store_local_support::tls_front::TlsFront;
use plant_store_local_support::xray_daemon::XRayDaemon;
use plant_store_local_support::{Result, log, root, tools_dir};
use serde_json::Value;

use crate::artifact::{check_no_jitter_entropy, sam_build};
use crate::stack::{Stack, debug_binary};

/// What the flags say (`cargo xtask --help`).
#[derive(Default)]
pub(crate) struct Settings {
    /// A few iterations of the debug build (the full test run's).
    smoke: bool,
    /// Cold starts per function, and warm GET + POST per function.
    rounds: usize,
    warm: usize,
    /// Warm requests that prime DynamoDB Local before anything is measured.
    prime: usize,
    sam_build: bool,
    /// Another build of the function, measured beside it.
    compare: Option<PathBuf>,
    /// A missed target fails the run.
    strict: bool,
}

/// The functions measured at 128 MB's share of a CPU: the function as
/// deployed, with the bound, and the physical floor, on each edge; and the
/// build compared.
pub(super) const AT_SHARE: &[&str] =
    &["cognito", "function", "raw", "cognito-http", "function-http", "raw-http", "before-cognito"];
/// The template's memory size.
const MEMORY_MB: u64 = 128;

impl Settings {
    pub(crate) fn from_flags(flags: crate::flags::Bench) -> Self {
        if flags.smoke {
            return Self::smoke();
        }
        Self {
            smoke: false,
            rounds: flags.rounds.unwrap_or(crate::flags::defaults::ROUNDS),
            warm: flags.warm.unwrap_or(crate::flags::defaults::WARM),
            prime: drive::PRIME_REQUESTS,
            sam_build: !flags.no_sam_build,
            compare: flags.compare,
            strict: flags.strict,
        }
    }

    /// A few iterations of the debug build: the full test run's.
    pub(crate) fn smoke() -> Self {
        Self { smoke: true, rounds: 1, warm: 10, prime: 1, ..Default::default() }
    }

    fn bin_dir(&self) -> PathBuf {
        root().join(if self.smoke { "target/debug" } else { "target/release" })
    }
}

/// One measured function: its name in the report, its binary, its Lambda
/// environment, and the requests it gets (signed with the run's token).
pub(crate) struct Measured {
    name: String,
    binary: PathBuf,
    env: Env,
    get_event: String,
    post_template: Value,
}

/// What the benchmarks measure, and the requests they send.
pub(crate) struct Setup {
    functions: Vec<Measured>,
    results_dir: PathBuf,
    /// Every DynamoDB call of every function passes it.
    recorder: FaultProxy,
    /// Kept running while the functions use them: DynamoDB Local, its and
    /// the key set's TLS fronts, the key server, and the X-Ray daemon (whose
    /// address Lambda sets; an unsampled invocation sends it nothing).
    _running: (Stack, TlsFront, TlsFront, tokio::task::JoinHandle<()>, XRayDaemon),
}

/// The benchmarks, as `settings` say.
pub(crate) fn bench(settings: &Settings) -> Result {
    let _scope = Scope::begin();
    build(settings)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let setup = Setup::start(settings, &runtime)?;
    let extra = artifact_sizes(settings)?;
    let (rounds, warm) = (settings.rounds, settings.warm);
    log!("cold_start: {rounds} cold starts and {warm} warm requests per function");
    runtime.block_on(drive::cold_start(&setup, settings, extra, None))?;
    log!("cold_start at the {MEMORY_MB} MB share of a CPU: as above");
    runtime.block_on(drive::cold_start(&setup, settings, Default::default(), Some(MEMORY_MB)))?;

    let missed = report::missed_targets(&setup.results_dir)?;
    if settings.strict && !missed.is_empty() {
        return Err(format!("targets missed (--strict):\n{}", missed.join("\n")).into());
    }
    Ok(())
}

impl Setup {
    /// DynamoDB Local with the benchmark's table behind the recording proxy
    /// and a TLS front, as AWS's endpoint is reached; the issuer's key set
    /// as Cognito serves it (over HTTPS, with a certificate from the same
    /// local CA, in front of a key server); the X-Ray daemon; and every
    /// function measured, configured for them.
    fn start(settings: &Settings, runtime: &tokio::runtime::Runtime) -> Result<Self> {
        let results_dir = root().join("target/bench-results");
        std::fs::create_dir_all(&results_dir)?;
        let stack = Stack::start(free_port(), None)?;
        stack.create_table(TABLE)?;
        let dynamodb = stack.env.get("AWS_ENDPOINT_URL_DYNAMODB");
        let recorder = runtime.block_on(FaultProxy::start(dynamodb, &[], Fault::PassThrough));
        let tls_dir = tools_dir().join("bench/tls");
        let dynamodb_front =
            runtime.block_on(TlsFront::start(port_of(&recorder.url)?, &tls_dir))?;
        // Cognito signs with RS256.
        let issuer = Issuer::generate(&[Algorithm::RS256]);
        let (key_server, key_port) = runtime.block_on(key_server(issuer.jwks()));
        let key_front = runtime.block_on(TlsFront::start(key_port, &tls_dir))?;
        let xray = runtime.block_on(XRayDaemon::start());
        let dynamodb_url = format!("https://{}", dynamodb_front.address);
        let mut base = Env::function(&dynamodb_url, TABLE, &issuer);
        base.set("AWS_XRAY_DAEMON_ADDRESS", &xray.address)
            .set("AWS_SESSION_TOKEN", "local")
            // More plants for one owner than the default bound; its writes
            // are measured all the same (`unbounded` sets 0).
            .set("MAX_PLANTS_PER_OWNER", "1000000");
        let jwks_url = format!("https://{}/.well-known/jwks.json", key_front.address);
        let rows = functions(settings, &base, &jwks_url, &dynamodb_front);
        Ok(Self {
            functions: measured(rows, &issuer, &results_dir.join("binaries"))?,
            results_dir,
            recorder,
            _running: (stack, dynamodb_front, key_front, key_server, xray),
        })
    }
}

/// The issuer's key set served on 127.0.0.1, as Cognito serves it (a
/// TLS front goes before it); its port.
async fn key_server(jwks: String) -> (tokio::task::JoinHandle<()>, u16) {
    let (listener, address) = listen().await;
    let server = serve(listener, move |_request| {
        let jwks = jwks.clone();
        async move {
            let json = ("content-type", "application/json".to_owned());
            Reply::Respond(respond(hyper::StatusCode::OK, &[json], jwks))
        }
    });
    (server, port_of(&format!("http://{address}")).unwrap_or_default())
}

/// The sizes of what `sam build` makes, unless the settings skip it.
fn artifact_sizes(settings: &Settings) -> Result<serde_json::Map<String, Value>> {
    let mut sizes = serde_json::Map::new();
    if settings.sam_build && !settings.smoke {
        let artifact = sam_build()?;
        let bootstrap = artifact.bootstrap.metadata()?.len();
        sizes.insert("arm64_bootstrap_bytes".into(), bootstrap.into());
        sizes.insert("arm64_zip_bytes".into(), artifact.zip.metadata()?.len().into());
    }
    Ok(sizes)
}

/// The benchmark's table on its DynamoDB Local.
const TABLE: &str = "bench-plants";

/// Builds the function and the baselines.
fn build(settings: &Settings) -> Result {
    let profile = if settings.smoke { "dev" } else { "release" };
    log!("building the function and the baselines ({profile})");
    if settings.smoke {
        // The tests' debug build of every binary of the workspace: a smoke
        // run measures nothing, and after the tests that build is there.
        debug_binary("plant-store")?;
    } else {
        // Each package on its own: the function with its deployed features,
        // not those the baselines or the test crates add.
        for package in ["plant-store", "plant-store-bench"] {
            let build = format!("build --locked --profile {profile} --package {package}");
            run(Command::new("cargo").args(build.split(' ')))?;
        }
    }
    check_no_jitter_entropy(&settings.bin_dir())
}

/// The port of a `http://127.0.0.1:PORT` URL.
fn port_of(url: &str) -> Result<u16> {
    Ok(url.trim_start_matches("http://127.0.0.1:").parse()?)
}

/// Every function measured, in each configuration, from the environment
/// `base` they share.
fn functions(
    settings: &Settings,
    base: &Env,
    jwks_url: &str,
    tls: &TlsFront,
) -> Vec<(&'static str, PathBuf, Env)> {
    let remote_keys = |env: &Env| {
        let mut env = env.with("AUTH_JWKS_URL", jwks_url);
        env.remove("AUTH_JWKS");
        env
    };
    // Trust: the compiled-in roots plus the local CA; or, as a Lambda
    // image's one bundle, the system's roots and the CA in SSL_CERT_FILE
    // (read by the SDK's default client: the baselines).
    let compiled_in = base.with("EXTRA_CA_CERTS", &tls.ca_file.display().to_string());
    let bundle = base.with("SSL_CERT_FILE", &tls.bundle_file.display().to_string());
    let [function, minimal, raw] = ["plant-store", "baseline-minimal", "baseline-raw"]
        .map(|binary| settings.bin_dir().join(binary));
    let unbounded = compiled_in.with("MAX_PLANTS_PER_OWNER", "0");
    let cognito = remote_keys(&compiled_in);
    let mut rows = vec![
        ("cognito", function.clone(), cognito.clone()),
        ("function", function.clone(), compiled_in),
        ("unbounded", function, unbounded),
        ("minimal", minimal, bundle.clone()),
        ("raw", raw, bundle),
    ];
    if let Some(compare) = &settings.compare {
        // The build compared against, configured as the row it is compared with.
        rows.push(("before-cognito", compare.clone(), cognito));
    }
    rows
}

/// The rows as measured functions, each with its requests: the default
/// edge's REST API events, and the HTTP API's for the rows of [`HTTP_API`]
/// (named with `-http`). Each runs its own copy of its binary in `dir`: one
/// that shared a file with the row before it would find its code in the
/// CPU's caches, as no Lambda environment does (~25 % less CPU per GET).
fn measured(rows: Vec<(&str, PathBuf, Env)>, issuer: &Issuer, dir: &Path) -> Result<Vec<Measured>> {
    let token = issuer.keys[0].token(ISSUER, Some(AUDIENCE), "bench-user", 3600)?;
    let event = |edge: &str, name: &str| -> Result<String> {
        let text = std::fs::read_to_string(root().join("events").join(edge).join(name))?;
        Ok(text.replace("{{token}}", &token))
    };
    let http = rows.iter().filter(|(name, ..)| HTTP_API.contains(name));
    let http = http.map(|(name, binary, env)| (format!("{name}-http"), "http-api", binary, env));
    let rest = rows.iter().map(|(name, binary, env)| (name.to_string(), "rest-api", binary, env));
    let mut measured = Vec::new();
    std::fs::create_dir_all(dir)?;
    for (name, edge, binary, env) in rest.chain(http) {
        std::fs::copy(binary, dir.join(&name))?;
        measured.push(Measured {
            binary: dir.join(&name),
            name,
            env: env.clone(),
            get_event: event(edge, "list-plants.json")?,
            post_template: serde_json::from_str(&event(edge, "create-plant.json")?)?,
        });
    }
    Ok(measured)
}

/// The rows measured on the HTTP API edge's events too.
const HTTP_API: &[&str] = &["cognito", "function", "minimal", "raw"];
