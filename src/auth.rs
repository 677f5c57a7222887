//! Bearer tokens: the `Authorization` header's JWT, verified against the
//! issuer's keys and granting the operation's access, yields the caller (an
//! [`Owner`]); each refusal has its reason, for the log only. A verified
//! token is remembered ([`TokenCache`]) while a fresh check would accept it.

use std::sync::Arc;

use jsonwebtoken::{Header, Validation, errors::ErrorKind, get_current_timestamp};
use lambda_http::http::HeaderMap;
use lambda_http::http::header::AUTHORIZATION;
use serde::Deserialize;
use serde_json::Value;

use crate::config::{AccessTokenRule, TokenRules, is_at_jwt};
use crate::domain::Owner;
use crate::domain::limits::{TOKEN_LEEWAY_SECONDS, echoed};
use crate::jwks::{ACCEPTED_ALGORITHMS, KeySet, KeySource, KeysUnavailable};

/// The most the verified tokens may weigh, tokens and owners together:
/// about 1,000 Cognito access tokens.
const VERIFIED_TOKEN_BYTES: u64 = 1024 * 1024;
/// Claims that only OpenID Connect ID tokens carry (OIDC Core 1.0, sections
/// 2 and 3.3.2.11): a token with one is no access token, whoever issued it.
const ID_TOKEN_CLAIMS: [&str; 3] = ["nonce", "at_hash", "c_hash"];

/// What an operation needs a token to grant, when scopes are configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Why a request is not authenticated or not allowed: the message is the
/// client's, the reason (which check failed) the log's; neither holds the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Deserialize)]
pub enum AuthError {
    /// No `Authorization` header, or not the `Bearer` scheme.
    #[error("The Authorization header must carry a Bearer token.")]
    MissingToken(&'static str),
    /// A bearer token that is past its `exp`.
    #[error("The bearer token in the Authorization header has expired.")]
    Expired,
    /// Any other reason: malformed (not one RFC 6750 b64token), signature,
    /// key, algorithm, issuer, audience, claims, type, an ID token.
    #[error("The bearer token in the Authorization header is not valid.")]
    InvalidToken(String),
    /// A valid token that does not grant this scope, which the operation needs.
    #[error("The bearer token does not grant the scope {0}, which this operation requires.")]
    InsufficientScope(String),
    /// The issuer's keys cannot be known now: the token may well be valid,
    /// so the answer is "retry", never "invalid" (which signs users out).
    #[error(
        "The token's signing keys cannot be fetched from its issuer now; retry after the Retry-After delay."
    )]
    KeysUnavailable(String),
}

impl AuthError {
    /// Which check refused the request, for its log line.
    pub fn reason(&self) -> String {
        match self {
            Self::MissingToken(reason) => (*reason).to_owned(),
            Self::Expired => format!("exp is past, by more than {TOKEN_LEEWAY_SECONDS} s"),
            Self::InvalidToken(reason) | Self::KeysUnavailable(reason) => reason.clone(),
            Self::InsufficientScope(scope) => format!("the token does not grant {scope}"),
        }
    }
}

impl From<KeysUnavailable> for AuthError {
    fn from(KeysUnavailable(reason): KeysUnavailable) -> Self {
        Self::KeysUnavailable(reason)
    }
}

