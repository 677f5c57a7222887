//! X-Ray: a subsegment per outbound call, each checked against X-Ray's
//! schema, under its invocation's header, also concurrently; `Sampled=0` none.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use plant_store::store::MAX_ATTEMPTS;
use plant_store_testkit::fault_proxy::{Fault, FaultProxy};
use plant_store_testkit::key_server::{Behaviour, KeyServer};
use plant_store_testkit::runtime_api::{Invoked, LambdaProcess};
use plant_store_testkit::xray_daemon::XRayDaemon;
use plant_store_testkit::{ApiGatewayEvent, TestApp, TestResponse, bearer, keys};
use serde_json::{Value, json};

/// A field of a trace header (`Root=`, `Parent=`), as of an invocation's.
fn field(trace_header: &str, name: &str) -> String {
    trace_header.split(';').find_map(|field| field.strip_prefix(name)).unwrap().to_owned()
}

/// The function's binary, sending to `daemon`, through `store_endpoint` if given.
async fn start_function(
    app: &TestApp,
    daemon: &XRayDaemon,
    store_endpoint: Option<&str>,
    extra: &[(&str, &str)],
) -> LambdaProcess {
    let mut vars = vec![("AWS_XRAY_DAEMON_ADDRESS", daemon.address.as_str())];
    vars.extend(store_endpoint.map(|url| ("AWS_ENDPOINT_URL_DYNAMODB", url)));
    crate::start_function(app, &[vars.as_slice(), extra].concat()).await
}

/// The `count` documents of `invoked`'s trace, each under its `Parent`.
async fn documents_of(daemon: &XRayDaemon, invoked: &Invoked, count: usize) -> Vec<Value> {
    let root = field(&invoked.trace_id, "Root=");
    let of_this = |document: &&Value| document["trace_id"] == root.as_str();
    let done = |documents: &[Value]| documents.iter().filter(of_this).count() >= count;
    let documents = daemon.documents_when(done).await;
    let documents: Vec<Value> = documents.iter().filter(of_this).cloned().collect();
    assert_eq!(documents.len(), count, "{documents:?}");
    for document in &documents {
        assert_eq!(document["type"], "subsegment", "{document}");
        assert_eq!(document["parent_id"], field(&invoked.trace_id, "Parent="), "{document}");
        assert!(document["end_time"].as_f64() >= document["start_time"].as_f64());
    }
    documents
}

/// A DynamoDB call as the X-Ray SDKs record one, answered with `status`.
fn assert_dynamodb_call(call: &Value, operation: &str, table: &str, status: u16, retries: u32) {
    assert_eq!(call["name"], "DynamoDB", "{call}");
    assert_eq!(call["namespace"], "aws", "{call}");
    assert_eq!(call["aws"]["operation"], operation, "{call}");
    assert_eq!(call["aws"]["table_name"], table, "{call}");
    assert_eq!(call["aws"]["retries"], retries, "{call}");
    let request_id = call["aws"]["request_id"].as_str();
    assert!(request_id.is_some_and(|id| !id.is_empty()), "{call}");
    assert_eq!(call["http"]["response"]["status"], status, "{call}");
}

fn flags(subsegment: &Value) -> [bool; 3] {
    ["error", "throttle", "fault"].map(|flag| subsegment[flag] == true)
}

