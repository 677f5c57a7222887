//! Whole events of the three shapes, every part a client controls fuzzed,
//! through `PlantApi::invoke`: mostly to an operation of `OPERATIONS`, its
//! path parameters any text; a status of the operations' (the store is a
//! closed port: 503), JSON, and for an error the Error body.
#![no_main]

use std::sync::OnceLock;

mod common;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use lambda_http::Context;
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use plant_store::api::PlantApi;
use plant_store::auth::Verifier;
use plant_store::https::Https;
use plant_store::route::OPERATIONS;
use plant_store::store::PlantStore;
use serde_json::{Value, json};

const SHAPES: [&str; 3] = [
    include_str!("../../events/rest-api/list-plants.json"),
    include_str!("../../events/http-api/list-plants.json"),
    include_str!("../../events/function-url/list-plants.json"),
];

struct Setup {
    runtime: tokio::runtime::Runtime,
    api: PlantApi,
    genuine: String,
    shapes: Vec<Value>,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let runtime = common::runtime();
        let (key, keys) = common::signing_key();
        let https = Https::new(&Default::default()).unwrap();
        // Nothing listens on port 1: every store call is refused at once,
        // and not retried (the fuzzer wants the answer, not the backoff).
        let store_config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("fuzz", "fuzz", None, None, "fuzz"))
            .endpoint_url("http://127.0.0.1:1")
            .http_client(https.sdk_http_client())
            .retry_config(RetryConfig::disabled())
            .build();
        let store =
            PlantStore::new(aws_sdk_dynamodb::Client::from_conf(store_config), "plants", 10);
        let api = PlantApi::new(Verifier::new(keys, &common::rules(None)), store);
        let genuine = key.token(common::ISSUER, Some(common::AUDIENCE), "fuzzer", 3600).unwrap();
        let shapes = SHAPES
            .iter()
            .map(|text| serde_json::from_str(&text.replace("{{token}}", &genuine)).unwrap())
            .collect();
        Setup { runtime, api, genuine, shapes }
    })
}

/// A real event of one of the three shapes with the client's parts fuzzed.
fn event(setup: &Setup, input: &mut Unstructured) -> Result<Value> {
    let shape = usize::from(input.int_in_range(0..=2u8)?);
    let mut event = setup.shapes[shape].clone();
    let operation = input.choose(&OPERATIONS)?;
    let method = operation.method.as_str();
    let method =
        *input.choose(&[method, method, "GET", "POST", "DELETE", "OPTIONS", "HEAD", "G:T"])?;
    let path = match input.arbitrary()? {
        true => input.arbitrary()?,
        false => {
            let segments =
                operation.path.split('/').map(|segment| match segment.starts_with('{') {
                    true => input.arbitrary::<String>(),
                    false => Ok(segment.to_owned()),
                });
            segments.collect::<Result<Vec<_>>>()?.join("/")
        }
    };
    let mut headers = serde_json::Map::new();
    if input.arbitrary()? {
        headers.insert("authorization".into(), json!(format!("Bearer {}", setup.genuine)));
    }
    for _ in 0..input.int_in_range(0..=4u8)? {
        let name: String = input.arbitrary()?;
        let value: String = input.arbitrary()?;
        headers.insert(name, json!(value));
    }
    let body: Option<String> = input.arbitrary()?;
    let base64: bool = input.arbitrary()?;
    // What API Gateway's greedy route matched: any text.
    if shape < 2 {
        event["pathParameters"] = json!({"proxy": input.arbitrary::<String>()?});
    }
    match shape {
        0 => rest_request(&mut event, method, path, headers, input)?,
        _ => {
            let raw_query: String = input.arbitrary()?;
            event["rawPath"] = json!(path);
            event["rawQueryString"] = json!(raw_query);
            event["requestContext"]["http"]["method"] = json!(method);
            event["requestContext"]["http"]["path"] = json!(path);
            event["headers"] = Value::Object(headers);
            event["cookies"] = json!(input.arbitrary::<Option<Vec<String>>>()?);
        }
    }
    event["body"] = json!(body);
    event["isBase64Encoded"] = json!(base64);
    Ok(event)
}

/// A REST API's request parts: each header and query parameter in both maps.
fn rest_request(
    event: &mut Value,
    method: &str,
    path: String,
    headers: serde_json::Map<String, Value>,
    input: &mut Unstructured,
) -> Result<()> {
    let query: Vec<(String, String)> = input.arbitrary()?;
    let mut single = serde_json::Map::new();
    let mut multi = serde_json::Map::new();
    for (name, value) in query {
        single.insert(name.clone(), json!(value));
        multi.insert(name, json!([value]));
    }
    let multi_headers: serde_json::Map<String, Value> =
        headers.iter().map(|(name, value)| (name.clone(), json!([value]))).collect();
    event["path"] = json!(path);
    event["httpMethod"] = json!(method);
    event["headers"] = Value::Object(headers);
    event["multiValueHeaders"] = Value::Object(multi_headers);
    event["queryStringParameters"] = Value::Object(single);
    event["multiValueQueryStringParameters"] = Value::Object(multi);
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let setup = setup();
    let Ok(event) = event(setup, &mut Unstructured::new(data)) else { return };
    let head = [&event["httpMethod"], &event["requestContext"]["http"]["method"]]
        .contains(&&json!("HEAD"));
    let answer = setup.runtime.block_on(setup.api.invoke(&event.to_string(), Context::default()));
    let answer = serde_json::to_value(answer).unwrap();
    let status = answer["statusCode"].as_u64().unwrap();
    let answers = OPERATIONS.iter().flat_map(|operation| operation.answers);
    // An operation's statuses (the store's 500 aside: it is a closed port),
    // or no operation's: 404, 405.
    let known = |&code: &u16| u64::from(code) == status && status != 500;
    assert!(answers.chain(&[404, 405]).any(known), "{status}: {answer}");
    let headers = &answer["headers"];
    assert_eq!(headers["content-type"], "application/json", "{answer}");
    // A HEAD request the router answers has no body (one it cannot read does).
    let body = answer["body"].as_str().unwrap_or_default();
    if head && body.is_empty() {
        return;
    }
    let body: Value = serde_json::from_str(body).unwrap();
    if status >= 400 {
        assert_eq!(body["error"], status, "{answer}");
        assert!(body["message"].as_str().is_some_and(|message| !message.is_empty()));
    }
});
