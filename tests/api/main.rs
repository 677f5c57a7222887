//! The integration tests, in one binary (one link of the AWS SDK), a module
//! per area. Each runs the production handler against DynamoDB Local, which
//! `scripts/test` starts; `tests/logging.rs` is apart because it installs the
//! process-wide log subscriber.

mod auth;
mod concurrency;
mod contract;
mod events;
mod faults;
mod hostile;
mod pagination;
mod remote_keys;
