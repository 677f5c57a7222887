//! A proxy between the AWS SDK and DynamoDB Local: each request's fault
//! from a plan (a reset at the socket), and every call recorded ([`Call`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinHandle;

use crate::http_server::{Reply, body_bytes, listen, respond, serve};

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
    /// DynamoDB failing on its side (HTTP 500, InternalServerError).
    ServerError,
    /// A multi-Region strongly consistent table's answer to a write that
    /// another Region's write to the same item beat (HTTP 400,
    /// ReplicatedWriteConflictException, nothing applied), to a call of
    /// this operation; any other passes through.
    Conflict(&'static str),
}

/// The calls that passed through, in order.
type Calls = Arc<Mutex<Vec<Call>>>;

pub struct FaultProxy {
    pub url: String,
    requests: Arc<AtomicUsize>,
    calls: Calls,
    task: JoinHandle<()>,
}

/// A DynamoDB call that passed through to DynamoDB Local.
#[derive(Debug, Clone)]
pub struct Call {
    /// The operation (`PutItem`, `Query`, ...), from `X-Amz-Target`.
    pub operation: String,
    /// The request's JSON body.
    pub request: serde_json::Value,
    /// The response's JSON body.
    pub response: serde_json::Value,
    /// The request's `X-Amzn-Trace-Id`, if it had one.
    pub trace_header: Option<String>,
}

impl FaultProxy {
    /// `first` faults in order, then `then` for every later request.
    pub async fn start(dynamodb_url: &str, first: &[Fault], then: Fault) -> Self {
        let (listener, address) = listen().await;
        // The faults still to come first, then the one for every later request.
        let plan = Arc::new(Mutex::new((first.iter().copied().collect::<VecDeque<_>>(), then)));
        let requests = Arc::new(AtomicUsize::new(0));
        let upstream = Upstream {
            url: dynamodb_url.trim_end_matches('/').to_owned(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        };
        let calls = Arc::new(Mutex::new(Vec::new()));
        let task = serve(listener, {
            let (requests, calls) = (requests.clone(), calls.clone());
            move |request| {
                requests.fetch_add(1, Ordering::SeqCst);
                let mut plan = plan.lock().unwrap();
                let fault = plan.0.pop_front().unwrap_or(plan.1);
                answer(fault, upstream.clone(), calls.clone(), request)
            }
        });
        Self { url: format!("http://{address}"), requests, calls, task }
    }

    /// How many calls have passed through so far.
    pub fn call_count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    /// The calls that passed through after the first `count`.
    pub fn calls_since(&self, count: usize) -> Vec<Call> {
        let calls = self.calls.lock().unwrap();
        calls.get(count..).unwrap_or_default().to_vec()
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

#[derive(Clone)]
struct Upstream {
    url: String,
    client: Client<HttpConnector, Full<bytes::Bytes>>,
}

async fn answer(
    fault: Fault,
    upstream: Upstream,
    calls: Calls,
    request: Request<Incoming>,
) -> Reply {
    match fault {
        Fault::PassThrough => forward(&upstream, &calls, request).await,
        Fault::Throttle => error_response(StatusCode::BAD_REQUEST, THROTTLED),
        Fault::UnexpectedError => error_response(StatusCode::BAD_REQUEST, UNEXPECTED),
        Fault::ServerError => error_response(StatusCode::INTERNAL_SERVER_ERROR, SERVER_ERROR),
        Fault::Conflict(operation) if operation_of(request.headers()) == operation => {
            error_response(StatusCode::BAD_REQUEST, CONFLICT)
        }
        Fault::Conflict(_) => forward(&upstream, &calls, request).await,
        // Never answer; the client gives up and closes the connection.
        Fault::Hang => std::future::pending().await,
        Fault::Reset => Reply::Reset,
    }
}

const THROTTLED: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}"#;
const UNEXPECTED: &str = r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"Injected unexpected error"}"#;
const CONFLICT: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ReplicatedWriteConflictException","message":"Transaction is ongoing for the item"}"#;
const SERVER_ERROR: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}"#;

fn error_response(status: StatusCode, body: &'static str) -> Reply {
    let headers = [
        ("content-type", "application/x-amz-json-1.0".to_owned()),
        ("x-amzn-requestid", "fault-proxy".to_owned()),
    ];
    Reply::Respond(respond(status, &headers, body))
}

/// The operation a request calls (`PutItem`, `Query`...), from `X-Amz-Target`.
fn operation_of(headers: &hyper::HeaderMap) -> &str {
    let target = headers.get("x-amz-target").and_then(|target| target.to_str().ok());
    target.and_then(|target| target.rsplit('.').next()).unwrap_or_default()
}

/// The request sent on to DynamoDB Local, and its answer back; a failure to
/// reach it resets the client's connection, as a broken path would.
async fn forward(upstream: &Upstream, calls: &Calls, request: Request<Incoming>) -> Reply {
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    parts.uri = format!("{}{path}", upstream.url).parse().unwrap();
    let operation = operation_of(&parts.headers).to_owned();
    let trace_header = parts
        .headers
        .get("x-amzn-trace-id")
        .and_then(|header| header.to_str().ok())
        .map(str::to_owned);
    let sent = body_bytes(body).await;
    let request_json = serde_json::from_slice(&sent).unwrap_or_default();
    let request = Request::from_parts(parts, Full::new(sent));
    let Ok(response) = upstream.client.request(request).await else { return Reply::Reset };
    let (parts, body) = response.into_parts();
    let Ok(body) = body.collect().await else { return Reply::Reset };
    let body = body.to_bytes();
    calls.lock().unwrap().push(Call {
        operation,
        request: request_json,
        response: serde_json::from_slice(&body).unwrap_or_default(),
        trace_header,
    });
    Reply::Respond(hyper::Response::from_parts(parts, Full::new(body).boxed()))
}
