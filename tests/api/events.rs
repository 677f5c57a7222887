//! Fixtures as tests: every event in `events/` answered as its
//! `.expected.json` says, through the function's binary under the Runtime
//! API (or `PLANT_STORE_BOOTSTRAP`) and, HTTP API events, `sam local invoke`.

use std::fs;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use plant_store_testkit::sam_local::{self, SamLocal};
use plant_store_testkit::{TestApp, TestResponse, token};
use serde_json::Value;

const EVENTS_OWNER: &str = "events-user";

fn event_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            event_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "json")
            && !path.to_string_lossy().ends_with(".expected.json")
        {
            found.push(path);
        }
    }
}

/// How an event reaches the function.
#[derive(Clone, Copy)]
enum Via<'a> {
    /// The Runtime API, to the binary (a process per event).
    Bootstrap,
    /// `sam local invoke`: `sam build`'s artifact in the Lambda container.
    SamLocalInvoke(&'a SamLocal),
}

/// Replays one event; the differences from its `.expected.json`, if any.
async fn replay(event_path: &Path, via: Via<'_>) -> Vec<String> {
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
    let response = match via {
        Via::Bootstrap => {
            let function = crate::start_function(&app, &[]).await;
            TestResponse::from_lambda_response(&function.invoke(&event).await.response)
        }
        Via::SamLocalInvoke(sam) => sam_local::invoke(sam, &event, &app.function_env()).await,
    };

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
    replay_all("events", Via::Bootstrap).await;
}

#[tokio::test]
#[ignore = "needs sam build's artifact and a container engine: scripts/test prepares them and runs it"]
async fn every_http_api_event_gets_its_expected_response_through_sam_local_invoke() {
    let sam = sam_local::prepared();
    replay_all("events/http-api", Via::SamLocalInvoke(&sam)).await;
}

/// Replays every event under `dir` (relative to the repository root).
async fn replay_all(dir: &str, via: Via<'_>) {
    let mut events = Vec::new();
    event_files(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).as_path(), &mut events);
    events.sort();
    assert!(!events.is_empty(), "no events under {dir}");
    // One `sam local` at a time: each starts a container under emulation.
    let at_once = match via {
        Via::SamLocalInvoke(_) => 1,
        Via::Bootstrap => events.len(),
    };
    // Every fixture is replayed, and every one that fails is named.
    let results: Vec<Vec<String>> = futures::stream::iter(&events)
        .map(|event| replay(event, via))
        .buffered(at_once)
        .collect()
        .await;
    let failures: Vec<String> = events
        .iter()
        .zip(results)
        .filter(|(_, differences)| !differences.is_empty())
        .map(|(event, differences)| format!("{}:\n  {}", event.display(), differences.join("\n  ")))
        .collect();
    let (failed, all, failures) = (failures.len(), events.len(), failures.join("\n"));
    assert!(failed == 0, "{failed} of {all} events differ from their .expected.json:\n{failures}");
}
