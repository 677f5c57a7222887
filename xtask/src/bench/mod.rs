//! `cargo xtask bench`: the benchmarks. Each prints its figures, writes them
//! to target/bench-results/, and compares against baselines measured in the
//! same run (ratios: these machines are shared and noisy).
//!
//! - cold_start: each function's release binary started as Lambda starts
//!   it, by the Runtime API stand-in (`local-support`'s, the tests'
//!   own) on 127.0.0.1, against DynamoDB Local behind a real TLS terminator
//!   (haproxy), interleaved round by round with two baselines from bench/: a
//!   bare lambda_runtime loop (`hello`, the init floor of any Rust Lambda)
//!   and the floor of the job (`minimal`: one conditional PutItem per
//!   create, one Query per listing, nothing else). The function runs with
//!   the per-owner bound (`function`, `cognito`) and without (`unbounded`).
//!   Every DynamoDB call passes a recording proxy (the tests' fault proxy,
//!   passing through), and each request is priced as DynamoDB bills it
//!   (on demand: write and read units). Every invocation is sampled for
//!   X-Ray, with the daemon's address set to the tests' stand-in daemon. Then the arm64 `bootstrap` that
//!   `sam build` makes, and its zip.
//! - burst: one owner making `--burst` creates (256), 16 in flight in one
//!   process, against 16 owners making as many in all: refusals,
//!   throughput, and whether the plants and the counts are exact after.
//! - throughput: requests per second of one process at
//!   AWS_LAMBDA_MAX_CONCURRENCY 1 and 8 (Lambda Managed Instances), the
//!   function beside the minimal baseline, with each process's CPU time.
//! - trust_store (benches/trust_store.rs): building the HTTPS client's trust
//!   store from the compiled-in roots against loading the system's bundle.
//! - init_keys (benches/init_keys.rs): fetching the JWKS at init against an
//!   inline key set.
//!
//! Flags ([`Settings`]; `cargo xtask --help`): `--rounds` (cold starts per
//! function), `--warm` (warm GET + POST per function), `--no-sam-build`
//! (skip the arm64 build), `--compare BINARY` (another build of the
//! function measured beside it, for a before/after table),
//! `--throughput-requests` (per batch), `--throughput-rounds`, `--burst`.
//! `--smoke`: a few iterations of a debug build, no sam build, no init_keys
//! (the full test run runs this). `--strict`: a missed target
//! (`report::limits`) fails the run, after every report is written.
//!
//! By concern: settings and setup here, [`drive`] (what runs the
//! functions), [`billing`] (what DynamoDB bills), [`report`] (the tables,
//! the targets, the files).

mod billing;
mod drive;
mod report;

use std::path::{Path, PathBuf};
use std::process::Command;

use plant_store_local_support::fault_proxy::{Fault, FaultProxy};
use plant_store_local_support::function::Env;
use plant_store_local_support::key_server::KeyServer;
use plant_store_local_support::keys::{Algorithm, Issuer};
use plant_store_local_support::process::{Scope, free_port, run};
use plant_store_local_support::tls_front::TlsFront;
use plant_store_local_support::xray_daemon::XRayDaemon;
use plant_store_local_support::{Result, log, root, tools_dir};
use serde_json::Value;

use crate::artifact::{check_no_jitter_entropy, sam_build};
use crate::flags::Flags;
use crate::stack::{Stack, debug_binary};

pub struct Settings {
    smoke: bool,
    /// Cold starts per function.
    rounds: usize,
    /// Warm GET + POST per function.
    warm: usize,
    /// Warm requests that prime DynamoDB Local before anything is measured.
    prime: usize,
    /// Requests per throughput batch, and rounds of batches.
    batch: usize,
    batches: usize,
    sam_build: bool,
    compare: Option<PathBuf>,
    /// Creates of the burst, in each of its two shapes.
    burst: usize,
    /// A missed target fails the run.
    strict: bool,
}

