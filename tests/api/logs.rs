//! The function's output, from its binary: one JSON line per request, its
//! log and EMF record, naming its invocation; no credential at TRACE.

use plant_store_testkit::{ApiGatewayEvent, TestApp, TestResponse, bearer};
use serde_json::{Value, json};

#[tokio::test]
async fn each_request_logs_one_json_line_and_one_metrics_line() {
    // One plant per owner: the second is refused for the bound.
    let app = TestApp::with_store(None, 1).await;
    let function = crate::start_function(&app, &[("MAX_PLANTS_PER_OWNER", "1")]).await;
    let valid = bearer("alice");
    let forged = format!("{}x", &valid[..valid.len() - 1]);
    let requests = [
        ("POST", ApiGatewayEvent::create_plant(&valid, r#"{"id": 1, "name": "Fern"}"#), 200),
        ("POST", ApiGatewayEvent::create_plant(&valid, r#"{"id": 2, "name": "Ivy"}"#), 409),
        ("POST", ApiGatewayEvent::create_plant(&forged, r#"{"id": 3, "name": "Aloe"}"#), 401),
        ("GET", ApiGatewayEvent::list_plants(&valid, "limit=5"), 200),
    ];
    let mut expected = Vec::new();
    for (method, event, status) in requests {
        let invoked = function.invoke(&event.event()).await;
        assert_eq!(TestResponse::from_lambda_response(&invoked.response).status, status);
        let root = invoked.trace_id.split(';').find_map(|field| field.strip_prefix("Root="));
        let (request_id, trace_id) = (json!(invoked.request_id), json!(root.unwrap()));
        expected.push((request_id, trace_id, json!(method), json!(status), status != 200));
    }

    let json = |line: &String| serde_json::from_str(line).unwrap_or_else(|_| panic!("{line}"));
    let lines: Vec<Value> = function.output().iter().map(json).collect();
    let logged = request_lines(&lines);
    assert_eq!(logged, expected);
    let refused = lines.iter().find(|line| line["status"] == 409).unwrap();
    assert!(refused["error"].as_str().unwrap().contains("maximum of 1 plants"), "{refused}");
    // One EMF line per request, and only the bound's refusal counts as one.
    let metrics = metrics_lines(&lines);
    let (post, get) = ("createPlant", "listPlants");
    let expected = json!([[post, "2xx", 0], [post, "4xx", 1], [post, "4xx", 0], [get, "2xx", 0]]);
    assert_eq!(json!(metrics), expected);
}

/// Each EMF line's route, status class and bound refusals; each with a value
/// for every dimension and metric its directive declares.
fn metrics_lines(lines: &[Value]) -> Vec<(Value, Value, Value)> {
    let emf = lines.iter().filter(|line| line.get("_aws").is_some());
    let summary = emf.map(|line| {
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        let sets = directive["Dimensions"].as_array().unwrap().iter();
        let dimensions = sets.flat_map(|set| set.as_array().unwrap());
        let metrics = directive["Metrics"].as_array().unwrap().iter().map(|metric| &metric["Name"]);
        for name in dimensions.chain(metrics) {
            assert!(line.get(name.as_str().unwrap()).is_some(), "{name}: {line}");
        }
        (line["Route"].clone(), line["StatusClass"].clone(), line["BoundRefusals"].clone())
    });
    summary.collect()
}

/// Each request line's request id, trace id, method, status and whether it
/// names an error; each at INFO, with its latency, its token check's time
/// and, past the token, its store work's (the handler's steps have no spans).
fn request_lines(lines: &[Value]) -> Vec<(Value, Value, Value, Value, bool)> {
    let requests = lines.iter().filter(|line| line["message"] == "request");
    let summary = requests.map(|line| {
        assert_eq!(line["level"], "INFO", "{line}");
        let steps = ["latency_ms", "auth_ms", "store_ms"];
        for step in if line["status"] == 401 { &steps[..2] } else { &steps } {
            assert!(line[step].as_f64().is_some_and(|ms| ms >= 0.0), "{step}: {line}");
        }
        let span = &line["span"];
        let ids = (span["requestId"].clone(), span["traceId"].clone());
        (ids.0, ids.1, line["method"].clone(), line["status"].clone(), line.get("error").is_some())
    });
    summary.collect()
}

#[tokio::test]
async fn at_trace_the_output_holds_no_token_and_no_credential() {
    let app = TestApp::new().await;
    for format in ["JSON", "Text"] {
        let vars = [("AWS_LAMBDA_LOG_LEVEL", "TRACE"), ("AWS_LAMBDA_LOG_FORMAT", format)];
        let function = crate::start_function(&app, &vars).await;
        let (authorization, forged) = (bearer("alice"), format!("{}x", bearer("bob")));
        for (id, authorization) in [(1, &authorization), (2, &forged)] {
            let body = format!(r#"{{"id": {id}, "name": "Fern"}}"#);
            function.invoke(&ApiGatewayEvent::create_plant(authorization, &body).event()).await;
        }
        let output = function.output().join("\n");
        assert!(output.contains("request"), "{output}");
        for token in [&authorization, &forged].map(|value| value.trim_start_matches("Bearer ")) {
            // The token's signature alone is as good as the token to a thief.
            let signature = token.rsplit('.').next().unwrap();
            for (what, secret) in [("token", token), ("token signature", signature)] {
                assert!(!output.contains(secret), "{format}: the {what} is in the log");
            }
        }
        for (name, value) in app.function_env().vars() {
            if name.starts_with("AWS_SECRET") || name.starts_with("AWS_SESSION") {
                assert!(!output.contains(value.as_str()), "{format}: {name} is in the log");
            }
        }
    }
}
