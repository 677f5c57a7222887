//! X-Ray: the function's binary, run through the Runtime API stand-in,
//! sends its subsegments to a stand-in for the X-Ray daemon
//! (`AWS_XRAY_DAEMON_ADDRESS`), which checks every document against X-Ray's
//! schema. Each document is rooted at the trace header of the invocation it
//! belongs to (its `Root` and `Parent`), also when eight invocations run at
//! once; DynamoDB calls carry that header on; `Sampled=0` sends nothing.

use std::collections::{HashMap, HashSet};

use plant_store::store::MAX_ATTEMPTS;
use plant_store_testkit::fault_proxy::{Fault, FaultProxy};
use plant_store_testkit::key_server::KeyServer;
use plant_store_testkit::runtime_api::{Invoked, LambdaProcess};
use plant_store_testkit::xray_daemon::XRayDaemon;
use plant_store_testkit::{ApiGatewayEvent, TestApp, TestResponse, bearer, keys};
use serde_json::{Value, json};

/// The `Root` and `Parent` of the trace header an invocation was given.
struct TraceIds {
    root: String,
    parent: String,
}

fn trace_ids(invoked: &Invoked) -> TraceIds {
    let field = |name: &str| {
        invoked
            .trace_id
            .split(';')
            .find_map(|field| field.strip_prefix(name))
            .unwrap()
            .to_owned()
    };
    TraceIds {
        root: field("Root="),
        parent: field("Parent="),
    }
}

/// The function's binary for `app`'s table, sending to `daemon`, with its
/// DynamoDB calls through `store_endpoint` when given, and `extra` settings.
async fn start_function(
    app: &TestApp,
    daemon: &XRayDaemon,
    store_endpoint: Option<&str>,
    extra: &[(&str, &str)],
) -> LambdaProcess {
    let mut env = app.function_env();
    env.set("AWS_XRAY_DAEMON_ADDRESS", &daemon.address)
        .set("AWS_LAMBDA_LOG_FORMAT", "JSON");
    if let Some(url) = store_endpoint {
        env.set("AWS_ENDPOINT_URL_DYNAMODB", url);
    }
    for (name, value) in extra {
        env.set(name, value);
    }
    LambdaProcess::start(&crate::bootstrap_command(), &env).await
}

/// The documents of `invoked`'s trace, once its `## handler` has come;
/// every one of them rooted at the invocation's own `Parent`.
async fn documents_of(daemon: &XRayDaemon, invoked: &Invoked) -> Vec<Value> {
    let ids = trace_ids(invoked);
    let of_this = |document: &&Value| document["trace_id"] == ids.root.as_str();
    let documents = daemon
        .documents_when(|documents| {
            documents
                .iter()
                .filter(of_this)
                .any(|document| document["name"] == "## handler")
        })
        .await;
    let documents: Vec<Value> = documents.iter().filter(of_this).cloned().collect();
    assert!(
        !documents.is_empty(),
        "no documents for {}",
        invoked.trace_id
    );
    for document in &documents {
        assert_eq!(document["parent_id"], ids.parent.as_str(), "{document}");
    }
    documents
}

/// The one document named `name`.
fn document<'d>(documents: &'d [Value], name: &str) -> &'d Value {
    let named: Vec<&Value> = documents
        .iter()
        .filter(|document| document["name"] == name)
        .collect();
    assert_eq!(named.len(), 1, "one `{name}` in {documents:?}");
    named[0]
}

