//! Init cost of the signing keys: fetching the JWKS from a key server on
//! 127.0.0.1 (the production path, `AUTH_JWKS_URL`) against parsing the same
//! JWKS given inline (`AUTH_JWKS`), the baseline measured in the same run.
//! Both build the verifier as `main` does. Prints the figures and writes them
//! to target/bench-results/init_keys.txt.

use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;
use plant_store::auth::Verifier;
use plant_store::config::{KeyConfig, KeyRefresh, TokenRules, TrustConfig};
use plant_store::https::Https;
use plant_store::jwks::KeySource;
use plant_store_testkit::SigningKey;
use plant_store_testkit::key_server;

const ROUNDS: usize = 50;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main]
async fn main() {
    let keys: Vec<SigningKey> = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA]
        .into_iter()
        .map(|algorithm| SigningKey::generate(algorithm).unwrap())
        .collect();
    let jwks = SigningKey::jwks_json(&keys.iter().collect::<Vec<_>>());
    let server = key_server::KeyServer::start(jwks.clone()).await;
    let rules = TokenRules {
        issuer: "https://issuer.bench".into(),
        audience: None,
        cognito_client_ids: Vec::new(),
        scopes: None,
        token_type: None,
    };

    // The HTTPS client is built once for both (benches/trust_store.rs
    // measures building it).
    let https = Https::new(&TrustConfig::default()).unwrap();
    let (mut inline, mut remote) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let source = KeySource::from_config(&KeyConfig::Inline(jwks.clone()), &https).unwrap();
        source.load().await;
        let _verifier = Verifier::new(source, &rules);
        inline.push(started.elapsed());

        let started = Instant::now();
        let source = KeySource::from_config(
            &KeyConfig::Url { url: server.jwks_url.clone(), refresh: KeyRefresh::default() },
            &https,
        )
        .unwrap();
        source.load().await;
        let _verifier = Verifier::new(source, &rules);
        remote.push(started.elapsed());
    }
    assert_eq!(server.fetches(), ROUNDS, "every remote init fetched once");

    let (inline, remote) = (median(inline), median(remote));
    let report = format!(
        "init_keys ({ROUNDS} rounds, medians, {} keys)\n\
         inline JWKS (baseline): {:.3} ms\n\
         remote JWKS from 127.0.0.1 (a connection and the fetch): {:.3} ms\n\
         added init time: {:.3} ms ({:.1}x the baseline)\n",
        keys.len(),
        inline.as_secs_f64() * 1e3,
        remote.as_secs_f64() * 1e3,
        (remote.saturating_sub(inline)).as_secs_f64() * 1e3,
        remote.as_secs_f64() / inline.as_secs_f64(),
    );
    print!("{report}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("init_keys.txt"), report).unwrap();
}
