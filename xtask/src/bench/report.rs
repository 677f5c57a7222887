//! The reports: each benchmark's table, printed and written with its
//! figures to target/bench-results/, and the targets it is held to.

use std::path::Path;

use plant_store_local_support::Result;
use serde_json::Value;

/// The benchmark's targets, in one place: the most each figure may be
/// Ratios are to the floor (`minimal`)
/// measured in the same run.
pub(super) mod limits {
    /// Cold total (init and first invocation), cognito / minimal.
    pub(crate) const COLD_TOTAL: f64 = 1.0;
    /// Cold total, cognito now / the build compared (`--compare`).
    pub(crate) const COLD_TOTAL_AGAINST_BEFORE: f64 = 1.05;
    /// The first invocation after a cold start / a warm GET's p50.
    pub(crate) const FIRST_INVOCATION: f64 = 1.2;
    pub(crate) const WARM_GET_P50: f64 = 1.05;
    pub(crate) const WARM_GET_P99: f64 = 1.3;
    /// A create with the bound makes two writes where the floor makes one.
    pub(crate) const WARM_POST_P50_BOUNDED: f64 = 2.05;
    pub(crate) const WARM_POST_P50_UNBOUNDED: f64 = 1.05;
    /// The function's CPU time per warm request over the floor's, in µs.
    pub(crate) const CPU_OVER_FLOOR_US: f64 = 20.0;
    /// Write units per accepted create, with the bound and without.
    pub(crate) const WRITE_UNITS_BOUNDED: f64 = 2.0;
    pub(crate) const WRITE_UNITS_UNBOUNDED: f64 = 1.0;
    pub(crate) const PEAK_RSS_MIB: f64 = 9.3;
    /// The stripped x86_64 release binary.
    pub(crate) const BINARY_MB: f64 = 7.6;
    /// The arm64 `bootstrap` that `sam build` makes.
    pub(crate) const ARM64_BOOTSTRAP_MB: f64 = 6.0;
    /// At 128 MB's share of a CPU, against the physical floor (`raw`):
    /// a warm GET's mean, a bounded create's (two writes to the floor's
    /// one), and the CPU of a warm GET.
    pub(crate) const SHARE_GET_MEAN: f64 = 1.5;
    pub(crate) const SHARE_POST_MEAN_BOUNDED: f64 = 2.5;
    pub(crate) const SHARE_CPU_GET: f64 = 1.5;
}

/// The lines of this run's reports that name a missed target.
pub(super) fn missed_targets(results_dir: &Path) -> Result<Vec<String>> {
    let mut missed = Vec::new();
    for report in ["cold_start", "cold_start_128mb", "burst"] {
        let text = std::fs::read_to_string(results_dir.join(format!("{report}.txt")))?;
        let lines = text.lines().filter(|line| line.trim_end().ends_with("MISSED"));
        missed.extend(lines.map(str::to_owned));
    }
    Ok(missed)
}

/// Prints the report and keeps it, with its figures, in `dir`.
pub(super) fn write_results(dir: &Path, name: &str, report: &str, figures: &Value) -> Result {
    println!("{report}");
    std::fs::write(dir.join(format!("{name}.txt")), format!("{report}\n"))?;
    std::fs::write(dir.join(format!("{name}.json")), serde_json::to_string_pretty(figures)?)?;
    Ok(())
}

