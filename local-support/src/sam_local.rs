//! `sam local` here: an engine, arm64 emulation, a Lambda base image from
//! Debian's packages and DynamoDB Local reachable from the containers,
//! prepared once, undone at the end.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::function::{Env, wait_until_answering};
use crate::process::{Started, on_exit, output, run, start, succeeds, tail};
use crate::tls_front::forward;
use crate::tools::{ensure_qemu_arm64, temp_dir, unpack_debian_packages};
use crate::{Result, log, root, tools_dir};

/// Debian's container engine, unpacked (not installed) into .tools/engine.
const ENGINE_PACKAGES: [&str; 4] = ["docker.io", "containerd", "runc", "tini"];
const LAMBDA_BASE_REPOSITORY: &str = "plant-store-lambda-base";
/// What the function and SAM's emulator use of AWS's provided.al2023 image,
/// from Debian's arm64 packages: glibc, and busybox's shell and tools.
const BASE_IMAGE_PACKAGES: [&str; 2] = ["busybox-static:arm64", "libc6:arm64"];
const BASE_IMAGE_TOOLS: [&str; 8] = ["sh", "mv", "chmod", "cp", "rm", "ls", "cat", "mkdir"];
/// Where Amazon Linux keeps the CA bundle.
const BASE_IMAGE_CA_BUNDLE: &str = "etc/pki/tls/certs/ca-bundle.crt";
const BASE_IMAGE_DIRS: [&str; 4] = ["var/task", "var/runtime", "opt", "tmp"];
/// The function's logical id in template.yaml.
const FUNCTION: &str = "PlantsFunction";

/// What `sam local` needs here, ready: the engine (and its binaries on
/// PATH), the base image, DynamoDB Local's URL from the containers.
#[derive(Clone)]
pub struct SamLocal {
    docker_host: Option<String>,
    path: String,
    /// The Lambda base image made here; `None`: AWS's own, which SAM pulls
    /// (where Debian's packages are not at hand, as on a Mac).
    image: Option<String>,
    pub dynamodb_url: String,
}

impl SamLocal {
    /// The engine, emulation, base image and forward to DynamoDB Local on
    /// 127.0.0.1:`dynamodb_port`, after `sam build`.
    pub fn prepare(dynamodb_port: u16) -> Result<Self> {
        let mut sam = ensure_container_engine()?;
        ensure_arm64_emulation()?;
        // The base image is made from Debian's packages, where apt-get has them.
        if cfg!(target_os = "linux") && succeeds(Command::new("apt-get").arg("--version")) {
            sam.image = Some(sam.ensure_lambda_base_image()?);
        } else {
            log!("no Debian packages here: sam local pulls AWS's provided.al2023 image once");
        }
        sam.dynamodb_url = sam.forward_from_bridge(dynamodb_port)?;
        Ok(sam)
    }

    /// `command`, reaching the engine.
    fn engine(&self, mut command: Command) -> Command {
        command.env("PATH", &self.path);
        if let Some(host) = &self.docker_host {
            command.env("DOCKER_HOST", host);
        }
        command
    }

    fn docker(&self) -> Command {
        self.engine(Command::new("docker"))
    }

    /// `sam local SUBCOMMAND` on the built template and the base image, with
    /// template `parameters` (`NAME=VALUE`) and `env` as the `--env-vars` file
    /// `env_file` (sam applies the variables the template declares) and as
    /// its own environment (credentials, region).
    fn sam(
        &self,
        subcommand: &str,
        parameters: &[&str],
        env: &Env,
        file: &Path,
    ) -> Result<Command> {
        let env = env.with("AWS_ENDPOINT_URL_DYNAMODB", &self.dynamodb_url);
        let variables: serde_json::Map<_, _> =
            env.vars().iter().map(|(name, value)| (name.clone(), value.as_str().into())).collect();
        std::fs::create_dir_all(file.parent().unwrap())?;
        std::fs::write(file, json!({ FUNCTION: variables }).to_string())?;
        let mut command = self.engine(env.command("sam"));
        // `sam local` first asks STS for the account id: offline, botocore
        // retries for ~9 s (11.4 s per invoke against 3.0 s), online it
        // would send the local credentials away. 127.0.0.1:9 refuses at once.
        command.env("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9");
        let template = root().join(".aws-sam/build/template.yaml");
        command.args(["local", subcommand, "--template"]).arg(template);
        if let Some(image) = &self.image {
            command.args(["--invoke-image", image, "--skip-pull-image"]);
        }
        command.args(["--container-host-interface", "127.0.0.1"]);
        command.args(["--parameter-overrides", "CreateUserPool=false"]).args(parameters);
        command.arg("--env-vars").arg(file);
        Ok(command)
    }

