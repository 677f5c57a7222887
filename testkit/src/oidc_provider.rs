//! A certified OpenID Provider on 127.0.0.1 (panva's oidc-provider, from
//! npm), set up as its operator would (`local-support/oidc-provider`), and
//! a client that gets its tokens through its real flows.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use plant_store_local_support::process::{GRACE, Started, free_port, start, wait_for_port};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::Value;

/// The one client of the provider: confidential, with both grants.
pub const CLIENT_ID: &str = "plants-app";
const CLIENT_SECRET: &str = "plants-app-secret";

/// The provider, stopped on drop.
pub struct OidcProvider {
    pub issuer: String,
    http: reqwest::Client,
    process: Started,
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        self.process.stop();
    }
}

/// What a sign-in gets from the token endpoint.
pub struct Tokens {
    pub access_token: String,
    pub id_token: String,
}

impl OidcProvider {
    /// A provider whose access tokens are for the API `api` (their `aud`).
    pub fn start(api: &str) -> Self {
        let script = plant_store_local_support::tools::ensure_oidc_provider().unwrap();
        let port = free_port();
        let mut command = Command::new("node");
        command.arg(&script).arg(port.to_string()).arg(api).stdout(Stdio::null());
        let process = start("oidc-provider", command, GRACE, None).unwrap();
        wait_for_port(port, &process, Duration::from_secs(30)).unwrap();
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
        Self { issuer: format!("http://127.0.0.1:{port}"), http: http.build().unwrap(), process }
    }

    /// An access token of the client credentials grant (its `sub` is the client).
    pub async fn client_credentials(&self) -> String {
        let form = "grant_type=client_credentials&scope=plants%2Fread%20plants%2Fwrite";
        self.token(form).await["access_token"].as_str().unwrap().to_owned()
    }

    /// `user` signs in through the authorization-code flow with PKCE, as a
    /// browser does (any password: the provider's development log-in), and
    /// consents; the client redeems the code.
    pub async fn sign_in(&self, user: &str) -> Tokens {
        let verifier = URL_SAFE_NO_PAD.encode(rand_bytes());
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, verifier.as_bytes());
        let (issuer, challenge) = (&self.issuer, URL_SAFE_NO_PAD.encode(digest));
        let callback = format!("{issuer}/callback");
        let mut url = format!(
            "{issuer}/auth?client_id={CLIENT_ID}&response_type=code&redirect_uri={callback}\
             &scope=openid%20plants%2Fread%20plants%2Fwrite&code_challenge={challenge}\
             &code_challenge_method=S256"
        );
        let (mut cookies, mut form) = (BTreeMap::new(), None::<String>);
        let code = loop {
            let request = match form.take() {
                Some(form) => self.http.post(&url).body(form).header("content-type", FORM),
                None => self.http.get(&url),
            };
            let cookie: Vec<String> = cookies.iter().map(|(n, v)| format!("{n}={v}")).collect();
            let response = request.header(COOKIE, cookie.join("; ")).send().await.unwrap();
            for set in response.headers().get_all(SET_COOKIE) {
                let pair = set.to_str().unwrap().split(';').next().unwrap();
                let (name, value) = pair.split_once('=').unwrap();
                cookies.insert(name.to_owned(), value.to_owned());
            }
            match response.headers().get(LOCATION).map(|to| to.to_str().unwrap().to_owned()) {
                Some(to) if to.starts_with(&callback) => break to,
                Some(to) if to.starts_with('/') => url = format!("{issuer}{to}"),
                Some(to) => url = to,
                // An interaction page: the log-in, then the consent.
                None => match response.text().await.unwrap().contains(r#"value="login""#) {
                    true => form = Some(format!("prompt=login&login={user}&password=any")),
                    false => form = Some("prompt=consent".to_owned()),
                },
            }
        };
        let code = code.split(['?', '&']).find_map(|part| part.strip_prefix("code=")).unwrap();
        let form = format!(
            "grant_type=authorization_code&code={code}&redirect_uri={callback}&code_verifier={verifier}"
        );
        let tokens = self.token(&form).await;
        let token = |name: &str| tokens[name].as_str().unwrap().to_owned();
        Tokens { access_token: token("access_token"), id_token: token("id_token") }
    }

    async fn token(&self, form: &str) -> Value {
        let request = self.http.post(format!("{}/token", self.issuer));
        let request =
            request.basic_auth(CLIENT_ID, Some(CLIENT_SECRET)).header("content-type", FORM);
        let response = request.body(form.to_owned()).send().await.unwrap();
        serde_json::from_str(&response.text().await.unwrap()).unwrap()
    }
}

const FORM: &str = "application/x-www-form-urlencoded";

fn rand_bytes() -> [u8; 32] {
    let mut bytes = [0; 32];
    aws_lc_rs::rand::fill(&mut bytes).unwrap();
    bytes
}
