//! The tests' DynamoDB clients: the production configuration, pointed at
//! DynamoDB Local, with every request counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{
    ConfigBag, Credentials, Intercept, Region, RuntimeComponents, SharedInterceptor,
};
use aws_sdk_dynamodb::error::BoxError;
use plant_store::https::Https;
use plant_store::store::client_config;

use crate::dynamodb_local;

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

pub async fn dynamodb_client() -> Client {
    counted_dynamodb_client(None).await.0
}

/// The region and dummy credentials the tests give the SDK: scripts/test's,
/// else these (DynamoDB Local accepts any).
pub(crate) fn aws_env() -> [(&'static str, String); 3] {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    [
        ("AWS_REGION", var("AWS_REGION", "us-east-1")),
        ("AWS_ACCESS_KEY_ID", var("AWS_ACCESS_KEY_ID", "local")),
        (
            "AWS_SECRET_ACCESS_KEY",
            var("AWS_SECRET_ACCESS_KEY", "local"),
        ),
    ]
}

/// A client with the production configuration (retries, timeouts) whose
/// every request to DynamoDB is counted; to DynamoDB Local, or through
/// `endpoint` (a fault proxy) if given.
pub async fn counted_dynamodb_client(endpoint: Option<&str>) -> (Client, CallCounter) {
    let counter = CallCounter::default();
    let [(_, region), (_, key), (_, secret)] = aws_env();
    let https = Https::new(&Default::default()).expect("the compiled-in roots");
    let config = client_config(&https)
        .await
        .to_builder()
        .endpoint_url(endpoint.unwrap_or(dynamodb_local::url()))
        .region(Region::new(region))
        .credentials_provider(Credentials::new(key, secret, None, None, "tests"))
        .interceptor(SharedInterceptor::new(counter.clone()))
        .build();
    (Client::from_conf(config), counter)
}

pub(crate) fn unique_table_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "plants-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
