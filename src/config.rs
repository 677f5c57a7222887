//! The function's configuration, read once at start-up from the environment.

use std::env;
use std::path::PathBuf;
use std::time::Duration;

use lambda_http::http::Uri;
use tracing_subscriber::filter::LevelFilter;

/// What the function records, as Lambda's logging controls set it, and
/// X-Ray's daemon: read first, so that a configuration error is logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub level: LevelFilter,
    pub json: bool,
    /// `AWS_XRAY_DAEMON_ADDRESS`, which Lambda sets; unset, nothing is traced.
    pub xray_daemon: Option<String>,
}

impl TelemetryConfig {
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

/// Whether Lambda hands the function several requests at once
/// (`AWS_LAMBDA_MAX_CONCURRENCY` above 1: Lambda Managed Instances).
pub fn serves_several_at_once() -> bool {
    let most = env::var("AWS_LAMBDA_MAX_CONCURRENCY").ok().and_then(|most| most.parse().ok());
    most.is_some_and(|most: u32| most > 1)
}

/// Every setting the function reads (docs/deploying.md lists them), but the
/// region and credentials, which the AWS SDK reads itself.
#[derive(Debug, Clone)]
pub struct Config {
    /// `PLANTS_TABLE`: the DynamoDB table that holds the plants.
    pub table: String,
    pub rules: TokenRules,
    pub keys: KeyConfig,
    /// `MAX_PLANTS_PER_OWNER`: how many plants one owner may store; 0 turns
    /// the bound off (one write unit a create; one token can fill the table).
    pub max_plants_per_owner: u32,
    pub trust: TrustConfig,
    /// `AWS_ENDPOINT_URL_DYNAMODB`, else `AWS_ENDPOINT_URL` (DynamoDB
    /// Local); unset or empty, as in AWS: DynamoDB's regional endpoint.
    pub dynamodb_endpoint: Option<String>,
    /// `CORS_ALLOWED_ORIGINS`, comma-separated: the origins whose browser
    /// pages may call the API (`route::cors`); none: CORS off.
    pub cors_allowed_origins: Vec<String>,
}

/// The roots the HTTPS client trusts: compiled in, or the PEM bundle
/// `SSL_CERT_FILE` names; and besides, the PEM file `EXTRA_CA_CERTS` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustConfig {
    pub bundle: Option<PathBuf>,
    pub extra: Option<PathBuf>,
}

/// Enough for any person's collection, and a bound on what one token (or a
/// stolen one) can make the table hold: 10,000 plants of at most ~1.4 KB.
pub const DEFAULT_MAX_PLANTS_PER_OWNER: u32 = 10_000;
/// The most `MAX_PLANTS_PER_OWNER` may be.
pub const MAX_PLANTS_PER_OWNER_LIMIT: u32 = 1_000_000;

/// What a token must say, besides a valid signature and `exp`: made only
/// by [`TokenRules::new`], so that no combination admits other tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRules {
    /// `AUTH_ISSUER`: the required `iss`.
    pub(crate) issuer: String,
    /// `AUTH_AUDIENCE`: the required `aud`, which only Cognito mode may leave
    /// out (its access tokens carry none).
    pub(crate) audience: Option<String>,
    pub(crate) access: AccessTokenRule,
    /// `AUTH_SCOPE_READ` and `AUTH_SCOPE_WRITE`, set together.
    pub(crate) scopes: Option<ScopeRules>,
}

