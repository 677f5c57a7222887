//! The telemetry subscriber, as Lambda configures it: the log, one JSON
//! object per line when the format is JSON, at the level Lambda's advanced
//! logging controls set ([`TelemetryConfig`]); and, where Lambda runs the
//! X-Ray daemon, the layer that turns the `xray` spans into subsegments
//! (`crate::xray`).
//!
//! The log is lambda_runtime's default subscriber without its `EnvFilter`:
//! one small function needs a level, not per-module directives, and the
//! regex engine behind them is a tenth of the binary. The metrics lines
//! ([`write_line`]) go to the same writer.
//!
//! The level applies to this function's own lines. The libraries' lines
//! stop at INFO whatever the level: at TRACE lambda_runtime writes each raw
//! event (its bearer token with it), and the AWS SDK's DEBUG and TRACE lines
//! carry signed requests. No level writes a credential. Each layer has its
//! own filter, so that the log never shows the X-Ray spans (a line inside a
//! step still names its invocation, the span the log shows), and X-Ray sees
//! them whatever the log level.

use std::io::Write;
use std::sync::OnceLock;

use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::TelemetryConfig;
use crate::xray::{self, XRay};

/// The most that the libraries' lines may say (see the module's comment).
const LIBRARY_LEVEL: LevelFilter = LevelFilter::INFO;

/// The writer given to [`init_subscriber`], for lines that are not log events.
static OUTPUT: OnceLock<BoxMakeWriter> = OnceLock::new();

/// Installs the process-wide subscriber, writing to `writer`; returns
/// whether X-Ray is on (a daemon address that is one).
pub fn init_subscriber<W>(writer: W, config: &TelemetryConfig) -> bool
where
    W: for<'writer> MakeWriter<'writer> + Clone + Send + Sync + 'static,
{
    let _ = OUTPUT.set(BoxMakeWriter::new(writer.clone()));
    let level = config.level;
    let log_filter = Targets::new()
        .with_default(level.min(LIBRARY_LEVEL))
        .with_target(env!("CARGO_CRATE_NAME"), level)
        .with_target(xray::TARGET, LevelFilter::OFF);
    let log = tracing_subscriber::fmt::layer()
        .with_target(false)
        .without_time()
        .with_writer(writer);
    // JSON: the event's fields at the top level (`message`, `status`...), as
    // Lambda's JSON lines have them, and its innermost span the log shows:
    // `invocation`, with its request id and trace id (src/api.rs).
    let log = if config.json {
        let json = log.json().flatten_event(true).with_span_list(false);
        json.with_filter(log_filter).boxed()
    } else {
        log.with_filter(log_filter).boxed()
    };
    let address = config.xray_daemon.as_deref();
    let xray = address.and_then(XRay::connect);
    let xray_on = xray.is_some();
    let xray_filter = Targets::new().with_target(xray::TARGET, LevelFilter::TRACE);
    tracing_subscriber::registry()
        .with(log)
        .with(xray.map(|xray| xray.with_filter(xray_filter)))
        .init();
    if let Some(address) = address
        && !xray_on
    {
        tracing::warn!(address, "not an X-Ray daemon address; tracing is off");
    }
    xray_on
}

/// Writes `line` whole, with one write, where the log lines go: how the EMF
/// metrics line reaches CloudWatch. Before a subscriber is installed (only
/// in tests of the handler: `main` installs one first) it is printed, which
/// the test harness captures.
pub fn write_line(line: &str) {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    match OUTPUT.get() {
        // Nowhere to report a failed write to: the log is that place.
        Some(output) => {
            let _ = output.make_writer().write_all(text.as_bytes());
        }
        None => print!("{text}"),
    }
}
