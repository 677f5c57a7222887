//! The integration tests: one binary (one link of the SDK), a module an area.

// Each file here is a module: an operation's or a concern's. A new file
// joins with the crate's next build (adding an operation changes src/).
automod::dir!("tests/api");

/// The function's `bootstrap` under the Runtime API stand-in, logging JSON
/// (as template.yaml sets), with `vars`: `PLANT_STORE_BOOTSTRAP` (split at
/// spaces: the artifact under qemu-user), else this build's binary.
pub async fn start_function(
    app: &plant_store_testkit::TestApp,
    vars: &[(&str, &str)],
) -> plant_store_testkit::runtime_api::LambdaProcess {
    let command = match std::env::var("PLANT_STORE_BOOTSTRAP") {
        Ok(command) => command.split_whitespace().map(str::to_owned).collect(),
        Err(_) => vec![env!("CARGO_BIN_EXE_plant-store").to_owned()],
    };
    let mut env = app.function_env();
    for (name, value) in [("AWS_LAMBDA_LOG_FORMAT", "JSON")].iter().chain(vars) {
        env.set(name, value);
    }
    plant_store_testkit::runtime_api::LambdaProcess::start(&command, &env, None).await
}

/// The variables that take the function's keys from `url` (plain HTTP to
/// loopback allowed), not inline.
pub fn keys_from(url: &str) -> [(&'static str, &str); 3] {
    [("AUTH_JWKS", ""), ("AUTH_JWKS_URL", url), ("AUTH_ALLOW_LOOPBACK_HTTP", "true")]
}
