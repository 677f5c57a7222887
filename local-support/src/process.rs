//! Running commands, and starting the stack's processes so that they always
//! stop: each started process leads its own process group, and a list of
//! clean-ups (stop this group, unmount that) runs in reverse order when the
//! task ends — normally, on an error, on a panic, or on Ctrl-C or SIGTERM
//! ([`stop_on_signals`]).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::Result;

/// One progress line on stderr, with the time of day (UTC), so that a run's
/// log shows what each step costs.
pub fn log(message: &str) {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 86_400;
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let _ = writeln!(
        std::io::stderr(),
        "==> {hours:02}:{minutes:02}:{seconds:02} {message}"
    );
}

fn describe(command: &Command) -> String {
    let mut words = vec![command.get_program().to_string_lossy().into_owned()];
    words.extend(
        command
            .get_args()
            .map(|arg| arg.to_string_lossy().into_owned()),
    );
    words.join(" ")
}

/// Runs `command` to its end; an error unless it succeeds.
pub fn run(command: &mut Command) -> Result {
    let status = command
        .status()
        .map_err(|error| format!("cannot run {}: {error}", describe(command)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", describe(command)).into())
    }
}

/// The last `count` lines of a log file, to show with a failure.
pub fn tail(path: &std::path::Path, count: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

/// Runs `command`, its stdout printed and also written to `log_file`; an
/// error unless it succeeds.
pub fn run_logged(command: &mut Command, log_file: &std::path::Path) -> Result {
    use std::io::{BufRead, BufReader};
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", describe(command)))?;
    let mut log = std::fs::File::create(log_file)?;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line?;
        println!("{line}");
        writeln!(log, "{line}")?;
    }
    let status = child.wait()?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", describe(command)).into())
    }
}

/// Runs `command` and returns what it printed on stdout (trimmed); an error,
/// with what it printed on stderr, unless it succeeds.
pub fn output(command: &mut Command) -> Result<String> {
    let output = command
        .stderr(Stdio::piped())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", describe(command)))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            describe(command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Whether `command` runs and succeeds, its output discarded.
pub fn succeeds(command: &mut Command) -> bool {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

type Cleanup = Box<dyn FnOnce() + Send>;

/// What runs when the task ends, last registered first, each with the
/// thread that registered it.
static CLEANUPS: Mutex<Vec<(ThreadId, Cleanup)>> = Mutex::new(Vec::new());

/// Registers `cleanup` to run when the task (or the [`Scope`] this thread
/// has open now) ends.
pub fn on_exit(cleanup: impl FnOnce() + Send + 'static) {
    let thread = std::thread::current().id();
    CLEANUPS.lock().unwrap().push((thread, Box::new(cleanup)));
}

/// Runs every registered clean-up, last registered first.
fn clean_up_all() {
    loop {
        let Some((_, cleanup)) = CLEANUPS.lock().unwrap().pop() else {
            return;
        };
        cleanup();
    }
}

/// A part of a task: what its thread registers meanwhile is cleaned up when
/// the guard drops (also on an error or a panic), last registered first;
/// what other threads register is theirs. `main` holds one for the whole
/// task.
pub struct Scope {
    start: usize,
    thread: ThreadId,
}

impl Scope {
    pub fn new() -> Self {
        Self {
            start: CLEANUPS.lock().unwrap().len(),
            thread: std::thread::current().id(),
        }
    }
}

impl Default for Scope {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        loop {
            let cleanup = {
                let mut cleanups = CLEANUPS.lock().unwrap();
                let start = self.start.min(cleanups.len());
                let Some(last) = cleanups[start..]
                    .iter()
                    .rposition(|(thread, _)| *thread == self.thread)
                else {
                    return;
                };
                cleanups.remove(start + last).1
            };
            cleanup();
        }
    }
}

/// Set when a signal ends the task: what stops then is expected to.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes Ctrl-C (SIGINT), SIGTERM and SIGHUP run the clean-ups and then end
/// the task (status 130): the signals are blocked in every thread and one
/// thread waits for them. Call first in `main`, before any thread starts.
/// (Children start with no signal blocked: the standard library resets the
/// mask when it spawns.)
pub fn stop_on_signals() {
    // SAFETY: plain libc calls on a signal set owned by this function.
    unsafe {
        let mut signals: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut signals);
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut signals, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut());
        std::thread::spawn(move || {
            let mut received = 0;
            libc::sigwait(&signals, &mut received);
            STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
            log("stopping what this task started");
            clean_up_all();
            std::process::exit(130);
        });
    }
}

/// A process this task started, in its own process group, stopped when the
/// task (or the [`Scope`] it was started in) ends.
#[derive(Clone)]
pub struct Started {
    pub name: String,
    child: Arc<Mutex<Child>>,
    stop: Stop,
}

/// How a started process is stopped: this signal to its process group, then
/// SIGKILL after the grace period.
#[derive(Clone, Copy)]
pub struct Stop {
    signal: i32,
    grace: Duration,
}

impl Stop {
    /// SIGTERM, as a service manager stops a service.
    pub fn terminate(grace: Duration) -> Self {
        Self {
            signal: libc::SIGTERM,
            grace,
        }
    }

    /// SIGINT, as Ctrl-C in a terminal stops it.
    pub fn interrupt(grace: Duration) -> Self {
        Self {
            signal: libc::SIGINT,
            grace,
        }
    }
}

