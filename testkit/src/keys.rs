//! This run's signing keys and tokens (the local issuer's, made for the
//! test binary), and the verifier that trusts them.

use std::sync::OnceLock;

use jsonwebtoken::Algorithm;
use plant_store::auth::Verifier;
use plant_store::config::{AccessTokenRule, ScopeRules, TokenRules};
use plant_store::jwks::KeySource;
use plant_store_local_support::keys::{AUDIENCE, ISSUER, Issuer, SigningKey};

/// Keys made once per test binary, one per accepted algorithm, all published.
pub struct TestKeys {
    pub issuer: Issuer,
    pub jwks: String,
}

impl TestKeys {
    pub fn eddsa(&self) -> &SigningKey {
        &self.issuer.keys[0]
    }

    pub fn es256(&self) -> &SigningKey {
        &self.issuer.keys[1]
    }

    pub fn rs256(&self) -> &SigningKey {
        &self.issuer.keys[2]
    }
}

pub fn keys() -> &'static TestKeys {
    static KEYS: OnceLock<TestKeys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let issuer = Issuer::generate(&[Algorithm::EdDSA, Algorithm::ES256, Algorithm::RS256]);
        let jwks = issuer.jwks();
        TestKeys { issuer, jwks }
    })
}

/// A valid token for `sub` (EdDSA, one hour).
pub fn token(sub: &str) -> String {
    keys().issuer.token(sub, 3600)
}

pub fn bearer(sub: &str) -> String {
    format!("Bearer {}", token(sub))
}

/// The token rules of the tests: the local issuer and audience, tokens
/// typed `at+jwt`, these scopes required (or none).
pub fn token_rules(scopes: Option<ScopeRules>) -> TokenRules {
    TokenRules::new(ISSUER.into(), Some(AUDIENCE.into()), AccessTokenRule::AtJwt, scopes).unwrap()
}

/// The verifier as production configures it, trusting this run's test keys.
pub fn verifier() -> Verifier {
    Verifier::new(KeySource::inline(&keys().jwks).unwrap(), &token_rules(None))
}
