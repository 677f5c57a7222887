//! The table's layout, in one place (`plant-store-admin create-table` and
//! the tests read it too; `template.yaml` declares the same key).
//!
//! Partition key `owner` (S, the token's `sub`), sort key `id` (N); the
//! Plant's fields as its JSON has them (a string is S, a number N), an
//! absent one absent. Each owner's count is one item of its own partition,
//! keyed by the owner and a suffix that makes it longer than any owner
//! ([`counter_partition`]), with `id` 0 and `plants` (N). Anything in an
//! owner's partition whose `id` is no int64 is no plant, and is passed over
//! where it is read ([`plant_id`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, KeyType, ScalarAttributeType};
use serde_json::{Map, Value};

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

/// The item that stores `new` for `owner`: its key and the Plant's fields.
pub(super) fn plant_item(owner: &Owner, new: &NewPlant) -> Item {
    let mut item = item_key(owner, new.id);
    if let Ok(Value::Object(fields)) = serde_json::to_value(&new.plant) {
        for (name, value) in fields {
            let attribute = match value {
                Value::String(text) => AttributeValue::S(text),
                other => AttributeValue::N(other.to_string()),
            };
            item.insert(name, attribute);
        }
    }
    item
}

/// Reads a stored item back as a Plant by its shape (each field of its
/// type), not by today's rules for a request: what was accepted once stays
/// readable when a rule tightens (docs/contract.md). The error says what is
/// wrong.
pub(super) fn plant_from_item(item: &Item) -> Result<Plant, String> {
    let fields: Map<String, Value> = item
        .iter()
        .filter(|(name, _)| ![OWNER.name, ID.name].contains(&name.as_str()))
        .map(|(name, value)| {
            let value = match value {
                AttributeValue::S(text) => Value::String(text.clone()),
                AttributeValue::N(number) => number.parse().unwrap_or(Value::Null),
                _ => Value::Null,
            };
            (name.clone(), value)
        })
        .collect();
    serde_json::from_value(Value::Object(fields)).map_err(|error| format!("stored item: {error}"))
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
    let id = item.get(ID.name)?.as_n().ok()?;
    id.parse().ok().map(PlantId::new)
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
