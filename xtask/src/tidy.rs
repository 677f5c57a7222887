//! What neither the compiler here nor `cargo fmt` sees. Linux-only code
//! stays gated: a Linux-only API (`/proc`, `prctl`, `std::os::linux`...) is
//! used only under `cfg(target_os = "linux")`, so the inner loop builds on
//! macOS, where nothing runs here to find out. And tests/api's modules,
//! which automod compiles in without a `mod` line for `cargo fmt` to
//! follow, are formatted.

#![cfg(test)]

use std::path::PathBuf;

use plant_store_local_support::root;

/// Every file below `dir` (relative to the root) whose name ends in `.rs`,
/// outside build output and hidden folders (tools, SAM's build).
fn rust_files(dir: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root().join(dir)];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() && name != "target" && !name.starts_with('.') {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                found.push(path);
            }
        }
    }
    found
}

/// What only Linux has: a Mac cannot build (or run) code that uses these.
const LINUX_ONLY: [&str; 5] = ["libc::prctl", "libc::PR_", "std::os::linux", "\"/proc", "\"/sys/"];

/// Whether line `at` is inside an item, block or statement gated by
/// `cfg(target_os = "linux")`: an attribute on it, or on something that
/// holds it (each found above it at a lower indentation).
fn gated(lines: &[&str], at: usize) -> bool {
    let indentation = |line: &str| line.len() - line.trim_start().len();
    let mut innermost = indentation(lines[at]);
    // Whether the lines met now sit right above the construct that holds
    // the line, where its attributes are.
    let mut attached = true;
    for line in lines[..at].iter().rev().filter(|line| !line.trim().is_empty()) {
        let (indent, code) = (indentation(line), line.trim_start());
        if indent < innermost {
            innermost = indent;
            attached = true;
        } else if indent > innermost || !(code.starts_with("#[") || code.starts_with("//")) {
            attached = false;
            continue;
        }
        if attached && line.contains(r#"cfg(target_os = "linux")"#) {
            return true;
        }
    }
    false
}

/// The lines of `text` that use a Linux-only API outside a Linux gate.
fn ungated_linux_calls(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    (0..lines.len())
        .filter(|&at| !lines[at].trim_start().starts_with("//"))
        .filter(|&at| LINUX_ONLY.iter().any(|api| lines[at].contains(api)))
        .filter(|&at| !gated(&lines, at))
        .collect()
}

#[test]
fn linux_only_apis_are_used_only_under_a_linux_gate() {
    let mut found = Vec::new();
    // Every crate's files, but this one's, which names the APIs it looks for.
    for path in rust_files("").into_iter().filter(|path| !path.ends_with("tidy.rs")) {
        let text = std::fs::read_to_string(&path).unwrap();
        for line in ungated_linux_calls(&text) {
            let file = path.strip_prefix(root()).unwrap_or(&path).display();
            found.push(format!("{file}:{}", line + 1));
        }
    }
    let found = found.join("\n");
    assert!(found.is_empty(), "Linux-only APIs without cfg(target_os = \"linux\"):\n{found}");
}

#[test]
fn the_check_finds_what_it_looks_for() {
    let ungated = "fn peak() {\n    std::fs::read(\"/proc/self/status\");\n}\n";
    assert_eq!(ungated_linux_calls(ungated), [1]);
    let gated_fn = format!("#[cfg(target_os = \"linux\")]\n{ungated}");
    assert!(ungated_linux_calls(&gated_fn).is_empty());
    let gated_block = "fn start() {\n    #[cfg(target_os = \"linux\")]\n    unsafe {\n        libc::prctl(1);\n    }\n    libc::prctl(2);\n}\n";
    assert_eq!(ungated_linux_calls(gated_block), [5]);
}

#[test]
fn the_modules_cargo_fmt_cannot_reach_are_formatted() {
    // Passed on to rustfmt with the package's edition; its own files too.
    let mut fmt = std::process::Command::new("cargo");
    fmt.args(["fmt", "--check", "--package", "plant-store", "--", "--color", "never"]);
    fmt.args(rust_files("tests/api"));
    let checked = fmt.output().expect("cargo fmt, a component of rust-toolchain.toml");
    let diff = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "run `cargo fmt -- tests/api/*.rs`:\n{diff}");
}
