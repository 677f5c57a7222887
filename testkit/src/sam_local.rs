//! The artifact through `sam local invoke`, as the full run prepared it.

use plant_store_local_support::function::Env;
pub use plant_store_local_support::sam_local::SamLocal;
use plant_store_local_support::tools::temp_dir;

use crate::TestResponse;

/// `sam local` as the full run prepared it.
pub fn prepared() -> SamLocal {
    SamLocal::from_env().unwrap_or_else(|reason| panic!("sam local is not prepared: {reason}"))
}

/// `sam local invoke` of `event`: the function's response.
pub async fn invoke(sam: &SamLocal, event: &str, env: &Env) -> TestResponse {
    let dir = temp_dir("sam-invoke").unwrap();
    let response = sam.invoke(event, env, dir.path());
    TestResponse::from_lambda_response(&response.unwrap_or_else(|error| panic!("{error}")))
}
