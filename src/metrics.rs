//! Request metrics as CloudWatch Embedded Metric Format: one JSON object per
//! request on stdout, which CloudWatch Logs turns into metrics with no extra
//! AWS call. Namespace `PlantStore`; dimensions `FunctionName` (the whole
//! function, what the template's alarms watch), `FunctionName` + `Route`
//! (from the route table, `other` for anything unknown) and those two +
//! `StatusClass`; metrics `Requests`, `Latency`, `ClientErrors`,
//! `ServerErrors`, `Unavailable` (the 503s: the store or the issuer's keys
//! out of reach) and `BoundRefusals` (the 409s of the bound on plants per
//! owner). The dashboard in template.yaml charts them. The line is written
//! straight from typed data: the directive is a constant.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::response::Class;

/// One answered request, as the metrics count it.
pub(crate) struct RequestMetrics<'a> {
    pub(crate) function: &'a str,
    pub(crate) route: &'a str,
    pub(crate) status: u16,
    pub(crate) latency_ms: f64,
    /// Refused because the owner has the most plants allowed.
    pub(crate) at_bound: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Directive {
    namespace: &'static str,
    dimensions: &'static [&'static [&'static str]],
    metrics: &'static [Metric],
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Metric {
    name: &'static str,
    unit: &'static str,
}

const fn count(name: &'static str) -> Metric {
    Metric {
        name,
        unit: "Count",
    }
}

const DIRECTIVE: [Directive; 1] = [Directive {
    namespace: "PlantStore",
    dimensions: &[
        &["FunctionName"],
        &["FunctionName", "Route"],
        &["FunctionName", "Route", "StatusClass"],
    ],
    metrics: &[
        count("Requests"),
        Metric {
            name: "Latency",
            unit: "Milliseconds",
        },
        count("ClientErrors"),
        count("ServerErrors"),
        count("Unavailable"),
        count("BoundRefusals"),
    ],
}];

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Aws {
    timestamp: u64,
    cloud_watch_metrics: &'static [Directive; 1],
}

/// The line: the directive under `_aws`, then each dimension and metric.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Line<'a> {
    #[serde(rename = "_aws")]
    aws: Aws,
    function_name: &'a str,
    route: &'a str,
    status_class: &'static str,
    requests: u8,
    latency: f64,
    client_errors: u8,
    server_errors: u8,
    unavailable: u8,
    bound_refusals: u8,
}

/// `StatusClass` by the status's first digit.
const STATUS_CLASSES: [&str; 6] = ["0xx", "1xx", "2xx", "3xx", "4xx", "5xx"];

/// The EMF line for one request.
pub(crate) fn emf_line(request: &RequestMetrics) -> String {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(0));
    let class = Class::of(request.status);
    let line = Line {
        aws: Aws {
            timestamp,
            cloud_watch_metrics: &DIRECTIVE,
        },
        function_name: request.function,
        route: request.route,
        status_class: STATUS_CLASSES[usize::from(request.status / 100).min(5)],
        requests: 1,
        latency: request.latency_ms,
        client_errors: u8::from(matches!(class, Class::ClientError | Class::Throttled)),
        server_errors: u8::from(class == Class::ServerError),
        unavailable: u8::from(request.status == 503),
        bound_refusals: u8::from(request.at_bound),
    };
    // Plain data of finite numbers and strings: serialising cannot fail.
    serde_json::to_string(&line).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn an_emf_line_declares_its_metrics_and_carries_their_values() {
        let request = RequestMetrics {
            function: "plants-fn",
            route: "POST /plants",
            status: 503,
            latency_ms: 12.5,
            at_bound: false,
        };
        let line: Value = serde_json::from_str(&emf_line(&request)).unwrap();
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
        assert_eq!(directive["Metrics"][1]["Unit"], "Milliseconds");
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
