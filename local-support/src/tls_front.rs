//! haproxy, from Debian's packages: the TLS front of an endpoint that AWS
//! serves over HTTPS (DynamoDB, an issuer's JWKS), and the TCP forward that
//! lets the containers reach DynamoDB Local. The front's certificate, for
//! 127.0.0.1, comes from a CA made here (rcgen); a trust setting names the
//! CA's file, or the bundle of the system's roots and that CA.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};

use crate::process::{GRACE, Started, free_port, start};
use crate::tools::ensure_haproxy;
use crate::{Result, log};

/// haproxy terminating TLS on 127.0.0.1, stopped on drop.
pub struct TlsFront {
    /// `127.0.0.1:PORT`, to put in an `https://` URL.
    pub address: String,
    /// The local CA's certificate (PEM).
    pub ca_file: PathBuf,
    /// The system's roots and the local CA in one file, as a Lambda image
    /// has one bundle.
    pub bundle_file: PathBuf,
    haproxy: Started,
}

impl TlsFront {
    /// A front on a free port for 127.0.0.1:`upstream`, its files in `dir`
    /// (the CA and certificate are made once per folder: fronts that share
    /// it share a CA).
    pub fn start(upstream: u16, dir: &Path) -> Result<Self> {
        let (ca_file, server_file) = (dir.join("ca.pem"), dir.join("server.pem"));
        let bundle_file = dir.join("ca-bundle.pem");
        if !server_file.exists() {
            std::fs::create_dir_all(dir)?;
            let (ca, server) = certificates()?;
            let system = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt")?;
            std::fs::write(&bundle_file, format!("{system}{ca}"))?;
            std::fs::write(&ca_file, ca)?;
            std::fs::write(&server_file, server)?;
        }
        let port = free_port();
        log!("starting haproxy (TLS) on 127.0.0.1:{port} in front of 127.0.0.1:{upstream}");
        let address = format!("127.0.0.1:{port}");
        let tls = format!("ssl crt {}", server_file.display());
        let haproxy = start_haproxy(&address, &tls, upstream, dir)?;
        Ok(Self {
            address,
            ca_file,
            bundle_file,
            haproxy,
        })
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.haproxy.stop();
    }
}

/// A CA's certificate, and a server certificate for 127.0.0.1 it signed
/// followed by the server's key (haproxy's `crt` file), in PEM.
fn certificates() -> Result<(String, String)> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "plant-store local CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let server_key = KeyPair::generate()?;
    let mut server = CertificateParams::new(vec!["localhost".to_owned()])?;
    server
        .subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    let server = server.signed_by(&server_key, &ca)?;
    Ok((
        ca.pem(),
        format!("{}{}", server.pem(), server_key.serialize_pem()),
    ))
}

/// haproxy in TCP mode from `address` (`IP:PORT`, with `options` such as
/// `ssl crt FILE`) to 127.0.0.1:`upstream`, its files in `dir`; returns once
/// it accepts connections.
pub fn start_haproxy(address: &str, options: &str, upstream: u16, dir: &Path) -> Result<Started> {
    ensure_haproxy()?;
    std::fs::create_dir_all(dir)?;
    // One configuration and log per forward: several may share `dir`.
    let name = format!("haproxy-{address}-to-{upstream}");
    let config = dir.join(format!("{name}.cfg"));
    std::fs::write(
        &config,
        format!(
            "global\n  maxconn 512\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n\
             frontend front\n  bind {address} {options}\n  default_backend upstream\n\
             backend upstream\n  server local 127.0.0.1:{upstream}\n"
        ),
    )?;
    let mut command = Command::new("haproxy");
    command.arg("-f").arg(&config).arg("-db");
    let log = dir.join(format!("{name}.log"));
    let haproxy = start("haproxy", &mut command, GRACE, Some(&log))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(address).is_err() {
        if !haproxy.is_running() || Instant::now() > deadline {
            return Err(format!("haproxy did not listen on {address}").into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(haproxy)
}
