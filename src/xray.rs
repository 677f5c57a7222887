//! AWS X-Ray from the function's own `tracing` spans: a
//! `tracing_subscriber` layer ([`XRay`]) turns the spans of target
//! [`TARGET`] into subsegments and sends them to the X-Ray daemon that Lambda
//! runs (`AWS_XRAY_DAEMON_ADDRESS`) the way the X-Ray SDKs send them: one
//! UDP datagram per document, the header line
//! `{"format": "json", "version": 1}` and then a segment document of X-Ray's
//! published schema.
//!
//! The spans: `## handler` (an invocation; its field `xray.trace_header` is
//! the `Lambda-Runtime-Trace-Id` the Runtime API handed out with the event,
//! never the process-wide `_X_AMZN_TRACE_ID`, which belongs to whichever
//! invocation set it last when several run at once), `## init`, and every
//! span opened within them: the handler's steps, each DynamoDB call, each
//! key fetch. A span's subsegment is its name (or `xray.name`) and what
//! these fields say:
//! - `http.method`, `http.url`, `http.status`: the HTTP exchange;
//! - `aws.operation`, `aws.table_name`, `aws.request_id`, `aws.retries`,
//!   and `xray.namespace`: an AWS call, as the X-Ray SDKs record one;
//! - `xray.status`: the status the step's answer would have; `xray.outcome`:
//!   `ok`, `throttle` or `fault`, where no status tells. A span that closes
//!   with neither, nor `http.status`, was cut short: a fault.
//!
//! Recording never delays a request: a subsegment is a few fields in the
//! span's extensions; an invocation's documents go out when its `## handler`
//! closes, each with one non-blocking `send` on a UDP socket whose failure
//! (no daemon, a full buffer) is ignored. An unsampled invocation
//! (`Sampled=0`) records nothing; its calls still pass its trace header on
//! ([`downstream_header`]). Without a daemon the layer is not installed
//! (`crate::log`), so no span of this target is ever created.

use std::borrow::Cow;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Span, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, Registry};

use crate::response::Class;

/// The target of the spans that become subsegments.
pub const TARGET: &str = "xray";
/// The span of an invocation's work.
pub const HANDLER: &str = "## handler";
/// The span of init's work, sent with the first invocation's trace (the one
/// Lambda's Initialization belongs to).
pub const INIT: &str = "## init";
/// What precedes every document sent to the daemon.
const DOCUMENT_HEADER: &str = "{\"format\": \"json\", \"version\": 1}\n";

/// Lambda's trace header for one invocation:
/// `Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1`
/// (other keys, such as `Lineage`, are passed over).
#[derive(Debug, Clone, PartialEq, Eq)]
struct TraceHeader<'a> {
    /// The trace id: `1-`, eight hex digits of time, `-`, 24 hex digits.
    root: &'a str,
    /// The id of the segment Lambda recorded this invocation under.
    parent: &'a str,
    sampled: bool,
}

impl<'a> TraceHeader<'a> {
    /// The header's value, if it names a well-formed trace and parent.
    fn parse(value: &'a str) -> Option<Self> {
        let (mut root, mut parent, mut sampled) = (None, None, false);
        for field in value.split(';') {
            match field.trim().split_once('=') {
                Some(("Root", value)) => root = Some(value),
                Some(("Parent", value)) => parent = Some(value),
                Some(("Sampled", value)) => sampled = value == "1",
                _ => {}
            }
        }
        Some(Self {
            root: root.filter(|root| is_trace_id(root))?,
            parent: parent.filter(|parent| is_id(parent))?,
            sampled,
        })
    }
}

