//! `cargo xtask acceptance URL [--user-pool-id ID --client-id ID]`: the
//! acceptance suite (`admin/src/acceptance.rs`) with TOKEN_A and TOKEN_B or
//! Cognito test users; and against a local stack, for the contract tests.

use std::process::Command;

use plant_store_local_support::keys::Issuer;
use plant_store_local_support::process::run;
use plant_store_local_support::{Result, log};

use crate::stack::debug_binary;

/// The suite against `url`, with tokens from TOKEN_A and TOKEN_B, or as test
/// users of the Cognito user pool and app client given.
pub(crate) fn acceptance(url: &str, pool: Option<String>, client: Option<String>) -> Result {
    let mut suite = suite(url)?;
    for (flag, value) in [("--user-pool-id", pool), ("--client-id", client)] {
        if let Some(value) = value {
            suite.args([flag, &value]);
        }
    }
    run(&mut suite)
}

/// `plant-store-admin acceptance --url URL`.
fn suite(url: &str) -> Result<Command> {
    let mut command = Command::new(debug_binary("plant-store-admin")?);
    command.args(["acceptance", "--url", url]);
    Ok(command)
}

/// The suite against a local stack that trusts `issuer`, as two owners
/// that only this suite uses.
pub(crate) fn acceptance_on_local_stack(url: &str, issuer: &Issuer) -> Result {
    log!("the acceptance suite (scripts/acceptance) at {url}, as two owners");
    run(suite(url)?
        .env("TOKEN_A", issuer.token("acceptance-a", 3600))
        .env("TOKEN_B", issuer.token("acceptance-b", 3600)))
}
