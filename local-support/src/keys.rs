//! The local issuer: signing keys generated here, their JWKS, and tokens,
//! for the local stack, the tests and the benchmark (never the function).

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair,
};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
pub use jsonwebtoken::Algorithm;
use jsonwebtoken::jwk::{CommonParameters, Jwk, JwkSet, PublicKeyUse, ThumbprintHash};
use jsonwebtoken::{EncodingKey, Header};
use serde::Serialize;
use serde_json::json;

/// A private signing key and its public JWK, its `kid` the RFC 7638 thumbprint.
pub struct SigningKey {
    algorithm: Algorithm,
    pkcs8_pem: String,
    encoding: EncodingKey,
    jwk: Jwk,
}

type KeyResult<T> = Result<T, String>;

impl SigningKey {
    /// A new random key for RS256, ES256 or EdDSA.
    pub fn generate(algorithm: Algorithm) -> KeyResult<Self> {
        let pkcs8 = match algorithm {
            Algorithm::EdDSA => Ed25519KeyPair::generate()
                .and_then(|pair| pair.to_pkcs8v1())
                .map(|der| der.as_ref().to_vec()),
            Algorithm::ES256 => EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
                .and_then(|pair| pair.to_pkcs8v1())
                .map(|der| der.as_ref().to_vec()),
            Algorithm::RS256 => RsaKeyPair::generate(KeySize::Rsa2048)
                .and_then(|pair| pair.as_der())
                .map(|der| der.as_ref().to_vec()),
            other => return Err(format!("{other:?} is not an accepted signing algorithm")),
        }
        .map_err(|_| "key generation failed".to_owned())?;
        Self::from_pkcs8_pem(algorithm, &pem_encode(&pkcs8))
    }

    /// Loads a key saved with [`SigningKey::pkcs8_pem`]; its JWK is the
    /// public half.
    fn from_pkcs8_pem(algorithm: Algorithm, pem: &str) -> KeyResult<Self> {
        let encoding = match algorithm {
            Algorithm::EdDSA => EncodingKey::from_ed_pem(pem.as_bytes()),
            Algorithm::ES256 => EncodingKey::from_ec_pem(pem.as_bytes()),
            Algorithm::RS256 => EncodingKey::from_rsa_pem(pem.as_bytes()),
            other => return Err(format!("{other:?} is not an accepted signing algorithm")),
        };
        let invalid = |error: jsonwebtoken::errors::Error| format!("a {algorithm:?} key: {error}");
        let encoding = encoding.map_err(invalid)?;
        let mut jwk = Jwk::from_encoding_key(&encoding, algorithm).map_err(invalid)?;
        let kid = jwk.thumbprint(ThumbprintHash::SHA256).map_err(invalid)?;
        jwk.common = CommonParameters {
            public_key_use: Some(PublicKeyUse::Signature),
            key_algorithm: Some(algorithm.into()),
            key_id: Some(kid),
            ..Default::default()
        };
        Ok(Self { algorithm, pkcs8_pem: pem.to_owned(), encoding, jwk })
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The private key as PKCS#8 PEM, to save and load again.
    pub fn pkcs8_pem(&self) -> &str {
        &self.pkcs8_pem
    }

    pub fn kid(&self) -> &str {
        self.jwk.common.key_id.as_deref().unwrap_or_default()
    }

    pub fn jwk(&self) -> &Jwk {
        &self.jwk
    }

    /// The JWKS document that publishes these keys' public halves.
    pub fn jwks_json(keys: &[&SigningKey]) -> String {
        let set = JwkSet { keys: keys.iter().map(|key| key.jwk.clone()).collect() };
        serde_json::to_string(&set).unwrap_or_default()
    }

    /// Signs arbitrary claims (any JSON a serializer writes, even with a
    /// repeated key) with this key and its `kid`, as an RFC 9068 access
    /// token (`typ` `at+jwt`).
    pub fn sign(&self, claims: &impl Serialize) -> KeyResult<String> {
        self.sign_typed(Some("at+jwt"), claims)
    }

    /// [`Self::sign`] with the JOSE header's `typ` set to `typ`, or none.
    pub fn sign_typed(&self, typ: Option<&str>, claims: &impl Serialize) -> KeyResult<String> {
        let mut header = Header::new(self.algorithm);
        header.kid = Some(self.kid().to_owned());
        header.typ = typ.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &self.encoding).map_err(|error| error.to_string())
    }

    /// A token for `sub`, valid from now for `ttl_seconds`.
    pub fn token(
        &self,
        issuer: &str,
        audience: Option<&str>,
        sub: &str,
        ttl_seconds: u64,
    ) -> KeyResult<String> {
        let now = unix_now();
        let mut claims = json!({ "iss": issuer, "sub": sub, "iat": now, "exp": now + ttl_seconds });
        if let Some(audience) = audience {
            claims["aud"] = json!(audience);
        }
        self.sign(&claims)
    }
}

/// Every local token's `iss` and `aud`: the function's here.
pub const ISSUER: &str = "https://plant-store.local";
pub const AUDIENCE: &str = "plant-store";

/// An issuer here: its keys (the first signs, all are published).
pub struct Issuer {
    pub keys: Vec<SigningKey>,
}

impl Issuer {
    const KEY_FILE: &str = "signing-key.pem";

    /// New keys of these algorithms, for one run.
    pub fn generate(algorithms: &[Algorithm]) -> Self {
        let keys = algorithms.iter();
        Self { keys: keys.map(|&algorithm| SigningKey::generate(algorithm).unwrap()).collect() }
    }

    /// The Ed25519 key kept in `dir` (the local stack's, between runs).
    pub fn load(dir: &Path) -> KeyResult<Self> {
        let path = dir.join(Self::KEY_FILE);
        let pem = std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        let key = SigningKey::from_pkcs8_pem(Algorithm::EdDSA, &pem)?;
        Ok(Self { keys: vec![key] })
    }

    /// [`Self::load`], after making the key if `dir` has none.
    pub fn load_or_create(dir: &Path) -> KeyResult<Self> {
        if !dir.join(Self::KEY_FILE).exists() {
            let key = SigningKey::generate(Algorithm::EdDSA)?;
            std::fs::create_dir_all(dir).map_err(|error| error.to_string())?;
            std::fs::write(dir.join(Self::KEY_FILE), key.pkcs8_pem())
                .map_err(|error| error.to_string())?;
        }
        Self::load(dir)
    }

    /// The JWKS that publishes every key.
    pub fn jwks(&self) -> String {
        SigningKey::jwks_json(&self.keys.iter().collect::<Vec<_>>())
    }

    /// A token for `sub`, signed with the first key, valid for `ttl_seconds`.
    pub fn token(&self, sub: &str, ttl_seconds: u64) -> String {
        self.keys[0].token(ISSUER, Some(AUDIENCE), sub, ttl_seconds).unwrap()
    }
}

pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs()).unwrap_or(0)
}

const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";

fn pem_encode(der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|line| std::str::from_utf8(line).unwrap_or_default())
        .collect();
    format!("{PEM_BEGIN}\n{}\n{PEM_END}\n", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_pem_with_a_stable_kid() {
        for algorithm in [Algorithm::EdDSA, Algorithm::ES256, Algorithm::RS256] {
            let key = SigningKey::generate(algorithm).unwrap();
            let again = SigningKey::from_pkcs8_pem(algorithm, key.pkcs8_pem()).unwrap();
            assert_eq!(key.kid(), again.kid());
            assert_eq!(key.jwk(), again.jwk());
        }
    }
}
