//! The reports: each benchmark's table, printed and written with its
//! figures to target/bench-results/, and the targets it is held to.

use std::collections::BTreeMap;
use std::path::Path;

use plant_store_local_support::Result;
use serde_json::Value;

use super::drive::CONCURRENCY;

/// The benchmark's targets, in one place: the most each figure may be
/// (the throughput ratio: the least). Ratios are to the floor (`minimal`)
/// measured in the same run.
pub mod limits {
    /// Cold total (init and first invocation), cognito / minimal.
    pub const COLD_TOTAL: f64 = 1.0;
    /// The first invocation after a cold start / a warm GET's p50.
    pub const FIRST_INVOCATION: f64 = 1.15;
    pub const WARM_GET_P50: f64 = 1.1;
    pub const WARM_GET_P99: f64 = 1.3;
    /// A create with the bound makes two writes where the floor makes one.
    pub const WARM_POST_P50_BOUNDED: f64 = 2.0;
    pub const WARM_POST_P50_UNBOUNDED: f64 = 1.1;
    /// Write units per accepted create, with the bound and without.
    pub const WRITE_UNITS_BOUNDED: f64 = 2.0;
    pub const WRITE_UNITS_UNBOUNDED: f64 = 1.0;
    pub const PEAK_RSS_MIB: f64 = 9.3;
    /// The stripped x86_64 release binary.
    pub const BINARY_MB: f64 = 7.6;
    /// The arm64 `bootstrap` that `sam build` makes.
    pub const ARM64_BOOTSTRAP_MB: f64 = 6.0;
    /// Requests per second at concurrency 8 / at 1, in one process.
    pub const THROUGHPUT_SCALING: f64 = 3.0;
}

/// The lines of this run's reports that name a missed target.
pub fn missed_targets(results_dir: &Path) -> Result<Vec<String>> {
    let mut missed = Vec::new();
    for report in ["cold_start", "throughput", "burst"] {
        let text = std::fs::read_to_string(results_dir.join(format!("{report}.txt")))?;
        let lines = text
            .lines()
            .filter(|line| line.trim_end().ends_with("MISSED"));
        missed.extend(lines.map(str::to_owned));
    }
    Ok(missed)
}

/// Prints the report and keeps it, with its figures, in `dir`.
pub fn write_results(dir: &Path, name: &str, report: &str, figures: &Value) -> Result {
    println!("{report}");
    std::fs::write(dir.join(format!("{name}.txt")), format!("{report}\n"))?;
    std::fs::write(
        dir.join(format!("{name}.json")),
        serde_json::to_string_pretty(figures)?,
    )?;
    Ok(())
}