/// Starts `command` as the leader of a new process group, and registers its
/// stop. The kernel also ends it if the thread that started it ends
/// (`PR_SET_PDEATHSIG`): a task's main thread, a test's own thread, or the
/// thread a test binary keeps for what it shares.
pub fn start(name: &str, command: &mut Command, stop: Stop) -> Result<Started> {
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let child = command
        .process_group(0)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot start {name} ({}): {error}", describe(command)))?;
    let child = Arc::new(Mutex::new(child));
    on_exit({
        let child = child.clone();
        move || stop_group(&mut child.lock().unwrap(), stop)
    });
    Ok(Started {
        name: name.to_owned(),
        child,
        stop,
    })
}

impl Started {
    /// Stops it now, as the end of the task would.
    pub fn stop(&self) {
        stop_group(&mut self.child.lock().unwrap(), self.stop);
    }

    /// Whether it still runs (it is reaped if it ended).
    pub fn is_running(&self) -> bool {
        matches!(self.child.lock().unwrap().try_wait(), Ok(None))
    }

    /// Waits until it ends; an error, with the end of `log` (where its
    /// output went), unless it succeeded. For a job started in the
    /// background, such as a build.
    pub fn finish(&self, log: &std::path::Path) -> Result {
        loop {
            // Polled, so that a clean-up can take the lock meanwhile.
            if let Some(status) = self.child.lock().unwrap().try_wait()? {
                return if status.success() {
                    Ok(())
                } else {
                    Err(format!("{} failed ({status})\n{}", self.name, tail(log, 40)).into())
                };
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Waits until it ends by itself, an error; or until a signal ends the
    /// task, which then stops it and exits.
    pub fn wait(&self) -> Result {
        loop {
            let exited = self.child.lock().unwrap().try_wait()?;
            if let Some(status) = exited
                && !STOPPING.load(std::sync::atomic::Ordering::SeqCst)
            {
                return Err(format!("{} exited ({status})", self.name).into());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

fn stop_group(child: &mut Child, stop: Stop) {
    if !matches!(child.try_wait(), Ok(None)) {
        return;
    }
    // Its group, and every descendant that left it (cargo lambda watch
    // starts the function in a session of its own, and waits for it).
    let group = -(child.id() as i32);
    let descendants = descendants(child.id());
    let signal_all = |signal| {
        // SAFETY: kill(2) on our own child's group and its descendants.
        unsafe {
            libc::kill(group, signal);
            for &pid in &descendants {
                libc::kill(pid as i32, signal);
            }
        }
    };
    signal_all(stop.signal);
    let deadline = Instant::now() + stop.grace;
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The rest too, whatever the leader did.
    signal_all(libc::SIGKILL);
    let _ = child.wait();
}

/// Every process below `pid`, from each process's parent in /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // After the command's closing parenthesis: state, then parent.
            let parent = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((child, parent))
        })
        .collect();
    let mut found = vec![pid];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            parents
                .iter()
                .filter(|(_, of)| *of == parent)
                .map(|(child, _)| *child),
        );
        index += 1;
    }
    found.split_off(1)
}

/// A free port on 127.0.0.1 (free when asked).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// The HTTP status `url` answers with (curl, any status), if it answers.
pub fn http_status(url: &str, curl_options: &[&str]) -> Option<u16> {
    output(
        Command::new("curl")
            .args([
                "-s",
                "--max-time",
                "5",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
            ])
            .args(curl_options)
            .arg(url),
    )
    .ok()
    .and_then(|code| code.parse().ok())
    .filter(|&code| code != 0)
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

/// Waits until `url` answers `wanted` (any status when `None`); fails when
/// `process` ends first or after `timeout`.
pub fn wait_for(
    url: &str,
    wanted: Option<u16>,
    process: &Started,
    timeout: Duration,
    curl_options: &[&str],
) -> Result {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < deadline {
        last = http_status(url, curl_options);
        if last.is_some() && (wanted.is_none() || last == wanted) {
            return Ok(());
        }
        if !process.is_running() {
            return Err(format!("{} exited before {url} answered", process.name).into());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(format!(
        "{url} did not answer {} within {timeout:?} (last status: {last:?})",
        wanted.map_or("at all".to_owned(), |status| status.to_string())
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: u32) -> bool {
        // A zombie has ended: only its parent has not reaped it yet.
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
    }

    #[test]
    fn a_scope_cleans_up_what_its_own_thread_registered_only() {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let record = |what: &'static str| {
            let ran = ran.clone();
            move || ran.lock().unwrap().push(what)
        };
        {
            let _scope = Scope::new();
            on_exit(record("mine"));
            let theirs = record("theirs");
            std::thread::spawn(move || on_exit(theirs)).join().unwrap();
        }
        assert_eq!(*ran.lock().unwrap(), ["mine"]);
    }

    #[test]
    fn the_end_of_a_scope_stops_what_it_started_and_what_that_started_in_another_session() {
        let pid_file = std::env::temp_dir().join(format!("xtask-scope-{}", std::process::id()));
        let (leader, escaped) = {
            let _scope = Scope::new();
            let started = start(
                "a shell",
                Command::new("sh").arg("-c").arg(format!(
                    "setsid sleep 600 & echo $! > {}; sleep 600",
                    pid_file.display()
                )),
                Stop::terminate(Duration::from_secs(5)),
            )
            .unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            let escaped = loop {
                if let Some(pid) = std::fs::read_to_string(&pid_file)
                    .ok()
                    .and_then(|text| text.trim().parse::<u32>().ok())
                {
                    break pid;
                }
                assert!(Instant::now() < deadline, "the shell wrote no pid");
                std::thread::sleep(Duration::from_millis(20));
            };
            assert!(started.is_running() && alive(escaped));
            (started, escaped)
        };
        assert!(!leader.is_running(), "the leader still runs");
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(escaped) {
            assert!(
                Instant::now() < deadline,
                "the process in its own session still runs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(pid_file);
    }
}
