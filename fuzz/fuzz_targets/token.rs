//! Bearer tokens, each case against a model of its rule: any
//! `Authorization` value (only the genuine token verifies, and it keeps
//! verifying); any `sub`, with or without `crit` (accepted exactly when no
//! critical extension is named, RFC 7515, and the subject is usable,
//! docs/contract.md); any `scope` and `scp` claims (split at the first
//! NUL, JSON where it parses: passes exactly when the rule grants read).
#![no_main]

use std::sync::OnceLock;

mod common;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use lambda_http::http::{HeaderMap, HeaderValue, header::AUTHORIZATION};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use plant_store::auth::{Access, Verifier};
use plant_store::config::ScopeRules;
use plant_store::domain::limits::MAX_SUBJECT_BYTES;
use plant_store::jwks::KeySource;
use plant_store_local_support::keys::{SigningKey, unix_now};
use serde_json::{Value, json};

const READ: &str = "plants/read";

#[derive(Arbitrary, Debug)]
enum Input<'a> {
    Authorization(&'a [u8]),
    Subject(bool, &'a str),
    Scopes(&'a [u8]),
}

struct Setup {
    runtime: tokio::runtime::Runtime,
    verifier: Verifier,
    /// Requires the read and write scopes.
    scoped: Verifier,
    encoding: EncodingKey,
    kid: String,
    genuine: String,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let (key, keys) = common::signing_key();
        let same_keys = KeySource::inline(&SigningKey::jwks_json(&[&key])).unwrap();
        let scopes = ScopeRules { read: READ.into(), write: "plants/write".into() };
        Setup {
            runtime: common::runtime(),
            verifier: Verifier::new(keys, &common::rules(None)),
            scoped: Verifier::new(same_keys, &common::rules(Some(scopes))),
            encoding: EncodingKey::from_ed_pem(key.pkcs8_pem().as_bytes()).unwrap(),
            kid: key.kid().to_owned(),
            genuine: key.token(common::ISSUER, Some(common::AUDIENCE), "fuzzer", 3600).unwrap(),
        }
    })
}

impl Setup {
    /// The owner `authorization` authenticates as, if any.
    fn owner(&self, verifier: &Verifier, authorization: &[u8], access: Access) -> Option<String> {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_bytes(authorization).ok()?);
        let owner = self.runtime.block_on(verifier.authenticate(&headers, access)).ok()?;
        Some(owner.as_str().to_owned())
    }

    /// `Bearer` and a token of these claims (besides issuer, audience and
    /// expiry), typed as an access token, `crit` naming `exp` if `critical`.
    fn bearer(&self, claims: Value, critical: bool) -> Vec<u8> {
        let mut header = Header::new(Algorithm::EdDSA);
        (header.kid, header.typ) = (Some(self.kid.clone()), Some("at+jwt".into()));
        header.crit = critical.then(|| vec!["exp".to_owned()]);
        let mut claims = claims;
        claims["iss"] = json!(common::ISSUER);
        claims["aud"] = json!(common::AUDIENCE);
        claims["exp"] = json!(unix_now() + 600);
        let token = jsonwebtoken::encode(&header, &claims, &self.encoding).unwrap();
        format!("Bearer {token}").into_bytes()
    }
}

/// The contract's usable subject, apart from the function's code: not
/// blank, no control character, at most 512 bytes.
fn usable(sub: &str) -> bool {
    sub.chars().any(|c| !c.is_whitespace())
        && sub.chars().all(|c| !c.is_control())
        && sub.len() <= MAX_SUBJECT_BYTES
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

fuzz_target!(|input: Input| {
    let setup = setup();
    match input {
        Input::Authorization(data) => {
            let accepted = setup.owner(&setup.verifier, data, Access::Write).is_some();
            let as_token = [b"Bearer ", data].concat();
            // Only the genuine token (possibly with spaces around it) may verify.
            if setup.owner(&setup.verifier, &as_token, Access::Write).is_some() {
                assert_eq!(std::str::from_utf8(data).map(str::trim), Ok(setup.genuine.as_str()));
            }
            if accepted {
                let genuine = setup.genuine.as_bytes();
                assert!(data.windows(genuine.len()).any(|window| window == genuine));
            }
            let genuine = format!("Bearer {}", setup.genuine);
            assert!(setup.owner(&setup.verifier, genuine.as_bytes(), Access::Write).is_some());
        }
        Input::Subject(critical, sub) => {
            let bearer = setup.bearer(json!({"sub": sub}), critical);
            let owner = setup.owner(&setup.verifier, &bearer, Access::Write);
            let expected = (!critical && usable(sub)).then(|| sub.to_owned());
            assert_eq!(owner, expected, "crit {critical}, sub {sub:?}");
        }
        Input::Scopes(data) => {
            let (scope, scp) = match data.iter().position(|&byte| byte == 0) {
                Some(at) => (claim(&data[..at]), claim(&data[at + 1..])),
                None => (claim(data), Value::Null),
            };
            let claims = json!({"sub": "fuzzer", "scope": scope, "scp": scp});
            let bearer = setup.bearer(claims, false);
            let accepted = setup.owner(&setup.scoped, &bearer, Access::Read).is_some();
            assert_eq!(accepted, grants_read(&scope, &scp), "scope {scope} scp {scp}");
        }
    }
});
