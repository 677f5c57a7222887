//! The function here: its environment, as in AWS, and when it answers.

use std::process::Command;
use std::time::Duration;

use crate::Result;
use crate::keys::{AUDIENCE, ISSUER, Issuer};
use crate::process::{Started, wait_for, wait_for_port};

/// Environment variables, a later setting replacing an earlier one.
#[derive(Clone, Default)]
pub struct Env(Vec<(String, String)>);

impl Env {
    /// What the AWS SDK needs to reach the DynamoDB at `url`: the endpoint,
    /// a region and dummy credentials (DynamoDB Local accepts any).
    pub fn dynamodb(url: &str) -> Self {
        let mut env = Self::default();
        env.set("AWS_ENDPOINT_URL_DYNAMODB", url)
            .set("AWS_REGION", "us-east-1")
            .set("AWS_ACCESS_KEY_ID", "local")
            .set("AWS_SECRET_ACCESS_KEY", "local-secret-access-key")
            .set("AWS_EC2_METADATA_DISABLED", "true");
        env
    }

    /// The function on `table` of the DynamoDB at `dynamodb_url`, trusting
    /// `issuer`'s keys, given inline.
    pub fn function(dynamodb_url: &str, table: &str, issuer: &Issuer) -> Self {
        let mut env = Self::dynamodb(dynamodb_url);
        env.set("PLANTS_TABLE", table)
            .set("AUTH_ISSUER", ISSUER)
            .set("AUTH_AUDIENCE", AUDIENCE)
            .set("AUTH_JWKS", &issuer.jwks());
        env
    }

    pub fn set(&mut self, name: &str, value: &str) -> &mut Self {
        self.remove(name);
        self.0.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn remove(&mut self, name: &str) -> &mut Self {
        self.0.retain(|(existing, _)| existing != name);
        self
    }

    /// A copy with `name` set to `value`.
    pub fn with(&self, name: &str, value: &str) -> Self {
        let mut env = self.clone();
        env.set(name, value);
        env
    }

    pub fn get(&self, name: &str) -> &str {
        let found = self.0.iter().find(|(existing, _)| existing == name);
        found.map_or("", |(_, value)| value)
    }

    pub fn vars(&self) -> &[(String, String)] {
        &self.0
    }

    /// `program` with this environment (and no AWS profile or session of
    /// the user's).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .envs(self.0.iter().map(|(name, value)| (name, value)));
        command
    }
}

/// Waits until the function answers GET /plants on 127.0.0.1:`port` with
/// its 401. Each probe waits as long as it takes: `cargo lambda watch`
/// holds it until the function starts, and one given up on would show an
/// error line on the first screen.
pub fn wait_until_answering(port: u16, process: &Started, timeout: Duration) -> Result {
    wait_for_port(port, process, timeout)?;
    wait_for(&format!("http://127.0.0.1:{port}/plants"), Some(401), process, timeout)
}
