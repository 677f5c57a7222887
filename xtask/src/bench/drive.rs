//! Driving the functions: cold starts interleaved with warm requests
//! ([`cold_start`]), their figures handed to `report`.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use plant_store_local_support::Result;
use plant_store_local_support::runtime_api::{CpuShare, LambdaProcess};
use serde_json::{Value, json};

use super::billing::{billed, duration_cost_per_million};
use super::report::{
    FULL_CPU_ROWS, Figures, SHARE_ROWS, at_most, figure, limits, mean, percentile, write_results,
};
use super::{Measured, Settings, Setup};

/// The DynamoDB Local JVM speeds up as it compiles its hot paths: warm
/// requests that prime it before anything is measured.
pub(super) const PRIME_REQUESTS: usize = 300;

fn post_event(template: &Value, plant_id: u64) -> String {
    let mut event = template.clone();
    let body = json!({"id": plant_id, "name": "Fern", "tag": "bench"}).to_string();
    event["headers"]["content-length"] = body.len().to_string().into();
    event["body"] = body.into();
    event.to_string()
}

/// `event` through `function`'s `process`, unsampled for X-Ray (as most
/// invocations are), answered 200: how long it took, and the CPU time the
/// function spent meanwhile (where the platform tells it).
async fn invoke_ok(
    process: &LambdaProcess,
    function: &Measured,
    event: &str,
) -> Result<(Duration, Option<Duration>)> {
    let cpu_before = process.cpu_time();
    let invoked = process.invoke_with(event, false, None).await;
    let cpu = process.cpu_time().zip(cpu_before);
    let status = invoked.response["statusCode"].as_u64();
    if status != Some(200) {
        let name = &function.name;
        return Err(format!("{name}: status {status:?}: {}", invoked.response).into());
    }
    Ok((invoked.duration, cpu.map(|(after, before)| after - before)))
}

