//! The test harness: a real DynamoDB Local (`scripts/test`'s, or one started
//! for the test binary under plain `cargo test`: [`dynamodb_local`]), a
//! fresh table per test, real signed tokens from keys generated for this run,
//! and requests that go through the production handler as real events. Also
//! a fault-injecting proxy for the store and a JWKS server, both on
//! 127.0.0.1. Production never links this crate.

pub mod dynamodb_local;
pub mod fault_proxy;
pub mod forgeries;
pub mod key_server;
pub mod runtime_api;
pub mod sam_local;

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{
    ConfigBag, Credentials, Intercept, Region, RuntimeComponents, SharedInterceptor,
};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::types::AttributeValue;
use jsonwebtoken::Algorithm;
use lambda_http::http::HeaderMap;
use lambda_http::{Body, Request, Response};
use plant_store::auth::Verifier;
use plant_store::config::TokenRules;
use plant_store::http::PlantApi;
use plant_store::jwks::{KeySet, KeySource};
use plant_store::store::{PlantStore, client_config};
use plant_store_dev::{DevKey, create_table};
use serde_json::{Value, json};

pub const ISSUER: &str = "https://issuer.plant-store.test";
pub const AUDIENCE: &str = "plant-store-tests";
/// Every kind of bad `limit` the contract names, as query strings.
pub const BAD_LIMIT_QUERIES: [&str; 11] = [
    "limit=0",
    "limit=-1",
    "limit=1001",
    "limit=1.5",
    "limit=abc",
    "limit=",
    "limit=1e2",
    "limit=%2B5",
    "limit=%205",
    "limit=5&limit=6",
    "limit=99999999999999999999",
];
pub const CHALLENGE: &str = r#"Bearer realm="plants""#;
pub const INVALID_TOKEN: &str = r#"Bearer realm="plants", error="invalid_token""#;

/// Keys generated once per test binary: one per accepted algorithm, all
/// published in the JWKS the function is configured with.
pub struct TestKeys {
    pub eddsa: DevKey,
    pub es256: DevKey,
    pub rs256: DevKey,
    pub jwks: String,
}

pub fn keys() -> &'static TestKeys {
    static KEYS: OnceLock<TestKeys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let eddsa = DevKey::generate(Algorithm::EdDSA).unwrap();
        let es256 = DevKey::generate(Algorithm::ES256).unwrap();
        let rs256 = DevKey::generate(Algorithm::RS256).unwrap();
        let jwks = DevKey::jwks_json(&[&eddsa, &es256, &rs256]);
        TestKeys {
            eddsa,
            es256,
            rs256,
            jwks,
        }
    })
}

/// A valid token for `sub` (EdDSA, one hour).
pub fn token(sub: &str) -> String {
    keys()
        .eddsa
        .token(ISSUER, Some(AUDIENCE), sub, 3600)
        .unwrap()
}

pub fn bearer(sub: &str) -> String {
    format!("Bearer {}", token(sub))
}

/// Counts the requests the SDK sends (retries included).
#[derive(Debug, Default, Clone)]
pub struct CallCounter(Arc<AtomicUsize>);

