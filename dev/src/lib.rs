//! What the local stack, the tests and operators need and the Lambda
//! function never does: signing keys and tokens ([`keys`]), the plants
//! table ([`table`]), the per-owner counts recounted ([`recount`]),
//! and the acceptance suite against a running API ([`acceptance`], with
//! Cognito test users from [`cognito`]). The function only verifies tokens
//! and reads and writes an existing table.

#[cfg(feature = "acceptance")]
pub mod acceptance;
#[cfg(feature = "acceptance")]
pub mod cognito;
pub mod keys;
#[cfg(feature = "table")]
pub mod recount;
#[cfg(feature = "table")]
pub mod table;

pub use keys::{DevKey, unix_now};
#[cfg(feature = "table")]
pub use table::create_table;
