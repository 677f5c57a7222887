//! `plant-store-admin recount`: sets each owner's plant count to the plants
//! the owner has (docs/operating.md); a dry run unless told to apply.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::AttributeValue;
use plant_store::store::layout::{PLANT_COUNT, TABLE_KEY, counter_key, counter_owner, plant_id};

/// What a recount found and did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub owners: usize,
    pub plants: u64,
    /// Owners whose count was already right.
    pub right: usize,
    /// Owners whose count was set (or, in a dry run, would be).
    pub changes: Vec<Change>,
}

/// An owner, the count found, and the plants.
pub type Change = (String, Option<u64>, u64);

fn failed(error: impl std::error::Error) -> String {
    DisplayErrorContext(error).to_string()
}

/// Recounts `owner`'s plants, or every owner's; sets the counts when `apply`.
pub async fn recount(
    client: &Client,
    table: &str,
    owner: Option<&str>,
    apply: bool,
) -> Result<Summary, String> {
    let plants = match owner {
        Some(owner) => BTreeMap::from([(owner.to_owned(), count_one(client, table, owner).await?)]),
        None => count_all(client, table).await?,
    };
    let mut summary =
        Summary { owners: plants.len(), plants: plants.values().sum(), ..Summary::default() };
    for (owner, plants) in plants {
        let counted = read_count(client, table, &owner).await?;
        if counted == Some(plants) || (counted.is_none() && plants == 0) {
            summary.right += 1;
            continue;
        }
        let change = (owner, counted, plants);
        if apply {
            set_count(client, table, &change).await?;
        }
        summary.changes.push(change);
    }
    Ok(summary)
}

/// Every owner's plants and count, by a paged scan of the keys.
async fn count_all(client: &Client, table: &str) -> Result<BTreeMap<String, u64>, String> {
    let [owner_key, id_key] = [TABLE_KEY[0].name, TABLE_KEY[1].name];
    let mut owners = BTreeMap::new();
    let mut pages = client
        .scan()
        .table_name(table)
        .projection_expression("#owner, #id")
        .expression_attribute_names("#owner", owner_key)
        .expression_attribute_names("#id", id_key)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for item in page.map_err(failed)?.items() {
            let Some(Ok(partition)) = item.get(owner_key).map(AttributeValue::as_s) else {
                continue;
            };
            if let Some(owner) = counter_owner(partition) {
                owners.entry(owner.to_owned()).or_insert(0);
            } else if plant_id(item).is_some() {
                *owners.entry(partition.clone()).or_insert(0) += 1;
            }
        }
    }
    Ok(owners)
}

/// One owner's plants, by a paged read of its partition's keys.
async fn count_one(client: &Client, table: &str, owner: &str) -> Result<u64, String> {
    let [owner_key, id_key] = [TABLE_KEY[0].name, TABLE_KEY[1].name];
    let mut pages = client
        .query()
        .table_name(table)
        .key_condition_expression("#owner = :owner")
        .projection_expression("#id")
        .expression_attribute_names("#owner", owner_key)
        .expression_attribute_names("#id", id_key)
        .expression_attribute_values(":owner", AttributeValue::S(owner.to_owned()))
        .into_paginator()
        .send();
    let mut plants = 0;
    while let Some(page) = pages.next().await {
        let page = page.map_err(failed)?;
        plants += page.items().iter().filter(|item| plant_id(item).is_some()).count() as u64;
    }
    Ok(plants)
}

async fn read_count(client: &Client, table: &str, owner: &str) -> Result<Option<u64>, String> {
    let read = client.get_item().table_name(table).set_key(Some(counter_key(owner)));
    let read = read.consistent_read(true).send().await.map_err(failed)?;
    let count = read.item().and_then(|item| item.get(PLANT_COUNT)?.as_n().ok());
    Ok(count.and_then(|count| count.parse().ok()))
}

/// Sets the count, only if it is still what was read: a create that took a
/// place meanwhile makes this owner's recount fail rather than be lost.
async fn set_count(client: &Client, table: &str, change: &Change) -> Result<(), String> {
    let (owner, counted, plants) = change;
    let update = client
        .update_item()
        .table_name(table)
        .set_key(Some(counter_key(owner)))
        .update_expression("SET #plants = :plants")
        .expression_attribute_names("#plants", PLANT_COUNT)
        .expression_attribute_values(":plants", AttributeValue::N(plants.to_string()));
    let update = match *counted {
        Some(counted) => update
            .condition_expression("#plants = :counted")
            .expression_attribute_values(":counted", AttributeValue::N(counted.to_string())),
        None => update.condition_expression("attribute_not_exists(#plants)"),
    };
    update.send().await.map_err(|error| {
        let failed = failed(error);
        format!("{owner}'s count changed while recounted (a create?); run again: {failed}")
    })?;
    Ok(())
}