impl TokenRules {
    /// The rules, unless they would accept a token meant for another
    /// application (no audience outside Cognito mode: RFC 8725, 3.9) or an
    /// untyped ID token (`Untyped` without scopes, which ID tokens lack).
    pub fn new(
        issuer: String,
        audience: Option<String>,
        access: AccessTokenRule,
        scopes: Option<ScopeRules>,
    ) -> Result<Self, ConfigError> {
        if access == AccessTokenRule::Untyped && scopes.is_none() {
            let rule = "may be any only with AUTH_SCOPE_READ and AUTH_SCOPE_WRITE: an untyped \
                        ID token is told apart by the scopes it does not grant";
            return Err(ConfigError::new("AUTH_TOKEN_TYPE", rule));
        }
        if audience.is_none() && !matches!(access, AccessTokenRule::Cognito(_)) {
            let rule = "must be set and not empty (the audience of this API's tokens), \
                        unless AUTH_COGNITO_CLIENT_ID names the Cognito app clients";
            return Err(ConfigError::new("AUTH_AUDIENCE", rule));
        }
        Ok(Self { issuer, audience, access, scopes })
    }
}

/// How an access token is told from the issuer's other JWTs, its ID tokens
/// among them (docs/contract.md, "Only access tokens").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessTokenRule {
    /// `AUTH_COGNITO_CLIENT_ID`, comma-separated: Amazon Cognito's
    /// `token_use` `access`, issued to one of these app clients.
    Cognito(Vec<String>),
    /// `AUTH_TOKEN_TYPE` unset or `at+jwt`: the JOSE `typ` of RFC 9068's
    /// access tokens ([`is_at_jwt`]).
    AtJwt,
    /// `AUTH_TOKEN_TYPE=any`, for issuers that do not type access tokens:
    /// only with scopes, which ID tokens do not grant.
    Untyped,
}

/// The scope reading plants requires, and the one creating them does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRules {
    pub read: String,
    pub write: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyConfig {
    /// `AUTH_JWKS`: the JSON of a JWKS, for local use.
    Inline(String),
    /// `AUTH_JWKS_URL`, or in Cognito mode `{AUTH_ISSUER}/.well-known/jwks.json`
    /// (Cognito's, with no discovery on a request's path).
    Url { url: String, refresh: KeyRefresh, loopback_http: bool },
    /// Neither: the `jwks_uri` of the issuer's OpenID Connect discovery
    /// document, whose `issuer` must be `issuer`.
    Discovery { issuer: String, refresh: KeyRefresh, loopback_http: bool },
}

/// When the remote key set is fetched again: production runs with the
/// default; tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRefresh {
    /// The least time between two fetches, so that a flood of made-up
    /// `kid`s cannot become a flood of fetches.
    pub refetch_interval: Duration,
    /// The same while no key set has ever been fetched: sooner.
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
#[derive(Debug, thiserror::Error)]
#[error("the environment variable {variable} {rule}")]
pub struct ConfigError {
    variable: &'static str,
    rule: String,
}

impl ConfigError {
    fn new(variable: &'static str, rule: impl Into<String>) -> Self {
        Self { variable, rule: rule.into() }
    }

    fn missing(variable: &'static str) -> Self {
        Self::new(variable, "must be set and not empty")
    }
}

impl Config {
    /// Reads the settings through `lookup` (the environment, or a test's map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let optional = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let required = |name: &'static str| optional(name).ok_or(ConfigError::missing(name));
        let issuer = required("AUTH_ISSUER")?;
        let list = |name| -> Vec<String> {
            let list = optional(name).unwrap_or_default();
            list.split(',').map(str::trim).filter(|item| !item.is_empty()).map(Into::into).collect()
        };
        let cognito_client_ids = list("AUTH_COGNITO_CLIENT_ID");
        let cors_allowed_origins = list("CORS_ALLOWED_ORIGINS");
        if let Some(origin) = cors_allowed_origins.iter().find(|origin| !is_origin(origin)) {
            let rule = format!(
                "must list origins as browsers send them (scheme://host[:port], lowercase, \
                 no path, no default port), never null or *: {origin:?} is none"
            );
            return Err(ConfigError::new("CORS_ALLOWED_ORIGINS", rule));
        }
        let keys = key_config(&optional, &issuer, !cognito_client_ids.is_empty())?;
        let scopes = scope_rules(&optional)?;
        let access = access_rule(optional("AUTH_TOKEN_TYPE"), cognito_client_ids)?;
        let rules = TokenRules::new(issuer, optional("AUTH_AUDIENCE"), access, scopes)?;
        Ok(Self {
            max_plants_per_owner: max_plants_per_owner(optional("MAX_PLANTS_PER_OWNER"))?,
            table: table(required("PLANTS_TABLE")?)?,
            rules,
            keys,
            trust: TrustConfig {
                bundle: optional("SSL_CERT_FILE").map(PathBuf::from),
                extra: optional("EXTRA_CA_CERTS").map(PathBuf::from),
            },
            dynamodb_endpoint: dynamodb_endpoint(&optional)?,
            cors_allowed_origins,
        })
    }
}

