//! The one error type of the API, and the one place where an error becomes
//! its answer: the status, the contract's Error body
//! `{ "error": <status>, "message": <sentence> }` and the header it
//! carries, for every variant in one `match` ([`ApiError::refusal`]).

use std::borrow::Cow;

use lambda_http::http::header::{ALLOW, RETRY_AFTER, WWW_AUTHENTICATE};
use lambda_http::http::{HeaderName, HeaderValue, Method, StatusCode};
use lambda_http::{Body, Response};

use crate::auth::AuthError;
use crate::domain::limits::MAX_ECHOED_CHARS;
use crate::domain::{Conflict, PlantError, PlantId};
use crate::response::json_text_response;
use crate::store::StoreError;

const CHALLENGE: &str = r#"Bearer realm="plants""#;
const CHALLENGE_INVALID_TOKEN: &str = r#"Bearer realm="plants", error="invalid_token""#;
/// RFC 6750, section 3.1, followed by `scope="..."`.
const CHALLENGE_INSUFFICIENT_SCOPE: &str = r#"Bearer realm="plants", error="insufficient_scope""#;
/// Seconds a client should wait before retrying when the store is unavailable.
const RETRY_AFTER_SECONDS: &str = "1";

#[derive(Debug, Clone)]
pub enum ApiError {
    /// The event carries what HTTP cannot represent (`crate::event`).
    UnreadableRequest(String),
    InvalidBody(PlantError),
    InvalidQuery(String),
    Auth(AuthError),
    NotFound,
    MethodNotAllowed {
        method: String,
        path: &'static str,
        /// What the path allows, for the message and the `Allow` header.
        allowed: Vec<&'static Method>,
    },
    Conflict(PlantId),
    /// The owner already has the most plants allowed.
    TooManyPlants {
        max: u32,
    },
    PayloadTooLarge {
        max_bytes: usize,
    },
    UnsupportedMediaType,
    /// The store is throttled, timed out or unreachable after retries.
    Unavailable(String),
    /// Anything else; the detail goes to the log only.
    Internal(String),
}

/// What an error answers.
pub struct Refusal {
    pub status: StatusCode,
    /// The Error body's sentence.
    pub message: Cow<'static, str>,
    header: Option<(HeaderName, HeaderValue)>,
}

