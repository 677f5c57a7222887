//! The one way a response is built: a JSON body with its status, for
//! answers and errors alike.

use lambda_http::http::header::CONTENT_TYPE;
use lambda_http::http::{HeaderValue, StatusCode};
use lambda_http::{Body, Response};
use serde::Serialize;

/// `body` as JSON with `status`. A body that cannot be serialised is an
/// error for the caller to answer (a 500, `ApiError`), never an empty 200.
pub(crate) fn json_response(
    status: StatusCode,
    body: &impl Serialize,
) -> Result<Response<Body>, serde_json::Error> {
    Ok(json_text_response(status, serde_json::to_string(body)?))
}

/// A response whose body is already JSON text.
pub(crate) fn json_text_response(status: StatusCode, json: String) -> Response<Body> {
    let mut response = Response::new(Body::Text(json));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
