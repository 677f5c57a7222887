//! What AWS runs around the function, stood in for on 127.0.0.1:
//! [`runtime_api`], the Lambda Runtime API that starts the function's
//! binary and hands it events (the tests' and the benchmark's), on
//! [`http_server`], the one HTTP/1.1 server of every stand-in here and in
//! the test kit; and [`fault_proxy`], a path to DynamoDB Local that injects
//! faults (the tests') and records the calls (the benchmark prices them);
//! and [`xray_daemon`], the X-Ray daemon's UDP end, which checks and keeps
//! the segment documents the function sends.

pub mod fault_proxy;
pub mod http_server;
pub mod runtime_api;
pub mod xray_daemon;
