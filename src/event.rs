//! The invocation's event: what API Gateway (a REST API, or an HTTP API) or
//! a Lambda function URL delivers, read into an `http::Request`, and the
//! response written back in the shape that event asks for.
//!
//! The conversion is the project's own, not lambda_http's, because the
//! event carries what the client sent and lambda_http panics on some of it
//! (a `"` or a space in `rawQueryString`, a malformed `X-Forwarded-Proto`
//! or `Host`, a body flagged base64 that is not): a panic fails the
//! invocation, and API Gateway then answers its own 500. Here every event
//! becomes a request or a 400 with the Error body:
//! - bytes that a URI cannot hold, in the path or the raw query string, are
//!   percent-encoded (what a browser does), so the query parameters read
//!   the same and their own checks answer;
//! - a header that HTTP cannot represent, a body flagged base64 that is not
//!   base64, or an event of no known shape, is a 400 naming the problem;
//! - `Host` and `X-Forwarded-Proto` are not read: the request's URI is the
//!   path and query as the client sent them.
//!
//! The event arrives as JSON text ([`Incoming`]) and is decoded straight
//! into API Gateway's typed event; only an event that does not decode is
//! read again, as a JSON value, to say exactly what is wrong with it.

use aws_lambda_events::apigw::{
    ApiGatewayProxyRequest, ApiGatewayProxyResponse, ApiGatewayV2httpRequest,
    ApiGatewayV2httpResponse,
};
use aws_lambda_events::query_map::QueryMap;
use base64::Engine;
use lambda_http::aws_lambda_events;
use lambda_http::http::{HeaderMap, HeaderName, HeaderValue, Method, Response, Uri};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::limits::MAX_ECHOED_CHARS;
use crate::error::ApiError;

/// The event as the Runtime API hands it over: any JSON, kept as text, so
/// that no event fails the invocation before the function reads it.
pub type Incoming = Box<serde_json::value::RawValue>;

/// Which response shape the event asks for: payload format 1.0 (REST APIs,
/// and HTTP APIs set to 1.0) or 2.0 (HTTP APIs, function URLs). Both carry
/// `statusCode`, `headers` and `body`, so an event of no known shape gets
/// the 1.0 shape, which every integration reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    V1,
    V2,
}

/// The one field that tells the formats apart.
#[derive(Deserialize)]
struct Version<'a> {
    #[serde(borrow)]
    version: Option<std::borrow::Cow<'a, str>>,
}

impl Format {
    /// API Gateway marks payload format 2.0 with `"version": "2.0"`.
    fn of(event: &str) -> Self {
        match serde_json::from_str::<Version>(event) {
            Ok(Version {
                version: Some(version),
            }) if version == "2.0" => Self::V2,
            _ => Self::V1,
        }
    }

    /// `response` in this format.
    pub fn answer(self, response: Response<Body>) -> InvocationResponse {
        let (parts, body) = response.into_parts();
        let (is_base64_encoded, body) = match body {
            Body::Empty => (false, None),
            body @ Body::Text(_) => (false, Some(body)),
            body => (true, Some(body)),
        };
        let status_code = i64::from(parts.status.as_u16());
        match self {
            Self::V1 => {
                let mut answer = ApiGatewayProxyResponse::default();
                answer.status_code = status_code;
                answer.headers = parts.headers;
                answer.body = body;
                answer.is_base64_encoded = is_base64_encoded;
                InvocationResponse::V1(answer)
            }
            Self::V2 => {
                let mut answer = ApiGatewayV2httpResponse::default();
                answer.status_code = status_code;
                answer.headers = parts.headers;
                answer.body = body;
                answer.is_base64_encoded = is_base64_encoded;
                InvocationResponse::V2(answer)
            }
        }
    }
}

/// The invocation's response, as the event's integration reads it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum InvocationResponse {
    V1(ApiGatewayProxyResponse),
    V2(ApiGatewayV2httpResponse),
}

/// Reads an event: its format, and the request it carries or why it
/// cannot be one (a 400).
pub fn read(event: &str) -> (Format, Result<Request, ApiError>) {
    let format = Format::of(event);
    let request = match format {
        Format::V1 => serde_json::from_str(event).map(v1_request),
        Format::V2 => serde_json::from_str(event).map(v2_request),
    };
    (
        format,
        request.unwrap_or_else(|_| Err(why_unreadable(event))),
    )
}

