//! Any request body: parsing into a NewPlant never panics, and what it
//! accepts satisfies every rule the contract gives for a plant.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plant_store::domain::NewPlant;
use plant_store::domain::limits::{NAME_MAX_CHARS, TAG_MAX_CHARS};

fuzz_target!(|body: &[u8]| {
    if let Ok(plant) = NewPlant::from_json(body) {
        let name = plant.plant.name.as_str();
        assert!((1..=NAME_MAX_CHARS).contains(&name.chars().count()));
        assert!(!name.trim().is_empty() && !name.chars().any(char::is_control));
        if let Some(tag) = &plant.plant.tag {
            assert!((1..=TAG_MAX_CHARS).contains(&tag.as_str().chars().count()));
            assert!(!tag.as_str().chars().any(char::is_control));
        }
    }
});