impl CallCounter {
    /// How many requests the client has sent so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

pub async fn dynamodb_client() -> Client {
    counted_dynamodb_client(None).await.0
}

/// The region and dummy credentials the tests give the SDK: scripts/test's,
/// else these (DynamoDB Local accepts any).
fn aws_env() -> [(&'static str, String); 3] {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    [
        ("AWS_REGION", var("AWS_REGION", "us-east-1")),
        ("AWS_ACCESS_KEY_ID", var("AWS_ACCESS_KEY_ID", "local")),
        (
            "AWS_SECRET_ACCESS_KEY",
            var("AWS_SECRET_ACCESS_KEY", "local"),
        ),
    ]
}

/// A client with the production configuration (retries, timeouts) whose
/// every request to DynamoDB is counted; to DynamoDB Local, or through
/// `endpoint` (a fault proxy) if given.
pub async fn counted_dynamodb_client(endpoint: Option<&str>) -> (Client, CallCounter) {
    let counter = CallCounter::default();
    let [(_, region), (_, key), (_, secret)] = aws_env();
    let config = client_config()
        .await
        .to_builder()
        .endpoint_url(endpoint.unwrap_or(dynamodb_local::url()))
        .region(Region::new(region))
        .credentials_provider(Credentials::new(key, secret, None, None, "tests"))
        .interceptor(SharedInterceptor::new(counter.clone()))
        .build();
    (Client::from_conf(config), counter)
}

fn unique_table_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "plants-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The token rules of the tests: this issuer and audience.
pub fn token_rules() -> TokenRules {
    TokenRules {
        issuer: ISSUER.into(),
        audience: Some(AUDIENCE.into()),
        cognito_client_id: None,
    }
}

/// The verifier as production configures it, trusting this run's test keys.
pub fn verifier() -> Verifier {
    let keys = KeySet::from_jwks_json(&keys().jwks).unwrap();
    Verifier::new(KeySource::Inline(keys), &token_rules())
}

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
        Self::build(verifier, None).await
    }

    /// The function's client goes through `endpoint` (a fault proxy); the
    /// table and the test's own reads stay on DynamoDB Local.
    pub async fn with_store_endpoint(endpoint: &str) -> Self {
        Self::build(verifier(), Some(endpoint)).await
    }

    async fn build(verifier: Verifier, store_endpoint: Option<&str>) -> Self {
        let (client, direct_calls) = counted_dynamodb_client(None).await;
        let table = unique_table_name();
        create_table(&client, &table).await.unwrap();
        let (store_client, calls) = match store_endpoint {
            None => (client.clone(), direct_calls),
            Some(endpoint) => counted_dynamodb_client(Some(endpoint)).await,
        };
        let api = PlantApi::new(verifier, PlantStore::new(store_client, &table));
        Self {
            api,
            client,
            table,
            calls,
        }
    }

    /// The environment of the function's binary serving this app's table with
    /// this run's keys (inline), as the SAM template configures it in AWS.
    pub fn function_env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = aws_env()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        env.extend([
            (
                "AWS_ENDPOINT_URL_DYNAMODB".to_owned(),
                dynamodb_local::url().to_owned(),
            ),
            ("PLANTS_TABLE".to_owned(), self.table.clone()),
            ("AUTH_ISSUER".to_owned(), ISSUER.to_owned()),
            ("AUTH_AUDIENCE".to_owned(), AUDIENCE.to_owned()),
            ("AUTH_JWKS".to_owned(), keys().jwks.clone()),
        ]);
        env
    }

    /// DynamoDB Local's URL.
    pub fn dynamodb_url() -> String {
        dynamodb_local::url().to_owned()
    }

    /// How many requests the SDK has sent to DynamoDB so far.
    pub fn dynamodb_calls(&self) -> usize {
        self.calls.count()
    }

    pub async fn send(&self, request: Request) -> TestResponse {
        TestResponse::from(self.api.handle(request).await)
    }

    pub async fn post(&self, authorization: &str, body: &str) -> TestResponse {
        self.send(HttpRequest::create_plant(authorization, body).build())
            .await
    }

    pub async fn get(&self, authorization: &str, query: &str) -> TestResponse {
        self.send(HttpRequest::list_plants(authorization, query).build())
            .await
    }

    /// Creates a plant through the API and checks it was accepted.
    pub async fn create(&self, owner: &str, body: Value) {
        let response = self.post(&bearer(owner), &body.to_string()).await;
        assert_eq!(response.status, 200, "seeding {body}: {:?}", response.body);
    }

    /// The owner of every item in the table, in the order of [`Self::stored_items`].
    pub async fn stored_owners(&self) -> Vec<Value> {
        let items = self.stored_items().await;
        items.iter().map(|item| item["owner"].clone()).collect()
    }

    /// Every item in the table, read straight from DynamoDB: what the function
    /// really stored, as `{owner, id, name, tag?}`, ordered by owner and id.
    pub async fn stored_items(&self) -> Vec<Value> {
        let mut items = Vec::new();
        let mut start_key = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .set_exclusive_start_key(start_key)
                .send()
                .await
                .unwrap();
            for item in page.items() {
                let mut row = serde_json::Map::new();
                for (attribute, value) in item {
                    let value = match value {
                        AttributeValue::S(text) => json!(text),
                        AttributeValue::N(number) => json!(number.parse::<i64>().unwrap()),
                        other => panic!("unexpected attribute {attribute}: {other:?}"),
                    };
                    row.insert(attribute.clone(), value);
                }
                items.push(Value::Object(row));
            }
            match page.last_evaluated_key {
                Some(key) => start_key = Some(key),
                None => break,
            }
        }
        items.sort_by_key(|item| (item["owner"].to_string(), item["id"].as_i64()));
        items
    }
}

/// A request as an HTTP API (v2) event, converted by lambda_http exactly as
/// it converts the events Lambda delivers.
pub struct HttpRequest {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
}