    /// `sam local start-api` on 127.0.0.1:`port`, one warm container started
    /// at once, no file watching, its output in `log` (else the terminal),
    /// once the function answers.
    pub fn start_api(
        &self,
        env: &Env,
        port: u16,
        args: &[&str],
        log: Option<&Path>,
    ) -> Result<Started> {
        let env_file = tools_dir().join(format!("sam-local/env-{port}.json"));
        let mut command = self.sam("start-api", args, env, &env_file)?;
        command.args(["--host", "127.0.0.1", "--port", &port.to_string()]);
        command.args(["--warm-containers", "EAGER", "--no-watch"]);
        // SAM (1.170) takes 30 s to end with a warm container: killed after
        // a short grace, its containers removed (remove_lambda_containers).
        let api = start("sam local start-api", command, Duration::from_secs(3), log)?;
        wait_until_answering(port, &api, Duration::from_secs(300)).map_err(|error| {
            let printed = log.map(|log| tail(log, 60)).unwrap_or_default();
            format!("{error}\n{printed}")
        })?;
        Ok(api)
    }

    /// Removes what `sam local` ran from the base image (SAM removes its
    /// own containers when it stops cleanly; this also covers a killed run).
    pub fn remove_lambda_containers(&self) {
        let listed = output(self.docker().args(["ps", "-a", "--format", "{{.ID}} {{.Image}}"]));
        let prefix = format!("{LAMBDA_BASE_REPOSITORY}:");
        for line in listed.unwrap_or_default().lines() {
            if let Some((id, image)) = line.split_once(' ')
                && image.starts_with(&prefix)
            {
                let _ = output(self.docker().args(["rm", "-f", id]));
            }
        }
    }

    /// The base image's name, building it once: its tag is a hash of its
    /// recipe, so a changed recipe builds a new image.
    fn ensure_lambda_base_image(&self) -> Result<String> {
        let recipe = format!(
            "{BASE_IMAGE_PACKAGES:?} {BASE_IMAGE_TOOLS:?} {BASE_IMAGE_CA_BUNDLE} {BASE_IMAGE_DIRS:?}"
        );
        let image =
            format!("{LAMBDA_BASE_REPOSITORY}:provided.al2023-arm64-{}", short_hash(&recipe));
        if succeeds(self.docker().args(["image", "inspect", &image])) {
            return Ok(image);
        }
        log!("building the Lambda base image {image} from Debian's arm64 packages");
        let context = temp_dir("base-image")?;
        let rootfs = context.path().join("rootfs");
        lambda_base_rootfs(&rootfs)?;
        let tar = context.path().join("rootfs.tar");
        let owned_by_root = ["--numeric-owner", "--owner=0", "--group=0", "-C"];
        run(Command::new("tar").args(owned_by_root).arg(&rootfs).arg("-cf").arg(&tar).arg("."))?;
        // Imported as arm64, so that no engine goes looking for it in a registry.
        output(self.docker().args(["import", "--platform", "linux/arm64"]).arg(&tar).arg(&image))?;
        // Earlier recipes' images, and SAM's invoke image built on one (its
        // name does not change with the base image).
        let format = "{{.Repository}}:{{.Tag}}";
        let images =
            output(self.docker().args(["images", LAMBDA_BASE_REPOSITORY, "--format", format]))?;
        for old in images.lines().filter(|old| *old != image) {
            output(self.docker().args(["rmi", "-f", old]))?;
        }
        Ok(image)
    }

