//! `cargo xtask`'s command line (xflags: `cargo xtask --help` prints it).

use std::path::PathBuf;

xflags::xflags! {
    /// plant-store's project tasks.
    cmd xtask {
        /// The local stack: DynamoDB Local, the table, a key, the function under cargo lambda watch.
        cmd dev {
            /// Where the API listens (9000).
            optional --api-port port: u16
            /// Where DynamoDB Local listens (8000).
            optional --dynamodb-port port: u16
        }
        /// The same, with sam build's artifact under sam local start-api.
        cmd sam-local {
            /// Where the API listens (3000).
            optional --api-port port: u16
            /// Where DynamoDB Local listens (8000).
            optional --dynamodb-port port: u16
        }
        /// A token for the local stack's owner OWNER.
        cmd token {
            required owner: String
        }
        /// Every check, as CI runs it.
        cmd test {
            /// Schemathesis' examples per operation behind cargo lambda's emulator (100).
            optional --max-examples n: usize
            /// Seconds of blind fuzzing per target (5: the debug build,
            /// uninstrumented; `cargo xtask fuzz` guides each for 30).
            optional --fuzz-seconds s: u64
        }
        /// The benchmarks (docs/performance.md).
        cmd bench {
            /// A few iterations of the debug build, no timing asserted.
            optional --smoke
            /// A missed target fails the run.
            optional --strict
            /// Cold starts per function (20).
            optional --rounds n: usize
            /// Warm GET + POST per function (600).
            optional --warm n: usize
            /// Without sam build (no arm64 size).
            optional --no-sam-build
            /// Another build of the function, measured beside it.
            optional --compare binary: PathBuf
        }
        /// Coverage-guided fuzzing of each target, optimised, with AddressSanitizer.
        cmd fuzz {
            /// Seconds per target (30).
            optional --seconds s: u64
        }
        /// Schemathesis and the acceptance suite against the function behind cargo lambda's emulator.
        cmd contract-test {
            /// Examples per operation (100).
            optional --max-examples n: usize
            /// The seed (the commit's first 8 hex digits).
            optional --seed n: u64
        }
        /// sam build's arm64 artifact, with its dependency list (the pipeline's build).
        cmd sam-build {}
        /// The API's reference page, built from openapi.yaml (target/api-reference/) and checked in headless Chromium.
        cmd api-docs {
            /// Also the breaking-change gate against the released 1.0.0, with its proof.
            optional --gate
        }
    }
}

/// Each flag's default, as its help above names it (checked below).
pub(crate) mod defaults {
    pub(crate) const DEV_API_PORT: u16 = 9000;
    pub(crate) const SAM_LOCAL_API_PORT: u16 = 3000;
    pub(crate) const DYNAMODB_PORT: u16 = 8000;
    pub(crate) const MAX_EXAMPLES: usize = 100;
    pub(crate) const GATE_FUZZ_SECONDS: u64 = 5;
    pub(crate) const FUZZ_SECONDS: u64 = 30;
    pub(crate) const ROUNDS: usize = 20;
    pub(crate) const WARM: usize = 600;
}

#[test]
fn each_flags_help_names_the_default_applied() {
    use defaults::*;
    let number = |n: usize| n.to_string();
    for (command, flag, default) in [
        ("dev", "--api-port", DEV_API_PORT.to_string()),
        ("dev", "--dynamodb-port", DYNAMODB_PORT.to_string()),
        ("sam-local", "--api-port", SAM_LOCAL_API_PORT.to_string()),
        ("sam-local", "--dynamodb-port", DYNAMODB_PORT.to_string()),
        ("test", "--max-examples", number(MAX_EXAMPLES)),
        ("test", "--fuzz-seconds", GATE_FUZZ_SECONDS.to_string()),
        ("contract-test", "--max-examples", number(MAX_EXAMPLES)),
        ("fuzz", "--seconds", FUZZ_SECONDS.to_string()),
        ("bench", "--rounds", number(ROUNDS)),
        ("bench", "--warm", number(WARM)),
    ] {
        let section =
            Xtask::HELP_.split("\nxtask ").find(|s| s.starts_with(&format!("{command}\n")));
        let help = section.and_then(|s| s.split(&format!("{flag} <")).nth(1)).unwrap_or_default();
        let help = help.split("\n\n").next().unwrap_or_default();
        let named = help.contains(&format!("({default}"));
        assert!(named, "{command} {flag}: {help:?}, default {default}");
    }
}
