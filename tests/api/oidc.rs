//! A certified OpenID Provider run here (testkit's `oidc_provider`) before
//! the function's binary: from `AUTH_ISSUER` and `AUTH_AUDIENCE` alone, its
//! keys by discovery, its access tokens pass and its ID tokens never do,
//! also for the client id as audience; each reason on the log line.

use plant_store_testkit::oidc_provider::{CLIENT_ID, OidcProvider};
use plant_store_testkit::runtime_api::LambdaProcess;
use plant_store_testkit::{ApiGatewayEvent, TestApp, TestResponse};
use serde_json::{Value, json};

/// The API's audience at the provider: its resource indicator.
const API: &str = "https://plants.example";

/// The function with this issuer, audience and key set's URL (none: discovery).
async fn function(app: &TestApp, issuer: &str, audience: &str, jwks: &str) -> LambdaProcess {
    let vars = [("AUTH_ISSUER", issuer), ("AUTH_AUDIENCE", audience)];
    crate::start_function(app, &[&vars[..], &crate::keys_from(jwks)].concat()).await
}

/// The status of a GET (`post` false) or a POST with `token`, and the
/// reason on its log line, or the cause on the ERROR line before it.
async fn answer(function: &LambdaProcess, token: &str, post: bool) -> (u16, String) {
    let authorization = format!("Bearer {token}");
    let event = match post {
        true => ApiGatewayEvent::create_plant(&authorization, r#"{"id": 1, "name": "Fern"}"#),
        false => ApiGatewayEvent::list_plants(&authorization, ""),
    };
    let invoked = function.invoke(&event.event()).await;
    let status = TestResponse::from_lambda_response(&invoked.response).status;
    let lines = function.output().into_iter().filter_map(|line| serde_json::from_str(&line).ok());
    let mut of_this = lines.filter(|line: &Value| line["span"]["requestId"] == *invoked.request_id);
    let why = of_this.find_map(|line| Some(line.get("reason").or(line.get("detail"))?.clone()));
    assert!(!function.output().concat().contains(token), "the token is in the log");
    (status, why.as_ref().and_then(Value::as_str).unwrap_or_default().to_owned())
}

#[tokio::test]
async fn a_certified_providers_access_tokens_pass_and_its_id_tokens_never() {
    let provider = OidcProvider::start(API);
    let (issuer, machine) = (provider.issuer.clone(), &provider.machine);
    let (access, id) = (&provider.access, &provider.id);
    let app = TestApp::new().await;

    let found = function(&app, &issuer, API, "").await;
    assert_eq!(answer(&found, access, true).await, (200, String::new()));
    assert_eq!(answer(&found, machine, false).await, (200, String::new()));
    let (status, reason) = answer(&found, id, true).await;
    assert_eq!((status, reason.as_str()), (401, "its typ None is not at+jwt (AUTH_TOKEN_TYPE)"));

    // The client id as the audience, an easy mistake (it is an ID token's
    // `aud`): the ID token is refused still, the access token for its `aud`.
    let client_audience = function(&app, &issuer, CLIENT_ID, "").await;
    let (status, reason) = answer(&client_audience, id, false).await;
    assert_eq!((status, reason.as_str()), (401, "its typ None is not at+jwt (AUTH_TOKEN_TYPE)"));
    let (status, reason) = answer(&client_audience, access, false).await;
    let wanted = format!("its aud \"{API}\" does not hold AUTH_AUDIENCE \"{CLIENT_ID}\"");
    assert_eq!((status, reason), (401, wanted));

    // A trailing slash on the issuer: discovery names another (503); given
    // the key set's URL, the token's `iss` is another (401).
    let slashed = format!("{issuer}/");
    let untrusted = function(&app, &slashed, API, "").await;
    let (status, cause) = answer(&untrusted, access, false).await;
    assert_eq!(status, 503, "{cause}");
    let wanted = format!("its issuer \"{issuer}\" is not AUTH_ISSUER \"{slashed}\" exactly");
    assert!(cause.contains(&wanted) && cause.contains("openid-configuration"), "{cause}");
    let given = function(&app, &slashed, API, &format!("{issuer}/jwks")).await;
    let (status, reason) = answer(&given, access, false).await;
    let wanted = format!("its iss \"{issuer}\" is not AUTH_ISSUER \"{slashed}\"");
    assert_eq!((status, reason), (401, wanted));
    assert_eq!(app.stored_items().await, [json!({"owner": "alice", "id": 1, "name": "Fern"})]);
}
