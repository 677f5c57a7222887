//! Store faults, injected by a proxy between the production client and
//! DynamoDB Local: each a precise answer well inside the 10 s timeout,
//! nothing lost or written twice (times printed with --nocapture).

use std::time::{Duration, Instant};

use plant_store::config::DEFAULT_MAX_PLANTS_PER_OWNER;
use plant_store::store::{MAX_ATTEMPTS, PlantStore, STORE_BUDGET};
use plant_store_testkit::fault_proxy::{Fault, FaultProxy};
use plant_store_testkit::{
    ApiGatewayEvent, TestApp, TestResponse, bearer, counted_dynamodb_client,
};
use serde_json::{Value, json};

/// Well inside the function's 10 s timeout: a request's store work has `STORE_BUDGET`.
const ANSWER_WITHIN: Duration = Duration::from_millis(4500);
const PLANT: &str = r#"{"id": 1, "name": "Fern", "tag": "green"}"#;

struct Outcome {
    response: TestResponse,
    elapsed: Duration,
    attempts: usize,
}

/// Sends one request: its answer, time and the SDK's attempts.
async fn measure(case: &str, app: &TestApp, sent: impl Future<Output = TestResponse>) -> Outcome {
    let started = Instant::now();
    let response = sent.await;
    let (elapsed, attempts) = (started.elapsed(), app.dynamodb_calls());
    eprintln!("fault case {case}: {} in {elapsed:?} after {attempts} attempt(s)", response.status);
    Outcome { response, elapsed, attempts }
}

fn assert_unavailable(case: &str, outcome: &Outcome) {
    outcome.response.assert_error(503, "Retry-After");
    assert_eq!(outcome.response.header("retry-after"), Some("1"), "{case}");
    assert!(outcome.elapsed < ANSWER_WITHIN, "{case}: answered after {:?}", outcome.elapsed);
    let body = outcome.response.body.to_string();
    for secret in ["Throughput", "Internal", "dispatch", "timeout", "plants-", "127.0.0.1", "alice"]
    {
        assert!(!body.contains(secret), "{case}: 503 body leaks {secret:?}: {body}");
    }
}

#[tokio::test]
async fn transient_faults_are_retried_and_the_plant_written_once() {
    // The count's update retries through the faults, then the put: one
    // attempt more than the faults.
    for (case, faults) in [
        ("2 throttles, then OK", vec![Fault::Throttle, Fault::Throttle]),
        ("1 reset, then OK", vec![Fault::Reset]),
    ] {
        let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &faults, Fault::PassThrough).await;
        let app = TestApp::with_store(Some(&proxy.url), BOUND).await;
        let outcome = measure(case, &app, app.post(&bearer("alice"), PLANT)).await;
        assert_eq!(outcome.response.status, 200, "{case}: {}", outcome.response.body);
        assert_eq!(outcome.response.body, json!({"name": "Fern", "tag": "green"}));
        assert_eq!(outcome.attempts, faults.len() + 2, "{case}");
        assert_eq!(proxy.requests(), faults.len() + 2, "{case}: the proxy saw every attempt");
        let stored = json!({"owner": "alice", "id": 1, "name": "Fern", "tag": "green"});
        assert_eq!(app.stored_items().await, [stored]);
    }
}

#[tokio::test]
async fn persistent_faults_are_a_503_after_every_attempt_and_write_nothing() {
    for (case, fault, bound) in [
        ("throttling", Fault::Throttle, BOUND),
        ("throttling, without the bound", Fault::Throttle, 0),
        ("connection reset", Fault::Reset, BOUND),
        ("server error", Fault::ServerError, BOUND),
    ] {
        let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], fault).await;
        let app = TestApp::with_store(Some(&proxy.url), bound).await;
        let outcome = measure(case, &app, app.post(&bearer("alice"), PLANT)).await;
        assert_unavailable(case, &outcome);
        assert_eq!(outcome.attempts, MAX_ATTEMPTS as usize, "{case}");
        assert!(app.stored_items().await.is_empty(), "{case}");
        // A failed count update wrote nothing to give back.
        let counts: Vec<Value> = app.stored_plant_counts().await;
        assert!(counts.iter().all(|count| count["plants"] == 0), "{case}: {counts:?}");
    }
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::Throttle).await;
    let app = TestApp::with_store(Some(&proxy.url), BOUND).await;
    let outcome = measure("listing, throttled", &app, app.get(&bearer("alice"), "limit=5")).await;
    assert_unavailable("listing, throttled", &outcome);
    assert_eq!(outcome.attempts, MAX_ATTEMPTS as usize);
    // A port that was just free: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let app = TestApp::with_store(Some(&format!("http://{closed}")), BOUND).await;
    let outcome = measure("connection refused", &app, app.post(&bearer("alice"), PLANT)).await;
    assert_unavailable("connection refused", &outcome);
    assert_eq!(outcome.attempts, MAX_ATTEMPTS as usize);
}

