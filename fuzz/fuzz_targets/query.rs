//! Any `limit` and `cursor` text: an accepted limit is 1..=LIMIT_MAX in
//! ASCII digits, an accepted cursor encodes back to the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use plant_store::domain::limits::LIMIT_MAX;
use plant_store::domain::{Cursor, Limit};

fuzz_target!(|texts: (&str, &str)| {
    let (limit, cursor) = texts;
    if let Some(parsed) = Limit::parse(limit) {
        assert!((1..=LIMIT_MAX).contains(&parsed.get()));
        assert!(limit.bytes().all(|byte| byte.is_ascii_digit()));
    }
    if let Some(parsed) = Cursor::parse(cursor) {
        assert_eq!(parsed.encode(), cursor);
    }
});
