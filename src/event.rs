//! The invocation's event: what API Gateway (a REST API, or an HTTP API) or
//! a Lambda function URL delivers, read into an `http::Request`, and the
//! response written back in the shape that event asks for.
//!
//! The conversion is the project's own, not lambda_http's, which panics on
//! some client input (a `"` in `rawQueryString`, a malformed `Host`, a body
//! flagged base64 that is not) and so fails the invocation: here every
//! event becomes a request or a 400 naming the problem (docs/contract.md).

use std::borrow::Cow;

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
            Ok(Version { version: Some(version) }) if version == "2.0" => Self::V2,
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
    // An HTTP API's event, the common one, in one pass; any other, in two.
    let v2 = serde_json::from_str::<ApiGatewayV2httpRequest>(event).ok();
    if let Some(v2) = v2.filter(|v2| v2.version.as_deref() == Some("2.0")) {
        return (Format::V2, v2_request(v2));
    }
    let format = Format::of(event);
    let request = match format {
        Format::V1 => serde_json::from_str(event).map(v1_request),
        Format::V2 => serde_json::from_str(event).map(v2_request),
    };
    (format, request.unwrap_or_else(|_| Err(why_unreadable(event))))
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
    ApiError::UnreadableRequest("The request is not one API Gateway or a function URL delivers.")
}

/// Every header name and value must be one HTTP can carry (no control
/// characters; names are tokens). Values may be one string or a list.
fn check_headers(headers: Option<&Value>) -> Result<(), ApiError> {
    let Some(Value::Object(headers)) = headers else {
        return Ok(());
    };
    for (name, values) in headers {
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            let message = "A request header has a name that HTTP does not allow.";
            return Err(ApiError::UnreadableRequest(message));
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
            return Err(if name.len() <= MAX_ECHOED_CHARS {
                ApiError::UnreadableHeader(header.to_string())
            } else {
                ApiError::UnreadableRequest(
                    "A request header has a value that HTTP does not allow.",
                )
            });
        }
    }
    Ok(())
}

/// A REST API (or payload format 1.0) event.
fn v1_request(event: ApiGatewayProxyRequest) -> Result<Request, ApiError> {
    let raw_path = event.path.unwrap_or_default();
    // The path the client sent: with the stage on the execute-api domain. Read
    // only where it ends with the API's path (sam local puts the resource there).
    let client_path = match event.request_context.path.clone() {
        Some(path) if path.ends_with(&raw_path) => path,
        _ => raw_path.clone(),
    };
    let query = if event.multi_value_query_string_parameters.is_empty() {
        event.query_string_parameters
    } else {
        event.multi_value_query_string_parameters
    };
    let mut headers = event.multi_value_headers;
    headers.extend(event.headers);
    let uri = uri(&client_path, &query.to_query_string())?;
    let body = body(event.body, event.is_base64_encoded)?;
    Ok(request(event.http_method, uri, headers, body)
        .with_raw_http_path(raw_path)
        .with_path_parameters(event.path_parameters)
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
    let (uri, method) = (uri(&raw_path, &raw_query)?, event.request_context.http.method.clone());
    let body = body(event.body, event.is_base64_encoded)?;
    Ok(request(method, uri, event.headers, body)
        .with_raw_http_path(raw_path)
        .with_path_parameters(event.path_parameters)
        .with_query_string_parameters(query)
        .with_request_context(RequestContext::ApiGatewayV2(event.request_context)))
}

fn request(method: Method, uri: Uri, headers: HeaderMap, body: Body) -> Request {
    let mut request = Request::new(body);
    (*request.method_mut(), *request.uri_mut()) = (method, uri);
    *request.headers_mut() = headers;
    request
}

/// What a URI keeps as it is: RFC 3986's unreserved and sub-delims, `:`,
/// `@`, `/`, `?` and `%` (an existing escape stays one); everything else
/// is percent-encoded.
const URI_ESCAPED: &AsciiSet = &{
    let kept = b"-._~!$&'()*+,;=:@/?%";
    let (mut set, mut index) = (NON_ALPHANUMERIC.remove(kept[0]), 1);
    while index < kept.len() {
        set = set.remove(kept[index]);
        index += 1;
    }
    set
};

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
    text.parse()
        .map_err(|_| ApiError::UnreadableRequest("The request path and query string are too long."))
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
                    "The request body is marked base64-encoded but is not valid base64.",
                )
            }),
    }
}

