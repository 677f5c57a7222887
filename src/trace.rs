//! AWS X-Ray subsegments for the work of each invocation, sent to the X-Ray
//! daemon that Lambda runs (`AWS_XRAY_DAEMON_ADDRESS`) the way the X-Ray
//! SDKs send them: one UDP datagram per document, the header line
//! `{"format": "json", "version": 1}` and then a segment document of X-Ray's
//! published schema.
//!
//! Every document of an invocation is rooted at that invocation's own trace
//! header, the `Lambda-Runtime-Trace-Id` the Runtime API handed out with
//! the event (`Context::xray_trace_id`): never the process-wide
//! `_X_AMZN_TRACE_ID`, which belongs to whichever invocation set it last
//! when several run at once (Lambda Managed Instances). The invocation and
//! the subsegment that is open travel with the request's future as a tokio
//! task-local ([`Scope`]), so the store's interceptor and the key fetch find
//! their parent without being handed it.
//!
//! Recording never delays a request. An open subsegment is a few fields in
//! memory; the documents go out when the answer is ready, each with one
//! non-blocking `send` on a UDP socket, which never waits for the daemon and
//! whose failure (no daemon, a full buffer) is ignored. An unsampled
//! invocation (`Sampled=0`), or no daemon, records nothing; its calls still
//! pass its trace header on.

use std::borrow::Cow;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::task::futures::TaskLocalFuture;

/// What precedes every document sent to the daemon.
const DOCUMENT_HEADER: &str = "{\"format\": \"json\", \"version\": 1}\n";
/// The name of the subsegment that holds an invocation's work.
const HANDLER: &str = "## handler";
/// The name of the subsegment that holds the work of init, sent with the
/// first invocation's trace (the one Lambda's Initialization belongs to).
const INIT: &str = "## init";

/// Lambda's trace header for one invocation:
/// `Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1`
/// (other keys, such as `Lineage`, are passed over).
#[derive(Debug, Clone, PartialEq, Eq)]
struct TraceHeader {
    /// The trace id: `1-`, eight hex digits of time, `-`, 24 hex digits.
    root: String,
    /// The id of the segment Lambda recorded this invocation under.
    parent: String,
    sampled: bool,
}

impl TraceHeader {
    /// The header's value, if it names a well-formed trace and parent.
    fn parse(value: &str) -> Option<Self> {
        let (mut root, mut parent, mut sampled) = (None, None, false);
        for field in value.split(';') {
            match field.trim().split_once('=') {
                Some(("Root", value)) => root = Some(value),
                Some(("Parent", value)) => parent = Some(value),
                Some(("Sampled", value)) => sampled = value == "1",
                _ => {}
            }
        }
        let root = root.filter(|root| is_trace_id(root))?;
        let parent = parent.filter(|parent| is_id(parent))?;
        Some(Self {
            root: root.to_owned(),
            parent: parent.to_owned(),
            sampled,
        })
    }

    /// The header a call made from within `parent` carries downstream
    /// (`X-Amzn-Trace-Id`), as the X-Ray SDKs pass it on.
    fn downstream(&self, parent: &str) -> String {
        format!(
            "Root={};Parent={parent};Sampled={}",
            self.root,
            u8::from(self.sampled)
        )
    }
}

/// `1-` + 8 hex digits + `-` + 24 hex digits.
fn is_trace_id(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    matches!(parts.as_slice(), ["1", time, random]
        if is_hex(time, 8) && is_hex(random, 24))
}

/// 16 hex digits: a segment's or subsegment's id.
fn is_id(value: &str) -> bool {
    is_hex(value, 16)
}

fn is_hex(value: &str, digits: usize) -> bool {
    value.len() == digits && value.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// A new subsegment id: 64 random bits, in hex.
fn new_id() -> String {
    format!("{:016x}", fastrand::u64(..))
}

/// Seconds since the Unix epoch, as X-Ray's `start_time` and `end_time`.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64())
}

