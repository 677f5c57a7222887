//! The local stack for a person: `cargo xtask dev` (the function under
//! `cargo lambda watch`), `cargo xtask sam-local` (the artifact under `sam
//! local start-api`) and `cargo xtask token OWNER`.

use std::path::PathBuf;
use std::process::Command;

use plant_store_local_support::keys::Issuer;
use plant_store_local_support::process::{Started, run};
use plant_store_local_support::sam_local::SamLocal;
use plant_store_local_support::tools::ensure_python_tools;
use plant_store_local_support::{Result, documented, log, root};

use crate::artifact::sam_build;
use crate::stack::Stack;

const DEV_OWNER: &str = "local-user";
const TOKEN_TTL_SECONDS: u64 = 86_400;

/// The local stack's signing key (kept between runs).
fn local_key_dir() -> PathBuf {
    root().join(".local/keys")
}

/// DynamoDB Local on `dynamodb_port` with its data in `.local/dynamodb`,
/// the table `plants` and the local key: what both local stacks start with.
fn local_stack(dynamodb_port: u16) -> Result<(Stack, Issuer)> {
    ensure_python_tools()?;
    let data = root().join(".local/dynamodb");
    let mut stack = Stack::start(dynamodb_port, Some(&data))?;
    let issuer = Issuer::load_or_create(&local_key_dir())?;
    stack.configure_function("plants", &issuer)?;
    Ok((stack, issuer))
}

/// `cargo xtask dev`: DynamoDB Local (data in .local/dynamodb), the table,
/// a local key, and the function under `cargo lambda watch` at
/// 127.0.0.1:`api_port`; a token and curl lines; Ctrl-C stops it all.
pub(crate) fn dev(api_port: u16, dynamodb_port: u16) -> Result {
    let (mut stack, issuer) = local_stack(dynamodb_port)?;
    stack.env.set("AWS_LAMBDA_LOG_FORMAT", "JSON");
    log!("the function under cargo lambda watch on 127.0.0.1:{api_port} (the first build is slow)");
    let function = stack.start_function(api_port)?;
    let dynamodb = stack.env.get("AWS_ENDPOINT_URL_DYNAMODB");
    print_welcome(&stack, &issuer, api_port, "", dynamodb)?;
    function.wait()
}

/// `cargo xtask sam-local`: as `dev`, the artifact under `sam local
/// start-api` (docs/testing.md); not beside `dev` (one DynamoDB Local).
pub(crate) fn sam_local(api_port: u16, dynamodb_port: u16) -> Result {
    let (stack, issuer) = local_stack(dynamodb_port)?;
    sam_build()?;
    let sam = SamLocal::prepare(stack.dynamodb_port)?;
    log!("sam local start-api on 127.0.0.1:{api_port} (the first answer takes seconds)");
    let api: Started = sam.start_api(&stack.env, api_port, &[], None)?;
    print_welcome(&stack, &issuer, api_port, " under sam local", &sam.dynamodb_url)?;
    api.wait()
}

fn print_welcome(stack: &Stack, issuer: &Issuer, port: u16, how: &str, dynamodb: &str) -> Result {
    let token = issuer.token(DEV_OWNER, TOKEN_TTL_SECONDS);
    let table = stack.env.get("PLANTS_TABLE");
    let curl = curl_lines(&format!("http://127.0.0.1:{port}")).join("\n");
    println!(
        r#"
Plant Store is running{how} at http://127.0.0.1:{port} (owner: {DEV_OWNER}).
The function reaches DynamoDB Local at {dynamodb}, table: {table}.
Ctrl-C stops everything. A token for another owner: scripts/token OWNER

TOKEN={token}

{curl}
"#
    );
    Ok(())
}

/// A curl line for each operation of openapi.yaml, its example request
/// (`documented`); writes first.
fn curl_lines(base: &str) -> Vec<String> {
    let mut operations = documented::operations();
    operations.sort_by_key(|operation| operation.body.is_none());
    let line = |operation: documented::Documented| {
        let (method, target) = (operation.method, operation.target);
        let json = |body| format!(" -H 'Content-Type: application/json' -d '{body}'");
        let body = operation.body.map(json).unwrap_or_default();
        format!(r#"curl -s -X {method} "{base}{target}" -H "Authorization: Bearer $TOKEN"{body}"#)
    };
    operations.into_iter().map(line).collect()
}

/// Each curl line against the function at `base`, which must answer 2xx
/// (the contract tests run it, so that the lines scripts/dev prints work).
pub(crate) fn try_curl_lines(base: &str, issuer: &Issuer) -> Result {
    log!("the curl lines scripts/dev prints, each answered 2xx");
    for line in curl_lines(base) {
        let mut shell = Command::new("sh");
        shell.arg("-c").arg(format!("{line} -f -o /dev/null"));
        run(shell.env("TOKEN", issuer.token(DEV_OWNER, 600)))?;
    }
    Ok(())
}

/// `cargo xtask token OWNER`: a token for the local stack, signed with the
/// local key, valid for 24 hours.
pub(crate) fn token(owner: &str) -> Result {
    let issuer = Issuer::load(&local_key_dir())
        .map_err(|error| format!("no local key yet (run scripts/dev first): {error}"))?;
    println!("{}", issuer.token(owner, TOKEN_TTL_SECONDS));
    Ok(())
}