impl Refusal {
    pub fn into_response(self) -> Response<Body> {
        // A JSON value's text cannot fail, unlike serialising a type.
        let body = serde_json::json!({ "error": self.status.as_u16(), "message": self.message });
        let mut response = json_text_response(self.status, body.to_string());
        if let Some((name, value)) = self.header {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

impl ApiError {
    /// The status, the message and the header of this error's answer.
    pub fn refusal(&self) -> Refusal {
        use StatusCode as Status;
        let challenge = |value| Some((WWW_AUTHENTICATE, HeaderValue::from_static(value)));
        let retry_after = || {
            let value = HeaderValue::from_static(RETRY_AFTER_SECONDS);
            Some((RETRY_AFTER, value))
        };
        let (status, message, header): (_, Cow<'static, str>, _) = match self {
            Self::UnreadableRequest(message) | Self::InvalidQuery(message) => {
                (Status::BAD_REQUEST, message.clone().into(), None)
            }
            Self::InvalidBody(error) => (Status::BAD_REQUEST, error.to_string().into(), None),
            Self::Auth(AuthError::MissingToken) => (
                Status::UNAUTHORIZED,
                "The Authorization header must carry a Bearer token.".into(),
                challenge(CHALLENGE),
            ),
            Self::Auth(AuthError::Expired) => (
                Status::UNAUTHORIZED,
                "The bearer token in the Authorization header has expired.".into(),
                challenge(CHALLENGE_INVALID_TOKEN),
            ),
            Self::Auth(AuthError::InvalidToken) => (
                Status::UNAUTHORIZED,
                "The bearer token in the Authorization header is not valid.".into(),
                challenge(CHALLENGE_INVALID_TOKEN),
            ),
            Self::Auth(AuthError::InsufficientScope { scope }) => (
                Status::FORBIDDEN,
                format!("The bearer token does not grant the scope {scope}, which this operation requires.").into(),
                // The configuration admits only scope-tokens: a valid value.
                HeaderValue::from_str(&format!(r#"{CHALLENGE_INSUFFICIENT_SCOPE}, scope="{scope}""#))
                    .ok()
                    .map(|value| (WWW_AUTHENTICATE, value)),
            ),
            Self::Auth(AuthError::KeysUnavailable) => (
                Status::SERVICE_UNAVAILABLE,
                "The token's signing keys cannot be fetched from its issuer now; \
                 retry after the Retry-After delay."
                    .into(),
                retry_after(),
            ),
            Self::NotFound => (
                Status::NOT_FOUND,
                "No resource exists at this path.".into(),
                None,
            ),
            Self::MethodNotAllowed {
                method,
                path,
                allowed,
            } => {
                // The method is the client's: a long one is cut, so that a
                // message stays one short sentence (openapi.yaml's bound).
                let method: String = method.chars().take(MAX_ECHOED_CHARS).collect();
                let message = format!(
                    "The method {method} is not allowed on {path}; use {}.",
                    join(allowed, " or ")
                );
                // Method names are tokens: always a valid header value.
                let allow = HeaderValue::from_str(&join(allowed, ", ")).ok();
                (
                    Status::METHOD_NOT_ALLOWED,
                    message.into(),
                    allow.map(|allow| (ALLOW, allow)),
                )
            }
            Self::Conflict(id) => (
                Status::CONFLICT,
                format!("A plant with id {id} already exists with a different name or tag.")
                    .into(),
                None,
            ),
            Self::TooManyPlants { max } => (
                Status::CONFLICT,
                format!("The owner already has the maximum of {max} plants; no more can be created.")
                    .into(),
                None,
            ),
            Self::PayloadTooLarge { max_bytes } => (
                Status::PAYLOAD_TOO_LARGE,
                format!("The request body must not exceed {max_bytes} bytes.").into(),
                None,
            ),
            Self::UnsupportedMediaType => (
                Status::UNSUPPORTED_MEDIA_TYPE,
                "The Content-Type header must be application/json.".into(),
                None,
            ),
            Self::Unavailable(_) => (
                Status::SERVICE_UNAVAILABLE,
                "The plant store is busy or unreachable; retry after the Retry-After delay."
                    .into(),
                retry_after(),
            ),
            Self::Internal(_) => (
                Status::INTERNAL_SERVER_ERROR,
                "An unexpected error occurred; it has been logged.".into(),
                None,
            ),
        };
        Refusal {
            status,
            message,
            header,
        }
    }

    pub fn status(&self) -> StatusCode {
        self.refusal().status
    }

    /// What is logged beside the response: the internal detail, never sent.
    pub fn log_detail(&self) -> Option<&str> {
        match self {
            Self::Unavailable(detail) | Self::Internal(detail) => Some(detail),
            _ => None,
        }
    }
}

fn join(methods: &[&Method], separator: &str) -> String {
    let names: Vec<&str> = methods.iter().map(|method| method.as_str()).collect();
    names.join(separator)
}

impl From<PlantError> for ApiError {
    fn from(error: PlantError) -> Self {
        Self::InvalidBody(error)
    }
}

impl From<Conflict> for ApiError {
    fn from(Conflict(id): Conflict) -> Self {
        Self::Conflict(id)
    }
}

impl From<AuthError> for ApiError {
    fn from(error: AuthError) -> Self {
        Self::Auth(error)
    }
}

impl From<serde_json::Error> for ApiError {
    fn from(error: serde_json::Error) -> Self {
        Self::Internal(format!("the response could not be serialised: {error}"))
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(detail) => Self::Unavailable(detail),
            StoreError::Unexpected(detail) => Self::Internal(detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::ser::{Error, Serialize, Serializer};

    use super::*;
    use crate::response::json_response;

    /// A body whose serialisation fails.
    struct Unserialisable;

    impl Serialize for Unserialisable {
        fn serialize<S: Serializer>(&self, _serializer: S) -> Result<S::Ok, S::Error> {
            Err(S::Error::custom("cannot"))
        }
    }

    #[test]
    fn a_body_that_cannot_be_serialised_is_a_500_with_the_error_body() {
        let error = ApiError::from(json_response(StatusCode::OK, &Unserialisable).unwrap_err());
        assert!(error.log_detail().unwrap().contains("cannot"));
        let response = error.refusal().into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let Body::Text(body) = response.body() else {
            panic!("a text body");
        };
        assert_eq!(
            body,
            r#"{"error":500,"message":"An unexpected error occurred; it has been logged."}"#
        );
    }
}
