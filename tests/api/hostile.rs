//! Hostile input, table-driven: each request gets the right 4xx with the
//! Error body and a message naming the problem, and writes nothing; the
//! cases at the limits are accepted. Afterwards the table holds exactly the
//! accepted plants.

use plant_store_testkit::{ApiGatewayEvent, TestApp, bearer, token};
use serde_json::{Value, json};

struct Case {
    name: String,
    /// The event, as Lambda delivers it.
    request: String,
    status: u16,
    /// For a 4xx: what the message must mention.
    mentions: &'static str,
}

fn post(body: impl Into<String>) -> String {
    post_as(Some("application/json"), body)
}

fn post_as(content_type: Option<&str>, body: impl Into<String>) -> String {
    let mut request =
        ApiGatewayEvent::new("POST", "/plants").header("authorization", &bearer("alice"));
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    request.body(&body.into()).event()
}

fn get(query: &str) -> String {
    ApiGatewayEvent::new("GET", &format!("/plants?{query}"))
        .header("authorization", &bearer("alice"))
        .event()
}

/// A real API Gateway REST (v1) event from events/ whose body is
/// base64-encoded, as Lambda delivers binary payloads.
fn binary_post(bytes: &[u8]) -> String {
    use base64::Engine;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/events/rest-api/create-plant.json"
    );
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let authorization = bearer("alice");
    event["headers"] = json!({"Authorization": authorization, "Content-Type": "application/json"});
    event["multiValueHeaders"] =
        json!({"Authorization": [authorization], "Content-Type": ["application/json"]});
    event["body"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
    event["isBase64Encoded"] = json!(true);
    event.to_string()
}

