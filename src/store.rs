//! The DynamoDB adapter: the only module that knows the table's layout.
//!
//! Layout: partition key `owner` (S, the token's `sub`), sort key `id` (N),
//! attributes `name` (S) and `tag` (S, absent when the plant has none). Each
//! owner's count is one item of its own partition, keyed by the owner and a
//! suffix that makes it longer than any owner ([`counter_partition`]), with
//! `id` 0 and `plants` (N). Listings read only the int64 range of an owner's
//! ids, so nothing else in a partition is ever taken for a plant.
//! [`TABLE_KEY`] states the key for whatever creates the table
//! (`plant-store-admin create-table`; `template.yaml` declares the same).
//!
//! The bound on plants per owner, in two single-item writes (2 write units
//! for an accepted create, no transaction): first the count takes a place
//! (a conditional `UpdateItem`, `plants < max`), then the plant is put (a
//! conditional `PutItem`, the id free). So at every instant
//! `plants <= count <= max`: the count rises before its plant exists and
//! falls back only when the put is known not to have happened (the id was
//! taken, or DynamoDB refused it). A crash, a timeout or the deadline
//! between the two writes leaves the count one high, never low: the bound
//! stays strict, and `plant-store-admin recount` repairs it. With the bound
//! off a create is the conditional put alone (1 write unit).

use std::collections::HashMap;
use std::num::NonZeroU32;
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
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeyType, ReturnValuesOnConditionCheckFailure, ScalarAttributeType,
};

use crate::domain::{Limit, NewPlant, Owner, Plant, PlantId, PlantName, PlantTag};
use crate::https::Https;

mod xray;

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
pub const PLANT_COUNT: &str = "plants";

// How long the store may take, chosen so that a 503 is always answered well
// inside the function's 10 s timeout (template.yaml); every request's store
// work, all its calls and their retries, also runs inside one [`Deadline`]:
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
/// The most a request's store work may take, all calls together: a store
/// failure is answered within it.
pub const STORE_BUDGET: Duration = OPERATION_TIMEOUT;
/// What answering takes after the store gives up (the response, the log
/// lines, handing it back to Lambda), kept free of the invocation's time.
const ANSWER_MARGIN: Duration = Duration::from_millis(300);

/// When a request's store work must be over: [`STORE_BUDGET`] from the
/// request's start, or sooner if the invocation's own deadline (less
/// [`ANSWER_MARGIN`]) comes first. Past it the answer is 503.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(tokio::time::Instant);

impl Deadline {
    /// From the invocation's deadline, in milliseconds since the Unix epoch
    /// as the Runtime API gives it (`Lambda-Runtime-Deadline-Ms`). A
    /// deadline already past when the request starts is none: Lambda never
    /// hands out such an invocation, while emulators send a constant
    /// (`cargo lambda watch`: 600000) and tests 0.
    pub fn for_invocation(deadline_ms: u64) -> Self {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |now| u64::try_from(now.as_millis()).unwrap_or(u64::MAX));
        let budget = match deadline_ms.checked_sub(now_ms) {
            Some(left) if left > 0 => Duration::from_millis(left)
                .saturating_sub(ANSWER_MARGIN)
                .min(STORE_BUDGET),
            _ => STORE_BUDGET,
        };
        Self(tokio::time::Instant::now() + budget)
    }

    /// How long is left.
    #[cfg(test)]
    fn left(self) -> Duration {
        self.0
            .saturating_duration_since(tokio::time::Instant::now())
    }

    /// `work`, or [`StoreError::Unavailable`] when the deadline passes first
    /// (the work is dropped: see the module's comment for what that leaves).
    async fn run<T>(
        self,
        work: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        tokio::time::timeout_at(self.0, work)
            .await
            .unwrap_or_else(|_| {
                Err(StoreError::Unavailable(
                    "the request's deadline passed before the store answered".into(),
                ))
            })
    }
}

/// The DynamoDB client's configuration: to `endpoint` (DynamoDB Local;
/// `None`, DynamoDB's regional endpoint, from `crate::config`), in the
/// region (`AWS_REGION`) and with the function's credentials
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) that
/// the SDK's environment providers read, with this service's retries and
/// timeouts. Not the SDK's whole default chain (profiles, SSO, web
/// identity, IMDS): a Lambda function never needs it, and it would add an
/// STS client to the binary and its file and environment probing to init
/// (docs/performance.md). Its connections go through `https`, the
/// function's one HTTPS client.
pub async fn client_config(https: &Https, endpoint: Option<&str>) -> aws_sdk_dynamodb::Config {
    let region = EnvironmentVariableRegionProvider::new().region().await;
    let mut builder = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(region)
        .credentials_provider(EnvironmentVariableCredentialsProvider::new())
        .http_client(https.sdk_http_client());
    builder.set_endpoint_url(endpoint.map(str::to_owned));
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

/// DynamoDB's throttling error codes: try again later, and nothing was
/// written.
const THROTTLING_CODES: [&str; 3] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
];
/// DynamoDB's own 5xx codes (which the SDK retries first): try again later,
/// but a write may have been applied.
const SERVER_ERROR_CODES: [&str; 2] = ["InternalServerError", "ServiceUnavailable"];

