//! The issuer's signing keys, fetched from its JWKS URL and cached by `kid`.
//!
//! - Fetched over HTTPS (plain HTTP only for a loopback host, for tests) with
//!   the hyper/rustls stack the AWS SDK already builds: no extra crates.
//! - A fetch is bounded: 1.5 s for the whole exchange, 150 KB of body.
//! - A token with an unknown `kid` triggers at most one refetch per 10 s, so
//!   a flood of made-up `kid`s cannot become a flood of fetches; concurrent
//!   misses wait for the one fetch in flight instead of starting their own.
//! - A key set older than an hour is refreshed by the next request, so keys
//!   the issuer removed stop verifying; a failed refetch keeps the last good
//!   key set serving.

use std::sync::RwLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use lambda_http::http::Uri;

use crate::auth::{KeySet, VerificationKey};

const FETCH_TIMEOUT: Duration = Duration::from_millis(1500);
const MAX_JWKS_BYTES: usize = 150 * 1024;
/// The least time between two fetches caused by unknown `kid`s.
const REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// How long a fetched key set is trusted before a request refreshes it.
const MAX_KEY_SET_AGE: Duration = Duration::from_secs(3600);
/// While no key set has ever been fetched (the issuer was down at start-up),
/// retry sooner, but still not on every request.
const RETRY_INTERVAL_WITHOUT_KEYS: Duration = Duration::from_secs(1);

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
}

pub struct RemoteKeys {
    url: Uri,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    cache: RwLock<Cache>,
    /// Held for the duration of a fetch: one fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl RemoteKeys {
    /// `url` must be `https://`, or `http://` to a loopback host.
    pub fn new(url: &str) -> Result<Self, String> {
        let url: Uri = url
            .parse()
            .map_err(|_| format!("the JWKS URL {url:?} is not a URL"))?;
        let loopback = matches!(url.host(), Some("127.0.0.1" | "localhost" | "[::1]"));
        match url.scheme_str() {
            Some("https") => {}
            Some("http") if loopback => {}
            _ => return Err(format!("the JWKS URL {url} must use https")),
        }
        let connector = HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|error| format!("cannot load the system's root certificates: {error}"))?
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self {
            url,
            client,
            cache: RwLock::new(Cache {
                keys: None,
                last_attempt: None,
            }),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// Fetches the key set now, replacing the cache on success. Called once at
    /// start-up, where Lambda gives the function full CPU.
    pub async fn refresh(&self) -> Result<(), FetchError> {
        let _fetching = self.fetching.lock().await;
        self.fetch_into_cache().await
    }

    pub(crate) async fn key(&self, kid: &str) -> Option<VerificationKey> {
        let (key, fresh) = self.cached(kid);
        if key.is_some() && fresh {
            return key;
        }
        let _fetching = self.fetching.lock().await;
        // Another request may have fetched while this one waited: the
        // interval check then sends it to the cache.
        if self.may_refetch()
            && let Err(error) = self.fetch_into_cache().await
        {
            tracing::warn!(%error, "keeping the last good key set");
        }
        self.cached(kid).0
    }

    /// The cached key for `kid`, and whether the key set is still fresh.
    fn cached(&self, kid: &str) -> (Option<VerificationKey>, bool) {
        let cache = self
            .cache
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match &cache.keys {
            Some((keys, fetched)) => (keys.get(kid).cloned(), fetched.elapsed() < MAX_KEY_SET_AGE),
            None => (None, false),
        }
    }

    fn may_refetch(&self) -> bool {
        let cache = self
            .cache
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let interval = match cache.keys {
            Some(_) => REFETCH_INTERVAL,
            None => RETRY_INTERVAL_WITHOUT_KEYS,
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
        let keys = result?;
        tracing::info!(
            url = %self.url,
            keys = keys.len(),
            fetch_ms = started.elapsed().as_secs_f64() * 1000.0,
            "fetched the JWKS"
        );
        cache.keys = Some((keys, Instant::now()));
        Ok(())
    }

    async fn fetch(&self) -> Result<KeySet, FetchError> {
        let exchange = async {
            let response = self
                .client
                .get(self.url.clone())
                .await
                .map_err(|error| FetchError(error.to_string()))?;
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
            KeySet::from_jwks_json(text).map_err(|error| FetchError(error.to_string()))
        };
        tokio::time::timeout(FETCH_TIMEOUT, exchange)
            .await
            .map_err(|_| FetchError(format!("no complete answer within {FETCH_TIMEOUT:?}")))?
    }
}
