//! Commands, and started processes that always stop: each leads its own
//! process group (process-wrap), and the clean-ups run last first when the
//! task ends, also on an error, a panic or a signal (`ctrlc`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use process_wrap::std::{ChildWrapper, CommandWrap, ProcessGroup};

use crate::Result;

/// A progress line on stderr with the time of day: what each step costs.
pub fn log(message: &str) {
    let seconds = UNIX_EPOCH.elapsed().unwrap().as_secs() % 86_400;
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let mut stderr = std::io::stderr();
    let _ = writeln!(stderr, "==> {hours:02}:{minutes:02}:{seconds:02} {message}");
}

/// An error unless `status`, `command`'s (or why it did not run), is a
/// success; with what it printed on stderr, if that was captured.
fn check(command: &Command, status: std::io::Result<ExitStatus>, stderr: &[u8]) -> Result {
    let words = std::iter::once(command.get_program()).chain(command.get_args());
    let described = words.map(|word| word.to_string_lossy()).collect::<Vec<_>>();
    let stderr = String::from_utf8_lossy(stderr);
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("{} failed ({status}) {}", described.join(" "), stderr.trim())),
        Err(error) => Err(format!("cannot run {}: {error}", described.join(" "))),
    }
    .map_err(|message| message.trim_end().into())
}

/// Runs `command` to its end; an error unless it succeeds.
pub fn run(command: &mut Command) -> Result {
    let status = command.status();
    check(command, status, &[])
}

/// Runs `command`, its stdout printed and written to `log_file`.
pub fn run_logged(command: &mut Command, log_file: &Path) -> Result {
    use std::io::{BufRead, BufReader};
    let mut child = match command.stdout(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(error) => return check(command, Err(error), &[]),
    };
    let mut log = std::fs::File::create(log_file)?;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line?;
        println!("{line}");
        writeln!(log, "{line}")?;
    }
    let status = child.wait();
    check(command, status, &[])
}

/// Runs `command`: its stdout trimmed, or an error with its stderr.
pub fn output(command: &mut Command) -> Result<String> {
    let (status, stdout, stderr) = match command.stderr(Stdio::piped()).output() {
        Ok(output) => (Ok(output.status), output.stdout, output.stderr),
        Err(error) => (Err(error), Vec::new(), Vec::new()),
    };
    check(command, status, &stderr)?;
    Ok(String::from_utf8_lossy(&stdout).trim().to_owned())
}

/// Whether `command` runs and succeeds, its output discarded.
pub fn succeeds(command: &mut Command) -> bool {
    let status = command.stdout(Stdio::null()).stderr(Stdio::null()).status();
    status.is_ok_and(|status| status.success())
}

