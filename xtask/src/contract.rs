//! `cargo xtask contract-test [cargo-lambda|sam-local]`: contract testing
//! against a running stack. DynamoDB Local and the function on 127.0.0.1:
//! its debug build behind cargo lambda's emulation of the HTTP API (`cargo
//! lambda watch --only-lambda-apis`), or `sam build`'s artifact under `sam
//! local start-api`; then Schemathesis (`--checks all`, bounded examples) from
//! openapi.yaml, once with a token and once without (every answer must then
//! be 401), and a check that the function wrote one CloudWatch EMF metrics
//! line per request; last, the acceptance suite (`scripts/acceptance`) as two
//! owners, and (behind cargo lambda's emulator) the typed TypeScript
//! client.
//!
//! `--max-examples` (100) and `--seed` tune the run. Without a seed it
//! comes from the commit (its first 8 hex digits), so each commit explores
//! new inputs and any run can be repeated; a failure prints the command.

use std::path::{Path, PathBuf};
use std::process::Command;

use plant_store_local_support::keys::{Algorithm, Issuer};
use plant_store_local_support::process::{Scope, Started, free_port, output, run_logged, tail};
use plant_store_local_support::sam_local::SamLocal;
use plant_store_local_support::tools::ensure_python_tools;
use plant_store_local_support::{Result, log, root, tools_dir};
use serde_json::Value;

use crate::acceptance::acceptance_on_local_stack;
use crate::artifact::sam_build;
use crate::interface;
use crate::stack::Stack;

#[derive(Clone, Copy, PartialEq)]
pub enum Target {
    CargoLambda,
    SamLocal,
}

impl Target {
    pub fn parse(name: Option<&str>) -> Result<Self> {
        match name {
            None | Some("cargo-lambda") => Ok(Self::CargoLambda),
            Some("sam-local") => Ok(Self::SamLocal),
            Some(other) => Err(format!("unknown target {other}: cargo-lambda or sam-local").into()),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::CargoLambda => "cargo-lambda",
            Self::SamLocal => "sam-local",
        }
    }
}

/// The commit's first 8 hex digits; outside a git checkout, the day.
fn commit_seed() -> u64 {
    let commit = output(Command::new("git").args(["rev-parse", "--short=8", "HEAD"]));
    let day = || std::time::UNIX_EPOCH.elapsed().unwrap().as_secs() / 86_400;
    commit.ok().and_then(|commit| u64::from_str_radix(&commit, 16).ok()).unwrap_or_else(day)
}

/// Runs the contract tests against `target` with at most `max_examples`
/// examples per operation, from `seed` (else the commit's).
pub fn contract_test(target: Target, max_examples: usize, seed: Option<u64>) -> Result {
    let _scope = Scope::new();
    ensure_python_tools()?;
    let mut stack = Stack::start(free_port(), None)?;
    let issuer = Issuer::generate(&[Algorithm::EdDSA]);
    stack.configure_function("contract-plants", &issuer)?;
    stack.env.set("AWS_LAMBDA_LOG_LEVEL", "warn");
    let api_port = free_port();
    let function_log = tools_dir().join(format!("contract-function-{}.log", target.name()));
    if let Err(error) = start_function(target, &stack, api_port, &function_log) {
        return Err(format!("{error}\n{}", tail(&function_log, 60)).into());
    }
    let schemathesis = Schemathesis {
        target,
        url: format!("http://127.0.0.1:{api_port}"),
        seed: seed.unwrap_or_else(commit_seed),
        max_examples,
    };
    let logs = schemathesis.with_and_without_token(&issuer.token("schemathesis", 3600))?;

    log!("CloudWatch EMF: one metrics line per request in the function's output");
    let generated = generated_requests(&logs.each_ref().map(PathBuf::as_path))?;
    check_metric_lines(&std::fs::read_to_string(&function_log)?, generated)?;

    acceptance_on_local_stack(&schemathesis.url, &issuer)?;
    if target == Target::CargoLambda {
        interface::typed_client(&schemathesis.url, &issuer.token("typed-client", 3600))?;
    }
    Ok(())
}