    /// Makes DynamoDB Local (127.0.0.1:`port`) reachable from the
    /// containers; returns the URL they use: on Docker Desktop
    /// host.docker.internal; on Linux the bridge's gateway address, where a
    /// TCP forward of this process passes connections on to 127.0.0.1.
    fn forward_from_bridge(&self, port: u16) -> Result<String> {
        let system = output(self.docker().args(["info", "--format", "{{.OperatingSystem}}"]))?;
        if system.contains("Docker Desktop") {
            return Ok(format!("http://host.docker.internal:{port}"));
        }
        let inspect = |format: &str| {
            output(self.docker().args(["network", "inspect", "bridge", "--format", format]))
        };
        let mut gateway = inspect("{{range .IPAM.Config}}{{.Gateway}}{{end}}")?;
        if gateway.is_empty() {
            // Debian's engine, as started here, leaves it out: take the
            // bridge interface's own address.
            let bridge = inspect(r#"{{index .Options "com.docker.network.bridge.name"}}"#)?;
            let bridge = if bridge.is_empty() { "docker0" } else { &bridge };
            let addresses =
                output(Command::new("ip").args(["-4", "-o", "addr", "show", "dev", bridge]))?;
            let address = addresses.split_whitespace().nth(3).and_then(|a| a.split('/').next());
            gateway = address.unwrap_or_default().to_owned();
        }
        if gateway.is_empty() {
            return Err("found no gateway address of the engine's bridge network".into());
        }
        // The containers' gateway, to DynamoDB Local.
        forward(&format!("{gateway}:{port}"), port)?;
        Ok(format!("http://{gateway}:{port}"))
    }
}

/// The first 12 hex digits of `text`'s SHA-256.
fn short_hash(text: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes());
    digest.as_ref()[..6].iter().map(|byte| format!("{byte:02x}")).collect()
}

/// An engine that answers: the user's own, else (as root) Debian's, its
/// state under .tools/, without NAT, forwarding or DNS beyond the machine,
/// stopped at the end.
fn ensure_container_engine() -> Result<SamLocal> {
    let sam = SamLocal {
        docker_host: std::env::var("DOCKER_HOST").ok(),
        path: std::env::var("PATH").unwrap_or_default(),
        image: None,
        dynamodb_url: String::new(),
    };
    if succeeds(sam.docker().arg("info")) {
        let host = sam.docker_host.as_deref().unwrap_or("the default socket");
        log!("using the container engine that answers at {host}");
        let answering = sam.clone();
        on_exit(move || answering.remove_lambda_containers());
        return Ok(sam);
    }
    // SAFETY: getuid has no preconditions.
    #[cfg(target_os = "linux")]
    if unsafe { libc::getuid() } == 0 {
        return start_debian_engine(sam);
    }
    Err("no container engine answers: start Docker Desktop, Colima or Docker Engine \
         (on Linux as root, scripts/test starts Debian's)"
        .into())
}

/// Debian's container engine, unpacked into .tools/engine on first use.
#[cfg(target_os = "linux")]
fn ensure_engine_packages() -> Result<PathBuf> {
    let engine_dir = tools_dir().join("engine");
    if !engine_dir.join("usr/sbin/dockerd").exists() {
        let packages = ENGINE_PACKAGES.join(" ");
        log!("fetching Debian's container engine: {packages}");
        let _ = std::fs::remove_dir_all(&engine_dir);
        unpack_debian_packages(&engine_dir, &ENGINE_PACKAGES)?;
    }
    Ok(engine_dir)
}

