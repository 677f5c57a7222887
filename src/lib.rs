//! The Plant Store API as an AWS Lambda function.
//!
//! A thin edge over the domain, each module depending only on those below
//! it: [`http`] is the edge (the route table in `route`, status codes,
//! headers, the request log), [`auth`] the bearer-token verifier over the
//! signing keys of [`jwks`], [`store`] the DynamoDB adapter, [`domain`] the
//! middle (parsing, and the rule that the same plant again is a retry while
//! other content conflicts), and [`config`] what the environment says.
//! `error` maps every failure to the contract's Error body in one place;
//! [`https`] is the one HTTPS client that the key fetch and the store share;
//! [`trace`] records their calls, and the handler's steps, for X-Ray.
//! The store and the edge over it need the `dynamodb` feature (on by
//! default); the development tool's keys build the rest alone.

pub mod auth;
pub mod config;
pub mod domain;
#[cfg(feature = "dynamodb")]
mod error;
#[cfg(feature = "dynamodb")]
pub mod event;
#[cfg(feature = "dynamodb")]
pub mod http;
pub mod https;
pub mod jwks;
pub mod log;
#[cfg(feature = "dynamodb")]
mod metrics;
#[cfg(feature = "dynamodb")]
mod response;
#[cfg(feature = "dynamodb")]
mod route;
#[cfg(feature = "dynamodb")]
pub mod store;
// Without the store and the edge, only the key fetch records into it.
#[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
pub mod trace;
