//! The API Gateway events the tests send.

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

    /// The event as Lambda delivers it: a real 2.0 event (`events/`, a
    /// function URL's) with this request's method, path, query, headers
    /// (repeated ones joined with a comma, as API Gateway joins them) and body.
    pub fn event(self) -> String {
        let mut event: Value =
            serde_json::from_str(include_str!("../../events/function-url/list-plants.json"))
                .unwrap();
        let mut headers = serde_json::Map::new();
        for (name, value) in self.headers {
            let joined = match headers.get(&name).and_then(Value::as_str) {
                Some(previous) => format!("{previous},{value}"),
                None => value,
            };
            headers.insert(name, json!(joined));
        }
        event.as_object_mut().unwrap().remove("queryStringParameters");
        let http = &mut event["requestContext"]["http"];
        (http["method"], http["path"]) = (json!(self.method), json!(self.path));
        (event["rawPath"], event["rawQueryString"]) = (json!(self.path), json!(self.query));
        (event["headers"], event["body"]) = (Value::Object(headers), json!(self.body));
        event.to_string()
    }
}
