//! The function's one HTTPS client: one trust store ([`TrustConfig`]) in one
//! rustls configuration behind one connector, for the key fetch and, through
//! [`Https::sdk_http_client`], the DynamoDB client.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::config::TrustConfig;

/// Lambda to DynamoDB or the issuer takes milliseconds: a connection that
/// cannot open fails fast enough to be retried in the request's time.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The connector both clients use (HTTP/1.1; plain HTTP too, which only
/// DynamoDB Local and the tests' loopback servers use).
pub type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A trust setting the function cannot start with.
#[derive(Debug, thiserror::Error)]
#[error("{variable} ({}): {problem}", path.display())]
pub struct TrustError {
    variable: &'static str,
    path: PathBuf,
    problem: String,
}

/// The trust store. Every certificate of `EXTRA_CA_CERTS` must be a valid
/// trust anchor; `SSL_CERT_FILE` is read as system bundles are, skipping
/// what does not parse, and must hold at least one.
fn root_store(trust: &TrustConfig) -> Result<RootCertStore, TrustError> {
    let error =
        |variable, path: &Path, problem| TrustError { variable, path: path.into(), problem };
    let mut roots = RootCertStore::empty();
    match &trust.bundle {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            let certificates = read_pem_certificates("SSL_CERT_FILE", path)?;
            if roots.add_parsable_certificates(certificates).0 == 0 {
                return Err(error("SSL_CERT_FILE", path, "no usable root certificate".into()));
            }
        }
    }
    if let Some(path) = &trust.extra {
        for certificate in read_pem_certificates("EXTRA_CA_CERTS", path)? {
            roots.add(certificate).map_err(|problem| {
                error("EXTRA_CA_CERTS", path, format!("not a usable CA certificate: {problem}"))
            })?;
        }
    }
    Ok(roots)
}

/// Every certificate of a PEM file: at least one, and no malformed block.
fn read_pem_certificates(
    variable: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let problem = |problem: String| TrustError { variable, path: path.to_owned(), problem };
    let pem = std::fs::read(path).map_err(|error| problem(format!("cannot read it: {error}")))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| problem(format!("not a PEM file: {error}")))?;
    if certificates.is_empty() {
        return Err(problem("holds no PEM certificate".into()));
    }
    Ok(certificates)
}

/// The one HTTPS client's connector; clones share its trust store and
/// rustls configuration (each user keeps its own connection pool).
#[derive(Clone, Debug)]
pub struct Https {
    connector: Connector,
}

impl Https {
    pub fn new(trust: &TrustConfig) -> Result<Self, TrustError> {
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("aws-lc-rs supports rustls' default protocol versions")
        .with_root_certificates(root_store(trust)?)
        .with_no_client_auth();
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        // Requests are one small write: do not hold it back (Nagle).
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        Ok(Self { connector })
    }

    pub fn connector(&self) -> Connector {
        self.connector.clone()
    }
}

mod sdk {
    //! The AWS SDK's HTTP client interface over the shared connector, hyper's
    //! errors classified as the SDK's own hyper client does, so that its
    //! retries behave the same.

    use std::error::Error;

    use aws_smithy_runtime_api::box_error::BoxError;
    use aws_smithy_runtime_api::client::http::{
        HttpConnector, HttpConnectorFuture, SharedHttpClient, SharedHttpConnector, http_client_fn,
    };
    use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::retry::ErrorKind;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    use super::{Connector, Https};

    #[derive(Debug, Clone)]
    struct SdkConnector {
        client: Client<Connector, SdkBody>,
    }

    impl HttpConnector for SdkConnector {
        fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
            let client = self.client.clone();
            HttpConnectorFuture::new(async move {
                let request = request
                    .try_into_http1x()
                    .map_err(|error| ConnectorError::user(error.into()))?;
                let response = client.request(request).await.map_err(classify)?;
                HttpResponse::try_from(response.map(SdkBody::from_body_1_x))
                    .map_err(|error| ConnectorError::other(error.into(), None))
            })
        }
    }

    fn classify(error: hyper_util::client::legacy::Error) -> ConnectorError {
        let kind = kind_of(&error);
        kind(error.into())
    }

    /// Which kind of connector error `error` is.
    fn kind_of(error: &hyper_util::client::legacy::Error) -> fn(BoxError) -> ConnectorError {
        let io = sources(error).find_map(|error| error.downcast_ref::<std::io::Error>());
        if io.is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut) {
            return ConnectorError::timeout;
        }
        if error.is_connect() || io.is_some() {
            return ConnectorError::io;
        }
        match sources(error).find_map(|error| error.downcast_ref::<hyper::Error>()) {
            Some(hyper) if hyper.is_timeout() => ConnectorError::timeout,
            Some(hyper) if hyper.is_user() => ConnectorError::user,
            Some(hyper) if hyper.is_closed() || hyper.is_canceled() => ConnectorError::io,
            // The connection ended before the whole response: worth another try.
            Some(hyper) if hyper.is_incomplete_message() => {
                |error| ConnectorError::other(error, Some(ErrorKind::TransientError))
            }
            _ => |error| ConnectorError::other(error, None),
        }
    }

    /// `error` and each error below it.
    fn sources<'a>(
        error: &'a (dyn Error + 'static),
    ) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
        std::iter::successors(Some(error), |&error| error.source())
    }

    impl Https {
        /// The SDK's HTTP client: every connection it opens goes through the
        /// shared connector (and so the one trust store).
        pub fn sdk_http_client(&self) -> SharedHttpClient {
            let connector = SharedHttpConnector::new(SdkConnector {
                client: Client::builder(TokioExecutor::new()).build(self.connector()),
            });
            http_client_fn(move |_settings, _components| connector.clone())
        }
    }
}
