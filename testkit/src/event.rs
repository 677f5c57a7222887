//! The API Gateway events the tests send.

use plant_store_local_support::documented::Documented;
use serde_json::{Value, json};

/// A request as a payload format 2.0 event.
pub struct ApiGatewayEvent {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Option<String>,
}

impl ApiGatewayEvent {
    pub fn new(method: &str, path_and_query: &str) -> Self {
        let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
        let (method, path, query) = (method.to_owned(), path.to_owned(), query.to_owned());
        Self { method, path, query, headers: Vec::new(), body: None }
    }

    /// `POST /plants` of this JSON body.
    pub fn create_plant(authorization: &str, body: &str) -> Self {
        Self::new("POST", "/plants")
            .header("authorization", authorization)
            .header("content-type", "application/json")
            .body(body)
    }

    /// `GET /plants` with this query string (may be empty).
    pub fn list_plants(authorization: &str, query: &str) -> Self {
        let path = if query.is_empty() { "/plants".to_owned() } else { format!("/plants?{query}") };
        Self::new("GET", &path).header("authorization", authorization)
    }

    /// `operation`'s example request (openapi.yaml's), with this Authorization.
    pub fn example(operation: &Documented, authorization: Option<&str>) -> Self {
        let mut event = Self::new(&operation.method, &operation.target);
        if let Some(authorization) = authorization {
            event = event.header("authorization", authorization);
        }
        match &operation.body {
            Some(body) => event.header("content-type", "application/json").body(body),
            None => event,
        }
    }

    /// The same request with another method.
    pub fn method(self, method: &str) -> Self {
        Self { method: method.to_owned(), ..self }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn body(mut self, body: &str) -> Self {
        self.body = Some(body.to_owned());
        self
    }

    /// The event as a function URL delivers it: [`Self::event_as`].
    pub fn event(self) -> String {
        self.event_as("function-url")
    }

    /// The event as `edge` (a folder of `events/`: [`EDGES`]) delivers it,
    /// made from a real one with this request's method, path, query,
    /// headers and body: a REST API's with each header's values in
    /// `multiValueHeaders` and its last in `headers`, and at stage `Prod`;
    /// an HTTP API's at stage `prod` and a function URL's with repeated
    /// headers joined by a comma, their `Cookie` pairs in `cookies`.
    pub fn event_as(self, edge: &str) -> String {
        let file = format!("{}/../events/{edge}/list-plants.json", env!("CARGO_MANIFEST_DIR"));
        let mut event: Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let (mut single, mut multi) = (serde_json::Map::new(), serde_json::Map::new());
        for (name, value) in self.headers {
            let values = multi.entry(name.clone()).or_insert_with(|| json!([]));
            values.as_array_mut().unwrap().push(json!(value));
            let value = match (edge, single.get(&name).and_then(Value::as_str)) {
                ("rest-api", _) | (_, None) => value,
                (_, Some(previous)) => format!("{previous},{value}"),
            };
            single.insert(name, json!(value));
        }
        let proxy = json!({"proxy": self.path.trim_start_matches('/')});
        (event["headers"], event["body"], event["isBase64Encoded"]) =
            (json!(single), json!(self.body), json!(false));
        if edge == "rest-api" {
            let pairs = form_urlencoded::parse(self.query.as_bytes()).into_owned();
            let (mut query, mut queries) = (serde_json::Map::new(), serde_json::Map::new());
            for (name, value) in pairs {
                let values = queries.entry(name.clone()).or_insert_with(|| json!([]));
                values.as_array_mut().unwrap().push(json!(value));
                query.insert(name, json!(value));
            }
            (event["httpMethod"], event["path"]) = (json!(self.method), json!(self.path));
            (event["multiValueHeaders"], event["pathParameters"]) = (json!(multi), proxy);
            (event["queryStringParameters"], event["multiValueQueryStringParameters"]) =
                (json!(query), json!(queries));
            event["requestContext"]["path"] = json!(format!("/Prod{}", self.path));
            return event.to_string();
        }
        let raw_path = if edge == "http-api" { format!("/prod{}", self.path) } else { self.path };
        event.as_object_mut().unwrap().remove("queryStringParameters");
        if edge == "http-api" {
            event["pathParameters"] = proxy;
        }
        if let Some(cookie) = event["headers"].as_object_mut().unwrap().remove("cookie") {
            event["cookies"] = json!(cookie.as_str().unwrap().split("; ").collect::<Vec<_>>());
        }
        let http = &mut event["requestContext"]["http"];
        (http["method"], http["path"]) = (json!(self.method), json!(raw_path));
        (event["rawPath"], event["rawQueryString"]) = (json!(raw_path), json!(self.query));
        event.to_string()
    }
}

/// The edges whose events `events/` holds, and [`ApiGatewayEvent::event_as`]
/// makes.
pub const EDGES: [&str; 3] = ["rest-api", "http-api", "function-url"];
