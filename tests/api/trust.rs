//! The trust store end to end: the compiled-in roots refuse a CA made here,
//! `EXTRA_CA_CERTS` or `SSL_CERT_FILE` admit it, a bad file stops the start.

use plant_store::auth::Verifier;
use plant_store::config::{KeyConfig, KeyRefresh, TrustConfig};
use plant_store::https::Https;
use plant_store::jwks::KeySource;
use plant_store_testkit::key_server::KeyServer;
use plant_store_testkit::tls_front::TlsFront;
use plant_store_testkit::tools::temp_dir;
use plant_store_testkit::{TestApp, assert_accepted, bearer, keys, token_rules};

/// The function as `main` builds it, its keys at `url`, trusting `trust`.
async fn app_trusting(trust: &TrustConfig, url: &str) -> TestApp {
    let https = Https::new(trust).unwrap();
    let (url, refresh) = (url.to_owned(), KeyRefresh::default());
    let config = KeyConfig::Url { url, refresh, loopback_http: false };
    let keys = KeySource::from_config(&config, &https).unwrap();
    keys.load().await;
    TestApp::with_verifier(Verifier::new(keys, &token_rules(None))).await
}

#[tokio::test]
async fn a_local_ca_is_trusted_only_where_a_trust_setting_names_it() {
    let server = KeyServer::start(keys().jwks.clone()).await;
    let dir = temp_dir("tls-front").unwrap();
    let front = TlsFront::start(server.port(), dir.path()).await.unwrap();
    let url = format!("https://{}/.well-known/jwks.json", front.address);

    let untrusted = app_trusting(&TrustConfig::default(), &url).await;
    assert_eq!(server.fetches(), 0, "the handshake fails before any request");
    // No key set could be fetched: the token cannot be judged, so 503.
    let response = untrusted.get(&bearer("alice"), "").await;
    response.assert_error(503, "signing keys");
    assert_eq!(response.header("retry-after"), Some("1"));

    let besides = TrustConfig { bundle: None, extra: Some(front.ca_file.clone()) };
    assert_accepted(&app_trusting(&besides, &url).await, &bearer("alice"), "EXTRA_CA_CERTS").await;
    assert_eq!(server.fetches(), 1);

    let instead = TrustConfig { bundle: Some(front.ca_file.clone()), extra: None };
    assert_accepted(&app_trusting(&instead, &url).await, &bearer("alice"), "SSL_CERT_FILE").await;
    assert_eq!(server.fetches(), 2);
}

#[test]
fn a_trust_file_that_cannot_be_used_stops_the_start_and_is_named() {
    let temp = temp_dir("trust").unwrap();
    let dir = temp.path();
    let not_pem = dir.join("not-pem.txt");
    std::fs::write(&not_pem, "no certificate here\n").unwrap();
    let broken = dir.join("broken.pem");
    std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        .unwrap();
    let missing = dir.join("missing.pem");
    let cases = [
        (Some(&missing), None, "SSL_CERT_FILE", "cannot read it"),
        (Some(&not_pem), None, "SSL_CERT_FILE", "holds no PEM certificate"),
        (Some(&broken), None, "SSL_CERT_FILE", "no usable root certificate"),
        (None, Some(&missing), "EXTRA_CA_CERTS", "cannot read it"),
        (None, Some(&not_pem), "EXTRA_CA_CERTS", "holds no PEM certificate"),
        (None, Some(&broken), "EXTRA_CA_CERTS", "not a usable CA certificate"),
    ];
    for (bundle, extra, variable, problem) in cases {
        let trust = TrustConfig { bundle: bundle.cloned(), extra: extra.cloned() };
        let message = Https::new(&trust).unwrap_err().to_string();
        let path = bundle.or(extra).unwrap().display().to_string();
        assert!(message.starts_with(&format!("{variable} ({path}): {problem}")), "{message}");
    }
}
