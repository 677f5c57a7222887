//! The DynamoDB adapter: the only module that knows the table's layout.
//!
//! Layout: partition key `owner` (S, the token's `sub`), sort key `id` (N),
//! attributes `name` (S) and `tag` (S, absent when the plant has none). Each
//! owner's count is one item of its own partition, keyed by the owner and a
//! suffix that makes it longer than any owner ([`counter_partition`]), with
//! `id` 0 and `plants` (N): a plant and its count are written in one
//! transaction, which is how the per-owner bound holds under concurrency.
//! Apart from the plants, no listing, and no earlier version of the
//! function during a gradual deployment, ever reads a count. [`TABLE_KEY`]
//! states the key for whatever creates the table (the development tool;
//! `template.yaml` declares the same).

use std::collections::HashMap;
use std::env;
use std::time::Duration;

use aws_config::environment::{
    EnvironmentVariableCredentialsProvider, EnvironmentVariableRegionProvider,
};
use aws_config::meta::region::ProvideRegion;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::BehaviorVersion;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeyType, Put, ReturnValuesOnConditionCheckFailure, ScalarAttributeType,
    TransactWriteItem, Update,
};

use crate::domain::{Limit, NewPlant, Owner, Plant, PlantId, PlantName, PlantTag};
use crate::https::Https;

type Item = HashMap<String, AttributeValue>;

/// One attribute of the table's primary key.
#[derive(Debug, Clone)]
pub struct KeyAttribute {
    pub name: &'static str,
    pub key_type: KeyType,
    pub attribute_type: ScalarAttributeType,
}

const OWNER: KeyAttribute = KeyAttribute {
    name: "owner",
    key_type: KeyType::Hash,
    attribute_type: ScalarAttributeType::S,
};
const ID: KeyAttribute = KeyAttribute {
    name: "id",
    key_type: KeyType::Range,
    attribute_type: ScalarAttributeType::N,
};
/// The table's primary key: the owner's partition, sorted by plant id.
pub const TABLE_KEY: [KeyAttribute; 2] = [OWNER, ID];
const NAME: &str = "name";
const TAG: &str = "tag";
/// What follows the owner in its counter's partition key: longer than any
/// owner may be, so no owner's plants share that partition.
const COUNTER_SUFFIX: &str = "~";
/// The counter item's attribute: how many plants the owner has.
const PLANT_COUNT: &str = "plants";
/// How often a create is tried again when DynamoDB cancels its transaction
/// for a conflict with another one on the same counter (concurrent creates
/// of one owner), each after a short random pause.
const CONFLICT_ATTEMPTS: u32 = 8;

// How long the store may take, chosen so that a 503 is always answered well
// inside the function's 10 s timeout (template.yaml), even for a listing
// that needs two Query calls after a slow JWKS fetch (1.5 s):
// - a connection must open within 0.5 s (Lambda to DynamoDB is ~ms; the
//   shared connector's CONNECT_TIMEOUT, crate::https);
// - each attempt gets 1 s (DynamoDB answers in single-digit ms; a 1 MB page
//   is far below a second);
// - 3 attempts in the SDK's standard mode, with jittered backoff from 50 ms
//   up to 0.5 s, so a throttle or a dropped connection is retried quickly;
// - 3.5 s for the whole operation, attempts and backoff included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
const OPERATION_TIMEOUT: Duration = Duration::from_millis(3500);
pub const MAX_ATTEMPTS: u32 = 3;
const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// The most that warming the connection may add to init when DynamoDB is
/// slow or unreachable.
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(1);

/// The DynamoDB client's configuration, from the environment as Lambda sets
/// it: the region (`AWS_REGION`), the function's credentials
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) and,
/// for DynamoDB Local, `AWS_ENDPOINT_URL_DYNAMODB` (or `AWS_ENDPOINT_URL`);
/// with this service's retries and timeouts. Not the SDK's whole default
/// chain (profiles, SSO, web identity, IMDS): a Lambda function never needs
/// it, and it would add an STS client to the binary and its file and
/// environment probing to init (docs/performance.md). Its connections go
/// through `https`, the function's one HTTPS client.
pub async fn client_config(https: &Https) -> aws_sdk_dynamodb::Config {
    client_config_from(https, |name| env::var(name).ok()).await
}

