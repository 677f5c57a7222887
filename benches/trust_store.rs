//! What building the HTTPS client's trust store costs at init
//! (`plant_store::https`): from the roots compiled into the binary (the
//! default), against loading a PEM bundle as `SSL_CERT_FILE` names one (the
//! system's: SSL_CERT_FILE if set, else Debian's, else Amazon Linux's).
//! Each builds the whole client as `main` does. Prints medians of 200 and
//! writes them to target/bench-results/trust_store.txt.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use plant_store::config::TrustConfig;
use plant_store::https::Https;

const ROUNDS: usize = 200;

fn median_of(trust: &TrustConfig) -> Duration {
    let mut samples: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            let https = Https::new(trust).expect("a usable trust store");
            let elapsed = started.elapsed();
            drop(https);
            elapsed
        })
        .collect();
    samples.sort();
    samples[ROUNDS / 2]
}

fn main() {
    let bundle = std::env::var_os("SSL_CERT_FILE")
        .map(PathBuf::from)
        .or_else(|| {
            ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"]
                .into_iter()
                .map(PathBuf::from)
                .find(|path| path.is_file())
        })
        .expect("a system bundle of root certificates");
    let certificates =
        std::fs::read_to_string(&bundle).unwrap().matches("-----BEGIN CERTIFICATE-----").count();
    let compiled_in = median_of(&TrustConfig::default());
    let loaded = median_of(&TrustConfig { bundle: Some(bundle.clone()), extra: None });
    let ms = |duration: Duration| duration.as_secs_f64() * 1e3;
    let report = format!(
        "trust_store ({ROUNDS} rounds, medians; the HTTPS client built as main builds it)\n\
         compiled-in roots ({} Mozilla roots, webpki-roots): {:.3} ms\n\
         system bundle {} ({certificates} certificates): {:.3} ms ({:.1}x)\n",
        webpki_roots::TLS_SERVER_ROOTS.len(),
        ms(compiled_in),
        bundle.display(),
        ms(loaded),
        ms(loaded) / ms(compiled_in),
    );
    print!("{report}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("trust_store.txt"), report).unwrap();
}
