//! The verified-token cache never accepts what a fresh verification would
//! refuse: a token whose key the issuer rotated out, a token past its
//! expiry, and a token for another configuration's audience.

use std::time::Duration;

use jsonwebtoken::Algorithm;
use plant_store::auth::Verifier;
use plant_store::config::{KeyConfig, KeyRefresh, TokenRules, TrustConfig};
use plant_store::https::Https;
use plant_store::jwks::KeySource;
use plant_store_testkit::forgeries::{claims, with};
use plant_store_testkit::key_server::{Behaviour, KeyServer};
use plant_store_testkit::{SigningKey, TestApp, keys, token_rules, unix_now};
use serde_json::json;

/// Refetches for unknown `kid`s after a second; key sets never grow old
/// within a test, so that only a refetch changes the keys.
const REFRESH: KeyRefresh = KeyRefresh {
    refetch_interval: Duration::from_secs(1),
    retry_without_keys: Duration::from_millis(500),
    max_age: Duration::from_secs(3600),
    keep_last_good: Duration::from_secs(24 * 3600),
};

fn bearer_signed_by(key: &SigningKey) -> String {
    format!("Bearer {}", key.sign(&claims("alice")).unwrap())
}

#[tokio::test]
async fn a_token_whose_key_was_rotated_out_is_refused_after_the_refetch_that_dropped_it() {
    let old = keys().es256();
    let server = KeyServer::start(SigningKey::jwks_json(&[old])).await;
    let url = server.jwks_url.clone();
    let https = Https::new(&TrustConfig::default()).unwrap();
    let source = KeySource::from_config(&KeyConfig::Url { url, refresh: REFRESH }, &https);
    let app = TestApp::with_verifier(Verifier::new(source.unwrap(), &token_rules())).await;
    let old_token = bearer_signed_by(old);
    assert_eq!(app.get(&old_token, "").await.status, 200, "verified, and remembered");
    assert_eq!(app.get(&old_token, "").await.status, 200);

    // The issuer rotates: the old key is gone, a new one signs.
    let new = SigningKey::generate(Algorithm::EdDSA).unwrap();
    server.set(Behaviour::Serve(SigningKey::jwks_json(&[&new])));
    tokio::time::sleep(REFRESH.refetch_interval + Duration::from_millis(100)).await;
    assert_eq!(app.get(&bearer_signed_by(&new), "").await.status, 200);
    assert_eq!(server.fetches(), 2, "the new kid caused one refetch");

    let refused = app.get(&old_token, "").await;
    refused.assert_error(401, "token");
    assert_eq!(server.fetches(), 2);
}

#[tokio::test]
async fn a_remembered_token_is_refused_once_its_expiry_and_leeway_have_passed() {
    let app = TestApp::new().await;
    // Expired 29 s ago: within the 30 s leeway for about a second more.
    let token = keys().eddsa().sign(&with(claims("alice"), "exp", json!(unix_now() - 29))).unwrap();
    let bearer = format!("Bearer {token}");
    assert_eq!(app.get(&bearer, "").await.status, 200);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    app.get(&bearer, "").await.assert_error(401, "expired");
}

#[tokio::test]
async fn a_token_remembered_by_one_configuration_is_refused_by_another() {
    let inline = || KeySource::inline(&keys().jwks).unwrap();
    let other_audience = TokenRules { audience: Some("another-api".into()), ..token_rules() };
    let ours = TestApp::with_verifier(Verifier::new(inline(), &token_rules())).await;
    let theirs = TestApp::with_verifier(Verifier::new(inline(), &other_audience)).await;
    let token = bearer_signed_by(keys().eddsa());
    for _ in 0..2 {
        assert_eq!(ours.get(&token, "").await.status, 200);
        theirs.get(&token, "").await.assert_error(401, "token");
    }
}
