//! Request metrics as CloudWatch Embedded Metric Format: one JSON object per
//! request on stdout, which CloudWatch Logs turns into metrics with no extra
//! AWS call. Namespace `PlantStore`; dimensions `FunctionName` (the whole
//! function, what the template's alarm watches), `Route` (from the route
//! table, `other` for anything unknown) and `Route` + `StatusClass`; metrics
//! `Requests`, `Latency`, `ClientErrors` and `ServerErrors`.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

const NAMESPACE: &str = "PlantStore";

/// The EMF line for one request to the function named `function`.
pub fn emf_line(function: &str, route: &str, status: u16, latency_ms: f64) -> String {
    let timestamp_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0);
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["FunctionName"], ["Route"], ["Route", "StatusClass"]],
                "Metrics": [
                    {"Name": "Requests", "Unit": "Count"},
                    {"Name": "Latency", "Unit": "Milliseconds"},
                    {"Name": "ClientErrors", "Unit": "Count"},
                    {"Name": "ServerErrors", "Unit": "Count"}
                ]
            }]
        },
        "FunctionName": function,
        "Route": route,
        "StatusClass": format!("{}xx", status / 100),
        "Requests": 1,
        "Latency": latency_ms,
        "ClientErrors": u8::from((400..500).contains(&status)),
        "ServerErrors": u8::from(status >= 500)
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn an_emf_line_declares_its_metrics_and_carries_their_values() {
        let line: Value =
            serde_json::from_str(&emf_line("plants-fn", "POST /plants", 503, 12.5)).unwrap();
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "PlantStore");
        assert!(line["_aws"]["Timestamp"].as_u64().unwrap() > 1_700_000_000_000);
        // Every declared dimension and metric has a value at the top level.
        for dimension_set in directive["Dimensions"].as_array().unwrap() {
            for dimension in dimension_set.as_array().unwrap() {
                assert!(line[dimension.as_str().unwrap()].is_string(), "{dimension}");
            }
        }
        for metric in directive["Metrics"].as_array().unwrap() {
            assert!(
                line[metric["Name"].as_str().unwrap()].is_number(),
                "{metric}"
            );
        }
        assert_eq!(line["FunctionName"], "plants-fn");
        assert_eq!(line["StatusClass"], "5xx");
        assert_eq!(
            (line["ClientErrors"].as_u64(), line["ServerErrors"].as_u64()),
            (Some(0), Some(1))
        );
        assert_eq!(line["Latency"], 12.5);
    }
}
