//! Any `Authorization` value (and token in it): only a token the configured
//! key signed verifies, and the genuine one keeps verifying.
#![no_main]

use std::sync::OnceLock;

mod common;

use lambda_http::http::{HeaderMap, HeaderValue, header::AUTHORIZATION};
use libfuzzer_sys::fuzz_target;
use plant_store::auth::{Access, Verifier};

struct Setup {
    runtime: tokio::runtime::Runtime,
    verifier: Verifier,
    genuine: String,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let (key, keys) = common::signing_key();
        Setup {
            runtime: common::runtime(),
            verifier: Verifier::new(keys, &common::rules(None)),
            genuine: key.token(common::ISSUER, Some(common::AUDIENCE), "fuzzer", 3600).unwrap(),
        }
    })
}

fn authenticate(setup: &Setup, value: &[u8]) -> bool {
    let Ok(value) = HeaderValue::from_bytes(value) else { return false };
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, value);
    setup.runtime.block_on(setup.verifier.authenticate(&headers, Access::Write)).is_ok()
}

fuzz_target!(|data: &[u8]| {
    let setup = setup();
    // The raw header value, then the same bytes as a bearer token.
    let accepted = authenticate(setup, data);
    let mut bearer = b"Bearer ".to_vec();
    bearer.extend_from_slice(data);
    let accepted_as_token = authenticate(setup, &bearer);
    // Only the genuine token (possibly with spaces around it) may verify.
    if accepted_as_token {
        assert_eq!(std::str::from_utf8(data).map(str::trim), Ok(setup.genuine.as_str()));
    }
    if accepted {
        assert!(data.windows(setup.genuine.len()).any(|window| window == setup.genuine.as_bytes()));
    }
    assert!(authenticate(setup, format!("Bearer {}", setup.genuine).as_bytes()));
});
