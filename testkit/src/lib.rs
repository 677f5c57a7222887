//! The test harness: a real DynamoDB Local (`scripts/test`'s, or one started
//! for the test binary under plain `cargo test`: [`dynamodb_local`]), a
//! fresh table per test, real signed tokens from keys generated for this run,
//! and requests that go through the production handler as real events. Also
//! a fault-injecting proxy for the store, a JWKS server and a TLS front with
//! a CA of its own, all on 127.0.0.1. Production never links this crate.
//!
//! By concern: [`keys`] (keys, tokens, the verifier), [`dynamodb`] (the
//! clients), [`app`] (the function under test), [`event`] (API Gateway
//! events), [`response`] (responses and their assertions); the contract's
//! constants are here.

pub mod app;
pub mod dynamodb;
pub mod dynamodb_local;
pub mod event;
pub mod forgeries;
pub mod key_server;
pub mod keys;
pub mod moto;
pub mod response;
pub mod sam_local;
pub mod tls_front;

pub use app::TestApp;
pub use dynamodb::{
    CallCounter, WriteUnits, counted_dynamodb_client, dynamodb_client, dynamodb_client_with,
};
pub use event::{ApiGatewayEvent, request};
pub use keys::{TestKeys, bearer, keys, token, token_rules, verifier};
pub use plant_store_stand_in::{fault_proxy, http_server, runtime_api, xray_daemon};
pub use response::{TestResponse, assert_accepted, assert_refused};

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
