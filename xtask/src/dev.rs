//! The local stack for a person: `cargo xtask dev` (the function under
//! `cargo lambda watch`), `cargo xtask sam-local` (the artifact under `sam
//! local start-api`, [`crate::sam_local`]) and `cargo xtask token OWNER`.

use std::path::Path;

use xtask::process::Started;
use xtask::tools::ensure_python_tools;
use xtask::{Result, setting};

use crate::sam_local::SamLocal;
use crate::stack::{Stack, local_key_dir, mint_token, sam_build};

const DEV_OWNER: &str = "local-user";
const TOKEN_TTL_SECONDS: u64 = 86_400;

/// DynamoDB Local with its data in `.local/dynamodb`, the table `plants`
/// and the local key: what both local stacks start with.
fn local_stack() -> Result<Stack> {
    ensure_python_tools()?;
    let data = xtask::root().join(".local/dynamodb");
    let mut stack = Stack::with_dynamodb_local(setting("DYNAMODB_PORT", 8000)?, Some(&data))?;
    stack.configure_function("plants", &local_key_dir())?;
    Ok(stack)
}

/// `cargo xtask dev`: DynamoDB Local (127.0.0.1, data kept in
/// .local/dynamodb), the plants table, a local signing key and its JWKS, and
/// the function under `cargo lambda watch` at 127.0.0.1:API_PORT (9000).
/// Prints a token and working curl lines; runs until Ctrl-C, which stops
/// everything it started.
pub fn dev() -> Result {
    let api_port = setting("API_PORT", 9000)?;
    let mut stack = local_stack()?;
    stack.set("AWS_LAMBDA_LOG_FORMAT", "JSON");
    xtask::log!(
        "starting the function under cargo lambda watch on 127.0.0.1:{api_port} (first build takes a while)"
    );
    let function = stack.start_function(api_port)?;
    print_welcome(&stack, api_port, "", stack.get("AWS_ENDPOINT_URL_DYNAMODB"))?;
    function.wait()
}

/// `cargo xtask sam-local`: as `dev`, but the API is `sam build`'s arm64
/// artifact under `sam local start-api` at 127.0.0.1:API_PORT (3000), in the
/// Lambda container (docs/sam-local.md). Not at the same time as `dev`
/// (both use DynamoDB Local's port and data).
pub fn sam_local() -> Result {
    let api_port = setting("API_PORT", 3000)?;
    let stack = local_stack()?;
    sam_build()?;
    let sam = SamLocal::prepare(stack.dynamodb_port)?;
    xtask::log!(
        "starting sam local start-api on 127.0.0.1:{api_port} (the first answer takes a few seconds)"
    );
    let api: Started = sam.start_api(&stack, api_port, None)?;
    print_welcome(&stack, api_port, " under sam local", &sam.dynamodb_url)?;
    api.wait()
}

fn print_welcome(stack: &Stack, port: u16, how: &str, dynamodb: &str) -> Result {
    let token = mint_token(&local_key_dir(), DEV_OWNER, TOKEN_TTL_SECONDS)?;
    let table = stack.get("PLANTS_TABLE");
    println!(
        r#"
Plant Store is running{how} at http://127.0.0.1:{port}/plants (owner: {DEV_OWNER}).
The function reaches DynamoDB Local at {dynamodb}, table: {table}.
Ctrl-C stops everything. A token for another owner: scripts/token OWNER

TOKEN={token}

curl -s -X POST http://127.0.0.1:{port}/plants -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{{"id": 1, "name": "Monstera", "tag": "tropical"}}'
curl -s "http://127.0.0.1:{port}/plants?limit=10" -H "Authorization: Bearer $TOKEN"
"#
    );
    Ok(())
}

/// `cargo xtask token OWNER`: a token for the local stack, signed with the
/// local development key, valid for 24 hours.
pub fn token(owner: &str) -> Result {
    let key_dir = local_key_dir();
    if !Path::new(&key_dir).join("signing-key.pem").exists() {
        return Err("no local key yet: run scripts/dev first".into());
    }
    println!("{}", mint_token(&key_dir, owner, TOKEN_TTL_SECONDS)?);
    Ok(())
}
