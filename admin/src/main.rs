//! `plant-store-admin`: the operator's commands (`--help`), never deployed.

use std::{env, process};

use aws_config::BehaviorVersion;
use plant_store_admin::cognito::{self, TestUsers};
use plant_store_admin::{acceptance, create_table};

mod flags {
    xflags::xflags! {
        /// plant-store's operator commands.
        cmd plant-store-admin {
            /// Creates the plants table (DynamoDB Local: AWS_ENDPOINT_URL_DYNAMODB).
            cmd create-table {
                required --name table: String
            }
            /// Sets each owner's plant count to the plants it has.
            cmd recount {
                required --table table: String
                /// One owner only.
                optional --owner owner: String
                /// Set the counts (else a dry run).
                optional --apply
            }
            /// The acceptance suite against the API at URL.
            cmd acceptance {
                required --url url: String
                optional --user-pool-id id: String
                optional --client-id id: String
            }
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    use flags::PlantStoreAdminCmd as Command;
    let result = match flags::PlantStoreAdmin::from_env_or_exit().subcommand {
        Command::CreateTable(flags) => create(&flags.name).await,
        Command::Recount(flags) => recount(&flags.table, flags.owner.as_deref(), flags.apply).await,
        Command::Acceptance(flags) => {
            let cognito = match (flags.user_pool_id, flags.client_id) {
                (Some(pool), Some(client)) => Some((pool, client)),
                (None, None) => None,
                _ => fail("--user-pool-id and --client-id go together"),
            };
            acceptance(&flags.url, cognito).await
        }
    };
    if let Err(message) = result {
        fail(&message);
    }
}

fn fail(message: &str) -> ! {
    eprintln!("plant-store-admin: {message}");
    process::exit(2);
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
    let (owners, plants, right) = (summary.owners, summary.plants, summary.right);
    let set = summary.changes.len();
    let dry = if apply || set == 0 { "" } else { " (a dry run: --apply sets them)" };
    println!("{owners} owners, {plants} plants: {right} counts right, {set} {verb}{dry}");
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
    println!("left in the table:");
    for line in &report.left_behind {
        println!("  {line}");
    }
    if let Some(failure) = report.broken {
        return Err(failure.to_string());
    }
    println!("all {} rules hold at {url}", report.passed.len());
    Ok(())
}
