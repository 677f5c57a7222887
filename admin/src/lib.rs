//! The operator's commands: the table ([`table`]), [`recount`], and the
//! [`acceptance`] suite with Cognito test users ([`cognito`]).

pub mod acceptance;
pub mod cognito;
pub mod recount;
pub mod table;

pub use table::create_table;