/// Where the issuer's keys are (`AUTH_JWKS`, `AUTH_JWKS_URL`, Cognito's,
/// or discovery), and `AUTH_ISSUER` as a URL they may be fetched from.
fn key_config(
    optional: &impl Fn(&str) -> Option<String>,
    issuer: &str,
    cognito: bool,
) -> Result<KeyConfig, ConfigError> {
    let loopback_http = optional("AUTH_ALLOW_LOOPBACK_HTTP").is_some_and(|v| v.trim() == "true");
    let url_error = |variable| move |rule| ConfigError::new(variable, rule);
    issuer_url(issuer, loopback_http).map_err(url_error("AUTH_ISSUER"))?;
    let refresh = KeyRefresh::default();
    Ok(match (optional("AUTH_JWKS"), optional("AUTH_JWKS_URL")) {
        (Some(jwks), _) => KeyConfig::Inline(jwks),
        (None, Some(url)) => {
            remote_url(&url, loopback_http).map_err(url_error("AUTH_JWKS_URL"))?;
            KeyConfig::Url { url, refresh, loopback_http }
        }
        (None, None) if cognito => {
            let url = format!("{}/.well-known/jwks.json", issuer.trim_end_matches('/'));
            KeyConfig::Url { url, refresh, loopback_http }
        }
        // A discovered key set on plain HTTP only where the issuer is.
        (None, None) => {
            let loopback_http = loopback_http && issuer.starts_with("http://");
            KeyConfig::Discovery { issuer: issuer.to_owned(), refresh, loopback_http }
        }
    })
}

/// The access-token rule of `AUTH_TOKEN_TYPE` and `AUTH_COGNITO_CLIENT_ID`.
fn access_rule(
    token_type: Option<String>,
    cognito_client_ids: Vec<String>,
) -> Result<AccessTokenRule, ConfigError> {
    let refused = |rule| Err(ConfigError::new("AUTH_TOKEN_TYPE", rule));
    match (token_type.as_deref().map(str::trim), cognito_client_ids.is_empty()) {
        (None, false) => Ok(AccessTokenRule::Cognito(cognito_client_ids)),
        (Some(_), false) => refused(
            "must be unset with AUTH_COGNITO_CLIENT_ID: Cognito's access tokens are told by token_use",
        ),
        (Some("any"), true) => Ok(AccessTokenRule::Untyped),
        (None, true) => Ok(AccessTokenRule::AtJwt),
        (Some(typ), true) if is_at_jwt(typ) => Ok(AccessTokenRule::AtJwt),
        (Some(_), true) => refused("must be at+jwt (RFC 9068's access tokens) or any"),
    }
}

/// Whether a JOSE `typ` names RFC 9068's access-token type: case-insensitive,
/// with or without the `application/` prefix (RFC 8725, section 3.11).
pub fn is_at_jwt(typ: &str) -> bool {
    let lower = typ.to_ascii_lowercase();
    lower.strip_prefix("application/").unwrap_or(&lower) == "at+jwt"
}

