//! The Lambda `bootstrap`: reads the configuration, builds the clients and
//! fetches the signing keys once (in init, where Lambda gives full CPU), and
//! hands every request to [`PlantApi::handle`].

use aws_config::BehaviorVersion;
use lambda_http::{Error, service_fn};
use plant_store::auth::Verifier;
use plant_store::config::Config;
use plant_store::http::PlantApi;
use plant_store::jwks::KeySource;
use plant_store::store::{PlantStore, client_config};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let keys = KeySource::from_config(&config.keys)?;
    let sdk_config = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let client = aws_sdk_dynamodb::Client::from_conf(client_config(&sdk_config));
    let store = PlantStore::new(client, config.table);
    keys.prefetch().await;
    let api = PlantApi::new(Verifier::new(keys, &config.rules), store);
    let api = &api;
    lambda_http::run(service_fn(move |request| async move {
        Ok::<_, Error>(api.handle(request).await)
    }))
    .await
}
