//! `cargo xtask TASK` (the alias is in .cargo/config.toml): the project's
//! tasks, in Rust. `scripts/` holds only thin entry points to them.

mod acceptance;
mod bench;
mod contract;
mod dev;
mod full_test;
mod fuzz;
mod sam_local;
mod stack;

use std::process::ExitCode;

use xtask::process::{Scope, stop_on_signals};
use xtask::{Result, log, root, setting, tools};

const USAGE: &str = "usage: cargo xtask TASK
  dev                      the local stack: DynamoDB Local, the table, a key, the function under cargo lambda watch
  sam-local                the same, with sam build's artifact under sam local start-api
  token OWNER              a token for the local stack
  test                     every check, as CI runs it
  bench                    the benchmarks (BENCH_* settings: see xtask/src/bench.rs)
  fuzz                     a fuzzing run of each target (FUZZ_SECONDS, FUZZ_BUILD)
  contract-test [TARGET]   Schemathesis and the acceptance suite against cargo-lambda (default) or sam-local
  acceptance URL [--user-pool-id ID --client-id ID]
                           the acceptance suite against a running API: tokens in TOKEN_A and TOKEN_B,
                           or two test users created (and deleted) in the Cognito user pool";

fn main() -> ExitCode {
    // SAFETY: the first thing the process does, before any thread exists.
    unsafe {
        std::env::set_var("PATH", tools::path_with_tools());
        std::env::set_var("SAM_CLI_TELEMETRY", "0");
    }
    stop_on_signals();
    let scope = Scope::new();
    let result = std::env::set_current_dir(root())
        .map_err(Into::into)
        .and_then(|()| task(&std::env::args().skip(1).collect::<Vec<_>>()));
    drop(scope);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log!("failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn task(args: &[String]) -> Result {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["dev"] => dev::dev(),
        ["sam-local"] => dev::sam_local(),
        ["token", owner] => dev::token(owner),
        ["test"] => full_test::full_test(),
        ["bench"] => bench::bench(std::env::var("BENCH_SMOKE").is_ok_and(|smoke| smoke == "1")),
        ["fuzz"] => fuzz::fuzz(
            setting("FUZZ_SECONDS", 30)?,
            &std::env::var("FUZZ_BUILD").unwrap_or_else(|_| "release".into()),
        ),
        ["acceptance", url, options @ ..] => acceptance::acceptance(url, options),
        ["contract-test", target @ ..] => contract::contract_test(
            contract::Target::parse(target.first().copied())?,
            setting("ST_MAX_EXAMPLES", 100)?,
        ),
        _ => Err(USAGE.into()),
    }
}
