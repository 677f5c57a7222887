//! The test harness: a real DynamoDB Local (`scripts/test`'s, or one started
//! for the test binary under plain `cargo test`: [`dynamodb`]), a fresh
//! table per test, real signed tokens from keys generated for this run, and
//! requests that go through the production handler as real events. What
//! runs around the function (the stand-ins for AWS, the key server, the TLS
//! front, `sam local`) is the local-support crate's, re-exported here.
//! Production never links this crate.
//!
//! By concern: [`keys`] (keys, tokens, the verifier), [`dynamodb`] (the
//! clients), [`app`] (the function under test), [`event`] (API Gateway
//! events), [`response`] (responses and their assertions), [`sam_local`]
//! (the artifact through `sam local`), [`moto`] (moto's Cognito); the
//! contract's constants are here.

pub mod app;
pub mod dynamodb;
pub mod event;
pub mod forgeries;
pub mod key_server;
pub mod keys;
pub mod moto;
pub mod response;
pub mod sam_local;

pub use app::TestApp;
pub use dynamodb::{
    CallCounter, WriteUnits, counted_dynamodb_client, dynamodb_client, dynamodb_client_with,
};
pub use event::ApiGatewayEvent;
pub use keys::{TestKeys, bearer, keys, token, token_rules, verifier};
pub use plant_store_local_support::keys::{AUDIENCE, ISSUER, SigningKey, unix_now};
pub use plant_store_local_support::{
    fault_proxy, http_server, runtime_api, tls_front, tools, xray_daemon,
};
pub use response::{TestResponse, assert_accepted, assert_refused};

pub const CHALLENGE: &str = r#"Bearer realm="plants""#;
pub const INVALID_TOKEN: &str = r#"Bearer realm="plants", error="invalid_token""#;
