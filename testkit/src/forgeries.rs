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
    let published = &keys().eddsa();
    let now = unix_now();

    // A key nobody published, claiming the kid of a published one.
    let impostor = SigningKey::generate(Algorithm::EdDSA).unwrap();
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(published.kid().to_owned());
    let wrong_key = jsonwebtoken::encode(
        &header,
        &claims("alice"),
        &EncodingKey::from_ed_pem(impostor.pkcs8_pem().as_bytes()).unwrap(),
    )
    .unwrap();

    // alg "none", no signature.
    let none_header = json!({"alg": "none", "typ": "JWT", "kid": published.kid()});
    let alg_none = format!(
        "{}.{}.",
        encode_part(&none_header),
        encode_part(&claims("alice"))
    );

    // HS256 "signed" with the published public key as the HMAC secret.
    let AlgorithmParameters::OctetKeyPair(public) = &published.jwk().algorithm else {
        panic!("the EdDSA key is an OKP key");
    };
    let mut hmac_header = Header::new(Algorithm::HS256);
    hmac_header.kid = Some(published.kid().to_owned());
    let hs256 = jsonwebtoken::encode(
        &hmac_header,
        &claims("alice"),
        &EncodingKey::from_secret(public.x.as_bytes()),
    )
    .unwrap();

    // A valid signature whose header names an algorithm other than the key's.
    let es_as_rs = {
        let token = keys().es256().sign(&claims("alice")).unwrap();
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        parts[0] = encode_part(&json!({"alg": "RS256", "kid": keys().es256().kid()}));
        parts.join(".")
    };

    let sign = |claims: Value| published.sign(&claims).unwrap();
    let unknown_kid = {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("unknown-kid".into());
        jsonwebtoken::encode(
            &header,
            &claims("alice"),
            &EncodingKey::from_ed_pem(published.pkcs8_pem().as_bytes()).unwrap(),
        )
        .unwrap()
    };
    let no_kid = jsonwebtoken::encode(
        &Header::new(Algorithm::EdDSA),
        &claims("alice"),
        &EncodingKey::from_ed_pem(published.pkcs8_pem().as_bytes()).unwrap(),
    )
    .unwrap();
    let tampered = {
        let token = sign(claims("alice"));
        let mut parts: Vec<&str> = token.split('.').collect();
        let payload = encode_part(&claims("mallory"));
        parts[1] = &payload;
        parts.join(".")
    };

    vec![
        ("signed by an unpublished key", wrong_key),
        ("alg none", alg_none),
        ("HS256 with the public key", hs256),
        ("header alg differs from the key's", es_as_rs),
        ("unknown kid", unknown_kid),
        ("no kid", no_kid),
        ("payload swapped after signing", tampered),
        (
            "expired beyond the leeway",
            sign(with(claims("alice"), "exp", json!(now - 120))),
        ),
        (
            "wrong issuer",
            sign(with(claims("alice"), "iss", json!("https://evil.test"))),
        ),
        (
            "wrong audience",
            sign(with(claims("alice"), "aud", json!("another-api"))),
        ),
        (
            "no audience where one is configured",
            sign(without(claims("alice"), "aud")),
        ),
        ("no exp", sign(without(claims("alice"), "exp"))),
        ("no iss", sign(without(claims("alice"), "iss"))),
        ("no sub", sign(without(claims("alice"), "sub"))),
        ("empty sub", sign(claims(""))),
        (
            "string exp",
            sign(with(claims("alice"), "exp", json!((now + 600).to_string()))),
        ),
        (
            "not yet valid (nbf)",
            sign(with(claims("alice"), "nbf", json!(now + 600))),
        ),
        ("garbage", "garbage".to_owned()),
        ("three garbage parts", "a.b.c".to_owned()),
        (
            "oversized",
            format!(
                "{}.{}.{}",
                "a".repeat(4000),
                "b".repeat(4000),
                "c".repeat(2000)
            ),
        ),
    ]
}