/// `url` as keys may be fetched from: `https` to a host (`is_http_to_a_host`), or
/// with `loopback_http` (local issuers; in Lambda, loopback is the Runtime API) `http` to it.
pub fn remote_url(url: &str, loopback_http: bool) -> Result<Uri, String> {
    let parsed: Uri = url.parse().map_err(|_| format!("must be a URL; {url:?} is none"))?;
    // RFC 9110, section 4.2.4: no userinfo in an http(s) URI.
    if parsed.authority().is_some_and(|authority| authority.as_str().contains('@')) {
        return Err(format!("must name no user: {url}"));
    }
    let loopback = matches!(parsed.host(), Some("127.0.0.1" | "localhost" | "[::1]"));
    match parsed.scheme_str() {
        Some("https") => {}
        Some("http") if loopback && loopback_http => {}
        _ => return Err(format!("must use https: {url}")),
    }
    let rule = "must name its host by an address or a DNS name, on a port not 0";
    is_http_to_a_host(url).then_some(parsed).ok_or(format!("{rule}: {url}"))
}

/// An issuer is such a URL without a query or fragment (OpenID Connect
/// Core, section 2), its discovery document under its path; compared with
/// `iss` as written, so in the normal form issuers write, its serialization
/// by the URL Standard: scheme and host in lowercase, no dot segment, no
/// default port (RFC 3986, sections 6.2.2.1, 6.2.2.3 and 6.2.3).
fn issuer_url(issuer: &str, loopback_http: bool) -> Result<(), String> {
    remote_url(issuer, loopback_http)?;
    let url = url::Url::parse(issuer).map_err(|error| error.to_string())?;
    // An empty path is serialized `/`; issuers write either.
    let normal = url.as_str();
    let written = normal == issuer || normal.strip_suffix('/') == Some(issuer);
    let plain = url.query().is_none() && url.fragment().is_none();
    let rule = "must be written as tokens name it: in its normal form, with no query or fragment";
    (written && plain).then_some(()).ok_or(format!("{rule} ({normal}): {issuer}"))
}

/// Whether `origin` is one as browsers send it: its own serialization by
/// the URL Standard (the url crate's), naming a host.
fn is_origin(origin: &str) -> bool {
    let Ok(url) = url::Url::parse(origin) else { return false };
    url.origin().ascii_serialization() == origin && is_http_to_a_host(origin)
}

/// Whether `url` is http(s) to a port not 0 of a host that is an IP address
/// or a DNS name of RFC 1123 labels (section 2.1).
fn is_http_to_a_host(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else { return false };
    let label = |label: &str| {
        let inner = label.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-');
        (1..=63).contains(&label.len()) && inner && !label.starts_with('-') && !label.ends_with('-')
    };
    let http = matches!(url.scheme(), "http" | "https");
    http && url.port() != Some(0) && url.domain().is_none_or(|domain| domain.split('.').all(label))
}

/// `AWS_ENDPOINT_URL_DYNAMODB`, else `AWS_ENDPOINT_URL` (the SDK's names), if
/// set: an http(s) URL naming a host, or every call would fail.
fn dynamodb_endpoint(
    optional: &impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, ConfigError> {
    for variable in ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"] {
        let Some(endpoint) = optional(variable) else { continue };
        let (named, rule) = (is_http_to_a_host(&endpoint), "must be an http(s) URL naming a host");
        return named.then_some(Some(endpoint)).ok_or(ConfigError::new(variable, rule));
    }
    Ok(None)
}

/// `PLANTS_TABLE`: a table's name by DynamoDB's naming rules, or its ARN
/// (`arn:aws:dynamodb:REGION:ACCOUNT:table/NAME`), or every call would fail.
fn table(table: String) -> Result<String, ConfigError> {
    let name = match table.splitn(6, ':').collect::<Vec<_>>()[..] {
        ["arn", _, "dynamodb", _, _, resource] => resource.strip_prefix("table/").unwrap_or(""),
        _ => &table,
    };
    let allowed = |byte: u8| byte.is_ascii_alphanumeric() || b"_.-".contains(&byte);
    let named = (3..=255).contains(&name.len()) && name.bytes().all(allowed);
    let rule = "must be a DynamoDB table's name (3 to 255 of a-z, A-Z, 0-9, _ . -) or its ARN";
    named.then_some(table).ok_or(ConfigError::new("PLANTS_TABLE", rule))
}

