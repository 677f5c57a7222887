//! `cargo xtask TASK [FLAGS]` (`--help`, `flags.rs`): the project's tasks,
//! in Rust; `scripts/` holds thin entry points, local-support what they start.

mod artifact;
mod bench;
mod contract;
mod flags;
mod full_test;
mod fuzz;
mod interface;
mod local_stack;
mod stack;
mod tidy;

use std::process::ExitCode;

use flags::{XtaskCmd as Task, defaults};
use plant_store_local_support::process::{Scope, stop_on_signals};
use plant_store_local_support::{Result, log, root, tools};

fn main() -> ExitCode {
    // SAFETY: the first thing the process does, before any thread exists.
    unsafe {
        std::env::set_var("PATH", tools::path_with_tools());
        std::env::set_var("SAM_CLI_TELEMETRY", "0");
    }
    let flags = flags::Xtask::from_env_or_exit();
    stop_on_signals();
    let scope = Scope::begin();
    let result =
        std::env::set_current_dir(root()).map_err(Into::into).and_then(|()| task(flags.subcommand));
    drop(scope);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log!("failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn task(task: Task) -> Result {
    match task {
        Task::Dev(dev) => local_stack::dev(
            dev.api_port.unwrap_or(defaults::DEV_API_PORT),
            dev.dynamodb_port.unwrap_or(defaults::DYNAMODB_PORT),
        ),
        Task::SamLocal(sam) => local_stack::sam_local(
            sam.api_port.unwrap_or(defaults::SAM_LOCAL_API_PORT),
            sam.dynamodb_port.unwrap_or(defaults::DYNAMODB_PORT),
        ),
        Task::Token(token) => local_stack::token(&token.owner),
        Task::Test(test) => full_test::full_test(&full_test::Settings {
            max_examples: test.max_examples.unwrap_or(defaults::MAX_EXAMPLES),
            fuzz_seconds: test.fuzz_seconds.unwrap_or(defaults::GATE_FUZZ_SECONDS),
        }),
        Task::Bench(flags) => bench::bench(&bench::Settings::from_flags(flags)),
        Task::Fuzz(flags) => {
            println!("{}", fuzz::guided(flags.seconds.unwrap_or(defaults::FUZZ_SECONDS))?);
            Ok(())
        }
        Task::ContractTest(flags) => contract::contract_test(
            flags.max_examples.unwrap_or(defaults::MAX_EXAMPLES),
            flags.seed,
        ),
        Task::ApiDocs(flags) => {
            if flags.gate {
                interface::breaking_change_gate()?;
            }
            let page = interface::reference_page()?;
            log!("the reference page: {}", page.display());
            Ok(())
        }
        Task::SamBuild(_) => artifact::sam_build().map(drop),
    }
}
