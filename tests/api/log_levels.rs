//! No log level writes a credential: the function's binary at TRACE, the
//! most verbose level Lambda's log settings offer, serves a request, and
//! neither the bearer token nor the AWS credentials appear in its output.

use plant_store_testkit::{ApiGatewayEvent, TestApp, TestResponse, bearer};

#[tokio::test]
async fn at_trace_the_output_holds_no_token_and_no_credential() {
    let app = TestApp::new().await;
    for format in ["JSON", "Text"] {
        let vars = [("AWS_LAMBDA_LOG_LEVEL", "TRACE"), ("AWS_LAMBDA_LOG_FORMAT", format)];
        let function = crate::start_function(&app, &vars).await;
        let authorization = bearer("alice");
        let create = ApiGatewayEvent::create_plant(&authorization, r#"{"id": 1, "name": "Fern"}"#);
        let answer = function.invoke(&create.event()).await;
        assert_eq!(TestResponse::from_lambda_response(&answer.response).status, 200);
        let output = function.output().join("\n");
        assert!(output.contains("\"request\"") || output.contains("request"), "{output}");
        let token = authorization.trim_start_matches("Bearer ");
        // The token's signature alone is as good as the token to a thief.
        let signature = token.rsplit('.').next().unwrap();
        for (what, secret) in [("token", token), ("token signature", signature)] {
            assert!(!output.contains(secret), "{format}: the {what} is in the log");
        }
        for (name, value) in app.function_env().vars() {
            if name.starts_with("AWS_SECRET") || name.starts_with("AWS_SESSION") {
                assert!(!output.contains(value.as_str()), "{format}: {name} is in the log");
            }
        }
    }
}
