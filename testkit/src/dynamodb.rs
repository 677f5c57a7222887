//! The tests' DynamoDB Local, and clients configured as in production.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{
    ConfigBag, Credentials, Intercept, Region, RuntimeComponents, SharedInterceptor,
};
use aws_sdk_dynamodb::error::BoxError;
use plant_store::https::Https;
use plant_store::store::client_config;
use plant_store_local_support::{dynamodb_local, process::free_port};

/// DynamoDB Local's URL: `AWS_ENDPOINT_URL_DYNAMODB` under `cargo xtask
/// test`; else one started for this test binary (in memory, a free port),
/// which ends with it (`process::start`).
pub fn dynamodb_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
            && !url.is_empty()
        {
            return url;
        }
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let started = dynamodb_local::start(free_port(), None);
            let url = started.as_ref().map(|(url, _)| url.clone());
            sender.send(url.map_err(|error| error.to_string())).unwrap();
            loop {
                std::thread::park();
            }
        });
        let started = receiver.recv().unwrap();
        started.unwrap_or_else(|error| panic!("cannot start DynamoDB Local: {error}"))
    })
}

/// Counts the requests the SDK sends (retries included).
#[derive(Debug, Default, Clone)]
pub struct CallCounter(Arc<AtomicUsize>);

impl CallCounter {
    /// How many requests the client has sent so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A client configured as in production, every request counted, to
/// DynamoDB Local or through `endpoint` (a fault proxy).
pub async fn counted_dynamodb_client(endpoint: Option<&str>) -> (Client, CallCounter) {
    let counter = CallCounter::default();
    let https = Https::new(&Default::default()).expect("the compiled-in roots");
    let config = client_config(&https, Some(endpoint.unwrap_or(dynamodb_url()))).await;
    let credentials = Credentials::new("local", "local", None, None, "tests");
    let config =
        config.to_builder().region(Region::new("us-east-1")).credentials_provider(credentials);
    let config = config.interceptor(SharedInterceptor::new(counter.clone())).build();
    (Client::from_conf(config), counter)
}

pub(crate) fn unique_table_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("plants-{}-{}-{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}
