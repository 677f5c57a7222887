//! Each request's one line, at every log level: its log fields and its
//! metrics as CloudWatch Embedded Metric Format ([`DIRECTIVE`] declares
//! them), which CloudWatch Logs turns into metrics with no AWS call;
//! written without a serializer.

use std::cell::Cell;
use std::fmt::Write;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// What a request's line says of its serving: the operation (`None`: the
/// router's own answer), and how long its token check and store work took.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Served {
    pub(crate) operation: Option<&'static str>,
    pub(crate) auth_ms: Option<f64>,
    pub(crate) store_ms: Option<f64>,
}

tokio::task_local! {
    /// The request being served (one task a request): what its line reports.
    static SERVED: Cell<Served>;
}

/// `work`'s output, and what was recorded of its serving meanwhile.
pub(crate) async fn serving<T>(work: impl Future<Output = T>) -> (T, Served) {
    let recorded = async { (work.await, SERVED.with(Cell::get)) };
    SERVED.scope(Cell::new(Served::default()), recorded).await
}

/// Records what the request serves, by `change` (outside [`serving`]: nothing).
pub(crate) fn record(change: impl FnOnce(&mut Served)) {
    let _ = SERVED.try_with(|served| {
        let mut now = served.get();
        change(&mut now);
        served.set(now);
    });
}

/// `work`, its time in milliseconds recorded by `step`.
pub(crate) async fn timed<T>(step: fn(&mut Served, f64), work: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let done = work.await;
    record(|served| step(served, started.elapsed().as_secs_f64() * 1000.0));
    done
}

/// One answered request, as its line reports it.
pub(crate) struct RequestLine<'a> {
    pub(crate) function: &'a str,
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) status: u16,
    pub(crate) latency_ms: f64,
    pub(crate) served: Served,
    /// A refusal's message, and why (never sent to the client).
    pub(crate) error: Option<&'a str>,
    pub(crate) reason: Option<&'a str>,
    pub(crate) request_id: &'a str,
    pub(crate) trace_id: &'a str,
    /// Refused because the owner has the most plants allowed.
    pub(crate) at_bound: bool,
}

/// The metrics and their dimensions, declared for CloudWatch.
const DIRECTIVE: &str = r#"{"Namespace":"PlantStore","Dimensions":[["FunctionName"],["FunctionName","Route"],["FunctionName","Route","StatusClass"]],"Metrics":[{"Name":"Requests","Unit":"Count"},{"Name":"Latency","Unit":"Milliseconds"},{"Name":"ClientErrors","Unit":"Count"},{"Name":"ServerErrors","Unit":"Count"},{"Name":"Unavailable","Unit":"Count"},{"Name":"BoundRefusals","Unit":"Count"}]}"#;

impl RequestLine<'_> {
    /// The line, as JSON.
    pub(crate) fn to_json(&self) -> String {
        let timestamp =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis());
        // Texts as JSON strings: the client's path, the function's name.
        let text = |text: &str| serde_json::to_string(text).unwrap_or_default();
        let (status, count) = (self.status, |counted: bool| u8::from(counted));
        let mut line = format!(
            r#"{{"_aws":{{"Timestamp":{timestamp},"CloudWatchMetrics":[{DIRECTIVE}]}},"FunctionName":{},"Route":{},"StatusClass":"{}xx","Requests":1,"Latency":{},"ClientErrors":{},"ServerErrors":{},"Unavailable":{},"BoundRefusals":{},"level":"INFO","message":"request","method":{},"path":{},"status":{status},"latency_ms":{}"#,
            text(self.function),
            text(self.served.operation.unwrap_or("other")),
            (status / 100).min(5),
            self.latency_ms,
            count((400..500).contains(&status)),
            count(status >= 500),
            count(status == 503),
            count(self.at_bound),
            text(self.method),
            text(self.path),
            self.latency_ms,
        );
        for (name, ms) in [("auth_ms", self.served.auth_ms), ("store_ms", self.served.store_ms)] {
            let _ = ms.map(|ms| write!(line, r#","{name}":{ms}"#));
        }
        for (name, value) in [("error", self.error), ("reason", self.reason)] {
            let _ = value.map(|value| write!(line, r#","{name}":{}"#, text(value)));
        }
        let (request, trace) = (text(self.request_id), text(self.trace_id));
        let _ = write!(line, r#","span":{{"requestId":{request},"traceId":{trace}}}}}"#);
        line
    }
}