/// The figures at the CPU share of `memory_mb`, against the physical floor.
pub(super) fn render_share(figures: &Value, memory_mb: u64) -> String {
    let cold = Cold(figures["functions"].as_object().unwrap());
    let mut lines = vec![
        format!(
            "cold_start at the {memory_mb} MB share of a CPU ({memory_mb}/1769 of one, 1 ms of CPU per {:.2} ms, a cgroup): {} cold starts and {} warm GET + POST per function; \
             raw: the physical floor (lambda_runtime on a current-thread runtime, one SigV4-signed HTTPS call per request through hyper and rustls, no SDK); \
             duration cost: a million requests' billed milliseconds (rounded up each) at {memory_mb} MB on arm64, beside the $0.20 every million requests cost",
            1769.0 / memory_mb as f64,
            figures["rounds"],
            figures["warm_requests"]
        ),
        String::new(),
    ];
    #[rustfmt::skip]
    let rows = [
        ("cold total (init + first invocation)", "cold_total_ms", "ms"),
        ("warm GET mean", "warm_get_mean_ms", "ms"),
        ("warm GET p50", "warm_get_p50_ms", "ms"),
        ("warm GET p99", "warm_get_p99_ms", "ms"),
        ("warm POST mean", "warm_post_mean_ms", "ms"),
        ("warm POST p50", "warm_post_p50_ms", "ms"),
        ("warm POST p99", "warm_post_p99_ms", "ms"),
        ("CPU per warm GET, median", "cpu_get_us", "µs"),
        ("CPU per warm POST, median", "cpu_post_us", "µs"),
        ("duration of a million GETs", "duration_usd_per_million_gets", "USD"),
        ("duration of a million creates", "duration_usd_per_million_posts", "USD"),
    ];
    lines.extend(cold.rows(&rows, "raw"));
    lines.push(String::new());
    lines.push("targets (ratios within this run, to the physical floor):".into());
    let to_raw = |name: &str, key: &str| cold.figure(name, key) / cold.figure("raw", key);
    #[rustfmt::skip]
    let targets = [
        ("warm GET mean: cognito / raw", to_raw("cognito", "warm_get_mean_ms"), limits::SHARE_GET_MEAN),
        ("warm POST mean: function (bounded) / raw", to_raw("function", "warm_post_mean_ms"), limits::SHARE_POST_MEAN_BOUNDED),
        ("CPU per warm GET: cognito / raw", to_raw("cognito", "cpu_get_us"), limits::SHARE_CPU_GET),
    ];
    lines
        .extend(targets.into_iter().map(|(label, value, limit)| at_most(label, value, limit, "x")));
    lines.join("\n")
}

pub(super) fn render_cold(figures: &Value) -> String {
    let cold = Cold(figures["functions"].as_object().unwrap());
    let mut lines = vec![
        format!(
            "cold_start: {} cold starts and {} warm GET + POST per function, interleaved; medians unless a percentile is named",
            figures["rounds"], figures["warm_requests"]
        ),
        "cognito: the function as deployed with Cognito (keys fetched over HTTPS at init, compiled-in roots); \
         cognito-bundle: the same trusting the system's bundle (SSL_CERT_FILE); function: keys inline; \
         es256: function with ES256 tokens (the others' are RS256, as Cognito signs them); \
         traced: function with every invocation sampled for X-Ray (the others', as most in Lambda, are not); \
         all with the per-owner bound but unbounded (MAX_PLANTS_PER_OWNER=0); \
         minimal: the floor (one conditional PutItem per create, one strongly consistent Query per listing). \
         Every function's DynamoDB calls, the floor's too, pass the recording proxy and the TLS front; \
         CPU: the function's own, from the scheduler (Linux only, else n/a)"
            .into(),
        String::new(),
    ];
    lines.extend(cold.table());
    lines.push(String::new());
    lines.push("targets (ratios within this run):".into());
    lines.extend(cold.targets());
    if cold.0.contains_key("before-cognito") {
        lines.extend(cold.compared());
    }
    let documents = &figures["xray_documents"];
    let received = "X-Ray documents received, all well-formed";
    lines.push(format!("{received:<62}{documents:>8}"));
    if let Some(bytes) = figures["arm64_bootstrap_bytes"].as_f64() {
        let (label, limit) = ("arm64 bootstrap from sam build", limits::ARM64_BOOTSTRAP_MB);
        lines.push(at_most(label, bytes / 1e6, limit, " MB"));
        let zipped = figures["arm64_zip_bytes"].as_f64().unwrap_or_default() / 1e6;
        lines.push(format!("{:<62}{zipped:>8.2} MB", "arm64 bootstrap zipped"));
    }
    lines.join("\n")
}

/// The cold-start figures, by function and key.
struct Cold<'a>(&'a serde_json::Map<String, Value>);

