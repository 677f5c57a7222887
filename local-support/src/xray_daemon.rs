//! A stand-in for the X-Ray daemon that Lambda runs beside the function: a
//! UDP socket on 127.0.0.1 (the function's `AWS_XRAY_DAEMON_ADDRESS`) that
//! takes what the daemon takes, one datagram per document, the header line
//! `{"format": "json", "version": 1}` and a segment document, and checks
//! each document against X-Ray's segment document schema as the daemon's
//! upstream (`PutTraceSegments`) would: the fields a subsegment sent on its
//! own must have, their formats, and only the schema's fields.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

const HEADER: &str = "{\"format\": \"json\", \"version\": 1}";
/// The largest datagram the daemon reads.
const MAX_DATAGRAM: usize = 64 * 1024;
/// The fields of a subsegment in X-Ray's schema.
const FIELDS: &str = "name id start_time end_time in_progress type trace_id parent_id namespace \
                      aws http sql error throttle fault cause annotations metadata subsegments \
                      precursor_ids service";

pub struct XRayDaemon {
    /// `127.0.0.1:port`, the value of `AWS_XRAY_DAEMON_ADDRESS`.
    pub address: String,
    received: Arc<Mutex<Received>>,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct Received {
    documents: Vec<Value>,
    malformed: Vec<String>,
}

impl XRayDaemon {
    pub async fn start() -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let address = socket.local_addr().unwrap().to_string();
        let received = Arc::new(Mutex::new(Received::default()));
        let task = tokio::spawn({
            let received = received.clone();
            async move {
                let mut buffer = vec![0; MAX_DATAGRAM];
                while let Ok(size) = socket.recv(&mut buffer).await {
                    let datagram = String::from_utf8_lossy(&buffer[..size]).into_owned();
                    let mut received = received.lock().unwrap();
                    match read_document(&datagram) {
                        Ok(document) => received.documents.push(document),
                        Err(problem) => received.malformed.push(format!("{problem}: {datagram}")),
                    }
                }
            }
        });
        Self { address, received, task }
    }

    /// Every well-formed document received so far. Panics if any datagram
    /// was not one, naming what was wrong.
    pub fn documents(&self) -> Vec<Value> {
        let received = self.received.lock().unwrap();
        assert!(
            received.malformed.is_empty(),
            "malformed X-Ray documents:\n{}",
            received.malformed.join("\n")
        );
        received.documents.clone()
    }

    /// The documents once `done` holds of them, or after 5 s (UDP gives no
    /// other sign that all have arrived).
    pub async fn documents_when(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        for _ in 0..100 {
            let documents = self.documents();
            if done(&documents) {
                return documents;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.documents()
    }
}

impl Drop for XRayDaemon {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The document of one datagram, if it is a well-formed one.
fn read_document(datagram: &str) -> Result<Value, String> {
    let (header, body) = datagram.split_once('\n').ok_or("no header line")?;
    if header != HEADER {
        return Err(format!("the header line is not {HEADER}"));
    }
    let document: Value = serde_json::from_str(body).map_err(|error| error.to_string())?;
    check_subsegment(&document, true)?;
    Ok(document)
}

/// A subsegment of X-Ray's schema; `alone`: sent as a document of its own,
/// which must say which trace and parent it belongs to.
fn check_subsegment(subsegment: &Value, alone: bool) -> Result<(), String> {
    let fields = subsegment.as_object().ok_or("not an object")?;
    if let Some(unknown) = fields.keys().find(|key| !FIELDS.split_whitespace().any(|f| f == *key)) {
        return Err(format!("`{unknown}` is not a subsegment field"));
    }
    check_name_id_and_times(subsegment)?;
    if alone {
        check_trace_and_parent(subsegment)?;
    }
    check_value_types(subsegment)?;
    for nested in subsegment["subsegments"].as_array().into_iter().flatten() {
        check_subsegment(nested, false)?;
    }
    Ok(())
}

fn check_name_id_and_times(subsegment: &Value) -> Result<(), String> {
    let name = subsegment["name"].as_str().ok_or("no `name`")?;
    let name_allowed =
        |c: char| c.is_alphanumeric() || c.is_whitespace() || "_.:/%&#=+\\-@".contains(c);
    if name.is_empty() || name.chars().count() > 200 || !name.chars().all(name_allowed) {
        return Err(format!("`name` {name:?} is not an X-Ray name"));
    }
    if !subsegment["id"].as_str().is_some_and(is_id) {
        return Err("`id` is not 16 hex digits".into());
    }
    let start = subsegment["start_time"].as_f64().ok_or("no `start_time`")?;
    match subsegment["end_time"].as_f64() {
        Some(end) if end >= start && start > 1.5e9 => Ok(()),
        _ if subsegment["in_progress"] == true => Ok(()),
        _ => Err("no `end_time` at or after a `start_time` in epoch seconds".into()),
    }
}

/// What a subsegment sent on its own must say: its type, trace and parent.
fn check_trace_and_parent(subsegment: &Value) -> Result<(), String> {
    if subsegment["type"] != "subsegment" {
        return Err("sent alone without `type: subsegment`".into());
    }
    if !subsegment["trace_id"].as_str().is_some_and(is_trace_id) {
        return Err("sent alone without a `trace_id` of 1-8-24 hex digits".into());
    }
    if !subsegment["parent_id"].as_str().is_some_and(is_id) {
        return Err("sent alone without a `parent_id` of 16 hex digits".into());
    }
    Ok(())
}

fn check_value_types(subsegment: &Value) -> Result<(), String> {
    if let Some(namespace) = subsegment.get("namespace")
        && !matches!(namespace.as_str(), Some("aws" | "remote"))
    {
        return Err(format!("`namespace` {namespace} is neither aws nor remote"));
    }
    for flag in ["error", "throttle", "fault", "in_progress"] {
        if subsegment.get(flag).is_some_and(|value| !value.is_boolean()) {
            return Err(format!("`{flag}` is not a boolean"));
        }
    }
    for (pointer, field) in
        [("/http/response/status", "http.response.status"), ("/aws/retries", "aws.retries")]
    {
        if subsegment.pointer(pointer).is_some_and(|value| !value.is_u64()) {
            return Err(format!("`{field}` is not an integer"));
        }
    }
    Ok(())
}

fn is_hex(value: &str, digits: usize) -> bool {
    value.len() == digits && value.bytes().all(|byte| byte.is_ascii_hexdigit())
}

fn is_id(value: &str) -> bool {
    is_hex(value, 16)
}

fn is_trace_id(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    matches!(parts.as_slice(), ["1", time, random] if is_hex(time, 8) && is_hex(random, 24))
}
