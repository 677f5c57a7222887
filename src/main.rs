//! The Lambda `bootstrap`: reads the configuration, builds the clients,
//! fetches the signing keys and opens the DynamoDB connection once (in init,
//! where Lambda gives full CPU), and hands every request to
//! [`PlantApi::handle`].

use lambda_http::{Error, service_fn};
use plant_store::auth::Verifier;
use plant_store::config::Config;
use plant_store::http::PlantApi;
use plant_store::jwks::KeySource;
use plant_store::store::{PlantStore, client_config};

#[tokio::main]
async fn main() -> Result<(), Error> {
    plant_store::log::init_subscriber(std::io::stdout);
    let config = Config::from_env()?;
    let keys = KeySource::from_config(&config.keys)?;
    let client = aws_sdk_dynamodb::Client::from_conf(client_config().await);
    let store = PlantStore::new(client, config.table);
    // Both remote calls of a request, made ready while init has full CPU.
    tokio::join!(keys.prefetch(), store.warm_up());
    let api = PlantApi::new(Verifier::new(keys, &config.rules), store);
    let api = &api;
    lambda_http::run(service_fn(move |request| async move {
        Ok::<_, Error>(api.handle(request).await)
    }))
    .await
}
