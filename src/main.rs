//! The Lambda `bootstrap`: the configuration, the clients, the keys and the
//! DynamoDB connection made ready in init (full CPU), then every request to
//! [`PlantApi::invoke`], up to `AWS_LAMBDA_MAX_CONCURRENCY` at once.

#![forbid(unsafe_code)]

use std::sync::Arc;

use lambda_http::lambda_runtime::{LambdaEvent, Runtime};
use lambda_http::{Error, service_fn};
use plant_store::api::PlantApi;
use plant_store::auth::Verifier;
use plant_store::config::{Config, TelemetryConfig};
use plant_store::event::Incoming;
use plant_store::https::Https;
use plant_store::jwks::KeySource;
use plant_store::store::{PlantStore, client_config};

/// mimalloc: less CPU per request than glibc's malloc (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One request at a time (classic Lambda): a current-thread runtime, which
/// pays no wake-ups of a second worker; several at once (Lambda Managed
/// Instances): a worker per vCPU.
fn main() -> Result<(), Error> {
    let mut runtime = match plant_store::config::serves_several_at_once() {
        true => tokio::runtime::Builder::new_multi_thread(),
        false => tokio::runtime::Builder::new_current_thread(),
    };
    runtime.enable_all().build()?.block_on(serve())
}

async fn serve() -> Result<(), Error> {
    let env = |name: &str| std::env::var(name).ok();
    let xray = plant_store::log::init(std::io::stdout, &TelemetryConfig::from_lookup(env));
    let config = Config::from_lookup(env)?;
    // One trust store and connector for both remote calls (https.rs).
    let https = Https::new(&config.trust)?;
    let keys = KeySource::from_config(&config.keys, &https)?;
    let dynamodb = client_config(&https, config.dynamodb_endpoint.as_deref()).await;
    let client = aws_sdk_dynamodb::Client::from_conf(dynamodb);
    let store = PlantStore::new(client, config.table, config.max_plants_per_owner);
    let store = if xray { store.traced() } else { store };
    let api = PlantApi::new(Verifier::new(keys, &config.rules), store);
    let api = api.with_cors(&config.cors_allowed_origins);
    api.prepare().await;
    let api = Arc::new(api);
    // One at a time when AWS_LAMBDA_MAX_CONCURRENCY is unset or 1. The
    // event stays JSON text until `PlantApi::invoke` reads it, so that no
    // event fails the invocation.
    let handler = service_fn(move |event: LambdaEvent<Incoming>| {
        let api = Arc::clone(&api);
        async move { Ok::<_, Error>(api.invoke(event.payload.get(), event.context).await) }
    });
    Runtime::new(handler).run_concurrent().await
}
