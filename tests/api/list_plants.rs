//! listPlants (`GET /plants`): `limit`; paging through `Link: <...>;
//! rel="next"`, opaque cursors, every plant once by id, bounded calls a
//! page, cursors held to the caller's plants; what is no plant passed over.

use aws_sdk_dynamodb::types::AttributeValue::{self, Bool, N, Null, S};
use futures::StreamExt;
use lambda_http::Context;
use plant_store::domain::{Cursor, PlantId};
use plant_store_testkit::{ApiGatewayEvent, TestApp, TestResponse, bearer, token};
use serde_json::{Value, json};

fn plant_name(id: i64) -> String {
    format!("plant {id:05}")
}

/// Creates plants through the API, 32 at a time.
async fn create_plants(app: &TestApp, owner: &str, ids: impl IntoIterator<Item = i64>) {
    futures::stream::iter(ids)
        .for_each_concurrent(32, |id| async move {
            app.create(owner, json!({"id": id, "name": plant_name(id)})).await;
        })
        .await;
}

/// Stores an item of alice's with these attributes as is, past the function.
async fn put_raw(app: &TestApp, id: impl ToString, attributes: Vec<(&str, AttributeValue)>) {
    let put = app.client.put_item().table_name(&app.table).item("owner", S("alice".into()));
    let put = put.item("id", N(id.to_string()));
    let put = attributes.into_iter().fold(put, |put, (name, value)| put.item(name, value));
    put.send().await.unwrap();
}

/// The target of a `Link: <target>; rel="next"` header.
fn next_link(response: &TestResponse) -> Option<String> {
    let link = response.header("link")?;
    let target = link.strip_prefix('<')?.split_once(">; rel=\"next\"")?.0;
    Some(target.to_owned())
}

async fn get_path(app: &TestApp, owner: &str, target: &str) -> TestResponse {
    app.send(ApiGatewayEvent::new("GET", target).header("authorization", &bearer(owner))).await
}

/// Follows `next`: every plant listed, the page sizes, the most calls a page.
async fn follow_pages(app: &TestApp, owner: &str, limit: usize) -> (Vec<Value>, Vec<usize>, usize) {
    let (mut plants, mut sizes, mut most_calls) = (Vec::new(), Vec::new(), 0);
    let mut next = Some(format!("/plants?limit={limit}"));
    while let Some(target) = next {
        let calls_before = app.dynamodb_calls();
        let response = get_path(app, owner, &target).await;
        most_calls = most_calls.max(app.dynamodb_calls() - calls_before);
        assert_eq!(response.status, 200, "{target}: {}", response.body);
        let page = response.body.as_array().unwrap();
        sizes.push(page.len());
        plants.extend(page.iter().cloned());
        next = next_link(&response);
        if let Some(next) = &next {
            assert!(next.starts_with(&format!("/plants?limit={limit}&cursor=")), "{next}");
        }
    }
    (plants, sizes, most_calls)
}

#[tokio::test]
async fn following_next_visits_2500_plants_once_in_order_with_bounded_calls() {
    let app = TestApp::new().await;
    create_plants(&app, "alice", 0..2500).await;
    let expected: Vec<Value> = (0..2500).map(|id| json!({"name": plant_name(id)})).collect();
    for limit in [1, 7, 100, 1000] {
        let (plants, sizes, most_calls) = follow_pages(&app, "alice", limit).await;
        assert_eq!(plants, expected, "limit {limit}");
        assert_eq!(sizes.len(), 2500usize.div_ceil(limit), "pages at limit {limit}");
        assert!(sizes.iter().all(|&size| size <= limit));
        // One Query per page here (well under DynamoDB's 1 MB page): never a
        // read of the whole partition to serve one page.
        assert_eq!(most_calls, 1, "DynamoDB calls per page at limit {limit}");
    }
}

#[tokio::test]
async fn plants_added_between_pages_do_not_repeat_or_hide_others() {
    let app = TestApp::new().await;
    create_plants(&app, "alice", (0..20).map(|n| n * 2)).await; // 0, 2, ..., 38
    let first = app.get(&bearer("alice"), "limit=5").await;
    let mut names: Vec<Value> = first.body.as_array().unwrap().clone();
    // Between pages: one id before the cursor, two after, one past the end.
    create_plants(&app, "alice", [3, 11, 13, 99]).await;
    let mut next = next_link(&first);
    while let Some(target) = next {
        let page = get_path(&app, "alice", &target).await;
        names.extend(page.body.as_array().unwrap().iter().cloned());
        next = next_link(&page);
    }
    let mut expected: Vec<i64> = (0..20).map(|n| n * 2).chain([11, 13, 99]).collect();
    expected.sort();
    let expected: Vec<Value> =
        expected.into_iter().map(|id| json!({"name": plant_name(id)})).collect();
    assert_eq!(names, expected);
}

#[tokio::test]
async fn a_cursor_taken_by_one_owner_only_moves_within_the_callers_plants() {
    let app = TestApp::new().await;
    create_plants(&app, "alice", 1..=10).await;
    for id in 1..=10 {
        app.create("bob", json!({"id": id, "name": format!("bob's {id}")})).await;
    }
    let alices_page = app.get(&bearer("alice"), "limit=5").await;
    let alices_next = next_link(&alices_page).unwrap();
    let bobs_view = get_path(&app, "bob", &alices_next).await;
    assert_eq!(bobs_view.status, 200);
    let expected: Vec<Value> = (6..=10).map(|id| json!({"name": format!("bob's {id}")})).collect();
    assert_eq!(bobs_view.body, json!(expected));
}

