//! The one error type of the API, and the one place where an error becomes the
//! contract's Error body `{ "error": <status>, "message": <sentence> }`.

use lambda_http::http::header::{ALLOW, RETRY_AFTER, WWW_AUTHENTICATE};
use lambda_http::http::{HeaderValue, Method, StatusCode};
use lambda_http::{Body, Response};

use crate::auth::AuthError;
use crate::domain::{Conflict, PlantError, PlantId};
use crate::response::json_text_response;
use crate::store::StoreError;
use crate::trace::{Classify, Outcome};

const CHALLENGE: &str = r#"Bearer realm="plants""#;
const CHALLENGE_INVALID_TOKEN: &str = r#"Bearer realm="plants", error="invalid_token""#;
/// RFC 6750, section 3.1, followed by `scope="..."`.
const CHALLENGE_INSUFFICIENT_SCOPE: &str = r#"Bearer realm="plants", error="insufficient_scope""#;
/// The most characters of a client's own text (a method, a header name)
/// that a message repeats.
pub(crate) const MAX_ECHOED_CHARS: usize = 64;
/// Seconds a client should wait before retrying when the store is unavailable.
const RETRY_AFTER_SECONDS: &str = "1";

#[derive(Debug)]
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

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::UnreadableRequest(_) | Self::InvalidBody(_) | Self::InvalidQuery(_) => {
                StatusCode::BAD_REQUEST
            }
            Self::Auth(AuthError::InsufficientScope { .. }) => StatusCode::FORBIDDEN,
            Self::Auth(AuthError::KeysUnavailable) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Auth(_) => StatusCode::UNAUTHORIZED,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict(_) | Self::TooManyPlants { .. } => StatusCode::CONFLICT,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What is logged beside the response: the internal detail, never sent.
    pub fn log_detail(&self) -> Option<&str> {
        match self {
            Self::Unavailable(detail) | Self::Internal(detail) => Some(detail),
            _ => None,
        }
    }

    /// The sentence the Error body carries.
    pub fn message(&self) -> String {
        match self {
            Self::InvalidBody(error) => error.to_string(),
            Self::UnreadableRequest(message) | Self::InvalidQuery(message) => message.clone(),
            Self::Auth(AuthError::MissingToken) => {
                "The Authorization header must carry a Bearer token.".into()
            }
            Self::Auth(AuthError::Expired) => {
                "The bearer token in the Authorization header has expired.".into()
            }
            Self::Auth(AuthError::InvalidToken) => {
                "The bearer token in the Authorization header is not valid.".into()
            }
            Self::Auth(AuthError::InsufficientScope { scope }) => {
                format!(
                    "The bearer token does not grant the scope {scope}, which this operation requires."
                )
            }
            Self::Auth(AuthError::KeysUnavailable) => {
                "The token's signing keys cannot be fetched from its issuer now; \
                 retry after the Retry-After delay."
                    .into()
            }
            Self::NotFound => "No resource exists at this path.".into(),
            Self::MethodNotAllowed {
                method,
                path,
                allowed,
            } => {
                let allowed = join(allowed, " or ");
                // The method is the client's: a long one is cut, so that a
                // message stays one short sentence (openapi.yaml's bound).
                let method: String = method.chars().take(MAX_ECHOED_CHARS).collect();
                format!("The method {method} is not allowed on {path}; use {allowed}.")
            }
            Self::Conflict(id) => {
                format!("A plant with id {id} already exists with a different name or tag.")
            }
            Self::TooManyPlants { max } => {
                format!(
                    "The owner already has the maximum of {max} plants; no more can be created."
                )
            }
            Self::PayloadTooLarge { max_bytes } => {
                format!("The request body must not exceed {max_bytes} bytes.")
            }
            Self::UnsupportedMediaType => {
                "The Content-Type header must be application/json.".into()
            }
            Self::Unavailable(_) => {
                "The plant store is busy or unreachable; retry after the Retry-After delay.".into()
            }
            Self::Internal(_) => "An unexpected error occurred; it has been logged.".into(),
        }
    }

    pub fn into_response(self) -> Response<Body> {
        let status = self.status();
        // A JSON value's text cannot fail, unlike serialising a type.
        let body = serde_json::json!({ "error": status.as_u16(), "message": self.message() });
        let mut response = json_text_response(status, body.to_string());
        let headers = response.headers_mut();
        match self {
            Self::Auth(AuthError::MissingToken) => {
                headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE));
            }
            Self::Auth(AuthError::InsufficientScope { scope }) => {
                // The configuration admits only scope-tokens: a valid value.
                let challenge = format!(r#"{CHALLENGE_INSUFFICIENT_SCOPE}, scope="{scope}""#);
                if let Ok(challenge) = HeaderValue::from_str(&challenge) {
                    headers.insert(WWW_AUTHENTICATE, challenge);
                }
            }
            Self::Auth(AuthError::Expired | AuthError::InvalidToken) => {
                headers.insert(
                    WWW_AUTHENTICATE,
                    HeaderValue::from_static(CHALLENGE_INVALID_TOKEN),
                );
            }
            Self::MethodNotAllowed { allowed, .. } => {
                // Method names are tokens: always a valid header value.
                if let Ok(allow) = HeaderValue::from_str(&join(&allowed, ", ")) {
                    headers.insert(ALLOW, allow);
                }
            }
            Self::Unavailable(_) | Self::Auth(AuthError::KeysUnavailable) => {
                headers.insert(RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECONDS));
            }
            _ => {}
        }
        response
    }
}

/// A traced step that failed is marked as its answer would be.
impl Classify for ApiError {
    fn outcome(&self) -> Outcome {
        Outcome::of_status(self.status().as_u16())
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
        let response = error.into_response();
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
