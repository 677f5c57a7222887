//! Any `cursor` text: never panics, and only a cursor the API would issue is
//! accepted (it encodes back to exactly the same text).
#![no_main]

use libfuzzer_sys::fuzz_target;
use plant_store::domain::Cursor;

fuzz_target!(|text: &str| {
    if let Some(cursor) = Cursor::parse(text) {
        assert_eq!(cursor.encode(), text);
    }
});
