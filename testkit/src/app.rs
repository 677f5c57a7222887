//! The function under test: the production handler on a table of its own.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::Context;
use plant_store::api::PlantApi;
use plant_store::auth::Verifier;
use plant_store::config::DEFAULT_MAX_PLANTS_PER_OWNER;
use plant_store::store::PlantStore;
use plant_store::store::layout::counter_owner;
use plant_store_admin::create_table;
use plant_store_local_support::function::Env;
use serde_json::{Value, json};

use crate::dynamodb::{CallCounter, counted_dynamodb_client, dynamodb_url, unique_table_name};
use crate::{ApiGatewayEvent, TestResponse, bearer, keys, verifier};

/// The function as production wires it, on a table of its own.
pub struct TestApp {
    pub api: PlantApi,
    pub client: Client,
    pub table: String,
    calls: CallCounter,
}

impl TestApp {
    pub async fn new() -> Self {
        Self::with_verifier(verifier()).await
    }

    pub async fn with_verifier(verifier: Verifier) -> Self {
        Self::build(verifier, None, DEFAULT_MAX_PLANTS_PER_OWNER).await
    }

    /// The function's client through `endpoint` (a fault proxy) if given,
    /// the table and the test's own reads on DynamoDB Local; at most `max`
    /// plants per owner (0: no bound).
    pub async fn with_store(endpoint: Option<&str>, max: u32) -> Self {
        Self::build(verifier(), endpoint, max).await
    }

    async fn build(verifier: Verifier, store_endpoint: Option<&str>, max_plants: u32) -> Self {
        let (client, direct_calls) = counted_dynamodb_client(None).await;
        let table = unique_table_name();
        create_table(&client, &table).await.unwrap();
        let (store_client, calls) = match store_endpoint {
            None => (client.clone(), direct_calls),
            Some(endpoint) => counted_dynamodb_client(Some(endpoint)).await,
        };
        let api = PlantApi::new(verifier, PlantStore::new(store_client, &table, max_plants));
        Self { api, client, table, calls }
    }

    /// The function answering browsers of these origins too (`CORS_ALLOWED_ORIGINS`).
    pub fn with_cors(mut self, origins: &[&str]) -> Self {
        let origins: Vec<String> = origins.iter().map(|origin| (*origin).to_owned()).collect();
        self.api = self.api.with_cors(&origins);
        self
    }

    /// The environment of the function's binary serving this app's table with
    /// this run's keys (inline), as the SAM template configures it in AWS.
    pub fn function_env(&self) -> Env {
        Env::function(dynamodb_url(), &self.table, &keys().issuer)
    }

    /// DynamoDB Local's URL.
    pub fn dynamodb_url() -> String {
        dynamodb_url().to_owned()
    }

    /// How many requests the SDK has sent to DynamoDB so far.
    pub fn dynamodb_calls(&self) -> usize {
        self.calls.count()
    }

    /// Sends `request` as Lambda delivers an HTTP API event.
    pub async fn send(&self, request: ApiGatewayEvent) -> TestResponse {
        self.invoke(&request.event()).await
    }

    /// Answers `event` as the function's binary does: the whole invocation,
    /// from the event Lambda delivers to the response it returns.
    pub async fn invoke(&self, event: &str) -> TestResponse {
        TestResponse::from(self.api.invoke(event, Context::default()).await)
    }

    pub async fn post(&self, authorization: &str, body: &str) -> TestResponse {
        self.send(ApiGatewayEvent::create_plant(authorization, body)).await
    }

    pub async fn get(&self, authorization: &str, query: &str) -> TestResponse {
        self.send(ApiGatewayEvent::list_plants(authorization, query)).await
    }

    /// Creates a plant through the API and checks it was accepted.
    pub async fn create(&self, owner: &str, body: Value) {
        let response = self.post(&bearer(owner), &body.to_string()).await;
        assert_eq!(response.status, 200, "seeding {body}: {:?}", response.body);
    }

    /// The owner of every item in the table, in the order of [`Self::stored_items`].
    pub async fn stored_owners(&self) -> Vec<Value> {
        self.stored_items().await.iter().map(|item| item["owner"].clone()).collect()
    }

    /// Every plant in the table, read straight from DynamoDB: what the
    /// function really stored, as `{owner, id, name, tag?}`, ordered by owner
    /// and id. The owners' counter items are not plants: see
    /// [`Self::stored_plant_counts`].
    pub async fn stored_items(&self) -> Vec<Value> {
        self.scan().await.0
    }

    /// Each owner's counter item as `{owner, plants}`, ordered by owner.
    pub async fn stored_plant_counts(&self) -> Vec<Value> {
        self.scan().await.1
    }

    /// The whole table: plants, and the owners' counter items.
    async fn scan(&self) -> (Vec<Value>, Vec<Value>) {
        let scan = self.client.scan().table_name(&self.table).into_paginator();
        let items: Vec<_> = scan.items().send().collect::<Result<_, _>>().await.unwrap();
        let (mut plants, mut counters) = (Vec::new(), Vec::new());
        for item in &items {
            let counted = item.get("owner").and_then(|owner| counter_owner(owner.as_s().ok()?));
            let mut row = serde_json::Map::new();
            for (attribute, value) in item {
                let value = match (attribute.as_str(), value, counted) {
                    ("id", _, Some(_)) => continue,
                    ("owner", _, Some(owner)) => json!(owner),
                    (_, AttributeValue::S(text), _) => json!(text),
                    (_, AttributeValue::N(number), _) => json!(number.parse::<i64>().unwrap()),
                    (_, other, _) => panic!("unexpected attribute {attribute}: {other:?}"),
                };
                row.insert(attribute.clone(), value);
            }
            let rows = if counted.is_some() { &mut counters } else { &mut plants };
            rows.push(Value::Object(row));
        }
        plants.sort_by_key(|item| (item["owner"].to_string(), item["id"].as_i64()));
        counters.sort_by_key(|item| item["owner"].to_string());
        (plants, counters)
    }
}
