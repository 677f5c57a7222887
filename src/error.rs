//! The API's one error type, and the one place an error becomes its answer:
//! its message, status and header, decided once, in the Error body
//! ([`IntoResponse`]), and what the request's line says of it ([`Refusal`]).

use axum::Json;
use axum::response::{IntoResponse, Response};
use lambda_http::http::header::{RETRY_AFTER, WWW_AUTHENTICATE};
use lambda_http::http::{HeaderName, HeaderValue, StatusCode};

use crate::auth::AuthError;
use crate::domain::limits::{LIMIT_MAX, MAX_BODY_BYTES, MAX_HEADER_BYTES, MAX_HEADERS, echoed};
use crate::domain::{PlantError, PlantId};
use crate::store::StoreError;

const CHALLENGE: &str = r#"Bearer realm="plants""#;
const CHALLENGE_INVALID_TOKEN: &str = r#"Bearer realm="plants", error="invalid_token""#;
/// Seconds a client should wait before retrying what is unavailable now.
const RETRY_AFTER_SECONDS: &str = "1";

/// Each kind's example in openapi.yaml names it (`x-error`, read by
/// `Deserialize`), and `cargo test` holds the two to the same answer.
#[derive(Debug, Clone, thiserror::Error, serde::Deserialize)]
pub enum ApiError {
    /// The event carries what HTTP cannot represent (`crate::event`).
    #[error("{0}")]
    UnreadableRequest(&'static str),
    #[error("The request header `{0}` has a value that HTTP does not allow.")]
    UnreadableHeader(String),
    #[error(
        "The request has more headers than the API inspects: at most {MAX_HEADERS} headers of {MAX_HEADER_BYTES} bytes in all."
    )]
    HeadersUninspected,
    #[error("{0}")]
    InvalidBody(#[from] PlantError),
    #[error("The query parameter `{0}` must be given at most once.")]
    RepeatedParameter(&'static str),
    #[error("The query parameter `limit` must be an integer from 1 to {LIMIT_MAX}.")]
    InvalidLimit,
    #[error(
        "The query parameter `cursor` is not one this API issued; use the Link header of the previous page."
    )]
    InvalidCursor,
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("No resource exists at this path.")]
    NotFound,
    /// The client's method and path, cut by `echoed` so that the message
    /// stays one short sentence; the router's `Allow` names what it allows.
    #[error(
        "The method {} is not allowed on {}; the Allow header names those that are.",
        echoed(method),
        echoed(path)
    )]
    MethodNotAllowed { method: String, path: String },
    #[error("A plant with id {0} already exists with other content.")]
    Conflict(PlantId),
    /// The owner already has the most plants allowed.
    #[error("The owner already has the maximum of {0} plants; no more can be created.")]
    TooManyPlants(u32),
    #[error("The request body must not exceed {MAX_BODY_BYTES} bytes.")]
    PayloadTooLarge,
    #[error("The Content-Type header must be application/json.")]
    UnsupportedMediaType,
    /// The store is throttled, timed out or unreachable after retries; the
    /// detail is for the log only.
    #[error("The plant store is busy or unreachable; retry after the Retry-After delay.")]
    Unavailable(String),
    /// Anything else; the detail is for the log only.
    #[error("An unexpected error occurred; it has been logged.")]
    Internal(String),
}

/// What the request's line says of a refusal: its message, why (for a 4xx)
/// or what failed (for a 5xx), never sent; and whether it is the bound's.
#[derive(Clone)]
pub(crate) struct Refusal {
    pub(crate) message: String,
    pub(crate) detail: Option<String>,
    pub(crate) at_bound: bool,
}

impl ApiError {
    /// The status of this error's answer, and the header it carries.
    fn status_and_header(&self) -> (StatusCode, Option<(HeaderName, HeaderValue)>) {
        use StatusCode as Status;
        let value = HeaderValue::from_static;
        let challenge = |challenge| Some((WWW_AUTHENTICATE, value(challenge)));
        match self {
            Self::UnreadableRequest(_)
            | Self::UnreadableHeader(_)
            | Self::InvalidBody(_)
            | Self::RepeatedParameter(_)
            | Self::InvalidLimit
            | Self::InvalidCursor => (Status::BAD_REQUEST, None),
            Self::Auth(AuthError::MissingToken(_)) => (Status::UNAUTHORIZED, challenge(CHALLENGE)),
            Self::Auth(AuthError::Expired | AuthError::InvalidToken(_)) => {
                (Status::UNAUTHORIZED, challenge(CHALLENGE_INVALID_TOKEN))
            }
            // RFC 6750, section 3.1. The configuration admits only scope
            // tokens (`crate::config`): always a valid header value.
            Self::Auth(AuthError::InsufficientScope(scope)) => {
                let challenge = format!(
                    r#"Bearer realm="plants", error="insufficient_scope", scope="{scope}""#
                );
                let header = HeaderValue::from_str(&challenge).ok();
                (Status::FORBIDDEN, header.map(|header| (WWW_AUTHENTICATE, header)))
            }
            Self::Auth(AuthError::KeysUnavailable(_)) | Self::Unavailable(_) => {
                (Status::SERVICE_UNAVAILABLE, Some((RETRY_AFTER, value(RETRY_AFTER_SECONDS))))
            }
            Self::NotFound => (Status::NOT_FOUND, None),
            Self::MethodNotAllowed { .. } => (Status::METHOD_NOT_ALLOWED, None),
            Self::Conflict(_) | Self::TooManyPlants(_) => (Status::CONFLICT, None),
            Self::PayloadTooLarge => (Status::PAYLOAD_TOO_LARGE, None),
            Self::HeadersUninspected => (Status::REQUEST_HEADER_FIELDS_TOO_LARGE, None),
            Self::UnsupportedMediaType => (Status::UNSUPPORTED_MEDIA_TYPE, None),
            Self::Internal(_) => (Status::INTERNAL_SERVER_ERROR, None),
        }
    }

    /// What is logged beside the response, never sent: why a 401 or 403
    /// refused, and what a 5xx met.
    fn log_detail(&self) -> Option<String> {
        match self {
            Self::Auth(error) => Some(error.reason()),
            Self::Unavailable(detail) | Self::Internal(detail) => Some(detail.clone()),
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    /// The answer: the status, the Error body and the header.
    fn into_response(self) -> Response {
        let (status, header) = self.status_and_header();
        let message = self.to_string();
        let body = serde_json::json!({ "error": status.as_u16(), "message": message });
        let mut response = (status, Json(body)).into_response();
        response.headers_mut().extend(header);
        let (detail, at_bound) = (self.log_detail(), matches!(self, Self::TooManyPlants(_)));
        response.extensions_mut().insert(Refusal { message, detail, at_bound });
        response
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