pub fn render_cold(figures: &Value) -> String {
    let functions = figures["functions"].as_object().unwrap();
    let figure = |name: &str, key: &str| functions[name][key].as_f64().unwrap();
    #[rustfmt::skip]
    let rows = [
        ("init (process start to first /next)", "init_ms", "ms"),
        ("first invocation after a cold start", "first_invocation_ms", "ms"),
        ("cold total (init + first invocation)", "cold_total_ms", "ms"),
        ("warm GET p50", "warm_get_p50_ms", "ms"),
        ("warm GET p99", "warm_get_p99_ms", "ms"),
        ("warm POST p50", "warm_post_p50_ms", "ms"),
        ("warm POST p99", "warm_post_p99_ms", "ms"),
        ("write units per create (billed)", "write_units_per_create", "WCU"),
        ("read units per GET (billed)", "read_units_per_get", "RCU"),
        ("peak RSS after the warm requests", "peak_rss_mib", "MiB"),
        ("binary size", "binary_bytes", "MB"),
    ];
    let names: String = functions.keys().map(|name| format!("{name:>15}")).collect();
    let mut lines = vec![
        format!(
            "cold_start: {} cold starts and {} warm GET + POST per function, interleaved; medians unless a percentile is named",
            figures["rounds"], figures["warm_requests"]
        ),
        "cognito: the function as deployed with Cognito (keys fetched over HTTPS at init, compiled-in roots); \
         cognito-bundle: the same trusting the system's bundle (SSL_CERT_FILE); function: keys inline; \
         all with the per-owner bound but unbounded (MAX_PLANTS_PER_OWNER=0); \
         minimal: the floor (one conditional PutItem per create, one Query per listing)"
            .into(),
        String::new(),
        format!("{:<42}{names}{:>12}{:>12}", "figure", "cog/minimal", "fn/minimal"),
    ];
    let floor = |key: &str| figure("minimal", key).max(f64::MIN_POSITIVE);
    for (label, key, unit) in rows {
        let scale = if unit == "MB" { 1e-6 } else { 1.0 };
        let cells: String = functions
            .keys()
            .map(|name| format!("{:>15.2}", figure(name, key) * scale))
            .collect();
        lines.push(format!(
            "{:<42}{cells} {:>11.2}x{:>11.2}x",
            format!("{label} ({unit})"),
            figure("cognito", key) / floor(key),
            figure("function", key) / floor(key)
        ));
    }
    let target = |label: &str, value: f64, limit: f64, unit: &str| {
        let verdict = if value <= limit { "ok" } else { "MISSED" };
        format!("{label:<62}{value:>8.2}{unit}  (target <= {limit}{unit})  {verdict}")
    };
    let ratio = |name: &str, key: &str| figure(name, key) / figure("minimal", key);
    let first = |name: &str| figure(name, "first_invocation_ms") / figure(name, "warm_get_p50_ms");
    #[rustfmt::skip]
    let targets = [
        ("cold total: cognito / minimal (the DynamoDB floor)", ratio("cognito", "cold_total_ms"), limits::COLD_TOTAL, "x"),
        ("first invocation / warm GET p50 (cognito)", first("cognito"), limits::FIRST_INVOCATION, "x"),
        ("first invocation / warm GET p50 (function)", first("function"), limits::FIRST_INVOCATION, "x"),
        ("warm GET p50: cognito / minimal", ratio("cognito", "warm_get_p50_ms"), limits::WARM_GET_P50, "x"),
        ("warm GET p99: cognito / minimal", ratio("cognito", "warm_get_p99_ms"), limits::WARM_GET_P99, "x"),
        ("warm POST p50: function / minimal", ratio("function", "warm_post_p50_ms"), limits::WARM_POST_P50_BOUNDED, "x"),
        ("warm POST p50: unbounded / minimal", ratio("unbounded", "warm_post_p50_ms"), limits::WARM_POST_P50_UNBOUNDED, "x"),
        ("write units per accepted create (function)", figure("function", "write_units_per_create"), limits::WRITE_UNITS_BOUNDED, " WCU"),
        ("write units per accepted create (unbounded)", figure("unbounded", "write_units_per_create"), limits::WRITE_UNITS_UNBOUNDED, " WCU"),
        ("peak RSS (cognito)", figure("cognito", "peak_rss_mib"), limits::PEAK_RSS_MIB, " MiB"),
        ("stripped x86_64 binary (function)", figure("function", "binary_bytes") / 1e6, limits::BINARY_MB, " MB"),
    ];
    lines.push(String::new());
    lines.push("targets (ratios within this run):".into());
    for (label, value, limit, unit) in targets {
        lines.push(target(label, value, limit, unit));
    }
    if functions.contains_key("before-cognito") {
        lines.push(String::new());
        lines.push("against the build compared (--compare), same configuration:".into());
        let compared = [
            ("cold total", "cold_total_ms"),
            ("init", "init_ms"),
            ("peak RSS", "peak_rss_mib"),
        ];
        for (label, key) in compared {
            let ratio = figure("cognito", key) / figure("before-cognito", key);
            lines.push(format!(
                "{:<62}{ratio:>8.2}x",
                format!("{label}, cognito: now / before")
            ));
        }
    }
    let documents = &figures["xray_documents"];
    lines.push(format!(
        "{:<62}{documents:>8}",
        "X-Ray documents received, all well-formed"
    ));
    if let Some(bytes) = figures["arm64_bootstrap_bytes"].as_f64() {
        let (label, limit) = ("arm64 bootstrap from sam build", limits::ARM64_BOOTSTRAP_MB);
        lines.push(target(label, bytes / 1e6, limit, " MB"));
        let zipped = figures["arm64_zip_bytes"].as_f64().unwrap_or_default() / 1e6;
        lines.push(format!("{:<62}{zipped:>8.2} MB", "arm64 bootstrap zipped"));
    }
    lines.join("\n")
}