impl Settings {
    pub fn from_flags(flags: &mut Flags) -> Result<Self> {
        if flags.switch("smoke")? {
            return Ok(Self::smoke());
        }
        Ok(Self {
            smoke: false,
            rounds: flags.value("rounds", 20)?,
            warm: flags.value("warm", 600)?,
            prime: drive::PRIME_REQUESTS,
            batch: flags.value("throughput-requests", 1000)?,
            batches: flags.value("throughput-rounds", 5)?,
            sam_build: !flags.switch("no-sam-build")?,
            compare: flags.optional("compare")?,
            burst: flags.value("burst", 256)?,
            strict: flags.switch("strict")?,
        })
    }

    /// A few iterations of the debug build: the full test run's.
    pub fn smoke() -> Self {
        Self {
            smoke: true,
            rounds: 3,
            warm: 20,
            prime: 5,
            batch: 40,
            batches: 1,
            sam_build: false,
            compare: None,
            burst: 32,
            strict: false,
        }
    }

    fn profile(&self) -> &'static str {
        if self.smoke { "dev" } else { "release" }
    }

    fn bin_dir(&self) -> PathBuf {
        root().join(if self.smoke {
            "target/debug"
        } else {
            "target/release"
        })
    }
}

/// One measured function: its name in the report, its binary, and its
/// Lambda environment.
pub struct Measured {
    name: String,
    binary: PathBuf,
    env: Env,
}

/// What the benchmarks measure, and the requests they send.
pub struct Setup {
    functions: Vec<Measured>,
    get_event: String,
    post_template: Value,
    results_dir: PathBuf,
    /// Every DynamoDB call of every function passes it.
    recorder: FaultProxy,
    /// Where every function sends its X-Ray documents (every invocation is
    /// sampled: tracing's whole cost is in the figures).
    xray: XRayDaemon,
    /// Signs the requests' tokens.
    issuer: Issuer,
    /// How DynamoDB Local is reached (for the recount after the burst).
    stack: Stack,
}

/// The benchmarks, as `settings` say.
pub fn bench(settings: &Settings) -> Result {
    let _scope = Scope::new();
    let results_dir = root().join("target/bench-results");
    std::fs::create_dir_all(&results_dir)?;
    build(settings)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let stack = Stack::start(free_port(), None)?;
    stack.create_table(TABLE)?;
    // DynamoDB Local behind the recording proxy, behind TLS, as AWS's
    // endpoint is reached.
    let recorder = runtime.block_on(FaultProxy::start(
        stack.env.get("AWS_ENDPOINT_URL_DYNAMODB"),
        &[],
        Fault::PassThrough,
    ));
    let tls_dir = tools_dir().join("bench/tls");
    let dynamodb_front = TlsFront::start(port_of(&recorder.url)?, &tls_dir)?;
    // The issuer's key set as Cognito serves it: over HTTPS, with a
    // certificate from the same local CA, in front of a key server.
    let issuer = Issuer::generate(&[Algorithm::EdDSA]);
    let key_server = runtime.block_on(KeyServer::start(issuer.jwks()));
    let key_front = TlsFront::start(key_server.port(), &tls_dir)?;
    let xray = runtime.block_on(XRayDaemon::start());

    let mut extra = serde_json::Map::new();
    if settings.sam_build && !settings.smoke {
        let artifact = sam_build()?;
        extra.insert(
            "arm64_bootstrap_bytes".into(),
            artifact.bootstrap.metadata()?.len().into(),
        );
        extra.insert(
            "arm64_zip_bytes".into(),
            artifact.zip.metadata()?.len().into(),
        );
    }
    let token = issuer.token("bench-user", 3600);
    let event = |name: &str| -> Result<String> {
        let text = std::fs::read_to_string(root().join("events/http-api").join(name))?;
        Ok(text.replace("{{token}}", &token))
    };
    let mut base = Env::function(
        &format!("https://{}", dynamodb_front.address),
        TABLE,
        &issuer,
    );
    base.set("AWS_XRAY_DAEMON_ADDRESS", &xray.address)
        .set("AWS_SESSION_TOKEN", "local")
        // The runs store more plants for their one owner than the default
        // bound; the bound's writes are measured all the same (`unbounded`
        // sets 0).
        .set("MAX_PLANTS_PER_OWNER", "1000000");
    let jwks_url = format!("https://{}/.well-known/jwks.json", key_front.address);
    let setup = Setup {
        functions: functions(settings, &base, &jwks_url, &dynamodb_front),
        get_event: event("list-plants.json")?,
        post_template: serde_json::from_str(&event("create-plant.json")?)?,
        results_dir: results_dir.clone(),
        recorder,
        xray,
        issuer,
        stack,
    };

    log!(
        "cold_start: {} cold starts and {} warm requests per function",
        settings.rounds,
        settings.warm
    );
    runtime.block_on(drive::cold_start(&setup, settings, extra))?;
    log!(
        "throughput: {} rounds of {} requests at once, at concurrency 1 and 8",
        settings.batches,
        settings.batch
    );
    runtime.block_on(drive::throughput(&setup, settings))?;
    log!(
        "burst: {} creates by one owner and by 16, 16 in flight",
        settings.burst
    );
    runtime.block_on(drive::burst(&setup, settings))?;

    if !settings.smoke {
        for bench in ["trust_store", "init_keys"] {
            run(Command::new("cargo").args(["bench", "--locked", "--bench", bench]))?;
        }
    }
    let missed = report::missed_targets(&results_dir)?;
    if settings.strict && !missed.is_empty() {
        return Err(format!("targets missed (--strict):\n{}", missed.join("\n")).into());
    }
    Ok(())
}