/// [`client_config`] with the endpoint variables read through `lookup`. An
/// empty one counts as unset: template.yaml declares
/// `AWS_ENDPOINT_URL_DYNAMODB` empty in AWS (so that `sam local` may set it),
/// where the SDK must then resolve DynamoDB's regional endpoint.
async fn client_config_from(
    https: &Https,
    lookup: impl Fn(&str) -> Option<String>,
) -> aws_sdk_dynamodb::Config {
    let region = EnvironmentVariableRegionProvider::new().region().await;
    let endpoint = ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"]
        .into_iter()
        .find_map(|name| lookup(name).filter(|url| !url.is_empty()));
    let mut builder = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(region)
        .credentials_provider(EnvironmentVariableCredentialsProvider::new())
        .http_client(https.sdk_http_client());
    builder.set_endpoint_url(endpoint);
    builder
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(MAX_ATTEMPTS)
                .with_initial_backoff(INITIAL_BACKOFF)
                .with_max_backoff(MAX_BACKOFF),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(OPERATION_TIMEOUT)
                .build(),
        )
        .build()
}

/// DynamoDB error codes that mean "try again later", not "this request is
/// wrong": throttling, and DynamoDB's own 5xx (which the SDK retries first).
const RETRYABLE_CODES: [&str; 5] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
];

/// A store failure, classified once here. The detail is for the log only.
#[derive(Debug)]
pub enum StoreError {
    /// Throttled, failing (5xx), timed out or unreachable after the SDK's retries.
    Unavailable(String),
    /// Anything else, including data in the table that is not a valid plant.
    Unexpected(String),
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
            SdkError::ServiceError(service) => service
                .err()
                .code()
                .is_some_and(|code| RETRYABLE_CODES.contains(&code)),
            _ => false,
        };
        if unavailable {
            Self::Unavailable(detail)
        } else {
            Self::Unexpected(detail)
        }
    }
}

/// The answer to a create: the plant is new, a plant already has that id,
/// or the owner has as many plants as allowed.
#[derive(Debug)]
pub enum Created {
    New,
    AlreadyStored(Plant),
    LimitReached,
}

#[derive(Clone)]
pub struct PlantStore {
    client: Client,
    table: String,
    max_plants_per_owner: u32,
}

impl PlantStore {
    pub fn new(client: Client, table: impl Into<String>, max_plants_per_owner: u32) -> Self {
        Self {
            client,
            table: table.into(),
            max_plants_per_owner,
        }
    }

    /// How many plants one owner may store.
    pub fn max_plants_per_owner(&self) -> u32 {
        self.max_plants_per_owner
    }

