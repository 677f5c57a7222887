//! AWS X-Ray: each outbound call of a sampled invocation as one subsegment
//! under the invocation's own segment (docs/operating.md).

use std::net::{SocketAddr, UdpSocket};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// Where the documents go: the daemon Lambda runs, once connected.
static DAEMON: OnceLock<UdpSocket> = OnceLock::new();

tokio::task_local! {
    /// The `Root`, `Parent` and `Sampled` of the invocation whose work is
    /// running, where X-Ray is on.
    static INVOCATION: Option<(String, String, bool)>;
}

/// Connects to the daemon at `address` (`AWS_XRAY_DAEMON_ADDRESS`: `ip:port`,
/// or `udp:ip:port tcp:ip:port`); false if that is no such address.
pub fn connect(address: &str) -> bool {
    let udp = address.split_whitespace().find_map(|part| part.strip_prefix("udp:"));
    let Ok(daemon) = udp.unwrap_or(address).parse::<SocketAddr>() else { return false };
    let local = if daemon.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let socket = UdpSocket::bind(local).and_then(|socket| {
        socket.connect(daemon)?;
        socket.set_nonblocking(true)?;
        Ok(socket)
    });
    socket.is_ok_and(|socket| DAEMON.set(socket).is_ok())
}

/// The `Root`, `Parent` and `Sampled` of a well-formed trace header:
/// `Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1`.
pub type Trace<'a> = (&'a str, &'a str, bool);

pub fn parse(header: &str) -> Option<Trace<'_>> {
    let field = |name| header.split(';').find_map(|f| f.trim().strip_prefix(name));
    let hex = |text: &str, n| text.len() == n && text.bytes().all(|b| b.is_ascii_hexdigit());
    // `1-`, 8 hex digits of time, `-`, 24 random ones.
    let root = field("Root=").filter(|root| {
        let id = root.strip_prefix("1-").and_then(|id| id.split_once('-'));
        id.is_some_and(|(time, random)| hex(time, 8) && hex(random, 24))
    })?;
    let parent = field("Parent=").filter(|parent| hex(parent, 16))?;
    Some((root, parent, field("Sampled=") == Some("1")))
}

/// `work`, as the invocation of `trace`: the calls it makes are recorded
/// under it (with X-Ray on).
pub fn within<T>(
    trace: Option<Trace<'_>>,
    work: impl Future<Output = T>,
) -> impl Future<Output = T> {
    let trace = trace.filter(|_| DAEMON.get().is_some());
    let trace = trace.map(|(root, parent, sampled)| (root.into(), parent.into(), sampled));
    INVOCATION.scope(trace, work)
}

/// One outbound call's subsegment, from its start.
#[derive(Debug)]
pub struct Call {
    trace: (String, String, bool),
    id: String,
    /// The document so far: name, namespace, start, and what the caller
    /// adds (`aws`, `http`) as X-Ray's schema names it.
    pub document: Value,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |since| since.as_secs_f64())
}

impl Call {
    /// A call to `name` (`namespace` `aws` or `remote`) starting now, within
    /// an invocation with X-Ray on (unsampled, only to pass its header on).
    pub fn start(name: &str, namespace: &str) -> Option<Self> {
        let trace = INVOCATION.try_with(Option::clone).ok()??;
        if !trace.2 {
            return Some(Self { trace, id: String::new(), document: Value::Null });
        }
        let id = format!("{:016x}", fastrand::u64(..));
        let document = json!({"name": name, "namespace": namespace, "start_time": now()});
        Some(Self { trace, id, document })
    }

    /// Whether its document is recorded.
    pub fn sampled(&self) -> bool {
        self.trace.2
    }

    /// The trace header the call carries downstream (`X-Amzn-Trace-Id`), as
    /// the X-Ray SDKs pass it on: this subsegment as `Parent` when sampled.
    pub fn header(&self) -> String {
        let (root, parent, sampled) = &self.trace;
        let parent = if *sampled { &self.id } else { parent };
        format!("Root={root};Parent={parent};Sampled={}", u8::from(*sampled))
    }

    /// Ends the call with the status it got (`None`: no usable answer, a
    /// fault), or a throttle, and sends it if sampled (once).
    pub fn end(&mut self, status: Option<u16>, throttled: bool) {
        if !self.sampled() {
            return;
        }
        let throttle = throttled || status == Some(429);
        let fault = !throttle && status.is_none_or(|status| status >= 500);
        let error = !fault && (throttle || status.is_some_and(|status| status >= 400));
        if let Some(status) = status {
            self.document["http"]["response"] = json!({ "status": status });
        }
        let (root, parent, _) = &self.trace;
        let ended = json!({"type": "subsegment", "id": self.id, "trace_id": root,
            "parent_id": parent, "end_time": now(),
            "error": error, "throttle": throttle, "fault": fault});
        if let (Value::Object(document), Value::Object(ended)) = (&mut self.document, ended) {
            document.extend(ended);
            send(document);
        }
        self.document = Value::Null;
    }
}

impl Drop for Call {
    /// A call dropped before it ended, cut at its request's deadline: a fault.
    fn drop(&mut self) {
        if !self.document.is_null() {
            self.end(None, false);
        }
    }
}

/// The sink: one UDP datagram per document, as the X-Ray SDKs send them, and
/// never waited for; OTLP would replace this function.
fn send(document: &Map<String, Value>) {
    let Some(daemon) = DAEMON.get() else { return };
    let mut datagram = b"{\"format\": \"json\", \"version\": 1}\n".to_vec();
    if serde_json::to_writer(&mut datagram, document).is_ok() {
        // A lost document changes nothing for the request.
        let _ = daemon.send(&datagram);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_header_is_read_whatever_its_order_and_extra_keys() {
        let (root, parent) = ("1-5759e988-bd862e3fe1be46a994272793", "53995c3f42cd8ad8");
        let header = format!("Sampled=1;Root={root};Lineage=a87bd80c:0;Parent={parent}");
        assert_eq!(parse(&header), Some((root, parent, true)));
        let unsampled = format!("Root={root};Parent={parent}");
        assert_eq!(parse(&unsampled), Some((root, parent, false)));
        let bad_root = format!("Root=2{};Parent={parent}", &root[1..]);
        let bad_parent = format!("Root={root};Parent={}\"", &parent[..15]);
        for refused in [format!("Root={root};Sampled=1"), bad_root, bad_parent] {
            assert_eq!(parse(&refused), None, "{refused}");
        }
    }
}
