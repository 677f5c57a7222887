//! `cargo xtask fuzz`: fuzzes the request-to-response path without the
//! network: whole events through the invocation, the request body (NewPlant
//! parsing), the Authorization header (bearer parsing and JWT verification),
//! `limit`, `cursor`, the scope claims and the subject ([`TARGETS`]). Each target
//! runs for `--seconds` (30; longer: `scripts/fuzz --seconds 600`) and must
//! end with no crash and no panic; prints executions per target. Targets
//! run side by side, one per core.
//!
//! The build ([`Build`], `--build`) is `release` (the default, for long
//! runs) or `dev`; the full test run always builds `dev`, which is what a
//! smoke run needs.
//! cargo fuzz needs nightly-only compiler flags: RUSTC_BOOTSTRAP=1 lets the
//! machine's stable toolchain accept them. cargo-fuzz is installed into
//! .tools/cargo.

use std::process::Command;

use plant_store_local_support::process::{GRACE, Started, start};
use plant_store_local_support::tools::ensure_cargo_tool;
use plant_store_local_support::{Result, log, tools_dir};

const TARGETS: [&str; 8] =
    ["event", "body", "authorization", "limit", "cursor", "scopes", "subject", "key_set"];

/// cargo-fuzz, installed into .tools/cargo on first use, its build at
/// `priority` like the fuzzing's own.
fn ensure_cargo_fuzz(priority: Priority) -> Result {
    ensure_cargo_tool("cargo-fuzz", "cargo-fuzz", "0.13.2", cargo(priority))
}

/// `cargo` at `priority`.
fn cargo(priority: Priority) -> Command {
    match priority {
        Priority::Normal => Command::new("cargo"),
        Priority::Idle => {
            let mut nice = Command::new("nice");
            nice.args(["-n", "19", "cargo"]);
            nice
        }
    }
}

fn cargo_fuzz(priority: Priority) -> Command {
    let mut command = cargo(priority);
    command.arg("fuzz").env("RUSTC_BOOTSTRAP", "1");
    command
}

pub fn fuzz(seconds: u64, build: Build) -> Result {
    let build = start_build(build, Priority::Normal)?;
    println!("{}", fuzz_targets(build, seconds, Priority::Normal)?);
    Ok(())
}

/// How the targets are built: optimised with AddressSanitizer (`release`,
/// for long runs), or neither (`dev`, the smoke run: about half the build
/// time, far fewer inputs per second). The function forbids unsafe code, so
/// ASan watches only its dependencies' (a long run's job); without it the
/// dev build took 227 s of CPU against 290 s at bdcdc10.
#[derive(Clone, Copy)]
pub enum Build {
    Release,
    Dev,
}

impl std::str::FromStr for Build {
    type Err = String;

    fn from_str(build: &str) -> Result<Self, String> {
        match build {
            "release" => Ok(Self::Release),
            "dev" => Ok(Self::Dev),
            _ => Err("a build is release or dev".to_owned()),
        }
    }
}

/// How the build and the runs share the machine.
#[derive(Clone, Copy)]
pub enum Priority {
    Normal,
    /// At the lowest CPU priority (nice 19): it takes what the other work
    /// of the moment leaves idle, and slows that work barely at all.
    Idle,
}

/// The instrumented build of every target, running in the background.
/// Stopped with the task if it is not finished.
pub struct FuzzBuild {
    process: Started,
    flags: Vec<&'static str>,
}

pub fn start_build(build: Build, priority: Priority) -> Result<FuzzBuild> {
    ensure_cargo_fuzz(priority)?;
    // One target/ for everything; the instrumented build lives in its own corner.
    let mut flags = vec!["--fuzz-dir", "fuzz", "--target-dir", "target/fuzz"];
    if let Build::Dev = build {
        flags.extend(["--dev", "--sanitizer", "none"]);
    }
    log!("building the fuzz targets");
    let log = tools_dir().join("fuzz-build.log");
    let mut command = cargo_fuzz(priority);
    let process = start("the fuzz build", command.arg("build").args(&flags), GRACE, Some(&log))?;
    Ok(FuzzBuild { process, flags })
}

/// Waits for `build`, then fuzzes every target for `seconds`, as many at
/// once as there are cores (libFuzzer runs a target on one core); at
/// [`Priority::Idle`] they take only what other work leaves idle, and
/// still each runs its full `seconds`. Returns a summary line per target.
pub fn fuzz_targets(build: FuzzBuild, seconds: u64, priority: Priority) -> Result<String> {
    build.process.finish()?;
    let at_once = std::thread::available_parallelism().map_or(1, usize::from);
    let mut summary = Vec::new();
    for targets in TARGETS.chunks(at_once) {
        let outcomes = std::thread::scope(|threads| {
            let running: Vec<_> = targets
                .iter()
                .map(|target| {
                    threads.spawn(|| fuzz_target(target, seconds, &build.flags, priority))
                })
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
    Ok(summary.join("\n"))
}

/// Fuzzes one target for `seconds`; its summary line, or an error with the
/// end of its log.
fn fuzz_target(target: &str, seconds: u64, flags: &[&str], priority: Priority) -> Result<String> {
    log!("fuzzing {target} for {seconds}s");
    let corpus = format!("fuzz/corpus/{target}");
    std::fs::create_dir_all(&corpus)?;
    let log = tools_dir().join(format!("fuzz-{target}.log"));
    let mut command = cargo_fuzz(priority);
    command.arg("run").args(flags);
    command.args([target, &corpus, &format!("fuzz/seeds/{target}"), "--"]);
    command.arg(format!("-max_total_time={seconds}")).arg("-print_final_stats=1");
    let fuzzing = start(&format!("fuzz target {target}"), &mut command, GRACE, Some(&log))?;
    if let Err(error) = fuzzing.finish() {
        return Err(format!("{error}\nthe input is in fuzz/artifacts/{target}").into());
    }
    let printed = std::fs::read_to_string(&log)?;
    let runs = printed
        .lines()
        .find_map(|line| line.strip_prefix("stat::number_of_executed_units:"))
        .map_or("?".to_owned(), |runs| runs.trim().to_owned());
    Ok(format!("fuzz {target}: {runs} executions in {seconds}s, 0 crashes"))
}
