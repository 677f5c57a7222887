//! A TLS front on 127.0.0.1, as the issuer's HTTPS endpoint is reached: a
//! certificate for 127.0.0.1 from a CA made for this run (rcgen), served
//! with rustls, each connection's plain bytes passed on to `upstream` (the
//! key server). The CA's PEM file is what a trust setting names.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

pub struct TlsFront {
    /// `127.0.0.1:PORT`, to put in an `https://` URL.
    pub address: String,
    /// The CA's certificate (PEM), in a file of its own.
    pub ca_file: PathBuf,
    task: JoinHandle<()>,
}

impl TlsFront {
    /// Fronts `upstream` (`HOST:PORT`, plain TCP).
    pub async fn start(upstream: String) -> Self {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "plant-store test CA");
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&server_key, &ca)
            .unwrap();
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![server.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
        )
        .unwrap();
        let ca_file = std::env::temp_dir().join(format!(
            "plant-store-test-ca-{}-{}.pem",
            std::process::id(),
            next_suffix()
        ));
        std::fs::write(&ca_file, ca.pem()).unwrap();

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
                tokio::spawn(async move {
                    // A client that does not trust the CA ends the handshake.
                    let Ok(mut client) = acceptor.accept(client).await else {
                        return;
                    };
                    let mut server = TcpStream::connect(&upstream).await.unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        });
        Self {
            address,
            ca_file,
            task,
        }
    }
}

/// Tells apart the fronts of one test binary.
fn next_suffix() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.ca_file);
    }
}
