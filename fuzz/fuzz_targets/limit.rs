//! Any `limit` text: never panics; accepted values are 1..=1000 written in
//! ASCII digits only.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plant_store::domain::Limit;

fuzz_target!(|text: &str| {
    if let Some(limit) = Limit::parse(text) {
        assert!((1..=Limit::MAX).contains(&limit.get()));
        assert!(text.bytes().all(|byte| byte.is_ascii_digit()));
    }
});
