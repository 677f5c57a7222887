//! The log subscriber, as Lambda's advanced logging controls configure it:
//! one JSON object per line when `AWS_LAMBDA_LOG_FORMAT` is `JSON`, and the
//! level from `AWS_LAMBDA_LOG_LEVEL`, else `RUST_LOG`, else INFO.
//!
//! It is lambda_runtime's default subscriber without its `EnvFilter`: one
//! small function needs a level, not per-module directives, and the regex
//! engine behind them is a tenth of the binary.

use std::env;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Installs the process-wide subscriber, writing to `writer`.
pub fn init_subscriber<W>(writer: W)
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    let level = env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| env::var("RUST_LOG"))
        .ok()
        .and_then(|level| level.parse().ok())
        .unwrap_or(LevelFilter::INFO);
    let subscriber = tracing_subscriber::fmt()
        .with_target(false)
        .without_time()
        .with_max_level(level)
        .with_writer(writer);
    let json =
        env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    if json {
        subscriber.json().init();
    } else {
        subscriber.init();
    }
}
