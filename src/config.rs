//! The function's configuration, read once at start-up from the environment.

use std::env;
use std::fmt;

/// Every setting the function reads. The DynamoDB endpoint, region and
/// credentials are not here: the AWS SDK reads them itself, from its standard
/// configuration (for DynamoDB Local, `AWS_ENDPOINT_URL_DYNAMODB`).
#[derive(Debug, Clone)]
pub struct Config {
    /// `PLANTS_TABLE`: the DynamoDB table that holds the plants.
    pub table: String,
    /// `AUTH_ISSUER`: the required `iss` of every token.
    pub issuer: String,
    /// `AUTH_AUDIENCE`: the required `aud`, when set and not empty.
    pub audience: Option<String>,
    /// `AUTH_JWKS`: the verification keys, as the JSON of a JWKS.
    pub jwks: String,
}

#[derive(Debug)]
pub struct ConfigError(&'static str);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the environment variable {} must be set and not empty",
            self.0
        )
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Ok(Self {
            table: required("PLANTS_TABLE")?,
            issuer: required("AUTH_ISSUER")?,
            audience: optional("AUTH_AUDIENCE"),
            jwks: required("AUTH_JWKS")?,
        })
    }
}

fn optional(name: &'static str) -> Option<String> {
    env::var(name).ok().filter(|value| !value.trim().is_empty())
}

fn required(name: &'static str) -> Result<String, ConfigError> {
    optional(name).ok_or(ConfigError(name))
}
