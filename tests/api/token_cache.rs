//! The verified-token cache never accepts what a fresh verification would
//! refuse: a token past its expiry, and a token for another configuration's
//! audience (a token whose key the issuer rotated out: `remote_keys.rs`).

use std::time::Duration;

use plant_store::auth::Verifier;
use plant_store::config::TokenRules;
use plant_store::jwks::KeySource;
use plant_store_testkit::forgeries::{claims, with};
use plant_store_testkit::{TestApp, keys, token_rules, unix_now};
use serde_json::json;

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
    let token = format!("Bearer {}", keys().eddsa().sign(&claims("alice")).unwrap());
    for _ in 0..2 {
        assert_eq!(ours.get(&token, "").await.status, 200);
        theirs.get(&token, "").await.assert_error(401, "token");
    }
}
