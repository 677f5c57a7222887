//! Any `limit` text: never panics; accepted values are 1..=LIMIT_MAX written
//! in ASCII digits only.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plant_store::domain::Limit;
use plant_store::domain::limits::LIMIT_MAX;

fuzz_target!(|text: &str| {
    if let Some(limit) = Limit::parse(text) {
        assert!((1..=LIMIT_MAX).contains(&limit.get()));
        assert!(text.bytes().all(|byte| byte.is_ascii_digit()));
    }
});
