//! `cargo xtask TASK [FLAGS]` (the alias is in .cargo/config.toml): the
//! project's tasks, in Rust. `scripts/` holds only thin entry points to
//! them; what they start is plant-store-local-support's.

mod acceptance;
mod artifact;
mod bench;
mod contract;
mod flags;
mod full_test;
mod fuzz;
mod local_stack;
mod stack;
mod tidy;

use std::process::ExitCode;

use flags::Flags;
use fuzz::Build;
use plant_store_local_support::process::{Scope, stop_on_signals};
use plant_store_local_support::{Result, log, root, tools};

const USAGE: &str = "usage: cargo xtask TASK [FLAGS]
  dev [--api-port 9000] [--dynamodb-port 8000]
                           the local stack: DynamoDB Local, the table, a key, the function under cargo lambda watch
  sam-local [--api-port 3000] [--dynamodb-port 8000]
                           the same, with sam build's artifact under sam local start-api
  token OWNER              a token for the local stack
  test [--max-examples 100] [--sam-local-max-examples 25] [--fuzz-seconds 30]
                           every check, as CI runs it
  bench [--smoke] [--strict] [--rounds 20] [--warm 600] [--burst 256] [--no-sam-build]
        [--throughput-requests 1000] [--throughput-rounds 5] [--compare BINARY]
                           the benchmarks (docs/performance.md)
  fuzz [--seconds 30] [--build release|dev]
                           a fuzzing run of each target
  contract-test [cargo-lambda|sam-local] [--max-examples 100] [--seed N]
                           Schemathesis and the acceptance suite against a local stack
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
        .and_then(|()| task(Flags::parse(std::env::args().skip(1))));
    drop(scope);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log!("failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn task(mut flags: Flags) -> Result {
    let task = flags.positional().unwrap_or_default();
    if flags.switch("help")? || task.is_empty() || task == "help" {
        println!("{USAGE}");
        return Ok(());
    }
    match task.as_str() {
        "dev" => start_local_stack(flags, 9000, local_stack::dev),
        "sam-local" => start_local_stack(flags, 3000, local_stack::sam_local),
        "token" => {
            let owner = flags.positional().ok_or("token OWNER")?;
            flags.finish()?;
            local_stack::token(&owner)
        }
        "test" => {
            let settings = full_test::Settings {
                max_examples: flags.value("max-examples", 100)?,
                sam_local_max_examples: flags.value("sam-local-max-examples", 25)?,
                fuzz_seconds: flags.value("fuzz-seconds", 30)?,
            };
            flags.finish()?;
            full_test::full_test(&settings)
        }
        "bench" => {
            let settings = bench::Settings::from_flags(&mut flags)?;
            flags.finish()?;
            bench::bench(&settings)
        }
        "fuzz" => {
            let (seconds, build) = (
                flags.value("seconds", 30)?,
                flags.value("build", Build::Release)?,
            );
            flags.finish()?;
            fuzz::fuzz(seconds, build)
        }
        "contract-test" => {
            let target = contract::Target::parse(flags.positional().as_deref())?;
            let (max_examples, seed) = (flags.value("max-examples", 100)?, flags.optional("seed")?);
            flags.finish()?;
            contract::contract_test(target, max_examples, seed)
        }
        "acceptance" => run_acceptance(flags),
        _ => Err(format!("unknown task {task}\n{USAGE}").into()),
    }
}

/// `dev` or `sam-local`: `start` on the ports the flags give.
fn start_local_stack(
    mut flags: Flags,
    default_api_port: u16,
    start: fn(u16, u16) -> Result,
) -> Result {
    let api_port = flags.value("api-port", default_api_port)?;
    let dynamodb_port = flags.value("dynamodb-port", 8000)?;
    flags.finish()?;
    start(api_port, dynamodb_port)
}

fn run_acceptance(mut flags: Flags) -> Result {
    let url = flags.positional().ok_or("acceptance URL")?;
    let mut options = Vec::new();
    for name in ["user-pool-id", "client-id"] {
        if let Some(value) = flags.optional::<String>(name)? {
            options.extend([format!("--{name}"), value]);
        }
    }
    flags.finish()?;
    acceptance::acceptance(&url, &options)
}
