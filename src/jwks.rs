//! The issuer's signing keys: a JWKS parsed into the keys this API accepts,
//! given inline (local use) or fetched from the issuer's JWKS URL and cached
//! by `kid` (production).
//!
//! The remote source:
//! - fetches over HTTPS (plain HTTP only for a loopback host, for tests)
//!   through the function's one HTTPS client ([`crate::https`]), whose
//!   trust store the DynamoDB client shares;
//! - bounds a fetch: 1.5 s for the whole exchange, 150 KB of body;
//! - refetches for an unknown `kid` at most once per
//!   [`KeyRefresh::refetch_interval`], and concurrent misses wait for the one
//!   fetch in flight instead of starting their own;
//! - refreshes a key set older than [`KeyRefresh::max_age`] on the next
//!   request; a failed refetch keeps the last good key set serving;
//! - answers [`KeysUnavailable`] for a `kid` it does not hold while its last
//!   fetch failed: whether the token is valid cannot be known then. A `kid`
//!   that a successfully fetched key set does not hold is simply unknown;
//! - counts its key sets ([`KeySource::generation`]): the verifier forgets
//!   the tokens it verified whenever the keys change.

use std::collections::HashMap;
use std::fmt;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use lambda_http::http::Uri;

use tracing::Instrument;
use tracing::field;

use crate::config::{KeyConfig, KeyRefresh};
use crate::domain::limits::MAX_JWKS_BYTES;
use crate::https::{Connector, Https};

/// Only asymmetric signatures: `none` and HMAC are never accepted.
pub(crate) const ACCEPTED_ALGORITHMS: [Algorithm; 3] =
    [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
const FETCH_TIMEOUT: Duration = Duration::from_millis(1500);

/// A verification key taken from a JWKS, with the one algorithm it verifies.
#[derive(Clone)]
pub(crate) struct VerificationKey {
    pub(crate) algorithm: Algorithm,
    pub(crate) key: DecodingKey,
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
    /// `https`: the client a remote key set is fetched with.
    pub fn from_config(config: &KeyConfig, https: &Https) -> Result<Self, KeySourceError> {
        match config {
            KeyConfig::Inline(jwks) => Ok(Self::Inline(KeySet::from_jwks_json(jwks)?)),
            KeyConfig::Url { url, refresh } => {
                RemoteKeys::new(url, *refresh, https).map(|remote| Self::Remote(Box::new(remote)))
            }
        }
    }

    /// Fetches remote keys ahead of the first request (a no-op for inline
    /// keys). A failure is logged, not fatal: requests retry the fetch.
    pub async fn prefetch(&self) {
        if let Self::Remote(remote) = self
            && let Err(error) = remote.refresh().await
        {
            tracing::warn!(%error, "no signing keys yet; the first requests will retry");
        }
    }

    /// The key for `kid`, `None` if the key set does not hold it.
    pub(crate) async fn key(&self, kid: &str) -> Result<Option<VerificationKey>, KeysUnavailable> {
        match self {
            Self::Inline(set) => Ok(set.get(kid).cloned()),
            Self::Remote(remote) => remote.key(kid).await,
        }
    }

    /// Which key set verifies now: a number that changes whenever the keys
    /// do. A remote set past its age is refreshed first, as [`Self::key`]
    /// would, so that a key its issuer removed stops verifying also for the
    /// tokens verified with it before.
    pub(crate) async fn generation(&self) -> u64 {
        match self {
            Self::Inline(_) => 0,
            Self::Remote(remote) => remote.generation().await,
        }
    }
}

/// The key for a token is not cached, and the issuer's key set could not be
/// fetched: retry later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeysUnavailable;

/// Why the configured key source cannot be used: the function does not start.
#[derive(Debug)]
pub enum KeySourceError {
    InvalidKeySet(KeySetError),
    NotAUrl(String),
    NotHttps(String),
}

impl fmt::Display for KeySourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidKeySet(error) => write!(f, "AUTH_JWKS: {error}"),
            Self::NotAUrl(url) => write!(f, "the JWKS URL {url:?} is not a URL"),
            Self::NotHttps(url) => write!(f, "the JWKS URL {url} must use https"),
        }
    }
}

