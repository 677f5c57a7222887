//! The forged and misissued tokens every key source must refuse with 401.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::AlgorithmParameters;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use plant_store_local_support::keys::{SigningKey, unix_now};
use serde_json::{Value, json};

use crate::{AUDIENCE, ISSUER, keys};

/// Valid claims for `sub`, for the test issuer and audience, for 10 minutes.
pub fn claims(sub: &str) -> Value {
    let now = unix_now();
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600})
}

pub fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

pub fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

fn encode_part(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// Each case names the forgery and holds the token.
pub fn forged_tokens() -> Vec<(&'static str, String)> {
    let mut cases = forged_signatures();
    cases.extend(misissued_claims());
    cases.extend(refused_headers());
    cases.extend([("garbage", "garbage".to_owned()), ("three garbage parts", "a.b.c".to_owned())]);
    cases
}

/// An access token's JOSE header for `algorithm` naming the key `kid`.
fn header_with_kid(algorithm: Algorithm, kid: Option<&str>) -> Header {
    let mut header = Header::new(algorithm);
    (header.kid, header.typ) = (kid.map(str::to_owned), Some("at+jwt".into()));
    header
}

/// Valid claims for alice under `header`, signed with the Ed25519 key `pem`.
fn signed_as(header: &Header, pem: &str) -> String {
    let key = EncodingKey::from_ed_pem(pem.as_bytes()).unwrap();
    jsonwebtoken::encode(header, &claims("alice"), &key).unwrap()
}

/// alice's valid token, signed by the published Ed25519 key, naming `kid`.
pub fn signed_naming_kid(kid: &str) -> String {
    signed_as(&header_with_kid(Algorithm::EdDSA, Some(kid)), keys().eddsa().pkcs8_pem())
}

/// Valid claims whose signature, algorithm or key the key set does not publish.
fn forged_signatures() -> Vec<(&'static str, String)> {
    let published = keys().eddsa();
    let published_kid = header_with_kid(Algorithm::EdDSA, Some(published.kid()));

    // A key nobody published, claiming the kid of a published one.
    let impostor = SigningKey::generate(Algorithm::EdDSA).unwrap();
    let wrong_key = signed_as(&published_kid, impostor.pkcs8_pem());

    // alg "none", no signature.
    let none_header = json!({"alg": "none", "typ": "at+jwt", "kid": published.kid()});
    let alg_none = format!("{}.{}.", encode_part(&none_header), encode_part(&claims("alice")));

    // HS256 "signed" with the published public key as the HMAC secret.
    let AlgorithmParameters::OctetKeyPair(public) = &published.jwk().algorithm else {
        panic!("the EdDSA key is an OKP key");
    };
    let hs256 = header_with_kid(Algorithm::HS256, Some(published.kid()));
    let hmac = EncodingKey::from_secret(public.x.as_bytes());
    let hs256 = jsonwebtoken::encode(&hs256, &claims("alice"), &hmac).unwrap();

    // A valid signature whose header names an algorithm other than the key's.
    let es256 = keys().es256().sign(&claims("alice")).unwrap();
    let rs256 = json!({"alg": "RS256", "typ": "at+jwt", "kid": keys().es256().kid()});
    let es_as_rs = format!("{}.{}", encode_part(&rs256), es256.split_once('.').unwrap().1);

    let token = published.sign(&claims("alice")).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let tampered = format!("{}.{}.{}", parts[0], encode_part(&claims("mallory")), parts[2]);

    let pem = published.pkcs8_pem();
    vec![
        ("signed by an unpublished key", wrong_key),
        ("alg none", alg_none),
        ("HS256 with the public key", hs256),
        ("header alg differs from the key's", es_as_rs),
        ("unknown kid", signed_naming_kid("unknown-kid")),
        ("no kid", signed_as(&header_with_kid(Algorithm::EdDSA, None), pem)),
        ("payload swapped after signing", tampered),
    ]
}

/// Headers the verifier must refuse, over claims a published key signed.
fn refused_headers() -> Vec<(&'static str, String)> {
    let published = keys().eddsa();
    // RFC 7515, section 4.1.11: an extension the verifier does not
    // understand, named critical.
    let mut critical = header_with_kid(Algorithm::EdDSA, Some(published.kid()));
    critical.crit = Some(vec!["https://plant-store.test/unknown".to_owned()]);
    vec![("crit names an unknown extension", signed_as(&critical, published.pkcs8_pem()))]
}

/// Claims that the contract refuses, signed with a published key.
fn misissued_claims() -> Vec<(&'static str, String)> {
    let sign = |claims: Value| keys().eddsa().sign(&claims).unwrap();
    let alice = || claims("alice");
    let now = unix_now();
    vec![
        ("expired beyond the leeway", sign(with(alice(), "exp", json!(now - 120)))),
        ("wrong issuer", sign(with(alice(), "iss", json!("https://evil.test")))),
        ("wrong audience", sign(with(alice(), "aud", json!("another-api")))),
        ("no audience where one is configured", sign(without(alice(), "aud"))),
        ("no exp", sign(without(alice(), "exp"))),
        ("no iss", sign(without(alice(), "iss"))),
        ("no sub", sign(without(alice(), "sub"))),
        ("empty sub", sign(claims(""))),
        ("whitespace sub", sign(claims(" \t"))),
        ("sub ending in NUL", sign(claims("alice\u{0}"))),
        ("sub with NUL inside", sign(claims("al\u{0}ice"))),
        ("sub with a line break", sign(claims("alice\nbob"))),
        ("string exp", sign(with(alice(), "exp", json!((now + 600).to_string())))),
        ("not yet valid (nbf)", sign(with(alice(), "nbf", json!(now + 600)))),
    ]
}
