//! The operator's commands (`plant-store-admin`, `src/main.rs`): the plants
//! table for DynamoDB Local ([`table`]; in AWS, template.yaml makes it), the
//! per-owner counts recounted ([`recount`]), and the acceptance suite
//! against a running API ([`acceptance`], with Cognito test users from
//! [`cognito`]). The tests use them too; the function never links them.

pub mod acceptance;
pub mod cognito;
pub mod recount;
pub mod table;

pub use table::create_table;
