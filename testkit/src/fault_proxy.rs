//! A fault-injecting HTTP proxy on 127.0.0.1 between the AWS SDK and
//! DynamoDB Local. Each request takes the next fault of its plan (then the
//! plan's last fault, forever); the production client, retries and timeouts
//! are untouched, only their endpoint points here.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward to DynamoDB Local.
    PassThrough,
    /// DynamoDB's throttling error (HTTP 400, ProvisionedThroughputExceededException).
    Throttle,
    /// Read the request and never answer.
    Hang,
    /// Close the connection with a TCP reset instead of answering.
    Reset,
    /// An error the service does not expect (HTTP 400, ValidationException).
    UnexpectedError,
}

pub struct FaultProxy {
    pub url: String,
    requests: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

struct Plan {
    first: VecDeque<Fault>,
    then: Fault,
}

impl FaultProxy {
    /// `first` faults in order, then `then` for every later request.
    pub async fn start(dynamodb_url: &str, first: &[Fault], then: Fault) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let upstream = dynamodb_url.trim_start_matches("http://").to_owned();
        let plan = Arc::new(Mutex::new(Plan {
            first: first.iter().copied().collect(),
            then,
        }));
        let requests = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(accept(listener, upstream, plan, requests.clone()));
        Self {
            url,
            requests,
            task,
        }
    }

    /// How many requests reached the proxy: the SDK's attempts.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(
    listener: TcpListener,
    upstream: String,
    plan: Arc<Mutex<Plan>>,
    requests: Arc<AtomicUsize>,
) {
    while let Ok((client, _)) = listener.accept().await {
        tokio::spawn(serve(
            client,
            upstream.clone(),
            plan.clone(),
            requests.clone(),
        ));
    }
}

/// Serves the requests of one client connection (the SDK keeps connections alive).
async fn serve(
    mut client: TcpStream,
    upstream: String,
    plan: Arc<Mutex<Plan>>,
    requests: Arc<AtomicUsize>,
) {
    let mut buffer = Vec::new();
    while let Some(request) = read_request(&mut client, &mut buffer).await {
        requests.fetch_add(1, Ordering::SeqCst);
        let fault = {
            let mut plan = plan.lock().unwrap();
            let then = plan.then;
            plan.first.pop_front().unwrap_or(then)
        };
        let answer = match fault {
            Fault::PassThrough => forward(&upstream, &request).await,
            Fault::Throttle => Some(error_response(THROTTLED)),
            Fault::UnexpectedError => Some(error_response(UNEXPECTED)),
            Fault::Hang => {
                // Wait until the client gives up and closes the connection.
                let mut sink = [0u8; 1024];
                while matches!(client.read(&mut sink).await, Ok(read) if read > 0) {}
                return;
            }
            Fault::Reset => {
                // A zero linger makes the close a TCP reset (and never blocks).
                #[allow(deprecated)]
                let _ = client.set_linger(Some(Duration::ZERO));
                return;
            }
        };
        match answer {
            Some(answer) if client.write_all(&answer).await.is_ok() => {}
            _ => return,
        }
    }
}

const THROTTLED: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}"#;
const UNEXPECTED: &str = r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"Injected unexpected error"}"#;

fn error_response(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.0\r\nx-amzn-requestid: fault-proxy\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One whole request (head and Content-Length body) from the connection, or
/// `None` when the client closed it.
async fn read_request(client: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(head_end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            let total = head_end + 4 + length;
            if buffer.len() >= total {
                return Some(buffer.drain(..total).collect());
            }
        }
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
}

/// Sends the request to DynamoDB Local on a fresh connection that it closes
/// after answering (so the response ends at EOF), and returns the response.
async fn forward(upstream: &str, request: &[u8]) -> Option<Vec<u8>> {
    let mut connection = TcpStream::connect(upstream).await.ok()?;
    let rewritten = with_connection_header(request, Some("close"))?;
    connection.write_all(&rewritten).await.ok()?;
    let mut response = Vec::new();
    connection.read_to_end(&mut response).await.ok()?;
    // Keep the client's connection usable: drop the upstream's close.
    with_connection_header(&response, None)
}

/// The message with its `Connection` header replaced (or removed).
fn with_connection_header(message: &[u8], connection: Option<&str>) -> Option<Vec<u8>> {
    let head_end = message
        .windows(4)
        .position(|window| window == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&message[..head_end]).ok()?;
    let mut lines: Vec<String> = head
        .split("\r\n")
        .filter(|line| !line.to_ascii_lowercase().starts_with("connection:"))
        .map(str::to_owned)
        .collect();
    if let Some(value) = connection {
        lines.push(format!("connection: {value}"));
    }
    let mut out = lines.join("\r\n").into_bytes();
    out.extend_from_slice(&message[head_end..]);
    Some(out)
}