/// Why an event does not decode: a header HTTP cannot carry (named), or no
/// shape that API Gateway or a function URL delivers.
fn why_unreadable(event: &str) -> ApiError {
    let Ok(event) = serde_json::from_str::<Value>(event) else {
        return not_an_event();
    };
    ["headers", "multiValueHeaders"]
        .into_iter()
        .find_map(|field| check_headers(event.get(field)).err())
        .unwrap_or_else(not_an_event)
}

fn not_an_event() -> ApiError {
    ApiError::UnreadableRequest(
        "The request is not one API Gateway or a function URL delivers.".into(),
    )
}

/// Every header name and value must be one HTTP can carry (no control
/// characters; names are tokens). Values may be one string or a list.
fn check_headers(headers: Option<&Value>) -> Result<(), ApiError> {
    let Some(Value::Object(headers)) = headers else {
        return Ok(());
    };
    for (name, values) in headers {
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            return Err(ApiError::UnreadableRequest(
                "A request header has a name that HTTP does not allow.".into(),
            ));
        };
        let values = match values {
            Value::Array(values) => values.iter().collect(),
            value => vec![value],
        };
        let readable = |value: &&Value| match value {
            Value::String(value) => HeaderValue::from_str(value).is_ok(),
            Value::Null => true,
            _ => false,
        };
        if !values.iter().all(readable) {
            let message = if name.len() <= MAX_ECHOED_CHARS {
                format!("The request header `{header}` has a value that HTTP does not allow.")
            } else {
                "A request header has a value that HTTP does not allow.".into()
            };
            return Err(ApiError::UnreadableRequest(message));
        }
    }
    Ok(())
}

/// A REST API (or payload format 1.0) event.
fn v1_request(event: ApiGatewayProxyRequest) -> Result<Request, ApiError> {
    let raw_path = event.path.unwrap_or_default();
    // The path the client sent: with the stage on the execute-api domain.
    let client_path = event
        .request_context
        .path
        .clone()
        .unwrap_or_else(|| raw_path.clone());
    let query = if event.multi_value_query_string_parameters.is_empty() {
        event.query_string_parameters
    } else {
        event.multi_value_query_string_parameters
    };
    let mut headers = event.multi_value_headers;
    headers.extend(event.headers);
    let parts = Parts {
        method: event.http_method,
        uri: uri(&client_path, &query.to_query_string())?,
        headers,
        body: body(event.body, event.is_base64_encoded)?,
    };
    Ok(parts
        .into_request()
        .with_raw_http_path(raw_path)
        .with_query_string_parameters(query)
        .with_request_context(RequestContext::ApiGatewayV1(event.request_context)))
}

/// An HTTP API (payload format 2.0) or function URL event.
fn v2_request(event: ApiGatewayV2httpRequest) -> Result<Request, ApiError> {
    let raw_path = event.raw_path.unwrap_or_default();
    let raw_query = event.raw_query_string.unwrap_or_default();
    let query: QueryMap = match raw_query.parse() {
        Ok(query) => query,
        Err(never) => match never {},
    };
    let parts = Parts {
        method: event.request_context.http.method.clone(),
        uri: uri(&raw_path, &raw_query)?,
        headers: event.headers,
        body: body(event.body, event.is_base64_encoded)?,
    };
    Ok(parts
        .into_request()
        .with_raw_http_path(raw_path)
        .with_query_string_parameters(query)
        .with_request_context(RequestContext::ApiGatewayV2(event.request_context)))
}

struct Parts {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
}

impl Parts {
    fn into_request(self) -> Request {
        let mut request = Request::new(self.body);
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.headers_mut() = self.headers;
        request
    }
}

/// What a URI keeps as it is: RFC 3986's unreserved and sub-delims, `:`,
/// `@`, `/`, `?` and `%` (an existing escape stays one); everything else
/// is percent-encoded.
const URI_ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@')
    .remove(b'/')
    .remove(b'?')
    .remove(b'%');

