//! Bearer tokens: every accepted algorithm verifies, and every forgery or
//! misissued token gets 401 with the RFC 6750 challenge and writes nothing.

mod common;

use common::forgeries::{claims, forged_tokens, with};
use common::{CHALLENGE, INVALID_TOKEN, TestApp, assert_refused, bearer, keys};
use plant_store::auth::{KeySource, TokenRules, Verifier};
use plant_store::devkeys::unix_now;
use serde_json::json;

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
    for (case, token) in forged_tokens() {
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

#[tokio::test]
async fn cognito_mode_accepts_access_tokens_of_its_client_only() {
    let rules = TokenRules {
        issuer: common::ISSUER.into(),
        audience: None,
        cognito_client_id: Some("app-client-123".into()),
    };
    let keys_json = &keys().jwks;
    let key_set = plant_store::auth::KeySet::from_jwks_json(keys_json).unwrap();
    let app = TestApp::with_verifier(Verifier::new(KeySource::Inline(key_set), &rules)).await;
    let now = unix_now();
    // Cognito access tokens carry `client_id` and `token_use`, and no `aud`.
    let access = json!({
        "iss": common::ISSUER, "sub": "alice", "exp": now + 600, "iat": now,
        "token_use": "access", "client_id": "app-client-123", "scope": "aws.cognito.signin.user.admin"
    });
    let sign =
        |claims: &serde_json::Value| format!("Bearer {}", keys().rs256.sign(claims).unwrap());
    assert_eq!(
        app.post(&sign(&access), r#"{"id": 1, "name": "Fern"}"#)
            .await
            .status,
        200
    );

    let id_token = json!({
        "iss": common::ISSUER, "sub": "alice", "exp": now + 600, "iat": now,
        "token_use": "id", "aud": "app-client-123", "email": "alice@example.com"
    });
    let cases = [
        ("an ID token", id_token),
        (
            "another client's access token",
            with(access.clone(), "client_id", json!("other")),
        ),
        (
            "no token_use",
            common::forgeries::without(access.clone(), "token_use"),
        ),
        (
            "no client_id",
            common::forgeries::without(access.clone(), "client_id"),
        ),
    ];
    for (case, claims) in cases {
        let response = app
            .post(&sign(&claims), r#"{"id": 2, "name": "Ivy"}"#)
            .await;
        response.assert_error(401, "token");
        assert_eq!(
            response.header("www-authenticate"),
            Some(INVALID_TOKEN),
            "{case}"
        );
    }
    assert_eq!(app.stored_items().await.len(), 1);
}
