//! The local stack the tasks share: DynamoDB Local, the plants table, the
//! function's environment for it, and the function under `cargo lambda
//! watch` (or its debug build behind cargo lambda's emulator).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use plant_store_local_support::dynamodb_local;
use plant_store_local_support::function::{Env, wait_until_answering};
use plant_store_local_support::keys::Issuer;
use plant_store_local_support::process::{Started, run, run_logged, start, wait_for_port};
use plant_store_local_support::{Result, root, tools_dir};

/// DynamoDB Local and the environment every process of the stack gets:
/// the SDK's settings for it, and the function's own once configured.
pub(crate) struct Stack {
    pub env: Env,
    pub dynamodb_port: u16,
}

impl Stack {
    /// Starts DynamoDB Local on 127.0.0.1:`port` (in memory, or with its
    /// data in `data_dir`); it stops with the task.
    pub(crate) fn start(port: u16, data_dir: Option<&Path>) -> Result<Self> {
        let (url, _stopped_with_the_task) = dynamodb_local::start(port, data_dir)?;
        Ok(Self { env: Env::dynamodb(&url), dynamodb_port: port })
    }

    /// Creates `table` (kept if it exists) and configures the function for
    /// it, trusting `issuer`.
    pub(crate) fn configure_function(&mut self, table: &str, issuer: &Issuer) -> Result {
        self.create_table(table)?;
        let url = self.env.get("AWS_ENDPOINT_URL_DYNAMODB").to_owned();
        self.env = Env::function(&url, table, issuer);
        Ok(())
    }

    /// Creates `table` on DynamoDB Local (`plant-store-admin create-table`).
    pub(crate) fn create_table(&self, table: &str) -> Result {
        let mut admin = self.env.command(debug_binary("plant-store-admin")?);
        run(admin.args(["create-table", "--name", table]))
    }

    /// The function under `cargo lambda watch` on 127.0.0.1:`port` (which
    /// binary it serves is in Cargo.toml's `[workspace.metadata.lambda.watch]`),
    /// once the function itself answers.
    pub(crate) fn start_function(&self, port: u16) -> Result<Started> {
        let mut command = self.env.command("cargo");
        command.args(["lambda", "watch", "--invoke-address", "127.0.0.1"]);
        command.args(["--invoke-port", &port.to_string()]);
        let function = start("cargo lambda watch", command, FUNCTION_GRACE, None)?;
        wait_until_answering(port, &function, Duration::from_secs(600))?;
        Ok(function)
    }

    /// The function's debug build, the one `cargo test` makes, behind
    /// `cargo lambda watch --only-lambda-apis` on 127.0.0.1:`port` (its
    /// emulation of the HTTP API and the Lambda Runtime API, without a build
    /// of its own: it would build the function with other features than the
    /// tests and compile most of the tree again). Both write to `output`.
    pub(crate) fn start_built_function(&self, port: u16, output: &Path) -> Result<Started> {
        let binary = debug_binary("plant-store")?;
        // One file for both processes: `start`'s own log would be a file each.
        let log = std::fs::File::create(output)?;
        let mut emulator = self.env.command("cargo");
        emulator.args("lambda watch --only-lambda-apis --invoke-address 127.0.0.1".split(' '));
        emulator.args(["--invoke-port", &port.to_string()]);
        emulator.stdout(log.try_clone()?).stderr(log.try_clone()?);
        let emulator = start("cargo lambda watch", emulator, FUNCTION_GRACE, None)?;
        // It answers HTTP only through a function: wait for its port.
        wait_for_port(port, &emulator, Duration::from_secs(60))?;
        // What cargo lambda watch prints that the function must be given.
        let mut function = self.env.command(binary);
        function
            .env("AWS_LAMBDA_RUNTIME_API", format!("http://127.0.0.1:{port}/.rt"))
            .env("AWS_LAMBDA_FUNCTION_NAME", "_")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "4096")
            .stdout(log.try_clone()?)
            .stderr(log);
        let function = start("the function", function, FUNCTION_GRACE, None)?;
        wait_until_answering(port, &function, Duration::from_secs(60))?;
        Ok(function)
    }
}

/// How long the function and cargo lambda watch may take to end when
/// stopped: once it has served a request, cargo lambda watch (1.9) no longer
/// ends on a signal, and neither keeps state.
const FUNCTION_GRACE: Duration = Duration::from_secs(2);

/// A binary of the workspace's debug build ([`build_workspace`]).
pub(crate) fn debug_binary(name: &str) -> Result<PathBuf> {
    build_workspace()?;
    Ok(root().join("target/debug").join(name))
}

/// The workspace's debug build, every binary and test, once per task; its
/// output in `.tools/build.log`.
pub(crate) fn build_workspace() -> Result {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let build = || {
        let build = "build --locked --workspace --bins --tests";
        let mut cargo = linted(Command::new("cargo"));
        run_logged(cargo.args(build.split(' ')), &tools_dir().join("build.log"))
    };
    BUILT.get_or_init(|| build().map_err(|error| error.to_string())).clone()?;
    Ok(())
}

/// `cargo` building the workspace's crates with clippy, as `cargo clippy`
/// does (but a full build): clippy's lints and the tests share one build
/// of the dependencies. Every debug build of the tasks is this one.
pub(crate) fn linted(mut cargo: Command) -> Command {
    cargo.env("RUSTC_WORKSPACE_WRAPPER", "clippy-driver");
    cargo
}
