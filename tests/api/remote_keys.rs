//! The remote key source against a JWKS server, intervals scaled down
//! ([`REFRESH`]): rotation, keys taken away, outages, bad answers, old sets.

use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;
use plant_store::auth::Verifier;
use plant_store::config::{KeyConfig, KeyRefresh, TrustConfig};
use plant_store::https::Https;
use plant_store::jwks::KeySource;
use plant_store_testkit::SigningKey;
use plant_store_testkit::forgeries::{claims, signed_naming_kid};
use plant_store_testkit::key_server::{Behaviour, KeyServer};
use plant_store_testkit::{INVALID_TOKEN, TestApp, assert_refused, bearer, keys, token_rules};
use serde_json::json;

/// Production's rules with shorter intervals (production: 10 s, 1 s, 1 h, 24 h).
const REFRESH: KeyRefresh = KeyRefresh {
    refetch_interval: Duration::from_secs(2),
    retry_without_keys: Duration::from_millis(500),
    max_age: Duration::from_secs(3600),
    keep_last_good: Duration::from_secs(24 * 3600),
};

/// Sleeps until `interval` has certainly passed.
async fn wait_out(interval: Duration) {
    tokio::time::sleep(interval + Duration::from_millis(100)).await;
}

/// The app as production starts it, with these intervals: the remote key
/// source as `main` builds it, the first fetch at init (`prepare`).
async fn remote_app(server: &KeyServer, refresh: KeyRefresh) -> TestApp {
    let (url, https) = (server.jwks_url.clone(), Https::new(&TrustConfig::default()).unwrap());
    let config = KeyConfig::Url { url, refresh, loopback_http: true };
    let keys = KeySource::from_config(&config, &https).unwrap();
    let app = TestApp::with_verifier(Verifier::new(keys, &token_rules(None))).await;
    app.api.prepare().await;
    app
}

#[tokio::test]
async fn fetched_keys_serve_without_further_fetches_also_when_the_key_server_goes_down() {
    let server = KeyServer::start(keys().jwks.clone()).await;
    let app = remote_app(&server, REFRESH).await;
    for id in 0..3 {
        let body = json!({"id": id, "name": "Fern"}).to_string();
        assert_eq!(app.post(&bearer("alice"), &body).await.status, 200);
    }
    assert_eq!(server.fetches(), 1, "cached keys need no fetch");
    server.stop();
    assert_eq!(app.get(&bearer("alice"), "").await.status, 200);
    wait_out(REFRESH.refetch_interval).await;
    // An unknown kid's refetch fails: the token may be valid, so 503 with
    // Retry-After, not 401 (which signs the user out).
    let unknown = signed_naming_kid("rotated-away");
    assert_keys_unavailable(&app.get(&format!("Bearer {unknown}"), "").await);
    // The last good key set is still serving.
    assert_eq!(app.get(&bearer("alice"), "").await.status, 200);
}

#[tokio::test]
async fn oversized_and_slow_key_sets_are_refused_within_the_timeout_as_503_and_under_the_cap_not() {
    for behaviour in [
        Behaviour::Oversized(keys().jwks.clone(), 200 * 1024),
        Behaviour::Slow(Duration::from_secs(5), keys().jwks.clone()),
        Behaviour::Status(500),
        Behaviour::Serve("not a key set".into()),
    ] {
        let server = KeyServer::start(String::new()).await;
        server.set(behaviour);
        // At init: logged, not a crash, and within the fetch timeout.
        let started = Instant::now();
        let app = remote_app(&server, REFRESH).await;
        assert!(started.elapsed() < Duration::from_millis(2500), "{:?}", started.elapsed());
        assert_eq!(server.fetches(), 1);
        // Without keys the function retries, but not on every request.
        wait_out(REFRESH.retry_without_keys).await;
        let started = Instant::now();
        assert_keys_unavailable(&app.get(&bearer("alice"), "").await);
        assert!(started.elapsed() < Duration::from_millis(2500), "{:?}", started.elapsed());
        assert_eq!(server.fetches(), 2);
    }
    // Just under the size cap: accepted.
    let server = KeyServer::start(String::new()).await;
    server.set(Behaviour::Oversized(keys().jwks.clone(), 140 * 1024));
    assert_eq!(remote_app(&server, REFRESH).await.get(&bearer("alice"), "").await.status, 200);
}

/// `Bearer` and a token of `key` for `sub`.
fn signed(key: &SigningKey, sub: &str) -> String {
    format!("Bearer {}", key.sign(&claims(sub)).unwrap())
}

/// A 503 that asks for a retry: the keys cannot be known now.
fn assert_keys_unavailable(response: &plant_store_testkit::TestResponse) {
    response.assert_error(503, "signing keys");
    assert_eq!(response.header("retry-after"), Some("1"));
    assert_eq!(response.header("www-authenticate"), None);
}

/// A JWKS entry that is no usable key: a `kid` that is a number.
fn malformed_entry() -> serde_json::Value {
    let mut entry =
        serde_json::to_value(SigningKey::generate(Algorithm::EdDSA).unwrap().jwk()).unwrap();
    entry["kid"] = json!(7);
    entry
}

/// The JWKS of `keys`, with `extra` entries after them.
fn jwks_with(keys: &[&SigningKey], extra: &[serde_json::Value]) -> String {
    let mut set: serde_json::Value = serde_json::from_str(&SigningKey::jwks_json(keys)).unwrap();
    set["keys"].as_array_mut().unwrap().extend_from_slice(extra);
    set.to_string()
}

