//! Each DynamoDB call as an X-Ray subsegment (a `DynamoDB` span of target
//! `xray`, which `crate::xray` records as the X-Ray SDKs record AWS calls:
//! `aws.operation`, `aws.table_name`, `aws.request_id`, `aws.retries`, the
//! HTTP status), sent with the invocation's trace header in
//! `X-Amzn-Trace-Id`. An interceptor of the SDK's client, so that every
//! call of the store is traced, its retries counted, and a call cut short
//! by the request's deadline still recorded (as a fault: its span closes
//! with the call's state, without an outcome).

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
use tracing::Span;
use tracing::field::Empty;

use super::error::THROTTLING_CODES;
use crate::xray::downstream_header;

const TRACE_HEADER: &str = "x-amzn-trace-id";

/// The interceptor, for the store's one table.
#[derive(Debug)]
pub(super) struct DynamoDbCalls {
    table: String,
}

impl DynamoDbCalls {
    pub(super) fn new(table: &str) -> Self {
        Self {
            table: table.to_owned(),
        }
    }
}

/// One call's span and attempts, in the call's own state; the span closes
/// when the call ends.
#[derive(Debug)]
struct Call {
    span: Mutex<Option<Span>>,
    attempts: AtomicU32,
}

impl Storable for Call {
    type Storer = StoreReplace<Self>;
}

impl Call {
    fn span(config: &ConfigBag) -> Option<Span> {
        let call = config.load::<Call>()?;
        let span = call.span.lock().unwrap_or_else(PoisonError::into_inner);
        span.clone()
    }
}

impl Intercept for DynamoDbCalls {
    fn name(&self) -> &'static str {
        "XRayDynamoDbCalls"
    }

    // Not `read_before_execution`: a client's interceptors run that before
    // the operation's configuration (its name) is in `config`.
    fn read_before_serialization(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        config: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = config.load::<Metadata>().map_or("", Metadata::name);
        let span = tracing::info_span!(
            target: "xray",
            "DynamoDB",
            xray.namespace = "aws",
            aws.operation = operation,
            aws.table_name = self.table.as_str(),
            aws.retries = 0_u64,
            aws.request_id = Empty,
            http.status = Empty,
            xray.outcome = Empty,
        );
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
        let attempt = config
            .load::<Call>()
            .map_or(0, |call| call.attempts.fetch_add(1, Ordering::Relaxed));
        if attempt > 0
            && let Some(span) = Call::span(config)
        {
            span.record("aws.retries", attempt);
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
        if let Some(header) = Call::span(config).and_then(|span| downstream_header(&span)) {
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
        // Taken, so that the span closes now, with the call.
        let Some(span) = call
            .span
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Ok(());
        };
        let response = context.response();
        if let Some(request_id) =
            response.and_then(|response| response.headers().get("x-amzn-requestid"))
        {
            span.record("aws.request_id", request_id);
        }
        let code = match context.output_or_error() {
            Some(Err(error)) => error.as_operation_error().and_then(error_code),
            _ => None,
        };
        if code.is_some_and(|code| THROTTLING_CODES.contains(&code)) {
            span.record("xray.outcome", "throttle");
        }
        // No status: timed out, or never reached DynamoDB, a fault.
        if let Some(response) = response {
            span.record("http.status", response.status().as_u16());
        }
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
