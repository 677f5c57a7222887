//! Fixtures as tests: every event in `events/` (real API Gateway REST, HTTP
//! API and function URL shapes) is deserialised the way the Lambda runtime
//! does and answered by the production handler against DynamoDB Local, then
//! compared with the `.expected.json` beside it.
//!
//! `{{token}}` in an event stands for a token minted for this run (for the
//! owner `events-user`), so committed events hold no credential that expires.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{TestApp, token};
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

async fn replay(event_path: &Path) {
    let name = event_path.display();
    let expected_path = event_path.with_extension("expected.json");
    let expected: Value = serde_json::from_str(
        &fs::read_to_string(&expected_path)
            .unwrap_or_else(|_| panic!("{name} has no {}", expected_path.display())),
    )
    .unwrap();

    let app = TestApp::new().await;
    for plant in expected["given"].as_array().into_iter().flatten() {
        app.create(EVENTS_OWNER, plant.clone()).await;
    }
    let event = fs::read_to_string(event_path)
        .unwrap()
        .replace("{{token}}", &token(EVENTS_OWNER));
    let request = lambda_http::request::from_str(&event)
        .unwrap_or_else(|error| panic!("{name} is not an event lambda_http accepts: {error}"));
    let response = app.send(request).await;

    assert_eq!(
        response.status, expected["status"],
        "{name}: status (body {})",
        response.body
    );
    for (header, value) in expected["headers"].as_object().unwrap() {
        assert_eq!(
            response.header(header),
            value.as_str(),
            "{name}: header {header}"
        );
    }
    assert_eq!(response.body, expected["body"], "{name}: body");
    if let Some(stored) = expected.get("stored") {
        assert_eq!(
            Value::from(app.stored_items().await),
            *stored,
            "{name}: table afterwards"
        );
    }
}

#[tokio::test]
async fn every_sample_event_gets_its_expected_response() {
    let mut events = Vec::new();
    event_files(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("events")
            .as_path(),
        &mut events,
    );
    events.sort();
    // Seven cases for each of the three event sources.
    assert_eq!(events.len(), 21, "events found: {events:?}");
    for event in &events {
        replay(event).await;
    }
}
