//! The local stack the tasks share: DynamoDB Local, the plants table, a
//! local signing key and the function's configuration, the function under
//! `cargo lambda watch`, haproxy (a TLS terminator, or a TCP forward), and
//! `sam build`'s artifact.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use xtask::process::{Started, Stop, output, run, start, tail, wait_for, wait_for_port};
use xtask::tools::ensure_haproxy;
use xtask::{Result, dynamodb_local, log, root, tools_dir};

/// The local stack's token rules.
pub const LOCAL_ISSUER: &str = "https://plant-store.local";
pub const LOCAL_AUDIENCE: &str = "plant-store";

/// The local stack's signing key (kept between runs).
pub fn local_key_dir() -> PathBuf {
    root().join(".local/keys")
}

/// The configuration every process of the stack gets: the SDK's settings
/// for DynamoDB Local and the function's own.
pub struct Stack {
    env: Vec<(String, String)>,
    pub dynamodb_port: u16,
}

impl Stack {
    /// Starts DynamoDB Local on 127.0.0.1:`port` (in memory, or with its
    /// data in `data_dir`) and waits until it answers.
    pub fn with_dynamodb_local(port: u16, data_dir: Option<&Path>) -> Result<Self> {
        log!("starting DynamoDB Local on 127.0.0.1:{port}");
        std::fs::create_dir_all(tools_dir())?;
        let log_file = std::fs::File::create(tools_dir().join("dynamodb-local.log"))?;
        let dynamodb = start(
            "DynamoDB Local",
            dynamodb_local::command(port, data_dir)?
                .stdout(log_file.try_clone()?)
                .stderr(log_file),
            Stop::terminate(Duration::from_secs(10)),
        )?;
        let url = format!("http://127.0.0.1:{port}");
        wait_for(
            &format!("{url}/"),
            None,
            &dynamodb,
            Duration::from_secs(60),
            &[],
        )
        .map_err(|error| {
            format!(
                "{error}\n{}",
                tail(&tools_dir().join("dynamodb-local.log"), 40)
            )
        })?;
        let env = [
            ("AWS_ENDPOINT_URL_DYNAMODB", url.as_str()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ];
        Ok(Self {
            env: env
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .to_vec(),
            dynamodb_port: port,
        })
    }

    pub fn set(&mut self, name: &str, value: &str) {
        self.env.retain(|(existing, _)| existing != name);
        self.env.push((name.to_owned(), value.to_owned()));
    }

    pub fn get(&self, name: &str) -> &str {
        self.env
            .iter()
            .find(|(existing, _)| existing == name)
            .map_or("", |(_, value)| value)
    }

    /// `program` with the stack's configuration in its environment (and no
    /// AWS profile or session of the user's).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .envs(self.env.iter().map(|(name, value)| (name, value)));
        command
    }

    /// Makes a local signing key in `key_dir` (kept if it exists) and the
    /// table, and configures the function for them.
    pub fn configure_function(&mut self, table: &str, key_dir: &Path) -> Result {
        output(dev_tool()?.arg("keygen").arg("--dir").arg(key_dir))?;
        run(self.command(debug_binary("plant-store-dev")?).args([
            "create-table",
            "--name",
            table,
        ]))?;
        self.set("PLANTS_TABLE", table);
        self.set("AUTH_ISSUER", LOCAL_ISSUER);
        self.set("AUTH_AUDIENCE", LOCAL_AUDIENCE);
        let jwks = std::fs::read_to_string(key_dir.join("jwks.json"))?;
        self.set("AUTH_JWKS", &jwks);
        Ok(())
    }

    /// The function under `cargo lambda watch` on 127.0.0.1:`port` (which
    /// binary it serves is in Cargo.toml's `[workspace.metadata.lambda.watch]`),
    /// once the function itself answers.
    pub fn start_function(&self, port: u16) -> Result<Started> {
        let mut command = self.command("cargo");
        command
            .args(["lambda", "watch", "--invoke-address", "127.0.0.1"])
            .args(["--invoke-port", &port.to_string()]);
        // Once it has served a request, cargo lambda watch (1.9) no longer
        // ends on SIGINT or SIGTERM; it keeps no state, so a short grace.
        let function = start(
            "cargo lambda watch",
            &mut command,
            Stop::interrupt(Duration::from_secs(2)),
        )?;
        wait_for_function(port, &function, Duration::from_secs(600))?;
        Ok(function)
    }