/// A plant id unique to this run: the clock's microseconds at the first
/// call, then one more each time.
fn next_plant_id() -> u64 {
    static NEXT: OnceLock<AtomicU64> = OnceLock::new();
    let first = || AtomicU64::new(std::time::UNIX_EPOCH.elapsed().unwrap().as_micros() as u64);
    NEXT.get_or_init(first).fetch_add(1, Ordering::Relaxed) + 1
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

#[derive(Default)]
struct ColdSamples {
    init: Vec<f64>,
    first: Vec<f64>,
    total: Vec<f64>,
    get: Vec<f64>,
    post: Vec<f64>,
    /// The function's CPU time for each warm GET and POST, in µs (none
    /// where the platform does not tell it).
    get_cpu: Vec<f64>,
    post_cpu: Vec<f64>,
    /// What each warm GET and POST was billed: (write units, read units).
    get_units: Vec<(f64, f64)>,
    post_units: Vec<(f64, f64)>,
}

impl ColdSamples {
    /// The figures of `function`, whose warm environment is `warm`.
    fn figures(self, function: &Measured, warm: &LambdaProcess) -> Result<Value> {
        let post_write_units =
            mean(&self.post_units.iter().map(|units| units.0).collect::<Vec<_>>());
        let get_read_units = mean(&self.get_units.iter().map(|units| units.1).collect::<Vec<_>>());
        let cpu = |samples: Vec<f64>| (!samples.is_empty()).then(|| percentile(samples, 0.5));
        Ok(json!({
            "cpu_get_us": cpu(self.get_cpu),
            "cpu_post_us": cpu(self.post_cpu),
            "init_ms": percentile(self.init, 0.5),
            "first_invocation_ms": percentile(self.first, 0.5),
            "cold_total_ms": percentile(self.total, 0.5),
            "warm_get_mean_ms": mean(&self.get),
            "warm_post_mean_ms": mean(&self.post),
            "duration_usd_per_million_gets": duration_cost_per_million(&self.get),
            "duration_usd_per_million_posts": duration_cost_per_million(&self.post),
            "warm_get_p50_ms": percentile(self.get.clone(), 0.50),
            "warm_get_p99_ms": percentile(self.get, 0.99),
            "warm_post_p50_ms": percentile(self.post.clone(), 0.50),
            "warm_post_p99_ms": percentile(self.post, 0.99),
            "write_units_per_create": post_write_units,
            "read_units_per_get": get_read_units,
            "peak_rss_mib": warm.peak_rss_kib().map(|kib| kib as f64 / 1024.0),
            "binary_bytes": function.binary.metadata()?.len(),
        }))
    }
}

/// The functions of `setup` at full CPU, or at the CPU share of a
/// function of `share` MB of memory (those `settings` names for it): cold
/// starts interleaved with warm requests.
pub(super) async fn cold_start(
    setup: &Setup,
    settings: &Settings,
    extra: serde_json::Map<String, Value>,
    share: Option<u64>,
) -> Result {
    let Some((functions, shares)) = at_share(setup, share) else {
        let report = "cold_start at the 128 MB share: unavailable on this platform (it needs a Linux cgroup, as root)";
        return write_results(&setup.results_dir, "cold_start_128mb", report, &json!({}));
    };
    // One warm environment per function, kept for the whole run.
    let mut warm = Vec::new();
    for (function, share) in functions.iter().zip(&shares) {
        let command = [function.binary.display().to_string()];
        warm.push(LambdaProcess::start(&command, &function.env, share.as_ref()).await);
    }
    let mut samples: Vec<ColdSamples> = functions.iter().map(|_| Default::default()).collect();
    let measured = Measuring { setup, functions: &functions, shares: &shares, warm: &warm };
    for turn in 0..settings.prime {
        measured.warm_round(turn, None).await?;
    }
    // Each round: a cold start of every function (shuffled), then a share
    // of the warm requests: cold and warm meet the same machine and store.
    let per_round = settings.warm.div_ceil(settings.rounds);
    for round in 0..settings.rounds {
        measured.cold_round(round, &mut samples).await?;
        for turn in 0..per_round {
            measured.warm_round(turn, Some(&mut samples[..])).await?;
        }
    }
    let mut figures_of = serde_json::Map::new();
    for ((function, cold), warm) in functions.iter().zip(samples).zip(&warm) {
        figures_of.insert(function.name.clone(), cold.figures(function, warm)?);
    }
    let (rounds, warm_requests) = (settings.rounds, per_round * settings.rounds);
    let report = report(&Figures(&figures_of), rounds, warm_requests, &extra, share);
    let mut figures =
        json!({"rounds": rounds, "warm_requests": warm_requests, "functions": figures_of});
    figures.as_object_mut().unwrap().extend(extra);
    let name = if share.is_some() { "cold_start_128mb" } else { "cold_start" };
    write_results(&setup.results_dir, name, &report, &figures)
}

/// The phase's report: at full CPU against the SDK floor, or at `share`
/// MB's share against the physical floor.
fn report(
    figures: &Figures,
    rounds: usize,
    warm_requests: usize,
    extra: &serde_json::Map<String, Value>,
    share: Option<u64>,
) -> String {
    match share {
        None => {
            let heading = format!(
                "cold_start: {rounds} cold starts and {warm_requests} warm GET + POST per function, interleaved; medians unless named"
            );
            figures.render(&heading, FULL_CPU_ROWS, "minimal", &full_cpu_targets(figures, extra))
        }
        Some(mb) => {
            let heading = format!(
                "cold_start at the {mb} MB share of a CPU (1 ms of CPU per {:.2} ms, a cgroup): {rounds} cold starts and {warm_requests} warm GET + POST per function; duration: a million requests' billed milliseconds at {mb} MB on arm64, beside their $0.20 request fee",
                1769.0 / mb as f64
            );
            figures.render(&heading, SHARE_ROWS, "raw", &share_targets(figures))
        }
    }
}

/// The edges' suffixes of the measured functions' names: the REST API's
/// (the default edge), the HTTP API's.
const EDGES: [&str; 2] = ["", "-http"];

/// The full-CPU targets, against the SDK floor (`minimal`) on each edge, the
/// first invocation, the billing, and the build compared (`--compare`).
fn full_cpu_targets(at: &Figures, extra: &serde_json::Map<String, Value>) -> Vec<String> {
    let first = at.get("cognito", "first_invocation_ms") / at.get("cognito", "warm_get_p50_ms");
    let mut lines: Vec<String> = EDGES.iter().flat_map(|edge| edge_targets(at, edge)).collect();
    #[rustfmt::skip]
    lines.extend([
        at_most("first invocation / warm GET p50 (cognito)", first, limits::FIRST_INVOCATION, "x"),
        at_most("warm POST p50: unbounded / minimal", at.ratio("unbounded", "minimal", "warm_post_p50_ms"), limits::WARM_POST_P50_UNBOUNDED, "x"),
        at_most("write units per accepted create (function)", at.get("function", "write_units_per_create"), limits::WRITE_UNITS_BOUNDED, " WCU"),
        at_most("write units per accepted create (unbounded)", at.get("unbounded", "write_units_per_create"), limits::WRITE_UNITS_UNBOUNDED, " WCU"),
        at_most("peak RSS (cognito)", at.get("cognito", "peak_rss_mib"), limits::PEAK_RSS_MIB, " MiB"),
        at_most("stripped x86_64 binary (function)", at.get("function", "binary_bytes") / 1e6, limits::BINARY_MB, " MB"),
    ]);
    if at.0.contains_key("before-cognito") {
        let now_over_before = |key: &str| at.ratio("cognito", "before-cognito", key);
        let cold = now_over_before("cold_total_ms");
        let label = "cold total, cognito: now / before";
        lines.push(at_most(label, cold, limits::COLD_TOTAL_AGAINST_BEFORE, "x"));
        #[rustfmt::skip]
        let rows = [("warm GET p50", "warm_get_p50_ms"), ("warm POST p50", "warm_post_p50_ms"), ("CPU per warm GET", "cpu_get_us"), ("CPU per warm POST", "cpu_post_us"), ("peak RSS", "peak_rss_mib")];
        for (label, key) in rows {
            lines.push(figure(
                &format!("{label}, cognito: now / before"),
                now_over_before(key),
                "x",
            ));
        }
    }
    if let Some(bytes) = extra.get("arm64_bootstrap_bytes").and_then(Value::as_f64) {
        let label = "arm64 bootstrap from sam build";
        lines.push(at_most(label, bytes / 1e6, limits::ARM64_BOOTSTRAP_MB, " MB"));
        let zipped = extra["arm64_zip_bytes"].as_f64().unwrap_or_default() / 1e6;
        lines.push(figure("arm64 bootstrap zipped", zipped, " MB"));
    }
    lines
}

/// The full-CPU targets of one edge's functions, against its SDK floor.
fn edge_targets(at: &Figures, edge: &str) -> [String; 4] {
    let [cognito, function, minimal] =
        ["cognito", "function", "minimal"].map(|name| format!("{name}{edge}"));
    let to_floor = |name: &str, key: &str| at.ratio(name, &minimal, key);
    #[rustfmt::skip]
    let lines = [
        at_most(&format!("cold total: {cognito} / {minimal}"), to_floor(&cognito, "cold_total_ms"), limits::COLD_TOTAL, "x"),
        at_most(&format!("warm GET p50: {cognito} / {minimal}"), to_floor(&cognito, "warm_get_p50_ms"), limits::WARM_GET_P50, "x"),
        at_most(&format!("warm GET p99: {cognito} / {minimal}"), to_floor(&cognito, "warm_get_p99_ms"), limits::WARM_GET_P99, "x"),
        at_most(&format!("warm POST p50: {function} / {minimal}"), to_floor(&function, "warm_post_p50_ms"), limits::WARM_POST_P50_BOUNDED, "x"),
    ];
    lines
}

/// The targets at 128 MB's share, against the physical floor (`raw`, whose
/// create makes the bound's two signed calls) on each edge.
fn share_targets(at: &Figures) -> Vec<String> {
    let mut lines = Vec::new();
    for edge in EDGES {
        let [cognito, function, raw] =
            ["cognito", "function", "raw"].map(|name| format!("{name}{edge}"));
        let to_raw = |name: &str, key: &str| at.ratio(name, &raw, key);
        #[rustfmt::skip]
        lines.extend([
            at_most(&format!("warm GET mean: {cognito} / {raw}"), to_raw(&cognito, "warm_get_mean_ms"), limits::SHARE_GET_MEAN, "x"),
            at_most(&format!("warm POST mean: {function} / {raw}"), to_raw(&function, "warm_post_mean_ms"), limits::SHARE_POST_MEAN_BOUNDED, "x"),
            at_most(&format!("CPU per warm GET: {cognito} / {raw}"), to_raw(&cognito, "cpu_get_us"), limits::SHARE_CPU_GET, "x"),
        ]);
    }
    lines
}

/// The functions measured at `share` MB's share of a CPU, each with its
/// share (all of them at full CPU, without); `None` where no share can be made.
fn at_share(setup: &Setup, share: Option<u64>) -> Option<(Vec<&Measured>, Vec<Option<CpuShare>>)> {
    let all = || setup.functions.iter();
    let Some(mb) = share else { return Some((all().collect(), all().map(|_| None).collect())) };
    let at_share = |function: &&Measured| super::AT_SHARE.contains(&function.name.as_str());
    let functions: Vec<&Measured> = setup.functions.iter().filter(at_share).collect();
    let share = |function: &&Measured| CpuShare::of_memory(&format!("bench-{}", function.name), mb);
    let shares: Option<Vec<_>> =
        functions.iter().map(|function| share(function).map(Some)).collect();
    Some((functions, shares?))
}

/// The functions measured in one phase, each with its CPU share (if any)
/// and its warm environment.
struct Measuring<'a> {
    setup: &'a Setup,
    functions: &'a [&'a Measured],
    shares: &'a [Option<CpuShare>],
    warm: &'a [LambdaProcess],
}

