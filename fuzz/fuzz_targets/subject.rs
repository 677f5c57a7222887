//! Any `sub` in a signed token, with or without `crit`: accepted exactly
//! when no critical extension is named (RFC 7515) and the subject is
//! usable (docs/contract.md).
#![no_main]

use std::sync::OnceLock;

mod common;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use lambda_http::http::{HeaderMap, HeaderValue, header::AUTHORIZATION};
use libfuzzer_sys::fuzz_target;
use plant_store::auth::{Access, Verifier};
use plant_store::domain::limits::MAX_SUBJECT_BYTES;
use plant_store_local_support::keys::unix_now;
use serde_json::json;

struct Setup {
    runtime: tokio::runtime::Runtime,
    verifier: Verifier,
    encoding: EncodingKey,
    kid: String,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let (key, keys) = common::signing_key();
        Setup {
            runtime: common::runtime(),
            verifier: Verifier::new(keys, &common::rules(None)),
            encoding: EncodingKey::from_ed_pem(key.pkcs8_pem().as_bytes()).unwrap(),
            kid: key.kid().to_owned(),
        }
    })
}

/// The contract's usable subject, apart from the function's code: not
/// blank, no control character, at most 512 bytes.
fn usable(sub: &str) -> bool {
    sub.chars().any(|c| !c.is_whitespace())
        && sub.chars().all(|c| !c.is_control())
        && sub.len() <= MAX_SUBJECT_BYTES
}

fuzz_target!(|input: (bool, &str)| {
    let (critical, sub) = input;
    let setup = setup();
    let mut header = Header::new(Algorithm::EdDSA);
    (header.kid, header.typ) = (Some(setup.kid.clone()), Some("at+jwt".into()));
    if critical {
        header.crit = Some(vec!["exp".to_owned()]);
    }
    let now = unix_now();
    let claims =
        json!({"iss": common::ISSUER, "aud": common::AUDIENCE, "sub": sub, "exp": now + 600});
    let token = jsonwebtoken::encode(&header, &claims, &setup.encoding).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}")).unwrap());
    let accepted = setup.runtime.block_on(setup.verifier.authenticate(&headers, Access::Write));
    let expected = !critical && usable(sub);
    assert_eq!(accepted.is_ok(), expected, "crit {critical}, sub {sub:?}");
    if let Ok(owner) = accepted {
        assert_eq!(owner.as_str(), sub);
    }
});
