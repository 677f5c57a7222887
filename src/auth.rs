//! Bearer tokens: parse the `Authorization` header, verify the JWT against the
//! issuer's signing keys, and yield the caller as an [`Owner`].

use std::collections::HashMap;
use std::fmt;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use lambda_http::http::HeaderMap;
use lambda_http::http::header::AUTHORIZATION;
use serde::Deserialize;

use crate::config::KeyConfig;
use crate::domain::Owner;
use crate::jwks::RemoteKeys;

/// Only asymmetric signatures: `none` and HMAC are never accepted.
const ACCEPTED_ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY_SECONDS: u64 = 30;
/// Real tokens are a few hundred bytes to ~2 KiB; anything far larger is
/// refused before any decoding work.
const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Why a request is not authenticated. Never carries the token itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// No `Authorization` header, or not the `Bearer` scheme.
    MissingToken,
    /// More than one `Authorization` header: ambiguous, refused.
    RepeatedHeader,
    /// A bearer token that is past its `exp`.
    Expired,
    /// Any other reason: signature, key, algorithm, issuer, audience, claims.
    InvalidToken,
}

/// A verification key taken from a JWKS, with the one algorithm it verifies.
#[derive(Clone)]
pub struct VerificationKey {
    algorithm: Algorithm,
    key: DecodingKey,
}

/// The usable signing keys of a JWKS, by `kid`.
#[derive(Clone, Default)]
pub struct KeySet {
    keys: HashMap<String, VerificationKey>,
}

#[derive(Debug)]
pub struct KeySetError(String);

impl fmt::Display for KeySetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KeySetError {}

impl KeySet {
    /// Parses a JWKS document. Keys that cannot verify one of the accepted
    /// algorithms (encryption keys, symmetric keys, other curves, keys without
    /// a `kid`) are skipped; a set with no usable key is an error.
    pub fn from_jwks_json(json: &str) -> Result<Self, KeySetError> {
        let set: JwkSet = serde_json::from_str(json)
            .map_err(|error| KeySetError(format!("the key set is not a valid JWKS: {error}")))?;
        let keys: HashMap<_, _> = set.keys.iter().filter_map(usable_key).collect();
        if keys.is_empty() {
            return Err(KeySetError(
                "the key set has no usable signing key (RS256, ES256 or EdDSA with a kid)".into(),
            ));
        }
        Ok(Self { keys })
    }

