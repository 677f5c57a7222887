//! Bearer tokens: every accepted algorithm verifies, and every forgery or
//! misissued token gets 401 with the RFC 6750 challenge and writes nothing.

mod common;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{AUDIENCE, ISSUER, TestApp, bearer, keys};
use jsonwebtoken::jwk::AlgorithmParameters;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use plant_store::devkeys::{DevKey, unix_now};
use serde_json::{Value, json};

const CHALLENGE: &str = r#"Bearer realm="plants""#;
const INVALID_TOKEN: &str = r#"Bearer realm="plants", error="invalid_token""#;
const PLANT: &str = r#"{"id": 1, "name": "Fern"}"#;

fn claims(sub: &str) -> Value {
    let now = unix_now();
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600})
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

fn encode_part(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// Asserts a 401 with the given challenge, a message that does not echo the
/// token, and no write.
async fn assert_refused(app: &TestApp, authorization: &str, challenge: &str, case: &str) {
    let response = app.post(authorization, PLANT).await;
    assert_eq!(response.status, 401, "{case}: {}", response.body);
    response.assert_error(401, "token");
    assert_eq!(
        response.header("www-authenticate"),
        Some(challenge),
        "{case}"
    );
    let token = authorization.split_whitespace().last().unwrap_or_default();
    if token.len() > 8 {
        assert!(
            !response.body.to_string().contains(token),
            "{case}: token echoed"
        );
    }
    assert!(
        app.stored_items().await.is_empty(),
        "{case}: something was written"
    );
}

#[tokio::test]
async fn tokens_of_every_accepted_algorithm_verify() {
    let app = TestApp::new().await;
    for (id, key) in [&keys().eddsa, &keys().es256, &keys().rs256]
        .into_iter()
        .enumerate()
    {
        let token = key.sign(&claims("alice")).unwrap();
        let body = json!({"id": id, "name": "Fern"}).to_string();
        let response = app.post(&format!("Bearer {token}"), &body).await;
        assert_eq!(
            response.status,
            200,
            "{:?}: {}",
            key.algorithm(),
            response.body
        );
    }
    assert_eq!(app.stored_items().await.len(), 3);
}

#[tokio::test]
async fn a_missing_or_non_bearer_authorization_gets_the_plain_challenge() {
    let app = TestApp::new().await;
    let response = app
        .send(common::HttpRequest::new("GET", "/plants").build())
        .await;
    response.assert_error(401, "Authorization");
    assert_eq!(response.header("www-authenticate"), Some(CHALLENGE));
    let token = common::token("alice");
    for authorization in [
        format!("Basic {token}"),
        format!("Token {token}"),
        "Bearer".to_owned(),
        "Bearer ".to_owned(),
        token.clone(),
    ] {
        assert_refused(&app, &authorization, CHALLENGE, &authorization).await;
    }
}

#[tokio::test]
async fn forged_and_misissued_tokens_get_invalid_token() {
    let app = TestApp::new().await;
    let published = &keys().eddsa;
    let now = unix_now();

    // A key nobody published, claiming the kid of a published one.
    let impostor = DevKey::generate(Algorithm::EdDSA).unwrap();
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
        let token = keys().es256.sign(&claims("alice")).unwrap();
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        parts[0] = encode_part(&json!({"alg": "RS256", "kid": keys().es256.kid()}));
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

    let cases = [
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
    ];
    for (case, token) in cases {
        assert_refused(&app, &format!("Bearer {token}"), INVALID_TOKEN, case).await;
    }
}

#[tokio::test]
async fn an_expired_token_is_named_as_such_and_a_small_clock_skew_is_tolerated() {
    let app = TestApp::new().await;
    let now = unix_now();
    let expired = keys()
        .eddsa
        .sign(&with(claims("alice"), "exp", json!(now - 3600)))
        .unwrap();
    let response = app.get(&format!("Bearer {expired}"), "").await;
    response.assert_error(401, "expired");
    assert_eq!(response.header("www-authenticate"), Some(INVALID_TOKEN));

    let just_expired = keys()
        .eddsa
        .sign(&with(claims("alice"), "exp", json!(now - 5)))
        .unwrap();
    assert_eq!(
        app.get(&format!("Bearer {just_expired}"), "").await.status,
        200
    );
}

#[tokio::test]
async fn get_requires_a_valid_token_too() {
    let app = TestApp::new().await;
    app.create("alice", json!({"id": 1, "name": "Fern"})).await;
    let response = app.get("Bearer not-a-token", "").await;
    response.assert_error(401, "token");
    assert_eq!(
        app.get(&bearer("alice"), "").await.body,
        json!([{"name": "Fern"}])
    );
}
