//! The request log: one JSON line per request, from the function's
//! subscriber (`plant_store::log`), with the request id, method, path, status and
//! latency, and never the bearer token; and the EMF metrics line of each
//! request through the same writer. A test binary of its own, because it
//! installs the process-wide subscriber.

use std::io::Write;
use std::sync::{Arc, Mutex};

use lambda_http::Context;
use plant_store_testkit::{ApiGatewayEvent, TestApp, bearer};
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The invocation's context as the Runtime API gives it: its request id,
/// and a trace header whose Root is the trace id.
fn invocation(number: u32) -> Context {
    let mut context = Context::default();
    context.request_id = format!("request-{number}");
    context.xray_trace_id =
        Some(format!("Root=1-6740e000-{number:024x};Parent={number:016x};Sampled=1"));
    context
}

/// The log as Lambda's JSON format sets it up, captured.
fn json_log() -> CapturedLog {
    // SAFETY: this binary's only test sets the variable before any thread reads it.
    unsafe { std::env::set_var("AWS_LAMBDA_LOG_FORMAT", "JSON") };
    let log = CapturedLog::default();
    let writer = log.clone();
    let config = plant_store::config::TelemetryConfig::from_env();
    plant_store::log::init(move || writer.clone(), &config);
    log
}

#[tokio::test]
async fn each_request_logs_one_json_line_without_the_token() {
    let log = json_log();

    // One plant per owner: the second is refused for the bound.
    let app = TestApp::with_max_plants_per_owner(1).await;
    let valid = bearer("alice");
    let forged = format!("{}x", &valid[..valid.len() - 1]);
    let requests = [
        (ApiGatewayEvent::create_plant(&valid, r#"{"id": 1, "name": "Fern"}"#), 200),
        (ApiGatewayEvent::create_plant(&valid, r#"{"id": 2, "name": "Ivy"}"#), 409),
        (ApiGatewayEvent::create_plant(&forged, r#"{"id": 3, "name": "Aloe"}"#), 401),
        (ApiGatewayEvent::list_plants(&valid, "limit=5"), 200),
    ];
    for (number, (event, status)) in (1..).zip(requests) {
        let response = app.invoke_in(&event.event(), invocation(number)).await;
        assert_eq!(response.status, status, "{:?}", response.body);
    }

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    for token in [&valid["Bearer ".len()..], &forged["Bearer ".len()..]] {
        assert!(!text.contains(token), "a token reached the log:\n{text}");
    }
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("every log line is JSON"))
        .collect();
    let summary = request_lines(&lines);
    let trace = |number: u32| json!(format!("1-6740e000-{number:024x}"));
    assert_eq!(
        summary,
        vec![
            ("request-1".into(), trace(1), "POST".into(), 200.into(), false),
            ("request-2".into(), trace(2), "POST".into(), 409.into(), true),
            ("request-3".into(), trace(3), "POST".into(), 401.into(), true),
            ("request-4".into(), trace(4), "GET".into(), 200.into(), false),
        ]
    );
    let refused =
        lines.iter().find(|line| line["message"] == "request" && line["status"] == 409).unwrap();
    assert!(
        refused["error"].as_str().unwrap().contains("maximum of 1 plants"),
        "the refusal's message: {refused}"
    );
    // The metrics reach the same writer: one EMF line per request, and
    // only the bound's refusal counts as one.
    let metrics = metrics_lines(&lines);
    assert_eq!(
        metrics,
        vec![
            ("POST /plants".into(), "2xx".into(), 0.into()),
            ("POST /plants".into(), "4xx".into(), 1.into()),
            ("POST /plants".into(), "4xx".into(), 0.into()),
            ("GET /plants".into(), "2xx".into(), 0.into()),
        ]
    );
}

/// Each request line's request id, trace id, method, status and whether it
/// names an error; each at INFO, with its latency.
fn request_lines(lines: &[Value]) -> Vec<(Value, Value, Value, Value, bool)> {
    let requests = lines.iter().filter(|line| line["message"] == "request");
    let summary = requests.map(|line| {
        assert_eq!(line["level"], "INFO", "{line}");
        assert!(line["latency_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{line}");
        let (span, error) = (&line["span"], line.get("error").is_some());
        (
            span["requestId"].clone(),
            span["traceId"].clone(),
            line["method"].clone(),
            line["status"].clone(),
            error,
        )
    });
    summary.collect()
}

/// Each EMF line's route, status class and bound refusals.
fn metrics_lines(lines: &[Value]) -> Vec<(Value, Value, Value)> {
    let metrics = lines.iter().filter(|line| line.get("_aws").is_some());
    metrics
        .map(|line| {
            (line["Route"].clone(), line["StatusClass"].clone(), line["BoundRefusals"].clone())
        })
        .collect()
}
