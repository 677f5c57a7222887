//! Whole JWKS documents, entries of any shape: only no JWKS is refused, no
//! key unlisted verifies, and a key listed once, as published, does.
#![no_main]

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

#[allow(dead_code)] // what the targets that verify tokens share, not all of it used here
mod common;

use jsonwebtoken::Algorithm;
use lambda_http::http::{HeaderMap, HeaderValue, header::AUTHORIZATION};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use plant_store::auth::{Access, Verifier};
use plant_store::jwks::{KeySet, KeySource};
use plant_store_local_support::keys::SigningKey;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// An issuer's key: its JWK as published, a token it signed, and the text
/// that only its entry holds (its key material).
struct PoolKey {
    kid: String,
    jwk: Value,
    material: String,
    bearer: HeaderMap,
}

fn pool() -> &'static (tokio::runtime::Runtime, Vec<PoolKey>) {
    static POOL: OnceLock<(tokio::runtime::Runtime, Vec<PoolKey>)> = OnceLock::new();
    POOL.get_or_init(|| {
        let keys = [Algorithm::EdDSA, Algorithm::ES256, Algorithm::RS256].map(|algorithm| {
            let key = SigningKey::generate(algorithm).unwrap();
            let jwk = serde_json::to_value(key.jwk()).unwrap();
            let material = ["x", "n"].iter().find_map(|field| jwk[field].as_str()).unwrap();
            let token = key.token(common::ISSUER, Some(common::AUDIENCE), "fuzzer", 3600);
            let mut bearer = HeaderMap::new();
            let value = format!("Bearer {}", token.unwrap());
            bearer.insert(AUTHORIZATION, HeaderValue::from_str(&value).unwrap());
            PoolKey { kid: key.kid().to_owned(), material: material.to_owned(), jwk, bearer }
        });
        (common::runtime(), keys.into())
    })
}

#[derive(Arbitrary, Debug)]
enum Json {
    Null,
    Bool(bool),
    Integer(i64),
    Float(f64),
    Text(String),
    List(Vec<String>),
    Object(Vec<(String, String)>),
}

impl Json {
    fn value(&self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Bool(flag) => json!(flag),
            Self::Integer(number) => json!(number),
            Self::Float(number) => json!(number),
            Self::Text(text) => json!(text),
            Self::List(items) => json!(items),
            Self::Object(members) => members.iter().cloned().collect(),
        }
    }
}

/// The members a JWK of these keys may have.
const FIELDS: [&str; 11] =
    ["kid", "kty", "crv", "alg", "use", "key_ops", "x", "y", "n", "e", "x5c"];

#[derive(Arbitrary, Debug)]
enum Entry {
    /// A pool key's JWK as its issuer publishes it.
    Published(u8),
    /// The same with one of [`FIELDS`] set to any JSON value.
    Changed(u8, u8, Json),
    /// Any JSON value.
    Other(Json),
    /// Any text where an entry goes: no JSON at all, perhaps.
    Text(String),
}

#[derive(Arbitrary, Debug)]
enum Document {
    /// `{"keys": [...]}` with these entries.
    Jwks(Vec<Entry>),
    /// `{"keys": <value>}`.
    KeysOfAnotherType(Json),
    /// Any text.
    Text(String),
}

fn entry_text(entry: &Entry, pool: &[PoolKey]) -> String {
    let key = |index: &u8| &pool[usize::from(*index) % pool.len()];
    match entry {
        Entry::Published(index) => key(index).jwk.to_string(),
        Entry::Changed(index, field, value) => {
            let mut jwk = key(index).jwk.clone();
            jwk[FIELDS[usize::from(*field) % FIELDS.len()]] = value.value();
            jwk.to_string()
        }
        Entry::Other(value) => value.value().to_string(),
        Entry::Text(text) => text.clone(),
    }
}

fn usable(runtime: &tokio::runtime::Runtime, set: &Arc<KeySet>, key: &PoolKey) -> bool {
    let verifier = Verifier::new(KeySource::Inline(Arc::clone(set)), &common::rules(None));
    runtime.block_on(verifier.authenticate(&key.bearer, Access::Read)).is_ok()
}

fuzz_target!(|document: Document| {
    let (runtime, pool) = pool();
    let (text, listed) = match &document {
        Document::Jwks(entries) => {
            let texts: Vec<String> = entries.iter().map(|e| entry_text(e, pool)).collect();
            (format!(r#"{{"keys": [{}]}}"#, texts.join(",")), Some(entries))
        }
        Document::KeysOfAnotherType(value) => (json!({"keys": value.value()}).to_string(), None),
        Document::Text(text) => (text.clone(), None),
    };
    let parsed = KeySet::from_jwks_json(&text);
    // The model of a JWKS: a JSON object with a `keys` array, by RFC 8259's
    // grammar (numbers of any size, which a `Value` cannot hold).
    let members = serde_json::from_str::<HashMap<String, Box<RawValue>>>(&text);
    let model = members.is_ok_and(|members| {
        let keys = members.get("keys").map(|keys| keys.get());
        keys.is_some_and(|keys| serde_json::from_str::<Vec<IgnoredAny>>(keys).is_ok())
    });
    if parsed.is_ok() {
        assert!(model, "not a JWKS, read as one: {text}");
    }
    let entries_are_json = listed.is_some_and(|entries| {
        entries.iter().all(|entry| match entry {
            Entry::Text(text) => serde_json::from_str::<IgnoredAny>(text).is_ok(),
            _ => true,
        })
    });
    if entries_are_json && model {
        assert!(parsed.is_ok(), "a JWKS refused: {text}");
    }
    let Ok(set) = parsed else { return };
    let set = Arc::new(set);
    for key in pool {
        let is_usable = usable(runtime, &set, key);
        // Never a key the document does not list, material and all.
        if is_usable {
            assert!(text.contains(&key.kid) && text.contains(&key.material), "{text}");
        }
        // A key listed once, as published, and its kid nowhere else: usable.
        let published_once =
            text.matches(&key.kid).count() == 1 && text.contains(&key.jwk.to_string());
        if published_once {
            assert!(is_usable, "a published key not usable: {text}");
        }
    }
});
