//! `cargo xtask fuzz`: each target ([`TARGETS`]) for `--seconds`, built
//! `release` (with AddressSanitizer) or `dev` (the gate's smoke run);
//! `RUSTC_BOOTSTRAP=1` lets stable take cargo fuzz's nightly flags.

use std::process::Command;

use plant_store_local_support::process::{GRACE, run_logged, start};
use plant_store_local_support::tools::ensure_cargo_tool;
use plant_store_local_support::{Result, log, tools_dir};

const TARGETS: [&str; 7] =
    ["event", "body", "authorization", "query", "scopes", "subject", "key_set"];

/// Builds every target (`release` or `dev`), then fuzzes each for `seconds`;
/// returns a summary line per target.
pub(crate) fn fuzz(seconds: u64, build: &str) -> Result<String> {
    ensure_cargo_tool("cargo-fuzz", "cargo-fuzz", "0.13.2", Command::new("cargo"))?;
    // One target/ for everything; the instrumented build lives in its own corner.
    let mut flags = vec!["--fuzz-dir", "fuzz", "--target-dir", "target/fuzz"];
    match build {
        "release" => {}
        "dev" => flags.extend(["--dev", "--sanitizer", "none"]),
        _ => return Err("a build is release or dev".into()),
    }
    log!("building the fuzz targets ({build})");
    run_logged(cargo_fuzz().arg("build").args(&flags), &tools_dir().join("fuzz-build.log"))?;
    let mut summary = Vec::new();
    for target in TARGETS {
        log!("fuzzing {target} for {seconds}s");
        let corpus = format!("fuzz/corpus/{target}");
        std::fs::create_dir_all(&corpus)?;
        let log = tools_dir().join(format!("fuzz-{target}.log"));
        let mut command = cargo_fuzz();
        command.arg("run").args(&flags);
        command.args([target, &corpus, &format!("fuzz/seeds/{target}"), "--"]);
        command.arg(format!("-max_total_time={seconds}")).arg("-print_final_stats=1");
        // libFuzzer reports on stderr: both streams go to the log.
        let fuzzing = start(&format!("fuzz target {target}"), command, GRACE, Some(&log))?;
        if let Err(error) = fuzzing.finish() {
            return Err(format!("{error}\nthe input is in fuzz/artifacts/{target}").into());
        }
        let printed = std::fs::read_to_string(&log)?;
        let runs = printed
            .lines()
            .find_map(|line| line.strip_prefix("stat::number_of_executed_units:"))
            .map_or("?", str::trim);
        summary.push(format!("fuzz {target}: {runs} executions in {seconds}s, 0 crashes"));
    }
    Ok(summary.join("\n"))
}

fn cargo_fuzz() -> Command {
    let mut command = Command::new("cargo");
    command.arg("fuzz").env("RUSTC_BOOTSTRAP", "1");
    command
}