    /// The function's debug build, the one `cargo test` makes, behind
    /// `cargo lambda watch --only-lambda-apis` on 127.0.0.1:`port` (its
    /// emulation of the HTTP API and the Lambda Runtime API, without a build
    /// of its own: it would build the function with other features than the
    /// tests and compile most of the tree again). Both write to `output`.
    pub fn start_built_function(&self, port: u16, output: &Path) -> Result<Started> {
        let binary = debug_binary("plant-store")?;
        let log = std::fs::File::create(output)?;
        let mut emulator = self.command("cargo");
        emulator
            .args([
                "lambda",
                "watch",
                "--only-lambda-apis",
                "--invoke-address",
                "127.0.0.1",
            ])
            .args(["--invoke-port", &port.to_string()])
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?);
        let emulator = start(
            "cargo lambda watch",
            &mut emulator,
            Stop::interrupt(Duration::from_secs(2)),
        )?;
        // It answers HTTP only through a function: wait for its port.
        wait_for_port(port, &emulator, Duration::from_secs(60))?;
        // What cargo lambda watch prints that the function must be given.
        let mut function = self.command(binary);
        function
            .env(
                "AWS_LAMBDA_RUNTIME_API",
                format!("http://127.0.0.1:{port}/.rt"),
            )
            .env("AWS_LAMBDA_FUNCTION_NAME", "_")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "4096")
            .stdout(log.try_clone()?)
            .stderr(log);
        let function = start(
            "the function",
            &mut function,
            Stop::terminate(Duration::from_secs(2)),
        )?;
        wait_for_function(port, &function, Duration::from_secs(60))?;
        Ok(function)
    }
}

/// Waits until the function answers GET /plants on 127.0.0.1:`port` with
/// its 401 (a server in front of it may answer sooner, with other statuses).
/// Each probe waits as long as it takes: `cargo lambda watch` holds a
/// request until the function it is building starts, and a probe given up
/// on would leave the function answering an invocation nobody waits for,
/// which the runtime reports as an error line on the first screen.
pub fn wait_for_function(port: u16, process: &Started, timeout: Duration) -> Result {
    wait_for_port(port, process, timeout)?;
    let patience = timeout.as_secs().to_string();
    wait_for(
        &format!("http://127.0.0.1:{port}/plants"),
        Some(401),
        process,
        timeout,
        &["--max-time", &patience],
    )
}

/// A binary of the workspace's debug build, built once per task with every
/// other binary of the workspace: with the features `cargo test` builds
/// with, so that the tests, the development tool and the function share one
/// build of the dependencies.
pub fn debug_binary(name: &str) -> Result<PathBuf> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            run(Command::new("cargo").args([
                "build",
                "--quiet",
                "--locked",
                "--workspace",
                "--bins",
            ]))
            .map_err(|error| error.to_string())
        })
        .clone()?;
    Ok(root().join("target/debug").join(name))
}

/// The development tool (the workspace's `dev/` crate).
pub fn dev_tool() -> Result<Command> {
    Ok(Command::new(debug_binary("plant-store-dev")?))
}

/// A token for the local issuer, signed with the key in `key_dir`.
pub fn mint_token(key_dir: &Path, owner: &str, ttl_seconds: u64) -> Result<String> {
    output(
        dev_tool()?
            .args(["token", "--dir"])
            .arg(key_dir)
            .args(["--sub", owner, "--ttl", &ttl_seconds.to_string()])
            .env("AUTH_ISSUER", LOCAL_ISSUER)
            .env("AUTH_AUDIENCE", LOCAL_AUDIENCE),
    )
}

/// haproxy in TCP mode from `bind` (an address:port, with options such as
/// `ssl crt FILE`) to 127.0.0.1:`upstream`, its files in `dir`; returns once
/// `check_url` answers through it.
pub fn start_haproxy(
    bind: &str,
    upstream: u16,
    dir: &Path,
    check_url: &str,
    curl_options: &[&str],
) -> Result<Started> {
    ensure_haproxy()?;
    std::fs::create_dir_all(dir)?;
    // One configuration and log per forward: several may share `dir`.
    let config = dir.join(format!("haproxy-to-{upstream}.cfg"));
    std::fs::write(
        &config,
        format!(
            "global\n  maxconn 512\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n\
             frontend front\n  bind {bind}\n  default_backend upstream\n\
             backend upstream\n  server local 127.0.0.1:{upstream}\n"
        ),
    )?;
    let log_file = std::fs::File::create(dir.join(format!("haproxy-to-{upstream}.log")))?;
    let haproxy = start(
        "haproxy",
        Command::new("haproxy")
            .arg("-f")
            .arg(&config)
            .arg("-db")
            .stdout(log_file.try_clone()?)
            .stderr(log_file),
        Stop::terminate(Duration::from_secs(5)),
    )?;
    wait_for(
        check_url,
        None,
        &haproxy,
        Duration::from_secs(10),
        curl_options,
    )?;
    Ok(haproxy)
}

