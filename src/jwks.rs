//! The issuer's signing keys: a JWKS read entry by entry into the keys this
//! API accepts, inline or fetched and kept, by the rules docs/contract.md
//! states (a fetched set is the issuer's word; only a failed fetch keeps
//! the last good one, for [`KeyRefresh::keep_last_good`]).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::EllipticCurve::{Ed25519, P256};
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use lambda_http::http::Uri;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::config::{KeyConfig, KeyRefresh, remote_url};
use crate::domain::{from_object, limits::echoed};
use crate::https::{Connector, Https};
use crate::xray;

/// Only asymmetric signatures: `none` and HMAC are never accepted.
pub(crate) const ACCEPTED_ALGORITHMS: [Algorithm; 3] =
    [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
/// The most an issuer's key set may weigh, and take to arrive.
pub const MAX_JWKS_BYTES: usize = 150 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_millis(1500);

/// A verification key taken from a JWKS, with the one algorithm it verifies.
#[derive(Clone)]
pub(crate) struct VerificationKey {
    pub(crate) algorithm: Algorithm,
    pub(crate) key: DecodingKey,
}

/// The usable signing keys of one JWKS, by `kid`.
#[derive(Clone)]
pub struct KeySet {
    keys: HashMap<String, VerificationKey>,
    /// A hash of the usable keys themselves (`kid`, algorithm, key
    /// material): the same keys fetched again, in any order or spacing, are
    /// the same generation; any change of a key is another.
    generation: u64,
    /// Entries that were not usable keys, of any shape.
    skipped: usize,
}

/// A document that is not a JWKS at all: not JSON, or no `keys` array.
#[derive(Debug, thiserror::Error)]
#[error("the key set is not a JWKS: {0}")]
pub struct NotAJwks(String);

impl KeySet {
    /// Reads a JWKS entry by entry: an entry that is no usable signing key,
    /// whatever its shape, is skipped and counted; a `kid` two usable
    /// entries claim is ambiguous, and neither is used. Only a document that
    /// is no JWKS at all is an error.
    pub fn from_jwks_json(json: &str) -> Result<Self, NotAJwks> {
        #[derive(Deserialize)]
        struct Document<'a> {
            #[serde(borrow)]
            keys: Vec<&'a RawValue>,
        }
        let document: Document = from_object(json).map_err(NotAJwks)?;
        let entries = document.keys.len();
        let mut usable: Vec<(String, VerificationKey, String)> = document
            .keys
            .iter()
            .filter_map(|entry| usable_key(&serde_json::from_str(entry.get()).ok()?))
            .collect();
        usable.sort_by(|a, b| a.0.cmp(&b.0));
        let runs = usable.chunk_by(|a, b| a.0 == b.0).filter(|run| run.len() == 1);
        let usable: Vec<_> = runs.flat_map(<[_]>::to_vec).collect();
        let mut hasher = DefaultHasher::new();
        for (kid, key, material) in &usable {
            (kid, key.algorithm, material).hash(&mut hasher);
        }
        Ok(Self {
            skipped: entries - usable.len(),
            generation: hasher.finish(),
            keys: usable.into_iter().map(|(kid, key, _)| (kid, key)).collect(),
        })
    }

    pub(crate) fn get(&self, kid: &str) -> Option<&VerificationKey> {
        self.keys.get(kid)
    }

    /// Which keys these are: see the field.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

/// `jwk` as a key this API verifies with, its `kid` and its key material
/// (as JSON, for the generation); `None` if it is none.
fn usable_key(jwk: &Jwk) -> Option<(String, VerificationKey, String)> {
    let kid = jwk.common.key_id.clone()?;
    if matches!(&jwk.common.public_key_use, Some(usage) if *usage != PublicKeyUse::Signature) {
        return None;
    }
    let algorithm = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == Ed25519 => Algorithm::EdDSA,
        _ => return None,
    };
    // A key that names its algorithm is used for that algorithm only.
    if let Some(declared) = jwk.common.key_algorithm
        && declared != algorithm.into()
    {
        return None;
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    let material = serde_json::to_string(&jwk.algorithm).ok()?;
    Some((kid, VerificationKey { algorithm, key }, material))
}

/// Where verification keys come from: a key set given inline in the
/// configuration (local use), or the issuer's, fetched (production).
pub enum KeySource {
    Inline(Arc<KeySet>),
    Remote(Box<RemoteKeys>),
}

/// The keys cannot be known now (no fetch succeeded lately enough): retry
/// later. The reason is the log's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeysUnavailable(pub String);

impl KeySource {
    /// `https`: the client a remote key set is fetched with.
    pub fn from_config(config: &KeyConfig, https: &Https) -> Result<Self, KeySourceError> {
        let (location, refresh, loopback_http) = match config {
            KeyConfig::Inline(jwks) => return Self::inline(jwks),
            KeyConfig::Url { url, refresh, loopback_http } => (
                Location::Jwks(remote_url(url, *loopback_http).map_err(KeySourceError::Url)?),
                refresh,
                *loopback_http,
            ),
            KeyConfig::Discovery { issuer, refresh, loopback_http } => {
                // OpenID Connect Discovery 1.0, section 4: the issuer without
                // a trailing slash, then the well-known path.
                let url =
                    format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
                let url = remote_url(&url, *loopback_http).map_err(KeySourceError::Url)?;
                (Location::Discovery { url, issuer: issuer.clone() }, refresh, *loopback_http)
            }
        };
        let remote = RemoteKeys::new(location, *refresh, loopback_http, https);
        Ok(Self::Remote(Box::new(remote)))
    }

    /// A fixed key set (`AUTH_JWKS`), which must hold a usable key.
    pub fn inline(jwks: &str) -> Result<Self, KeySourceError> {
        let set = KeySet::from_jwks_json(jwks).map_err(KeySourceError::NotAJwks)?;
        if set.keys.is_empty() {
            return Err(KeySourceError::NoUsableKey);
        }
        Ok(Self::Inline(Arc::new(set)))
    }

    /// Fetches a remote key set now, at init (a no-op for inline keys). A
    /// failure is logged, not fatal: requests fetch again.
    pub async fn load(&self) {
        if let Self::Remote(remote) = self {
            remote.fetch_if_due().await;
        }
    }

    /// The key set that verifies now: a remote one past its age is fetched
    /// again first, so that a key its issuer removed stops verifying, also
    /// for the tokens verified with it before.
    pub(crate) async fn current(&self) -> Result<Arc<KeySet>, KeysUnavailable> {
        match self {
            Self::Inline(set) => Ok(Arc::clone(set)),
            Self::Remote(remote) => remote.current().await,
        }
    }

    /// The key set fetched again for `kid`, which the current one lacks (at
    /// most once per [`KeyRefresh::refetch_interval`]); [`KeysUnavailable`]
    /// if that fetch failed and the last good set lacks it too.
    pub(crate) async fn fetch_for(&self, kid: &str) -> Result<Arc<KeySet>, KeysUnavailable> {
        let remote = match self {
            Self::Inline(set) => return Ok(Arc::clone(set)),
            Self::Remote(remote) => remote,
        };
        remote.fetch_if_due().await;
        let set = remote.last_good()?;
        match &remote.read_state().last_failure {
            Some(failure) if set.get(kid).is_none() => Err(KeysUnavailable(failure.clone())),
            _ => Ok(set),
        }
    }
}

/// Why the configured key source cannot be used: the function does not start.
#[derive(Debug, thiserror::Error)]
pub enum KeySourceError {
    #[error("AUTH_JWKS: {0}")]
    NotAJwks(NotAJwks),
    #[error("AUTH_JWKS: no usable signing key (of an accepted algorithm, with a kid)")]
    NoUsableKey,
    #[error("the key URL {0}")]
    Url(String),
}

/// A fetch that failed, naming the URL it fetched.
#[derive(Debug, thiserror::Error)]
#[error("fetching {url} failed: {cause}")]
pub struct FetchError {
    url: String,
    cause: String,
}

/// Where the issuer's key set is.
enum Location {
    Jwks(Uri),
    /// Named by the issuer's discovery document, at `url`.
    Discovery {
        url: Uri,
        issuer: String,
    },
}

/// What the remote source knows.
#[derive(Default)]
struct State {
    /// The issuer's last word: the key set of the last fetch that parsed,
    /// and when it was fetched.
    keys: Option<(Arc<KeySet>, Instant)>,
    /// The key set's URL the discovery document last named.
    discovered: Option<Uri>,
    last_attempt: Option<Instant>,
    /// Why the last fetch failed, if it did: an unknown `kid` is then unknowable.
    last_failure: Option<String>,
}

/// The issuer's key set, kept between requests.
pub struct RemoteKeys {
    location: Location,
    refresh: KeyRefresh,
    /// Whether a discovered key set may be on plain HTTP to a loopback host.
    loopback_http: bool,
    client: Client<Connector, Empty<Bytes>>,
    state: RwLock<State>,
    /// Held for the duration of a fetch: one fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

/// The members of a discovery document that the function reads.
#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

impl RemoteKeys {
    fn new(location: Location, refresh: KeyRefresh, loopback_http: bool, https: &Https) -> Self {
        let client = Client::builder(TokioExecutor::new()).build(https.connector());
        let (state, fetching) = Default::default();
        Self { location, refresh, loopback_http, client, state, fetching }
    }

    fn read_state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The last good key set, while it is younger than `keep_last_good`.
    fn last_good(&self) -> Result<Arc<KeySet>, KeysUnavailable> {
        let state = self.read_state();
        match &state.keys {
            Some((set, fetched)) if fetched.elapsed() < self.refresh.keep_last_good => {
                Ok(Arc::clone(set))
            }
            Some(_) => Err(KeysUnavailable("the last good key set is older than a day".into())),
            None => Err(KeysUnavailable(state.last_failure.clone().unwrap_or_default())),
        }
    }

    async fn current(&self) -> Result<Arc<KeySet>, KeysUnavailable> {
        let keys = self.read_state().keys.clone();
        if let Some((set, _)) = keys.filter(|(_, fetched)| fetched.elapsed() < self.refresh.max_age)
        {
            return Ok(set);
        }
        self.fetch_if_due().await;
        self.last_good()
    }

    /// Fetches, unless a fetch was tried within the interval (another
    /// request's, perhaps while this one waited for it); the first always.
    async fn fetch_if_due(&self) {
        let _fetching = self.fetching.lock().await;
        let due = {
            let state = self.read_state();
            let interval = match state.keys {
                Some(_) => self.refresh.refetch_interval,
                None => self.refresh.retry_without_keys,
            };
            state.last_attempt.is_none_or(|last| last.elapsed() >= interval)
        };
        if due && let Err(error) = self.fetch().await {
            tracing::warn!(%error, "the key set could not be fetched; the last good one serves");
        }
    }

    /// One fetch, and what it says: a key set that parses replaces the
    /// last, whatever keys it holds; a failure (of the discovery document
    /// too) keeps the last good one.
    async fn fetch(&self) -> Result<(), FetchError> {
        let started = Instant::now();
        let fetched = match self.jwks_url().await {
            Ok(url) => {
                self.get(&url, |text| KeySet::from_jwks_json(text).map_err(|e| e.to_string())).await
            }
            Err(error) => Err(error),
        };
        let mut state = self.state.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.last_attempt = Some(Instant::now());
        state.last_failure = fetched.as_ref().err().map(ToString::to_string);
        let set = fetched?;
        tracing::info!(
            keys = set.keys.len(),
            skipped = set.skipped,
            fetch_ms = started.elapsed().as_secs_f64() * 1000.0,
            "fetched the JWKS"
        );
        state.keys = Some((Arc::new(set), Instant::now()));
        Ok(())
    }

    /// The key set's URL: the configured one, or the one the issuer's
    /// discovery document names, read with every fetch (a moved key set is
    /// followed) and trusted only if its `issuer` is exactly `AUTH_ISSUER`;
    /// while it cannot be read, the URL it last named serves.
    async fn jwks_url(&self) -> Result<Uri, FetchError> {
        let (url, issuer) = match &self.location {
            Location::Jwks(url) => return Ok(url.clone()),
            Location::Discovery { url, issuer } => (url, issuer),
        };
        let discovered = self.discover(url, issuer).await;
        let mut state = self.state.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        match (discovered, &state.discovered) {
            (Ok(jwks), _) => {
                state.discovered = Some(jwks.clone());
                Ok(jwks)
            }
            (Err(error), Some(last)) => {
                tracing::warn!(%error, jwks_uri = %last, "discovery failed; the key set's last URL serves");
                Ok(last.clone())
            }
            (Err(error), None) => Err(error),
        }
    }

    /// The `jwks_uri` of the discovery document at `url`, if its `issuer` is `issuer`.
    async fn discover(&self, url: &Uri, issuer: &str) -> Result<Uri, FetchError> {
        let document: Discovery = self.get(url, |text| from_object(text)).await?;
        let failed = |cause: String| FetchError { url: url.to_string(), cause };
        if document.issuer != *issuer {
            let named = echoed(&document.issuer);
            return Err(failed(format!(
                "its issuer {named:?} is not AUTH_ISSUER {issuer:?} exactly: its keys are not trusted"
            )));
        }
        let jwks = remote_url(&document.jwks_uri, self.loopback_http).map_err(failed)?;
        Ok(jwks)
    }

    /// One GET of `url`, its body read by `parse`, recorded for X-Ray as a
    /// call to the issuer: a subsegment named for its host.
    async fn get<T>(
        &self,
        url: &Uri,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, FetchError> {
        // X-Ray names hold no brackets: an IPv6 host without them.
        let host = url.host().unwrap_or("issuer").trim_matches(['[', ']']);
        let mut call = xray::Call::start(host, "remote");
        if let Some(call) = call.as_mut().filter(|call| call.sampled()) {
            call.document["http"]["request"] = json!({"method": "GET", "url": url.to_string()});
        }
        let mut status = None;
        let exchange = async {
            let response = self.client.get(url.clone()).await.map_err(|error| error.to_string())?;
            status = Some(response.status().as_u16());
            if !response.status().is_success() {
                return Err(format!("status {}", response.status()));
            }
            let body = Limited::new(response.into_body(), MAX_JWKS_BYTES).collect().await;
            let body = body.map_err(|error| format!("body: {error}"))?.to_bytes();
            parse(std::str::from_utf8(&body).map_err(|_| "the body is not UTF-8")?)
        };
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("no complete answer within {FETCH_TIMEOUT:?}")));
        if let Some(call) = &mut call {
            // No answer, or one that is no key set: the issuer's fault.
            let usable = |status: &u16| fetched.is_ok() || *status >= 400;
            call.end(status.filter(usable), false);
        }
        fetched.map_err(|cause| FetchError { url: url.to_string(), cause })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519_X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";

    fn okp(kid: &str, extra: &str) -> String {
        format!(r#"{{"kty": "OKP", "crv": "Ed25519", "kid": "{kid}", "x": "{ED25519_X}"{extra}}}"#)
    }

    #[test]
    fn an_unusable_key_source_is_an_error_that_names_it() {
        let https = Https::new(&Default::default()).unwrap();
        let url = |url: &str| {
            let (url, refresh) = (url.into(), KeyRefresh::default());
            KeySource::from_config(&KeyConfig::Url { url, refresh, loopback_http: false }, &https)
        };
        let inline = |jwks: &str| KeySource::inline(jwks).err().unwrap().to_string();
        assert!(inline("{}").contains("not a JWKS"));
        assert!(inline(r#"{"keys": []}"#).contains("no usable signing key"));
        let error = |given: &str| url(given).err().unwrap().to_string();
        assert_eq!(error("not a url"), r#"the key URL must be a URL; "not a url" is none"#);
        let plain = "the key URL must use https: http://issuer.example/jwks";
        assert_eq!(error("http://issuer.example/jwks"), plain);
    }

    #[test]
    fn a_key_set_keeps_only_unambiguous_signing_keys_of_accepted_algorithms() {
        let other_x = "3p7bfXt9wbTTW2HC7OQ1Nz-DQ8hbeGdNrfx-FG-IK08";
        let entries = [
            okp("good", r#", "use": "sig""#),
            okp("enc", r#", "use": "enc""#),
            okp("mismatch", r#", "alg": "RS256""#),
            okp("twice", ""),
            okp("twice", "").replace(ED25519_X, other_x),
            r#"{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"}"#.into(),
            okp("7", "").replace(r#""7""#, "7"),
            "null".into(),
        ];
        let set = KeySet::from_jwks_json(&format!(r#"{{"keys": [{}]}}"#, entries.join(",")));
        let set = set.unwrap();
        assert_eq!(set.keys.keys().collect::<Vec<_>>(), ["good"]);
        assert_eq!(set.skipped, entries.len() - 1);
        for not_a_jwks in ["not json", "[]", "{}", r#"{"keys": null}"#, "[[]]"] {
            assert!(KeySet::from_jwks_json(not_a_jwks).is_err(), "{not_a_jwks}");
        }
    }

    #[test]
    fn the_generation_follows_the_keys_not_the_bytes() {
        let generation = |keys: &[String]| {
            let json = format!(r#"{{"keys": [{}]}}"#, keys.join(","));
            KeySet::from_jwks_json(&json).unwrap().generation
        };
        let (a, b) = (okp("a", ""), okp("b", ""));
        let same = generation(&[a.clone(), b.clone()]);
        let spaced = a.replace(", ", ",  ");
        for same_keys in
            [[b.clone(), a.clone()], [spaced, b.clone()], [a.clone(), b.clone() + ", {}"]]
        {
            assert_eq!(generation(&same_keys), same, "{same_keys:?}");
        }
        assert_ne!(generation(std::slice::from_ref(&a)), same, "a key removed");
        assert_ne!(generation(&[a, okp("c", "")]), same, "a kid changed");
    }
}
