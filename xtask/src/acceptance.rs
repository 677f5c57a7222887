//! `cargo xtask acceptance URL [--user-pool-id ID --client-id ID]`
//! (`scripts/acceptance`): the acceptance suite of the dev tool
//! (`dev/src/acceptance.rs`) against the API at URL, with the tokens in
//! TOKEN_A and TOKEN_B or with Cognito test users; and the same suite against
//! a local stack, as the full run and the contract tests use it.

use std::path::Path;

use xtask::process::run;
use xtask::{Result, log};

use crate::stack::{dev_tool, mint_token};

/// The suite against `url`; `options` are the dev tool's (the Cognito pool).
pub fn acceptance(url: &str, options: &[&str]) -> Result {
    run(dev_tool()?.args(["acceptance", "--url", url]).args(options))
}

/// The suite against a local stack whose tokens are signed with the key in
/// `key_dir`, as two owners that only this suite uses.
pub fn acceptance_on_local_stack(url: &str, key_dir: &Path) -> Result {
    log!("the acceptance suite (scripts/acceptance) at {url}, as two owners");
    let token_a = mint_token(key_dir, "acceptance-a", 3600)?;
    let token_b = mint_token(key_dir, "acceptance-b", 3600)?;
    run(dev_tool()?
        .args(["acceptance", "--url", url])
        .env("TOKEN_A", token_a)
        .env("TOKEN_B", token_b))
}
