//! Local signing keys for development and tests: generate a key pair, publish
//! its JWKS, mint tokens. The Lambda function never links this; it only
//! verifies, against the key set it is configured with.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair,
};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::jwk::{
    AlgorithmParameters, CommonParameters, EllipticCurve, EllipticCurveKeyParameters, Jwk, JwkSet,
    OctetKeyPairParameters, PublicKeyUse, RSAKeyParameters, ThumbprintHash,
};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

/// A private signing key with its public JWK. The `kid` is the key's RFC 7638
/// thumbprint, so the same key always gets the same `kid`.
pub struct DevKey {
    algorithm: Algorithm,
    pkcs8_pem: String,
    encoding: EncodingKey,
    jwk: Jwk,
}

type DevKeyResult<T> = Result<T, String>;

impl DevKey {
    /// A new random key for RS256, ES256 or EdDSA.
    pub fn generate(algorithm: Algorithm) -> DevKeyResult<Self> {
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

    /// Loads a key saved with [`DevKey::pkcs8_pem`].
    pub fn from_pkcs8_pem(algorithm: Algorithm, pem: &str) -> DevKeyResult<Self> {
        let der = pem_decode(pem)?;
        let invalid = |_| format!("not a PKCS#8 {algorithm:?} private key");
        let (encoding, parameters) = match algorithm {
            Algorithm::EdDSA => {
                let pair = Ed25519KeyPair::from_pkcs8(&der).map_err(invalid)?;
                let parameters = AlgorithmParameters::OctetKeyPair(OctetKeyPairParameters {
                    key_type: Default::default(),
                    curve: EllipticCurve::Ed25519,
                    x: URL_SAFE_NO_PAD.encode(pair.public_key().as_ref()),
                });
                (EncodingKey::from_ed_pem(pem.as_bytes()), parameters)
            }
            Algorithm::ES256 => {
                let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der)
                    .map_err(invalid)?;
                // An uncompressed point: 0x04, then 32 bytes of x and 32 of y.
                let point = pair.public_key().as_ref();
                let parameters = AlgorithmParameters::EllipticCurve(EllipticCurveKeyParameters {
                    key_type: Default::default(),
                    curve: EllipticCurve::P256,
                    x: URL_SAFE_NO_PAD.encode(&point[1..33]),
                    y: URL_SAFE_NO_PAD.encode(&point[33..65]),
                });
                (EncodingKey::from_ec_pem(pem.as_bytes()), parameters)
            }
            Algorithm::RS256 => {
                let pair = RsaKeyPair::from_pkcs8(&der).map_err(invalid)?;
                let public = pair.public_key();
                let parameters = AlgorithmParameters::RSA(RSAKeyParameters {
                    key_type: Default::default(),
                    n: URL_SAFE_NO_PAD.encode(public.modulus().big_endian_without_leading_zero()),
                    e: URL_SAFE_NO_PAD.encode(public.exponent().big_endian_without_leading_zero()),
                });
                (EncodingKey::from_rsa_pem(pem.as_bytes()), parameters)
            }
            other => return Err(format!("{other:?} is not an accepted signing algorithm")),
        };
        let encoding = encoding.map_err(|error| error.to_string())?;
        let mut jwk = Jwk {
            common: CommonParameters::default(),
            algorithm: parameters,
        };
        let kid = jwk
            .thumbprint(ThumbprintHash::SHA256)
            .map_err(|error| error.to_string())?;
        jwk.common = CommonParameters {
            public_key_use: Some(PublicKeyUse::Signature),
            key_algorithm: Some(algorithm.into()),
            key_id: Some(kid),
            ..Default::default()
        };
        Ok(Self {
            algorithm,
            pkcs8_pem: pem.to_owned(),
            encoding,
            jwk,
        })
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
    pub fn jwks_json(keys: &[&DevKey]) -> String {
        let set = JwkSet {
            keys: keys.iter().map(|key| key.jwk.clone()).collect(),
        };
        serde_json::to_string(&set).unwrap_or_default()
    }

    /// Signs arbitrary claims (any JSON a serializer writes, even with a
    /// repeated key) with this key and its `kid`.
    pub fn sign(&self, claims: &impl serde::Serialize) -> DevKeyResult<String> {
        self.sign_typed("JWT", claims)
    }

    /// [`Self::sign`] with the JOSE header's `typ` set to `typ` (RFC 9068's
    /// access tokens say `at+jwt`).
    pub fn sign_typed(&self, typ: &str, claims: &impl serde::Serialize) -> DevKeyResult<String> {
        let mut header = Header::new(self.algorithm);
        header.kid = Some(self.kid().to_owned());
        header.typ = Some(typ.to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding).map_err(|error| error.to_string())
    }

    /// A token for `sub`, valid from now for `ttl_seconds`.
    pub fn token(
        &self,
        issuer: &str,
        audience: Option<&str>,
        sub: &str,
        ttl_seconds: u64,
    ) -> DevKeyResult<String> {
        let now = unix_now();
        let mut claims = json!({ "iss": issuer, "sub": sub, "iat": now, "exp": now + ttl_seconds });
        if let Some(audience) = audience {
            claims["aud"] = json!(audience);
        }
        self.sign(&claims)
    }
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
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

fn pem_decode(pem: &str) -> DevKeyResult<Vec<u8>> {
    let body = pem
        .trim()
        .strip_prefix(PEM_BEGIN)
        .and_then(|rest| rest.strip_suffix(PEM_END))
        .ok_or("not a PEM private key")?;
    let body: String = body.split_whitespace().collect();
    STANDARD
        .decode(body)
        .map_err(|_| "the PEM body is not base64".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_pem_with_a_stable_kid() {
        for algorithm in [Algorithm::EdDSA, Algorithm::ES256, Algorithm::RS256] {
            let key = DevKey::generate(algorithm).unwrap();
            let again = DevKey::from_pkcs8_pem(algorithm, key.pkcs8_pem()).unwrap();
            assert_eq!(key.kid(), again.kid());
            assert_eq!(key.jwk(), again.jwk());
        }
    }
}
