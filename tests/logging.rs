//! The request log: one JSON line per request, from the function's
//! subscriber (`plant_store::log`), with the request id, method, path, status and
//! latency, and never the bearer token; and the EMF metrics line of each
//! request through the same writer. A test binary of its own, because it
//! installs the process-wide subscriber.

use std::io::Write;
use std::sync::{Arc, Mutex};

use plant_store_testkit::{ApiGatewayEvent, TestApp, bearer};
use serde_json::Value;

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

#[tokio::test]
async fn each_request_logs_one_json_line_without_the_token() {
    // SAFETY: this binary's only test sets the variable before any thread reads it.
    unsafe { std::env::set_var("AWS_LAMBDA_LOG_FORMAT", "JSON") };
    let log = CapturedLog::default();
    let writer = log.clone();
    plant_store::log::init_subscriber(move || writer.clone());

    let app = TestApp::new().await;
    let valid = bearer("alice");
    let forged = format!("{}x", &valid[..valid.len() - 1]);
    assert_eq!(
        app.post(&valid, r#"{"id": 1, "name": "Fern"}"#)
            .await
            .status,
        200
    );
    assert_eq!(
        app.post(&forged, r#"{"id": 2, "name": "Ivy"}"#)
            .await
            .status,
        401
    );
    let request = ApiGatewayEvent::new("GET", "/plants?limit=5")
        .header("authorization", &valid)
        .build();
    assert_eq!(app.send(request).await.status, 200);

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    for token in [&valid["Bearer ".len()..], &forged["Bearer ".len()..]] {
        assert!(!text.contains(token), "a token reached the log:\n{text}");
    }
    let request_lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("every log line is JSON"))
        .filter(|line| line["fields"]["message"] == "request")
        .collect();
    let summary: Vec<_> = request_lines
        .iter()
        .map(|line| {
            let fields = &line["fields"];
            assert!(fields["request_id"].is_string(), "{line}");
            assert!(
                fields["latency_ms"].as_f64().is_some_and(|ms| ms >= 0.0),
                "{line}"
            );
            (
                fields["method"].clone(),
                fields["path"].clone(),
                fields["status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("POST".into(), "/plants".into(), 200.into()),
            ("POST".into(), "/plants".into(), 401.into()),
            ("GET".into(), "/plants".into(), 200.into()),
        ]
    );
    // The metrics reach the same writer: one EMF line per request.
    let metrics: Vec<(Value, Value)> = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line.get("_aws").is_some())
        .map(|line| (line["Route"].clone(), line["StatusClass"].clone()))
        .collect();
    assert_eq!(
        metrics,
        vec![
            ("POST /plants".into(), "2xx".into()),
            ("POST /plants".into(), "4xx".into()),
            ("GET /plants".into(), "2xx".into()),
        ]
    );
}
