//! Any `limit` and `cursor` text: never panics; an accepted limit is
//! 1..=LIMIT_MAX in ASCII digits only, and an accepted cursor is one the API
//! would issue (it encodes back to exactly the same text).
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
