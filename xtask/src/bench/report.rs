//! The reports: each phase's figures (a column per function, then ratios to
//! its floor) and the targets, printed and written to target/bench-results/.

use std::path::Path;

use plant_store_local_support::Result;
use serde_json::Value;

/// The benchmark's targets, in one place: the most each figure may be.
/// Ratios are to a floor measured in the same run.
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
    /// Write units per accepted create, with the bound and without.
    pub(crate) const WRITE_UNITS_BOUNDED: f64 = 2.0;
    pub(crate) const WRITE_UNITS_UNBOUNDED: f64 = 1.0;
    pub(crate) const PEAK_RSS_MIB: f64 = 9.3;
    /// The stripped x86_64 release binary.
    pub(crate) const BINARY_MB: f64 = 7.6;
    /// The arm64 `bootstrap` that `sam build` makes.
    pub(crate) const ARM64_BOOTSTRAP_MB: f64 = 6.0;
    /// At 128 MB's share of a CPU, against the physical floor (`raw`, the
    /// same signed calls: a listing's Query, a bounded create's UpdateItem
    /// and PutItem): a warm GET's mean and CPU; a bounded create's mean,
    /// whose two calls each pay the SDK's cost and whose larger CPU meets
    /// the end of the 1 ms-per-13.82 ms period more often than the floor's.
    pub(crate) const SHARE_GET_MEAN: f64 = 1.5;
    pub(crate) const SHARE_POST_MEAN_BOUNDED: f64 = 2.0;
    pub(crate) const SHARE_CPU_GET: f64 = 1.5;
}

/// The rows of the full-CPU table: (label, key, unit).
pub(super) const FULL_CPU_ROWS: &[(&str, &str, &str)] = &[
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

/// The rows of the table at 128 MB's share.
pub(super) const SHARE_ROWS: &[(&str, &str, &str)] = &[
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

/// A phase's figures, by function and key.
pub(super) struct Figures<'a>(pub(super) &'a serde_json::Map<String, Value>);

impl Figures<'_> {
    /// A figure; NaN where it is not known here (CPU time off Linux), which
    /// prints as `n/a`.
    pub(super) fn get(&self, name: &str, key: &str) -> f64 {
        let value = self.0.get(name).and_then(|figures| figures[key].as_f64());
        value.unwrap_or(f64::NAN)
    }

    /// `name`'s figure over `floor`'s.
    pub(super) fn ratio(&self, name: &str, floor: &str, key: &str) -> f64 {
        self.get(name, key) / self.get(floor, key)
    }

    /// The report: `heading`, a row per `(label, key, unit)` and a column
    /// per function, with the ratios of `cognito` and `function` to
    /// `floor`; then each target line (`at_most`, `figure`).
    pub(super) fn render(
        &self,
        heading: &str,
        rows: &[(&str, &str, &str)],
        floor: &str,
        targets: &[String],
    ) -> String {
        let names: String = self.0.keys().map(|name| format!("{name:>15}")).collect();
        let ratios = (format!("cog/{floor}"), format!("fn/{floor}"));
        let mut lines = vec![heading.to_owned(), String::new()];
        lines.push(format!("{:<42}{names}{:>12}{:>12}", "figure", ratios.0, ratios.1));
        for &(label, key, unit) in rows {
            let scale = if unit == "MB" { 1e-6 } else { 1.0 };
            let precision = if unit == "USD" { 4 } else { 2 };
            let cells: String = (self.0.keys())
                .map(|name| match self.get(name, key) * scale {
                    value if value.is_nan() => format!("{:>15}", "n/a"),
                    value => format!("{value:>15.precision$}"),
                })
                .collect();
            let (cognito, function) =
                (self.ratio("cognito", floor, key), self.ratio("function", floor, key));
            let label = format!("{label} ({unit})");
            lines.push(format!("{label:<42}{cells} {cognito:>11.2}x{function:>11.2}x"));
        }
        lines.push(String::new());
        lines.extend(targets.iter().cloned());
        lines.join("\n")
    }
}

/// A target's line: `value` must not exceed `limit`; a figure not measured
/// on this platform misses nothing, and says so ([`missed_targets`] reads
/// the verdict).
pub(super) fn at_most(label: &str, value: f64, limit: f64, unit: &str) -> String {
    let verdict = match value {
        value if value.is_nan() => "unavailable on this platform",
        value if value <= limit => "ok",
        _ => "MISSED",
    };
    format!("{label:<62}{value:>8.2}{unit}  (target <= {limit}{unit})  {verdict}")
}

/// A figure's line, held to no target.
pub(super) fn figure(label: &str, value: f64, unit: &str) -> String {
    format!("{label:<62}{value:>8.2}{unit}")
}

/// The lines of this run's reports that name a missed target.
pub(super) fn missed_targets(results_dir: &Path) -> Result<Vec<String>> {
    let mut missed = Vec::new();
    for report in ["cold_start", "cold_start_128mb"] {
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

pub(super) fn mean(samples: &[f64]) -> f64 {
    samples.iter().sum::<f64>() / samples.len().max(1) as f64
}

pub(super) fn percentile(mut samples: Vec<f64>, fraction: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let index = (fraction * (samples.len() - 1) as f64).round() as usize;
    samples[index.min(samples.len() - 1)]
}