    pub(crate) fn get(&self, kid: &str) -> Option<&VerificationKey> {
        self.keys.get(kid)
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

fn usable_key(jwk: &Jwk) -> Option<(String, VerificationKey)> {
    let kid = jwk.common.key_id.clone()?;
    if matches!(&jwk.common.public_key_use, Some(usage) if *usage != PublicKeyUse::Signature) {
        return None;
    }
    let algorithm = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    // A key that names its algorithm is used for that algorithm only.
    if let Some(declared) = jwk.common.key_algorithm
        && declared != algorithm.into()
    {
        return None;
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some((kid, VerificationKey { algorithm, key }))
}

/// Where verification keys come from: a key set given inline in the
/// configuration (local use), or the issuer's JWKS URL (production).
pub enum KeySource {
    Inline(KeySet),
    Remote(Box<RemoteKeys>),
}

impl KeySource {
    pub fn from_config(config: &KeyConfig) -> Result<Self, String> {
        match config {
            KeyConfig::Inline(jwks) => KeySet::from_jwks_json(jwks)
                .map(Self::Inline)
                .map_err(|error| error.to_string()),
            KeyConfig::Url(url) => {
                RemoteKeys::new(url).map(|remote| Self::Remote(Box::new(remote)))
            }
        }
    }

    async fn key(&self, kid: &str) -> Option<VerificationKey> {
        match self {
            Self::Inline(set) => set.get(kid).cloned(),
            Self::Remote(remote) => remote.key(kid).await,
        }
    }
}

/// What a token must say, besides a valid signature and `exp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRules {
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud`, if any.
    pub audience: Option<String>,
    /// Amazon Cognito mode: only access tokens (`token_use` "access") issued
    /// to this app client (`client_id`); Cognito access tokens have no `aud`.
    pub cognito_client_id: Option<String>,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    token_use: Option<String>,
    client_id: Option<String>,
}

/// Verifies bearer tokens for one issuer (and audience, when configured).
pub struct Verifier {
    keys: KeySource,
    /// One set of rules per accepted algorithm: jsonwebtoken requires every
    /// algorithm of a `Validation` to match the key's family.
    validations: Vec<Validation>,
    cognito_client_id: Option<String>,
}

impl Verifier {
    pub fn new(keys: KeySource, rules: &TokenRules) -> Self {
        let validation_for = |algorithm| {
            let mut validation = Validation::new(algorithm);
            validation.leeway = LEEWAY_SECONDS;
            validation.validate_nbf = true;
            validation.set_issuer(&[&rules.issuer]);
            match &rules.audience {
                Some(audience) => {
                    validation.set_audience(&[audience]);
                    validation.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
                }
                None => {
                    validation.validate_aud = false;
                    validation.set_required_spec_claims(&["exp", "iss", "sub"]);
                }
            }
            validation
        };
        let validations = ACCEPTED_ALGORITHMS
            .into_iter()
            .map(validation_for)
            .collect();
        Self {
            keys,
            validations,
            cognito_client_id: rules.cognito_client_id.clone(),
        }
    }

    /// Fetches remote keys ahead of the first request (a no-op for inline
    /// keys). A failure is logged, not fatal: requests retry the fetch.
    pub async fn prefetch_keys(&self) {
        if let KeySource::Remote(remote) = &self.keys
            && let Err(error) = remote.refresh().await
        {
            tracing::warn!(%error, "no signing keys yet; the first requests will retry");
        }
    }

    /// The caller named by the request's bearer token.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Owner, AuthError> {
        let token = bearer_token(headers)?;
        self.verify(token).await
    }

    async fn verify(&self, token: &str) -> Result<Owner, AuthError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AuthError::InvalidToken);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| AuthError::InvalidToken)?;
        let validation = self
            .validations
            .iter()
            .find(|validation| validation.algorithms == [header.alg])
            .ok_or(AuthError::InvalidToken)?;
        let kid = header.kid.as_deref().ok_or(AuthError::InvalidToken)?;
        let key = self.keys.key(kid).await.ok_or(AuthError::InvalidToken)?;
        if key.algorithm != header.alg {
            return Err(AuthError::InvalidToken);
        }
        let claims = jsonwebtoken::decode::<Claims>(token, &key.key, validation)
            .map_err(|error| match error.kind() {
                ErrorKind::ExpiredSignature => AuthError::Expired,
                _ => AuthError::InvalidToken,
            })?
            .claims;
        if let Some(client_id) = &self.cognito_client_id {
            let is_access_token = claims.token_use.as_deref() == Some("access");
            if !is_access_token || claims.client_id.as_ref() != Some(client_id) {
                return Err(AuthError::InvalidToken);
            }
        }
        Owner::parse(claims.sub).ok_or(AuthError::InvalidToken)
    }
}

/// The token of the one `Authorization: Bearer <token>` header.
fn bearer_token(headers: &HeaderMap) -> Result<&str, AuthError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthError::MissingToken)?;
    if values.next().is_some() {
        return Err(AuthError::RepeatedHeader);
    }
    let value = value.to_str().map_err(|_| AuthError::MissingToken)?;
    // HTTP APIs and function URLs join repeated headers with a comma, and a
    // token never holds one (RFC 6750 b64token). REST API events arrive with
    // the last value only: lambda_http keeps API Gateway's single `headers`.
    if value.contains(',') {
        return Err(AuthError::RepeatedHeader);
    }
    let (scheme, token) = value.split_once(' ').ok_or(AuthError::MissingToken)?;
    // The auth-scheme is case-insensitive (RFC 9110, section 11.1).
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::MissingToken);
    }
    match token.trim() {
        "" => Err(AuthError::MissingToken),
        token => Ok(token),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn bearer_scheme_is_required_and_case_insensitive() {
        assert_eq!(bearer_token(&headers(&["Bearer abc"])), Ok("abc"));
        assert_eq!(bearer_token(&headers(&["bearer abc"])), Ok("abc"));
        assert_eq!(bearer_token(&headers(&[])), Err(AuthError::MissingToken));
        assert_eq!(
            bearer_token(&headers(&["Basic abc"])),
            Err(AuthError::MissingToken)
        );
        assert_eq!(
            bearer_token(&headers(&["Bearer"])),
            Err(AuthError::MissingToken)
        );
        assert_eq!(
            bearer_token(&headers(&["Bearer  "])),
            Err(AuthError::MissingToken)
        );
        assert_eq!(
            bearer_token(&headers(&["Bearer a", "Bearer b"])),
            Err(AuthError::RepeatedHeader)
        );
        assert_eq!(
            bearer_token(&headers(&["Bearer a,Bearer b"])),
            Err(AuthError::RepeatedHeader)
        );
    }

    #[test]
    fn only_signing_keys_of_accepted_algorithms_are_kept() {
        let jwks = r#"{"keys": [
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "enc", "use": "enc",
             "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "mismatch", "alg": "RS256",
             "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "good", "use": "sig",
             "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
        ]}"#;
        let set = KeySet::from_jwks_json(jwks).unwrap();
        assert_eq!(set.keys.len(), 1);
        assert!(set.get("good").is_some());
    }

    #[test]
    fn a_set_without_usable_keys_is_refused() {
        assert!(KeySet::from_jwks_json(r#"{"keys": []}"#).is_err());
        assert!(KeySet::from_jwks_json("not json").is_err());
    }
}
