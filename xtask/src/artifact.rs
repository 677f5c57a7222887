//! The deployment artifact: `sam build` (arm64, provided.al2023,
//! cross-compiled by cargo lambda with zig), built without the CPU-jitter
//! entropy source, and its zip as `sam deploy` uploads it.

use std::path::{Path, PathBuf};
use std::process::Command;

use plant_store_local_support::process::{output, run, run_logged};
use plant_store_local_support::tools::ensure_python_tools;
use plant_store_local_support::{Result, log, root, tools_dir};

/// Fails unless the aws-lc-sys build behind `profile_dir`'s binaries saw
/// AWS_LC_SYS_NO_JITTER_ENTROPY=1 (.cargo/config.toml); its build script
/// reports the variable it found.
pub(crate) fn check_no_jitter_entropy(profile_dir: &Path) -> Result {
    let newest = std::fs::read_dir(profile_dir.join("build"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("aws-lc-sys-"))
        .map(|entry| entry.path().join("output"))
        .filter_map(|output| Some((output.metadata().ok()?.modified().ok()?, output)))
        .max();
    let saw_it = newest.is_some_and(|(_, output)| {
        std::fs::read_to_string(output)
            .is_ok_and(|text| text.contains("AWS_LC_SYS_NO_JITTER_ENTROPY': '1'"))
    });
    let built = format!("aws-lc-sys in {}", profile_dir.display());
    if !saw_it {
        let problem = "was built with the CPU-jitter entropy source (see .cargo/config.toml)";
        return Err(format!("{built} {problem}").into());
    }
    log!("{built}: built without the CPU-jitter entropy source");
    Ok(())
}

/// What `sam build` makes: the arm64 `bootstrap`, and its zip as `sam
/// deploy` uploads it.
pub(crate) struct Artifact {
    pub bootstrap: PathBuf,
    pub zip: PathBuf,
}

/// `sam build`, checked: its aws-lc-sys built without the jitter entropy
/// source; the bootstrap is replayed under qemu-user by the tests.
pub(crate) fn sam_build() -> Result<Artifact> {
    ensure_python_tools()?;
    let targets = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if !targets.lines().any(|target| target == "aarch64-unknown-linux-gnu") {
        log!("adding the Rust target aarch64-unknown-linux-gnu");
        run(Command::new("rustup").args(["target", "add", "aarch64-unknown-linux-gnu"]))?;
    }
    log!("sam build (arm64, provided.al2023, cargo lambda)");
    let mut sam = Command::new("sam");
    sam.args(["build", "--template", "template.yaml", "--beta-features"]);
    run_logged(&mut sam, &tools_dir().join("sam-build.log"))?;
    check_no_jitter_entropy(&root().join("target/aarch64-unknown-linux-gnu/release"))?;
    let bootstrap = root().join(".aws-sam/build/PlantsFunction/bootstrap");
    let zip = tools_dir().join("bootstrap.zip");
    let _ = std::fs::remove_file(&zip);
    run(Command::new("zip")
        .args(["-q", "-9"])
        .arg(&zip)
        .arg("bootstrap")
        .current_dir(bootstrap.parent().unwrap()))?;
    Ok(Artifact { bootstrap, zip })
}
