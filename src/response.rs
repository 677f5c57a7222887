//! The one way a response is built: a JSON body with its status, for
//! answers and errors alike.

use axum::body::Body;
use axum::response::Response;
use lambda_http::http::header::CONTENT_TYPE;
use lambda_http::http::{HeaderValue, StatusCode};
use serde::Serialize;

/// `body` as JSON with `status`: a Plant, a page of them or an Error body,
/// text and numbers whose JSON cannot fail.
pub(crate) fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    let json = serde_json::to_string(body).expect("text and numbers always serialize");
    let mut response = Response::new(Body::from(json));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
