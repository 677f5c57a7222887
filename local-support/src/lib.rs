//! What runs around the function on this machine, for the tasks, the tests
//! and the benchmark alike, each thing started in one way, here.

pub mod documented;
pub mod dynamodb_local;
pub mod fault_proxy;
pub mod function;
pub mod http_server;
pub mod keys;
pub mod process;
pub mod runtime_api;
pub mod sam_local;
pub mod tls_front;
pub mod tools;
pub mod xray_daemon;

use std::path::{Path, PathBuf};

/// Every task's error: a message for the person running it.
pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T = (), E = Error> = std::result::Result<T, E>;

/// Prints one progress line, with the time of day, to stderr.
#[macro_export]
macro_rules! log {
    ($($message:tt)*) => { $crate::process::log(&format!($($message)*)) };
}

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Where the tools are installed and the runs keep their files (`.tools/`).
pub fn tools_dir() -> PathBuf {
    root().join(".tools")
}
