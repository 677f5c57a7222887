//! The Plant Store API as an AWS Lambda function.
//!
//! A thin edge over the domain, each module depending only on those below
//! it: [`api`] is the edge (the event read by [`event`], the route table in
//! `route`, status codes, headers, the request's log and metrics lines),
//! [`auth`] the bearer-token verifier over the signing keys of [`jwks`],
//! [`store`] the DynamoDB adapter, [`domain`] the middle (parsing, the
//! limits, and the rule that the same plant again is a retry while other
//! content conflicts), and [`config`] what the environment says. `error`
//! maps every failure to the contract's Error body in one place; [`https`]
//! is the one HTTPS client that the key fetch and the store share; [`log`]
//! installs the log and, with [`xray`], X-Ray from the same spans.

#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod config;
pub mod domain;
mod error;
pub mod event;
pub mod https;
pub mod jwks;
pub mod log;
mod metrics;
mod response;
mod route;
pub mod store;
pub mod xray;