fn nested(levels: usize) -> String {
    format!(
        r#"{{"id": 1, "name": "deep", "extra": {}{}}}"#,
        "[".repeat(levels),
        "]".repeat(levels)
    )
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |name: &str, request: String, status: u16, mentions: &'static str| {
        cases.push(Case {
            name: name.to_owned(),
            request,
            status,
            mentions,
        });
    };
    // Broken or wrongly shaped bodies.
    add(
        "truncated JSON",
        post(r#"{"id": 1, "name": "Fe"#),
        400,
        "not valid JSON",
    );
    add(
        "trailing comma",
        post(r#"{"id": 1, "name": "Fern",}"#),
        400,
        "not valid JSON",
    );
    add(
        "unquoted keys",
        post(r#"{id: 1, name: "Fern"}"#),
        400,
        "not valid JSON",
    );
    add("empty body", post(""), 400, "not valid JSON");
    add("whitespace body", post("   \n "), 400, "not valid JSON");
    add(
        "byte order mark",
        post("\u{feff}{\"id\": 1, \"name\": \"Fern\"}"),
        400,
        "not valid JSON",
    );
    add(
        "two JSON values",
        post(r#"{"id": 1, "name": "a"} {"id": 2, "name": "b"}"#),
        400,
        "not valid JSON",
    );
    add(
        "JSON array",
        post(r#"[{"id": 1, "name": "Fern"}]"#),
        400,
        "JSON object",
    );
    add("JSON string", post(r#""Fern""#), 400, "JSON object");
    add("JSON null", post("null"), 400, "JSON object");
    add("JSON number", post("42"), 400, "JSON object");
    add(
        "nesting 8,000 deep",
        post(nested(8_000)),
        400,
        "not valid JSON",
    );
    add(
        "nesting 10,000 deep",
        post(nested(10_000)),
        413,
        "16384 bytes",
    );
    add(
        "invalid UTF-8",
        binary_post(b"{\"id\": 1, \"name\": \"\xff\xfe\"}"),
        400,
        "not valid JSON",
    );
    add(
        "lone surrogate escape",
        post(r#"{"id": 1, "name": "\ud800"}"#),
        400,
        "not valid JSON",
    );
    // Sizes.
    let pad = |size: usize| {
        let base = json!({"id": 1, "name": "Fern", "pad": ""})
            .to_string()
            .len();
        json!({"id": 1, "name": "Fern", "pad": "x".repeat(size - base)}).to_string()
    };
    add(
        "16 KiB + 1 body",
        post(pad(16 * 1024 + 1)),
        413,
        "16384 bytes",
    );
    add("5 MB body", post(pad(5 * 1024 * 1024)), 413, "16384 bytes");
    // Content types.
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json-patch+json",
        "",
        "json",
    ] {
        let request = post_as(Some(content_type), r#"{"id": 1, "name": "Fern"}"#);
        add(
            &format!("Content-Type {content_type:?}"),
            request,
            415,
            "Content-Type",
        );
    }
    // Names and tags at and past their limits.
    add(
        "name of 256 characters",
        post(json!({"id": 101, "name": "n".repeat(256)}).to_string()),
        200,
        "",
    );
    add(
        "name of 256 emoji",
        post(json!({"id": 102, "name": "🌵".repeat(256)}).to_string()),
        200,
        "",
    );
    add(
        "name of 257 characters",
        post(json!({"id": 1, "name": "n".repeat(257)}).to_string()),
        400,
        "`name`",
    );
    add(
        "tag of 64 characters",
        post(json!({"id": 103, "name": "x", "tag": "t".repeat(64)}).to_string()),
        200,
        "",
    );
    add(
        "tag of 65 characters",
        post(json!({"id": 1, "name": "x", "tag": "t".repeat(65)}).to_string()),
        400,
        "`tag`",
    );
    add(
        "blank name",
        post(r#"{"id": 1, "name": " \t "}"#),
        400,
        "`name`",
    );
    for (label, text) in [
        ("NUL", "\u{0}"),
        ("unit separator", "\u{1f}"),
        ("DEL", "\u{7f}"),
        ("C1 NEL", "\u{85}"),
    ] {
        let body = json!({"id": 1, "name": format!("a{text}b")}).to_string();
        add(&format!("{label} in name"), post(body), 400, "`name`");
    }
    add(
        "tab in tag",
        post(json!({"id": 1, "name": "x", "tag": "a\tb"}).to_string()),
        400,
        "`tag`",
    );
    // Ids.
    for id in [
        "1.5",
        r#""7""#,
        "1e3",
        "6547.0",
        "9223372036854775808",
        "-9223372036854775809",
        "true",
        "null",
        "[]",
        "{}",
    ] {
        add(
            &format!("id {id}"),
            post(format!(r#"{{"id": {id}, "name": "Fern"}}"#)),
            400,
            "`id`",
        );
    }
    // Fields.
    add(
        "duplicate id",
        post(r#"{"id": 1, "id": 2, "name": "Fern"}"#),
        400,
        "`id`",
    );
    add(
        "duplicate name",
        post(r#"{"id": 1, "name": "a", "name": "b"}"#),
        400,
        "`name`",
    );
    add(
        "duplicate tag",
        post(r#"{"id": 1, "name": "a", "tag": "x", "tag": "y"}"#),
        400,
        "`tag`",
    );
    add("missing id", post(r#"{"name": "Fern"}"#), 400, "`id`");
    add("missing name", post(r#"{"id": 1}"#), 400, "`name`");
    add(
        "name as array",
        post(r#"{"id": 1, "name": ["Fern"]}"#),
        400,
        "`name`",
    );
    add(
        "tag as object",
        post(r#"{"id": 1, "name": "Fern", "tag": {"a": 1}}"#),
        400,
        "`tag`",
    );
    // Every bad limit.
    for query in plant_store_testkit::BAD_LIMIT_QUERIES {
        add(&format!("GET {query}"), get(query), 400, "`limit`");
    }
    // Authorization abuse.
    let huge = format!("Bearer {}", "a".repeat(10 * 1024));
    let request = ApiGatewayEvent::new("POST", "/plants")
        .header("authorization", &huge)
        .body(r#"{"id": 1, "name": "x"}"#)
        .event();
    add("10 KB Authorization header", request, 401, "token");
    // As HTTP APIs and function URLs deliver repeated headers: comma-joined.
    let two = ApiGatewayEvent::new("POST", "/plants")
        .header("authorization", &bearer("alice"))
        .header("authorization", &bearer("mallory"))
        .body(r#"{"id": 1, "name": "Fern"}"#)
        .event();
    add("two Authorization headers", two, 401, "token");
    let comma = ApiGatewayEvent::new("POST", "/plants")
        .header("authorization", &format!("{},x", bearer("alice")))
        .body(r#"{"id": 1, "name": "Fern"}"#)
        .event();
    add("a comma after the token", comma, 401, "token");
    let token_in_query =
        ApiGatewayEvent::new("POST", &format!("/plants?access_token={}", token("alice")))
            .body(r#"{"id": 1, "name": "x"}"#)
            .event();
    add(
        "token in the query, not the header",
        token_in_query,
        401,
        "Authorization",
    );
    cases
}

#[tokio::test]
async fn hostile_requests_get_the_right_4xx_and_write_nothing() {
    let app = TestApp::new().await;
    let cases = cases();
    let rejections = cases.iter().filter(|case| case.status >= 400).count();
    assert!(rejections >= 40, "only {rejections} hostile cases");
    for case in cases {
        let response = app.invoke(&case.request).await;
        assert_eq!(
            response.status, case.status,
            "{}: {}",
            case.name, response.body
        );
        assert_eq!(
            response.header("content-type"),
            Some("application/json"),
            "{}",
            case.name
        );
        if case.status >= 400 {
            response.assert_error(case.status, case.mentions);
        }
    }
    let stored: Vec<i64> = app
        .stored_items()
        .await
        .iter()
        .map(|item| item["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        stored,
        vec![101, 102, 103],
        "only the cases at the limits were written"
    );
    eprintln!("hostile input: {rejections} rejected cases, 3 accepted at the limits");
}
