//! The telemetry as Lambda configures it ([`TelemetryConfig`]): the log, and
//! X-Ray where Lambda runs its daemon. The libraries' lines stop at INFO: at
//! TRACE lambda_runtime writes each raw event, bearer token and all, and
//! the AWS SDK's DEBUG lines carry signed requests.

use std::io::Write;
use std::sync::OnceLock;

use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::TelemetryConfig;

/// The writer given to [`init`], for lines that are not log events.
static OUTPUT: OnceLock<BoxMakeWriter> = OnceLock::new();

/// Installs the process-wide log, writing to `writer`, and connects X-Ray
/// where a daemon address is set; returns whether X-Ray is on.
pub fn init<W>(writer: W, config: &TelemetryConfig) -> bool
where
    W: for<'writer> MakeWriter<'writer> + Clone + Send + Sync + 'static,
{
    let _ = OUTPUT.set(BoxMakeWriter::new(writer.clone()));
    let filter = Targets::new()
        .with_default(config.level.min(LevelFilter::INFO))
        .with_target(env!("CARGO_CRATE_NAME"), config.level);
    let log =
        tracing_subscriber::fmt::layer().with_target(false).without_time().with_writer(writer);
    // JSON: the event's fields at the top level (`message`, `status`...), as
    // Lambda's JSON lines have them, and the `invocation` span (src/api.rs).
    let log = if config.json {
        log.json().flatten_event(true).with_span_list(false).boxed()
    } else {
        log.boxed()
    };
    tracing_subscriber::registry().with(log.with_filter(filter)).init();
    let address = config.xray_daemon.as_deref();
    let xray = address.is_some_and(crate::xray::connect);
    if let Some(address) = address
        && !xray
    {
        tracing::warn!(address, "not an X-Ray daemon address; tracing is off");
    }
    xray
}

/// Writes `line` whole, in one write, where the log goes (the EMF line's
/// way to CloudWatch); printed before a subscriber is installed (tests).
pub fn write_line(line: &str) {
    let text = format!("{line}\n");
    match OUTPUT.get() {
        // Nowhere to report a failed write to: the log is that place.
        Some(output) => {
            let _ = output.make_writer().write_all(text.as_bytes());
        }
        None => print!("{text}"),
    }
}