/// A TLS terminator in front of DynamoDB Local, as AWS's endpoint is
/// reached: haproxy on 127.0.0.1:`port` with a certificate for 127.0.0.1
/// from a local CA made in `dir`. Returns the CA bundle to trust: the
/// system's roots and that CA in one file, as a Lambda image has one bundle.
pub fn start_tls_terminator(port: u16, upstream: u16, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let file = |name: &str| dir.join(name);
    if !file("server.pem").exists() {
        let openssl =
            |args: &[&str]| output(Command::new("openssl").args(args).current_dir(dir)).map(drop);
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "30",
            "-subj",
            "/CN=plant-store local CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ])?;
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ])?;
        std::fs::write(
            file("ext.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        )?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.crt",
        ])?;
        let concatenate = |parts: &[PathBuf], to: &str| -> Result {
            let mut whole = Vec::new();
            for part in parts {
                whole.extend(std::fs::read(part)?);
            }
            Ok(std::fs::write(file(to), whole)?)
        };
        concatenate(&[file("server.crt"), file("server.key")], "server.pem")?;
        concatenate(
            &["/etc/ssl/certs/ca-certificates.crt".into(), file("ca.pem")],
            "ca-bundle.pem",
        )?;
    }
    log!("starting haproxy (TLS) on 127.0.0.1:{port} in front of 127.0.0.1:{upstream}");
    let ca = file("ca.pem").display().to_string();
    start_haproxy(
        &format!("127.0.0.1:{port} ssl crt {}", file("server.pem").display()),
        upstream,
        dir,
        &format!("https://127.0.0.1:{port}/"),
        &["--cacert", &ca],
    )?;
    Ok(file("ca-bundle.pem"))
}

/// Fails unless the aws-lc-sys build behind `profile_dir`'s binaries saw
/// AWS_LC_SYS_NO_JITTER_ENTROPY=1 (.cargo/config.toml); its build script
/// reports the variable it found.
pub fn check_no_jitter_entropy(profile_dir: &Path) -> Result {
    let newest = std::fs::read_dir(profile_dir.join("build"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("aws-lc-sys-")
        })
        .map(|entry| entry.path().join("output"))
        .filter_map(|output| Some((output.metadata().ok()?.modified().ok()?, output)))
        .max();
    let saw_it = newest.is_some_and(|(_, output)| {
        std::fs::read_to_string(output)
            .is_ok_and(|text| text.contains("AWS_LC_SYS_NO_JITTER_ENTROPY': '1'"))
    });
    if !saw_it {
        return Err(format!(
            "aws-lc-sys in {} was built with the CPU-jitter entropy source (see .cargo/config.toml)",
            profile_dir.display()
        )
        .into());
    }
    log!(
        "aws-lc-sys in {}: built without the CPU-jitter entropy source",
        profile_dir.display()
    );
    Ok(())
}

/// What `sam build` makes: the arm64 `bootstrap`, and its zip as `sam
/// deploy` uploads it.
pub struct Artifact {
    pub bootstrap: PathBuf,
    pub zip: PathBuf,
}

/// `sam build` (arm64, provided.al2023, cross-compiled by cargo lambda with
/// zig), checked: the binary the template declares, built without the
/// jitter entropy source.
pub fn sam_build() -> Result<Artifact> {
    start_sam_build()?.finish()
}

/// `sam build` running in the background: the full test run lints and
/// tests meanwhile (its optimised, link-time-optimised build keeps one core
/// busy for long stretches). Stopped with the task if it is not finished.
pub struct SamBuild {
    process: Started,
    log_path: PathBuf,
}

pub fn start_sam_build() -> Result<SamBuild> {
    xtask::tools::ensure_python_tools()?;
    let targets = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if !targets
        .lines()
        .any(|target| target == "aarch64-unknown-linux-gnu")
    {
        log!("adding the Rust target aarch64-unknown-linux-gnu");
        run(Command::new("rustup").args(["target", "add", "aarch64-unknown-linux-gnu"]))?;
    }
    log!("sam build (arm64, provided.al2023, cargo lambda)");
    let log_path = tools_dir().join("sam-build.log");
    let log_file = std::fs::File::create(&log_path)?;
    let process = start(
        "sam build",
        Command::new("sam")
            .args(["build", "--template", "template.yaml", "--beta-features"])
            .stdout(log_file.try_clone()?)
            .stderr(log_file),
        Stop::terminate(Duration::from_secs(5)),
    )?;
    Ok(SamBuild { process, log_path })
}

impl SamBuild {
    /// Waits for the build, then checks what it made.
    pub fn finish(self) -> Result<Artifact> {
        self.process.finish(&self.log_path)?;
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
    let header = std::fs::read(file)?
        .into_iter()
        .take(20)
        .collect::<Vec<u8>>();
    let executable = file.metadata()?.permissions().mode() & 0o111 != 0;
    let arm64_elf = header.len() == 20
        && header[..6] == [0x7f, b'E', b'L', b'F', 2, 1]
        && header[18..20] == [0xb7, 0];
    if file.file_name() != Some("bootstrap".as_ref()) || !executable || !arm64_elf {
        return Err(format!(
            "{} is not an executable arm64 ELF named bootstrap (header {header:02x?})",
            file.display()
        )
        .into());
    }
    log!(
        "{}: an arm64 ELF executable named bootstrap",
        file.display()
    );
    Ok(())
}
