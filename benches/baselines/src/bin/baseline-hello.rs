//! The init floor of any Rust Lambda: a bare `lambda_runtime` loop.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|_: LambdaEvent<Value>| async {
        Ok::<_, Error>(json!({"statusCode": 200, "body": "[]"}))
    }))
    .await
}