impl Measuring<'_> {
    /// One cold start of every function, in an order shuffled by `round`.
    async fn cold_round(&self, round: usize, samples: &mut [ColdSamples]) -> Result {
        let count = self.functions.len();
        for index in shuffled(count, round) {
            let function = self.functions[index];
            let command = [function.binary.display().to_string()];
            let share = self.shares[index].as_ref();
            let process = LambdaProcess::start(&command, &function.env, share).await;
            let (first, _) = invoke_ok(&process, function, &function.get_event).await?;
            let cold = &mut samples[index];
            cold.init.push(ms(process.init_duration()));
            cold.first.push(ms(first));
            cold.total.push(ms(process.init_duration() + first));
        }
        Ok(())
    }

    /// A warm GET and POST to every function's warm environment, recorded in
    /// `samples` if given.
    async fn warm_round(&self, turn: usize, mut samples: Option<&mut [ColdSamples]>) -> Result {
        let recorder = &self.setup.recorder;
        // In an order shuffled by `turn`: no function always follows
        // the cold starts, or any other function.
        let count = self.functions.len();
        for index in shuffled(count, turn) {
            let function = self.functions[index];
            // A new plant for each function: every POST is an accepted create
            // (the same id again would be a retry, another path).
            let post = post_event(&function.post_template, next_plant_id());
            let before_get = recorder.call_count();
            let get = invoke_ok(&self.warm[index], function, &function.get_event).await?;
            let before_post = recorder.call_count();
            let posted = invoke_ok(&self.warm[index], function, &post).await?;
            if let Some(samples) = samples.as_deref_mut() {
                let calls = recorder.calls_since(before_get);
                let (get_calls, post_calls) = calls.split_at(before_post - before_get);
                let cold = &mut samples[index];
                cold.get.push(ms(get.0));
                cold.post.push(ms(posted.0));
                let micros = |cpu: Duration| cpu.as_secs_f64() * 1e6;
                cold.get_cpu.extend(get.1.map(micros));
                cold.post_cpu.extend(posted.1.map(micros));
                cold.get_units.push(billed(get_calls));
                cold.post_units.push(billed(post_calls));
            }
        }
        Ok(())
    }
}

/// `0..count` in an order of its own for each `seed`: no function always
/// follows another (the one before leaves the CPU's caches as it used them;
/// each runs its own copy of its binary, so none finds its code there).
fn shuffled(count: usize, seed: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..count).collect();
    fastrand::Rng::with_seed(seed as u64).shuffle(&mut order);
    order
}
