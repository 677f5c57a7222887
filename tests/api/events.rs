//! Fixtures as tests: every event in `events/` answered as its
//! `.expected.json` says, through the function's binary under the Runtime
//! API (or `PLANT_STORE_BOOTSTRAP`: the full run's `sam build` artifact).

use std::fs;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use plant_store_testkit::{TestApp, TestResponse, token};
use serde_json::Value;

const EVENTS_OWNER: &str = "events-user";

/// Every event of `events/EDGE/`, in order (each beside its `.expected.json`).
fn event_files() -> Vec<PathBuf> {
    let edges = fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("events")).unwrap();
    let files = edges.flat_map(|edge| fs::read_dir(edge.unwrap().path()).unwrap());
    let events = files.map(|file| file.unwrap().path()).filter(|path| {
        let name = path.to_string_lossy();
        name.ends_with(".json") && !name.ends_with(".expected.json")
    });
    let mut events: Vec<PathBuf> = events.collect();
    events.sort();
    events
}

/// Replays one event through the binary under the Runtime API (a process
/// per event); the differences from its `.expected.json`, if any.
async fn replay(event_path: &Path) -> Vec<String> {
    let expected_path = event_path.with_extension("expected.json");
    let Ok(expected) = fs::read_to_string(&expected_path) else {
        return vec![format!("no {}", expected_path.display())];
    };
    let expected: Value = serde_json::from_str(&expected).unwrap();

    let app = TestApp::new().await;
    for plant in expected["given"].as_array().into_iter().flatten() {
        app.create(EVENTS_OWNER, plant.clone()).await;
    }
    let event = fs::read_to_string(event_path).unwrap().replace("{{token}}", &token(EVENTS_OWNER));
    let function = crate::start_function(&app, &[]).await;
    let response = TestResponse::from_lambda_response(&function.invoke(&event).await.response);

    let mut differences = Vec::new();
    let mut compare = |what: String, actual: Value, wanted: &Value| {
        if actual != *wanted {
            differences.push(format!("{what}: got {actual}, expected {wanted}"));
        }
    };
    compare("status".into(), response.status.into(), &expected["status"]);
    for (header, value) in expected["headers"].as_object().unwrap() {
        let actual = response.header(header).map_or(Value::Null, Value::from);
        compare(format!("header {header}"), actual, value);
    }
    compare("body".into(), response.body.clone(), &expected["body"]);
    if let Some(stored) = expected.get("stored") {
        let actual = Value::from(app.stored_items().await);
        compare("table afterwards".into(), actual, stored);
    }
    differences
}

#[tokio::test]
async fn every_sample_event_gets_its_expected_response_from_the_bootstrap() {
    let events = event_files();
    assert!(!events.is_empty(), "no events under events/");
    // Every fixture is replayed, and every one that fails is named.
    let replays = futures::stream::iter(&events).map(|event| replay(event));
    let results: Vec<Vec<String>> = replays.buffered(events.len()).collect().await;
    let failed = events.iter().zip(results).filter(|(_, differences)| !differences.is_empty());
    let failures: Vec<String> = failed
        .map(|(event, differences)| format!("{}:\n  {}", event.display(), differences.join("\n  ")))
        .collect();
    let (failed, all, failures) = (failures.len(), events.len(), failures.join("\n"));
    assert!(failed == 0, "{failed} of {all} events differ from their .expected.json:\n{failures}");
}