/// The request's URI: the path (rooted) and the query, with what a URI
/// cannot hold percent-encoded.
fn uri(path: &str, query: &str) -> Result<Uri, ApiError> {
    let mut text = String::with_capacity(path.len() + query.len() + 2);
    if !path.starts_with('/') {
        text.push('/');
    }
    text.extend(utf8_percent_encode(path, URI_ESCAPED));
    if !query.is_empty() {
        text.push('?');
        text.extend(utf8_percent_encode(query, URI_ESCAPED));
    }
    text.parse().map_err(|_| {
        ApiError::UnreadableRequest("The request path and query string are too long.".into())
    })
}

fn body(body: Option<String>, is_base64_encoded: bool) -> Result<Body, ApiError> {
    match body {
        None => Ok(Body::Empty),
        Some(text) if !is_base64_encoded => Ok(Body::Text(text)),
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map(Body::Binary)
            .map_err(|_| {
                ApiError::UnreadableRequest(
                    "The request body is marked base64-encoded but is not valid base64.".into(),
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v2(raw_path: &str, raw_query: &str) -> Value {
        json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": raw_path,
            "rawQueryString": raw_query,
            "headers": {"host": "x y", "x-forwarded-proto": "no such:scheme"},
            "requestContext": {
                "http": {"method": "GET", "path": raw_path, "protocol": "HTTP/1.1",
                         "sourceIp": "192.0.2.1", "userAgent": "t"},
                "requestId": "r", "routeKey": "$default", "stage": "$default"
            },
            "isBase64Encoded": false
        })
    }

    fn read(event: Value) -> (Format, Result<Request, ApiError>) {
        super::read(&event.to_string())
    }

    #[test]
    fn query_strings_a_uri_cannot_hold_are_percent_encoded_and_read_the_same() {
        for (raw, name, value) in [
            ("a=\"", "a", "\""),
            ("limit=<5>", "limit", "<5>"),
            ("limit=1&cursor=\"abc\"", "cursor", "\"abc\""),
            ("limit=1 2", "limit", "1 2"),
            ("a=%zz{}|^`\\", "a", "%zz{}|^`\\"),
            ("a=é", "a", "é"),
        ] {
            let (format, request) = read(v2("/plants", raw));
            assert_eq!(format, Format::V2);
            let request = request.unwrap_or_else(|error| panic!("{raw}: {error:?}"));
            let query = request.query_string_parameters_ref().unwrap();
            assert_eq!(query.first(name), Some(value), "{raw}");
            assert_eq!(request.uri().path(), "/plants");
        }
    }

    #[test]
    fn paths_a_uri_cannot_hold_are_percent_encoded_and_rooted() {
        for (raw, encoded) in [
            ("/plants", "/plants"),
            ("/pla nts\"", "/pla%20nts%22"),
            ("plants", "/plants"),
            ("", "/"),
            ("//x:1", "//x:1"),
        ] {
            let request = read(v2(raw, "")).1.unwrap();
            assert_eq!(request.uri().path(), encoded, "{raw}");
            assert_eq!(request.raw_http_path(), raw);
        }
    }

    fn unreadable(event: Value) -> String {
        match read(event).1 {
            Err(ApiError::UnreadableRequest(message)) => message,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn what_http_cannot_carry_is_a_400_naming_it() {
        let mut event = v2("/plants", "");
        event["headers"]["x-bad"] = json!("a\nb");
        assert!(unreadable(event).contains("`x-bad`"));
        let mut event = v2("/plants", "");
        event["headers"]["bad name"] = json!("a");
        assert!(unreadable(event).contains("name"));
        let mut event = v2("/plants", "");
        event["body"] = json!("not base64!");
        event["isBase64Encoded"] = json!(true);
        assert!(unreadable(event).contains("base64"));
        assert!(unreadable(json!([1, 2])).contains("API Gateway"));
        assert!(unreadable(v2(&"/a".repeat(40_000), "")).contains("too long"));
    }

    #[test]
    fn each_format_is_answered_in_its_own_shape() {
        let response = Response::builder()
            .status(201)
            .body(Body::Text("{}".into()))
            .unwrap();
        let v2 = serde_json::to_value(Format::V2.answer(response)).unwrap();
        assert_eq!(v2["statusCode"], 201);
        assert_eq!(v2["body"], "{}");
        assert_eq!(v2["cookies"], json!([]));
        let response = Response::builder().status(400).body(Body::Empty).unwrap();
        let v1 = serde_json::to_value(Format::V1.answer(response)).unwrap();
        assert_eq!(v1["statusCode"], 400);
        assert!(v1.get("cookies").is_none());
    }
}