    /// Connects to DynamoDB during init, where Lambda gives the function full
    /// CPU, so that the first request does not pay for the TLS handshake,
    /// the trust store, credentials and signing set-up. It queries one item
    /// of a partition that no token can name (longer than any [`Owner`]),
    /// so no plant is read or written, with the only read the IAM policy
    /// allows. A failure is logged, never fatal, and costs at most
    /// [`WARM_UP_TIMEOUT`].
    pub async fn warm_up(&self) {
        let nobody = "~".repeat(Owner::MAX_BYTES + 1);
        let query = self.query_partition(nobody).limit(1).send();
        match tokio::time::timeout(WARM_UP_TIMEOUT, query).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                let error = StoreError::from(error);
                tracing::warn!(?error, "warming the DynamoDB connection failed");
            }
            Err(_) => tracing::warn!("warming the DynamoDB connection timed out"),
        }
    }

    /// Stores a plant unless the owner already has one with that id (never
    /// overwrites) or already has the most plants allowed. The plant and the
    /// owner's count are written in one transaction: the put only if the id
    /// is free, the count only if it is below the bound. On an existing id
    /// the stored plant comes back from the failed condition itself (no
    /// second read), and that answer wins over the bound, so that a retry of
    /// a stored plant is still answered.
    pub async fn create(&self, owner: &Owner, new: &NewPlant) -> Result<Created, StoreError> {
        let transaction = self.create_transaction(owner, new)?;
        let mut attempt = 1;
        loop {
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(transaction.clone()))
                .send()
                .await;
            let cancelled = match result {
                Ok(_) => return Ok(Created::New),
                Err(error) => match error.as_service_error() {
                    Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                        cancelled.clone()
                    }
                    _ => return Err(error.into()),
                },
            };
            let reasons = cancelled.cancellation_reasons();
            let code = |index: usize| reasons.get(index).and_then(|reason| reason.code());
            if code(0) == Some("ConditionalCheckFailed") {
                let stored = reasons[0].item().ok_or_else(|| {
                    StoreError::Unexpected("condition failed without the stored item".into())
                })?;
                return Ok(Created::AlreadyStored(plant_from_item(stored)?));
            }
            if code(1) == Some("ConditionalCheckFailed") {
                return Ok(Created::LimitReached);
            }
            let conflict = reasons
                .iter()
                .any(|r| r.code() == Some("TransactionConflict"));
            if !conflict || attempt == CONFLICT_ATTEMPTS {
                let codes: Vec<&str> = reasons.iter().filter_map(|r| r.code()).collect();
                return Err(StoreError::Unavailable(format!(
                    "transaction cancelled after {attempt} attempts: {codes:?}"
                )));
            }
            attempt += 1;
            tokio::time::sleep(conflict_pause()).await;
        }
    }

    /// The put of the plant and the update of its owner's count.
    fn create_transaction(
        &self,
        owner: &Owner,
        new: &NewPlant,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let built =
            |error: aws_sdk_dynamodb::error::BuildError| StoreError::Unexpected(error.to_string());
        let mut item = item_key(owner, new.id);
        item.insert(
            NAME.to_owned(),
            AttributeValue::S(new.plant.name.as_str().to_owned()),
        );
        if let Some(tag) = &new.plant.tag {
            item.insert(TAG.to_owned(), AttributeValue::S(tag.as_str().to_owned()));
        }
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#id)")
            .expression_attribute_names("#id", ID.name)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(built)?;
        let count = Update::builder()
            .table_name(&self.table)
            .set_key(Some(counter_key(owner)))
            .update_expression("SET #plants = if_not_exists(#plants, :zero) + :one")
            .condition_expression("attribute_not_exists(#plants) OR #plants < :max")
            .expression_attribute_names("#plants", PLANT_COUNT)
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(
                ":max",
                AttributeValue::N(self.max_plants_per_owner.to_string()),
            )
            .build()
            .map_err(built)?;
        Ok(vec![
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().update(count).build(),
        ])
    }

    /// A page of the owner's plants in ascending id order: at most `limit`,
    /// after `after` when given, and the id to continue after when more exist.
    /// Only the owner's partition is read, `limit + 1` items at most (the one
    /// extra tells whether more exist). DynamoDB pages at 1 MB, so this keeps
    /// querying until it has them or the partition ends.
    pub async fn list(
        &self,
        owner: &Owner,
        limit: Limit,
        after: Option<PlantId>,
    ) -> Result<Page, StoreError> {
        let wanted = limit.get();
        let mut rows: Vec<(PlantId, Plant)> = Vec::with_capacity(wanted + 1);
        let mut start_key = after.map(|id| item_key(owner, id));
        loop {
            let remaining = i32::try_from(wanted + 1 - rows.len()).unwrap_or(i32::MAX);
            let page = self
                .query_partition(owner.as_str().to_owned())
                .scan_index_forward(true)
                .limit(remaining)
                .set_exclusive_start_key(start_key)
                .send()
                .await?;
            for item in page.items() {
                rows.push((id_from_item(item)?, plant_from_item(item)?));
            }
            match page.last_evaluated_key {
                Some(key) if rows.len() <= wanted => start_key = Some(key),
                _ => break,
            }
        }
        let more = rows.len() > wanted;
        rows.truncate(wanted);
        let next_after = if more {
            rows.last().map(|(id, _)| *id)
        } else {
            None
        };
        Ok(Page {
            plants: rows.into_iter().map(|(_, plant)| plant).collect(),
            next_after,
        })
    }

    /// A Query of one partition.
    fn query_partition(&self, owner: String) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#owner = :owner")
            .expression_attribute_names("#owner", OWNER.name)
            .expression_attribute_values(":owner", AttributeValue::S(owner))
    }
}

/// A pause of 5 to 40 ms before a create is tried again, varied so that
/// the creates that conflicted do not meet again.
fn conflict_pause() -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    Duration::from_millis(5 + u64::from(nanos % 36))
}

/// One page of a listing.
#[derive(Debug)]
pub struct Page {
    pub plants: Vec<Plant>,
    /// Set when more plants exist: the id the next page starts after.
    pub next_after: Option<PlantId>,
}

/// The primary key of an owner's plant.
fn item_key(owner: &Owner, id: PlantId) -> Item {
    Item::from([
        (
            OWNER.name.to_owned(),
            AttributeValue::S(owner.as_str().to_owned()),
        ),
        (ID.name.to_owned(), AttributeValue::N(id.to_string())),
    ])
}

/// The partition of an owner's counter item: the owner, then the suffix
/// repeated past [`Owner::MAX_BYTES`].
pub fn counter_partition(owner: &str) -> String {
    format!("{owner}{}", COUNTER_SUFFIX.repeat(Owner::MAX_BYTES + 1))
}

