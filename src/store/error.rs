//! A store failure, classified once here from what the SDK reports.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// DynamoDB's throttling error codes: try again later, and nothing was
/// written.
pub(super) const THROTTLING_CODES: [&str; 3] =
    ["ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"];
/// DynamoDB's own 5xx codes (which the SDK retries first): try again later,
/// but a write may have been applied.
const SERVER_ERROR_CODES: [&str; 2] = ["InternalServerError", "ServiceUnavailable"];
/// A multi-Region strongly consistent table's refusal of a write another
/// Region's to the same item beat (the SDK retries it first): try again
/// later; nothing was applied.
const REPLICATED_WRITE_CONFLICT: &str = "ReplicatedWriteConflictException";

/// A store failure. The detail is for the log only.
#[derive(Debug)]
pub enum StoreError {
    /// Throttled, failing (5xx), in a write conflict with another Region,
    /// timed out or unreachable after the SDK's retries.
    Unavailable(String),
    /// Anything else, including data in the table that is not a valid plant.
    Unexpected(String),
}

/// Whether DynamoDB refused a write before applying it (any 4xx: throttled,
/// invalid, not allowed), so that the count it took may be given back.
pub(super) fn refused_unwritten<E>(error: &SdkError<E, HttpResponse>) -> bool {
    matches!(error, SdkError::ServiceError(refused) if refused.raw().status().is_client_error())
}

/// Whether the error is the failed condition of a conditional write.
pub(super) fn condition_failed<E: ProvideErrorMetadata, R>(error: &SdkError<E, R>) -> bool {
    service_code(error) == Some("ConditionalCheckFailedException")
}

/// The error code DynamoDB answered with, if it answered.
fn service_code<E: ProvideErrorMetadata, R>(error: &SdkError<E, R>) -> Option<&str> {
    error.as_service_error()?.code()
}

impl<E, R> From<SdkError<E, R>> for StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    fn from(error: SdkError<E, R>) -> Self {
        let detail = DisplayErrorContext(&error).to_string();
        let unavailable = match &error {
            SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => true,
            _ => service_code(&error).is_some_and(|code| {
                THROTTLING_CODES.contains(&code)
                    || SERVER_ERROR_CODES.contains(&code)
                    || code == REPLICATED_WRITE_CONFLICT
            }),
        };
        if unavailable { Self::Unavailable(detail) } else { Self::Unexpected(detail) }
    }
}
