//! The table's layout, in one place: what an item of the plants table
//! holds, and how an owner's plants and count are keyed. What creates the
//! table (`plant-store-admin create-table`; `template.yaml` declares the
//! same key) and what reads it around the function (`recount`, the tests)
//! take it from here.
//!
//! Partition key `owner` (S, the token's `sub`), sort key `id` (N),
//! attributes `name` (S) and `tag` (S, absent when the plant has none).
//! Each owner's count is one item of its own partition, keyed by the owner
//! and a suffix that makes it longer than any owner ([`counter_partition`]),
//! with `id` 0 and `plants` (N). A plant's id is an int64: anything else in
//! an owner's partition (an earlier build's counter, a stray item) is no
//! plant, and is passed over where it is read ([`plant_id`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, KeyType, ScalarAttributeType};

use crate::domain::{NewPlant, Owner, Plant, PlantId, PlantName, PlantTag};

/// An item as the SDK reads and writes it.
pub type Item = HashMap<String, AttributeValue>;

/// One attribute of the table's primary key.
#[derive(Debug, Clone)]
pub struct KeyAttribute {
    pub name: &'static str,
    pub key_type: KeyType,
    pub attribute_type: ScalarAttributeType,
}

pub(super) const OWNER: KeyAttribute = KeyAttribute {
    name: "owner",
    key_type: KeyType::Hash,
    attribute_type: ScalarAttributeType::S,
};
pub(super) const ID: KeyAttribute = KeyAttribute {
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

/// The primary key of an owner's plant.
pub(super) fn item_key(owner: &Owner, id: PlantId) -> Item {
    Item::from([
        (
            OWNER.name.to_owned(),
            AttributeValue::S(owner.as_str().to_owned()),
        ),
        (ID.name.to_owned(), AttributeValue::N(id.to_string())),
    ])
}

/// The item that stores `new` for `owner`.
pub(super) fn plant_item(owner: &Owner, new: &NewPlant) -> Item {
    let mut item = item_key(owner, new.id);
    let name = new.plant.name.as_str().to_owned();
    item.insert(NAME.to_owned(), AttributeValue::S(name));
    if let Some(tag) = &new.plant.tag {
        item.insert(TAG.to_owned(), AttributeValue::S(tag.as_str().to_owned()));
    }
    item
}

/// A partition that no token can name (longer than any [`Owner`]), for a
/// read that must find nothing.
pub(super) fn nobodys_partition() -> String {
    COUNTER_SUFFIX.repeat(Owner::MAX_BYTES + 1)
}

/// The partition of an owner's counter item: the owner, then the suffix
/// repeated past [`Owner::MAX_BYTES`].
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
        (
            OWNER.name.to_owned(),
            AttributeValue::S(counter_partition(owner)),
        ),
        (ID.name.to_owned(), AttributeValue::N("0".to_owned())),
    ])
}

/// The id of the plant `item` stores; `None` if it is no plant (its `id` is
/// not an int64: a stray item, or an earlier build's counter).
pub fn plant_id(item: &Item) -> Option<PlantId> {
    let id = item.get(ID.name)?.as_n().ok()?;
    id.parse().ok().map(PlantId::new)
}

/// Reads a stored item back through the domain's constructors: the table is
/// trusted no more than a request body. The error says what is wrong.
pub(super) fn plant_from_item(item: &Item) -> Result<Plant, String> {
    let text = |attribute: &str| {
        item.get(attribute)
            .and_then(|value| value.as_s().ok())
            .cloned()
    };
    let corrupt = |what: &str| format!("stored item has {what}");
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
    use super::*;

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

    #[test]
    fn only_an_int64_id_is_a_plants() {
        let with_id = |id: &str| Item::from([(ID.name.to_owned(), AttributeValue::N(id.into()))]);
        assert_eq!(plant_id(&with_id("-7")), Some(PlantId::new(-7)));
        assert_eq!(
            plant_id(&with_id(&i64::MAX.to_string())),
            Some(PlantId::new(i64::MAX))
        );
        for stray in ["9223372036854775808", "-9223372036854775809", "1.5"] {
            assert_eq!(plant_id(&with_id(stray)), None, "{stray}");
        }
        assert_eq!(plant_id(&Item::new()), None);
    }
}