/// How a piece of work ended, in X-Ray's terms: `error` for a client's
/// fault (4xx), `throttle` (429, or a service's throttling) beside it, and
/// `fault` for a server's (5xx, a timeout, no answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Error,
    Throttle,
    Fault,
}

impl Outcome {
    pub(crate) fn of_status(status: u16) -> Self {
        match status {
            429 => Self::Throttle,
            400..=499 => Self::Error,
            500.. => Self::Fault,
            _ => Self::Ok,
        }
    }
}

/// What a traced piece of work returned, as an [`Outcome`].
pub(crate) trait Classify {
    fn outcome(&self) -> Outcome;
}

impl Classify for () {
    fn outcome(&self) -> Outcome {
        Outcome::Ok
    }
}

impl<T, E: Classify> Classify for Result<T, E> {
    fn outcome(&self) -> Outcome {
        match self {
            Ok(_) => Outcome::Ok,
            Err(error) => error.outcome(),
        }
    }
}

/// An AWS call, as the X-Ray SDKs describe one (`aws`).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct AwsCall {
    pub(crate) operation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) table_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) request_id: Option<String>,
    /// Attempts after the first.
    pub(crate) retries: u32,
}

/// An HTTP exchange (`http`): what was asked, and the status answered.
#[derive(Debug, Clone, Default, Serialize)]
struct HttpCall {
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<HttpRequest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<HttpResponse>,
}

#[derive(Debug, Clone, Serialize)]
struct HttpRequest {
    method: String,
    url: String,
}

#[derive(Debug, Clone, Serialize)]
struct HttpResponse {
    status: u16,
}

/// One subsegment. A document's root also carries `type`, `trace_id` and
/// `parent_id`; the others are nested in their parent's `subsegments`.
#[derive(Debug, Serialize)]
struct Subsegment {
    name: Cow<'static, str>,
    id: String,
    start_time: f64,
    end_time: f64,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aws: Option<AwsCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http: Option<HttpCall>,
    #[serde(skip_serializing_if = "is_false")]
    error: bool,
    #[serde(skip_serializing_if = "is_false")]
    throttle: bool,
    #[serde(skip_serializing_if = "is_false")]
    fault: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    subsegments: Vec<Subsegment>,
    /// The enclosing subsegment's id; `None` at the top of the invocation
    /// (its parent is then the invocation's own `Parent`).
    #[serde(skip)]
    parent: Option<String>,
}

fn is_false(flag: &bool) -> bool {
    !flag
}

impl Subsegment {
    fn open(name: Cow<'static, str>, parent: Option<String>) -> Self {
        Self {
            name,
            id: new_id(),
            start_time: now(),
            end_time: 0.0,
            kind: None,
            trace_id: None,
            parent_id: None,
            namespace: None,
            aws: None,
            http: None,
            error: false,
            throttle: false,
            fault: false,
            subsegments: Vec::new(),
            parent,
        }
    }

    fn close(&mut self, outcome: Outcome) {
        self.end_time = now();
        self.error = matches!(outcome, Outcome::Error | Outcome::Throttle);
        self.throttle = outcome == Outcome::Throttle;
        self.fault = outcome == Outcome::Fault;
    }
}

/// The subsegments one invocation (or init) has finished so far.
#[derive(Debug, Default)]
struct Recording(Mutex<Vec<Subsegment>>);

impl Recording {
    fn push(&self, subsegment: Subsegment) {
        self.lock().push(subsegment);
    }