/// The names of a subsegment's children, in order.
fn children(subsegment: &Value) -> Vec<&str> {
    subsegment["subsegments"]
        .as_array()
        .map(|children| {
            children
                .iter()
                .map(|child| child["name"].as_str().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

fn child<'s>(subsegment: &'s Value, name: &str) -> &'s Value {
    subsegment["subsegments"]
        .as_array()
        .and_then(|children| children.iter().find(|child| child["name"] == name))
        .unwrap_or_else(|| panic!("no `{name}` under {subsegment}"))
}

/// Every subsegment named "DynamoDB" at any depth, in order.
fn dynamodb_calls(subsegment: &Value) -> Vec<&Value> {
    let mut calls = Vec::new();
    for nested in subsegment["subsegments"].as_array().into_iter().flatten() {
        if nested["name"] == "DynamoDB" {
            calls.push(nested);
        }
        calls.extend(dynamodb_calls(nested));
    }
    calls
}

/// A DynamoDB call as the X-Ray SDKs record one, answered with `status`.
fn assert_dynamodb_call(call: &Value, operation: &str, table: &str, status: u16, retries: u32) {
    assert_eq!(call["namespace"], "aws", "{call}");
    assert_eq!(call["aws"]["operation"], operation, "{call}");
    assert_eq!(call["aws"]["table_name"], table, "{call}");
    assert_eq!(call["aws"]["retries"], retries, "{call}");
    assert!(
        call["aws"]["request_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{call}"
    );
    assert_eq!(call["http"]["response"]["status"], status, "{call}");
}

/// Each child starts and ends within its parent.
fn assert_nested_in_time(subsegment: &Value) {
    for nested in subsegment["subsegments"].as_array().into_iter().flatten() {
        assert!(nested["start_time"].as_f64() >= subsegment["start_time"].as_f64());
        assert!(nested["end_time"].as_f64() <= subsegment["end_time"].as_f64());
        assert_nested_in_time(nested);
    }
}

fn flags(subsegment: &Value) -> [bool; 3] {
    ["error", "throttle", "fault"].map(|flag| subsegment[flag] == true)
}

#[tokio::test]
async fn a_get_is_traced_under_its_own_invocation_with_its_query() {
    let app = TestApp::new().await;
    app.create("alice", json!({"id": 1, "name": "Fern"})).await;
    let daemon = XRayDaemon::start().await;
    let function = start_function(&app, &daemon, None, &[]).await;

    let invoked = function
        .invoke(&ApiGatewayEvent::list_plants(&bearer("alice"), "limit=5").event())
        .await;
    assert_eq!(
        TestResponse::from_lambda_response(&invoked.response).status,
        200
    );

    let documents = documents_of(&daemon, &invoked).await;
    let handler = document(&documents, "## handler");
    assert_eq!(
        handler["http"]["request"],
        json!({"method": "GET", "url": "/plants"})
    );
    assert_eq!(handler["http"]["response"]["status"], 200);
    assert_eq!(flags(handler), [false; 3]);
    assert_eq!(children(handler), ["auth", "parse", "store.list"]);
    let store = child(handler, "store.list");
    assert_eq!(children(store), ["DynamoDB"]);
    assert_dynamodb_call(&store["subsegments"][0], "Query", &app.table, 200, 0);
    assert_nested_in_time(handler);

    // Its log lines carry its request id and trace id.
    let ids = trace_ids(&invoked);
    let request_line = function
        .output()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["message"] == "request")
        .expect("a request line");
    assert_eq!(
        request_line["span"]["requestId"],
        invoked.request_id.as_str()
    );
    assert_eq!(request_line["span"]["traceId"], ids.root.as_str());
}

#[tokio::test]
async fn a_post_is_traced_with_each_of_its_writes() {
    let app = TestApp::new().await;
    let daemon = XRayDaemon::start().await;
    let function = start_function(&app, &daemon, None, &[]).await;

    let post = ApiGatewayEvent::create_plant(&bearer("bob"), r#"{"id": 3, "name": "Aloe"}"#);
    let invoked = function.invoke(&post.event()).await;
    assert_eq!(
        TestResponse::from_lambda_response(&invoked.response).status,
        200
    );

    let documents = documents_of(&daemon, &invoked).await;
    let handler = document(&documents, "## handler");
    assert_eq!(handler["http"]["request"]["method"], "POST");
    assert_eq!(children(handler), ["auth", "parse", "store.create"]);
    let calls = dynamodb_calls(child(handler, "store.create"));
    assert_eq!(calls.len(), 2, "{handler}");
    assert_dynamodb_call(calls[0], "UpdateItem", &app.table, 200, 0);
    assert_dynamodb_call(calls[1], "PutItem", &app.table, 200, 0);
    assert_nested_in_time(handler);
    assert_eq!(
        app.stored_items().await,
        [json!({"owner": "bob", "id": 3, "name": "Aloe"})]
    );
}

#[tokio::test]
async fn a_store_fault_is_recorded_with_its_retries_at_each_level() {
    let app = TestApp::new().await;
    // The warm-up at init passes; then DynamoDB fails on its side.
    let proxy = FaultProxy::start(
        &TestApp::dynamodb_url(),
        &[Fault::PassThrough],
        Fault::ServerError,
    )
    .await;
    let daemon = XRayDaemon::start().await;
    let function = start_function(&app, &daemon, Some(&proxy.url), &[]).await;

    let post = ApiGatewayEvent::create_plant(&bearer("carol"), r#"{"id": 1, "name": "Ivy"}"#);
    let invoked = function.invoke(&post.event()).await;
    TestResponse::from_lambda_response(&invoked.response).assert_error(503, "");

    let documents = documents_of(&daemon, &invoked).await;
    let handler = document(&documents, "## handler");
    assert_eq!(handler["http"]["response"]["status"], 503);
    assert_eq!(flags(handler), [false, false, true], "{handler}");
    let store = child(handler, "store.create");
    assert_eq!(flags(store), [false, false, true], "{store}");
    let calls = dynamodb_calls(store);
    assert_eq!(calls.len(), 1, "{store}");
    assert_dynamodb_call(calls[0], "UpdateItem", &app.table, 500, MAX_ATTEMPTS - 1);
    assert_eq!(flags(calls[0]), [false, false, true], "{}", calls[0]);
    assert_eq!(flags(child(handler, "auth")), [false; 3]);
    assert!(app.stored_items().await.is_empty());
}

#[tokio::test]
async fn a_cold_start_sends_the_key_fetch_with_the_first_invocation_only() {
    let app = TestApp::new().await;
    let server = KeyServer::start(keys().jwks.clone()).await;
    let daemon = XRayDaemon::start().await;
    let remote_keys = [
        ("AUTH_JWKS", ""),
        ("AUTH_JWKS_URL", server.jwks_url.as_str()),
    ];
    let function = start_function(&app, &daemon, None, &remote_keys).await;
    let list = ApiGatewayEvent::list_plants(&bearer("dave"), "").event();

    let first = function.invoke(&list).await;
    let documents = documents_of(&daemon, &first).await;
    let init = document(&documents, "## init");
    let (fetch, warm_up) = (&init["subsegments"][0], &init["subsegments"][1]);
    let (fetch, warm_up) = if fetch["name"] == "DynamoDB" {
        (warm_up, fetch)
    } else {
        (fetch, warm_up)
    };
    assert_eq!(children(init).len(), 2, "{init}");
    assert_eq!(fetch["name"], "127.0.0.1", "{fetch}");
    assert_eq!(fetch["namespace"], "remote");
    assert_eq!(
        fetch["http"],
        json!({"request": {"method": "GET", "url": server.jwks_url}, "response": {"status": 200}})
    );
    assert_dynamodb_call(warm_up, "Query", &app.table, 200, 0);
    assert!(init["end_time"].as_f64() <= document(&documents, "## handler")["start_time"].as_f64());
    assert_eq!(server.fetches(), 1);

    let second = function.invoke(&list).await;
    let documents = documents_of(&daemon, &second).await;
    let names: Vec<&Value> = documents.iter().map(|document| &document["name"]).collect();
    assert_eq!(names, ["## handler"], "init is sent once");
}

#[tokio::test]
async fn an_unsampled_invocation_sends_nothing_and_passes_its_header_on() {
    let app = TestApp::new().await;
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::PassThrough).await;
    let daemon = XRayDaemon::start().await;
    let function = start_function(&app, &daemon, Some(&proxy.url), &[]).await;
    let before = proxy.call_count();

    let post = ApiGatewayEvent::create_plant(&bearer("erin"), r#"{"id": 1, "name": "Fern"}"#);
    let unsampled = function.invoke_sampled(&post.event(), false).await;
    assert_eq!(
        TestResponse::from_lambda_response(&unsampled.response).status,
        200
    );
    let ids = trace_ids(&unsampled);
    let headers: Vec<Option<String>> = proxy
        .calls_since(before)
        .into_iter()
        .map(|call| call.trace_header)
        .collect();
    let passed_on = format!("Root={};Parent={};Sampled=0", ids.root, ids.parent);
    assert_eq!(headers, [Some(passed_on.clone()), Some(passed_on)]);

    // A sampled one after it is sent, and so shows the unsampled one's
    // documents were never sent (UDP keeps order on loopback).
    let list = ApiGatewayEvent::list_plants(&bearer("erin"), "").event();
    let sampled = function.invoke(&list).await;
    documents_of(&daemon, &sampled).await;
    let documents = daemon.documents();
    assert!(
        documents
            .iter()
            .all(|document| document["trace_id"] != ids.root.as_str()),
        "{documents:?}"
    );
    assert!(
        documents
            .iter()
            .all(|document| document["name"] != "## init"),
        "init belongs to the first invocation's trace, which was not sampled"
    );
}

#[tokio::test]
async fn without_a_daemon_address_nothing_is_traced_and_no_header_passed_on() {
    let app = TestApp::new().await;
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::PassThrough).await;
    let mut env = app.function_env();
    // Concurrent, as Lambda Managed Instances run it: lambda_runtime then
    // sets no process-wide `_X_AMZN_TRACE_ID` for the SDK to pass on, so any
    // header DynamoDB gets would be the function's own tracer's.
    env.set("AWS_ENDPOINT_URL_DYNAMODB", &proxy.url)
        .set("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .set("AWS_LAMBDA_MAX_CONCURRENCY", "2");
    let function = LambdaProcess::start(&crate::bootstrap_command(), &env).await;
    let before = proxy.call_count();
    let post = ApiGatewayEvent::create_plant(&bearer("gina"), r#"{"id": 1, "name": "Fern"}"#);
    let invoked = function.invoke(&post.event()).await;
    assert_eq!(
        TestResponse::from_lambda_response(&invoked.response).status,
        200
    );
    let headers: Vec<Option<String>> = (proxy.calls_since(before).into_iter())
        .map(|call| call.trace_header)
        .collect();
    assert_eq!(headers, [None, None], "two writes, neither traced");
    // The log still names the invocation's trace.
    let ids = trace_ids(&invoked);
    let request_line = (function.output().iter())
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["message"] == "request")
        .expect("a request line");
    assert_eq!(request_line["span"]["traceId"], ids.root.as_str());
}

#[tokio::test]
async fn a_daemon_that_is_not_there_changes_no_answer() {
    let app = TestApp::new().await;
    // A port that nothing listens on: the datagrams go nowhere.
    let daemon = XRayDaemon::start().await;
    let nowhere = daemon.address.clone();
    drop(daemon);
    let mut env = app.function_env();
    env.set("AWS_XRAY_DAEMON_ADDRESS", &nowhere);
    let function = LambdaProcess::start(&crate::bootstrap_command(), &env).await;
    for id in 1..=3 {
        let body = json!({"id": id, "name": "Fern"}).to_string();
        let invoked = function
            .invoke(&ApiGatewayEvent::create_plant(&bearer("frank"), &body).event())
            .await;
        assert_eq!(
            TestResponse::from_lambda_response(&invoked.response).status,
            200
        );
    }
    assert_eq!(app.stored_items().await.len(), 3);
    let output = function.output().join("\n");
    assert!(!output.contains("ERROR"), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_invocations_at_once_each_trace_under_their_own_header() {
    let app = TestApp::new().await;
    for id in 1..=3 {
        app.create("alice", json!({"id": id, "name": format!("plant {id}")}))
            .await;
    }
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::PassThrough).await;
    let daemon = XRayDaemon::start().await;
    let concurrency = [("AWS_LAMBDA_MAX_CONCURRENCY", "8")];
    let function = start_function(&app, &daemon, Some(&proxy.url), &concurrency).await;
    let before = proxy.call_count();
    let events: Vec<String> = (1..=32)
        .map(|n| match n % 2 {
            0 => ApiGatewayEvent::list_plants(&bearer("alice"), "limit=2").event(),
            _ => {
                let body = json!({"id": n, "name": format!("plant {n}")}).to_string();
                ApiGatewayEvent::create_plant(&bearer("bob"), &body).event()
            }
        })
        .collect();

    let invoked =
        futures::future::join_all(events.iter().map(|event| function.invoke(event))).await;

    assert!(function.max_in_flight() > 1, "the invocations overlapped");
    // Each DynamoDB subsegment is named, as Parent, by the one call that
    // carried its invocation's Root.
    let carried: HashMap<String, String> = proxy
        .calls_since(before)
        .into_iter()
        .map(|call| {
            let header = call
                .trace_header
                .expect("every call carries a trace header");
            let field = |name: &str| {
                header
                    .split(';')
                    .find_map(|field| field.strip_prefix(name))
                    .unwrap()
                    .to_owned()
            };
            (field("Parent="), field("Root="))
        })
        .collect();
    let mut traced_calls = HashSet::new();
    for (n, invocation) in (1..).zip(&invoked) {
        assert_eq!(
            TestResponse::from_lambda_response(&invocation.response).status,
            200
        );
        let root = trace_ids(invocation).root;
        let documents = documents_of(&daemon, invocation).await;
        let handler = document(&documents, "## handler");
        let store = if n % 2 == 0 {
            "store.list"
        } else {
            "store.create"
        };
        assert_eq!(children(handler), ["auth", "parse", store], "{handler}");
        for call in dynamodb_calls(handler) {
            let id = call["id"].as_str().unwrap();
            assert_eq!(carried.get(id), Some(&root), "{call}");
            assert!(traced_calls.insert(id.to_owned()));
        }
    }
    assert_eq!(
        traced_calls.len(),
        carried.len(),
        "every call is traced once"
    );
    // 16 POSTs of two writes, 16 GETs of one query.
    assert_eq!(carried.len(), 16 * 2 + 16);
    // And each request line names its own invocation's trace.
    let roots: HashMap<&str, String> = invoked
        .iter()
        .map(|call| (call.request_id.as_str(), trace_ids(call).root))
        .collect();
    let request_lines: Vec<Value> = function
        .output()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["message"] == "request")
        .collect();
    assert_eq!(request_lines.len(), 32);
    for line in request_lines {
        let request_id = line["span"]["requestId"].as_str().unwrap();
        assert_eq!(
            line["span"]["traceId"],
            roots[request_id].as_str(),
            "{line}"
        );
    }
}
