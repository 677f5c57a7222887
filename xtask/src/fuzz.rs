//! `cargo xtask fuzz`: fuzzes the request-to-response path without the
//! network: the request body (NewPlant parsing), the Authorization header
//! (bearer parsing and JWT verification), `limit` and `cursor`. Each target
//! runs for FUZZ_SECONDS (30; longer: FUZZ_SECONDS=600 scripts/fuzz) and must
//! end with no crash and no panic; prints executions per target. Targets
//! run side by side, one per core.
//!
//! FUZZ_BUILD is `release` (the default, for long runs) or `dev`: the full
//! test run uses `dev`, whose unoptimised targets build in about half the
//! time and run 10 to 20 times fewer inputs, which is what a smoke run needs.
//! cargo fuzz needs nightly-only compiler flags: RUSTC_BOOTSTRAP=1 lets the
//! machine's stable toolchain accept them. cargo-fuzz is installed into
//! .tools/cargo.

use std::process::Command;

use xtask::process::{run, tail};
use xtask::tools::ensure_cargo_tool;
use xtask::{Result, log, tools_dir};

const TARGETS: [&str; 5] = ["body", "authorization", "limit", "cursor", "scopes"];

/// cargo-fuzz, installed into .tools/cargo on first use.
pub fn ensure_cargo_fuzz() -> Result {
    ensure_cargo_tool("cargo-fuzz", "cargo-fuzz", "0.13.2")
}

fn cargo_fuzz() -> Command {
    let mut command = Command::new("cargo");
    command.arg("fuzz").env("RUSTC_BOOTSTRAP", "1");
    command
}

pub fn fuzz(seconds: u64, build: &str) -> Result {
    ensure_cargo_fuzz()?;
    // One target/ for everything; the instrumented build lives in its own corner.
    let mut flags = vec!["--fuzz-dir", "fuzz", "--target-dir", "target/fuzz"];
    match build {
        "release" => {}
        "dev" => flags.push("--dev"),
        _ => return Err("FUZZ_BUILD is release or dev".into()),
    }
    log!("building the fuzz targets");
    run(cargo_fuzz().arg("build").args(&flags))?;
    // libFuzzer runs one target on one core: as many targets at once as
    // there are cores, each for the full time.
    let at_once = std::thread::available_parallelism().map_or(1, usize::from);
    let mut summary = Vec::new();
    for targets in TARGETS.chunks(at_once) {
        let outcomes = std::thread::scope(|threads| {
            let running: Vec<_> = targets
                .iter()
                .map(|target| threads.spawn(|| fuzz_target(target, seconds, &flags)))
                .collect();
            running
                .into_iter()
                .map(|thread| thread.join().expect("a fuzzing thread panicked"))
                .collect::<Vec<_>>()
        });
        for outcome in outcomes {
            summary.push(outcome?);
        }
    }
    println!("{}", summary.join("\n"));
    Ok(())
}

/// Fuzzes one target for `seconds`; its summary line, or an error with the
/// end of its log.
fn fuzz_target(target: &str, seconds: u64, flags: &[&str]) -> Result<String> {
    log!("fuzzing {target} for {seconds}s");
    let corpus = format!("fuzz/corpus/{target}");
    std::fs::create_dir_all(&corpus)?;
    let log_path = tools_dir().join(format!("fuzz-{target}.log"));
    let log_file = std::fs::File::create(&log_path)?;
    let fuzzed = run(cargo_fuzz()
        .arg("run")
        .args(flags)
        .args([target, &corpus, &format!("fuzz/seeds/{target}"), "--"])
        .arg(format!("-max_total_time={seconds}"))
        .arg("-print_final_stats=1")
        .stdout(log_file.try_clone()?)
        .stderr(log_file));
    if let Err(error) = fuzzed {
        return Err(format!(
            "fuzz target {target} failed ({error}): see fuzz/artifacts/{target}\n{}",
            tail(&log_path, 40)
        )
        .into());
    }
    let printed = std::fs::read_to_string(&log_path)?;
    let runs = printed
        .lines()
        .find_map(|line| line.strip_prefix("stat::number_of_executed_units:"))
        .map_or("?".to_owned(), |runs| runs.trim().to_owned());
    Ok(format!(
        "fuzz {target}: {runs} executions in {seconds}s, 0 crashes"
    ))
}
