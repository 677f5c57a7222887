//! Each DynamoDB call, with its attempts, as an X-Ray subsegment
//! (`crate::xray`) that passes its trace header on: an SDK interceptor.

use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextRef as Starting,
    BeforeTransmitInterceptorContextMut as Attempt, FinalizerInterceptorContextRef as Ended,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use serde_json::json;

use super::error::THROTTLING_CODES;
use crate::xray::Call;

/// The interceptor, for the store's one table.
#[derive(Debug)]
pub(super) struct Traced(pub(super) String);

// The call in flight is kept in the operation's own state.
impl Storable for Call {
    type Storer = StoreReplace<Self>;
}

impl Intercept for Traced {
    fn name(&self) -> &'static str {
        "XRayDynamoDb"
    }

    // Not `read_before_execution`: that runs before the operation is named.
    fn read_before_serialization(
        &self,
        _: &Starting<'_>,
        _: &RuntimeComponents,
        config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = config.load::<Metadata>().map_or("", Metadata::name);
        if let Some(mut call) = Call::start("DynamoDB", "aws") {
            if call.sampled() {
                call.document["aws"] = json!({"operation": operation, "table_name": self.0});
            }
            config.interceptor_state().store_put(call);
        }
        Ok(())
    }

    /// Each attempt: counted, and its request given the trace header, in
    /// place of the SDK's own (which is process-wide).
    fn modify_before_signing(
        &self,
        context: &mut Attempt<'_>,
        _: &RuntimeComponents,
        config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(call) = config.get_mut_from_interceptor_state::<Call>() {
            if call.sampled() {
                let retries = &mut call.document["aws"]["retries"];
                *retries = json!(retries.as_u64().map_or(0, |retries| retries + 1));
            }
            let headers = context.request_mut().headers_mut();
            headers.try_insert("x-amzn-trace-id", call.header())?;
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &Ended<'_>,
        _: &RuntimeComponents,
        config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let call = config.get_mut_from_interceptor_state::<Call>();
        let Some(call) = call.filter(|call| call.sampled()) else { return Ok(()) };
        let response = context.response();
        let request_id = response.and_then(|response| response.headers().get("x-amzn-requestid"));
        if let Some(request_id) = request_id {
            call.document["aws"]["request_id"] = json!(request_id);
        }
        // Every operation's error names its code in its text.
        let error = context.output_or_error().and_then(Result::err);
        let error = error.and_then(|error| error.as_operation_error()).map(ToString::to_string);
        let throttled = error.is_some_and(|text| THROTTLING_CODES.iter().any(|c| text.contains(c)));
        let status = response.map(|response| response.status().as_u16());
        call.end(status, throttled);
        Ok(())
    }
}
