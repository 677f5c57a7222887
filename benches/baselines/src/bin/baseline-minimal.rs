//! The SDK floor: a conditional `PutItem` per create, a strongly consistent
//! `Query` per listing, the SDK's defaults, a warm-up; nothing else.

use aws_config::BehaviorVersion;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::{Body, Error, Request, RequestExt, Response, service_fn};
use serde_json::Value;

const OWNER: &str = "baseline";

/// A Query of `owner`'s partition.
fn query_of(client: &Client, table: &str, owner: &str) -> QueryFluentBuilder {
    let query = client.query().table_name(table).key_condition_expression("#owner = :owner");
    let query = query.expression_attribute_names("#owner", "owner");
    query.expression_attribute_values(":owner", AttributeValue::S(owner.into()))
}

async fn handle(client: &Client, table: &str, request: Request) -> Result<Response<Body>, Error> {
    let body = if request.method() == "POST" {
        let plant: Value = serde_json::from_slice(request.body().as_ref())?;
        let result = client
            .put_item()
            .table_name(table)
            .item("owner", AttributeValue::S(OWNER.into()))
            .item("id", AttributeValue::N(plant["id"].to_string()))
            .item("name", AttributeValue::S(plant["name"].to_string()))
            .condition_expression("attribute_not_exists(id)")
            .send()
            .await;
        match result {
            Ok(_) => plant.to_string(),
            Err(error) => error.to_string(),
        }
    } else {
        // As the function does: one more than the page, to know whether more exist.
        let query = request.query_string_parameters_ref();
        let limit: i32 = query.and_then(|query| query.first("limit")?.parse().ok()).unwrap_or(100);
        // The contract reads its writes (docs/contract.md): the cheapest
        // Query that does is a strongly consistent one.
        let page = query_of(client, table, OWNER).consistent_read(true).limit(limit + 1);
        let page = page.send().await?;
        format!("{} items", page.count())
    };
    Ok(Response::new(Body::Text(body)))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let table = std::env::var("PLANTS_TABLE")?;
    let sdk_config = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let client = Client::new(&sdk_config);
    let _ = query_of(&client, &table, "warm-up").limit(1).send().await;
    // As the function runs: up to AWS_LAMBDA_MAX_CONCURRENCY at once.
    let table: std::sync::Arc<str> = table.into();
    lambda_http::run_concurrent(service_fn(move |request| {
        let (client, table) = (client.clone(), table.clone());
        async move { handle(&client, &table, request).await }
    }))
    .await
}
