//! Responses as the tests read them, and the assertions they share.

use lambda_http::http::HeaderMap;
use plant_store::event::InvocationResponse;
use serde_json::{Value, json};

use crate::TestApp;

/// A response with its body parsed as JSON.
#[derive(Debug)]
pub struct TestResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
}

impl From<InvocationResponse> for TestResponse {
    fn from(response: InvocationResponse) -> Self {
        Self::from_lambda_response(&serde_json::to_value(response).unwrap())
    }
}

impl TestResponse {
    /// An HTTP answer: its body as JSON, or as a string if it is none.
    pub fn new(status: u16, headers: HeaderMap, body: &str) -> Self {
        let body = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned()));
        Self { status, headers, body }
    }

    /// The HTTP response inside a Lambda response document: API Gateway's
    /// and function URLs' `headers` (and REST's `multiValueHeaders`), and
    /// the body parsed as JSON.
    pub fn from_lambda_response(response: &Value) -> Self {
        let mut headers = HeaderMap::new();
        for field in ["headers", "multiValueHeaders"] {
            for (name, value) in response[field].as_object().into_iter().flatten() {
                let values = value.as_array().cloned().unwrap_or_else(|| vec![value.clone()]);
                for value in values {
                    let name: lambda_http::http::HeaderName = name.parse().unwrap();
                    let value = value.as_str().unwrap().parse().unwrap();
                    if !headers.get_all(&name).iter().any(|present| *present == value) {
                        headers.append(name, value);
                    }
                }
            }
        }
        let status = response["statusCode"].as_u64().unwrap() as u16;
        let body = response["body"].as_str().unwrap_or_default();
        Self::new(status, headers, body)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|value| value.to_str().unwrap())
    }

    /// Asserts the contract's Error body: `error` equals the status, and the
    /// message is a sentence that contains `mentions`.
    pub fn assert_error(&self, status: u16, mentions: &str) {
        assert_eq!(self.status, status, "body: {}", self.body);
        assert_eq!(self.header("content-type"), Some("application/json"));
        assert_eq!(self.body["error"], json!(status), "body: {}", self.body);
        let message = self.body["message"].as_str().expect("message is a string");
        assert!(message.contains(mentions), "message {message:?} should mention {mentions:?}");
        let fields = self.body.as_object().unwrap().len();
        assert_eq!(fields, 2, "only error and message: {}", self.body);
    }
}

/// Asserts that a POST with this Authorization is accepted (200).
pub async fn assert_accepted(app: &TestApp, authorization: &str, case: &str) {
    let response = app.post(authorization, r#"{"id": 1, "name": "Fern"}"#).await;
    assert_eq!(response.status, 200, "{case}: {}", response.body);
}

/// A POST with this Authorization gets 401 with `challenge`, echoes no token, writes nothing.
pub async fn assert_refused(app: &TestApp, authorization: &str, challenge: &str, case: &str) {
    let response = app.post(authorization, r#"{"id": 1, "name": "Fern"}"#).await;
    assert_eq!(response.status, 401, "{case}: {}", response.body);
    response.assert_error(401, "token");
    assert_eq!(response.header("www-authenticate"), Some(challenge), "{case}");
    let token = authorization.split_whitespace().last().unwrap_or_default();
    if token.len() > 8 {
        assert!(!response.body.to_string().contains(token), "{case}: token echoed");
    }
    assert!(app.stored_items().await.is_empty(), "{case}: something was written");
}
