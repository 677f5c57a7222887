//! The API Gateway events the tests send.

use serde_json::{Value, json};

/// A request as an HTTP API (v2) event, converted exactly as the function
/// converts the events Lambda delivers ([`request`]).
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
        Self {
            method: method.to_owned(),
            path: path.to_owned(),
            query: query.to_owned(),
            headers: Vec::new(),
            body: None,
        }
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

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn body(mut self, body: &str) -> Self {
        self.body = Some(body.to_owned());
        self
    }

    /// The event as Lambda delivers it (what the Runtime API hands out).
    pub fn event(self) -> String {
        // API Gateway joins repeated headers with a comma in v2 events.
        let mut headers = serde_json::Map::new();
        for (name, value) in &self.headers {
            let joined = match headers.get(name).and_then(Value::as_str) {
                Some(previous) => format!("{previous},{value}"),
                None => value.clone(),
            };
            headers.insert(name.clone(), json!(joined));
        }
        let event = json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": self.path,
            "rawQueryString": self.query,
            "headers": headers,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "api-id",
                "domainName": "api-id.execute-api.us-east-1.amazonaws.com",
                "domainPrefix": "api-id",
                "http": {
                    "method": self.method,
                    "path": self.path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "192.0.2.1",
                    "userAgent": "plant-store-tests"
                },
                "requestId": "test-request",
                "routeKey": "$default",
                "stage": "$default",
                "time": "22/Nov/2026:10:00:00 +0000",
                "timeEpoch": 1_795_000_000_000u64
            },
            "body": self.body,
            "isBase64Encoded": false
        });
        event.to_string()
    }
}
