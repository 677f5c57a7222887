//! The invocation's event (a REST API's, an HTTP API's, a function URL's)
//! read in one pass into an `http::Request` on the path it is routed on,
//! and the answer in the event's shape. Not lambda_http's reading, which
//! panics on some client input (docs/contract.md): here each is a request or a 400.

use std::borrow::Cow;
use std::collections::BTreeMap;

use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayV2httpResponse};
use axum::body::to_bytes;
use axum::extract::Request;
use axum::response::Response;
use base64::Engine;
use lambda_http::Body;
use lambda_http::aws_lambda_events;
use lambda_http::http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Deserialize, Serialize};

use crate::domain::limits::{MAX_ECHOED_CHARS, MAX_HEADER_BYTES, MAX_HEADERS};
use crate::error::ApiError;

/// The event as the Runtime API hands it over: any JSON, kept as text, so
/// that no event fails the invocation before the function reads it.
pub type Incoming = Box<serde_json::value::RawValue>;

/// The response shape the event asks for: payload format 1.0 (REST APIs,
/// HTTP APIs set to 1.0) or 2.0 (HTTP APIs, function URLs). An event of no
/// known shape gets 1.0's, which every integration reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    V1,
    V2,
}

impl Format {
    /// `response` in this format: its body is text (JSON), or none.
    pub async fn answer(self, response: Response) -> InvocationResponse {
        let (parts, body) = response.into_parts();
        let text = to_bytes(body, usize::MAX).await.unwrap_or_default();
        let body = (!text.is_empty()).then(|| Body::Text(String::from_utf8_lossy(&text).into()));
        let status = i64::from(parts.status.as_u16());
        match self {
            Self::V1 => {
                let mut answer = ApiGatewayProxyResponse::default();
                (answer.status_code, answer.headers, answer.body) = (status, parts.headers, body);
                InvocationResponse::V1(answer)
            }
            Self::V2 => {
                let mut answer = ApiGatewayV2httpResponse::default();
                (answer.status_code, answer.headers, answer.body) = (status, parts.headers, body);
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
/// cannot be one.
pub fn read(event: &str) -> (Format, Result<Request, Unreadable>) {
    match crate::domain::from_object::<Event>(event) {
        Ok(event) => {
            let (format, origin) = (event.format(), event.origin());
            (format, event.request().map_err(|error| Unreadable { error, origin }))
        }
        Err(_) => (Format::V1, Err(Unreadable { error: not_an_event(), origin: None })),
    }
}

/// An event that is no request: why (a 4xx), and the origin it names, if
/// any, for the answer's CORS headers.
pub struct Unreadable {
    pub error: ApiError,
    pub origin: Option<HeaderValue>,
}

fn not_an_event() -> ApiError {
    ApiError::UnreadableRequest("The request is not one API Gateway or a function URL delivers.")
}

/// What the function reads of an event of any of the three shapes; a
/// field of another shape is `None`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound = "'de: 'a")]
struct Event<'a> {
    version: Option<Text<'a>>,
    /// Payload format 1.0 (REST APIs): the method and the path.
    http_method: Option<Text<'a>>,
    path: Option<Text<'a>>,
    query_string_parameters: Option<Pairs<'a, Text<'a>>>,
    multi_value_query_string_parameters: Option<Pairs<'a, Vec<Text<'a>>>>,
    /// A REST API's every value of each header (its `headers`: the last).
    multi_value_headers: Option<Pairs<'a, Vec<Option<Text<'a>>>>>,
    /// Payload format 2.0 (HTTP APIs, function URLs): the path, query and cookies.
    raw_path: Option<Text<'a>>,
    raw_query_string: Option<Text<'a>>,
    cookies: Option<Vec<Text<'a>>>,
    headers: Option<Pairs<'a, Option<Text<'a>>>>,
    path_parameters: Option<Pairs<'a, Text<'a>>>,
    request_context: Option<Context<'a>>,
    body: Option<Text<'a>>,
    #[serde(default)]
    is_base64_encoded: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", bound = "'de: 'a")]
struct Context<'a> {
    /// 2.0: the method, and the route API Gateway matched (`ANY /{proxy+}`).
    http: Option<Http<'a>>,
    route_key: Option<Text<'a>>,
    /// 1.0: the route API Gateway matched, and the path with the stage.
    resource_path: Option<Text<'a>>,
    path: Option<Text<'a>>,
    stage: Option<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(bound = "'de: 'a")]
struct Http<'a> {
    method: Text<'a>,
}

/// A JSON string, borrowed where it has no escapes.
#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

impl std::borrow::Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// A JSON object's members (ordered by name: no hashing for a few members).
type Pairs<'a, V> = BTreeMap<Text<'a>, V>;

impl<'a> Event<'a> {
    /// API Gateway marks payload format 2.0 with `"version": "2.0"`.
    fn format(&self) -> Format {
        match self.version.as_deref() {
            Some("2.0") => Format::V2,
            _ => Format::V1,
        }
    }

    /// The `Origin` header, if the event holds one HTTP can carry.
    fn origin(&self) -> Option<HeaderValue> {
        let named = |name: &Text| name.0.eq_ignore_ascii_case("origin");
        let single = self.headers.iter().flatten().find(|(name, _)| named(name));
        let single = single.and_then(|(_, value)| value.as_ref());
        let multi = self.multi_value_headers.iter().flatten().find(|(name, _)| named(name));
        let value = single.or_else(|| multi.and_then(|(_, values)| values.first()?.as_ref()));
        value.and_then(|Text(value)| HeaderValue::from_str(value).ok())
    }

    fn request(self) -> Result<Request, ApiError> {
        let format = self.format();
        let context = self.request_context.unwrap_or_default();
        // Each format's own: aws_lambda_events (cargo lambda's emulator)
        // writes a 2.0 event with `httpMethod: "GET"` whatever the method.
        let method = match (format, &self.http_method, &context.http) {
            (Format::V1, Some(method), _) | (Format::V2, _, Some(Http { method })) => method,
            _ => return Err(not_an_event()),
        };
        let method = Method::from_bytes(method.as_bytes()).map_err(|_| not_an_event())?;
        let raw = self.raw_path.as_deref().or(self.path.as_deref()).unwrap_or_default();
        // The path the client sent: for a REST API, with the stage on the
        // execute-api domain, read only where it ends with the event's path
        // (sam local puts the resource there).
        let sent =
            context.path.as_deref().filter(|sent| self.raw_path.is_none() && sent.ends_with(raw));
        let (multi, single) =
            (self.multi_value_query_string_parameters, self.query_string_parameters);
        let query = self
            .raw_query_string
            .map_or_else(|| query_string(multi, single).into(), |query| query.0);
        let route = route_path(&context, self.path_parameters.as_ref(), raw);
        let mut request = Request::new(body(self.body.map(|body| body.0), self.is_base64_encoded)?);
        *request.method_mut() = method;
        *request.uri_mut() = uri(&route, &query)?;
        *request.headers_mut() = headers(self.headers, self.multi_value_headers, self.cookies)?;
        request.extensions_mut().insert(ClientPath(encoded(sent.unwrap_or(raw), PATH_ESCAPED)));
        Ok(request)
    }
}

/// A REST API's query parameters as a query string: each value of the
/// multi-value parameters, else of the single-value ones.
fn query_string<'a>(
    multi: Option<Pairs<'a, Vec<Text<'a>>>>,
    single: Option<Pairs<'a, Text<'a>>>,
) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    let multi = multi.filter(|multi| !multi.is_empty());
    let single = single.filter(|_| multi.is_none()).into_iter().flatten();
    for (name, values) in multi.into_iter().flatten().chain(single.map(|(n, v)| (n, vec![v]))) {
        values.iter().for_each(|value| _ = query.append_pair(&name, value));
    }
    query.finish()
}