/// Starts Debian's engine for `sam` (as root), stopped when the task ends.
#[cfg(target_os = "linux")]
fn start_debian_engine(mut sam: SamLocal) -> Result<SamLocal> {
    let engine_dir = ensure_engine_packages()?;
    let (bin, sbin) = (engine_dir.join("usr/bin"), engine_dir.join("usr/sbin"));
    sam.path = format!("{}:{}:{}", bin.display(), sbin.display(), sam.path);
    // Unix sockets live here: a short path, gone when the engine stops.
    let run_dir = temp_dir("engine")?.keep();
    let host = format!("unix://{}/docker.sock", run_dir.display());
    sam.docker_host = Some(host.clone());
    let data = tools_dir().join("engine-data");
    std::fs::create_dir_all(&data)?;
    log!("starting Debian's Docker Engine (state in .tools/engine-data, no NAT)");
    let mut dockerd = sam.engine(Command::new("dockerd"));
    dockerd.arg("--data-root").arg(&data).args(["-H", &host]);
    dockerd.arg("--exec-root").arg(run_dir.join("exec"));
    dockerd.arg("--pidfile").arg(run_dir.join("dockerd.pid"));
    dockerd.args(["--iptables=false", "--ip-masq=false"]);
    dockerd.args(["--ip-forward=false", "--dns", "127.0.0.1"]);
    // Registered first, so it runs after the engine stops: what a killed
    // engine may leave (mounts, namespaces, its bridge and run folder).
    on_exit({
        let (data, run_dir) = (data.clone(), run_dir.clone());
        move || remove_engine_leftovers(&data, &run_dir)
    });
    let log = tools_dir().join("dockerd.log");
    let engine = start("dockerd", dockerd, Duration::from_secs(30), Some(&log))?;
    // Registered after it: runs first, while the engine still answers.
    let answering = sam.clone();
    on_exit(move || answering.remove_lambda_containers());
    for _ in 0..120 {
        if succeeds(sam.docker().arg("info")) {
            return Ok(sam);
        }
        if !engine.is_running() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Err(format!("the container engine did not start:\n{}", tail(&log, 20)).into())
}

#[cfg(target_os = "linux")]
fn remove_engine_leftovers(data: &Path, run_dir: &Path) {
    let mounts = output(Command::new("findmnt").args(["-rn", "-o", "TARGET"])).unwrap_or_default();
    let ours = |target: &&str| {
        Path::new(target).starts_with(data) || Path::new(target).starts_with(run_dir)
    };
    let mut ours: Vec<&str> = mounts.lines().filter(ours).collect();
    ours.sort_unstable_by(|a, b| b.cmp(a));
    for target in ours {
        let _ = output(Command::new("umount").args(["-l", target]));
    }
    let _ = output(Command::new("ip").args(["link", "delete", "docker0"]));
    let _ = std::fs::remove_dir_all(run_dir);
}

/// Docker Desktop (macOS) runs arm64 images itself.
#[cfg(not(target_os = "linux"))]
fn ensure_arm64_emulation() -> Result {
    Ok(())
}

/// Off arm64, registers qemu-user for arm64 ELF files (binfmt_misc, flag F:
/// it works inside containers too) unless it is; undone at the end.
#[cfg(target_os = "linux")]
fn ensure_arm64_emulation() -> Result {
    let binfmt = Path::new("/proc/sys/fs/binfmt_misc");
    if std::env::consts::ARCH == "aarch64" || binfmt.join("qemu-aarch64").exists() {
        return Ok(());
    }
    ensure_qemu_arm64()?;
    if !binfmt.join("register").exists() {
        run(Command::new("mount").args(["-t", "binfmt_misc", "binfmt_misc"]).arg(binfmt))?;
        on_exit(move || {
            let _ = output(Command::new("umount").arg(binfmt));
        });
    }
    log!("registering qemu-aarch64 with binfmt_misc");
    let registration = std::fs::read("/usr/lib/binfmt.d/qemu-aarch64.conf")?;
    std::fs::write(binfmt.join("register"), registration)?;
    on_exit(move || {
        let _ = std::fs::write(binfmt.join("qemu-aarch64"), "-1");
    });
    Ok(())
}

/// The base image's tree in `rootfs`: Debian's arm64 packages, busybox's
/// tools, the CA bundle where Amazon Linux keeps it, Lambda's folders.
fn lambda_base_rootfs(rootfs: &Path) -> Result {
    let foreign = output(Command::new("dpkg").arg("--print-foreign-architectures"))?;
    if !foreign.lines().any(|architecture| architecture == "arm64") {
        log!("adding Debian's arm64 architecture to apt (for the Lambda base image)");
        run(Command::new("dpkg").args(["--add-architecture", "arm64"]))?;
        run(Command::new("apt-get").args(["update", "-qq"]))?;
    }
    unpack_debian_packages(rootfs, &BASE_IMAGE_PACKAGES)?;
    std::fs::remove_dir_all(rootfs.join("usr/share"))?;
    for tool in BASE_IMAGE_TOOLS {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(tool))?;
    }
    for dir in BASE_IMAGE_DIRS.iter().chain(&["etc/pki/tls/certs"]) {
        std::fs::create_dir_all(rootfs.join(dir))?;
    }
    run(Command::new("chmod").arg("1777").arg(rootfs.join("tmp")))?;
    std::fs::copy("/etc/ssl/certs/ca-certificates.crt", rootfs.join(BASE_IMAGE_CA_BUNDLE))?;
    Ok(())
}