#[tokio::test]
async fn a_get_is_one_query_and_a_post_one_subsegment_per_write_under_their_own_invocations() {
    let app = TestApp::new().await;
    app.create("alice", json!({"id": 1, "name": "Fern"})).await;
    let daemon = XRayDaemon::start().await;
    let function = start_function(&app, &daemon, None, &[]).await;

    let list = ApiGatewayEvent::list_plants(&bearer("alice"), "limit=5");
    let invoked = function.invoke(&list.event()).await;
    assert_eq!(TestResponse::from_lambda_response(&invoked.response).status, 200);
    let documents = documents_of(&daemon, &invoked, 1).await;
    assert_dynamodb_call(&documents[0], "Query", &app.table, 200, 0);
    assert_eq!(flags(&documents[0]), [false; 3]);

    let post = ApiGatewayEvent::create_plant(&bearer("bob"), r#"{"id": 3, "name": "Aloe"}"#);
    let invoked = function.invoke(&post.event()).await;
    assert_eq!(TestResponse::from_lambda_response(&invoked.response).status, 200);
    let mut documents = documents_of(&daemon, &invoked, 2).await;
    documents
        .sort_by(|a, b| a["start_time"].as_f64().partial_cmp(&b["start_time"].as_f64()).unwrap());
    assert_dynamodb_call(&documents[0], "UpdateItem", &app.table, 200, 0);
    assert_dynamodb_call(&documents[1], "PutItem", &app.table, 200, 0);
}

#[tokio::test]
async fn a_failing_or_throttled_call_is_recorded_with_its_retries_and_flags() {
    for (fault, status, expected) in [
        (Fault::ServerError, 500, [false, false, true]),
        (Fault::Throttle, 400, [true, true, false]),
    ] {
        let app = TestApp::new().await;
        // The warm-up at init passes; then DynamoDB fails.
        let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[Fault::PassThrough], fault).await;
        let daemon = XRayDaemon::start().await;
        let function = start_function(&app, &daemon, Some(&proxy.url), &[]).await;

        let post = ApiGatewayEvent::create_plant(&bearer("carol"), r#"{"id": 1, "name": "Ivy"}"#);
        let invoked = function.invoke(&post.event()).await;
        TestResponse::from_lambda_response(&invoked.response).assert_error(503, "");

        let documents = documents_of(&daemon, &invoked, 1).await;
        let call = &documents[0];
        assert_dynamodb_call(call, "UpdateItem", &app.table, status, MAX_ATTEMPTS - 1);
        assert_eq!(flags(call), expected, "{call}");
        assert!(app.stored_items().await.is_empty());
    }
}

#[tokio::test]
async fn a_call_cut_at_the_invocations_deadline_is_a_fault() {
    let app = TestApp::new().await;
    // The warm-up at init passes; then DynamoDB accepts and never answers.
    let proxy =
        FaultProxy::start(&TestApp::dynamodb_url(), &[Fault::PassThrough], Fault::Hang).await;
    let daemon = XRayDaemon::start().await;
    let function = start_function(&app, &daemon, Some(&proxy.url), &[]).await;
    // 1.5 s left: the request's deadline (1.2 s) comes before the SDK's
    // own timeouts end the call (three attempts of 1 s).
    let list = ApiGatewayEvent::list_plants(&bearer("alice"), "");
    let invoked =
        function.invoke_with(&list.event(), true, Some(Duration::from_millis(1500))).await;
    TestResponse::from_lambda_response(&invoked.response).assert_error(503, "");
    assert!(invoked.duration < Duration::from_millis(1500), "{:?}", invoked.duration);
    let documents = documents_of(&daemon, &invoked, 1).await;
    let call = (documents[0]["aws"]["operation"].as_str(), flags(&documents[0]));
    assert_eq!(call, (Some("Query"), [false, false, true]));
    assert_eq!(documents[0]["http"], Value::Null, "no answer came");
}

#[tokio::test]
async fn a_key_fetch_within_an_invocation_is_a_call_to_the_issuer() {
    let app = TestApp::new().await;
    // The issuer fails at init, which records nothing (Lambda records init).
    let server = KeyServer::start(keys().jwks.clone()).await;
    server.set(Behaviour::Status(503));
    let daemon = XRayDaemon::start().await;
    let function = start_function(&app, &daemon, None, &crate::keys_from(&server.jwks_url)).await;
    server.set(Behaviour::Serve(keys().jwks.clone()));
    // Production's retry without keys is 1 s.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    let invoked = function.invoke(&ApiGatewayEvent::list_plants(&bearer("dave"), "").event()).await;
    assert_eq!(TestResponse::from_lambda_response(&invoked.response).status, 200);
    let documents = documents_of(&daemon, &invoked, 2).await;
    let fetch = documents.iter().find(|document| document["name"] == "127.0.0.1").unwrap();
    assert_eq!(fetch["namespace"], "remote");
    let exchange =
        json!({"request": {"method": "GET", "url": server.jwks_url}, "response": {"status": 200}});
    assert_eq!(fetch["http"], exchange);
    assert_eq!(flags(fetch), [false; 3]);
    let query = documents.iter().find(|document| document["name"] == "DynamoDB").unwrap();
    assert_dynamodb_call(query, "Query", &app.table, 200, 0);
    assert_eq!(server.fetches(), 2);
    let root = field(&invoked.trace_id, "Root=");
    assert!(daemon.documents().iter().all(|document| document["trace_id"] == root));
}

#[tokio::test]
async fn an_unsampled_invocation_sends_nothing_and_passes_its_header_on() {
    let app = TestApp::new().await;
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::PassThrough).await;
    let daemon = XRayDaemon::start().await;
    let function = start_function(&app, &daemon, Some(&proxy.url), &[]).await;
    let before = proxy.call_count();

    let post = ApiGatewayEvent::create_plant(&bearer("erin"), r#"{"id": 1, "name": "Fern"}"#);
    let unsampled = function.invoke_with(&post.event(), false, None).await;
    assert_eq!(TestResponse::from_lambda_response(&unsampled.response).status, 200);
    let headers: Vec<Option<String>> =
        proxy.calls_since(before).into_iter().map(|call| call.trace_header).collect();
    // Its header as given: its Root, its Parent, Sampled=0.
    assert_eq!(headers, [Some(unsampled.trace_id.clone()), Some(unsampled.trace_id.clone())]);
    let root = field(&unsampled.trace_id, "Root=");

    // A sampled one after it is sent, and so shows the unsampled one's
    // documents were never sent (UDP keeps order on loopback).
    let list = ApiGatewayEvent::list_plants(&bearer("erin"), "").event();
    let sampled = function.invoke(&list).await;
    documents_of(&daemon, &sampled, 1).await;
    let documents = daemon.documents();
    let leaked = documents.iter().any(|document| document["trace_id"] == root.as_str());
    assert!(!leaked, "{documents:?}");
}

#[tokio::test]
async fn without_a_daemon_address_nothing_is_traced_and_no_header_passed_on() {
    let app = TestApp::new().await;
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::PassThrough).await;
    // Concurrent, as Managed Instances run it: no process-wide
    // `_X_AMZN_TRACE_ID`, so any header DynamoDB gets is the function's own.
    let vars =
        [("AWS_ENDPOINT_URL_DYNAMODB", proxy.url.as_str()), ("AWS_LAMBDA_MAX_CONCURRENCY", "2")];
    let function = crate::start_function(&app, &vars).await;
    let before = proxy.call_count();
    let post = ApiGatewayEvent::create_plant(&bearer("gina"), r#"{"id": 1, "name": "Fern"}"#);
    let invoked = function.invoke(&post.event()).await;
    assert_eq!(TestResponse::from_lambda_response(&invoked.response).status, 200);
    let headers: Vec<Option<String>> =
        proxy.calls_since(before).into_iter().map(|call| call.trace_header).collect();
    assert_eq!(headers, [None, None], "two writes, neither traced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_invocations_at_once_each_trace_under_their_own_header() {
    let app = TestApp::new().await;
    for id in 1..=3 {
        app.create("alice", json!({"id": id, "name": format!("plant {id}")})).await;
    }
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::PassThrough).await;
    let daemon = XRayDaemon::start().await;
    let concurrency = [("AWS_LAMBDA_MAX_CONCURRENCY", "8")];
    let function = start_function(&app, &daemon, Some(&proxy.url), &concurrency).await;
    let before = proxy.call_count();
    let body = |n| json!({"id": n, "name": format!("plant {n}")}).to_string();
    let event = |n: i64| match n % 2 {
        0 => ApiGatewayEvent::list_plants(&bearer("alice"), "limit=2"),
        _ => ApiGatewayEvent::create_plant(&bearer("bob"), &body(n)),
    };
    let events: Vec<String> = (1..=32).map(|n| event(n).event()).collect();

    let invoked =
        futures::future::join_all(events.iter().map(|event| function.invoke(event))).await;

    assert!(function.max_in_flight() > 1, "the invocations overlapped");
    // Each subsegment is named, as Parent, by the one call that carried its
    // invocation's Root.
    let carried = carried_headers(&proxy, before);
    let mut traced_calls = HashSet::new();
    for (n, invocation) in (1..).zip(&invoked) {
        assert_eq!(TestResponse::from_lambda_response(&invocation.response).status, 200);
        let writes = if n % 2 == 0 { 1 } else { 2 };
        for call in documents_of(&daemon, invocation, writes).await {
            let id = call["id"].as_str().unwrap().to_owned();
            assert_eq!(carried.get(&id), Some(&field(&invocation.trace_id, "Root=")), "{call}");
            assert!(traced_calls.insert(id));
        }
    }
    // 16 POSTs of two writes, 16 GETs of one query, each traced once.
    assert_eq!(carried.len(), 16 * 2 + 16);
    assert_eq!(traced_calls.len(), carried.len());
}

/// The `Parent` each call through `proxy` since `before` carried, with its `Root`.
fn carried_headers(proxy: &FaultProxy, before: usize) -> HashMap<String, String> {
    let calls = proxy.calls_since(before).into_iter();
    let headers = calls.map(|call| call.trace_header.expect("every call carries a trace header"));
    headers.map(|header| (field(&header, "Parent="), field(&header, "Root="))).collect()
}
