//! The DynamoDB adapter: plants in, plants out, and the bound on plants per
//! owner (docs/contract.md says how it stays strict in two writes).

use std::num::NonZeroU32;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};

use crate::domain::{Limit, NewPlant, Owner, PlantId};

pub mod client;
mod error;
pub mod layout;
mod xray;

pub use client::{MAX_ATTEMPTS, STORE_BUDGET, client_config};
pub use error::StoreError;
use error::{condition_failed, refused_unwritten};
pub use layout::StoredPlant;
use layout::{
    ID, OWNER, PLANT_COUNT, counter_key, item_key, nobodys_partition, plant_id, plant_item,
};

/// The most that warming the connection may add to init when DynamoDB is
/// slow or unreachable.
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(1);

/// What a create did: wrote the plant; found it stored already (the same
/// plant again is a safe retry: docs/contract.md); found the id taken by
/// anything else; or found the owner at the bound (the most plants allowed).
#[derive(Debug, PartialEq, Eq)]
pub enum Created {
    New,
    Retry,
    Conflict,
    LimitReached(u32),
}

/// The most a page's plants may take as JSON: the invocation's answer holds
/// the page escaped in a JSON string (each byte at most two), within
/// Lambda's 6 MB response payload.
const MAX_PAGE_BYTES: usize = 3_000_000;

/// The least a listing's next call reads once it has met an item that is
/// no plant (written outside the API): a page of the largest size.
const READ_AHEAD: usize = crate::domain::limits::LIMIT_MAX;

/// One page of a listing.
#[derive(Debug)]
pub struct Page {
    pub plants: Vec<StoredPlant>,
    /// Set when more plants exist: the id the next page starts after.
    pub next_after: Option<PlantId>,
}

#[derive(Clone)]
pub struct PlantStore {
    client: Client,
    table: String,
    /// How many plants one owner may store; `None`: no bound.
    bound: Option<NonZeroU32>,
}

impl PlantStore {
    /// `max_plants_per_owner` 0 turns the bound off.
    pub fn new(client: Client, table: impl Into<String>, max_plants_per_owner: u32) -> Self {
        Self { client, table: table.into(), bound: NonZeroU32::new(max_plants_per_owner) }
    }

    /// The store with each call an X-Ray subsegment (`xray.rs`), only where
    /// X-Ray is on.
    pub fn traced(self) -> Self {
        let traced = self.client.config().to_builder();
        let traced = traced.interceptor(xray::Traced(self.table.clone()));
        Self { client: Client::from_conf(traced.build()), ..self }
    }

