//! In-process fronts: TLS (a CA made here) before a plain port, as AWS
//! serves, and a TCP forward for `sam local`'s containers.

use std::net::{TcpListener as StdListener, TcpStream as StdStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::{Result, log};

/// Where the system keeps its root certificates as one PEM bundle: Debian
/// and Ubuntu, macOS, Fedora and Amazon Linux.
const SYSTEM_BUNDLES: [&str; 3] =
    ["/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/cert.pem", "/etc/pki/tls/certs/ca-bundle.crt"];

/// TLS terminated on 127.0.0.1, stopped on drop.
pub struct TlsFront {
    /// `127.0.0.1:PORT`, to put in an `https://` URL.
    pub address: String,
    /// The local CA's certificate (PEM).
    pub ca_file: PathBuf,
    /// The system's roots and the local CA in one file, as a Lambda image
    /// has one bundle.
    pub bundle_file: PathBuf,
    task: JoinHandle<()>,
}

impl TlsFront {
    /// A front on a free port for 127.0.0.1:`upstream`, on the current tokio
    /// runtime, its files in `dir` (the CA and certificate are made once per
    /// folder: fronts that share it share a CA).
    pub async fn start(upstream: u16, dir: &Path) -> Result<Self> {
        let (ca_file, server_file) = (dir.join("ca.pem"), dir.join("server.pem"));
        let bundle_file = dir.join("ca-bundle.pem");
        if !server_file.exists() {
            std::fs::create_dir_all(dir)?;
            let (ca, server) = certificates()?;
            let system = SYSTEM_BUNDLES.iter().find_map(|path| std::fs::read_to_string(path).ok());
            let system = system.ok_or("found no bundle of the system's root certificates")?;
            std::fs::write(&bundle_file, format!("{system}{ca}"))?;
            std::fs::write(&ca_file, ca)?;
            std::fs::write(&server_file, server)?;
        }
        let pem = std::fs::read(&server_file)?;
        let chain = CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(&pem)?;
        let config = ServerConfig::builder().with_no_client_auth().with_single_cert(chain, key)?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        log!("TLS on {address} in front of 127.0.0.1:{upstream}");
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = client.set_nodelay(true);
                    let Ok(mut tls) = acceptor.accept(client).await else { return };
                    let Ok(mut plain) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                        return;
                    };
                    let _ = plain.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        Ok(Self { address, ca_file, bundle_file, task })
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A CA's certificate, and a server certificate for 127.0.0.1 it signed
/// followed by the server's key, in PEM.
fn certificates() -> Result<(String, String)> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "plant-store local CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let server_key = KeyPair::generate()?;
    let mut server = CertificateParams::new(vec!["localhost".to_owned()])?;
    server.subject_alt_names.push(SanType::IpAddress([127, 0, 0, 1].into()));
    let server = server.signed_by(&server_key, &ca)?;
    Ok((ca.pem(), format!("{}{}", server.pem(), server_key.serialize_pem())))
}

/// Forwards every TCP connection to `address` (`IP:PORT`) on to
/// 127.0.0.1:`upstream`, for as long as this process runs.
pub fn forward(address: &str, upstream: u16) -> Result {
    let listener = StdListener::bind(address)?;
    log!("forwarding {address} to 127.0.0.1:{upstream}");
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(plain) = StdStream::connect(("127.0.0.1", upstream)) else { continue };
            let pairs = [(client.try_clone(), plain.try_clone()), (Ok(plain), Ok(client))];
            let pairs = pairs.into_iter().filter_map(|(from, to)| Some((from.ok()?, to.ok()?)));
            for (mut from, mut to) in pairs {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    Ok(())
}
