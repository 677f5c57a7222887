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
            /// Seconds of fuzzing per target (5: a smoke run; `cargo xtask fuzz`
            /// runs each for 30).
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
        /// A fuzzing run of each target.
        cmd fuzz {
            /// Seconds per target (30).
            optional --seconds s: u64
            /// release (the default) or dev.
            optional --build build: String
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