#[tokio::test]
async fn a_rotation_beside_a_malformed_entry_admits_the_new_key_and_refuses_the_removed_one() {
    let old = keys().es256();
    let server = KeyServer::start(SigningKey::jwks_json(&[old])).await;
    let app = remote_app(&server, REFRESH).await;
    let old_token = signed(old, "alice");
    assert_eq!(app.get(&old_token, "").await.status, 200, "remembered");

    let new = SigningKey::generate(Algorithm::EdDSA).unwrap();
    server.set(Behaviour::Serve(jwks_with(&[&new], &[malformed_entry()])));
    wait_out(REFRESH.refetch_interval).await;
    let new_token = signed(&new, "alice");
    assert_eq!(app.get(&new_token, "").await.status, 200, "the new key");
    assert_eq!(server.fetches(), 2);
    assert_refused(&app, &old_token, INVALID_TOKEN, "the removed key, remembered").await;
    let fresh = signed(old, "bob");
    assert_refused(&app, &fresh, INVALID_TOKEN, "the removed key, fresh").await;
    assert_eq!(server.fetches(), 2);
}

#[tokio::test]
async fn a_key_set_that_takes_every_key_away_is_believed() {
    let unusable = [
        json!({"kty": "AKP", "kid": "ml-dsa", "alg": "ML-DSA-44", "pub": "AAAA"}),
        json!({"kty": "OKP", "crv": "X25519", "kid": "x25519",
               "x": "hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo"}),
        json!({"kty": "EC", "crv": "secp256k1", "kid": "k1",
               "x": "WfY7Px6AgH6x-_dgAoRbg8weYRJA36ON-gQiFnETrqw",
               "y": "t4kLfPgyK9UKkVD2EuT7qEM5-dT2wjMZJc1b1vVDqS4"}),
    ];
    for withdrawn in ["{\"keys\": []}".to_owned(), jwks_with(&[], &unusable)] {
        let key = keys().eddsa();
        let server = KeyServer::start(SigningKey::jwks_json(&[key])).await;
        let refresh = KeyRefresh {
            refetch_interval: Duration::from_millis(500),
            max_age: Duration::from_secs(1),
            ..REFRESH
        };
        let app = remote_app(&server, refresh).await;
        let token = signed(key, "alice");
        assert_eq!(app.get(&token, "").await.status, 200, "before");
        server.set(Behaviour::Serve(withdrawn.clone()));
        wait_out(refresh.max_age).await;
        assert_refused(&app, &token, INVALID_TOKEN, &withdrawn).await;
        assert_eq!(server.fetches(), 2);
        let fresh = signed(key, "bob");
        assert_refused(&app, &fresh, INVALID_TOKEN, &withdrawn).await;
    }
}

#[tokio::test]
async fn the_last_good_key_set_serves_through_failed_fetches_for_its_maximum_age_only() {
    let server = KeyServer::start(keys().jwks.clone()).await;
    let refresh = KeyRefresh {
        refetch_interval: Duration::from_millis(500),
        max_age: Duration::from_secs(1),
        keep_last_good: Duration::from_secs(3),
        ..REFRESH
    };
    let app = remote_app(&server, refresh).await;
    assert_eq!(app.get(&bearer("alice"), "").await.status, 200);
    server.set(Behaviour::Status(500));
    wait_out(refresh.max_age).await;
    assert_eq!(app.get(&bearer("alice"), "").await.status, 200, "kept");
    assert_eq!(server.fetches(), 2);
    wait_out(refresh.keep_last_good - refresh.max_age).await;
    assert_keys_unavailable(&app.get(&bearer("alice"), "").await);
    // The issuer back: its keys serve again.
    server.set(Behaviour::Serve(keys().jwks.clone()));
    wait_out(refresh.refetch_interval).await;
    assert_eq!(app.get(&bearer("alice"), "").await.status, 200);
}

#[tokio::test]
async fn a_moved_key_set_is_followed_and_serves_through_a_discovery_outage() {
    let (old, new) = (keys().eddsa(), SigningKey::generate(Algorithm::EdDSA).unwrap());
    let (a, b) = (SigningKey::jwks_json(&[old]), SigningKey::jwks_json(&[&new]));
    let (a, b) = (KeyServer::start(a).await, KeyServer::start(b).await);
    let issuer = KeyServer::start(String::new()).await;
    let url = format!("http://127.0.0.1:{}", issuer.port());
    let naming = |keys: &KeyServer| json!({"issuer": url, "jwks_uri": keys.jwks_url}).to_string();
    issuer.set(Behaviour::Serve(naming(&a)));
    let refresh = KeyRefresh {
        refetch_interval: Duration::from_millis(500),
        max_age: Duration::from_secs(2),
        keep_last_good: Duration::from_millis(2500),
        ..REFRESH
    };
    let config = KeyConfig::Discovery { issuer: url.clone(), refresh, loopback_http: true };
    let keys = KeySource::from_config(&config, &Https::new(&TrustConfig::default()).unwrap());
    let app = TestApp::with_verifier(Verifier::new(keys.unwrap(), &token_rules(None))).await;
    app.api.prepare().await;
    let token = |key: &SigningKey| signed(key, "alice");
    assert_eq!(app.get(&token(old), "").await.status, 200);
    // The issuer names another key set, the old one still up: a token of
    // the new key is verified from the next fetch on.
    issuer.set(Behaviour::Serve(naming(&b)));
    wait_out(refresh.refetch_interval).await;
    assert_eq!(app.get(&token(&new), "").await.status, 200, "the moved key set");
    // The discovery document gone past the keys' age and the last good
    // set's: the key set it last named serves.
    issuer.set(Behaviour::Status(500));
    wait_out(refresh.keep_last_good).await;
    assert_eq!(app.get(&token(&new), "").await.status, 200, "through the outage");
    assert_eq!((a.fetches(), b.fetches()), (1, 2));
}
