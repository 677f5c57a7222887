//! The integration tests' harness: a table per test, this run's keys and
//! tokens, events through the handler, and local-support re-exported.

pub mod app;
pub mod dynamodb;
pub mod event;
pub mod forgeries;
pub mod key_server;
pub mod keys;
pub mod moto;
pub mod oidc_provider;
pub mod response;

pub use app::TestApp;
pub use dynamodb::{CallCounter, counted_dynamodb_client};
pub use event::{ApiGatewayEvent, EDGES};
pub use keys::{TestKeys, bearer, keys, token, token_rules, verifier};
pub use plant_store_local_support::documented::{self, Documented, operations};
pub use plant_store_local_support::keys::{AUDIENCE, ISSUER, SigningKey, unix_now};
pub use plant_store_local_support::{
    fault_proxy, http_server, runtime_api, tls_front, tools, xray_daemon,
};
pub use response::{TestResponse, assert_accepted, assert_refused};

pub const CHALLENGE: &str = r#"Bearer realm="plants""#;
pub const INVALID_TOKEN: &str = r#"Bearer realm="plants", error="invalid_token""#;
