//! The one way a response is built: a JSON body with its status, for
//! answers and errors alike.

use lambda_http::http::header::CONTENT_TYPE;
use lambda_http::http::{HeaderValue, StatusCode};
use lambda_http::{Body, Response};
use serde::Serialize;

pub(crate) fn json_response(status: StatusCode, body: &impl Serialize) -> Response<Body> {
    // Serialising our plain structs of strings and numbers cannot fail.
    let json = serde_json::to_string(body).unwrap_or_default();
    let mut response = Response::new(Body::Text(json));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
