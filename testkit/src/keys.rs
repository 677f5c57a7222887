//! This run's signing keys and tokens, and the verifier that trusts them.

use std::sync::OnceLock;

use jsonwebtoken::Algorithm;
use plant_store::auth::Verifier;
use plant_store::config::TokenRules;
use plant_store::jwks::{KeySet, KeySource};
use plant_store_dev::DevKey;

use crate::{AUDIENCE, ISSUER};

/// Keys generated once per test binary: one per accepted algorithm, all
/// published in the JWKS the function is configured with.
pub struct TestKeys {
    pub eddsa: DevKey,
    pub es256: DevKey,
    pub rs256: DevKey,
    pub jwks: String,
}

pub fn keys() -> &'static TestKeys {
    static KEYS: OnceLock<TestKeys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let eddsa = DevKey::generate(Algorithm::EdDSA).unwrap();
        let es256 = DevKey::generate(Algorithm::ES256).unwrap();
        let rs256 = DevKey::generate(Algorithm::RS256).unwrap();
        let jwks = DevKey::jwks_json(&[&eddsa, &es256, &rs256]);
        TestKeys {
            eddsa,
            es256,
            rs256,
            jwks,
        }
    })
}

/// A valid token for `sub` (EdDSA, one hour).
pub fn token(sub: &str) -> String {
    keys()
        .eddsa
        .token(ISSUER, Some(AUDIENCE), sub, 3600)
        .unwrap()
}

pub fn bearer(sub: &str) -> String {
    format!("Bearer {}", token(sub))
}

/// The token rules of the tests: this issuer and audience.
pub fn token_rules() -> TokenRules {
    TokenRules {
        issuer: ISSUER.into(),
        audience: Some(AUDIENCE.into()),
        cognito_client_ids: Vec::new(),
        scopes: None,
        token_type: None,
    }
}

/// The verifier as production configures it, trusting this run's test keys.
pub fn verifier() -> Verifier {
    let keys = KeySet::from_jwks_json(&keys().jwks).unwrap();
    Verifier::new(KeySource::Inline(keys), &token_rules())
}
