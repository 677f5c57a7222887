//! The deployment artifact: `sam build` (arm64, cargo lambda with zig),
//! without the CPU-jitter entropy source, its dependency list embedded
//! (cargo-auditable), and its zip as `sam deploy` uploads it.

use std::path::{Path, PathBuf};
use std::process::Command;

use plant_store_local_support::process::{output, run, run_logged};
use plant_store_local_support::tools::{ensure_cargo_tool, ensure_python_tools};
use plant_store_local_support::{Result, log, root, tools_dir};

/// Fails unless the aws-lc-sys build behind `profile_dir`'s binaries saw
/// AWS_LC_SYS_NO_JITTER_ENTROPY=1 (.cargo/config.toml); its build script
/// reports the variable it found.
pub(crate) fn check_no_jitter_entropy(profile_dir: &Path) -> Result {
    let dirs = std::fs::read_dir(profile_dir.join("build")).into_iter().flatten().flatten();
    let aws_lc = dirs.filter(|dir| dir.file_name().to_string_lossy().starts_with("aws-lc-sys-"));
    let outputs = aws_lc.map(|dir| dir.path().join("output"));
    let newest = outputs.filter_map(|out| Some((out.metadata().ok()?.modified().ok()?, out)));
    let saw_it = newest.max().is_some_and(|(_, output)| {
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

/// The arm64 `bootstrap` `sam build` makes, and its zip as `sam deploy` uploads it.
pub(crate) struct Artifact {
    pub bootstrap: PathBuf,
    pub zip: PathBuf,
}

/// What `sam build` builds with besides the Python tools: the arm64 target
/// and cargo-auditable.
pub(crate) fn ensure_build_tools() -> Result {
    let targets = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if !targets.lines().any(|target| target == "aarch64-unknown-linux-gnu") {
        log!("adding the Rust target aarch64-unknown-linux-gnu");
        run(Command::new("rustup").args(["target", "add", "aarch64-unknown-linux-gnu"]))?;
    }
    ensure_cargo_tool("cargo-auditable", "cargo-auditable", "0.7.5", Command::new("cargo"))
}

/// `sam build`, its aws-lc-sys checked to be without jitter entropy.
pub(crate) fn sam_build() -> Result<Artifact> {
    ensure_python_tools()?;
    ensure_build_tools()?;
    log!("sam build (arm64, provided.al2023, cargo lambda), rustc through cargo-auditable");
    let mut sam = Command::new("sam");
    sam.args(["build", "--template", "template.yaml", "--beta-features"]);
    // What `cargo auditable build` sets for the cargo it runs; here for the
    // one cargo lambda runs.
    sam.env("RUSTC_WORKSPACE_WRAPPER", tools_dir().join("cargo/bin/cargo-auditable"));
    let cargo_args = r#"{"offline":false,"locked":true,"frozen":false,"config":[]}"#;
    sam.env("CARGO_AUDITABLE_ORIG_ARGS", cargo_args);
    run_logged(&mut sam, &tools_dir().join("sam-build.log"))?;
    check_no_jitter_entropy(&root().join("target/aarch64-unknown-linux-gnu/release"))?;
    let bootstrap = root().join(".aws-sam/build/PlantsFunction/bootstrap");
    check_dependency_list(&bootstrap)?;
    let zip = tools_dir().join("bootstrap.zip");
    let _ = std::fs::remove_file(&zip);
    let mut zipped = Command::new("zip");
    zipped.args(["-q", "-9"]).arg(&zip).arg("bootstrap");
    run(zipped.current_dir(bootstrap.parent().unwrap()))?;
    Ok(Artifact { bootstrap, zip })
}

/// Fails unless `bootstrap` carries cargo-auditable's dependency list.
fn check_dependency_list(bootstrap: &Path) -> Result {
    let json = auditable_info::json_from_file(bootstrap, Default::default())
        .map_err(|error| format!("the bootstrap carries no dependency list: {error}"))?;
    let list: serde_json::Value = serde_json::from_str(&json)?;
    let packages = list["packages"].as_array().into_iter().flatten();
    let names: Vec<&str> = packages.filter_map(|package| package["name"].as_str()).collect();
    if !["plant-store", "aws-sdk-dynamodb", "rustls"].iter().all(|name| names.contains(name)) {
        return Err(format!("the bootstrap's dependency list lacks its crates: {names:?}").into());
    }
    log!("the bootstrap carries its dependency list: {} crates", names.len());
    Ok(())
}