/// The path the route is matched on. Where API Gateway matched a route of
/// its own, that route's path: an HTTP API's `routeKey` (`ANY /{proxy+}`), a
/// REST API's resource path, with a greedy `{name+}` replaced by the value
/// API Gateway gives it in `pathParameters`; so that a custom domain's API
/// mapping (`/v1`, kept in the event's path) changes nothing. Otherwise (the
/// `$default` route, a function URL) the event's own path, without API
/// Gateway's stage prefix. Either without a trailing slash.
pub fn route_path(request: &Request) -> Cow<'_, str> {
    let (matched, stage) = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => (
            context.route_key.as_deref().and_then(|key| Some(key.split_once(' ')?.1)),
            context.stage.as_deref(),
        ),
        Some(RequestContext::ApiGatewayV1(context)) => {
            (context.resource_path.as_deref(), context.stage.as_deref())
        }
        _ => (None, None),
    };
    let path = match matched {
        // A greedy `{name+}` (the last segment): what it matched.
        Some(path) => match path.rsplit_once('{').filter(|(_, greedy)| greedy.ends_with("+}")) {
            Some((prefix, greedy)) => {
                let parameters = request.path_parameters_ref();
                let matched = parameters.and_then(|found| found.first(&greedy[..greedy.len() - 2]));
                Cow::Owned(format!("{prefix}{}", matched.unwrap_or_default()))
            }
            None => Cow::Borrowed(path),
        },
        None => {
            let raw = match request.raw_http_path() {
                "" => request.uri().path(),
                raw => raw,
            };
            let unstaged = stage.and_then(|stage| raw.strip_prefix('/')?.strip_prefix(stage));
            let unstaged = unstaged.filter(|rest| rest.len() > 1 && rest.starts_with('/'));
            Cow::Borrowed(unstaged.unwrap_or(raw))
        }
    };
    match path.strip_suffix('/') {
        Some(trimmed) if !trimmed.is_empty() => Cow::Owned(trimmed.to_owned()),
        _ => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An HTTP API event with this path and raw query string, and a `Host`
    /// and `X-Forwarded-Proto` that are no URI's.
    fn v2(raw_path: &str, raw_query: &str) -> Value {
        json!({"version": "2.0", "routeKey": "$default", "rawPath": raw_path,
            "rawQueryString": raw_query, "isBase64Encoded": false,
            "headers": {"host": "x y", "x-forwarded-proto": "no such:scheme"},
            "requestContext": {"http": {"method": "GET", "path": raw_path, "protocol": "HTTP/1.1",
                "sourceIp": "192.0.2.1", "userAgent": "t"}, "requestId": "r",
                "routeKey": "$default", "stage": "$default"}})
    }

    fn read(event: Value) -> Result<Request, String> {
        let (format, request) = super::read(&event.to_string());
        assert_eq!(format, if event["version"] == "2.0" { Format::V2 } else { Format::V1 });
        request.map_err(|error| error.to_string())
    }

    #[test]
    fn what_http_cannot_carry_is_a_400_naming_it() {
        let with = |key: &str, value: Value| {
            let mut event = v2("/plants", "");
            event[key] = value;
            read(event).unwrap_err()
        };
        assert!(with("headers", json!({"x-bad": "a\nb"})).contains("`x-bad`"));
        assert!(with("headers", json!({"bad name": "a"})).contains("name"));
        let mut base64 = v2("/plants", "");
        (base64["body"], base64["isBase64Encoded"]) = (json!("not base64!"), json!(true));
        assert!(read(base64).unwrap_err().contains("base64"));
        assert!(read(json!([1, 2])).unwrap_err().contains("API Gateway"));
        assert!(read(v2(&"/a".repeat(40_000), "")).unwrap_err().contains("too long"));
    }
}
