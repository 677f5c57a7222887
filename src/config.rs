//! The function's configuration, read once at start-up from the environment.

use std::env;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use tracing_subscriber::filter::LevelFilter;

/// What the function records, as Lambda sets it up: its log, by Lambda's
/// advanced logging controls (`AWS_LAMBDA_LOG_FORMAT`, `JSON`: one JSON
/// object per line, else text; the level from `AWS_LAMBDA_LOG_LEVEL`, else
/// `RUST_LOG`, else INFO), and where X-Ray subsegments go. Read apart from
/// [`Config`], and first, so that a configuration error is logged as the
/// rest is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub level: LevelFilter,
    pub json: bool,
    /// `AWS_XRAY_DAEMON_ADDRESS`, which Lambda sets: where X-Ray
    /// subsegments go (`crate::xray`). Unset, nothing is traced.
    pub xray_daemon: Option<String>,
}

impl TelemetryConfig {
    pub fn from_env() -> Self {
        Self::from_lookup(|name| env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        Self {
            level: lookup("AWS_LAMBDA_LOG_LEVEL")
                .or_else(|| lookup("RUST_LOG"))
                .and_then(|level| level.parse().ok())
                .unwrap_or(LevelFilter::INFO),
            json: lookup("AWS_LAMBDA_LOG_FORMAT")
                .is_some_and(|format| format.eq_ignore_ascii_case("json")),
            xray_daemon: lookup("AWS_XRAY_DAEMON_ADDRESS")
                .filter(|address| !address.trim().is_empty()),
        }
    }
}

/// Every setting the function reads. The DynamoDB region and credentials
/// are not here: the AWS SDK reads them itself (`AWS_REGION`, and the
/// function's role's `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`).
#[derive(Debug, Clone)]
pub struct Config {
    /// `PLANTS_TABLE`: the DynamoDB table that holds the plants.
    pub table: String,
    /// `AUTH_ISSUER`, `AUTH_AUDIENCE` or `AUTH_COGNITO_CLIENT_ID` (one of
    /// them at least), `AUTH_TOKEN_TYPE` (optional): what every token must say.
    pub rules: TokenRules,
    /// Where the verification keys come from.
    pub keys: KeyConfig,
    /// `MAX_PLANTS_PER_OWNER`: how many plants one owner may store
    /// ([`DEFAULT_MAX_PLANTS_PER_OWNER`] when unset); 0 turns the bound off
    /// (a create is then one write unit, and one token can fill the table).
    pub max_plants_per_owner: u32,
    /// Which root certificates the HTTPS client trusts.
    pub trust: TrustConfig,
    /// `AWS_ENDPOINT_URL_DYNAMODB`, else `AWS_ENDPOINT_URL`: where the
    /// store's DynamoDB client goes (DynamoDB Local). Unset or empty (as
    /// template.yaml declares it in AWS, so that `sam local` may set it):
    /// DynamoDB's regional endpoint.
    pub dynamodb_endpoint: Option<String>,
}

/// The root certificates the HTTPS client trusts (`crate::https`): those
/// compiled into the binary, unless `SSL_CERT_FILE` names a PEM bundle to
/// trust instead; `EXTRA_CA_CERTS` names PEM certificates to trust besides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustConfig {
    pub bundle: Option<PathBuf>,
    pub extra: Option<PathBuf>,
}

/// Enough for any person's collection, and a bound on what one token (or a
/// stolen one) can make the table hold: 10,000 plants of at most ~1.4 KB.
pub const DEFAULT_MAX_PLANTS_PER_OWNER: u32 = 10_000;
/// The most `MAX_PLANTS_PER_OWNER` may be.
const MAX_PLANTS_PER_OWNER_LIMIT: u32 = 1_000_000;

