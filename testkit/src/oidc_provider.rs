//! A certified OpenID Provider on 127.0.0.1 (panva's oidc-provider), and the
//! tokens its real flows gave (`local-support/oidc-provider/provider.mjs`).

use std::process::Command;
use std::time::{Duration, Instant};

use plant_store_local_support::process::{GRACE, Started, free_port, start};
use plant_store_local_support::tools::ensure_oidc_provider;
use plant_store_local_support::tools_dir;
use serde_json::Value;

/// The one client of the provider: confidential, with both grants.
pub const CLIENT_ID: &str = "plants-app";

/// The provider, stopped on drop, and its tokens.
pub struct OidcProvider {
    pub issuer: String,
    /// The client's access token of the client credentials grant.
    pub machine: String,
    /// alice's access token and ID token, of the authorization-code flow.
    pub access: String,
    pub id: String,
    process: Started,
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        self.process.stop();
    }
}

impl OidcProvider {
    /// A provider whose access tokens are for the API `api` (their `aud`).
    pub fn start(api: &str) -> Self {
        let (script, port) = (ensure_oidc_provider().unwrap(), free_port());
        let output = tools_dir().join(format!("oidc-provider-{port}.log"));
        let mut command = Command::new("node");
        command.arg(script).arg(port.to_string()).arg(api);
        let process = start("oidc-provider", command, GRACE, Some(&output)).unwrap();
        let started = Instant::now();
        let tokens: Value = loop {
            let printed = std::fs::read_to_string(&output).unwrap_or_default();
            if let Some(line) = printed.lines().find(|line| line.starts_with('{')) {
                break serde_json::from_str(line).unwrap();
            }
            assert!(started.elapsed() < Duration::from_secs(30), "no tokens:\n{printed}");
            std::thread::sleep(Duration::from_millis(100));
        };
        let token = |name: &str| tokens[name].as_str().unwrap().to_owned();
        let issuer = format!("http://127.0.0.1:{port}");
        Self {
            issuer,
            machine: token("machine"),
            access: token("access"),
            id: token("id"),
            process,
        }
    }
}