/// The trace id of an invocation's trace header, for its log lines.
pub fn trace_id(header: &str) -> Option<&str> {
    TraceHeader::parse(header).map(|header| header.root)
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
enum Outcome {
    Ok,
    Error,
    Throttle,
    Fault,
}

impl Outcome {
    fn of_status(status: u64) -> Self {
        match Class::of(u16::try_from(status).unwrap_or(u16::MAX)) {
            Class::Success => Self::Ok,
            Class::ClientError => Self::Error,
            Class::Throttled => Self::Throttle,
            Class::ServerError => Self::Fault,
        }
    }
}

/// An AWS call, as the X-Ray SDKs describe one (`aws`).
#[derive(Debug, Default, Serialize)]
struct AwsCall {
    #[serde(skip_serializing_if = "Option::is_none")]
    operation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
    /// Attempts after the first.
    retries: u64,
}

/// An HTTP exchange (`http`): what was asked, and the status answered.
#[derive(Debug, Default, Serialize)]
struct HttpCall {
    #[serde(skip_serializing_if = "Option::is_none")]
    request: Option<HttpRequest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<HttpResponse>,
}

#[derive(Debug, Default, Serialize)]
struct HttpRequest {
    method: String,
    url: String,
}

#[derive(Debug, Serialize)]
struct HttpResponse {
    status: u64,
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
    namespace: Option<String>,
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
    /// How it ended, as far as its fields have said.
    #[serde(skip)]
    outcome: Option<Outcome>,
}

fn is_false(flag: &bool) -> bool {
    !flag
}

impl Subsegment {
    fn open(name: &'static str, parent: Option<String>) -> Self {
        Self {
            name: Cow::Borrowed(name),
            id: format!("{:016x}", fastrand::u64(..)),
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
            outcome: None,
        }
    }

    /// Closed now, as its outcome says; without one it was cut short.
    fn close(&mut self) {
        let outcome = self.outcome.unwrap_or(Outcome::Fault);
        self.end_time = now();
        self.error = matches!(outcome, Outcome::Error | Outcome::Throttle);
        self.throttle = outcome == Outcome::Throttle;
        self.fault = outcome == Outcome::Fault;
    }

    fn http(&mut self) -> &mut HttpCall {
        self.http.get_or_insert_default()
    }

    fn aws(&mut self) -> &mut AwsCall {
        self.aws.get_or_insert_default()
    }
}

/// Reads a span's fields into its subsegment.
struct Fields<'a>(&'a mut Subsegment);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let subsegment = &mut *self.0;
        match field.name() {
            "xray.name" => subsegment.name = Cow::Owned(value.to_owned()),
            "xray.namespace" => subsegment.namespace = Some(value.to_owned()),
            "xray.outcome" => {
                let explicit = match value {
                    "ok" => Outcome::Ok,
                    "throttle" => Outcome::Throttle,
                    "fault" => Outcome::Fault,
                    _ => return,
                };
                subsegment.outcome = Some(explicit);
            }
            "http.method" => {
                let request = subsegment.http().request.get_or_insert_default();
                request.method = value.to_owned();
            }
            "http.url" => {
                let request = subsegment.http().request.get_or_insert_default();
                request.url = value.to_owned();
            }
            "aws.operation" => subsegment.aws().operation = Some(value.to_owned()),
            "aws.table_name" => subsegment.aws().table_name = Some(value.to_owned()),
            "aws.request_id" => subsegment.aws().request_id = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        let subsegment = &mut *self.0;
        match field.name() {
            "http.status" => {
                subsegment.http().response = Some(HttpResponse { status: value });
                // An explicit outcome (a throttle) says more than the status.
                if !matches!(subsegment.outcome, Some(Outcome::Throttle)) {
                    subsegment.outcome = Some(Outcome::of_status(value));
                }
            }
            "xray.status" => subsegment.outcome = Some(Outcome::of_status(value)),
            "aws.retries" => subsegment.aws().retries = value,
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    /// A value given with `%` (its Display): read as text.
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

/// An invocation (or init) being traced: its header, and the subsegments
/// finished so far (none recorded when it is not sampled).
struct Invocation {
    root: String,
    parent: String,
    sampled: bool,
    recording: Option<Mutex<Vec<Subsegment>>>,
}

impl Invocation {
    fn push(&self, subsegment: Subsegment) {
        if let Some(recording) = &self.recording {
            lock(recording).push(subsegment);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a traced span keeps in its extensions: the invocation it belongs
/// to, and its subsegment while open (none when nothing is recorded).
struct Traced {
    invocation: Arc<Invocation>,
    open: Option<Subsegment>,
}

/// The layer: where the documents go, and the work of init until the
/// first invocation takes it.
pub struct XRay {
    daemon: UdpSocket,
    init: Mutex<Vec<Subsegment>>,
}

impl XRay {
    /// Sends to the daemon at `address` (`AWS_XRAY_DAEMON_ADDRESS`: `ip:port`,
    /// or `udp:ip:port tcp:ip:port`); `None` if it is not such an address.
    pub fn connect(address: &str) -> Option<Self> {
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
        Some(Self {
            daemon: socket,
            init: Mutex::default(),
        })
    }

    /// The invocation a new span belongs to, and its parent subsegment.
    fn invocation_of<S>(&self, attrs: &Attributes<'_>, span: &SpanRef<'_, S>) -> Option<Found>
    where
        S: for<'a> LookupSpan<'a>,
    {
        match attrs.metadata().name() {
            HANDLER => {
                let mut header = HeaderField(None);
                attrs.record(&mut header);
                let header = TraceHeader::parse(header.0.as_deref()?)?;
                // Only the first invocation's trace includes init, sampled or not.
                let init = std::mem::take(&mut *lock(&self.init));
                let invocation = Invocation {
                    root: header.root.to_owned(),
                    parent: header.parent.to_owned(),
                    sampled: header.sampled,
                    recording: header.sampled.then(|| Mutex::new(init)),
                };
                Some((Arc::new(invocation), None))
            }
            INIT => {
                let invocation = Invocation {
                    root: String::new(),
                    parent: String::new(),
                    sampled: false,
                    recording: Some(Mutex::default()),
                };
                Some((Arc::new(invocation), None))
            }
            _ => span.scope().skip(1).find_map(|ancestor| {
                let extensions = ancestor.extensions();
                let traced = extensions.get::<Traced>()?;
                let parent = traced.open.as_ref().map(|open| open.id.clone());
                Some((traced.invocation.clone(), parent))
            }),
        }
    }

    /// Sends an invocation's finished subsegments as documents.
    fn send(&self, invocation: &Invocation) {
        let Some(recording) = &invocation.recording else {
            return;
        };
        let finished = std::mem::take(&mut *lock(recording));
        for document in documents(finished, invocation) {
            let mut datagram = DOCUMENT_HEADER.as_bytes().to_vec();
            if serde_json::to_writer(&mut datagram, &document).is_ok() {
                // Fire and forget: never waits, and a lost document
                // changes nothing for the request.
                let _ = self.daemon.send(&datagram);
            }
        }
    }
}

type SpanRef<'a, S> = tracing_subscriber::registry::SpanRef<'a, S>;
type Found = (Arc<Invocation>, Option<String>);

/// Reads the trace header of a `## handler` span.
struct HeaderField(Option<String>);

impl Visit for HeaderField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "xray.trace_header" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S> Layer<S> for XRay
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let Some((invocation, parent)) = self.invocation_of(attrs, &span) else {
            return;
        };
        let open = invocation.recording.as_ref().map(|_| {
            let mut open = Subsegment::open(attrs.metadata().name(), parent);
            attrs.record(&mut Fields(&mut open));
            open
        });
        span.extensions_mut().insert(Traced { invocation, open });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        if let Some(open) = extensions
            .get_mut::<Traced>()
            .and_then(|traced| traced.open.as_mut())
        {
            values.record(&mut Fields(open));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(Traced { invocation, open }) = span.extensions_mut().remove::<Traced>() else {
            return;
        };
        if let Some(mut open) = open {
            open.close();
            invocation.push(open);
        }
        match span.name() {
            HANDLER => self.send(&invocation),
            INIT => {
                if let Some(recording) = &invocation.recording {
                    lock(&self.init).append(&mut lock(recording));
                }
            }
            _ => {}
        }
    }
}

/// The trace header a call made within `span` carries downstream
/// (`X-Amzn-Trace-Id`), as the X-Ray SDKs pass it on: the invocation's
/// `Root` and sampling decision, and as `Parent` the span's subsegment when
/// it is recorded (else the invocation's own `Parent`). `None` outside an
/// invocation, or with X-Ray off.
pub fn downstream_header(span: &Span) -> Option<String> {
    span.with_subscriber(|(id, dispatch)| {
        let span = dispatch.downcast_ref::<Registry>()?.span(id)?;
        let extensions = span.extensions();
        let traced = extensions.get::<Traced>()?;
        let invocation = &traced.invocation;
        if invocation.root.is_empty() {
            return None;
        }
        let parent = traced
            .open
            .as_ref()
            .map_or(invocation.parent.as_str(), |open| open.id.as_str());
        let sampled = u8::from(invocation.sampled);
        Some(format!(
            "Root={};Parent={parent};Sampled={sampled}",
            invocation.root
        ))
    })
    .flatten()
}

/// The finished subsegments as documents: each one with no parent in the
/// invocation becomes a document of its own under the invocation's
/// `Parent`, holding its descendants.
fn documents(mut finished: Vec<Subsegment>, invocation: &Invocation) -> Vec<Subsegment> {
    // Children finish before their parents: attach each to its parent when
    // the parent is still in the list, latest first.
    let mut roots = Vec::new();
    while let Some(mut subsegment) = finished.pop() {
        subsegment.subsegments = adopt(&mut finished, &subsegment.id);
        roots.push(subsegment);
    }
    for root in &mut roots {
        root.kind = Some("subsegment");
        root.trace_id = Some(invocation.root.clone());
        root.parent_id = Some(invocation.parent.clone());
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
        assert!(XRay::connect("127.0.0.1:2000").is_some());
        assert!(XRay::connect("tcp:127.0.0.1:2000 udp:127.0.0.1:2001").is_some());
        assert!(XRay::connect("[::1]:2000").is_some());
        assert!(
            XRay::connect("xray.local:2000").is_none(),
            "no name lookups"
        );
        assert!(XRay::connect("").is_none());
    }
}
