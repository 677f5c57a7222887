//! The Plant Store API as an AWS Lambda function.
//!
//! Ports and adapters, kept small: [`http`] is the edge (routing, status
//! codes, headers), [`domain`] the middle, [`store`] the DynamoDB adapter and
//! [`auth`] the bearer-token verifier. [`error`] maps every failure to the
//! contract's Error body in one place.

pub mod auth;
pub mod config;
pub mod devkeys;
pub mod domain;
pub mod error;
pub mod http;
pub mod jwks;
pub mod metrics;
pub mod store;