impl Cold<'_> {
    /// A figure; NaN where it is not known here (CPU time off Linux), which
    /// prints as `n/a`.
    fn figure(&self, name: &str, key: &str) -> f64 {
        self.0[name][key].as_f64().unwrap_or(f64::NAN)
    }

    /// `name`'s figure over the floor's (`minimal`), measured in the same run.
    fn ratio(&self, name: &str, key: &str) -> f64 {
        self.figure(name, key) / self.figure("minimal", key).max(f64::MIN_POSITIVE)
    }

    /// `name`'s figure less the floor's.
    fn over_floor(&self, name: &str, key: &str) -> f64 {
        self.figure(name, key) - self.figure("minimal", key)
    }

    /// A row per figure, a column per function, then two ratios to the floor.
    fn table(&self) -> Vec<String> {
        #[rustfmt::skip]
        let rows = [
            ("init (process start to first /next)", "init_ms", "ms"),
            ("first invocation after a cold start", "first_invocation_ms", "ms"),
            ("cold total (init + first invocation)", "cold_total_ms", "ms"),
            ("warm GET p50", "warm_get_p50_ms", "ms"),
            ("warm GET p99", "warm_get_p99_ms", "ms"),
            ("warm POST p50", "warm_post_p50_ms", "ms"),
            ("warm POST p99", "warm_post_p99_ms", "ms"),
            ("CPU per warm GET, median", "cpu_get_us", "µs"),
            ("CPU per warm POST, median", "cpu_post_us", "µs"),
            ("write units per create (billed)", "write_units_per_create", "WCU"),
            ("read units per GET (billed)", "read_units_per_get", "RCU"),
            ("peak RSS after the warm requests", "peak_rss_mib", "MiB"),
            ("binary size", "binary_bytes", "MB"),
        ];
        self.rows(&rows, "minimal")
    }

    /// A row per `(label, key, unit)`, a column per function, then the
    /// ratios of `cognito` and `function` to `floor`.
    fn rows(&self, rows: &[(&str, &str, &str)], floor: &str) -> Vec<String> {
        let names: String = self.0.keys().map(|name| format!("{name:>15}")).collect();
        let ratios = (format!("cog/{floor}"), format!("fn/{floor}"));
        let mut lines = vec![format!("{:<42}{names}{:>12}{:>12}", "figure", ratios.0, ratios.1)];
        for &(label, key, unit) in rows {
            let scale = if unit == "MB" { 1e-6 } else { 1.0 };
            let precision = if unit == "USD" { 4 } else { 2 };
            let cells: String = (self.0.keys())
                .map(|name| cell(self.figure(name, key) * scale, 15, precision))
                .collect();
            let to_floor = |name: &str| self.figure(name, key) / self.figure(floor, key);
            let (cognito, function) = (to_floor("cognito"), to_floor("function"));
            let label = format!("{label} ({unit})");
            lines.push(format!("{label:<42}{cells} {cognito:>11.2}x{function:>11.2}x"));
        }
        lines
    }

    fn targets(&self) -> Vec<String> {
        let first = |name: &str| {
            self.figure(name, "first_invocation_ms") / self.figure(name, "warm_get_p50_ms")
        };
        #[rustfmt::skip]
        let targets = [
            ("cold total: cognito / minimal (the DynamoDB floor)", self.ratio("cognito", "cold_total_ms"), limits::COLD_TOTAL, "x"),
            ("first invocation / warm GET p50 (cognito)", first("cognito"), limits::FIRST_INVOCATION, "x"),
            ("first invocation / warm GET p50 (function)", first("function"), limits::FIRST_INVOCATION, "x"),
            ("warm GET p50: cognito / minimal", self.ratio("cognito", "warm_get_p50_ms"), limits::WARM_GET_P50, "x"),
            ("CPU per warm GET: cognito - minimal", self.over_floor("cognito", "cpu_get_us"), limits::CPU_OVER_FLOOR_US, " µs"),
            ("CPU per warm POST: unbounded - minimal", self.over_floor("unbounded", "cpu_post_us"), limits::CPU_OVER_FLOOR_US, " µs"),
            ("warm GET p99: cognito / minimal", self.ratio("cognito", "warm_get_p99_ms"), limits::WARM_GET_P99, "x"),
            ("warm POST p50: function / minimal", self.ratio("function", "warm_post_p50_ms"), limits::WARM_POST_P50_BOUNDED, "x"),
            ("warm POST p50: unbounded / minimal", self.ratio("unbounded", "warm_post_p50_ms"), limits::WARM_POST_P50_UNBOUNDED, "x"),
            ("write units per accepted create (function)", self.figure("function", "write_units_per_create"), limits::WRITE_UNITS_BOUNDED, " WCU"),
            ("write units per accepted create (unbounded)", self.figure("unbounded", "write_units_per_create"), limits::WRITE_UNITS_UNBOUNDED, " WCU"),
            ("peak RSS (cognito)", self.figure("cognito", "peak_rss_mib"), limits::PEAK_RSS_MIB, " MiB"),
            ("stripped x86_64 binary (function)", self.figure("function", "binary_bytes") / 1e6, limits::BINARY_MB, " MB"),
        ];
        (targets.into_iter())
            .map(|(label, value, limit, unit)| at_most(label, value, limit, unit))
            .collect()
    }

    /// The function against the build compared (`--compare`), in the same
    /// configuration.
    fn compared(&self) -> Vec<String> {
        let mut lines = vec![
            String::new(),
            "against the build compared (--compare), same configuration:".into(),
        ];
        let now_over_before =
            |key: &str| self.figure("cognito", key) / self.figure("before-cognito", key);
        let label = "cold total, cognito: now / before";
        let cold = now_over_before("cold_total_ms");
        lines.push(at_most(label, cold, limits::COLD_TOTAL_AGAINST_BEFORE, "x"));
        for (label, key) in [
            ("init", "init_ms"),
            ("first invocation", "first_invocation_ms"),
            ("warm GET p50", "warm_get_p50_ms"),
            ("warm POST p50", "warm_post_p50_ms"),
            ("CPU per warm GET", "cpu_get_us"),
            ("CPU per warm POST", "cpu_post_us"),
            ("peak RSS", "peak_rss_mib"),
        ] {
            let ratio = now_over_before(key);
            let label = format!("{label}, cognito: now / before");
            lines.push(format!("{label:<62}{ratio:>8.2}x"));
        }
        lines
    }
}

