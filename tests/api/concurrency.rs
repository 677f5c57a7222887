//! The function's binary with `AWS_LAMBDA_MAX_CONCURRENCY=8`, as Managed
//! Instances run it: 64 mixed requests at once get the contract's answers
//! and whole lines; refetches hold under concurrent unknown `kid`s.

use std::collections::{BTreeMap, HashMap, HashSet};

use jsonwebtoken::Algorithm;
use plant_store_testkit::SigningKey;
use plant_store_testkit::forgeries::forged_tokens;
use plant_store_testkit::key_server::{Behaviour, KeyServer};
use plant_store_testkit::runtime_api::{Invoked, LambdaProcess};
use plant_store_testkit::{AUDIENCE, ApiGatewayEvent, ISSUER, TestApp, TestResponse, bearer, keys};
use serde_json::{Value, json};

/// Run together, these tests' same-item contention in one DynamoDB Local
/// passes the 1 s attempt timeout (a rightful 503): they take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `PerExecutionEnvironmentMaxConcurrency`, as Managed Instances are configured.
const MAX_CONCURRENCY: usize = 8;

/// The function's binary, with `AWS_LAMBDA_MAX_CONCURRENCY` if given.
async fn start_function(
    app: &TestApp,
    max_concurrency: Option<usize>,
    extra: &[(&str, &str)],
) -> LambdaProcess {
    let limit = max_concurrency.map(|limit| limit.to_string());
    let vars: Vec<_> =
        limit.iter().map(|limit| ("AWS_LAMBDA_MAX_CONCURRENCY", &limit[..])).collect();
    crate::start_function(app, &[&vars[..], extra].concat()).await
}

/// POSTs of these new ids for erin, each with a token signed by `key`.
fn posts_signed_by(key: &SigningKey, ids: std::ops::RangeInclusive<i64>) -> Vec<String> {
    let token = key.token(ISSUER, Some(AUDIENCE), "erin", 3600).unwrap();
    ids.map(|id| post_event(&format!("Bearer {token}"), json!({"id": id, "name": "Fern"})))
        .collect()
}

fn post_event(authorization: &str, body: Value) -> String {
    ApiGatewayEvent::create_plant(authorization, &body.to_string()).event()
}

/// Hands every event to the function at once; the answers in order.
async fn invoke_all(function: &LambdaProcess, events: &[String]) -> Vec<Invoked> {
    futures::future::join_all(events.iter().map(|event| function.invoke(event))).await
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A POST of an id not stored yet (bob, ids 1 to 16).
    New,
    /// The same POST again and again (carol's plant 1).
    Retry,
    /// POSTs of one id with different names (dave's plant 1).
    Conflict,
    /// A GET of two of alice's three plants.
    List,
    /// A POST with a forged token, claiming to be alice.
    Forged,
}

/// 64 requests of every kind, interleaved: each batch the function takes a mix.
fn mixed_requests() -> Vec<(Kind, String)> {
    let post = |kind, sub: &str, body: Value| (kind, post_event(&bearer(sub), body));
    let new = |id| post(Kind::New, "bob", json!({"id": id, "name": format!("plant {id}")}));
    let mut requests: Vec<_> = (1..=16).map(new).collect();
    let retry = json!({"id": 1, "name": "Ivy", "tag": "climber"});
    requests.extend((0..16).map(|_| post(Kind::Retry, "carol", retry.clone())));
    let conflict = |n| post(Kind::Conflict, "dave", json!({"id": 1, "name": format!("name {n}")}));
    requests.extend((0..8).map(conflict));
    let list = ApiGatewayEvent::list_plants(&bearer("alice"), "limit=2").event();
    requests.extend((0..16).map(|_| (Kind::List, list.clone())));
    for (_, token) in forged_tokens().into_iter().cycle().take(8) {
        let body = json!({"id": 99, "name": "Forged"});
        requests.push((Kind::Forged, post_event(&format!("Bearer {token}"), body)));
    }
    assert_eq!(requests.len(), 64);
    // 27 is prime to 64: a fixed permutation that spreads each kind out.
    (0..64).map(|n| requests[(n * 27) % 64].clone()).collect()
}

/// alice's plants, there before the requests.
const ALICES: [(i64, &str); 3] = [(1, "Fern"), (2, "Aloe"), (3, "Ivy")];