/// What a token must say, besides a valid signature and `exp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRules {
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud`. Only Cognito mode may leave it out, since Cognito
    /// access tokens carry no `aud`: the app client ids stand in for it.
    pub audience: Option<String>,
    /// `AUTH_COGNITO_CLIENT_ID`, comma-separated: Amazon Cognito mode when
    /// not empty, where only access tokens (`token_use` "access") issued to
    /// one of these app clients (`client_id`) are accepted; Cognito access
    /// tokens have no `aud`.
    pub cognito_client_ids: Vec<String>,
    /// `AUTH_SCOPE_READ` and `AUTH_SCOPE_WRITE`, set together: the OAuth 2.0
    /// scope each kind of route requires. Unset, no scope is required.
    pub scopes: Option<ScopeRules>,
    /// `AUTH_TOKEN_TYPE`: the JOSE `typ` every token must have (RFC 9068's
    /// `at+jwt`, compared as RFC 8725 section 3.11 says: case-insensitive,
    /// `application/` optional). Unset, `typ` is not read.
    pub token_type: Option<String>,
}

/// The scope that reading plants requires, and the one creating them does.
/// Neither implies the other (docs/contract.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRules {
    pub read: String,
    pub write: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyConfig {
    /// `AUTH_JWKS`: the JSON of a JWKS, for local use.
    Inline(String),
    /// `AUTH_JWKS_URL`, or `{AUTH_ISSUER}/.well-known/jwks.json` when neither
    /// it nor `AUTH_JWKS` is set; fetched on the schedule of `refresh`.
    Url { url: String, refresh: KeyRefresh },
}

/// When the remote key set is fetched again. The environment does not set
/// these: production runs with [`KeyRefresh::default`]; tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRefresh {
    /// The least time between two fetches caused by unknown `kid`s, so that a
    /// flood of made-up `kid`s cannot become a flood of fetches.
    pub refetch_interval: Duration,
    /// The same while no key set has ever been fetched (the issuer was down
    /// at start-up): sooner, but still not on every request.
    pub retry_without_keys: Duration,
    /// How long a fetched key set is trusted before a request fetches it
    /// again, so that keys the issuer removed stop verifying.
    pub max_age: Duration,
    /// How long the last good key set keeps serving while fetches fail;
    /// past it, requests answer 503 (docs/contract.md says why a day).
    pub keep_last_good: Duration,
}

impl Default for KeyRefresh {
    fn default() -> Self {
        Self {
            refetch_interval: Duration::from_secs(10),
            retry_without_keys: Duration::from_secs(1),
            max_age: Duration::from_secs(3600),
            keep_last_good: Duration::from_secs(24 * 3600),
        }
    }
}

/// A setting the function cannot start with: the variable, and what it must be.
#[derive(Debug)]
pub struct ConfigError {
    variable: &'static str,
    rule: &'static str,
}

impl ConfigError {
    fn missing(variable: &'static str) -> Self {
        Self {
            variable,
            rule: "must be set and not empty",
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the environment variable {} {}",
            self.variable, self.rule
        )
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| env::var(name).ok())
    }

    /// Reads the settings through `lookup` (the environment, or a test's map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let optional = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let required = |name: &'static str| optional(name).ok_or(ConfigError::missing(name));
        let issuer = required("AUTH_ISSUER")?;
        let remote = |url| KeyConfig::Url {
            url,
            refresh: KeyRefresh::default(),
        };
        let keys = match (optional("AUTH_JWKS"), optional("AUTH_JWKS_URL")) {
            (Some(jwks), _) => KeyConfig::Inline(jwks),
            (None, Some(url)) => remote(url),
            (None, None) => remote(format!(
                "{}/.well-known/jwks.json",
                issuer.trim_end_matches('/')
            )),
        };
        let max_plants_per_owner = match optional("MAX_PLANTS_PER_OWNER") {
            None => DEFAULT_MAX_PLANTS_PER_OWNER,
            Some(value) => value
                .trim()
                .parse()
                .ok()
                .filter(|max| *max <= MAX_PLANTS_PER_OWNER_LIMIT)
                .ok_or(ConfigError {
                    variable: "MAX_PLANTS_PER_OWNER",
                    rule: "must be a whole number from 0 (no bound) to 1000000",
                })?,
        };
        let audience = optional("AUTH_AUDIENCE");
        let cognito_client_ids: Vec<String> = optional("AUTH_COGNITO_CLIENT_ID")
            .map(|ids| {
                ids.split(',')
                    .map(str::trim)
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        // Without an audience, a token the same issuer made for any other
        // application would be accepted (RFC 8725 section 3.9).
        if audience.is_none() && cognito_client_ids.is_empty() {
            return Err(ConfigError {
                variable: "AUTH_AUDIENCE",
                rule: "must be set and not empty (the audience of this API's tokens), \
                       unless AUTH_COGNITO_CLIENT_ID names the Cognito app clients",
            });
        }
        Ok(Self {
            max_plants_per_owner,
            table: required("PLANTS_TABLE")?,
            rules: TokenRules {
                issuer,
                audience,
                cognito_client_ids,
                scopes: scope_rules(&optional)?,
                token_type: optional("AUTH_TOKEN_TYPE").map(|typ| typ.trim().to_owned()),
            },
            keys,
            trust: TrustConfig {
                bundle: optional("SSL_CERT_FILE").map(PathBuf::from),
                extra: optional("EXTRA_CA_CERTS").map(PathBuf::from),
            },
            dynamodb_endpoint: optional("AWS_ENDPOINT_URL_DYNAMODB")
                .or_else(|| optional("AWS_ENDPOINT_URL")),
        })
    }
}

/// Both scope names, or neither; each one RFC 6749 scope-token (it goes into
/// the `WWW-Authenticate` header as it is).
fn scope_rules(
    optional: &impl Fn(&str) -> Option<String>,
) -> Result<Option<ScopeRules>, ConfigError> {
    const READ: &str = "AUTH_SCOPE_READ";
    const WRITE: &str = "AUTH_SCOPE_WRITE";
    let (read, write) = match (optional(READ), optional(WRITE)) {
        (None, None) => return Ok(None),
        (Some(read), Some(write)) => (read, write),
        (None, Some(_)) => return Err(ConfigError::missing(READ)),
        (Some(_), None) => return Err(ConfigError::missing(WRITE)),
    };
    for (variable, scope) in [(READ, &read), (WRITE, &write)] {
        if !is_scope_token(scope) {
            return Err(ConfigError {
                variable,
                rule: "must be one OAuth 2.0 scope: printable ASCII without spaces, quotes or backslashes",
            });
        }
    }
    Ok(Some(ScopeRules { read, write }))
}

/// `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )` (RFC 6749, section 3.3).
pub fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|byte| matches!(byte, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| map.get(name).cloned())
    }

    fn remote(url: &str) -> KeyConfig {
        KeyConfig::Url {
            url: url.into(),
            refresh: KeyRefresh::default(),
        }
    }

    #[test]
    fn the_jwks_url_defaults_to_the_issuers_well_known_path() {
        let base = [
            ("PLANTS_TABLE", "plants"),
            ("AUTH_ISSUER", "https://tenant.auth0.com/"),
            ("AUTH_AUDIENCE", "plants"),
        ];
        assert_eq!(
            config(&base).unwrap().keys,
            remote("https://tenant.auth0.com/.well-known/jwks.json")
        );
        let with_url = [
            base[0],
            base[1],
            base[2],
            ("AUTH_JWKS_URL", "https://keys.example/jwks"),
        ];
        assert_eq!(
            config(&with_url).unwrap().keys,
            remote("https://keys.example/jwks")
        );
        let inline = [
            base[0],
            base[1],
            base[2],
            ("AUTH_JWKS", "{\"keys\": []}"),
            ("AUTH_JWKS_URL", "x"),
        ];
        assert_eq!(
            config(&inline).unwrap().keys,
            KeyConfig::Inline("{\"keys\": []}".into())
        );
    }

    #[test]
    fn empty_values_count_as_unset() {
        let pairs = [
            ("PLANTS_TABLE", "plants"),
            ("AUTH_ISSUER", "https://issuer"),
            ("AUTH_AUDIENCE", "plants"),
            ("AUTH_COGNITO_CLIENT_ID", " "),
            ("AUTH_TOKEN_TYPE", ""),
        ];
        let config = config(&pairs).unwrap();
        assert_eq!(config.rules.cognito_client_ids, Vec::<String>::new());
        assert!(self::config(&[("AUTH_ISSUER", "x"), ("AUTH_AUDIENCE", "a")]).is_err());
        assert!(self::config(&[("PLANTS_TABLE", "x"), ("AUTH_AUDIENCE", "a")]).is_err());
        assert_eq!(config.rules.scopes, None);
        assert_eq!(config.rules.token_type, None);
    }

    #[test]
    fn an_empty_endpoint_variable_means_dynamodbs_regional_endpoint() {
        let base = [
            ("PLANTS_TABLE", "plants"),
            ("AUTH_ISSUER", "https://issuer"),
            ("AUTH_AUDIENCE", "plants"),
        ];
        let with = |extra: &[(&'static str, &'static str)]| {
            config(&[base.as_slice(), extra].concat())
                .unwrap()
                .dynamodb_endpoint
        };
        assert_eq!(with(&[("AWS_ENDPOINT_URL_DYNAMODB", "")]), None);
        let local = "http://172.17.0.1:8000";
        assert_eq!(
            with(&[("AWS_ENDPOINT_URL_DYNAMODB", local)]).as_deref(),
            Some(local)
        );
        assert_eq!(
            with(&[
                ("AWS_ENDPOINT_URL_DYNAMODB", " "),
                ("AWS_ENDPOINT_URL", local)
            ])
            .as_deref(),
            Some(local)
        );
    }

    #[test]
    fn the_log_follows_lambdas_log_settings() {
        let log = |pairs: &[(&str, &str)]| {
            TelemetryConfig::from_lookup(|name| {
                pairs
                    .iter()
                    .find(|(present, _)| *present == name)
                    .map(|(_, value)| value.to_string())
            })
        };
        assert_eq!(
            log(&[]),
            TelemetryConfig {
                level: LevelFilter::INFO,
                json: false,
                xray_daemon: None,
            }
        );
        let lambda = log(&[
            ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
            ("AWS_LAMBDA_LOG_LEVEL", "DEBUG"),
            ("RUST_LOG", "trace"),
        ]);
        assert_eq!((lambda.level, lambda.json), (LevelFilter::DEBUG, true));
        assert_eq!(log(&[("RUST_LOG", "warn")]).level, LevelFilter::WARN);
        let xray = log(&[("AWS_XRAY_DAEMON_ADDRESS", "169.254.79.129:2000")]);
        assert_eq!(xray.xray_daemon.as_deref(), Some("169.254.79.129:2000"));
    }

    #[test]
    fn an_audience_is_required_outside_cognito_mode() {
        let base = [
            ("PLANTS_TABLE", "plants"),
            ("AUTH_ISSUER", "https://issuer"),
        ];
        for refused in [&base[..], &[base[0], base[1], ("AUTH_AUDIENCE", " ")]] {
            let error = config(refused).unwrap_err().to_string();
            assert!(error.contains("AUTH_AUDIENCE"), "{error}");
            assert!(error.contains("AUTH_COGNITO_CLIENT_ID"), "{error}");
        }
        let cognito = config(&[base[0], base[1], ("AUTH_COGNITO_CLIENT_ID", "app")]).unwrap();
        assert_eq!(cognito.rules.audience, None);
        let audience = config(&[base[0], base[1], ("AUTH_AUDIENCE", "api://plants")]).unwrap();
        assert_eq!(audience.rules.audience.as_deref(), Some("api://plants"));
    }

    #[test]
    fn the_plant_bound_has_a_default_and_a_range() {
        let base = [
            ("PLANTS_TABLE", "plants"),
            ("AUTH_ISSUER", "https://issuer"),
            ("AUTH_AUDIENCE", "plants"),
        ];
        let with = |value: &'static str| {
            config(&[base[0], base[1], base[2], ("MAX_PLANTS_PER_OWNER", value)])
        };
        assert_eq!(
            config(&base).unwrap().max_plants_per_owner,
            DEFAULT_MAX_PLANTS_PER_OWNER
        );
        assert_eq!(with("25").unwrap().max_plants_per_owner, 25);
        assert_eq!(with("0").unwrap().max_plants_per_owner, 0, "no bound");
        for refused in ["-1", "1000001", "ten", "2.5"] {
            let error = with(refused).unwrap_err();
            assert!(
                error.to_string().contains("MAX_PLANTS_PER_OWNER"),
                "{refused}"
            );
        }
    }

    #[test]
    fn cognito_client_ids_are_a_comma_separated_list() {
        let pairs = [
            ("PLANTS_TABLE", "plants"),
            ("AUTH_ISSUER", "https://issuer"),
            ("AUTH_COGNITO_CLIENT_ID", "users-client, machine-client,"),
            ("AUTH_TOKEN_TYPE", "at+jwt"),
        ];
        assert_eq!(
            config(&pairs).unwrap().rules.cognito_client_ids,
            ["users-client", "machine-client"]
        );
        assert_eq!(
            config(&pairs).unwrap().rules.token_type.as_deref(),
            Some("at+jwt")
        );
    }

    #[test]
    fn scopes_are_both_named_or_neither() {
        let base = [
            ("PLANTS_TABLE", "plants"),
            ("AUTH_ISSUER", "https://issuer"),
            ("AUTH_AUDIENCE", "plants"),
        ];
        let with =
            |extra: &[(&'static str, &'static str)]| config(&[base.as_slice(), extra].concat());
        assert_eq!(
            with(&[
                ("AUTH_SCOPE_READ", "plants/read"),
                ("AUTH_SCOPE_WRITE", "plants/write")
            ])
            .unwrap()
            .rules
            .scopes,
            Some(ScopeRules {
                read: "plants/read".into(),
                write: "plants/write".into()
            })
        );
        let error = with(&[("AUTH_SCOPE_READ", "plants/read")]).unwrap_err();
        assert!(error.to_string().contains("AUTH_SCOPE_WRITE"), "{error}");
        let error = with(&[("AUTH_SCOPE_READ", "a b"), ("AUTH_SCOPE_WRITE", "w")]).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("AUTH_SCOPE_READ must be one OAuth 2.0 scope")
        );
        assert!(with(&[("AUTH_SCOPE_READ", "r"), ("AUTH_SCOPE_WRITE", "w\\")]).is_err());
    }
}