impl HttpRequest {
    pub fn new(method: &str, path_and_query: &str) -> Self {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        Self {
            method: method.to_owned(),
            path: path.to_owned(),
            query: query.to_owned(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// `POST /plants` of this JSON body.
    pub fn create_plant(authorization: &str, body: &str) -> Self {
        Self::new("POST", "/plants")
            .header("authorization", authorization)
            .header("content-type", "application/json")
            .body(body)
    }

    /// `GET /plants` with this query string (may be empty).
    pub fn list_plants(authorization: &str, query: &str) -> Self {
        let path = if query.is_empty() {
            "/plants".to_owned()
        } else {
            format!("/plants?{query}")
        };
        Self::new("GET", &path).header("authorization", authorization)
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn body(mut self, body: &str) -> Self {
        self.body = Some(body.to_owned());
        self
    }

    pub fn build(self) -> Request {
        lambda_http::request::from_str(&self.event()).unwrap()
    }

    /// The event as Lambda delivers it (what the Runtime API hands out).
    pub fn event(self) -> String {
        // API Gateway joins repeated headers with a comma in v2 events.
        let mut headers = serde_json::Map::new();
        for (name, value) in &self.headers {
            let joined = match headers.get(name).and_then(Value::as_str) {
                Some(previous) => format!("{previous},{value}"),
                None => value.clone(),
            };
            headers.insert(name.clone(), json!(joined));
        }
        let event = json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": self.path,
            "rawQueryString": self.query,
            "headers": headers,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "api-id",
                "domainName": "api-id.execute-api.us-east-1.amazonaws.com",
                "domainPrefix": "api-id",
                "http": {
                    "method": self.method,
                    "path": self.path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "192.0.2.1",
                    "userAgent": "plant-store-tests"
                },
                "requestId": "test-request",
                "routeKey": "$default",
                "stage": "$default",
                "time": "22/Nov/2026:10:00:00 +0000",
                "timeEpoch": 1_795_000_000_000u64
            },
            "body": self.body,
            "isBase64Encoded": false
        });
        event.to_string()
    }
}

/// A response with its body parsed as JSON.
#[derive(Debug)]
pub struct TestResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl From<Response<Body>> for TestResponse {
    fn from(response: Response<Body>) -> Self {
        let Body::Text(body) = response.body() else {
            panic!("expected a text body, got {:?}", response.body());
        };
        Self::new(response.status().as_u16(), response.headers().clone(), body)
    }
}

impl TestResponse {
    /// A response whose body must be JSON.
    pub fn new(status: u16, headers: HeaderMap, body: &str) -> Self {
        let body =
            serde_json::from_str(body).unwrap_or_else(|_| panic!("the body is JSON: {body:?}"));
        Self {
            status,
            headers,
            body,
        }
    }

    /// The HTTP response inside a Lambda response document: API Gateway's
    /// and function URLs' `headers` (and REST's `multiValueHeaders`), and
    /// the body parsed as JSON.
    pub fn from_lambda_response(response: &Value) -> Self {
        let mut headers = HeaderMap::new();
        for field in ["headers", "multiValueHeaders"] {
            for (name, value) in response[field].as_object().into_iter().flatten() {
                let values = match value {
                    Value::Array(values) => values.clone(),
                    single => vec![single.clone()],
                };
                for value in values {
                    let name: lambda_http::http::HeaderName = name.parse().unwrap();
                    let value = value.as_str().unwrap().parse().unwrap();
                    if !headers
                        .get_all(&name)
                        .iter()
                        .any(|present| *present == value)
                    {
                        headers.append(name, value);
                    }
                }
            }
        }
        let status = response["statusCode"].as_u64().unwrap() as u16;
        let body = response["body"].as_str().unwrap_or_default();
        Self::new(status, headers, body)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|value| value.to_str().unwrap())
    }

    /// Asserts the contract's Error body: `error` equals the status, and the
    /// message is a sentence that contains `mentions`.
    pub fn assert_error(&self, status: u16, mentions: &str) {
        assert_eq!(self.status, status, "body: {}", self.body);
        assert_eq!(self.header("content-type"), Some("application/json"));
        assert_eq!(self.body["error"], json!(status), "body: {}", self.body);
        let message = self.body["message"].as_str().expect("message is a string");
        assert!(
            message.contains(mentions),
            "message {message:?} should mention {mentions:?}"
        );
        assert_eq!(
            self.body.as_object().unwrap().len(),
            2,
            "only error and message: {}",
            self.body
        );
    }
}

/// Asserts that a POST with this Authorization is accepted (200).
pub async fn assert_accepted(app: &TestApp, authorization: &str, case: &str) {
    let response = app
        .post(authorization, r#"{"id": 1, "name": "Fern"}"#)
        .await;
    assert_eq!(response.status, 200, "{case}: {}", response.body);
}

/// Asserts that a POST with this Authorization gets 401 with the given
/// challenge and a message that does not echo the token, and writes nothing.
pub async fn assert_refused(app: &TestApp, authorization: &str, challenge: &str, case: &str) {
    let response = app
        .post(authorization, r#"{"id": 1, "name": "Fern"}"#)
        .await;
    assert_eq!(response.status, 401, "{case}: {}", response.body);
    response.assert_error(401, "token");
    assert_eq!(
        response.header("www-authenticate"),
        Some(challenge),
        "{case}"
    );
    let token = authorization.split_whitespace().last().unwrap_or_default();
    if token.len() > 8 {
        assert!(
            !response.body.to_string().contains(token),
            "{case}: token echoed"
        );
    }
    assert!(
        app.stored_items().await.is_empty(),
        "{case}: something was written"
    );
}