/// The request's headers: every value the event holds, in either map and
/// under any spelling of a name, once (docs/contract.md: every value the
/// firewall may have keyed), and cookies as one `Cookie` (RFC 6265, 5.4).
/// Each must be one HTTP can carry, and the whole within what WAF inspects.
fn headers<'a>(
    single: Option<Pairs<'a, Option<Text<'a>>>>,
    multi: Option<Pairs<'a, Vec<Option<Text<'a>>>>>,
    cookies: Option<Vec<Text<'a>>>,
) -> Result<HeaderMap, ApiError> {
    let mut headers = HeaderMap::new();
    // `headers` repeats a value of `multiValueHeaders`, or adds one.
    let multi = multi.into_iter().flatten().map(|(name, values)| (name, values, false));
    let single = single.into_iter().flatten().map(|(name, value)| (name, vec![value], true));
    let cookie =
        cookies.map(|jar| (Text("cookie".into()), vec![Some(Text(jar.join("; ").into()))], false));
    for (name, values, repeated) in multi.chain(single).chain(cookie) {
        let header = HeaderName::from_bytes(name.0.as_bytes()).map_err(|_| {
            ApiError::UnreadableRequest("A request header has a name that HTTP does not allow.")
        })?;
        for Text(value) in values.into_iter().flatten() {
            let value = HeaderValue::from_str(&value).map_err(|_| {
                match name.0.len() <= MAX_ECHOED_CHARS {
                    true => ApiError::UnreadableHeader(header.to_string()),
                    false => ApiError::UnreadableRequest(
                        "A request header has a value that HTTP does not allow.",
                    ),
                }
            })?;
            if !(repeated && headers.get_all(&header).iter().any(|held| *held == value)) {
                headers.append(&header, value);
            }
        }
    }
    // Each as HTTP/1.1 writes it: `name: value` and CRLF.
    let bytes: usize =
        headers.iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum();
    let inspected = headers.len() <= MAX_HEADERS && bytes <= MAX_HEADER_BYTES;
    inspected.then_some(headers).ok_or(ApiError::HeadersUninspected)
}