fn invalid(reason: impl Into<String>) -> AuthError {
    AuthError::InvalidToken(reason.into())
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    iss: String,
    aud: Option<Value>,
    /// Checked by jsonwebtoken first (present, a number, not past); a
    /// number of seconds, rounded as jsonwebtoken rounds it.
    exp: f64,
    /// Checked by jsonwebtoken when present (a number, not in the future).
    nbf: Option<f64>,
    token_use: Option<String>,
    client_id: Option<String>,
    /// Every other claim, the scopes (`scope`, `scp`) among them: kept as
    /// JSON and read only when scopes are required, so that with scopes off
    /// no token is refused for them, whatever their type.
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

impl Claims {
    /// Whether `scope` is granted: in `scope` (a string), or in `scp` (a
    /// string or an array of strings); other JSON types grant nothing.
    fn grants(&self, scope: &str) -> bool {
        let in_list = |list: &str| list.split(' ').any(|granted| granted == scope);
        let in_scope =
            matches!(self.other.get("scope"), Some(Value::String(list)) if in_list(list));
        let in_scp = match self.other.get("scp") {
            Some(Value::String(list)) => in_list(list),
            Some(Value::Array(items)) => items.iter().any(|item| item.as_str() == Some(scope)),
            _ => false,
        };
        in_scope || in_scp
    }

    /// What marks an OpenID Connect ID token: one of [`ID_TOKEN_CLAIMS`], or
    /// Amazon Cognito's `token_use` "id".
    fn id_token_mark(&self) -> Option<&str> {
        let claim = ID_TOKEN_CLAIMS.into_iter().find(|claim| self.other.contains_key(*claim));
        claim.or_else(|| (self.token_use.as_deref() == Some("id")).then_some("token_use id"))
    }

    /// Whether `aud` (a string, or an array of strings) holds `audience`.
    fn is_for(&self, audience: &str) -> bool {
        match &self.aud {
            Some(Value::String(aud)) => aud == audience,
            Some(Value::Array(auds)) => auds.iter().any(|aud| aud.as_str() == Some(audience)),
            _ => false,
        }
    }
}

/// What a verified token says, as long as it may be trusted.
#[derive(Debug, Clone)]
struct Verified {
    owner: Owner,
    /// Whether it grants the read scope and the write scope (both, with
    /// scopes off).
    grants_read: bool,
    grants_write: bool,
    /// The seconds it is valid in: `nbf` and `exp`, with the leeway.
    valid_from: u64,
    valid_until: u64,
    /// The generation of the key set whose key verified it.
    generation: u64,
}

/// The tokens verified lately, at most [`VERIFIED_TOKEN_BYTES`] of them, in
/// a concurrent cache (quick_cache) for requests served at once.
struct TokenCache(quick_cache::sync::Cache<String, Verified, Weight>);

/// An entry's weight: its bytes.
#[derive(Clone)]
struct Weight;

impl quick_cache::Weighter<String, Verified> for Weight {
    fn weight(&self, token: &String, verified: &Verified) -> u64 {
        let bytes = token.len() + verified.owner.as_str().len() + size_of::<Verified>();
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }
}

impl TokenCache {
    fn new() -> Self {
        Self(quick_cache::sync::Cache::with_weighter(1024, VERIFIED_TOKEN_BYTES, Weight))
    }

    /// What `token` was verified as, if that still holds `now` with the key
    /// set of `generation`.
    fn get(&self, token: &str, generation: u64, now: u64) -> Option<Verified> {
        let verified = self.0.get(token)?;
        let valid = (verified.valid_from..=verified.valid_until).contains(&now);
        if verified.generation != generation || !valid {
            self.0.remove(token);
            return None;
        }
        Some(verified)
    }

    fn insert(&self, token: &str, verified: Verified) {
        self.0.insert(token.to_owned(), verified);
    }
}

/// Verifies bearer tokens for one issuer (and audience, when configured).
pub struct Verifier {
    keys: KeySource,
    /// One set of rules per accepted algorithm: jsonwebtoken requires every
    /// algorithm of a `Validation` to match the key's family. It checks the
    /// signature, `exp`, `nbf` and that the required claims are present;
    /// `iss` and `aud` are checked here, so that a refusal can say why.
    validations: Vec<Validation>,
    rules: TokenRules,
    verified: TokenCache,
}

impl Verifier {
    pub fn new(keys: KeySource, rules: &TokenRules) -> Self {
        let required: &[&str] = match rules.audience {
            Some(_) => &["exp", "iss", "sub", "aud"],
            None => &["exp", "iss", "sub"],
        };
        let validation_for = |algorithm| {
            let mut validation = Validation::new(algorithm);
            validation.leeway = TOKEN_LEEWAY_SECONDS;
            validation.validate_nbf = true;
            validation.validate_aud = false;
            validation.set_required_spec_claims(required);
            validation
        };
        let validations = ACCEPTED_ALGORITHMS.into_iter().map(validation_for).collect();
        let scopes =
            rules.scopes.as_ref().map(|scopes| format!("{} {}", scopes.read, scopes.write));
        tracing::info!(issuer = rules.issuer, audience = rules.audience, access = ?rules.access,
            scopes, "the token rules in force");
        Self { keys, validations, rules: rules.clone(), verified: TokenCache::new() }
    }

    /// Fetches a remote key set at init (`KeySource::load`).
    pub async fn load_keys(&self) {
        self.keys.load().await;
    }

    /// The caller named by the request's bearer token, if the token grants
    /// `access` (always, when no scopes are configured).
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        access: Access,
    ) -> Result<Owner, AuthError> {
        // Its size is bounded by the request's headers (`crate::event`).
        let token = bearer_token(headers)?;
        let keys = self.keys.current().await?;
        let now = get_current_timestamp();
        let verified = match self.verified.get(token, keys.generation(), now) {
            Some(verified) => verified,
            None => {
                let verified = self.verify(token, keys).await?;
                self.verified.insert(token, verified.clone());
                verified
            }
        };
        // Who the caller is comes before what it may do: a token without a
        // usable subject is invalid (401) whatever its scopes.
        let (granted, scope) = match (access, &self.rules.scopes) {
            (_, None) => return Ok(verified.owner),
            (Access::Read, Some(scopes)) => (verified.grants_read, &scopes.read),
            (Access::Write, Some(scopes)) => (verified.grants_write, &scopes.write),
        };
        granted.then_some(verified.owner).ok_or_else(|| AuthError::InsufficientScope(scope.clone()))
    }

    /// Verifies `token` now, with `keys` (fetched again if they lack its key).
    async fn verify(&self, token: &str, mut keys: Arc<KeySet>) -> Result<Verified, AuthError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| invalid("it is no JWT with a JOSE header"))?;
        let validation = self.validation_for(&header)?;
        let kid = header.kid.as_deref().ok_or_else(|| invalid("its header names no kid"))?;
        if keys.get(kid).is_none() {
            keys = self.keys.fetch_for(kid).await?;
        }
        let unknown = || invalid(format!("the issuer's key set has no kid {:?}", echoed(kid)));
        let key = keys.get(kid).ok_or_else(unknown)?;
        if key.algorithm != header.alg {
            let reason = format!("its alg {:?} is not its key's, {:?}", header.alg, key.algorithm);
            return Err(invalid(reason));
        }
        let claims = jsonwebtoken::decode::<Claims>(token, &key.key, validation)
            .map_err(|error| match error.kind() {
                ErrorKind::ExpiredSignature => AuthError::Expired,
                ErrorKind::InvalidSignature => invalid("the signature does not verify"),
                ErrorKind::Base64(_) => invalid("a part of it is not canonical base64url"),
                ErrorKind::ImmatureSignature => invalid("its nbf is in the future"),
                ErrorKind::MissingRequiredClaim(claim) => invalid(format!("it has no {claim}")),
                _ => invalid("a claim it has is not of a JWT access token's type"),
            })?
            .claims;
        self.check_claims(&claims)?;
        let (grants_read, grants_write) = match &self.rules.scopes {
            Some(scopes) => (claims.grants(&scopes.read), claims.grants(&scopes.write)),
            None => (true, true),
        };
        // Untyped, a token that grants none of the API's scopes may be an ID
        // token: it is no access token for this API.
        if self.rules.access == AccessTokenRule::Untyped && !grants_read && !grants_write {
            return Err(invalid("it grants none of the API's scopes (AUTH_TOKEN_TYPE=any)"));
        }
        // jsonwebtoken checked `exp` and `nbf`: finite numbers of seconds.
        let seconds = |claim: f64| claim.round() as u64;
        Ok(Verified {
            owner: Owner::parse(claims.sub).ok_or_else(|| invalid("its sub is no usable owner"))?,
            grants_read,
            grants_write,
            valid_from: claims
                .nbf
                .map_or(0, |nbf| seconds(nbf).saturating_sub(TOKEN_LEEWAY_SECONDS)),
            valid_until: seconds(claims.exp).saturating_add(TOKEN_LEEWAY_SECONDS),
            generation: keys.generation(),
        })
    }

    /// The rules for a token with `header`: no `crit` (RFC 7515, section
    /// 4.1.11: its extensions must be understood, and none is), the
    /// required `typ`, and an accepted algorithm.
    fn validation_for(&self, header: &Header) -> Result<&Validation, AuthError> {
        if header.crit.is_some() {
            return Err(invalid("its header has crit, whose extensions are not understood"));
        }
        if self.rules.access == AccessTokenRule::AtJwt
            && !header.typ.as_deref().is_some_and(is_at_jwt)
        {
            let typ = header.typ.as_deref().map(echoed);
            return Err(invalid(format!("its typ {typ:?} is not at+jwt (AUTH_TOKEN_TYPE)")));
        }
        let validations = self.validations.iter();
        let mut matching = validations.filter(|validation| validation.algorithms == [header.alg]);
        let refused = || invalid(format!("its alg {:?} is not one this API accepts", header.alg));
        matching.next().ok_or_else(refused)
    }

    /// The issuer and audience configured, and an access token, never an ID
    /// token; in Cognito mode, one issued to one of the app clients.
    fn check_claims(&self, claims: &Claims) -> Result<(), AuthError> {
        let TokenRules { issuer, audience, .. } = &self.rules;
        if claims.iss != *issuer {
            let iss = echoed(&claims.iss);
            return Err(invalid(format!("its iss {iss:?} is not AUTH_ISSUER {issuer:?}")));
        }
        if let Some(audience) = audience.as_deref().filter(|audience| !claims.is_for(audience)) {
            let aud = claims.aud.as_ref().map(Value::to_string).unwrap_or_default();
            let aud = echoed(&aud);
            return Err(invalid(format!("its aud {aud} does not hold AUTH_AUDIENCE {audience:?}")));
        }
        if let Some(mark) = claims.id_token_mark() {
            return Err(invalid(format!("it is an ID token ({mark})")));
        }
        if let AccessTokenRule::Cognito(clients) = &self.rules.access {
            if claims.token_use.as_deref() != Some("access") {
                return Err(invalid("its token_use is not access"));
            }
            let client = claims.client_id.as_deref().unwrap_or_default();
            if !clients.iter().any(|id| id == client) {
                let client = echoed(client);
                return Err(invalid(format!(
                    "its client_id {client:?} is no configured app client"
                )));
            }
        }
        Ok(())
    }
}

