//! What the token targets share: a one-thread runtime, a run's signing key
//! and its key set, a deployment's rules with an audience.

use jsonwebtoken::Algorithm;
use plant_store::config::{AccessTokenRule, ScopeRules, TokenRules};
use plant_store::jwks::KeySource;
use plant_store_local_support::keys::SigningKey;

pub(crate) const ISSUER: &str = "https://fuzz";
pub(crate) const AUDIENCE: &str = "fuzz";

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// An Ed25519 key, and the inline key source that holds its public half.
pub(crate) fn signing_key() -> (SigningKey, KeySource) {
    let key = SigningKey::generate(Algorithm::EdDSA).unwrap();
    let keys = KeySource::inline(&SigningKey::jwks_json(&[&key])).unwrap();
    (key, keys)
}

/// [`ISSUER`] and [`AUDIENCE`], with these scopes required (or none).
pub(crate) fn rules(scopes: Option<ScopeRules>) -> TokenRules {
    TokenRules::new(ISSUER.into(), Some(AUDIENCE.into()), AccessTokenRule::AtJwt, scopes).unwrap()
}