#[tokio::test]
async fn a_well_formed_cursor_at_any_id_answers_the_callers_plants_after_it() {
    let app = TestApp::new().await;
    let ids = [i64::MIN, -1, 0, 7, i64::MAX - 1, i64::MAX];
    create_plants(&app, "alice", ids).await;
    for (at, after) in ids.iter().enumerate() {
        let cursor = Cursor::after(PlantId(*after)).encode();
        let page = app.get(&bearer("alice"), &format!("limit=1000&cursor={cursor}")).await;
        let expected: Vec<Value> =
            ids[at + 1..].iter().map(|id| json!({"name": plant_name(*id)})).collect();
        assert_eq!((page.status, &page.body), (200, &json!(expected)), "after {after}");
        assert_eq!(next_link(&page), None);
    }
}

#[tokio::test]
async fn malformed_cursors_get_400_before_any_dynamodb_call() {
    let app = TestApp::new().await;
    create_plants(&app, "alice", 1..=3).await;
    let page = app.get(&bearer("alice"), "limit=1").await;
    let target = next_link(&page).unwrap();
    let cursor = target.split("cursor=").nth(1).unwrap().to_owned();
    let mut flipped = cursor.clone().into_bytes();
    flipped[3] = if flipped[3] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    let cases = [
        format!("cursor={flipped}"),
        format!("cursor={}", &cursor[..cursor.len() - 2]),
        format!("cursor={cursor}AA"),
        "cursor=".to_owned(),
        "cursor=%25%25%25".to_owned(),
        "cursor=not+base64!".to_owned(),
        format!("cursor={cursor}&cursor={cursor}"),
    ];
    for query in cases {
        let calls_before = app.dynamodb_calls();
        let response = app.get(&bearer("alice"), &query).await;
        response.assert_error(400, "`cursor`");
        assert_eq!(app.dynamodb_calls(), calls_before, "{query}: DynamoDB was called");
    }
    // The untouched cursor still works.
    assert_eq!(get_path(&app, "alice", &target).await.status, 200);
}

/// The Link keeps the caller's path, but a path starting `//` never makes
/// it name another host, in a REST or an HTTP API's event.
#[tokio::test]
async fn the_link_keeps_the_callers_path_and_never_names_another_host() {
    let app = TestApp::new().await;
    create_plants(&app, "alice", 1..=3).await;
    let response = get_path(&app, "alice", "/plants/?limit=2").await;
    assert!(next_link(&response).unwrap().starts_with("/plants/?limit=2&cursor="));
    for (fixture, path) in
        [("rest-api/list-plants", "/path"), ("http-api/custom-domain", "/rawPath")]
    {
        let file = format!("{}/events/{fixture}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(file).unwrap().replace("{{token}}", &token("alice"));
        let mut event: Value = serde_json::from_str(&text).unwrap();
        *event.pointer_mut(path).unwrap() = json!("//evil.example/plants");
        event["rawQueryString"] = json!("limit=2");
        let response = app.invoke(&event.to_string()).await;
        let link = next_link(&response).unwrap_or_default();
        assert!(link.starts_with("/evil.example/plants?limit=2&cursor="), "{fixture}: {link}");
    }
}

/// Items no request wrote (a name that is no string) between two plants:
/// a page of one reads past the run in a few calls, not one an item.
#[tokio::test]
async fn a_run_of_items_that_are_no_plant_costs_a_few_calls() {
    let app = TestApp::new().await;
    create_plants(&app, "alice", [1, 302]).await;
    futures::stream::iter(2..=301)
        .for_each_concurrent(32, |id| put_raw(&app, id, vec![("name", N("5".into()))]))
        .await;
    let (plants, sizes, most_calls) = follow_pages(&app, "alice", 1).await;
    assert_eq!(plants, [json!({"name": plant_name(1)}), json!({"name": plant_name(302)})]);
    assert_eq!(sizes, [1, 1]);
    assert!(most_calls <= 2, "{most_calls} DynamoDB calls for a page of one");
}

/// Lambda's limit on a synchronous invocation's response payload: 6 MB.
const LAMBDA_RESPONSE_BYTES: usize = 6 * 1024 * 1024;

#[tokio::test]
async fn limit_defaults_to_100_and_allows_up_to_1000() {
    let app = TestApp::new().await;
    create_plants(&app, "alice", 0..101).await;
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

#[tokio::test]
async fn stored_items_are_read_attribute_by_attribute_and_what_is_no_plant_passed_over() {
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
        put_raw(&app, id, attributes).await;
    }
    // A page of one plant at a time: the pages go past what is no plant.
    let (listed, _, _) = follow_pages(&app, "alice", 1).await;
    assert_eq!(listed, [json!({"name": name, "tag": tag}), json!({"name": " "})]);
    // An id that holds no plant is taken: 409, and the item stays as it is.
    let response = app.post(&bearer("alice"), r#"{"id": 6, "name": "Fern"}"#).await;
    response.assert_error(409, "id 6");
    let read = app.client.get_item().table_name(&app.table).key("owner", S("alice".into()));
    let item = read.key("id", N("6".into())).send().await.unwrap().item.unwrap();
    assert_eq!(item["tag"], Bool(true));
}

#[tokio::test]
async fn pages_of_the_largest_items_fit_lambdas_response_payload() {
    // As large as DynamoDB stores, of what JSON escapes (a page holds it
    // escaped twice): 20 take 24 MB as a payload.
    let (app, name) = (TestApp::new().await, "\"".repeat(300 * 1024));
    for id in 0..20 {
        put_raw(&app, id, vec![("name", S(name.clone()))]).await;
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