/// A target's line: the figure, its limit, and `ok`, `MISSED`, or why a
/// miss is the machine's ([`missed_targets`] reads it).
fn target_line(label: &str, value: f64, unit: &str, limit: &str, verdict: &str) -> String {
    format!("{label:<62}{value:>8.2}{unit}  (target {limit}{unit})  {verdict}")
}

/// The line of a target that `value` must not exceed; a figure not
/// measured on this platform misses nothing, and says so.
fn at_most(label: &str, value: f64, limit: f64, unit: &str) -> String {
    let verdict = match value {
        value if value.is_nan() => "unavailable on this platform",
        value if value <= limit => "ok",
        _ => "MISSED",
    };
    target_line(label, value, unit, &format!("<= {limit}"), verdict)
}

/// A figure in a column `width` wide, `n/a` where it is not known.
fn cell(value: f64, width: usize, precision: usize) -> String {
    if value.is_nan() {
        format!("{:>width$}", "n/a")
    } else {
        format!("{value:>width$.precision$}")
    }
}

pub(super) fn mean(samples: &[f64]) -> f64 {
    samples.iter().sum::<f64>() / samples.len().max(1) as f64
}

pub(super) fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let middle = samples.len() / 2;
    if samples.len().is_multiple_of(2) {
        (samples[middle - 1] + samples[middle]) / 2.0
    } else {
        samples[middle]
    }
}

pub(super) fn percentile(mut samples: Vec<f64>, fraction: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let index = (fraction * (samples.len() - 1) as f64).round() as usize;
    samples[index.min(samples.len() - 1)]
}