    fn take(&self) -> Vec<Subsegment> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Subsegment>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where work is traced now: the invocation's header, its recording (none
/// when unsampled) and the open subsegment new ones go under. The default:
/// nothing is traced.
#[derive(Debug, Clone, Default)]
struct Scope {
    header: Option<Arc<TraceHeader>>,
    recording: Option<Arc<Recording>>,
    parent: Option<String>,
}

tokio::task_local! {
    static CURRENT: Scope;
}

/// A subsegment being timed. Ended with [`Span::end`]; dropped before
/// that (its work was cancelled, at the request's deadline), it is
/// recorded as a fault.
#[derive(Debug)]
pub(crate) struct Span {
    scope: Option<Scope>,
    open: Option<Subsegment>,
}

impl Span {
    /// A subsegment named `name` under the one open now; inert where
    /// nothing is recorded.
    pub(crate) fn start(name: impl Into<Cow<'static, str>>) -> Self {
        let scope = CURRENT.try_with(Scope::clone).ok();
        let open = scope
            .as_ref()
            .filter(|scope| scope.recording.is_some())
            .map(|scope| Subsegment::open(name.into(), scope.parent.clone()));
        Self { scope, open }
    }

    /// The trace header for a call made within this subsegment, if the
    /// invocation has one: its `Parent` is this subsegment when recorded.
    pub(crate) fn downstream_header(&self) -> Option<String> {
        let scope = self.scope.as_ref()?;
        let header = scope.header.as_ref()?;
        let parent = match (&self.open, &scope.parent) {
            (Some(open), _) => &open.id,
            (None, Some(parent)) => parent,
            (None, None) => &header.parent,
        };
        Some(header.downstream(parent))
    }

    /// Marks the subsegment as an AWS call, described by `call` (only
    /// when it is recorded).
    pub(crate) fn aws(&mut self, call: impl FnOnce() -> AwsCall) {
        if let Some(open) = &mut self.open {
            open.namespace = Some("aws");
            open.aws = Some(call());
        }
    }

    /// Updates the AWS call this subsegment records.
    pub(crate) fn update_aws(&mut self, update: impl FnOnce(&mut AwsCall)) {
        if let Some(call) = self.open.as_mut().and_then(|open| open.aws.as_mut()) {
            update(call);
        }
    }

    /// Marks the subsegment as a call to another service (`remote`).
    pub(crate) fn remote(&mut self, method: &str, url: &str) {
        if let Some(open) = &mut self.open {
            open.namespace = Some("remote");
            self.http_request(method, url);
        }
    }

    /// The HTTP request this subsegment answered or made.
    fn http_request(&mut self, method: &str, url: &str) {
        if let Some(open) = &mut self.open {
            open.http.get_or_insert_default().request = Some(HttpRequest {
                method: method.to_owned(),
                url: url.to_owned(),
            });
        }
    }

    /// The HTTP status answered.
    pub(crate) fn http_status(&mut self, status: u16) {
        if let Some(open) = &mut self.open {
            open.http.get_or_insert_default().response = Some(HttpResponse { status });
        }
    }

    /// The scope of work done inside this subsegment.
    fn inner_scope(&self) -> Scope {
        let mut scope = self.scope.clone().unwrap_or_default();
        if let Some(open) = &self.open {
            scope.parent = Some(open.id.clone());
        }
        scope
    }

    pub(crate) fn end(mut self, outcome: Outcome) {
        self.finish(outcome);
    }