/// A store failure, classified once here. The detail is for the log only.
#[derive(Debug)]
pub enum StoreError {
    /// Throttled, failing (5xx), timed out or unreachable after the SDK's retries.
    Unavailable(String),
    /// Anything else, including data in the table that is not a valid plant.
    Unexpected(String),
}

/// Whether DynamoDB refused a write before applying it (throttled), so that
/// the count it took may be given back.
fn refused_unwritten<E: ProvideErrorMetadata, R>(error: &SdkError<E, R>) -> bool {
    service_code(error).is_some_and(|code| THROTTLING_CODES.contains(&code))
}

/// Whether the error is the failed condition of a conditional write.
fn condition_failed<E: ProvideErrorMetadata, R>(error: &SdkError<E, R>) -> bool {
    service_code(error) == Some("ConditionalCheckFailedException")
}

/// The error code DynamoDB answered with, if it answered.
fn service_code<E: ProvideErrorMetadata, R>(error: &SdkError<E, R>) -> Option<&str> {
    match error {
        SdkError::ServiceError(service) => service.err().code(),
        _ => None,
    }
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
                THROTTLING_CODES.contains(&code) || SERVER_ERROR_CODES.contains(&code)
            }),
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
    /// How many plants one owner may store; `None`: no bound.
    bound: Option<NonZeroU32>,
}

impl PlantStore {
    /// `max_plants_per_owner` 0 turns the bound off. Every call of the
    /// store through `client` is traced (`store/xray.rs`).
    pub fn new(client: Client, table: impl Into<String>, max_plants_per_owner: u32) -> Self {
        let table = table.into();
        let traced = client
            .config()
            .to_builder()
            .interceptor(xray::TraceCalls {
                table: table.clone(),
            })
            .build();
        Self {
            client: Client::from_conf(traced),
            table,
            bound: NonZeroU32::new(max_plants_per_owner),
        }
    }

    /// How many plants one owner may store (0: no bound).
    pub fn max_plants_per_owner(&self) -> u32 {
        self.bound.map_or(0, NonZeroU32::get)
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
    /// overwrites) or already has the most plants allowed; every call within
    /// `deadline`. A stored plant of that id is always answered, at the
    /// bound too, so that a retry of a stored plant is never refused for the
    /// bound. The module's comment says how the bound stays strict.
    pub async fn create(
        &self,
        owner: &Owner,
        new: &NewPlant,
        deadline: Deadline,
    ) -> Result<Created, StoreError> {
        let Some(bound) = self.bound else {
            return deadline.run(self.put(owner, new)).await?.into();
        };
        if !deadline.run(self.take_place(owner, bound)).await? {
            // At the bound: a retry of a stored plant, a conflict, or the
            // bound, told apart by the stored item as it is now.
            return Ok(match deadline.run(self.stored(owner, new.id)).await? {
                Some(stored) => Created::AlreadyStored(stored),
                None => Created::LimitReached,
            });
        }
        let put = deadline.run(self.put(owner, new)).await?;
        if !matches!(put, Put::Written)
            && let Err(error) = deadline.run(self.give_place_back(owner)).await
        {
            // The count stays one high: the bound is strict still.
            tracing::warn!(?error, "the count could not be given back");
        }
        put.into()
    }

    /// Takes one place in the owner's count, if it is below `bound`.
    async fn take_place(&self, owner: &Owner, bound: NonZeroU32) -> Result<bool, StoreError> {
        let taken = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(counter_key(owner.as_str())))
            .update_expression("SET #plants = if_not_exists(#plants, :zero) + :one")
            .condition_expression("attribute_not_exists(#plants) OR #plants < :max")
            .expression_attribute_names("#plants", PLANT_COUNT)
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":max", AttributeValue::N(bound.to_string()))
            .send()
            .await;
        match taken {
            Ok(_) => Ok(true),
            Err(error) if condition_failed(&error) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// Gives back a place the count took for a plant that was not written.
    async fn give_place_back(&self, owner: &Owner) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(counter_key(owner.as_str())))
            .update_expression("SET #plants = #plants - :one")
            .condition_expression("#plants > :zero")
            .expression_attribute_names("#plants", PLANT_COUNT)
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .send()
            .await?;
        Ok(())
    }

    /// Puts the plant if its id is free; else the stored plant, from the
    /// failed condition itself (no second read).
    async fn put(&self, owner: &Owner, new: &NewPlant) -> Result<Put, StoreError> {
        let mut item = item_key(owner, new.id);
        item.insert(
            NAME.to_owned(),
            AttributeValue::S(new.plant.name.as_str().to_owned()),
        );
        if let Some(tag) = &new.plant.tag {
            item.insert(TAG.to_owned(), AttributeValue::S(tag.as_str().to_owned()));
        }
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#id)")
            .expression_attribute_names("#id", ID.name)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let error = match put {
            Ok(_) => return Ok(Put::Written),
            Err(error) => error,
        };
        if let Some(PutItemError::ConditionalCheckFailedException(failed)) =
            error.as_service_error()
        {
            let stored = failed.item().ok_or_else(|| {
                StoreError::Unexpected("condition failed without the stored item".into())
            })?;
            return Ok(Put::Taken(plant_from_item(stored)?));
        }
        if refused_unwritten(&error) {
            return Ok(Put::Refused(error.into()));
        }
        Err(error.into())
    }

    /// The owner's plant of this id as it is now (a strongly consistent read).
    async fn stored(&self, owner: &Owner, id: PlantId) -> Result<Option<Plant>, StoreError> {
        let read = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(item_key(owner, id)))
            .consistent_read(true)
            .send()
            .await?;
        read.item().map(plant_from_item).transpose()
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
        deadline: Deadline,
    ) -> Result<Page, StoreError> {
        deadline.run(self.list_now(owner, limit, after)).await
    }

    async fn list_now(
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
                // Read your writes: a plant answered 200 is in the next listing.
                .consistent_read(true)
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

    /// A Query of the plant ids of one partition.
    fn query_partition(&self, owner: String) -> QueryFluentBuilder {
        let (condition, names, values) = plant_ids(&owner);
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
    }
}

