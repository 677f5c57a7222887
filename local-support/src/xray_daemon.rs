//! A stand-in X-Ray daemon: UDP on 127.0.0.1, each datagram's document
//! checked against X-Ray's segment document schema.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

const HEADER: &str = "{\"format\": \"json\", \"version\": 1}";
/// The largest datagram the daemon reads.
const MAX_DATAGRAM: usize = 64 * 1024;

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
        let malformed = received.malformed.join("\n");
        assert!(malformed.is_empty(), "malformed X-Ray documents:\n{malformed}");
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

/// The document of one datagram, if it is a well-formed one (with
/// `segment-schema`, as X-Ray's schema allows).
fn read_document(datagram: &str) -> Result<Value, String> {
    let (header, body) = datagram.split_once('\n').ok_or("no header line")?;
    if header != HEADER {
        return Err(format!("the header line is not {HEADER}"));
    }
    let document: Value = serde_json::from_str(body).map_err(|error| error.to_string())?;
    #[cfg(feature = "segment-schema")]
    {
        static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
        let schema = SCHEMA.get_or_init(|| {
            let schema = include_str!("../xray-subsegment.schema.json");
            jsonschema::validator_for(&serde_json::from_str(schema).unwrap()).unwrap()
        });
        schema.validate(&document).map_err(|error| error.to_string())?;
    }
    Ok(document)
}

#[cfg(all(test, feature = "segment-schema"))]
mod tests {
    #[test]
    fn a_document_is_read_only_as_xrays_schema_allows() {
        let good = serde_json::json!({"name": "DynamoDB", "id": "0123456789abcdef",
            "start_time": 1.7e9, "end_time": 1.7e9, "type": "subsegment",
            "trace_id": "1-6740e000-0123456789abcdef01234567", "parent_id": "fedcba9876543210"});
        let datagram = |document: &serde_json::Value| format!("{}\n{document}", super::HEADER);
        assert!(super::read_document(&datagram(&good)).is_ok());
        for (field, value) in [("colour", "red"), ("id", "xyz"), ("namespace", "local")] {
            let mut bad = good.clone();
            bad[field] = value.into();
            assert!(super::read_document(&datagram(&bad)).is_err(), "{field}: {value}");
        }
        let mut unended = good.clone();
        unended.as_object_mut().unwrap().remove("end_time");
        assert!(super::read_document(&datagram(&unended)).is_err());
        assert!(super::read_document(&format!("{good}")).is_err(), "no header line");
    }
}