    fn finish(&mut self, outcome: Outcome) {
        let recording = self
            .scope
            .as_ref()
            .and_then(|scope| scope.recording.as_ref());
        if let (Some(mut open), Some(recording)) = (self.open.take(), recording) {
            open.close(outcome);
            recording.push(open);
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.finish(Outcome::Fault);
    }
}

/// Runs `work` as a subsegment named `name` of the one open now; its
/// outcome is what `work` returns.
pub(crate) fn in_subsegment<F>(name: &'static str, work: F) -> impl Future<Output = F::Output>
where
    F: Future<Output: Classify>,
{
    let span = Span::start(name);
    InSubsegment {
        work: CURRENT.scope(span.inner_scope(), work),
        span: Some(span),
    }
}

pin_project_lite::pin_project! {
    /// Work in its subsegment: written out rather than an `async` block,
    /// which would hold the work twice (before and while it runs), and the
    /// handler's futures nest several of these.
    struct InSubsegment<F: Future> {
        #[pin]
        work: TaskLocalFuture<Scope, F>,
        span: Option<Span>,
    }
}

impl<F: Future<Output: Classify>> Future for InSubsegment<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let output = ready!(this.work.poll(context));
        if let Some(span) = this.span.take() {
            span.end(output.outcome());
        }
        Poll::Ready(output)
    }
}

/// Runs `work`, which calls nothing, as a subsegment named `name`.
pub(crate) fn record<T: Classify>(name: &'static str, work: impl FnOnce() -> T) -> T {
    let span = Span::start(name);
    let output = work();
    span.end(output.outcome());
    output
}

/// Where the documents go: the daemon's UDP address, or nowhere.
#[derive(Clone, Default)]
pub struct Tracer {
    daemon: Option<Arc<UdpSocket>>,
    /// The work of init, until the first invocation takes it.
    init: Arc<Recording>,
}

impl Tracer {
    /// Sends to the daemon at `address` (`AWS_XRAY_DAEMON_ADDRESS`: `ip:port`,
    /// or `udp:ip:port tcp:ip:port`); unset, or not an address, nothing is
    /// recorded. A trace is never a reason not to start.
    pub fn new(address: Option<&str>) -> Self {
        let daemon = address.and_then(|address| match connect(address) {
            Some(socket) => Some(Arc::new(socket)),
            None => {
                tracing::warn!(address, "not an X-Ray daemon address; tracing is off");
                None
            }
        });
        Self {
            daemon,
            init: Arc::default(),
        }
    }

    /// Runs the function's init `work` as a subsegment, `## init`, sent with
    /// the first invocation's trace if that one is sampled.
    pub async fn init(&self, work: impl Future<Output = ()>) {
        let scope = Scope {
            recording: self.daemon.as_ref().map(|_| self.init.clone()),
            ..Scope::default()
        };
        CURRENT
            .sync_scope(scope, || in_subsegment(INIT, work))
            .await
    }