impl std::error::Error for KeySourceError {}

impl From<KeySetError> for KeySourceError {
    fn from(error: KeySetError) -> Self {
        Self::InvalidKeySet(error)
    }
}

#[derive(Debug)]
pub struct FetchError(String);

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fetching the JWKS failed: {}", self.0)
    }
}

impl std::error::Error for FetchError {}

struct Cache {
    /// The last good key set and when it was fetched.
    keys: Option<(KeySet, Instant)>,
    last_attempt: Option<Instant>,
    /// Whether the last fetch failed: an unknown `kid` is then unknowable.
    last_failed: bool,
    /// How many different key sets have been fetched, and a hash of the
    /// last one's document.
    generation: (u64, u64),
}

/// The issuer's key set behind its JWKS URL, cached.
pub struct RemoteKeys {
    url: Uri,
    refresh: KeyRefresh,
    client: Client<Connector, Empty<Bytes>>,
    cache: RwLock<Cache>,
    /// Held for the duration of a fetch: one fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl RemoteKeys {
    /// `url` must be `https://`, or `http://` to a loopback host.
    fn new(url: &str, refresh: KeyRefresh, https: &Https) -> Result<Self, KeySourceError> {
        let url: Uri = url
            .parse()
            .map_err(|_| KeySourceError::NotAUrl(url.to_owned()))?;
        let loopback = matches!(url.host(), Some("127.0.0.1" | "localhost" | "[::1]"));
        match url.scheme_str() {
            Some("https") => {}
            Some("http") if loopback => {}
            _ => return Err(KeySourceError::NotHttps(url.to_string())),
        }
        let client = Client::builder(TokioExecutor::new()).build(https.connector());
        Ok(Self {
            url,
            refresh,
            client,
            cache: RwLock::new(Cache {
                keys: None,
                last_attempt: None,
                last_failed: false,
                generation: (0, 0),
            }),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// Fetches the key set now, replacing the cache on success. Called once at
    /// start-up, where Lambda gives the function full CPU.
    async fn refresh(&self) -> Result<(), FetchError> {
        let _fetching = self.fetching.lock().await;
        self.fetch_into_cache().await
    }

    async fn key(&self, kid: &str) -> Result<Option<VerificationKey>, KeysUnavailable> {
        let (key, fresh) = self.cached(kid);
        if key.is_some() && fresh {
            return Ok(key);
        }
        self.refetch().await;
        match self.cached(kid).0 {
            Some(key) => Ok(Some(key)),
            None if self.read_cache().last_failed => Err(KeysUnavailable),
            None => Ok(None),
        }
    }

    async fn generation(&self) -> u64 {
        let fresh = {
            let cache = self.read_cache();
            let fresh = |(_, fetched): &(KeySet, Instant)| fetched.elapsed() < self.refresh.max_age;
            cache.keys.as_ref().is_none_or(fresh)
        };
        if !fresh {
            self.refetch().await;
        }
        self.read_cache().generation.0
    }

    /// Fetches the key set again, unless another request did within the
    /// interval; a failure keeps the last good key set serving.
    async fn refetch(&self) {
        let _fetching = self.fetching.lock().await;
        // Another request may have fetched while this one waited: the
        // interval check then sends it to the cache.
        if self.may_refetch()
            && let Err(error) = self.fetch_into_cache().await
        {
            tracing::warn!(%error, "keeping the last good key set");
        }
    }

    fn read_cache(&self) -> std::sync::RwLockReadGuard<'_, Cache> {
        self.cache
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached key for `kid`, and whether the key set is still fresh.
    fn cached(&self, kid: &str) -> (Option<VerificationKey>, bool) {
        let cache = self.read_cache();
        match &cache.keys {
            Some((keys, fetched)) => (
                keys.get(kid).cloned(),
                fetched.elapsed() < self.refresh.max_age,
            ),
            None => (None, false),
        }
    }

    fn may_refetch(&self) -> bool {
        let cache = self.read_cache();
        let interval = match cache.keys {
            Some(_) => self.refresh.refetch_interval,
            None => self.refresh.retry_without_keys,
        };
        cache
            .last_attempt
            .is_none_or(|last| last.elapsed() >= interval)
    }

    async fn fetch_into_cache(&self) -> Result<(), FetchError> {
        let started = Instant::now();
        let result = self.fetch().await;
        let mut cache = self
            .cache
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.last_attempt = Some(Instant::now());
        cache.last_failed = result.is_err();
        let (keys, document_hash) = result?;
        tracing::info!(
            url = %self.url,
            keys = keys.len(),
            fetch_ms = started.elapsed().as_secs_f64() * 1000.0,
            "fetched the JWKS"
        );
        if cache.keys.is_none() || cache.generation.1 != document_hash {
            cache.generation = (cache.generation.0 + 1, document_hash);
        }
        cache.keys = Some((keys, Instant::now()));
        Ok(())
    }

    /// One GET of the key set, and a hash of its document; traced for X-Ray
    /// as a call to the issuer, a subsegment named for its host.
    async fn fetch(&self) -> Result<(KeySet, u64), FetchError> {
        // X-Ray names hold no brackets: an IPv6 host without them.
        let host = self.url.host().unwrap_or("jwks").trim_matches(['[', ']']);
        let span = tracing::info_span!(
            target: "xray",
            "jwks",
            xray.name = host,
            xray.namespace = "remote",
            http.method = "GET",
            http.url = %self.url,
            http.status = field::Empty,
            xray.outcome = field::Empty,
        );
        let mut status = None;
        let exchange = async {
            let response = self
                .client
                .get(self.url.clone())
                .await
                .map_err(|error| FetchError(error.to_string()))?;
            status = Some(response.status().as_u16());
            if !response.status().is_success() {
                return Err(FetchError(format!("status {}", response.status())));
            }
            let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
                .collect()
                .await
                .map_err(|error| FetchError(format!("body: {error}")))?
                .to_bytes();
            let text = std::str::from_utf8(&body)
                .map_err(|_| FetchError("the body is not UTF-8".into()))?;
            let keys =
                KeySet::from_jwks_json(text).map_err(|error| FetchError(error.to_string()))?;
            Ok((keys, document_hash(text)))
        };
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, exchange.instrument(span.clone()))
            .await
            .map_err(|_| FetchError(format!("no complete answer within {FETCH_TIMEOUT:?}")))
            .flatten();
        if let Some(status) = status {
            span.record("http.status", status);
        }
        // No answer, or one that is not a key set: the issuer's fault.
        if fetched.is_err() && status.is_none_or(|status| status < 400) {
            span.record("xray.outcome", "fault");
        }
        fetched
    }
}

/// A hash of a key set's document, to tell a changed key set from the same
/// one fetched again.
fn document_hash(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unusable_key_source_is_a_typed_error_that_names_it() {
        let url = |url: &str| KeyConfig::Url {
            url: url.into(),
            refresh: KeyRefresh::default(),
        };
        let https = Https::new(&Default::default()).unwrap();
        let error = |config| KeySource::from_config(&config, &https).err().unwrap();
        assert!(matches!(
            error(KeyConfig::Inline("{}".into())),
            KeySourceError::InvalidKeySet(_)
        ));
        assert!(matches!(
            error(url("not a url")),
            KeySourceError::NotAUrl(_)
        ));
        let plain = error(url("http://issuer.example/jwks"));
        assert!(matches!(plain, KeySourceError::NotHttps(_)));
        assert_eq!(
            plain.to_string(),
            "the JWKS URL http://issuer.example/jwks must use https"
        );
        assert!(KeySource::from_config(&url("http://127.0.0.1:9/jwks"), &https).is_ok());
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
