//! Bearer tokens: every accepted algorithm verifies, and every forgery,
//! misissued token or ID token gets 401 with the RFC 6750 challenge and
//! writes nothing.

use plant_store::auth::Verifier;
use plant_store::config::{KeyConfig, KeyRefresh, TokenRules, TrustConfig};
use plant_store::https::Https;
use plant_store::jwks::KeySource;
use plant_store_testkit::forgeries::{claims, forged_tokens, with};
use plant_store_testkit::key_server::KeyServer;
use plant_store_testkit::{
    ApiGatewayEvent, CHALLENGE, INVALID_TOKEN, TestApp, assert_accepted, assert_refused, bearer,
    keys, token, token_rules,
};
use plant_store_testkit::{SigningKey, unix_now};
use serde_json::json;

#[tokio::test]
async fn tokens_of_every_accepted_algorithm_verify() {
    let app = TestApp::new().await;
    for (id, key) in [keys().eddsa(), keys().es256(), keys().rs256()].into_iter().enumerate() {
        let token = key.sign(&claims("alice")).unwrap();
        let body = json!({"id": id, "name": "Fern"}).to_string();
        let response = app.post(&format!("Bearer {token}"), &body).await;
        assert_eq!(response.status, 200, "{:?}: {}", key.algorithm(), response.body);
    }
    assert_eq!(app.stored_items().await.len(), 3);
}