    /// Starts tracing one invocation under its trace header, as the
    /// Runtime API gave it.
    pub fn invocation(&self, header: Option<&str>) -> Invocation {
        let header = header.and_then(TraceHeader::parse).map(Arc::new);
        let sampled = header.as_ref().is_some_and(|header| header.sampled);
        let daemon = self.daemon.clone().filter(|_| sampled);
        // Only the first invocation's trace includes init, sampled or not.
        let init = self.init.take();
        let recording = daemon
            .as_ref()
            .map(|_| Arc::new(Recording(Mutex::new(init))));
        let scope = Scope {
            header,
            recording,
            parent: None,
        };
        let handler = CURRENT.sync_scope(scope, || Span::start(HANDLER));
        Invocation { daemon, handler }
    }
}

/// A socket that sends to the daemon's UDP address, without blocking.
fn connect(address: &str) -> Option<UdpSocket> {
    let udp = address
        .split_whitespace()
        .find_map(|part| part.strip_prefix("udp:"))
        .unwrap_or(address);
    let daemon: SocketAddr = udp.parse().ok()?;
    let local: SocketAddr = match daemon {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(local).ok()?;
    socket.connect(daemon).ok()?;
    socket.set_nonblocking(true).ok()?;
    Some(socket)
}

/// One invocation being traced: its `## handler` subsegment, open.
pub struct Invocation {
    daemon: Option<Arc<UdpSocket>>,
    handler: Span,
}

impl Invocation {
    /// The invocation's trace id, for its log lines.
    pub fn trace_id(&self) -> Option<&str> {
        let scope = self.handler.scope.as_ref()?;
        scope.header.as_deref().map(|header| header.root.as_str())
    }

    /// `work` within the invocation's `## handler` subsegment.
    pub fn run<F: Future>(&self, work: F) -> impl Future<Output = F::Output> {
        CURRENT.scope(self.handler.inner_scope(), work)
    }

    /// Ends the invocation, which answered `request` with `status`, and
    /// sends its documents.
    pub fn finish(mut self, request: Option<(&str, &str)>, status: u16) {
        if let Some((method, url)) = request {
            self.handler.http_request(method, url);
        }
        self.handler.http_status(status);
        let Some(scope) = self.handler.scope.clone() else {
            return;
        };
        self.handler.finish(Outcome::of_status(status));
        if let (Some(daemon), Some(header), Some(recording)) =
            (&self.daemon, &scope.header, &scope.recording)
        {
            for document in documents(recording.take(), header) {
                let mut datagram = DOCUMENT_HEADER.as_bytes().to_vec();
                if serde_json::to_writer(&mut datagram, &document).is_ok() {
                    // Fire and forget: never waits, and a lost document
                    // changes nothing for the request.
                    let _ = daemon.send(&datagram);
                }
            }
        }
    }
}

/// The finished subsegments as documents: each one with no parent in the
/// invocation becomes a document of its own under the invocation's
/// `Parent`, holding its descendants.
fn documents(mut finished: Vec<Subsegment>, header: &TraceHeader) -> Vec<Subsegment> {
    // Children finish before their parents: attach each to its parent when
    // the parent is still in the list, latest first.
    let mut roots = Vec::new();
    while let Some(mut subsegment) = finished.pop() {
        subsegment.subsegments = adopt(&mut finished, &subsegment.id);
        roots.push(subsegment);
    }
    for root in &mut roots {
        root.kind = Some("subsegment");
        root.trace_id = Some(header.root.clone());
        root.parent_id = Some(header.parent.clone());
    }
    roots
}

/// Removes from `finished` the subsegments whose parent is `id`, with
/// their own descendants, in the order they started.
fn adopt(finished: &mut Vec<Subsegment>, id: &str) -> Vec<Subsegment> {
    let mut children = Vec::new();
    let mut index = 0;
    while index < finished.len() {
        if finished[index].parent.as_deref() == Some(id) {
            children.push(finished.remove(index));
        } else {
            index += 1;
        }
    }
    for child in &mut children {
        child.subsegments = adopt(finished, &child.id);
    }
    children.sort_by(|a, b| a.start_time.total_cmp(&b.start_time));
    children
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_header_is_read_whatever_its_order_and_extra_keys() {
        let header = TraceHeader::parse(
            "Sampled=1;Root=1-5759e988-bd862e3fe1be46a994272793;Lineage=a87bd80c:0;Parent=53995c3f42cd8ad8",
        )
        .unwrap();
        assert_eq!(header.root, "1-5759e988-bd862e3fe1be46a994272793");
        assert_eq!(header.parent, "53995c3f42cd8ad8");
        assert!(header.sampled);
        assert_eq!(
            header.downstream("0123456789abcdef"),
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0123456789abcdef;Sampled=1"
        );
        for refused in [
            "",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1",
            "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
            "Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad\"",
        ] {
            assert_eq!(TraceHeader::parse(refused), None, "{refused}");
        }
        let unsampled =
            TraceHeader::parse("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8")
                .unwrap();
        assert!(!unsampled.sampled);
    }

    #[test]
    fn statuses_become_xray_outcomes() {
        assert_eq!(Outcome::of_status(200), Outcome::Ok);
        assert_eq!(Outcome::of_status(409), Outcome::Error);
        assert_eq!(Outcome::of_status(429), Outcome::Throttle);
        assert_eq!(Outcome::of_status(503), Outcome::Fault);
    }

    #[test]
    fn the_daemon_address_may_name_both_protocols() {
        assert!(connect("127.0.0.1:2000").is_some());
        assert!(connect("tcp:127.0.0.1:2000 udp:127.0.0.1:2001").is_some());
        assert!(connect("[::1]:2000").is_some());
        assert!(connect("xray.local:2000").is_none(), "no name lookups");
        assert!(connect("").is_none());
    }
}