/// The last `count` lines of a log file, to show with a failure.
pub fn tail(path: &Path, count: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

type Cleanup = Box<dyn FnOnce() + Send>;

/// What runs when the task ends, last registered first.
static CLEANUPS: Mutex<Vec<Cleanup>> = Mutex::new(Vec::new());

/// Registers `cleanup` to run when the task (or the [`Scope`] open now) ends.
pub fn on_exit(cleanup: impl FnOnce() + Send + 'static) {
    CLEANUPS.lock().unwrap().push(Box::new(cleanup));
}

/// A part of a task: what is registered meanwhile is cleaned up, last
/// first, when it drops (also on an error or a panic).
pub struct Scope(usize);

impl Scope {
    pub fn begin() -> Self {
        Self(CLEANUPS.lock().unwrap().len())
    }
}

impl Drop for Scope {
    /// Runs this scope's clean-ups one at a time, outside the lock.
    fn drop(&mut self) {
        let next = || {
            let mut cleanups = CLEANUPS.lock().unwrap();
            (cleanups.len() > self.0).then(|| cleanups.pop()).flatten()
        };
        while let Some(cleanup) = next() {
            cleanup();
        }
    }
}

/// Set when a signal ends the task: what stops then is expected to.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Makes SIGINT, SIGTERM and SIGHUP run the clean-ups, then exit 130.
pub fn stop_on_signals() {
    let stop = || {
        STOPPING.store(true, SeqCst);
        log("stopping what this task started");
        drop(Scope(0));
        std::process::exit(130);
    };
    ctrlc::set_handler(stop).expect("the only signal handler");
}

/// How long a started process has to end after SIGTERM: none of ours keeps
/// state worth waiting longer for.
pub const GRACE: Duration = Duration::from_secs(5);

/// A process this task started, leading its own process group, stopped
/// when the task (or its [`Scope`]) ends.
#[derive(Clone)]
pub struct Started {
    pub name: String,
    child: Arc<Mutex<Box<dyn ChildWrapper>>>,
    grace: Duration,
    log: Option<PathBuf>,
}

/// Starts `command` in a new process group, its output in `log` if given,
/// with a stdin pipe that closes when this process ends, and registers its
/// stop; on Linux the kernel also ends it with the thread that started it
/// (the parent-death signal).
pub fn start(
    name: &str,
    mut command: Command,
    grace: Duration,
    log: Option<&Path>,
) -> Result<Started> {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    if let Some(log) = log {
        let file = std::fs::File::create(log)?;
        command.stdout(file.try_clone()?).stderr(file);
    }
    command.stdin(Stdio::piped());
    let mut wrapped = CommandWrap::from(command);
    let spawned = wrapped.wrap(ProcessGroup::leader()).spawn();
    let child = spawned.map_err(|error| format!("cannot start {name}: {error}"))?;
    let started = Started {
        name: name.to_owned(),
        child: Arc::new(Mutex::new(child)),
        grace,
        log: log.map(Path::to_owned),
    };
    on_exit({
        let started = started.clone();
        move || started.stop()
    });
    Ok(started)
}

impl Started {
    /// Stops it now, as the end of the task would: SIGTERM to its group and
    /// to every descendant that left it (cargo lambda watch starts the
    /// function in a session of its own, and waits for it), then SIGKILL to
    /// the rest after the grace period.
    pub fn stop(&self) {
        let mut child = self.child.lock().unwrap();
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        let escaped = descendants(child.id());
        let signal_all = |child: &dyn ChildWrapper, signal| {
            let _ = child.signal(signal);
            for &pid in &escaped {
                // SAFETY: kill(2) on our own child's descendants.
                unsafe { libc::kill(pid as i32, signal) };
            }
        };
        signal_all(child.as_ref(), libc::SIGTERM);
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(100));
        }
        signal_all(child.as_ref(), libc::SIGKILL);
        let _ = child.wait();
    }

    /// Whether it still runs (it is reaped if it ended).
    pub fn is_running(&self) -> bool {
        matches!(self.child.lock().unwrap().try_wait(), Ok(None))
    }

    /// Waits until it ends; an error, with the end of its log, unless it
    /// succeeded.
    pub fn finish(&self) -> Result {
        let status = self.wait_for_end();
        if status.success() {
            return Ok(());
        }
        let printed = self.log.as_deref().map(|log| tail(log, 40)).unwrap_or_default();
        Err(format!("{} failed ({status})\n{printed}", self.name).into())
    }

    /// Waits until it ends by itself, an error; or until a signal ends the
    /// task, which then stops it and exits.
    pub fn wait(&self) -> Result {
        let status = self.wait_for_end();
        while STOPPING.load(SeqCst) {
            std::thread::sleep(Duration::from_secs(1));
        }
        Err(format!("{} exited ({status})", self.name).into())
    }

    /// Polled, so that a clean-up can take the lock meanwhile.
    fn wait_for_end(&self) -> ExitStatus {
        loop {
            if let Ok(Some(status)) = self.child.lock().unwrap().try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Every process below `pid`, from each process's parent as the system
/// tells it (sysinfo: /proc on Linux, the kernel's process table on macOS).
fn descendants(pid: u32) -> Vec<u32> {
    let Ok(mut system) = sysinfo::System::new() else { return Vec::new() };
    let nothing_more = sysinfo::ProcessRefreshKind::nothing();
    system.refresh_processes_specifics(sysinfo::ProcessesToUpdate::All, true, nothing_more);
    let parents: Vec<(u32, u32)> = (system.processes().iter())
        .filter_map(|(child, process)| Some((child.as_u32(), process.parent()?.as_u32())))
        .collect();
    let mut found = vec![pid];
    let mut index = 0;
    while let Some(&parent) = found.get(index) {
        found.extend(parents.iter().filter(|(_, of)| *of == parent).map(|(child, _)| *child));
        index += 1;
    }
    found.split_off(1)
}

/// A free port on 127.0.0.1 (free when asked).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1");
    listener.local_addr().unwrap().port()
}

/// Waits until something accepts connections on 127.0.0.1:`port`; fails
/// when `process` ends first or after `timeout`.
pub fn wait_for_port(port: u16, process: &Started, timeout: Duration) -> Result {
    let deadline = Instant::now() + timeout;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if !process.is_running() || Instant::now() > deadline {
            return Err(format!("{} did not listen on 127.0.0.1:{port}", process.name).into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Waits until `url` answers `wanted` (`None`: any status), each probe as
/// long as it takes; fails if `process` ends first or after `timeout`.
pub fn wait_for(url: &str, wanted: Option<u16>, process: &Started, timeout: Duration) -> Result {
    let deadline = Instant::now() + timeout;
    let patience = timeout.as_secs().to_string();
    let mut last = None;
    while Instant::now() < deadline {
        let mut curl = Command::new("curl");
        curl.args(["-s", "-o", "/dev/null", "-w", "%{http_code}"]);
        curl.args(["--max-time", &patience, url]);
        last = output(&mut curl).ok().and_then(|code| code.parse().ok()).filter(|&code| code != 0);
        if last.is_some() && (wanted.is_none() || last == wanted) {
            return Ok(());
        }
        if !process.is_running() {
            return Err(format!("{} exited before {url} answered", process.name).into());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let wanted = wanted.map_or("at all".to_owned(), |status| status.to_string());
    Err(format!("{url} did not answer {wanted} within {timeout:?} (last status: {last:?})").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: u32) -> bool {
        let mut system = sysinfo::System::new().unwrap();
        let pid = sysinfo::Pid::from_u32(pid);
        system.refresh_processes(sysinfo::ProcessesToUpdate::Some(&[pid]), true);
        // A zombie has ended: only its parent has not reaped it yet.
        (system.process(pid))
            .is_some_and(|process| process.status() != sysinfo::ProcessStatus::Zombie)
    }

    fn within_5s(done: impl Fn() -> bool, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_end_of_a_scope_stops_what_it_started_and_what_that_started_in_another_session() {
        let pid_file = std::env::temp_dir().join(format!("xtask-scope-{}", std::process::id()));
        let escaped = || std::fs::read_to_string(&pid_file).ok()?.trim().parse::<u32>().ok();
        let leader = {
            let _scope = Scope::begin();
            let script = format!("setsid sleep 600 & echo $! > {}; sleep 600", pid_file.display());
            let mut shell = Command::new("sh");
            shell.arg("-c").arg(script);
            let started = start("a shell", shell, Duration::from_secs(5), None).unwrap();
            within_5s(|| escaped().is_some(), "the shell wrote no pid");
            assert!(started.is_running() && alive(escaped().unwrap()));
            started
        };
        assert!(!leader.is_running(), "the leader still runs");
        within_5s(|| !alive(escaped().unwrap()), "the process in its own session still runs");
        let _ = std::fs::remove_file(pid_file);
    }
}