/// Each answer the contract's for its kind; the table what the accepted wrote.
async fn assert_contract_answers(app: &TestApp, answers: &[(Kind, TestResponse)]) {
    let mut conflict_winner = None;
    let mut statuses: BTreeMap<String, BTreeMap<u16, usize>> = BTreeMap::new();
    for (kind, response) in answers {
        *statuses.entry(format!("{kind:?}")).or_default().entry(response.status).or_default() += 1;
        let body = &response.body;
        match kind {
            Kind::New => {
                assert_eq!(response.status, 200, "{body}");
                assert!(body["name"].as_str().unwrap().starts_with("plant "));
            }
            Kind::Retry => {
                assert_eq!(response.status, 200, "{body}");
                assert_eq!(*body, json!({"name": "Ivy", "tag": "climber"}));
            }
            Kind::Conflict if response.status == 200 => {
                assert!(conflict_winner.replace(body["name"].clone()).is_none());
            }
            Kind::Conflict => response.assert_error(409, "id 1 already exists"),
            Kind::List => {
                assert_eq!(response.status, 200, "{body}");
                assert_eq!(*body, json!([{"name": "Fern"}, {"name": "Aloe"}]));
                assert!(response.header("link").unwrap().contains(r#"rel="next""#));
            }
            Kind::Forged => {
                response.assert_error(401, "token");
                assert!(response.header("www-authenticate").is_some());
            }
        }
    }
    eprintln!("statuses by kind: {statuses:?}");
    assert_eq!(statuses["Conflict"], BTreeMap::from([(200, 1), (409, 7)]));
    let alice = ALICES.map(|(id, name)| json!({"owner": "alice", "id": id, "name": name}));
    let bob = (1..=16).map(|id| json!({"owner": "bob", "id": id, "name": format!("plant {id}")}));
    let carol = json!({"owner": "carol", "id": 1, "name": "Ivy", "tag": "climber"});
    let dave = json!({"owner": "dave", "id": 1, "name": conflict_winner.unwrap()});
    let expected: Vec<Value> = alice.into_iter().chain(bob).chain([carol, dave]).collect();
    assert_eq!(app.stored_items().await, expected);
}

/// Every line one whole JSON object; a request line per request, with its
/// own request id and trace id.
fn assert_one_whole_line_per_request(function: &LambdaProcess, invoked: &[Invoked]) {
    let whole =
        |line: &String| serde_json::from_str(line).unwrap_or_else(|_| panic!("torn: {line}"));
    let lines: Vec<Value> = function.output().iter().map(whole).collect();
    let trace_ids: HashMap<&str, &str> =
        invoked.iter().map(|call| (call.request_id.as_str(), call.trace_id.as_str())).collect();
    let mut logged = HashSet::new();
    for line in lines.iter().filter(|line| line["message"] == "request") {
        let request_id = line["span"]["requestId"].as_str().unwrap();
        let root = trace_ids[request_id].split(';').find_map(|field| field.strip_prefix("Root="));
        assert_eq!(line["span"]["traceId"].as_str(), root, "{line}");
        assert!(logged.insert(request_id), "logged twice: {line}");
    }
    assert_eq!(logged.len(), invoked.len());
    let metrics: Vec<_> = lines.iter().filter(|line| line.get("_aws").is_some()).collect();
    assert_eq!(metrics.len(), invoked.len());
    // The alarm's dimension: the function's name, from the Lambda environment.
    assert!(metrics.iter().all(|line| line["FunctionName"] == "plant-store"));
}

/// The 64 mixed requests at once to one process with this concurrency: each
/// answer, the table and the log checked; the most held at once.
async fn serve_the_mix(max_concurrency: Option<usize>) -> usize {
    let app = TestApp::new().await;
    for (id, name) in ALICES {
        app.create("alice", json!({"id": id, "name": name})).await;
    }
    let function = start_function(&app, max_concurrency, &[]).await;
    let (kinds, events): (Vec<Kind>, Vec<String>) = mixed_requests().into_iter().unzip();

    let invoked = invoke_all(&function, &events).await;

    let answers: Vec<_> = kinds
        .into_iter()
        .zip(invoked.iter().map(|call| TestResponse::from_lambda_response(&call.response)))
        .collect();
    assert_contract_answers(&app, &answers).await;
    assert_one_whole_line_per_request(&function, &invoked);
    function.max_in_flight()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mixed_requests_at_once_in_one_process_get_the_contracts_answers() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let in_flight = serve_the_mix(Some(MAX_CONCURRENCY)).await;
    eprintln!("AWS_LAMBDA_MAX_CONCURRENCY={MAX_CONCURRENCY}: at most {in_flight} in flight");
    assert!((2..=MAX_CONCURRENCY).contains(&in_flight), "{in_flight} in flight at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_variable_one_process_serves_one_request_at_a_time() {
    let _turn = ONE_AT_A_TIME.lock().await;
    assert_eq!(serve_the_mix(None).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_unknown_kids_share_one_fetch_and_refetch_at_most_once_per_interval() {
    let _turn = ONE_AT_A_TIME.lock().await;
    // The issuer is down at init: no key set yet, so a miss may refetch
    // after a second (production's rules: 1 s without keys, else 10 s).
    let server = KeyServer::start(keys().jwks.clone()).await;
    server.set(Behaviour::Status(503));
    let app = TestApp::new().await;
    let remote_keys = crate::keys_from(&server.jwks_url);
    let function = start_function(&app, Some(MAX_CONCURRENCY), &remote_keys).await;
    assert_eq!(server.fetches(), 1, "the key set is fetched at init");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    // Back, with a key set that holds a new key: 16 requests signed with it,
    // at once, cause one fetch between them and all verify.
    let rotated = SigningKey::generate(Algorithm::EdDSA).unwrap();
    server.set(Behaviour::Serve(SigningKey::jwks_json(&[keys().eddsa(), &rotated])));
    let answers = invoke_all(&function, &posts_signed_by(&rotated, 1..=16)).await;
    let status = |call: &Invoked| TestResponse::from_lambda_response(&call.response).status;
    assert!(answers.iter().all(|call| status(call) == 200));
    assert_eq!(server.fetches(), 2, "concurrent misses share one fetch");

    // Within the refetch interval (10 s), 16 more unknown kids at once cause
    // no fetch at all, and are refused.
    let unknown = SigningKey::generate(Algorithm::EdDSA).unwrap();
    let answers = invoke_all(&function, &posts_signed_by(&unknown, 17..=32)).await;
    for call in &answers {
        TestResponse::from_lambda_response(&call.response).assert_error(401, "token");
    }
    assert_eq!(server.fetches(), 2, "no refetch within the interval");
    assert!(function.max_in_flight() > 1);
    assert_eq!(app.stored_items().await.len(), 16);
}
