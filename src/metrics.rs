//! Request metrics as CloudWatch Embedded Metric Format: one JSON object per
//! request on stdout, which CloudWatch Logs turns into metrics with no extra
//! AWS call. Namespace `PlantStore`; dimensions `FunctionName` (the whole
//! function, what the template's alarms watch), `FunctionName` + `Route`
//! (from the route table, `other` for anything unknown) and those two +
//! `StatusClass`; metrics `Requests`, `Latency`, `ClientErrors`,
//! `ServerErrors`, `Unavailable` (the 503s: the store or the issuer's keys
//! out of reach) and `BoundRefusals` (the 409s of the bound on plants per
//! owner). The dashboard in template.yaml charts them.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

const NAMESPACE: &str = "PlantStore";

/// One answered request, as the metrics count it.
pub struct Answered<'a> {
    pub function: &'a str,
    pub route: &'a str,
    pub status: u16,
    pub latency_ms: f64,
    /// Refused because the owner has the most plants allowed.
    pub at_bound: bool,
}

/// The EMF line for one request.
pub fn emf_line(answered: &Answered) -> String {
    let timestamp_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0);
    let status = answered.status;
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [
                    ["FunctionName"],
                    ["FunctionName", "Route"],
                    ["FunctionName", "Route", "StatusClass"]
                ],
                "Metrics": [
                    {"Name": "Requests", "Unit": "Count"},
                    {"Name": "Latency", "Unit": "Milliseconds"},
                    {"Name": "ClientErrors", "Unit": "Count"},
                    {"Name": "ServerErrors", "Unit": "Count"},
                    {"Name": "Unavailable", "Unit": "Count"},
                    {"Name": "BoundRefusals", "Unit": "Count"}
                ]
            }]
        },
        "FunctionName": answered.function,
        "Route": answered.route,
        "StatusClass": format!("{}xx", status / 100),
        "Requests": 1,
        "Latency": answered.latency_ms,
        "ClientErrors": u8::from((400..500).contains(&status)),
        "ServerErrors": u8::from(status >= 500),
        "Unavailable": u8::from(status == 503),
        "BoundRefusals": u8::from(answered.at_bound)
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn an_emf_line_declares_its_metrics_and_carries_their_values() {
        let answered = Answered {
            function: "plants-fn",
            route: "POST /plants",
            status: 503,
            latency_ms: 12.5,
            at_bound: false,
        };
        let line: Value = serde_json::from_str(&emf_line(&answered)).unwrap();
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
        let counts = [
            "ClientErrors",
            "ServerErrors",
            "Unavailable",
            "BoundRefusals",
        ]
        .map(|metric| line[metric].as_u64());
        assert_eq!(counts, [Some(0), Some(1), Some(1), Some(0)]);
        assert_eq!(line["Latency"], 12.5);
    }
}
