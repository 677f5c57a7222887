//! `plant-store-admin`, the operator's commands; never deployed:
//!
//! - `create-table --name TABLE`: creates the plants table (for DynamoDB Local,
//!   through `AWS_ENDPOINT_URL_DYNAMODB`); an existing table is left as it is.
//! - `acceptance --url URL [--user-pool-id ID --client-id ID]`: the
//!   acceptance suite against the API at URL, as two owners whose tokens are
//!   in `TOKEN_A` and `TOKEN_B`, or as two test users created in the Cognito
//!   user pool (and deleted afterwards). Fails at the first broken rule.
//! - `recount --table TABLE [--owner OWNER] [--apply]`: sets each owner's
//!   plant count to the plants it has (a dry run without `--apply`).

use std::collections::HashMap;
use std::{env, process};

use aws_config::BehaviorVersion;
use plant_store_admin::cognito::{self, TestUsers};
use plant_store_admin::{acceptance, create_table};

const USAGE: &str = "usage: plant-store-admin create-table --name TABLE
       plant-store-admin recount --table TABLE [--owner OWNER] [--apply]
       plant-store-admin acceptance --url URL [--user-pool-id ID --client-id ID]";

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = env::args().skip(1);
    let command = args.next().unwrap_or_default();
    let options = parse_options(args).unwrap_or_else(|message| fail(&message));
    let option = |name: &str| options.get(name).cloned();
    let required =
        |name: &str| option(name).unwrap_or_else(|| fail(&format!("--{name} is required")));
    let result = match command.as_str() {
        "create-table" => create(&required("name")).await,
        "recount" => {
            recount(
                &required("table"),
                option("owner").as_deref(),
                option("apply").is_some(),
            )
            .await
        }
        "acceptance" => {
            let cognito = match (option("user-pool-id"), option("client-id")) {
                (Some(pool), Some(client)) => Some((pool, client)),
                (None, None) => None,
                _ => fail("--user-pool-id and --client-id go together"),
            };
            acceptance(&required("url"), cognito).await
        }
        _ => Err(USAGE.to_owned()),
    };
    if let Err(message) = result {
        fail(&message);
    }
}

fn fail(message: &str) -> ! {
    eprintln!("plant-store-admin: {message}");
    process::exit(2);
}

fn parse_options(args: impl Iterator<Item = String>) -> Result<HashMap<String, String>, String> {
    let mut options = HashMap::new();
    let mut args = args.peekable();
    while let Some(flag) = args.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {flag}\n{USAGE}"))?;
        // A flag without a value (`--apply`) is on.
        let value = match args.peek() {
            Some(value) if !value.starts_with("--") => args.next().unwrap_or_default(),
            _ => String::new(),
        };
        options.insert(name.to_owned(), value);
    }
    Ok(options)
}

async fn create(table: &str) -> Result<(), String> {
    let sdk_config = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config);
    create_table(&client, table)
        .await
        .map_err(|error| format!("cannot create table {table}: {error}"))
}

/// Recounts the plants of one owner or all, and sets the counts with `apply`.
async fn recount(table: &str, owner: Option<&str>, apply: bool) -> Result<(), String> {
    // Backs off (exponentially, with jitter) and retries when throttled.
    let sdk_config = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(10))
        .load()
        .await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config);
    let summary = plant_store_admin::recount::recount(&client, table, owner, apply).await?;
    let verb = if apply { "set" } else { "would set" };
    for (owner, counted, plants) in &summary.changes {
        let counted = counted.map_or("none".to_owned(), |count| count.to_string());
        println!("{owner}: count {counted}, plants {plants}: {verb} {plants}");
    }
    println!(
        "{} owners, {} plants: {} counts right, {} {verb}{}",
        summary.owners,
        summary.plants,
        summary.right,
        summary.changes.len(),
        if apply || summary.changes.is_empty() {
            ""
        } else {
            " (a dry run: --apply sets them)"
        }
    );
    Ok(())
}

/// The suite as two owners: Cognito test users if a pool is given (deleted
/// however it ends), else the tokens in TOKEN_A and TOKEN_B.
async fn acceptance(url: &str, cognito: Option<(String, String)>) -> Result<(), String> {
    let report = match cognito {
        Some((user_pool_id, client_id)) => {
            let users = TestUsers::new(&user_pool_id).await;
            cognito::run_as_test_users(users, url, &client_id).await?
        }
        None => {
            let token = |name: &str| {
                env::var(name).map_err(|_| {
                    format!("{name} must hold a token (or give --user-pool-id and --client-id)")
                })
            };
            let (a, b) = (token("TOKEN_A")?, token("TOKEN_B")?);
            acceptance::run(url, &a, &b).await
        }
    };
    println!("left in the table (the interface has no DELETE):");
    for line in &report.left_behind {
        println!("  {line}");
    }
    if let Some(failure) = report.broken {
        return Err(failure.to_string());
    }
    println!("all {} rules hold at {url}", report.passed.len());
    Ok(())
}