/// The benchmark's table on its DynamoDB Local.
const TABLE: &str = "bench-plants";

/// Builds the function and the baselines.
fn build(settings: &Settings) -> Result {
    log!(
        "building the function and the baselines ({})",
        settings.profile()
    );
    if settings.smoke {
        // The tests' debug build of every binary of the workspace: a smoke
        // run measures nothing, and after the tests that build is there.
        debug_binary("plant-store")?;
    } else {
        // Each package on its own: the function with the features it is
        // deployed with, not those the baselines (the SDK's own HTTPS
        // client) or the test crates add.
        for package in ["plant-store", "plant-store-bench"] {
            run(Command::new("cargo")
                .args(["build", "--locked", "--profile", settings.profile()])
                .args(["--package", package]))?;
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
fn functions(settings: &Settings, base: &Env, jwks_url: &str, tls: &TlsFront) -> Vec<Measured> {
    let remote_keys = |env: &Env| {
        let mut env = env.with("AUTH_JWKS_URL", jwks_url);
        env.remove("AUTH_JWKS");
        env
    };
    // Trust: the function's compiled-in roots plus the local CA; or, as a
    // Lambda image has one bundle, the system's roots and the local CA in
    // one file (SSL_CERT_FILE), which the SDK's default client (the
    // baselines, and the function before its own trust store) reads.
    let compiled_in = base.with("EXTRA_CA_CERTS", &tls.ca_file.display().to_string());
    let bundle = base.with("SSL_CERT_FILE", &tls.bundle_file.display().to_string());
    let function = settings.bin_dir().join("plant-store");
    let measured = |name: &str, binary: &Path, env: Env| Measured {
        name: name.to_owned(),
        binary: binary.to_owned(),
        env,
    };
    let mut functions = vec![
        measured("cognito", &function, remote_keys(&compiled_in)),
        measured("cognito-bundle", &function, remote_keys(&bundle)),
        measured("function", &function, compiled_in.clone()),
        measured(
            "unbounded",
            &function,
            compiled_in.with("MAX_PLANTS_PER_OWNER", "0"),
        ),
        measured(
            "minimal",
            &settings.bin_dir().join("baseline-minimal"),
            bundle.clone(),
        ),
        measured(
            "hello",
            &settings.bin_dir().join("baseline-hello"),
            bundle.clone(),
        ),
    ];
    if let Some(compare) = &settings.compare {
        // The build compared against, in both configurations; it reads
        // SSL_CERT_FILE as the SDK's default client does.
        functions.push(measured("before-cognito", compare, remote_keys(&bundle)));
        functions.push(measured("before-inline", compare, bundle));
    }
    functions
}
