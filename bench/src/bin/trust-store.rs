//! What loading the system's trust store costs, as the AWS SDK's HTTPS client
//! and the JWKS client each do once during init (rustls-native-certs, reading
//! the bundle that SSL_CERT_FILE or the system names). Compiled-in roots
//! (webpki-roots) would cost nothing here. Prints the median of 50 loads.

use std::time::{Duration, Instant};

fn main() {
    let mut samples: Vec<Duration> = (0..50)
        .map(|_| {
            let started = Instant::now();
            let loaded = rustls_native_certs::load_native_certs();
            assert!(
                !loaded.certs.is_empty(),
                "no certificates: {:?}",
                loaded.errors
            );
            started.elapsed()
        })
        .collect();
    samples.sort();
    let certificates = rustls_native_certs::load_native_certs().certs.len();
    println!(
        "trust_store: loading {certificates} system root certificates: {:.2} ms (median of 50)",
        samples[samples.len() / 2].as_secs_f64() * 1e3
    );
}
