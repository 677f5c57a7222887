//! Hostile input, table-driven: each request its 4xx with the Error body
//! naming the problem, nothing written; the cases at the limits accepted.

use plant_store_testkit::{ApiGatewayEvent, EDGES, TestApp, bearer, operations, token};
use serde_json::{Value, json};

fn post(body: impl Into<String>) -> String {
    post_as("application/json", body)
}

fn post_as(content_type: &str, body: impl Into<String>) -> String {
    let post = ApiGatewayEvent::new("POST", "/plants").header("authorization", &bearer("alice"));
    post.header("content-type", content_type).body(&body.into()).event()
}

fn get(query: &str) -> String {
    ApiGatewayEvent::list_plants(&bearer("alice"), query).event()
}

/// A REST API event with this body base64-encoded, as binary.
fn binary_post(bytes: &[u8]) -> String {
    use base64::Engine;
    let event = ApiGatewayEvent::create_plant(&bearer("alice"), "").event_as("rest-api");
    let mut event: Value = serde_json::from_str(&event).unwrap();
    let body = base64::engine::general_purpose::STANDARD.encode(bytes);
    (event["body"], event["isBase64Encoded"]) = (json!(body), json!(true));
    event.to_string()
}

fn nested(levels: usize) -> String {
    format!(r#"{{"id": 1, "name": "deep", "extra": {}{}}}"#, "[".repeat(levels), "]".repeat(levels))
}

/// The cases, each with what it must get: its name, the event as Lambda
/// delivers it, the status and, for a 4xx, what the message must mention.
#[derive(Default)]
struct Cases(Vec<(String, String, u16, &'static str)>);

impl Cases {
    fn add(&mut self, name: &str, request: String, status: u16, mentions: &'static str) {
        self.0.push((name.to_owned(), request, status, mentions));
    }
}

/// Broken or wrongly shaped bodies, and their sizes and content types.
fn body_cases(cases: &mut Cases) {
    let (not_json, not_object) = ("not valid JSON", "JSON object");
    for (name, body, mentions) in [
        ("truncated JSON", r#"{"id": 1, "name": "Fe"#, not_json),
        ("trailing comma", r#"{"id": 1, "name": "Fern",}"#, not_json),
        ("unquoted keys", r#"{id: 1, name: "Fern"}"#, not_json),
        ("empty body", "", not_json),
        ("whitespace body", "   \n ", not_json),
        ("byte order mark", "\u{feff}{\"id\": 1, \"name\": \"Fern\"}", not_json),
        ("two JSON values", r#"{"id": 1, "name": "a"} {"id": 2, "name": "b"}"#, not_json),
        ("lone surrogate escape", r#"{"id": 1, "name": "\ud800"}"#, not_json),
        ("JSON array", r#"[{"id": 1, "name": "Fern"}]"#, not_object),
        ("JSON string", r#""Fern""#, not_object),
        ("JSON null", "null", not_object),
        ("JSON number", "42", not_object),
    ] {
        cases.add(name, post(body), 400, mentions);
    }
    cases.add("nesting 8,000 deep", post(nested(8_000)), 400, not_json);
    cases.add("nesting 10,000 deep", post(nested(10_000)), 413, "16384 bytes");
    let invalid_utf8 = binary_post(b"{\"id\": 1, \"name\": \"\xff\xfe\"}");
    cases.add("invalid UTF-8", invalid_utf8, 400, not_json);
    let pad = |id: i64, size: usize| {
        let base = json!({"id": id, "name": "Fern", "pad": ""}).to_string().len();
        json!({"id": id, "name": "Fern", "pad": "x".repeat(size - base)}).to_string()
    };
    cases.add("16 KiB body", post(pad(104, 16 * 1024)), 200, "");
    cases.add("16 KiB + 1 body", post(pad(1, 16 * 1024 + 1)), 413, "16384 bytes");
    cases.add("5 MB body", post(pad(1, 5 * 1024 * 1024)), 413, "16384 bytes");
    let types = [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json-patch+json",
        "",
        "json",
    ];
    for content_type in types {
        let request = post_as(content_type, r#"{"id": 1, "name": "Fern"}"#);
        cases.add(&format!("Content-Type {content_type:?}"), request, 415, "Content-Type");
    }
}

/// Each field's rules: names and tags at and past their limits, ids,
/// repeated, missing and mistyped fields.
fn field_cases(cases: &mut Cases) {
    for (name, body, status, mentions) in [
        ("name of 256 characters", json!({"id": 101, "name": "n".repeat(256)}), 200, ""),
        ("name of 256 emoji", json!({"id": 102, "name": "🌵".repeat(256)}), 200, ""),
        ("name of 257 characters", json!({"id": 1, "name": "n".repeat(257)}), 400, "`name`"),
        ("tag of 64 characters", json!({"id": 103, "name": "x", "tag": "t".repeat(64)}), 200, ""),
        (
            "tag of 65 characters",
            json!({"id": 1, "name": "x", "tag": "t".repeat(65)}),
            400,
            "`tag`",
        ),
        ("blank name", json!({"id": 1, "name": " \t "}), 400, "`name`"),
        ("empty name", json!({"id": 1, "name": ""}), 400, "`name`"),
        ("null name", json!({"id": 1, "name": null}), 400, "`name`"),
        ("empty tag", json!({"id": 1, "name": "x", "tag": ""}), 400, "`tag`"),
        ("tag as number", json!({"id": 1, "name": "x", "tag": 5}), 400, "`tag`"),
        ("NUL in name", json!({"id": 1, "name": "a\u{0}b"}), 400, "`name`"),
        ("unit separator in name", json!({"id": 1, "name": "a\u{1f}b"}), 400, "`name`"),
        ("DEL in name", json!({"id": 1, "name": "a\u{7f}b"}), 400, "`name`"),
        ("C1 NEL in name", json!({"id": 1, "name": "a\u{85}b"}), 400, "`name`"),
        ("tab in tag", json!({"id": 1, "name": "x", "tag": "a\tb"}), 400, "`tag`"),
        ("missing id", json!({"name": "Fern"}), 400, "`id`"),
        ("missing name", json!({"id": 1}), 400, "`name`"),
        ("name as array", json!({"id": 1, "name": ["Fern"]}), 400, "`name`"),
        ("tag as object", json!({"id": 1, "name": "Fern", "tag": {"a": 1}}), 400, "`tag`"),
    ] {
        cases.add(name, post(body.to_string()), status, mentions);
    }
    let ids =
        ["1.5", r#""7""#, "1e3", "7E0", "6547.0", "9223372036854775808", "-9223372036854775809"];
    for id in ids.into_iter().chain(["true", "null", "[]", "{}"]) {
        let body = format!(r#"{{"id": {id}, "name": "Fern"}}"#);
        cases.add(&format!("id {id}"), post(body), 400, "`id`");
    }
    for (name, body, mentions) in [
        ("duplicate id", r#"{"id": 1, "id": 2, "name": "Fern"}"#, "`id`"),
        ("duplicate name", r#"{"id": 1, "name": "a", "name": "b"}"#, "`name`"),
        ("duplicate tag", r#"{"id": 1, "name": "a", "tag": "x", "tag": "y"}"#, "`tag`"),
    ] {
        cases.add(name, post(body), 400, mentions);
    }
}

fn query_and_authorization_cases(cases: &mut Cases) {
    // Every kind of bad `limit` the contract names.
    let limits = ["0", "-1", "1001", "01000", "1.5", "abc", "", "1e2", "%2B5", "%205", "5&limit=6"];
    for limit in limits.into_iter().chain(["99999999999999999999"]) {
        cases.add(&format!("GET limit={limit}"), get(&format!("limit={limit}")), 400, "`limit`");
    }
    let query = format!("/plants?access_token={}", token("alice"));
    let token_in_query = ApiGatewayEvent::new("POST", &query).body(r#"{"id": 1, "name": "x"}"#);
    cases.add("token in the query, not the header", token_in_query.event(), 401, "Authorization");
}

#[tokio::test]
async fn hostile_requests_get_the_right_4xx_and_write_nothing() {
    let app = TestApp::new().await;
    let mut cases = Cases::default();
    body_cases(&mut cases);
    field_cases(&mut cases);
    query_and_authorization_cases(&mut cases);
    let rejections = cases.0.iter().filter(|case| case.2 >= 400).count();
    assert!(rejections >= 40, "only {rejections} hostile cases");
    for (name, request, status, mentions) in cases.0 {
        let response = app.invoke(&request).await;
        assert_eq!(response.status, status, "{name}: {}", response.body);
        assert_eq!(response.header("content-type"), Some("application/json"), "{name}");
        if status >= 400 {
            response.assert_error(status, mentions);
        }
    }
    let stored: Vec<i64> =
        app.stored_items().await.iter().map(|item| item["id"].as_i64().unwrap()).collect();
    assert_eq!(stored, vec![101, 102, 103, 104], "only the cases at the limits were written");
}

/// Every operation's example (openapi.yaml's), as each edge delivers it, is
/// answered alike: a status the operation documents, and the same answer.
#[tokio::test]
async fn every_operations_example_is_answered_alike_in_each_events_shape() {
    for operation in operations() {
        let mut answers = Vec::new();
        for edge in EDGES {
            let app = TestApp::new().await;
            let request = ApiGatewayEvent::example(&operation, Some(&bearer("alice")));
            let response = app.invoke(&request.event_as(edge)).await;
            let (id, body) = (&operation.id, &response.body);
            assert!(operation.statuses.contains(&response.status), "{id}: {body}");
            answers.push((response.status, response.body, app.stored_items().await));
        }
        assert!(answers.windows(2).all(|pair| pair[0] == pair[1]), "{}: {answers:?}", operation.id);
    }
}