/// The function on 127.0.0.1:`port` as `target` runs it, its output in
/// `log`.
fn start_function(target: Target, stack: &Stack, port: u16, log: &Path) -> Result<Started> {
    match target {
        Target::CargoLambda => {
            log!(
                "starting the function behind cargo lambda watch --only-lambda-apis on 127.0.0.1:{port}"
            );
            stack.start_built_function(port, log)
        }
        Target::SamLocal => {
            sam_build()?;
            let sam = SamLocal::prepare(stack.dynamodb_port)?;
            log!("starting sam local start-api on 127.0.0.1:{port}");
            sam.start_api(&stack.env, port, &[], Some(log))
        }
    }
}

/// Schemathesis' runs against the function at `url`.
struct Schemathesis {
    target: Target,
    url: String,
    seed: u64,
    max_examples: usize,
}

impl Schemathesis {
    /// A run with `token`, then one without (every answer must be 401);
    /// their logs.
    fn with_and_without_token(&self, token: &str) -> Result<[PathBuf; 2]> {
        let (seed, max_examples) = (self.seed, self.max_examples);
        log!(
            "Schemathesis with a token (--checks all, seed {seed}, at most {max_examples} examples per operation)"
        );
        log!("(to repeat this run: {})", self.reproduce());
        let target = self.target.name();
        let with_token = tools_dir().join(format!("contract-schemathesis-{target}.log"));
        let authorization = format!("Authorization: Bearer {token}");
        let mut command = self.command("st_hooks", max_examples);
        self.run_logged(command.args(["-H", &authorization]), &with_token)?;
        log!("Schemathesis without a token: 401 everywhere (seed {seed})");
        let without_token = tools_dir().join(format!("contract-schemathesis-{target}-401.log"));
        let command = &mut self.command("st_unauthenticated", max_examples / 4 + 1);
        self.run_logged(command, &without_token)?;
        Ok([with_token, without_token])
    }

    /// The command that repeats this run.
    fn reproduce(&self) -> String {
        let (target, seed) = (self.target.name(), self.seed);
        format!("scripts/contract-test {target} --seed {seed} --max-examples {}", self.max_examples)
    }

    /// Runs `command`, its output in `log`; a failure says how to repeat it.
    fn run_logged(&self, command: &mut Command, log: &Path) -> Result {
        run_logged(command, log).map_err(|error| {
            let reproduce = self.reproduce();
            format!("Schemathesis failed ({error}); reproduce with: {reproduce}").into()
        })
    }

    /// `st run` with the hooks module `hooks` and at most `examples`
    /// examples per operation.
    fn command(&self, hooks: &str, examples: usize) -> Command {
        let mut command = Command::new("st");
        command.args(["run", "openapi.yaml", "--url", &self.url, "--checks", "all"]);
        command.args(["--seed", &self.seed.to_string()]);
        command.args(["--max-examples", &examples.to_string()]);
        command.args(["--generation-database", "none", "--no-color"]);
        command.args(["--workers", "1", "--request-timeout", "15"]);
        command.env("SCHEMATHESIS_HOOKS", hooks).env("PYTHONPATH", root().join("tests/contract"));
        if self.target == Target::SamLocal {
            // Each request through sam local takes about a second (SAM's
            // server, the emulator, qemu): the coverage phase's fixed set of
            // boundary cases, a few hundred requests, runs against the same
            // code behind cargo lambda's emulator.
            command.args(["--phases", "examples,fuzzing"]);
        }
        command
    }
}

