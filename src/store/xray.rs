//! Each DynamoDB call as an X-Ray subsegment, recorded as the X-Ray SDKs
//! record AWS calls (`namespace` "aws", `name` "DynamoDB", `aws.operation`,
//! `aws.table_name`, `aws.request_id`, `aws.retries`, the HTTP status), and
//! sent with the invocation's trace header in `X-Amzn-Trace-Id`. An
//! interceptor of the SDK's client, so that every call of the store is
//! traced, its retries counted, and a call cut short by the request's
//! deadline still recorded (as a fault: its open subsegment is dropped with
//! the call's state).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
    BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::{BoxError, ProvideErrorMetadata};
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::QueryError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_smithy_runtime_api::client::interceptors::context::Error as OperationError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_types::config_bag::{Storable, StoreReplace};

use super::THROTTLING_CODES;
use crate::trace::{AwsCall, Outcome, Span};

const TRACE_HEADER: &str = "x-amzn-trace-id";

/// The interceptor; `table` is the store's one table.
#[derive(Debug)]
pub(super) struct TraceCalls {
    pub(super) table: String,
}

/// One call's open subsegment and attempts, in the call's own state.
#[derive(Debug)]
struct Call {
    span: Mutex<Option<Span>>,
    attempts: AtomicU32,
}

impl Storable for Call {
    type Storer = StoreReplace<Self>;
}

impl Call {
    fn with<T>(config: &ConfigBag, use_span: impl FnOnce(&mut Span) -> T) -> Option<T> {
        let call = config.load::<Call>()?;
        let mut span = call.span.lock().unwrap_or_else(PoisonError::into_inner);
        span.as_mut().map(use_span)
    }
}

impl Intercept for TraceCalls {
    fn name(&self) -> &'static str {
        "XRayTraceCalls"
    }

    // Not `read_before_execution`: a client's interceptors run that before
    // the operation's configuration (its name) is in `config`.
    fn read_before_serialization(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut span = Span::start("DynamoDB");
        span.aws(|| AwsCall {
            operation: config
                .load::<Metadata>()
                .map(|metadata| metadata.name().to_owned())
                .unwrap_or_default(),
            table_name: Some(self.table.clone()),
            request_id: None,
            retries: 0,
        });
        config.interceptor_state().store_put(Call {
            span: Mutex::new(Some(span)),
            attempts: AtomicU32::new(0),
        });
        Ok(())
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let retry = config
            .load::<Call>()
            .is_some_and(|call| call.attempts.fetch_add(1, Ordering::Relaxed) > 0);
        if retry {
            Call::with(config, |span| span.update_aws(|call| call.retries += 1));
        }
        Ok(())
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // In place of the SDK's own header, which it takes from the
        // process-wide `_X_AMZN_TRACE_ID`.
        if let Some(Some(header)) = Call::with(config, |span| span.downstream_header()) {
            context
                .request_mut()
                .headers_mut()
                .try_insert(TRACE_HEADER, header)?;
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(call) = config.load::<Call>() else {
            return Ok(());
        };
        let Some(mut span) = call
            .span
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Ok(());
        };
        let response = context.response();
        let status = response.map(|response| response.status().as_u16());
        span.update_aws(|call| {
            call.request_id = response
                .and_then(|response| response.headers().get("x-amzn-requestid"))
                .map(str::to_owned);
        });
        if let Some(status) = status {
            span.http_status(status);
        }
        let code = match context.output_or_error() {
            Some(Err(error)) => error.as_operation_error().and_then(error_code),
            _ => None,
        };
        let outcome = match (status, code) {
            (_, Some(code)) if THROTTLING_CODES.contains(&code) => Outcome::Throttle,
            (Some(status), _) => Outcome::of_status(status),
            // No answer: timed out, or never reached DynamoDB.
            (None, _) => Outcome::Fault,
        };
        span.end(outcome);
        Ok(())
    }
}

/// DynamoDB's error code, for the operations the store calls.
fn error_code(error: &OperationError) -> Option<&str> {
    error
        .downcast_ref::<PutItemError>()
        .and_then(ProvideErrorMetadata::code)
        .or_else(|| error.downcast_ref::<UpdateItemError>()?.code())
        .or_else(|| error.downcast_ref::<GetItemError>()?.code())
        .or_else(|| error.downcast_ref::<QueryError>()?.code())
}