/// The token of `Authorization: Bearer <token>`: the scheme in any case
/// (RFC 9110, 11.1), spaces, one b64token and nothing else (RFC 6750, 2.1),
/// as the firewall's per-caller key reads it. Anything else is 401: the
/// plain challenge without a `Bearer` value, else `invalid_token`.
fn bearer_token(headers: &HeaderMap) -> Result<&str, AuthError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthError::MissingToken("no Authorization header"))?.as_bytes();
    let other_scheme = AuthError::MissingToken("the Authorization scheme is not Bearer");
    let space = value.iter().position(|&byte| byte == b' ').ok_or(other_scheme.clone())?;
    let (scheme, token) = (&value[..space], &value[space + 1..]);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return Err(other_scheme);
    }
    let malformed = || invalid("the Bearer value is not one RFC 6750 b64token");
    // A Bearer value with bytes beyond ASCII is a malformed token.
    let token = std::str::from_utf8(token).map_err(|_| malformed())?;
    match token.trim_start_matches(' ') {
        "" => Err(AuthError::MissingToken("no token after Bearer")),
        token if values.next().is_some() || !is_b64token(token) => Err(malformed()),
        token => Ok(token),
    }
}

/// `b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty() && body.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::limits::MAX_HEADER_BYTES;

    #[test]
    fn the_cache_holds_at_most_its_bytes() {
        let (cache, owner) = (TokenCache::new(), Owner::parse("alice".into()).unwrap());
        let verified = Verified {
            owner,
            grants_read: true,
            grants_write: false,
            valid_from: 0,
            valid_until: u64::MAX,
            generation: 0,
        };
        let token = "t".repeat(MAX_HEADER_BYTES);
        for n in 0..1024 {
            cache.insert(&format!("{token}{n}"), verified.clone());
        }
        let held = cache.0.weight();
        assert!(held > 0 && held <= VERIFIED_TOKEN_BYTES, "{held} bytes");
        assert!(cache.0.len() < 1024 * 1024 / MAX_HEADER_BYTES);
    }
}
