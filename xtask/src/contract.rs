//! `cargo xtask contract-test`: Schemathesis from openapi.yaml against the
//! function behind cargo lambda, with a token and without (401), then the
//! acceptance suite and scripts/dev's curl lines; the seed is the commit's
//! unless `--seed` says. The full run also goes through `sam local` once.

use std::process::Command;

use plant_store_local_support::function::Env;
use plant_store_local_support::keys::{Algorithm, Issuer};
use plant_store_local_support::process::{Scope, free_port, output, run, run_logged, tail};
use plant_store_local_support::sam_local::SamLocal;
use plant_store_local_support::tools::ensure_python_tools;
use plant_store_local_support::{Result, log, root, tools_dir};

use crate::local_stack::try_curl_lines;
use crate::stack::{Stack, debug_binary};

/// Runs the contract tests with at most `max_examples` examples per
/// operation, from `seed` (else the commit's), against the function behind
/// cargo lambda's emulator.
pub(crate) fn contract_test(max_examples: usize, seed: Option<u64>) -> Result {
    let _scope = Scope::begin();
    ensure_python_tools()?;
    let mut stack = Stack::start(free_port(), None)?;
    let issuer = Issuer::generate(&[Algorithm::EdDSA]);
    stack.configure_function("contract-plants", &issuer)?;
    stack.env.set("AWS_LAMBDA_LOG_LEVEL", "warn");
    let port = free_port();
    let function_log = tools_dir().join("contract-function.log");
    log!("starting the function behind cargo lambda watch --only-lambda-apis on 127.0.0.1:{port}");
    if let Err(error) = stack.start_built_function(port, &function_log) {
        return Err(format!("{error}\n{}", tail(&function_log, 60)).into());
    }
    let (seed, url) = (seed.unwrap_or_else(commit_seed), format!("http://127.0.0.1:{port}"));
    run_contract(&url, &issuer, max_examples, seed, true)?;
    try_curl_lines(&url, &issuer)
}

/// The contract tests through `sam local start-api` (the REST API): a
/// request takes a second there, so only Schemathesis' example and fuzzing
/// phases, with a token.
pub(crate) fn contract_test_through_sam_local(
    sam: &SamLocal,
    stack: &Stack,
    examples: usize,
) -> Result {
    let _scope = Scope::begin();
    let issuer = Issuer::generate(&[Algorithm::EdDSA]);
    stack.create_table("contract-sam-plants")?;
    let env =
        Env::function(stack.env.get("AWS_ENDPOINT_URL_DYNAMODB"), "contract-sam-plants", &issuer);
    let (port, log) = (free_port(), tools_dir().join("contract-sam-local.log"));
    let _api = sam.start_api(&env, port, &[], Some(&log))?;
    let url = format!("http://127.0.0.1:{port}");
    let ran = run_contract(&url, &issuer, examples, commit_seed(), false);
    sam.remove_lambda_containers();
    ran.map_err(|error| format!("{error}\n{}", tail(&log, 60)).into())
}

/// Schemathesis from openapi.yaml against the API at `url`, with a token
/// (every phase where `thorough`) and, where `thorough`, without one; then
/// the acceptance suite.
fn run_contract(
    url: &str,
    issuer: &Issuer,
    max_examples: usize,
    seed: u64,
    thorough: bool,
) -> Result {
    let reproduce = format!("scripts/contract-test --seed {seed} --max-examples {max_examples}");
    let schemathesis = |hooks: &str, examples: usize, log: &str, headers: &[&str]| -> Result {
        let mut command = Command::new("st");
        command.args(["run", "openapi.yaml", "--url", url, "--checks", "all"]);
        command.args(["--seed", &seed.to_string(), "--max-examples", &examples.to_string()]);
        command.args(["--generation-database", "none", "--no-color", "--workers", "1"]);
        command.env("SCHEMATHESIS_HOOKS", hooks).env("PYTHONPATH", root().join("tests/contract"));
        run_logged(command.args(headers), &tools_dir().join(log)).map_err(|error| {
            format!("Schemathesis failed ({error}); reproduce with: {reproduce}").into()
        })
    };
    log!("Schemathesis with a token (--checks all, seed {seed}, {max_examples} per operation)");
    let authorization = format!("Authorization: Bearer {}", issuer.token("schemathesis", 3600));
    let mut arguments = vec!["-H", &authorization];
    if !thorough {
        arguments.extend(["--phases", "examples,fuzzing"]);
    }
    schemathesis("st_hooks", max_examples, "contract-schemathesis.log", &arguments)?;
    if thorough {
        log!("Schemathesis without a token: 401 everywhere");
        let (examples, log) = (max_examples / 4 + 1, "contract-schemathesis-401.log");
        schemathesis("st_unauthenticated", examples, log, &[])?;
    }
    acceptance_on_local_stack(url, issuer)
}

/// The commit's first 8 hex digits; outside a git checkout, the day.
fn commit_seed() -> u64 {
    let commit = output(Command::new("git").args(["rev-parse", "--short=8", "HEAD"]));
    let day = || std::time::UNIX_EPOCH.elapsed().unwrap().as_secs() / 86_400;
    commit.ok().and_then(|commit| u64::from_str_radix(&commit, 16).ok()).unwrap_or_else(day)
}

/// The acceptance suite (`plant-store-admin acceptance`) against a local
/// stack that trusts `issuer`, as two owners only it uses.
fn acceptance_on_local_stack(url: &str, issuer: &Issuer) -> Result {
    log!("the acceptance suite (scripts/acceptance) at {url}, as two owners");
    let mut suite = Command::new(debug_binary("plant-store-admin")?);
    suite.args(["acceptance", "--url", url]);
    run(suite
        .env("TOKEN_A", issuer.token("acceptance-a", 3600))
        .env("TOKEN_B", issuer.token("acceptance-b", 3600)))
}
