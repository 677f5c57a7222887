//! Request metrics as CloudWatch Embedded Metric Format: one JSON object per
//! request on stdout, which CloudWatch Logs turns into metrics with no extra
//! AWS call. Namespace `PlantStore`; dimensions `FunctionName` (what the
//! template's alarms watch), `FunctionName` + `Route` (from the route table,
//! `other` for anything unknown) and those two + `StatusClass`; metrics
//! `Requests`, `Latency`, `ClientErrors`, `ServerErrors`, `Unavailable`
//! (the 503s) and `BoundRefusals` (the 409s of the bound on plants per
//! owner). The directive is a constant; the line is written without a
//! serializer.

use std::time::{SystemTime, UNIX_EPOCH};

/// One answered request, as the metrics count it.
pub(crate) struct RequestMetrics<'a> {
    pub(crate) function: &'a str,
    pub(crate) route: &'a str,
    pub(crate) status: u16,
    pub(crate) latency_ms: f64,
    /// Refused because the owner has the most plants allowed.
    pub(crate) at_bound: bool,
}

/// The metrics and their dimensions, declared for CloudWatch.
const DIRECTIVE: &str = r#"{"Namespace":"PlantStore","Dimensions":[["FunctionName"],["FunctionName","Route"],["FunctionName","Route","StatusClass"]],"Metrics":[{"Name":"Requests","Unit":"Count"},{"Name":"Latency","Unit":"Milliseconds"},{"Name":"ClientErrors","Unit":"Count"},{"Name":"ServerErrors","Unit":"Count"},{"Name":"Unavailable","Unit":"Count"},{"Name":"BoundRefusals","Unit":"Count"}]}"#;

/// The EMF line for one request.
pub(crate) fn emf_line(request: &RequestMetrics) -> String {
    let timestamp =
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis());
    // Names are JSON strings: the function's as the environment says it.
    let text = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let status = request.status;
    let count = |counted: bool| u8::from(counted);
    format!(
        r#"{{"_aws":{{"Timestamp":{timestamp},"CloudWatchMetrics":[{DIRECTIVE}]}},"FunctionName":{},"Route":{},"StatusClass":"{}xx","Requests":1,"Latency":{},"ClientErrors":{},"ServerErrors":{},"Unavailable":{},"BoundRefusals":{}}}"#,
        text(request.function),
        text(request.route),
        (status / 100).min(5),
        request.latency_ms,
        count((400..500).contains(&status)),
        count(status >= 500),
        count(status == 503),
        count(request.at_bound),
    )
}
