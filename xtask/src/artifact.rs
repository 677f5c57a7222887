//! The deployment artifact: `sam build` (arm64, provided.al2023,
//! cross-compiled by cargo lambda with zig), its checks (the binary the
//! template declares, built without the CPU-jitter entropy source), and its
//! zip as `sam deploy` uploads it.

use std::path::{Path, PathBuf};
use std::process::Command;

use plant_store_local_support::process::{GRACE, Started, output, run, start};
use plant_store_local_support::tools::ensure_python_tools;
use plant_store_local_support::{Result, log, root, tools_dir};

/// Fails unless the aws-lc-sys build behind `profile_dir`'s binaries saw
/// AWS_LC_SYS_NO_JITTER_ENTROPY=1 (.cargo/config.toml); its build script
/// reports the variable it found.
pub fn check_no_jitter_entropy(profile_dir: &Path) -> Result {
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
pub struct Artifact {
    pub bootstrap: PathBuf,
    pub zip: PathBuf,
}

/// `sam build`, checked.
pub fn sam_build() -> Result<Artifact> {
    start_sam_build()?.finish()
}

/// `sam build` running in the background: the full test run lints and
/// tests meanwhile (its optimised, link-time-optimised build keeps one core
/// busy for long stretches). Stopped with the task if it is not finished.
pub struct SamBuild(Started);

pub fn start_sam_build() -> Result<SamBuild> {
    ensure_python_tools()?;
    let targets = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if !targets.lines().any(|target| target == "aarch64-unknown-linux-gnu") {
        log!("adding the Rust target aarch64-unknown-linux-gnu");
        run(Command::new("rustup").args(["target", "add", "aarch64-unknown-linux-gnu"]))?;
    }
    log!("sam build (arm64, provided.al2023, cargo lambda)");
    let mut sam = Command::new("sam");
    sam.args(["build", "--template", "template.yaml", "--beta-features"]);
    let log = tools_dir().join("sam-build.log");
    Ok(SamBuild(start("sam build", &mut sam, GRACE, Some(&log))?))
}

impl SamBuild {
    /// Waits for the build, then checks what it made.
    pub fn finish(self) -> Result<Artifact> {
        self.0.finish()?;
        check_no_jitter_entropy(&root().join("target/aarch64-unknown-linux-gnu/release"))?;
        let bootstrap = root().join(".aws-sam/build/PlantsFunction/bootstrap");
        check_arm64_bootstrap(&bootstrap)?;
        let zip = tools_dir().join("bootstrap.zip");
        let _ = std::fs::remove_file(&zip);
        run(Command::new("zip")
            .args(["-q", "-9"])
            .arg(&zip)
            .arg("bootstrap")
            .current_dir(bootstrap.parent().unwrap()))?;
        Ok(Artifact { bootstrap, zip })
    }
}

/// Fails unless `file` is what the template declares (Handler bootstrap,
/// provided.al2023, arm64): an executable named `bootstrap`, a 64-bit
/// little-endian ELF for AArch64 (e_machine 183).
fn check_arm64_bootstrap(file: &Path) -> Result {
    use std::os::unix::fs::PermissionsExt;
    let header: Vec<u8> = std::fs::read(file)?.into_iter().take(20).collect();
    let executable = file.metadata()?.permissions().mode() & 0o111 != 0;
    let arm64_elf = header.len() == 20
        && header[..6] == [0x7f, b'E', b'L', b'F', 2, 1]
        && header[18..20] == [0xb7, 0];
    let path = file.display();
    if file.file_name() != Some("bootstrap".as_ref()) || !executable || !arm64_elf {
        let problem = "is not an executable arm64 ELF named bootstrap";
        return Err(format!("{path} {problem} (header {header:02x?})").into());
    }
    log!("{path}: an arm64 ELF executable named bootstrap");
    Ok(())
}