/// What a URI keeps as it is: RFC 3986's unreserved and sub-delims, `:`,
/// `@`, `/`, `?` and `%` (an escape stays one); the rest is percent-encoded.
const URI_ESCAPED: &AsciiSet = &{
    let kept = b"-._~!$&'()*+,;=:@/?%";
    let (mut set, mut index) = (NON_ALPHANUMERIC.remove(kept[0]), 1);
    while index < kept.len() {
        set = set.remove(kept[index]);
        index += 1;
    }
    set
};

/// The same for a path, whose `?` would begin the query.
const PATH_ESCAPED: &AsciiSet = &URI_ESCAPED.add(b'?');

/// `text` (rooted) with what `escaped` sets percent-encoded.
fn encoded(text: &str, escaped: &'static AsciiSet) -> String {
    let mut rooted = String::with_capacity(text.len() + 1);
    if !text.starts_with('/') {
        rooted.push('/');
    }
    rooted.extend(utf8_percent_encode(text, escaped));
    rooted
}

/// The request's URI: the path it is routed on and the query.
fn uri(path: &str, query: &str) -> Result<Uri, ApiError> {
    let mut text = encoded(path, PATH_ESCAPED);
    if !query.is_empty() {
        text.push('?');
        text.extend(utf8_percent_encode(query, URI_ESCAPED));
    }
    text.parse()
        .map_err(|_| ApiError::UnreadableRequest("The request path and query string are too long."))
}

fn body(body: Option<Cow<str>>, is_base64_encoded: bool) -> Result<axum::body::Body, ApiError> {
    let not_base64 = "The request body is marked base64-encoded but is not valid base64.";
    match body {
        None => Ok(axum::body::Body::empty()),
        Some(text) if !is_base64_encoded => Ok(text.into_owned().into()),
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded.as_bytes())
            .map(Into::into)
            .map_err(|_| ApiError::UnreadableRequest(not_base64)),
    }
}

/// The path the client sent (its URI's is the one it is routed on,
/// [`route_path`]), percent-encoded as in a URI.
#[derive(Debug, Clone)]
pub struct ClientPath(pub(crate) String);

/// The path routed on (docs/contract.md): the route API Gateway matched
/// (`routeKey`, a REST API's resource), its greedy `{name+}` by its value;
/// else (`$default`, a function URL) the event's path without the stage.
/// Either without a trailing slash.
fn route_path(context: &Context, parameters: Option<&Pairs<Text>>, raw: &str) -> String {
    let matched = match (&context.route_key, &context.resource_path) {
        (Some(key), _) => key.split_once(' ').map(|(_, path)| path),
        (None, path) => path.as_deref(),
    };
    let path = match matched.filter(|path| *path != "$default") {
        // A greedy `{name+}` (the last segment): what it matched.
        Some(path) => match path.rsplit_once('{').filter(|(_, greedy)| greedy.ends_with("+}")) {
            Some((prefix, greedy)) => {
                let name = &greedy[..greedy.len() - 2];
                let value = parameters.and_then(|parameters| parameters.get(name));
                format!("{prefix}{}", value.map_or("", |value| &value.0))
            }
            None => path.to_owned(),
        },
        None => {
            let stage = context.stage.as_deref();
            let unstaged = stage.and_then(|stage| raw.strip_prefix('/')?.strip_prefix(stage));
            let unstaged = unstaged.filter(|rest| rest.len() > 1 && rest.starts_with('/'));
            unstaged.unwrap_or(raw).to_owned()
        }
    };
    match path.strip_suffix('/') {
        Some(trimmed) if !trimmed.is_empty() => trimmed.to_owned(),
        _ => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

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
        request.map_err(|unreadable| unreadable.error.to_string())
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
        let fields_in_order = json!(["2.0", null, null, null, null, null, "/plants", null, null,
            null, null, {"http": {"method": "GET"}}, null, false]);
        assert!(read(fields_in_order).unwrap_err().contains("API Gateway"));
        assert!(read(v2(&"/a".repeat(40_000), "")).unwrap_err().contains("too long"));
    }

    /// A 2.0 event's method is its context's, whatever a top-level
    /// `httpMethod` says (cargo lambda's emulator writes "GET" there).
    #[test]
    fn a_2_0_events_method_is_its_contexts() {
        let mut event = v2("/plants", "");
        (event["httpMethod"], event["requestContext"]["http"]["method"]) =
            (json!("GET"), json!("POST"));
        assert_eq!(read(event).unwrap().method(), Method::POST);
    }
}
