//! Each fuzz target (fuzz/Cargo.toml's binaries) for `seconds`: `cargo
//! xtask fuzz` builds them optimised and instrumented (AddressSanitizer,
//! coverage-guided); the gate runs the workspace's own debug build of them.

use std::process::Command;

use plant_store_local_support::process::{GRACE, output, run_logged, start};
use plant_store_local_support::tools::ensure_cargo_tool;
use plant_store_local_support::{Result, log, root, tools_dir};
use serde_json::Value;

/// Builds every target instrumented (`RUSTC_BOOTSTRAP=1` lets stable take
/// cargo fuzz's nightly flags), then fuzzes each for `seconds`.
pub(crate) fn guided(seconds: u64) -> Result<String> {
    ensure_cargo_tool("cargo-fuzz", "cargo-fuzz", "0.13.2", Command::new("cargo"))?;
    let cargo_fuzz = |command: &str| {
        let mut cargo = Command::new("cargo");
        cargo.args(["fuzz", command, "--fuzz-dir", "fuzz", "--target-dir", "target/fuzz"]);
        // cargo fuzz's own release profile, not the function's (LTO, one
        // codegen unit, size), which would make each build minutes longer.
        for (setting, value) in
            [("LTO", "false"), ("CODEGEN_UNITS", "16"), ("OPT_LEVEL", "3"), ("STRIP", "false")]
        {
            cargo.env(format!("CARGO_PROFILE_RELEASE_{setting}"), value);
        }
        cargo.env("CARGO_PROFILE_RELEASE_DEBUG", "line-tables-only").env("RUSTC_BOOTSTRAP", "1");
        cargo
    };
    log!("building the fuzz targets, instrumented");
    run_logged(&mut cargo_fuzz("build"), &tools_dir().join("fuzz-build.log"))?;
    fuzz_each(seconds, |target, corpora, flags| {
        let mut command = cargo_fuzz("run");
        command.arg(target).args(corpora).arg("--").args(flags);
        command
    })
}

/// Each target of the workspace's debug build (`cargo build --workspace`)
/// on its seeds and corpus, then on blind mutations of them for `seconds`:
/// libFuzzer without coverage to guide it.
pub(crate) fn blind(seconds: u64) -> Result<String> {
    fuzz_each(seconds, |target, corpora, flags| {
        let mut command = Command::new(root().join("target/debug").join(target));
        command.args(corpora).args(flags);
        command
    })
}

/// Runs `fuzzer` of each target on its corpus and seeds, with libFuzzer's
/// flags, for `seconds`; a summary line per target.
fn fuzz_each(
    seconds: u64,
    fuzzer: impl Fn(&str, [String; 2], [String; 4]) -> Command,
) -> Result<String> {
    let mut summary = Vec::new();
    for target in targets()? {
        log!("fuzzing {target} for {seconds}s");
        let (corpus, artifacts) =
            (format!("fuzz/corpus/{target}"), format!("fuzz/artifacts/{target}/"));
        std::fs::create_dir_all(root().join(&corpus))?;
        std::fs::create_dir_all(root().join(&artifacts))?;
        let log = tools_dir().join(format!("fuzz-{target}.log"));
        let flags = [
            format!("-max_total_time={seconds}"),
            "-print_final_stats=1".into(),
            // Crashes where cargo fuzz keeps them; the function's log lines (stdout) closed.
            format!("-artifact_prefix={artifacts}"),
            "-close_fd_mask=1".into(),
        ];
        let mut command = fuzzer(&target, [corpus, format!("fuzz/seeds/{target}")], flags);
        command.current_dir(root());
        // libFuzzer reports on stderr: both streams go to the log.
        let fuzzing = start(&format!("fuzz target {target}"), command, GRACE, Some(&log))?;
        if let Err(error) = fuzzing.finish() {
            return Err(format!("{error}\nthe input is in {artifacts}").into());
        }
        let printed = std::fs::read_to_string(&log)?;
        let stat = "stat::number_of_executed_units:";
        let runs = printed.lines().find_map(|line| line.strip_prefix(stat)).map_or("?", str::trim);
        summary.push(format!("fuzz {target}: {runs} executions in {seconds}s, 0 crashes"));
    }
    Ok(summary.join("\n"))
}

/// The fuzz targets: the binaries of the fuzz package, as cargo reads its manifest.
fn targets() -> Result<Vec<String>> {
    let metadata = ["metadata", "--no-deps", "--locked", "--format-version", "1"];
    let metadata: Value = serde_json::from_str(&output(Command::new("cargo").args(metadata))?)?;
    let mut packages = metadata["packages"].as_array().into_iter().flatten();
    let fuzz = packages.find(|package| package["name"] == "plant-store-fuzz");
    let targets =
        fuzz.and_then(|package| package["targets"].as_array()).ok_or("no fuzz package")?;
    Ok(targets.iter().filter_map(|target| target["name"].as_str().map(str::to_owned)).collect())
}
