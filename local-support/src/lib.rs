//! What runs around the function on this machine, for the tasks
//! (`xtask`), the tests (`plant-store-testkit`) and the benchmark alike;
//! each thing is started in one way, here:
//!
//! - [`process`]: commands run, and processes started so that they always
//!   stop; [`tools`]: the tools, installed on first use; [`dynamodb_local`].
//! - [`function`]: the function's environment on this machine; [`keys`]:
//!   the local issuer, its signing keys and tokens, minted in-process.
//! - The stand-ins for AWS: [`runtime_api`] (the Lambda Runtime API that
//!   runs the function's binary), [`xray_daemon`], [`fault_proxy`] (a path
//!   to DynamoDB Local that injects faults and records calls),
//!   all on [`http_server`]; and [`tls_front`] (TLS with a local CA, and a
//!   TCP forward, in-process).
//! - [`sam_local`]: `sam build`'s artifact in the Lambda container.

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