/// The owner whose count a partition holds, if it is a counter's partition.
pub fn counter_owner(partition: &str) -> Option<&str> {
    let owner = partition.strip_suffix(&COUNTER_SUFFIX.repeat(Owner::MAX_BYTES + 1))?;
    (!owner.is_empty()).then_some(owner)
}

/// The key of an owner's counter item.
fn counter_key(owner: &Owner) -> Item {
    Item::from([
        (
            OWNER.name.to_owned(),
            AttributeValue::S(counter_partition(owner.as_str())),
        ),
        (ID.name.to_owned(), AttributeValue::N("0".to_owned())),
    ])
}

fn id_from_item(item: &Item) -> Result<PlantId, StoreError> {
    item.get(ID.name)
        .and_then(|value| value.as_n().ok())
        .and_then(|number| number.parse().ok())
        .map(PlantId::new)
        .ok_or_else(|| StoreError::Unexpected("stored item has no numeric id".into()))
}

/// Reads a stored item back through the domain's constructors: the table is
/// trusted no more than a request body.
fn plant_from_item(item: &Item) -> Result<Plant, StoreError> {
    let text = |attribute: &str| {
        item.get(attribute)
            .and_then(|value| value.as_s().ok())
            .cloned()
    };
    let corrupt = |what: &str| StoreError::Unexpected(format!("stored item has {what}"));
    let name = text(NAME).ok_or_else(|| corrupt("no string name"))?;
    let name = PlantName::parse(name).map_err(|_| corrupt("an invalid name"))?;
    let tag = match text(TAG) {
        Some(tag) => Some(PlantTag::parse(tag).map_err(|_| corrupt("an invalid tag"))?),
        None => None,
    };
    Ok(Plant { name, tag })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
    use aws_sdk_dynamodb::config::{
        ConfigBag, Credentials, Intercept, Region, RuntimeComponents, SharedInterceptor,
    };
    use aws_sdk_dynamodb::error::BoxError;

    use super::*;

    /// Records the URI of the first request and stops it before it is sent,
    /// so that no test reaches beyond this machine.
    #[derive(Debug, Default, Clone)]
    struct StopBeforeSending(Arc<Mutex<Option<String>>>);

    impl Intercept for StopBeforeSending {
        fn name(&self) -> &'static str {
            "StopBeforeSending"
        }

        fn read_before_transmit(
            &self,
            context: &BeforeTransmitInterceptorContextRef<'_>,
            _components: &RuntimeComponents,
            _config: &mut ConfigBag,
        ) -> Result<(), BoxError> {
            *self.0.lock().unwrap() = Some(context.request().uri().to_owned());
            Err("stopped before sending".into())
        }
    }

    /// Where a Query goes with the endpoint variables `lookup` gives.
    async fn query_uri(lookup: impl Fn(&str) -> Option<String>) -> String {
        let stop = StopBeforeSending::default();
        let https = Https::new(&Default::default()).unwrap();
        let config = client_config_from(&https, lookup)
            .await
            .to_builder()
            .region(Region::new("eu-west-1"))
            .credentials_provider(Credentials::new("id", "secret", None, None, "test"))
            .interceptor(SharedInterceptor::new(stop.clone()))
            .build();
        let sent = Client::from_conf(config)
            .query()
            .table_name("plants")
            .send();
        assert!(sent.await.is_err(), "the interceptor stops every request");
        let uri = stop.0.lock().unwrap().clone();
        uri.expect("a request was built")
    }

    #[test]
    fn a_counter_partition_is_no_owners_and_names_its_owner() {
        for owner in ["alice", "~", &"x".repeat(Owner::MAX_BYTES)] {
            let partition = counter_partition(owner);
            assert!(
                Owner::parse(partition.clone()).is_none(),
                "too long for an owner"
            );
            assert_eq!(counter_owner(&partition), Some(owner));
            assert_eq!(counter_owner(owner), None);
        }
        assert_ne!(counter_partition("a~"), counter_partition("a"));
    }

    #[tokio::test]
    async fn an_empty_endpoint_variable_means_dynamodbs_regional_endpoint() {
        let declared_empty = |name: &str| (name == "AWS_ENDPOINT_URL_DYNAMODB").then(String::new);
        assert_eq!(
            query_uri(declared_empty).await,
            "https://dynamodb.eu-west-1.amazonaws.com/"
        );
        let local = |name: &str| {
            (name == "AWS_ENDPOINT_URL_DYNAMODB").then(|| "http://172.17.0.1:8000".to_owned())
        };
        assert_eq!(query_uri(local).await, "http://172.17.0.1:8000/");
    }
}
