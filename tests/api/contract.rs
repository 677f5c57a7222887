//! The contract, row by row, through the production handler and a real
//! DynamoDB Local: status, headers, body, and what is in the table afterwards.

use lambda_http::Context;
use plant_store::route::OPERATIONS;
use plant_store_testkit::{ApiGatewayEvent, TestApp, TestResponse, bearer};
use serde_json::json;

#[tokio::test]
async fn post_creates_a_plant_and_answers_it_without_the_id() {
    let app = TestApp::new().await;
    let response = app.post(&bearer("alice"), r#"{"id": 7, "name": "Fern", "tag": "green"}"#).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(response.body, json!({"name": "Fern", "tag": "green"}));
    let stored = json!({"owner": "alice", "id": 7, "name": "Fern", "tag": "green"});
    assert_eq!(app.stored_items().await, [stored]);
}

#[tokio::test]
async fn a_plant_without_tag_has_no_tag_key_and_null_means_absent() {
    let app = TestApp::new().await;
    let response = app.post(&bearer("alice"), r#"{"id": 1, "name": "Moss", "tag": null}"#).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.body, json!({"name": "Moss"}));
    let listed = app.get(&bearer("alice"), "").await;
    assert_eq!(listed.body, json!([{"name": "Moss"}]));
    assert_eq!(app.stored_items().await, vec![json!({"owner": "alice", "id": 1, "name": "Moss"})]);
}

#[tokio::test]
async fn fields_the_contract_does_not_name_are_ignored_and_never_stored() {
    let app = TestApp::new().await;
    let body = r#"{"id": 3, "name": "Ivy", "owner": "mallory", "color": {"deep": [1, 2]}}"#;
    let response = app.post(&bearer("alice"), body).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.body, json!({"name": "Ivy"}));
    assert_eq!(app.stored_items().await, vec![json!({"owner": "alice", "id": 3, "name": "Ivy"})]);
}

#[tokio::test]
async fn a_repeated_identical_post_is_a_safe_retry_written_once() {
    let app = TestApp::new().await;
    let body = r#"{"id": 9, "name": "Aloe", "tag": "succulent"}"#;
    let first = app.post(&bearer("alice"), body).await;
    let second = app.post(&bearer("alice"), body).await;
    assert_eq!((first.status, second.status), (200, 200));
    assert_eq!(first.body, second.body);
    assert_eq!(second.body, json!({"name": "Aloe", "tag": "succulent"}));
    assert_eq!(app.stored_items().await.len(), 1);
}

#[tokio::test]
async fn a_conflicting_post_gets_409_and_leaves_the_stored_plant_unchanged() {
    let app = TestApp::new().await;
    app.create("alice", json!({"id": 9, "name": "Aloe", "tag": "succulent"})).await;
    let stored_before = app.stored_items().await;
    for body in [
        r#"{"id": 9, "name": "Cactus", "tag": "succulent"}"#,
        r#"{"id": 9, "name": "Aloe", "tag": "other"}"#,
        r#"{"id": 9, "name": "Aloe"}"#,
    ] {
        let response = app.post(&bearer("alice"), body).await;
        response.assert_error(409, "id 9");
    }
    assert_eq!(app.stored_items().await, stored_before);
}

#[tokio::test]
async fn owners_never_see_each_other_and_may_reuse_ids() {
    let app = TestApp::new().await;
    app.create("alice", json!({"id": 7, "name": "Alice's fern"})).await;
    // The same id for another owner is a new plant, not a conflict.
    let response = app.post(&bearer("bob"), r#"{"id": 7, "name": "Bob's cactus"}"#).await;
    assert_eq!(response.status, 200);
    assert_eq!(app.get(&bearer("alice"), "").await.body, json!([{"name": "Alice's fern"}]));
    assert_eq!(app.get(&bearer("bob"), "").await.body, json!([{"name": "Bob's cactus"}]));
    assert_eq!(app.get(&bearer("carol"), "").await.body, json!([]));
    assert_eq!(app.stored_items().await.len(), 2);
}

#[tokio::test]
async fn limit_defaults_to_100_and_allows_up_to_1000() {
    let app = TestApp::new().await;
    for id in 0..101 {
        app.create("alice", json!({"id": id, "name": "p"})).await;
    }
    for (query, plants) in [("", 100), ("limit=1000", 101), ("limit=1", 1), ("limit=0010", 10)] {
        let listed = app.get(&bearer("alice"), query).await;
        assert_eq!(listed.body.as_array().unwrap().len(), plants, "{query:?}");
        // The next page's link names the limit, the default's too.
        let link = listed.header("link").unwrap_or_default();
        assert_eq!(link.is_empty(), plants == 101, "{query:?}: {link}");
    }
    let first = app.get(&bearer("alice"), "").await;
    assert!(first.header("link").unwrap().starts_with("</plants?limit=100&cursor="));
}

/// (Refused content types and bodies, each with its 4xx: `hostile.rs`.)
#[tokio::test]
async fn a_json_content_type_in_any_case_or_none_is_read_as_json() {
    let app = TestApp::new().await;
    for (id, content_type) in
        [(1, Some("application/json; charset=utf-8")), (2, Some("Application/JSON")), (3, None)]
    {
        let mut request =
            ApiGatewayEvent::new("POST", "/plants").header("authorization", &bearer("alice"));
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let body = json!({"id": id, "name": "Fern"}).to_string();
        let response = app.send(request.body(&body)).await;
        assert_eq!(response.status, 200, "{content_type:?}");
    }
    assert_eq!(app.stored_items().await.len(), 3);
}

/// A header's comma-separated list, in order.
fn sorted(list: Option<&str>) -> Vec<String> {
    let mut items: Vec<_> = list.unwrap_or_default().split(',').map(str::to_owned).collect();
    items.sort();
    items
}

#[tokio::test]
async fn unknown_paths_get_404_and_other_methods_405_with_allow() {
    let app = TestApp::new().await;
    for path in ["/", "/plant", "/plantsx", "/v1/plants"] {
        let request = ApiGatewayEvent::new("GET", path).header("authorization", &bearer("alice"));
        app.send(request).await.assert_error(404, "path");
    }
    // The methods of /plants' operations, and HEAD with GET (RFC 9110).
    let on_plants = OPERATIONS.iter().filter(|operation| operation.path == "/plants");
    let mut allowed: Vec<_> = on_plants.map(|operation| operation.method.as_str()).collect();
    if allowed.contains(&"GET") {
        allowed.push("HEAD");
    }
    for method in ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        if allowed.contains(&method) {
            continue;
        }
        let request =
            ApiGatewayEvent::new(method, "/plants").header("authorization", &bearer("alice"));
        let response = app.send(request).await;
        response.assert_error(405, method);
        assert_eq!(sorted(response.header("allow")), sorted(Some(&allowed.join(","))));
    }
    // HEAD is GET without a body (RFC 9110, section 9.3.2).
    let head = ApiGatewayEvent::new("HEAD", "/plants").header("authorization", &bearer("alice"));
    let head = app.send(head).await;
    let answered = (head.status, &head.body, head.header("content-type"));
    assert_eq!(answered, (200, &json!(""), Some("application/json")));
}

#[tokio::test]
async fn a_listed_origin_is_answered_for_browsers_and_no_other() {
    let origin = "https://app.example.com";
    let app = TestApp::new().await.with_cors(&[origin]);
    let options =
        |path: &str, from: &str| ApiGatewayEvent::new("OPTIONS", path).header("origin", from);
    let preflight = |path: &str, from: &str| {
        options(path, from).header("access-control-request-method", "POST")
    };
    // Only a listed origin's preflight of an operation's path is one; any
    // other OPTIONS is a method without an operation, named for no origin.
    for (request, status) in [
        (preflight("/plants", "https://evil.example"), 405),
        (options("/plants", origin), 405),
        (preflight("/nowhere", origin), 404),
    ] {
        let refused = app.send(request).await;
        assert_eq!((refused.status, refused.header("access-control-allow-origin")), (status, None));
        assert_eq!(refused.body["error"], status);
    }
    let answer = app.send(preflight("/plants", origin)).await;
    let named =
        ["origin", "headers"].map(|name| answer.header(&format!("access-control-allow-{name}")));
    assert_eq!(named, [Some(origin), Some("authorization,content-type")]);
    // Each method of the operations, once.
    let mut methods: Vec<_> =
        OPERATIONS.iter().map(|operation| operation.method.as_str()).collect();
    methods.sort();
    methods.dedup();
    let allowed = answer.header("access-control-allow-methods");
    assert_eq!(sorted(allowed), sorted(Some(&methods.join(","))));
    assert_eq!((answer.status, answer.header("access-control-max-age")), (200, Some("600")));
    // Every answer to a listed origin names it, an error too, an
    // unreadable event's among them.
    let listed = ApiGatewayEvent::list_plants(&bearer("alice"), "").header("origin", origin);
    let unauthorized = ApiGatewayEvent::new("GET", "/plants").header("origin", origin);
    let unreadable = ApiGatewayEvent::new("GET", "/plants").header("origin", origin);
    let unreadable = app.send(unreadable.header("x-bad", "a\u{7}b")).await;
    unreadable.assert_error(400, "x-bad");
    for response in [app.send(listed).await, app.send(unauthorized).await, unreadable] {
        let exposed = response.header("access-control-expose-headers");
        assert_eq!(response.header("access-control-allow-origin"), Some(origin));
        let vary = "origin, access-control-request-method, access-control-request-headers";
        assert_eq!(exposed, Some("link,retry-after,www-authenticate"));
        assert_eq!(response.header("vary"), Some(vary));
    }
}

#[tokio::test]
async fn stored_items_are_read_attribute_by_attribute_and_what_is_no_plant_passed_over() {
    use aws_sdk_dynamodb::types::AttributeValue::{Bool, N, Null, S};
    use plant_store::domain::limits::{NAME_MAX_CHARS, TAG_MAX_CHARS};
    // Items an earlier rule let be stored (over today's limits, blank, an
    // attribute no Plant has), and items no request writes (a name or tag
    // of another type; an id past int64, as an early build kept a counter).
    let app = TestApp::new().await;
    let (name, tag) = ("n".repeat(NAME_MAX_CHARS + 44), "t".repeat(TAG_MAX_CHARS + 36));
    let items = [
        ("-9223372036854775809", vec![("plants", N("2".into()))]),
        ("1", vec![("name", S(name.clone())), ("tag", S(tag.clone()))]),
        ("2", vec![("name", N("7".into()))]),
        ("3", vec![("name", S(" ".into())), ("color", S("red".into()))]),
        ("4", vec![("name", Null(true))]),
        ("5", vec![("name", S("Fern".into())), ("tag", N("1".into()))]),
        ("6", vec![("name", S("Fern".into())), ("tag", Bool(true))]),
        ("9223372036854775808", vec![("name", S("Fern".into()))]),
    ];
    for (id, attributes) in items {
        let put = app.client.put_item().table_name(&app.table).item("owner", S("alice".into()));
        let put = put.item("id", N(id.into()));
        let put = attributes.into_iter().fold(put, |put, (name, value)| put.item(name, value));
        put.send().await.unwrap();
    }
    // A page of one plant at a time: the pages go past what is no plant.
    let (mut query, mut listed) = ("limit=1".to_owned(), Vec::new());
    loop {
        let response = app.get(&bearer("alice"), &query).await;
        assert_eq!(response.status, 200, "{}", response.body);
        listed.extend(response.body.as_array().unwrap().iter().cloned());
        let Some(link) = response.header("link") else { break };
        query = link[link.find('?').unwrap() + 1..link.find('>').unwrap()].to_owned();
    }
    assert_eq!(listed, [json!({"name": name, "tag": tag}), json!({"name": " "})]);
    // An id that holds no plant is taken: 409, and the item stays as it is.
    let response = app.post(&bearer("alice"), r#"{"id": 6, "name": "Fern"}"#).await;
    response.assert_error(409, "id 6");
    let read = app.client.get_item().table_name(&app.table).key("owner", S("alice".into()));
    let item = read.key("id", N("6".into())).send().await.unwrap().item.unwrap();
    assert_eq!(item["tag"], Bool(true));
}

/// Lambda's limit on a synchronous invocation's response payload: 6 MB.
const LAMBDA_RESPONSE_BYTES: usize = 6 * 1024 * 1024;

#[tokio::test]
async fn pages_of_the_largest_items_fit_lambdas_response_payload() {
    use aws_sdk_dynamodb::types::AttributeValue::{N, S};
    // As large as DynamoDB stores, of what JSON escapes (a page holds it
    // escaped twice): 20 take 24 MB as a payload.
    let (app, name) = (TestApp::new().await, "\"".repeat(300 * 1024));
    for id in 0..20 {
        let put = app.client.put_item().table_name(&app.table).item("owner", S("alice".into()));
        let put = put.item("id", N(id.to_string())).item("name", S(name.clone()));
        put.send().await.unwrap();
    }
    let (mut query, mut listed) = ("limit=1000".to_owned(), 0);
    loop {
        let event = ApiGatewayEvent::list_plants(&bearer("alice"), &query).event();
        let payload = serde_json::to_value(app.api.invoke(&event, Context::default()).await);
        let payload = payload.unwrap();
        let bytes = payload.to_string().len();
        assert!(bytes <= LAMBDA_RESPONSE_BYTES, "{bytes} bytes");
        let response = TestResponse::from_lambda_response(&payload);
        listed += response.body.as_array().unwrap().len();
        let Some(link) = response.header("link") else { break };
        query = link[link.find('?').unwrap() + 1..link.find('>').unwrap()].to_owned();
    }
    assert_eq!(listed, 20);
}
