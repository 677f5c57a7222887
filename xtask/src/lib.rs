//! The project's tasks (`cargo xtask`, see `main.rs`) and what they share
//! with the test kit: where the tools live, how they are installed
//! ([`tools`], [`dynamodb_local`]), and how processes are started and always
//! stopped ([`process`]).

pub mod dynamodb_local;
pub mod process;
pub mod tools;

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

/// A number from the environment variable `name`, else `default`; an error
/// names the variable.
pub fn setting<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .map_err(|_| format!("{name} must be a number, not {value:?}").into()),
        Err(_) => Ok(default),
    }
}

/// Where the tools are installed and the runs keep their files (`.tools/`).
pub fn tools_dir() -> PathBuf {
    root().join(".tools")
}
