//! Where the tests' DynamoDB Local is. `cargo xtask test` starts one and sets
//! `AWS_ENDPOINT_URL_DYNAMODB`; under plain `cargo test` nothing is set, and
//! the first test that needs the store starts one for this test binary (in
//! memory, on a free port of 127.0.0.1) as `cargo xtask dev` does
//! ([`xtask::dynamodb_local`]), installed into `.tools/` on first use. It is this binary's child
//! and the kernel ends it when the binary exits (`PR_SET_PDEATHSIG`), also
//! on a panic or Ctrl-C, so nothing is left behind.

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long DynamoDB Local may take to answer, its first installation
/// included.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// DynamoDB Local's URL: the one `scripts/test` started, else this binary's.
pub fn url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
            .ok()
            .filter(|url| !url.is_empty())
            .unwrap_or_else(start)
    })
}

fn start() -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port on 127.0.0.1")
        .port();
    let log = xtask::root()
        .join("target")
        .join(format!("dynamodb-local-{port}.log"));
    // The death signal follows the thread that spawned the child, so a
    // thread that lives as long as the process spawns it.
    let (started, exited) = mpsc::channel();
    let mut command = xtask::dynamodb_local::command(port, None)
        .unwrap_or_else(|error| panic!("cannot start DynamoDB Local: {error}"));
    let log_file = std::fs::File::create(&log).expect("the log file");
    std::thread::spawn(move || {
        command
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
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
        let mut child = command.spawn().expect("java runs DynamoDB Local");
        let status = child.wait();
        let _ = started.send(status);
        loop {
            std::thread::park();
        }
    });
    let deadline = Instant::now() + START_TIMEOUT;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        let log = || std::fs::read_to_string(&log).unwrap_or_default();
        if let Ok(status) = exited.try_recv() {
            panic!("DynamoDB Local exited ({status:?}):\n{}", log());
        }
        assert!(
            Instant::now() < deadline,
            "DynamoDB Local did not listen on 127.0.0.1:{port} within {START_TIMEOUT:?}:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    format!("http://127.0.0.1:{port}")
}