/// How many test cases Schemathesis generated ("N generated" in its
/// summaries): each sent at least one request.
fn generated_requests(logs: &[&Path]) -> Result<usize> {
    let mut generated = 0;
    for log in logs {
        let text = std::fs::read_to_string(log)?;
        let words: Vec<&str> = text.split_whitespace().collect();
        for pair in words.windows(2) {
            if pair[1].starts_with("generated")
                && let Ok(count) = pair[0].parse::<usize>()
            {
                generated += count;
            }
        }
    }
    if generated == 0 {
        return Err("found no Schemathesis summary".into());
    }
    Ok(generated)
}

/// At least one well-formed EMF line per generated request, in the
/// PlantStore namespace, with numeric metrics and known routes.
fn check_metric_lines(function_output: &str, generated: usize) -> Result {
    let records =
        function_output.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok());
    let lines: Vec<Value> = records.filter(|record| record.get("_aws").is_some()).collect();
    if lines.len() < generated {
        return Err(format!("{} EMF lines for {generated} generated requests", lines.len()).into());
    }
    let mut routes = std::collections::BTreeSet::new();
    let mut classes = std::collections::BTreeSet::new();
    for line in &lines {
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        if directive["Namespace"] != "PlantStore" {
            return Err(format!("an EMF line outside the PlantStore namespace: {line}").into());
        }
        for metric in directive["Metrics"].as_array().into_iter().flatten() {
            let name = metric["Name"].as_str().unwrap_or_default();
            if !line[name].is_number() {
                return Err(format!("metric {name} is not a number: {line}").into());
            }
        }
        routes.insert(line["Route"].as_str().unwrap_or("(none)").to_owned());
        classes.insert(line["StatusClass"].as_str().unwrap_or("(none)").to_owned());
    }
    let known = ["GET /plants", "POST /plants", "other"];
    if let Some(route) = routes.iter().find(|route| !known.contains(&route.as_str())) {
        return Err(format!("an EMF line with an unknown route: {route}").into());
    }
    println!(
        "{} EMF lines for {generated} generated requests; routes {routes:?}; status classes {classes:?}",
        lines.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMF: &str = r#"{"_aws":{"CloudWatchMetrics":[{"Namespace":"PlantStore","Metrics":[{"Name":"Requests","Unit":"Count"}]}]},"Requests":1,"Route":"GET /plants","StatusClass":"2xx"}"#;

    #[test]
    fn one_metrics_line_per_generated_request_passes() {
        let output = format!("not json\n{EMF}\n{{\"level\":\"INFO\"}}\n{EMF}\n");
        assert!(check_metric_lines(&output, 2).is_ok());
    }

    #[test]
    fn fewer_metrics_lines_than_generated_requests_fail() {
        let error = check_metric_lines(&format!("{EMF}\n"), 2).unwrap_err();
        assert_eq!(error.to_string(), "1 EMF lines for 2 generated requests");
    }

    #[test]
    fn a_metric_that_is_not_a_number_or_an_unknown_route_fails() {
        let text_metric = EMF.replace(r#""Requests":1"#, r#""Requests":"1""#);
        assert!(check_metric_lines(&text_metric, 1).is_err());
        let unknown_route = EMF.replace("GET /plants", "DELETE /plants");
        assert!(check_metric_lines(&unknown_route, 1).is_err());
        let other_namespace = EMF.replace("PlantStore", "Other");
        assert!(check_metric_lines(&other_namespace, 1).is_err());
    }

    #[test]
    fn generated_requests_add_up_over_the_summaries() {
        let dir = std::env::temp_dir().join(format!("xtask-st-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (first, second) = (dir.join("a.log"), dir.join("b.log"));
        let summaries = "GET /plants\n  Examples: 12 generated, 3 skipped\nPOST: 30 generated\n";
        std::fs::write(&first, summaries).unwrap();
        std::fs::write(&second, "nothing here").unwrap();
        assert_eq!(generated_requests(&[&first, &second]).unwrap(), 42);
        assert!(generated_requests(&[&second]).is_err(), "no summary is an error");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
