//! The DynamoDB client's configuration: where it goes, as whom, and how long
//! it may take, so that a 503 is answered well inside the function's 10 s
//! timeout (template.yaml); the connection's own is `crate::https`'s.

use std::time::Duration;

use aws_config::environment::{
    EnvironmentVariableCredentialsProvider, EnvironmentVariableRegionProvider,
};
use aws_config::meta::region::ProvideRegion;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, StalledStreamProtectionConfig};

use aws_runtime::invocation_id::InvocationIdInterceptor;
use aws_runtime::request_info::RequestInfoInterceptor;
use aws_runtime::user_agent::UserAgentInterceptor;
use aws_sdk_dynamodb::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept};
use aws_sdk_dynamodb::error::BoxError;
use aws_smithy_runtime_api::client::interceptors::disable_interceptor;

use crate::https::Https;

/// DynamoDB answers in single-digit ms; a 1 MB page takes far less.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
/// The SDK's standard mode, jittered: a throttle or a dropped connection
/// is retried quickly.
pub const MAX_ATTEMPTS: u32 = 3;
const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// The most a request's store work, all its calls, attempts and backoff
/// together, may take (`route::Deadline`; the SDK's own operation timeout
/// would be a second timer on every call for the same bound).
pub const STORE_BUDGET: Duration = Duration::from_millis(3500);

/// The DynamoDB client's configuration: to `endpoint` (`None`: the
/// regional one), with the region and credentials Lambda's environment
/// gives, not the SDK's whole default chain (an STS client and probing at
/// init, docs/performance.md), through `https`.
pub async fn client_config(https: &Https, endpoint: Option<&str>) -> aws_sdk_dynamodb::Config {
    let region = EnvironmentVariableRegionProvider::new().region().await;
    let mut builder = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(region)
        .credentials_provider(EnvironmentVariableCredentialsProvider::new())
        .http_client(https.sdk_http_client())
        // The attempt timeout and the request's deadline bound a stalled call;
        // the SDK's throughput monitor's cost is in docs/performance.md.
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
        .interceptor(WithoutSdkHeaders);
    builder.set_endpoint_url(endpoint.map(str::to_owned));
    builder
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(MAX_ATTEMPTS)
                .with_initial_backoff(INITIAL_BACKOFF)
                .with_max_backoff(MAX_BACKOFF),
        )
        .timeout_config(TimeoutConfig::builder().operation_attempt_timeout(ATTEMPT_TIMEOUT).build())
        .build()
}

/// Turns off the SDK's interceptors whose headers DynamoDB does not read:
/// the user agent (its cost in docs/performance.md), the invocation id, the
/// attempt count; the SDK's runtime's own mechanism.
#[derive(Debug)]
struct WithoutSdkHeaders;

impl Intercept for WithoutSdkHeaders {
    fn name(&self) -> &'static str {
        "WithoutSdkHeaders"
    }

    fn read_before_execution(
        &self,
        _: &BeforeSerializationInterceptorContextRef<'_>,
        config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let state = config.interceptor_state();
        state.store_put(disable_interceptor::<UserAgentInterceptor>("not read by DynamoDB"));
        state.store_put(disable_interceptor::<InvocationIdInterceptor>("not read by DynamoDB"));
        state.store_put(disable_interceptor::<RequestInfoInterceptor>("not read by DynamoDB"));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef as Sending;
    use aws_sdk_dynamodb::config::{ConfigBag, Credentials, Intercept, Region, RuntimeComponents};
    use aws_sdk_dynamodb::error::BoxError;

    use super::*;

    /// Records the URI and header names of a request and stops it before it
    /// is sent, so that no test reaches beyond this machine.
    #[derive(Debug, Default, Clone)]
    struct StopBeforeSending(Arc<Mutex<(String, Vec<String>)>>);

    impl Intercept for StopBeforeSending {
        fn name(&self) -> &'static str {
            "StopBeforeSending"
        }

        fn read_before_transmit(
            &self,
            context: &Sending<'_>,
            _: &RuntimeComponents,
            _: &mut ConfigBag,
        ) -> Result<(), BoxError> {
            let request = context.request();
            let names = request.headers().iter().map(|(name, _)| name.to_owned()).collect();
            *self.0.lock().unwrap() = (request.uri().to_owned(), names);
            Err("stopped before sending".into())
        }
    }

    #[tokio::test]
    async fn the_client_goes_to_dynamodbs_regional_endpoint_without_the_sdks_own_headers() {
        let https = Https::new(&Default::default()).unwrap();
        for (endpoint, uri) in [
            (None, "https://dynamodb.eu-west-1.amazonaws.com/"),
            (Some("http://172.17.0.1:8000"), "http://172.17.0.1:8000/"),
        ] {
            let stop = StopBeforeSending::default();
            let config = client_config(&https, endpoint).await.to_builder();
            let config = (config.region(Region::new("eu-west-1")))
                .credentials_provider(Credentials::new("id", "secret", None, None, "test"))
                .interceptor(stop.clone());
            let client = aws_sdk_dynamodb::Client::from_conf(config.build());
            assert!(client.query().table_name("plants").send().await.is_err());
            let (sent_to, headers) = stop.0.lock().unwrap().clone();
            assert_eq!(sent_to, uri);
            assert!(headers.contains(&"authorization".into()), "{headers:?}");
            for dropped in
                ["user-agent", "x-amz-user-agent", "amz-sdk-invocation-id", "amz-sdk-request"]
            {
                assert!(!headers.contains(&dropped.into()), "{dropped}: {headers:?}");
            }
        }
    }
}
