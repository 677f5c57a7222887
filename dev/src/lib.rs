//! What the local stack and the tests need and the Lambda function never
//! does: signing keys and tokens ([`keys`]), and the plants table
//! ([`table`]). The function only verifies tokens and reads and writes an
//! existing table.

pub mod keys;
#[cfg(feature = "table")]
pub mod table;

pub use keys::{DevKey, unix_now};
#[cfg(feature = "table")]
pub use table::create_table;