/// What a put did: wrote the plant, found the id taken (the stored plant),
/// or was refused before writing anything (throttled); whatever else
/// happened (a timeout, DynamoDB's 5xx) may have written it, and is an
/// error.
enum Put {
    Written,
    Taken(Plant),
    Refused(StoreError),
}

impl From<Put> for Result<Created, StoreError> {
    fn from(put: Put) -> Self {
        match put {
            Put::Written => Ok(Created::New),
            Put::Taken(stored) => Ok(Created::AlreadyStored(stored)),
            Put::Refused(error) => Err(error),
        }
    }
}

/// The key condition of a Query for `owner`'s plants (with its attribute
/// names and values): the int64 range of ids only, whatever else the
/// partition may hold (an earlier build's counter, a stray item).
pub fn plant_ids(owner: &str) -> (String, HashMap<String, String>, Item) {
    let names = HashMap::from([
        ("#owner".to_owned(), OWNER.name.to_owned()),
        ("#id".to_owned(), ID.name.to_owned()),
    ]);
    let values = Item::from([
        (":owner".to_owned(), AttributeValue::S(owner.to_owned())),
        (":first".to_owned(), AttributeValue::N(i64::MIN.to_string())),
        (":last".to_owned(), AttributeValue::N(i64::MAX.to_string())),
    ]);
    (
        "#owner = :owner AND #id BETWEEN :first AND :last".to_owned(),
        names,
        values,
    )
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
pub fn counter_key(owner: &str) -> Item {
    Item::from([
        (
            OWNER.name.to_owned(),
            AttributeValue::S(counter_partition(owner)),
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

    /// Where a Query goes with the client configured for `endpoint`.
    async fn query_uri(endpoint: Option<&str>) -> String {
        let stop = StopBeforeSending::default();
        let https = Https::new(&Default::default()).unwrap();
        let config = client_config(&https, endpoint)
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

    #[tokio::test]
    async fn a_deadline_is_the_invocations_less_the_margin_and_at_most_the_budget() {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let near = |left: Duration, wanted: Duration| {
            let gap = left.abs_diff(wanted);
            assert!(
                gap < Duration::from_millis(50),
                "{left:?} against {wanted:?}"
            );
        };
        // No deadline, or one already past (an emulator's): the budget.
        for deadline_ms in [0, 600_000, now_ms - 1] {
            near(Deadline::for_invocation(deadline_ms).left(), STORE_BUDGET);
        }
        // Lambda's: what is left, less the margin, within the budget.
        near(
            Deadline::for_invocation(now_ms + 10_000).left(),
            STORE_BUDGET,
        );
        near(
            Deadline::for_invocation(now_ms + 1_500).left(),
            Duration::from_millis(1_500) - ANSWER_MARGIN,
        );
        near(
            Deadline::for_invocation(now_ms + 100).left(),
            Duration::ZERO,
        );
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
    async fn without_an_endpoint_the_client_goes_to_dynamodbs_regional_endpoint() {
        assert_eq!(
            query_uri(None).await,
            "https://dynamodb.eu-west-1.amazonaws.com/"
        );
        let local = "http://172.17.0.1:8000";
        assert_eq!(query_uri(Some(local)).await, "http://172.17.0.1:8000/");
    }
}
