//! The Lambda `bootstrap`: reads the configuration, builds the clients,
//! fetches the signing keys and opens the DynamoDB connection once (in init,
//! where Lambda gives full CPU), and hands every request to
//! [`PlantApi::invoke`]: one at a time on classic Lambda, up to
//! `AWS_LAMBDA_MAX_CONCURRENCY` at once on Lambda Managed Instances.

use std::sync::Arc;

use lambda_http::{Error, LambdaEvent, lambda_runtime, service_fn};
use plant_store::auth::Verifier;
use plant_store::config::{Config, LogConfig};
use plant_store::http::PlantApi;
use plant_store::https::Https;
use plant_store::jwks::KeySource;
use plant_store::store::{PlantStore, client_config};
use plant_store::trace::Tracer;

#[tokio::main]
async fn main() -> Result<(), Error> {
    plant_store::log::init_subscriber(std::io::stdout, LogConfig::from_env());
    let config = Config::from_env()?;
    // One trust store and connector for both remote calls (https.rs).
    let https = Https::new(&config.trust)?;
    let keys = KeySource::from_config(&config.keys, &https)?;
    let dynamodb = client_config(&https, config.dynamodb_endpoint.as_deref()).await;
    let client = aws_sdk_dynamodb::Client::from_conf(dynamodb);
    let store = PlantStore::new(client, config.table, config.max_plants_per_owner);
    let tracer = Tracer::new(config.xray_daemon.as_deref());
    // Both remote calls of a request, made ready while init has full CPU.
    tracer
        .init(async {
            tokio::join!(keys.prefetch(), store.warm_up());
        })
        .await;
    let api = PlantApi::new(Verifier::new(keys, &config.rules), store).traced_by(tracer);
    let api = Arc::new(api);
    // Falls back to the one-at-a-time loop when the variable is unset or 1,
    // so the same binary serves both. The event stays JSON until
    // `PlantApi::invoke` reads it (src/event.rs), so that no event fails
    // the invocation.
    lambda_runtime::run_concurrent(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let api = Arc::clone(&api);
        async move { Ok::<_, Error>(api.invoke(event).await) }
    }))
    .await
}
