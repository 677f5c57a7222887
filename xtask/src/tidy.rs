//! Checks on the repository itself, run with the unit tests (`cargo test`,
//! so `scripts/test` too), as rust-analyzer's tidy tests are:
//!
//! - No dead code in the libraries around the function: the dead-code lint
//!   cannot see a `pub` item of a library that no other crate uses, so every
//!   `pub` item of `local-support`, `testkit` and `admin` must be named
//!   outside the file that defines it.
//! - Docs state no count that the code can change (how many tests,
//!   mutations, fuzz targets, events, hostile requests...): such a number
//!   goes stale by construction. A measured figure, written with the commit
//!   it was measured at, is not such a count.
//! - Linux-only code is gated: a Linux-only API (`/proc`, `prctl`,
//!   `std::os::linux`...) is used only under `cfg(target_os = "linux")`, so
//!   that the inner loop builds on macOS too (no Mac runs here to find out).

#![cfg(test)]

use std::path::PathBuf;

use plant_store_local_support::root;

/// Every file below `dir` (relative to the root) whose name ends in `suffix`.
fn files(dir: &str, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root().join(dir)];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") {
                pending.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found
}

/// The names of the `pub` items a Rust file defines.
fn public_items(text: &str) -> Vec<String> {
    const KINDS: [&str; 7] = ["fn ", "async fn ", "struct ", "enum ", "const ", "mod ", "trait "];
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix("pub "))
        .filter_map(|rest| KINDS.iter().find_map(|kind| rest.strip_prefix(kind)))
        .map(|rest| {
            let end = rest.find(|c: char| !c.is_alphanumeric() && c != '_');
            rest[..end.unwrap_or(rest.len())].to_owned()
        })
        .collect()
}

fn names(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let word = |c: char| c.is_alphanumeric() || c == '_';
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

#[test]
fn every_public_item_of_the_libraries_around_the_function_is_used_elsewhere() {
    let sources: Vec<(PathBuf, String)> = ["src", "tests", "benches", "fuzz/fuzz_targets"]
        .into_iter()
        .chain(["xtask", "testkit", "admin", "local-support"])
        .flat_map(|dir| files(dir, ".rs"))
        .map(|path| (path.clone(), std::fs::read_to_string(path).unwrap()))
        .collect();
    let mut unused = Vec::new();
    for (path, text) in &sources {
        let library = ["testkit/src", "admin/src", "local-support/src"]
            .iter()
            .any(|dir| path.starts_with(root().join(dir)));
        if !library || path.ends_with("main.rs") {
            continue;
        }
        for item in public_items(text) {
            let elsewhere =
                sources.iter().any(|(other, other_text)| other != path && names(other_text, &item));
            // A type that another public item's signature names is public
            // because that item is.
            let in_a_signature = text.lines().any(|line| {
                (line.contains("pub ") || line.contains("->"))
                    && !public_items(line).contains(&item)
                    && names(line, &item)
            });
            if !elsewhere && !in_a_signature {
                unused.push(format!("{}: pub {item}", path.display()));
            }
        }
    }
    assert!(
        unused.is_empty(),
        "pub items no other file uses (make them private, or remove them):\n{}",
        unused.join("\n")
    );
}

/// A number, in digits or words, then at most one word, then something
/// whose count the code decides.
fn counts(line: &str) -> Option<String> {
    const NUMBERS: &str = "two three four five six seven eight nine ten eleven twelve dozen";
    // "hostile": the hostile requests of tests/api/hostile.rs.
    const COUNTED: &str = "tests mutations targets events fixtures cases rules hostile";
    let listed = |list: &str, word: &str| list.split(' ').any(|listed| listed == word);
    // Code spans name files and settings, not counts.
    let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    let words: Vec<String> = prose
        .split(|c: char| !c.is_alphanumeric() && c != ',')
        .filter(|word| !word.is_empty())
        .map(|word| word.trim_matches(',').to_lowercase())
        .collect();
    (0..words.len()).find_map(|at| {
        let number = &words[at];
        let is_number = listed(NUMBERS, number)
            || (!number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == ','));
        let counted = |word: Option<&String>| word.is_some_and(|word| listed(COUNTED, word));
        (is_number && (counted(words.get(at + 1)) || counted(words.get(at + 2))))
            .then(|| words[at..(at + 3).min(words.len())].join(" "))
    })
}

/// Whether `line` dates its figures with a commit (`at 6b5d9bb`).
fn dated(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.windows(2).any(|pair| {
        let commit = pair[1].trim_matches(|c: char| !c.is_ascii_hexdigit());
        pair[0] == "at" && commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())
    })
}

#[test]
fn the_docs_state_no_count_that_the_code_can_change() {
    let mut docs = files("docs", ".md");
    docs.extend(["README.md", "ARCHITECTURE.md"].map(|name| root().join(name)));
    let mut found = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        // A paragraph that names its commit holds measured figures.
        for paragraph in text.split("\n\n").filter(|paragraph| !dated(paragraph)) {
            for line in paragraph.lines() {
                if let Some(count) = counts(line) {
                    let file = doc.strip_prefix(root()).unwrap_or(&doc).display();
                    found.push(format!("{file}: \"{count}\" in: {line}"));
                }
            }
        }
    }
    assert!(found.is_empty(), "counts that go stale:\n{}", found.join("\n"));
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
    for dir in [
        "src",
        "tests",
        "benches",
        "fuzz/fuzz_targets",
        "xtask",
        "testkit",
        "admin",
        "local-support",
    ] {
        // This file names the APIs it looks for.
        for path in files(dir, ".rs").into_iter().filter(|path| !path.ends_with("tidy.rs")) {
            let text = std::fs::read_to_string(&path).unwrap();
            for line in ungated_linux_calls(&text) {
                let file = path.strip_prefix(root()).unwrap_or(&path).display();
                found.push(format!("{file}:{}", line + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "Linux-only APIs without cfg(target_os = \"linux\"):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checks_find_what_they_look_for() {
    let ungated = "fn peak() {\n    std::fs::read(\"/proc/self/status\");\n}\n";
    assert_eq!(ungated_linux_calls(ungated), [1]);
    let gated_fn = format!("#[cfg(target_os = \"linux\")]\n{ungated}");
    assert!(ungated_linux_calls(&gated_fn).is_empty());
    let gated_block = "fn start() {\n    #[cfg(target_os = \"linux\")]\n    unsafe {\n        libc::prctl(1);\n    }\n    libc::prctl(2);\n}\n";
    assert_eq!(ungated_linux_calls(gated_block), [5]);
    assert_eq!(counts("the 32 mutations"), Some("32 mutations".into()));
    assert_eq!(counts("names four fuzz targets;"), Some("four fuzz targets".into()));
    assert_eq!(counts("65 hostile requests in one table"), Some("65 hostile requests".into()));
    assert_eq!(counts("a 10 KB header and 2 owners"), None);
    assert!(dated("init 5.18 ms at 72c09aa, medians") && !dated("at once"));
    let items = public_items("pub fn start(\npub(crate) fn x\n    pub async fn stop()");
    assert_eq!(items, ["start", "stop"]);
    assert!(names("use a::start;", "start") && !names("restart()", "start"));
}
