//! Any `scope` and `scp` claims (split at the first NUL, JSON where it
//! parses): a token passes exactly when a model of the rule grants the scope.
#![no_main]

use std::sync::OnceLock;

mod common;

use lambda_http::http::{HeaderMap, HeaderValue, header::AUTHORIZATION};
use libfuzzer_sys::fuzz_target;
use plant_store::auth::{Access, Verifier};
use plant_store::config::ScopeRules;
use plant_store_local_support::keys::{SigningKey, unix_now};
use serde_json::{Value, json};

const READ: &str = "plants/read";

struct Setup {
    runtime: tokio::runtime::Runtime,
    verifier: Verifier,
    key: SigningKey,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let (key, keys) = common::signing_key();
        let rules =
            common::rules(Some(ScopeRules { read: READ.into(), write: "plants/write".into() }));
        Setup { runtime: common::runtime(), verifier: Verifier::new(keys, &rules), key }
    })
}

fn claim(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// What the contract says the claims grant, apart from the function's code.
fn grants_read(scope: &Value, scp: &Value) -> bool {
    let in_list =
        |value: &Value| value.as_str().is_some_and(|list| list.split(' ').any(|s| s == READ));
    in_list(scope)
        || in_list(scp)
        || scp.as_array().is_some_and(|items| items.iter().any(|item| item == READ))
}

fuzz_target!(|data: &[u8]| {
    let setup = setup();
    let (scope, scp) = match data.iter().position(|&byte| byte == 0) {
        Some(at) => (claim(&data[..at]), claim(&data[at + 1..])),
        None => (claim(data), Value::Null),
    };
    let now = unix_now();
    let claims = json!({"iss": common::ISSUER, "aud": common::AUDIENCE, "sub": "fuzzer", "exp": now + 600, "scope": scope, "scp": scp});
    let token = setup.key.sign(&claims).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}")).unwrap());
    let accepted =
        setup.runtime.block_on(setup.verifier.authenticate(&headers, Access::Read)).is_ok();
    assert_eq!(accepted, grants_read(&scope, &scp), "scope {scope} scp {scp}");
});