#[tokio::test]
async fn a_missing_or_non_bearer_authorization_gets_the_plain_challenge() {
    let app = TestApp::new().await;
    let response = app.send(plant_store_testkit::ApiGatewayEvent::new("GET", "/plants")).await;
    response.assert_error(401, "Authorization");
    assert_eq!(response.header("www-authenticate"), Some(CHALLENGE));
    let token = token("alice");
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
async fn an_authorization_value_that_is_not_one_bearer_token_gets_401() {
    let app = TestApp::new().await;
    let (alice, mallory) = (bearer("alice"), bearer("mallory"));
    // Two headers as HTTP APIs and function URLs deliver them, comma-joined:
    // indistinguishable from one value with a comma, so a malformed token.
    let malformed = [
        format!("{alice},{mallory}"),
        format!("{alice}, {mallory}"),
        format!("{alice},"),
        format!("{alice} extra"),
    ];
    for authorization in &malformed {
        assert_refused(&app, authorization, INVALID_TOKEN, authorization).await;
    }
    // No bearer credentials at all: the plain challenge.
    let other_scheme = format!("Basic YWxpY2U6c2VjcmV0, {alice}");
    assert_refused(&app, &other_scheme, CHALLENGE, &other_scheme).await;
    // Several spaces after the scheme are still one token (RFC 6750: 1*SP).
    let spaced = format!("Bearer   {}", token("alice"));
    assert_eq!(app.get(&spaced, "").await.status, 200);
}

#[tokio::test]
async fn a_bearer_value_beyond_ascii_is_an_invalid_token() {
    let app = TestApp::new().await;
    for authorization in ["Bearer é", "Bearer eyJ🌱.x.y", "bearer ä"] {
        let event = ApiGatewayEvent::list_plants(authorization, "").event();
        let response = app.invoke(&event).await;
        response.assert_error(401, "token");
        assert_eq!(response.header("www-authenticate"), Some(INVALID_TOKEN), "{authorization}");
    }
}

#[tokio::test]
async fn a_required_token_type_admits_only_tokens_of_that_type() {
    let rules = TokenRules { token_type: Some("at+jwt".into()), ..token_rules() };
    let app =
        TestApp::with_verifier(Verifier::new(KeySource::inline(&keys().jwks).unwrap(), &rules))
            .await;
    let signed = |typ: &str| {
        let token = keys().eddsa().sign_typed(typ, &claims("alice")).unwrap();
        format!("Bearer {token}")
    };
    for typ in ["JWT", "id+jwt", "", "text/at+jwt", "at+jwt2"] {
        assert_refused(&app, &signed(typ), INVALID_TOKEN, typ).await;
    }
    for typ in ["at+jwt", "application/at+jwt", "AT+JWT"] {
        assert_accepted(&app, &signed(typ), typ).await;
    }
    // Without the setting, `typ` is not read.
    assert_accepted(&TestApp::new().await, &signed("JWT"), "typ off").await;
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
    let expired = keys().eddsa().sign(&with(claims("alice"), "exp", json!(now - 3600))).unwrap();
    let response = app.get(&format!("Bearer {expired}"), "").await;
    response.assert_error(401, "expired");
    assert_eq!(response.header("www-authenticate"), Some(INVALID_TOKEN));

    let just_expired = keys().eddsa().sign(&with(claims("alice"), "exp", json!(now - 5))).unwrap();
    assert_eq!(app.get(&format!("Bearer {just_expired}"), "").await.status, 200);
}

#[tokio::test]
async fn cognito_mode_accepts_access_tokens_of_its_clients_only() {
    let rules = TokenRules {
        issuer: plant_store_testkit::ISSUER.into(),
        audience: None,
        cognito_client_ids: vec!["app-client-123".into(), "machine-client-456".into()],
        scopes: None,
        token_type: None,
    };
    let keys_json = &keys().jwks;
    let app =
        TestApp::with_verifier(Verifier::new(KeySource::inline(keys_json).unwrap(), &rules)).await;
    let now = unix_now();
    // Cognito access tokens carry `client_id` and `token_use`, and no `aud`.
    let access = json!({
        "iss": plant_store_testkit::ISSUER, "sub": "alice", "exp": now + 600, "iat": now,
        "token_use": "access", "client_id": "app-client-123", "scope": "aws.cognito.signin.user.admin"
    });
    let sign =
        |claims: &serde_json::Value| format!("Bearer {}", keys().rs256().sign(claims).unwrap());
    assert_eq!(app.post(&sign(&access), r#"{"id": 1, "name": "Fern"}"#).await.status, 200);
    // A client-credentials token of the other configured client (its `sub`
    // is the client id).
    let machine = with(
        with(access.clone(), "client_id", json!("machine-client-456")),
        "sub",
        json!("machine-client-456"),
    );
    assert_eq!(app.get(&sign(&machine), "").await.status, 200);

    let id_token = json!({
        "iss": plant_store_testkit::ISSUER, "sub": "alice", "exp": now + 600, "iat": now,
        "token_use": "id", "aud": "app-client-123", "email": "alice@example.com"
    });
    let cases = [
        ("an ID token", id_token),
        ("another client's access token", with(access.clone(), "client_id", json!("other"))),
        (
            "two configured ids as one",
            with(access.clone(), "client_id", json!("app-client-123,machine-client-456")),
        ),
        ("no token_use", plant_store_testkit::forgeries::without(access.clone(), "token_use")),
        ("no client_id", plant_store_testkit::forgeries::without(access.clone(), "client_id")),
    ];
    for (case, claims) in cases {
        let response = app.post(&sign(&claims), r#"{"id": 2, "name": "Ivy"}"#).await;
        response.assert_error(401, "token");
        assert_eq!(response.header("www-authenticate"), Some(INVALID_TOKEN), "{case}");
    }
    assert_eq!(app.stored_items().await.len(), 1);
}

/// Two tokens signed by a published key, padded with an extra claim: the
/// longest of at most `limit` bytes and the shortest of more.
fn signed_tokens_around(limit: usize) -> (String, String) {
    let sign = |padding: usize| {
        let claims = with(claims("alice"), "padding", json!("x".repeat(padding)));
        keys().eddsa().sign(&claims).unwrap()
    };
    // Base64 makes 4 characters of every 3 bytes: start just below the limit.
    let unpadded = sign(0).len();
    let mut padding = (limit - unpadded) * 3 / 4 - 8;
    while sign(padding + 1).len() <= limit {
        padding += 1;
    }
    (sign(padding), sign(padding + 1))
}

#[tokio::test]
async fn a_signed_token_over_8_kib_is_refused_and_one_at_the_limit_verifies() {
    let app = TestApp::new().await;
    let (at_limit, over) = signed_tokens_around(8 * 1024);
    assert!(at_limit.len() > 8 * 1024 - 4 && at_limit.len() <= 8 * 1024);
    assert!(over.len() > 8 * 1024);
    assert_refused(&app, &format!("Bearer {over}"), INVALID_TOKEN, "over 8 KiB").await;
    assert_accepted(&app, &format!("Bearer {at_limit}"), "at 8 KiB").await;
    assert_eq!(app.stored_items().await.len(), 1);
}

#[tokio::test]
async fn a_subject_over_512_bytes_is_refused_and_one_of_512_is_the_owner() {
    let app = TestApp::new().await;
    // 512 characters but 513 bytes: the limit counts bytes (the partition key's unit).
    for (case, sub) in [
        ("513 ASCII bytes", "s".repeat(513)),
        ("512 characters in 513 bytes", format!("{}é", "s".repeat(511))),
    ] {
        let token = keys().eddsa().sign(&claims(&sub)).unwrap();
        assert_refused(&app, &format!("Bearer {token}"), INVALID_TOKEN, case).await;
    }
    let sub = "s".repeat(512);
    let token = keys().eddsa().sign(&claims(&sub)).unwrap();
    assert_accepted(&app, &format!("Bearer {token}"), "512 bytes").await;
    assert_eq!(app.stored_owners().await, [json!(sub)]);
}

/// An issuer's access token and ID token, shaped as its documentation shows
/// them, and the token rules a deployment for it sets (docs/deploying.md).
struct Issuer {
    name: &'static str,
    rules: TokenRules,
    access: serde_json::Value,
    /// The access token's JOSE `typ`.
    access_typ: &'static str,
    id: serde_json::Value,
}

fn rules(issuer: &str, audience: Option<&str>, cognito_client_ids: &[&str]) -> TokenRules {
    TokenRules {
        issuer: issuer.into(),
        audience: audience.map(Into::into),
        cognito_client_ids: cognito_client_ids.iter().map(|&id| id.into()).collect(),
        scopes: None,
        token_type: None,
    }
}

const COGNITO: &str = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Plants";

/// Both tokens of Amazon Cognito ("Understanding user pool JSON web
/// tokens"), in Cognito mode, and as a generic issuer with the app client
/// as the audience. Each ID token is issued for the configured audience,
/// the worst case.
fn cognito_issuers() -> [Issuer; 2] {
    let now = unix_now();
    let id = json!({"iss": COGNITO, "sub": "u-1", "aud": "app", "token_use": "id",
        "auth_time": now, "cognito:username": "alice", "email": "alice@example.com",
        "email_verified": true, "jti": "j", "origin_jti": "o", "event_id": "e"});
    [
        Issuer {
            name: "Cognito",
            rules: rules(COGNITO, None, &["app"]),
            access: json!({"iss": COGNITO, "sub": "u-1", "client_id": "app",
                "token_use": "access", "scope": "aws.cognito.signin.user.admin",
                "auth_time": now, "jti": "j", "origin_jti": "o", "event_id": "e", "username": "alice"}),
            access_typ: "JWT",
            id: id.clone(),
        },
        Issuer {
            name: "Cognito, as a generic issuer with its client id as audience",
            rules: rules(COGNITO, Some("app"), &[]),
            access: json!({"iss": COGNITO, "sub": "u-1", "aud": "app", "client_id": "app",
                "token_use": "access", "scope": "plants/read"}),
            access_typ: "JWT",
            id,
        },
    ]
}

/// Both tokens of Microsoft Entra ("Access token claims reference", "ID
/// token claims reference": its ID token's `aud` is the client id, which
/// the template's hint makes the audience), Auth0 ("Access Token
/// Profiles", "ID Token Structure") and Okta ("OpenID Connect & OAuth 2.0
/// API", its token payloads).
fn other_issuers() -> [Issuer; 3] {
    let now = unix_now();
    let entra = "https://login.microsoftonline.com/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0";
    let (auth0, okta) = ("https://plants.eu.auth0.com/", "https://plants.okta.com/oauth2/default");
    let (entra_app, entra_user) =
        ("6e74172b-be56-4843-9ff4-e66a39bb12e3", "AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ");
    [
        Issuer {
            name: "Microsoft Entra",
            rules: rules(entra, Some(entra_app), &[]),
            access: json!({"iss": entra, "sub": entra_user, "aud": entra_app, "azp": entra_app,
                "scp": "plants.read plants.write", "oid": "o", "tid": "t", "ver": "2.0", "nbf": now}),
            access_typ: "JWT",
            id: json!({"iss": entra, "sub": entra_user, "aud": entra_app, "nonce": "123523",
                "oid": "o", "tid": "t", "ver": "2.0", "nbf": now, "name": "Abe Lincoln"}),
        },
        Issuer {
            name: "Auth0",
            rules: rules(auth0, Some("https://plants.example.com"), &[]),
            access: json!({"iss": auth0, "sub": "auth0|123456",
                "aud": ["https://plants.example.com", "https://plants.eu.auth0.com/userinfo"],
                "azp": "my_client_id", "client_id": "my_client_id", "scope": "openid read:plants",
                "jti": "j"}),
            access_typ: "at+jwt",
            id: json!({"iss": auth0, "sub": "auth0|123456", "aud": "https://plants.example.com",
                "nonce": "n-0S6_WzA2Mj", "sid": "s", "name": "Jane Doe",
                "email": "janedoe@example.com", "at_hash": "77QmUPtjPfzWtF2AnpK9RQ"}),
        },
        Issuer {
            name: "Okta",
            rules: rules(okta, Some("api://default"), &[]),
            access: json!({"iss": okta, "sub": "john.doe@example.com", "aud": "api://default",
                "ver": 1, "jti": "AT.0mP4JKAZX1iACIT4vbEDF7LpvDVjxypPMf0D7uX39RE",
                "cid": "0oabskvc6442nkvQO0h7", "uid": "00uid4BxXw6I6TV4m0g3",
                "scp": ["openid", "plants.read"], "auth_time": now}),
            access_typ: "application/okta-internal-at+jwt",
            id: json!({"iss": okta, "sub": "00uid4BxXw6I6TV4m0g3", "aud": "api://default",
                "ver": 1, "jti": "ID.4eAWJOCMB3SX8XewDfVR", "amr": ["pwd"],
                "idp": "00ok1u7AsAkrwdZL3z0g3", "nonce": "n-0S6_WzA2Mj", "auth_time": now,
                "at_hash": "preview_at_hash", "preferred_username": "john.doe@example.com"}),
        },
    ]
}

/// `claims`, issued now for ten minutes.
fn issued_now(claims: &serde_json::Value) -> serde_json::Value {
    let now = unix_now();
    with(with(claims.clone(), "iat", json!(now)), "exp", json!(now + 600))
}

#[tokio::test]
async fn an_id_token_is_refused_and_an_access_token_of_the_same_issuer_passes() {
    // Keys served over HTTP, as each issuer serves them.
    let key = keys().rs256();
    let server = KeyServer::start(SigningKey::jwks_json(&[key])).await;
    let https = Https::new(&TrustConfig::default()).unwrap();
    for issuer in cognito_issuers().into_iter().chain(other_issuers()) {
        let source =
            KeyConfig::Url { url: server.jwks_url.clone(), refresh: KeyRefresh::default() };
        let keys = KeySource::from_config(&source, &https).unwrap();
        let app = TestApp::with_verifier(Verifier::new(keys, &issuer.rules)).await;
        let id_token = format!("Bearer {}", key.sign(&issued_now(&issuer.id)).unwrap());
        assert_refused(&app, &id_token, INVALID_TOKEN, issuer.name).await;
        let access = key.sign_typed(issuer.access_typ, &issued_now(&issuer.access));
        let access = access.unwrap();
        assert_accepted(&app, &format!("Bearer {access}"), issuer.name).await;
    }
    // The probe's ID token: no `typ`, `aud` the audience, `nonce`,
    // `at_hash` and `auth_time`.
    let app = TestApp::new().await;
    let probe = with(claims("alice"), "nonce", json!("n"));
    let probe = with(with(probe, "at_hash", json!("h")), "auth_time", json!(unix_now()));
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    (header.typ, header.kid) = (None, Some(keys().eddsa().kid().to_owned()));
    let pem = keys().eddsa().pkcs8_pem().as_bytes();
    let encoding = jsonwebtoken::EncodingKey::from_ed_pem(pem).unwrap();
    let probe = jsonwebtoken::encode(&header, &probe, &encoding).unwrap();
    assert_refused(&app, &format!("Bearer {probe}"), INVALID_TOKEN, "the probe's").await;
}