/// `MAX_PLANTS_PER_OWNER`: 0 to [`MAX_PLANTS_PER_OWNER_LIMIT`], or the default.
fn max_plants_per_owner(value: Option<String>) -> Result<u32, ConfigError> {
    let Some(value) = value else { return Ok(DEFAULT_MAX_PLANTS_PER_OWNER) };
    let rule = format!("must be a whole number from 0 (no bound) to {MAX_PLANTS_PER_OWNER_LIMIT}");
    let max = value.trim().parse().ok().filter(|max| *max <= MAX_PLANTS_PER_OWNER_LIMIT);
    max.ok_or_else(|| ConfigError::new("MAX_PLANTS_PER_OWNER", rule))
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
    let rule = "must be one OAuth 2.0 scope: printable ASCII without spaces, quotes or backslashes";
    let scopes = [(READ, &read), (WRITE, &write)];
    if let Some((variable, _)) = scopes.into_iter().find(|(_, scope)| !is_scope_token(scope)) {
        return Err(ConfigError::new(variable, rule));
    }
    Ok(Some(ScopeRules { read, write }))
}

/// `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )` (RFC 6749, section 3.3).
pub fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty() && scope.bytes().all(|byte| matches!(byte, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration of an Auth0 issuer and audience with `pairs`
    /// (`NAME=value;...`, an empty value unset) over it, or its error.
    fn config(pairs: &str) -> Result<Config, String> {
        let pairs = pairs.split(';').filter_map(|pair| pair.split_once('='));
        let base = [("PLANTS_TABLE", "plants"), ("AUTH_ISSUER", "https://t.auth0.com/")];
        let all: Vec<_> = pairs.chain(base).chain([("AUTH_AUDIENCE", "plants")]).collect();
        let value =
            |name: &str| all.iter().find(|(set, _)| *set == name).map(|(_, v)| v.to_string());
        Config::from_lookup(value).map_err(|error| error.to_string())
    }

    /// Each setting that cannot work refused at start, its error naming
    /// the variable and the rule: `NAME=value;...` over the base, `=>` a
    /// part of the error. (`jwt` would admit ID tokens typed JWT.)
    #[test]
    fn settings_that_cannot_work_are_refused_naming_the_rule() {
        let cases = "AUTH_ISSUER=https://t.example/?tenant=a => AUTH_ISSUER must be written as tokens name it
            AUTH_ISSUER=https://t.example/#a => AUTH_ISSUER must be written as tokens name it
            AUTH_ISSUER=t.example => AUTH_ISSUER must use https
            AUTH_ISSUER=HTTPS://t.example => AUTH_ISSUER must be written as tokens name it
            AUTH_ISSUER=https://T.example/ => AUTH_ISSUER must be written as tokens name it
            AUTH_ISSUER=https://t.example:443/ => AUTH_ISSUER must be written as tokens name it
            AUTH_ISSUER=https://t.example/a/../b => AUTH_ISSUER must be written as tokens name it
            AUTH_JWKS_URL=https://a..example/k => AUTH_JWKS_URL must name its host by an address or a DNS name
            AUTH_ISSUER=https://a@t.example => AUTH_ISSUER must name no user
            AWS_ENDPOINT_URL_DYNAMODB=localhost:8000 => AWS_ENDPOINT_URL_DYNAMODB must be an http(s) URL
            AUTH_ISSUER= => AUTH_ISSUER must be set
            AUTH_JWKS_URL=https://a:b@t.example/k => AUTH_JWKS_URL must name no user
            AUTH_ISSUER=http://127.0.0.1:9001;AUTH_JWKS_URL=http://[::1]/k => AUTH_ISSUER must use https: http://127.0.0.1:9001
            AUTH_JWKS_URL=http://localhost/k => AUTH_JWKS_URL must use https
            AUTH_COGNITO_CLIENT_ID=a;AUTH_TOKEN_TYPE=at+jwt => AUTH_TOKEN_TYPE must be unset
            AUTH_TOKEN_TYPE=any => AUTH_TOKEN_TYPE may be any only with AUTH_SCOPE_READ
            AUTH_TOKEN_TYPE=jwt => AUTH_TOKEN_TYPE must be at+jwt (RFC 9068's access tokens) or any
            AUTH_AUDIENCE=  => AUTH_AUDIENCE must be set and not empty (the audience
            PLANTS_TABLE= => PLANTS_TABLE must be set
            PLANTS_TABLE=my plants => PLANTS_TABLE must be a DynamoDB table's name
            PLANTS_TABLE=arn:aws:dynamodb:us-east-1:123456789012:plants => PLANTS_TABLE must be
            AUTH_SCOPE_READ=r => AUTH_SCOPE_WRITE must be set
            AUTH_SCOPE_READ=a b;AUTH_SCOPE_WRITE=w => AUTH_SCOPE_READ must be one OAuth 2.0 scope
            AUTH_SCOPE_READ=r;AUTH_SCOPE_WRITE=w\\ => AUTH_SCOPE_WRITE must be one OAuth 2.0 scope
            MAX_PLANTS_PER_OWNER=-1 => MAX_PLANTS_PER_OWNER must be a whole number from 0 (no bound) to 1000000
            MAX_PLANTS_PER_OWNER=1000001 => MAX_PLANTS_PER_OWNER must be a whole number from 0
            MAX_PLANTS_PER_OWNER=ten => MAX_PLANTS_PER_OWNER must be a whole number from 0
            MAX_PLANTS_PER_OWNER=2.5 => MAX_PLANTS_PER_OWNER must be a whole number from 0";
        for case in cases.lines().map(str::trim_start) {
            let (pairs, refused) = case.split_once(" => ").unwrap();
            let error = config(pairs).unwrap_err();
            assert!(error.contains(refused), "{case}: {error}");
        }
        // The table by its ARN, as DynamoDB takes it too.
        config("PLANTS_TABLE=arn:aws-cn:dynamodb:cn-north-1:123456789012:table/a.b_c-1").unwrap();
    }

    #[test]
    fn keys_are_inline_or_the_url_given_or_cognitos_or_found_by_discovery() {
        let keys = |pairs: &str| config(pairs).unwrap().keys;
        let (issuer, refresh) = ("https://t.auth0.com/".into(), KeyRefresh::default());
        let loopback_http = false;
        assert_eq!(keys(""), KeyConfig::Discovery { issuer, refresh, loopback_http });
        let url = "https://keys.example/jwks?appid=a";
        let given = keys(&format!("AUTH_JWKS_URL={url}"));
        assert_eq!(given, KeyConfig::Url { url: url.into(), refresh, loopback_http });
        let url = "https://c.example/pool/.well-known/jwks.json".into();
        let cognito = keys("AUTH_ISSUER=https://c.example/pool/;AUTH_COGNITO_CLIENT_ID=a");
        assert_eq!(cognito, KeyConfig::Url { url, refresh, loopback_http });
        assert_eq!(keys("AUTH_JWKS={}"), KeyConfig::Inline("{}".into()));
        // Plain HTTP to loopback only when asked for; a discovered key set
        // only where the issuer is on it too.
        let loopback = |pairs: &str| match keys(&format!("AUTH_ALLOW_LOOPBACK_HTTP=true;{pairs}")) {
            KeyConfig::Discovery { loopback_http, .. } | KeyConfig::Url { loopback_http, .. } => {
                loopback_http
            }
            other => panic!("{other:?}"),
        };
        assert!(loopback("AUTH_ISSUER=http://127.0.0.1:9001;AUTH_JWKS_URL=http://[::1]/k"));
        assert!(loopback("AUTH_ISSUER=http://127.0.0.1:9001"));
        assert!(!loopback("AUTH_ISSUER=https://t.example"));
    }

    #[test]
    fn no_token_rules_admit_an_untyped_id_token_or_another_audience() {
        let rules = |audience: Option<&str>, access, scopes| {
            TokenRules::new("https://t.example".into(), audience.map(Into::into), access, scopes)
        };
        let scopes = ScopeRules { read: "r".into(), write: "w".into() };
        assert!(rules(Some("a"), AccessTokenRule::Untyped, None).is_err());
        assert!(rules(None, AccessTokenRule::AtJwt, None).is_err());
        assert!(rules(Some("a"), AccessTokenRule::Untyped, Some(scopes)).is_ok());
        assert!(rules(None, AccessTokenRule::Cognito(vec!["c".into()]), None).is_ok());
    }

    #[test]
    fn cors_origins_are_origins_as_browsers_send_them() {
        let origins = |list: &str| config(&format!("CORS_ALLOWED_ORIGINS={list}"));
        let listed = "https://app.example, http://localhost:5173,https://[2001:db8::1]:8443,\
            http://127.0.0.1:8080,https://x-1.a9.example";
        assert_eq!(origins(listed).unwrap().cors_allowed_origins.len(), 5);
        let refused = "null * https://app.example/ https://app.example/plants https://App.example \
            HTTPS://app.example https://app.example:443 http://a.example:80 ftp://a.example \
            https://a.example:0 https://a.example:08080 https://a.example:65536 \
            https://user@a.example https://[2001:DB8::1] https://[2001:db8:0::1] https:// \
            https://a.example:+8443 https://- https://.. https://a..example https://-a.example \
            https://a-.example https://a.example. https://256.0.0.1 https://1.2.3 https://01.2.3.4";
        for refused in refused.split_whitespace() {
            let error = origins(&format!("https://ok.example,{refused}")).unwrap_err();
            assert!(error.contains(&format!("{refused:?} is none")), "{refused}: {error}");
        }
    }

    #[test]
    fn accepted_settings_read_as_written_and_empty_ones_as_unset() {
        let config = |pairs: &str| config(pairs).unwrap();
        for typ in [" ", "at+jwt", "Application/AT+JWT"] {
            assert_eq!(
                config(&format!("AUTH_TOKEN_TYPE={typ}")).rules.access,
                AccessTokenRule::AtJwt
            );
        }
        let cognito = config("AUTH_AUDIENCE=;AUTH_COGNITO_CLIENT_ID=users, machine,").rules;
        assert_eq!(
            cognito.access,
            AccessTokenRule::Cognito(vec!["users".into(), "machine".into()])
        );
        let scoped =
            config("AUTH_TOKEN_TYPE=any;AUTH_SCOPE_READ=p/read;AUTH_SCOPE_WRITE=p/write").rules;
        let scopes = ScopeRules { read: "p/read".into(), write: "p/write".into() };
        assert_eq!((scoped.access, scoped.scopes), (AccessTokenRule::Untyped, Some(scopes)));
        assert_eq!(config("AWS_ENDPOINT_URL_DYNAMODB=").dynamodb_endpoint, None);
        let fallback =
            config("AWS_ENDPOINT_URL_DYNAMODB= ;AWS_ENDPOINT_URL=http://172.17.0.1:8000");
        assert_eq!(fallback.dynamodb_endpoint.as_deref(), Some("http://172.17.0.1:8000"));
        for (value, wanted) in
            [("", DEFAULT_MAX_PLANTS_PER_OWNER), ("0", 0), ("1000000", MAX_PLANTS_PER_OWNER_LIMIT)]
        {
            assert_eq!(
                config(&format!("MAX_PLANTS_PER_OWNER={value}")).max_plants_per_owner,
                wanted
            );
        }
    }
}