pub fn render_throughput(figures: &Value) -> String {
    let (low, high) = (CONCURRENCY[0], CONCURRENCY[1]);
    let workloads = figures["workloads"].as_object().unwrap();
    let at = |by_level: &Value, level: usize, key: &str| {
        by_level[format!("concurrency_{level}")][key]
            .as_f64()
            .unwrap()
    };
    let header: String = CONCURRENCY
        .map(|level| {
            format!(
                "{:>12}{:>10}{:>8}{:>9}",
                format!("c={level} req/s"),
                "in flight",
                "cpu ms",
                "machine"
            )
        })
        .concat();
    let mut lines = vec![
        format!(
            "throughput: one process, {} requests handed out at once, {} rounds; medians. cpu: the function's CPU time per request; machine: how busy both cores were",
            figures["requests_per_batch"], figures["rounds"]
        ),
        String::new(),
        format!("{:<14}{header}{:>11}", "", format!("c={high}/c={low}")),
    ];
    let mut ratios = BTreeMap::new();
    for (workload, by_function) in workloads {
        for (name, by_level) in by_function.as_object().unwrap() {
            let cells: String = CONCURRENCY
                .iter()
                .map(|&level| {
                    format!(
                        "{:>12.0}{:>10}{:>8.3}{:>8.0}%",
                        at(by_level, level, "requests_per_second"),
                        at(by_level, level, "max_in_flight"),
                        at(by_level, level, "cpu_ms_per_request"),
                        at(by_level, level, "machine_busy_percent")
                    )
                })
                .collect();
            let ratio = at(by_level, high, "requests_per_second")
                / at(by_level, low, "requests_per_second");
            ratios.insert((workload.clone(), name.clone()), ratio);
            lines.push(format!(
                "{:<14}{cells}{ratio:>10.2}x",
                format!("{workload} {name}")
            ));
        }
    }
    let get_function = &figures["workloads"]["GET"]["function"];
    lines.push(String::new());
    let peak = at(get_function, high, "peak_rss_mib");
    lines.push(format!(
        "{:<62}{peak:>8.2} MiB",
        format!("peak RSS of the function at c={high}")
    ));
    lines.push(String::new());
    let cores = std::thread::available_parallelism().map_or(0, |cores| cores.get());
    lines.push(format!(
        "cores in use at c={high} (of {cores}), by process:"
    ));
    for (workload, by_function) in workloads {
        for (name, by_level) in by_function.as_object().unwrap() {
            let cores = by_level[format!("concurrency_{high}")]["cores_used"]
                .as_object()
                .unwrap();
            let used: Vec<String> = cores
                .iter()
                .map(|(process, used)| format!("{process} {:.2}", used.as_f64().unwrap()))
                .collect();
            lines.push(format!(
                "  {:<14}{}",
                format!("{workload} {name}"),
                used.join("  ")
            ));
        }
    }
    // The target: c=high at least 3x c=low. Where the minimal function, on
    // the same machine and store, cannot reach it either and the function
    // keeps up with it, the limit is the machine, not the function.
    lines.push(String::new());
    for (workload, by_function) in workloads {
        let rps = |name: &str| at(&by_function[name], high, "requests_per_second");
        let keeps_up = rps("function") / rps("minimal");
        lines.push(format!(
            "{:<62}{keeps_up:>8.2}x",
            format!("{workload}: function / minimal at c={high}")
        ));
        if by_function.get("before-inline").is_some() {
            let ratio = rps("function") / rps("before-inline");
            lines.push(format!(
                "{:<62}{ratio:>8.2}x",
                format!("{workload}: function / before at c={high}")
            ));
        }
        let function_ratio = ratios[&(workload.clone(), "function".to_owned())];
        let minimal_ratio = ratios[&(workload.clone(), "minimal".to_owned())];
        let verdict = if function_ratio >= limits::THROUGHPUT_SCALING {
            "ok".to_owned()
        } else if minimal_ratio < limits::THROUGHPUT_SCALING && keeps_up >= 0.9 {
            format!("machine-bound: minimal {minimal_ratio:.2}x")
        } else {
            "MISSED".to_owned()
        };
        let label = format!("{workload}: throughput c={high} / c={low} (function)");
        let limit = limits::THROUGHPUT_SCALING;
        lines.push(format!(
            "{label:<62}{function_ratio:>8.2}x  (target >= {limit}x)  {verdict}"
        ));
    }
    lines.join("\n")
}

pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let middle = samples.len() / 2;
    if samples.len().is_multiple_of(2) {
        (samples[middle - 1] + samples[middle]) / 2.0
    } else {
        samples[middle]
    }
}

pub fn percentile(mut samples: Vec<f64>, fraction: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let index = (fraction * (samples.len() - 1) as f64).round() as usize;
    samples[index.min(samples.len() - 1)]
}
