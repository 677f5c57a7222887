//! The log subscriber, as Lambda's advanced logging controls configure it
//! ([`LogConfig`]): one JSON object per line when the format is JSON, at
//! the level they set.
//!
//! It is lambda_runtime's default subscriber without its `EnvFilter`: one
//! small function needs a level, not per-module directives, and the regex
//! engine behind them is a tenth of the binary. The metrics lines
//! ([`write_line`]) go to the same writer.
//!
//! The level applies to this function's own lines. The libraries' lines
//! stop at INFO whatever the level: at TRACE lambda_runtime writes each raw
//! event (its bearer token with it), and the AWS SDK's DEBUG and TRACE lines
//! carry signed requests. No level writes a credential.

use std::io::Write;
use std::sync::OnceLock;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogConfig;

/// The most that the libraries' lines may say (see the module's comment).
const LIBRARY_LEVEL: LevelFilter = LevelFilter::INFO;

/// The writer given to [`init_subscriber`], for lines that are not log events.
static OUTPUT: OnceLock<BoxMakeWriter> = OnceLock::new();

/// Installs the process-wide subscriber, writing to `writer`.
pub fn init_subscriber<W>(writer: W, config: LogConfig)
where
    W: for<'writer> MakeWriter<'writer> + Clone + Send + Sync + 'static,
{
    let _ = OUTPUT.set(BoxMakeWriter::new(writer.clone()));
    let level = config.level;
    let targets = Targets::new()
        .with_default(level.min(LIBRARY_LEVEL))
        .with_target(env!("CARGO_CRATE_NAME"), level);
    let subscriber = tracing_subscriber::fmt()
        .with_target(false)
        .without_time()
        .with_max_level(level)
        .with_writer(writer);
    if config.json {
        // The event's fields at the top level (`message`, `status`...), as
        // Lambda's JSON lines have them, and its innermost span only: within
        // an invocation, `invocation` with its request id and trace id
        // (src/http.rs).
        subscriber
            .json()
            .flatten_event(true)
            .with_span_list(false)
            .finish()
            .with(targets)
            .init();
    } else {
        subscriber.finish().with(targets).init();
    }
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