/// A multi-Region write conflict (nothing applied) on each of a bounded
/// create's two writes: once, retried and written; always, 503 and nothing
/// written; either way the count is the plants' (docs/contract.md).
#[tokio::test]
async fn a_replicated_write_conflict_is_retried_then_a_503_and_the_count_stays_exact() {
    let stored = json!({"owner": "alice", "id": 1, "name": "Fern", "tag": "green"});
    for write in ["UpdateItem", "PutItem"] {
        let once = [Fault::PassThrough, Fault::Conflict(write)];
        let once = if write == "UpdateItem" { &once[1..] } else { &once[..] };
        for (case, first, then) in
            [("once", once, Fault::PassThrough), ("always", &[][..], Fault::Conflict(write))]
        {
            let case = format!("{write}'s conflict, {case}");
            let proxy = FaultProxy::start(&TestApp::dynamodb_url(), first, then).await;
            let app = TestApp::with_store(Some(&proxy.url), BOUND).await;
            let outcome = measure(&case, &app, app.post(&bearer("alice"), PLANT)).await;
            let (plants, count) = match then {
                Fault::PassThrough => (vec![stored.clone()], 1),
                _ => {
                    assert_unavailable(&case, &outcome);
                    (vec![], 0)
                }
            };
            let answered = (outcome.response.status == 200, &outcome.response.body);
            assert_eq!(answered.0, count == 1, "{case}: {}", answered.1);
            assert_eq!(app.stored_items().await, plants, "{case}");
            let counts = app.stored_plant_counts().await;
            assert!(counts.iter().all(|c| c["plants"] == count), "{case}: {counts:?}");
        }
    }
}

#[tokio::test]
async fn an_unexpected_service_error_is_a_generic_500_not_retried_that_keeps_no_place() {
    // The count takes its place, then DynamoDB refuses the put with a 4xx
    // it does not retry: nothing was written, so the place goes back.
    let first = [Fault::PassThrough, Fault::UnexpectedError];
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &first, Fault::PassThrough).await;
    let app = TestApp::with_store(Some(&proxy.url), BOUND).await;
    let outcome = measure("unexpected error", &app, app.post(&bearer("alice"), PLANT)).await;
    outcome.response.assert_error(500, "unexpected error");
    let body = outcome.response.body.to_string();
    for secret in ["Validation", "DynamoDB", &app.table, "alice"] {
        assert!(!body.contains(secret), "the 500 leaks {secret:?}: {body}");
    }
    assert_eq!(outcome.attempts, 3, "the count, the put (not retried), the place given back");
    assert!(outcome.elapsed < ANSWER_WITHIN);
    assert!(app.stored_items().await.is_empty());
    assert_eq!(app.stored_plant_counts().await, [json!({"owner": "alice", "plants": 0})]);
}

#[tokio::test]
async fn warming_up_makes_one_read_changes_nothing_and_gives_up_on_a_hang() {
    let app = TestApp::new().await;
    app.create("alice", json!({"id": 1, "name": "Fern"})).await;
    let before = app.stored_items().await;
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::Hang).await;
    for endpoint in [None, Some(proxy.url.as_str())] {
        let (client, calls) = counted_dynamodb_client(endpoint).await;
        let started = Instant::now();
        PlantStore::new(client, &app.table, DEFAULT_MAX_PLANTS_PER_OWNER).warm_up().await;
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_millis(1300), "{endpoint:?}: {elapsed:?}");
        assert_eq!(calls.count(), 1, "{endpoint:?}");
    }
    assert_eq!(app.stored_items().await, before);
}

/// A request's whole store work ends by its deadline: the budget, and what
/// answering after it takes.
const WITHIN_BUDGET: Duration = STORE_BUDGET.saturating_add(Duration::from_millis(500));
const BOUND: u32 = 3;

#[tokio::test]
async fn every_operation_ends_inside_the_budget_when_its_next_call_hangs() {
    let create = |body| ApiGatewayEvent::create_plant(&bearer("alice"), body).event();
    let (new, clash) =
        (create(r#"{"id": 99, "name": "New"}"#), create(r#"{"id": 1, "name": "O"}"#));
    let list = ApiGatewayEvent::list_plants(&bearer("alice"), "limit=5").event();
    // The case, the bound, alice's plants before, the request, its calls
    // that pass first, and the answer's status.
    let hangs = [
        // The count taken, the put hangs: 503, the count one high.
        ("create: the put", BOUND, 0, &new, 1, 503),
        // The only call, with the bound off.
        ("create without the bound", 0, 0, &new, 0, 503),
        // At the bound, the read that tells a retry from the bound hangs.
        ("create at the bound: the read", BOUND, 3, &new, 1, 503),
        // The id is taken and the count is given back: that hangs, and the
        // answer (409) is given at the deadline.
        ("create of a taken id: the give-back", BOUND, 1, &clash, 2, 409),
        ("list", BOUND, 1, &list, 0, 503),
    ];
    for (case, bound, seeded, request, calls_before, status) in hangs {
        // Seeding makes a put per plant, and a count update with the bound.
        let seeding = usize::try_from(seeded).unwrap() * if bound == 0 { 1 } else { 2 };
        let first = vec![Fault::PassThrough; seeding + calls_before];
        let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &first, Fault::Hang).await;
        let app = TestApp::with_store(Some(&proxy.url), bound).await;
        for id in 1..=seeded {
            app.create("alice", json!({"id": id, "name": format!("Plant {id}")})).await;
        }
        let started = Instant::now();
        let response = app.invoke(request).await;
        let elapsed = started.elapsed();
        eprintln!("{case}: {} after {elapsed:?}", response.status);
        assert_eq!(response.status, status, "{case}: {}", response.body);
        assert!(elapsed < WITHIN_BUDGET, "{case}: answered after {elapsed:?}");
        if status == 503 {
            assert_eq!(response.header("retry-after"), Some("1"), "{case}");
        }
        // Nothing was written that the answer does not say, and the count
        // is never below the plants.
        let plants = app.stored_items().await.len();
        assert_eq!(plants, usize::try_from(seeded).unwrap(), "{case}");
        for count in app.stored_plant_counts().await {
            assert!(count["plants"].as_u64().unwrap() >= plants as u64, "{case}");
        }
    }
}