    /// Connects to DynamoDB in init (full CPU), so that the first request
    /// does not pay for it: a Query of a partition no token can name; a
    /// failure is logged, never fatal, within [`WARM_UP_TIMEOUT`].
    pub async fn warm_up(&self) {
        let query = self.query_partition(nobodys_partition()).limit(1).send();
        match tokio::time::timeout(WARM_UP_TIMEOUT, query).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!(error = ?StoreError::from(error), "warming the DynamoDB connection failed")
            }
            Err(_) => tracing::warn!("warming the DynamoDB connection timed out"),
        }
    }

    /// Stores a plant unless the owner has one with that id (never
    /// overwrites) or has the most plants allowed; a retry of a stored plant
    /// is answered, at the bound too.
    pub async fn create(&self, owner: &Owner, new: &NewPlant) -> Result<Created, StoreError> {
        let Some(bound) = self.bound else { return self.put(owner, new).await.0 };
        if !self.take_place(owner, bound).await? {
            // At the bound: a retry of a stored plant, a conflict, or the
            // bound, told apart by the stored item as it is now.
            return Ok(match self.stored(owner, new.id).await? {
                Some(stored) => taken(stored.as_ref(), new),
                None => Created::LimitReached(bound.get()),
            });
        }
        let (created, unwritten) = self.put(owner, new).await;
        if unwritten && let Err(error) = self.give_place_back(owner).await {
            // The count stays one high: the bound is strict still.
            tracing::warn!(?error, "the count could not be given back");
        }
        created
    }

    // Each SDK call's future (several KB) is boxed where it is made, so that
    // the request's futures around it stay small, cheap to move.

    /// Takes one place in the owner's count, if it is below `bound`.
    async fn take_place(&self, owner: &Owner, bound: NonZeroU32) -> Result<bool, StoreError> {
        let taken = Box::pin(
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(counter_key(owner.as_str())))
                .update_expression("SET #plants = if_not_exists(#plants, :zero) + :one")
                .condition_expression("attribute_not_exists(#plants) OR #plants < :max")
                .expression_attribute_names("#plants", PLANT_COUNT)
                .expression_attribute_values(":zero", AttributeValue::N("0".into()))
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .expression_attribute_values(":max", AttributeValue::N(bound.to_string()))
                .send(),
        )
        .await;
        match taken {
            Ok(_) => Ok(true),
            Err(error) if condition_failed(&error) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// Gives back a place the count took for a plant that was not written.
    async fn give_place_back(&self, owner: &Owner) -> Result<(), StoreError> {
        Box::pin(
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(counter_key(owner.as_str())))
                .update_expression("SET #plants = #plants - :one")
                .condition_expression("#plants > :zero")
                .expression_attribute_names("#plants", PLANT_COUNT)
                .expression_attribute_values(":zero", AttributeValue::N("0".into()))
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .send(),
        )
        .await?;
        Ok(())
    }

    /// Puts the plant if its id is free, else the failed condition's item
    /// decides; beside the outcome, whether nothing was written (the id
    /// taken, or any 4xx; a timeout or a 5xx may have written it).
    async fn put(&self, owner: &Owner, new: &NewPlant) -> (Result<Created, StoreError>, bool) {
        let put = Box::pin(
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(plant_item(owner, new)))
                .condition_expression("attribute_not_exists(#id)")
                .expression_attribute_names("#id", ID.name)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send(),
        )
        .await;
        let Err(error) = put else { return (Ok(Created::New), false) };
        if let Some(PutItemError::ConditionalCheckFailedException(failed)) =
            error.as_service_error()
        {
            let stored = failed.item().and_then(StoredPlant::read);
            return (Ok(taken(stored.as_ref(), new)), true);
        }
        let unwritten = refused_unwritten(&error);
        (Err(error.into()), unwritten)
    }

    /// What the owner's item of this id holds now (a strongly consistent
    /// read); `None` if there is none.
    async fn stored(
        &self,
        owner: &Owner,
        id: PlantId,
    ) -> Result<Option<Option<StoredPlant>>, StoreError> {
        let read = Box::pin(
            self.client
                .get_item()
                .table_name(&self.table)
                .set_key(Some(item_key(owner, id)))
                .consistent_read(true)
                .send(),
        )
        .await?;
        Ok(read.item().map(StoredPlant::read))
    }

    /// A page of the owner's plants by id after `after` (at most `limit` and
    /// [`MAX_PAGE_BYTES`]), and where the next starts: `limit + 1` items read
    /// (the extra one tells whether more exist) across DynamoDB's 1 MB pages.
    pub async fn list(
        &self,
        owner: &Owner,
        limit: Limit,
        after: Option<PlantId>,
    ) -> Result<Page, StoreError> {
        let wanted = limit.get();
        let mut rows: Vec<(PlantId, StoredPlant)> = Vec::with_capacity(wanted);
        let (mut bytes, mut more, mut passed_over) = (0, false, false);
        let mut start_key = after.map(|id| item_key(owner, id));
        'pages: loop {
            // Past an item that is no plant, read ahead: a run of them
            // costs a call a READ_AHEAD items (or 1 MB), not a call each.
            let floor = if passed_over { READ_AHEAD } else { 0 };
            let remaining = i32::try_from((wanted + 1 - rows.len()).max(floor)).unwrap_or(i32::MAX);
            let query = self
                .query_partition(owner.as_str().to_owned())
                // Read your writes: a plant answered 200 is in the next listing.
                .consistent_read(true)
                .limit(remaining)
                .set_exclusive_start_key(start_key);
            let page = Box::pin(query.send()).await?;
            for item in page.items() {
                let Some(id) = plant_id(item) else {
                    passed_over = true;
                    continue;
                };
                let Some(plant) = StoredPlant::read(item) else {
                    tracing::warn!(%id, "an item of the owner's is no plant; the listing passes it over");
                    passed_over = true;
                    continue;
                };
                bytes += json_bytes(&plant);
                if rows.len() == wanted || (bytes > MAX_PAGE_BYTES && !rows.is_empty()) {
                    more = true;
                    break 'pages;
                }
                rows.push((id, plant));
            }
            let Some(key) = page.last_evaluated_key else { break };
            start_key = Some(key);
        }
        let next_after = rows.last().map(|(id, _)| *id).filter(|_| more);
        let plants = rows.into_iter().map(|(_, plant)| plant).collect();
        Ok(Page { plants, next_after })
    }

    /// A Query of one partition: its key alone, so that DynamoDB does no
    /// work beyond reading the items (what is no plant is passed over by the
    /// reader, [`plant_id`]).
    fn query_partition(&self, partition: String) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#owner = :owner")
            .expression_attribute_names("#owner", OWNER.name)
            .expression_attribute_values(":owner", AttributeValue::S(partition))
    }
}

/// A create of `new` whose id holds `stored` (`None`: an item that is no
/// plant): the same plant again is a retry; anything else, a conflict.
fn taken(stored: Option<&StoredPlant>, new: &NewPlant) -> Created {
    match stored.is_some_and(|stored| *stored == StoredPlant::from(&new.plant)) {
        true => Created::Retry,
        false => Created::Conflict,
    }
}

/// The bytes of `plant` as JSON, and one for the comma after it in a page.
fn json_bytes(plant: &StoredPlant) -> usize {
    serde_json::to_vec(plant).map_or(0, |json| json.len()) + 1
}
