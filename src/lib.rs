//! The Plant Store API as an AWS Lambda function: a thin edge ([`api`],
//! reading the [`event`]) over the [`domain`], the bearer tokens ([`auth`],
//! [`jwks`]) and the DynamoDB adapter ([`store`]); ARCHITECTURE.md is the map.

#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod config;
pub mod domain;
pub mod error;
pub mod event;
pub mod https;
pub mod jwks;
pub mod log;
mod metrics;
mod plants;
pub mod route;
pub mod store;
pub mod xray;
