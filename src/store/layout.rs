//! The table's layout, in one place (the admin tool, the tests and, through
//! `cargo test`, the templates hold to it): key `owner` (S, the token's `sub`)
//! and `id` (N), a plant's `name` and `tag` ([`StoredPlant`]); each owner's
//! count in its own partition ([`counter_partition`]); an `id` no int64 is no plant.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, KeyType, ScalarAttributeType};
use serde::Serialize;

use crate::domain::limits::MAX_SUBJECT_BYTES;
use crate::domain::{NewPlant, Owner, Plant, PlantId};

/// An item as the SDK reads and writes it.
pub type Item = HashMap<String, AttributeValue>;

/// One attribute of the table's primary key.
#[derive(Debug, Clone)]
pub struct KeyAttribute {
    pub name: &'static str,
    pub key_type: KeyType,
    pub attribute_type: ScalarAttributeType,
}

pub(super) const OWNER: KeyAttribute =
    KeyAttribute { name: "owner", key_type: KeyType::Hash, attribute_type: ScalarAttributeType::S };
pub(super) const ID: KeyAttribute =
    KeyAttribute { name: "id", key_type: KeyType::Range, attribute_type: ScalarAttributeType::N };
/// The table's primary key: the owner's partition, sorted by plant id.
pub const TABLE_KEY: [KeyAttribute; 2] = [OWNER, ID];
/// What follows the owner in its counter's partition key: longer than any
/// owner may be, so no owner's plants share that partition.
const COUNTER_SUFFIX: &str = "~";
/// The counter item's attribute: how many plants the owner has.
pub const PLANT_COUNT: &str = "plants";

/// The primary key of an owner's plant.
pub(super) fn item_key(owner: &Owner, id: PlantId) -> Item {
    Item::from([
        (OWNER.name.into(), AttributeValue::S(owner.as_str().into())),
        (ID.name.into(), AttributeValue::N(id.to_string())),
    ])
}

/// A plant as the table holds it, read attribute by attribute (`name` a
/// string, `tag` absent or a string, any other attribute passed over), and
/// answered as the API's Plant: what a request once stored, under the rules
/// of its day, is never checked against today's (docs/contract.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredPlant {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<String>,
}

impl StoredPlant {
    /// The plant `item` stores; `None` for an item of another shape
    /// (written by hand or by a migration), which is no plant of the API's.
    pub(super) fn read(item: &Item) -> Option<Self> {
        let text = |attribute| item.get(attribute).map(|value| value.as_s().ok().cloned());
        let tag = text("tag").map(|tag| tag.ok_or(())).transpose().ok()?;
        Some(Self { name: text("name")??, tag })
    }
}

impl From<&Plant> for StoredPlant {
    fn from(plant: &Plant) -> Self {
        let tag = plant.tag.as_ref().map(|tag| tag.as_str().to_owned());
        Self { name: plant.name.as_str().to_owned(), tag }
    }
}

/// The item that stores `new` for `owner`: its key and the plant's fields.
pub(super) fn plant_item(owner: &Owner, new: &NewPlant) -> Item {
    let StoredPlant { name, tag } = StoredPlant::from(&new.plant);
    let mut item = item_key(owner, new.id);
    item.insert("name".into(), AttributeValue::S(name));
    item.extend(tag.map(|tag| ("tag".into(), AttributeValue::S(tag))));
    item
}

/// A partition that no token can name (longer than any [`Owner`]), for a
/// read that must find nothing.
pub(super) fn nobodys_partition() -> String {
    COUNTER_SUFFIX.repeat(MAX_SUBJECT_BYTES + 1)
}

/// The partition of an owner's counter item: the owner, then the suffix
/// repeated past the longest owner.
pub fn counter_partition(owner: &str) -> String {
    format!("{owner}{}", nobodys_partition())
}

/// The owner whose count a partition holds, if it is a counter's partition.
pub fn counter_owner(partition: &str) -> Option<&str> {
    let owner = partition.strip_suffix(&nobodys_partition())?;
    (!owner.is_empty()).then_some(owner)
}

/// The key of an owner's counter item.
pub fn counter_key(owner: &str) -> Item {
    Item::from([
        (OWNER.name.into(), AttributeValue::S(counter_partition(owner))),
        (ID.name.into(), AttributeValue::N("0".into())),
    ])
}

/// The id of the plant `item` stores; `None` if it is no plant (its `id` is
/// not an int64: a stray item, or an earlier build's counter).
pub fn plant_id(item: &Item) -> Option<PlantId> {
    item.get(ID.name)?.as_n().ok()?.parse().ok().map(PlantId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_partition_is_no_owners_and_names_its_owner() {
        for owner in ["alice", "~", &"x".repeat(MAX_SUBJECT_BYTES)] {
            let partition = counter_partition(owner);
            assert!(Owner::parse(partition.clone()).is_none(), "too long for an owner");
            assert_eq!((counter_owner(&partition), counter_owner(owner)), (Some(owner), None));
        }
        assert_ne!(counter_partition("a~"), counter_partition("a"));
    }
}
