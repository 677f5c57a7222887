//! `sam build`'s arm64 artifact in the Lambda container under `sam local
//! start-api`, SAM's emulation of the HTTP API in front of the real
//! `bootstrap` (`sam local invoke` of every HTTP API event is in
//! [`crate::events`]). SAM does not emulate JWT authorizers: the function
//! verifies tokens itself, so its 401s hold here too.
//!
//! These need what the full run (`cargo xtask test`) sets up
//! (`SamLocal::prepare`): plain `cargo test` reports them ignored, with the reason,
//! and the full run runs them by name.

use plant_store_testkit::sam_local::{SamApi, SamLocal};
use plant_store_testkit::{
    ApiGatewayEvent, CHALLENGE, INVALID_TOKEN, TestApp, TestResponse, bearer, keys,
};
use serde_json::{Value, json};

/// `sam local` as the full run prepared it.
pub fn prepared_sam_local() -> SamLocal {
    SamLocal::from_env().unwrap_or_else(|reason| panic!("sam local is not prepared: {reason}"))
}

fn create(owner: &str, body: &Value) -> ApiGatewayEvent {
    ApiGatewayEvent::create_plant(&bearer(owner), &body.to_string())
}

/// The target of a `Link: <target>; rel="next"` header.
fn next_link(response: &TestResponse) -> Option<String> {
    let link = response.header("link")?;
    let target = link.strip_prefix('<')?.split_once(">; rel=\"next\"")?.0;
    Some(target.to_owned())
}

fn assert_json_200(response: &TestResponse, body: Value) {
    assert_eq!(response.status, 200, "body: {}", response.body);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(response.body, body);
}

#[tokio::test]
#[ignore = "needs sam build's artifact and a container engine: scripts/test prepares them and runs it"]
async fn the_contract_holds_through_sam_local_start_api() {
    let sam = prepared_sam_local();
    let app = TestApp::new().await;
    let api = SamApi::start(&sam, &app.function_env(), &[]);

    let plants = [
        json!({"id": 3, "name": "Monstera", "tag": "tropical"}),
        json!({"id": 1, "name": "Fern"}),
        json!({"id": 2, "name": "Aloe", "tag": "succulent"}),
    ];
    for plant in &plants {
        let mut answer = plant.clone();
        answer.as_object_mut().unwrap().remove("id");
        assert_json_200(&api.send(create("alice", plant)).await, answer);
    }
    // An identical retry is answered again; other content for the id is 409.
    let retry = api.send(create("alice", &plants[0])).await;
    assert_json_200(&retry, json!({"name": "Monstera", "tag": "tropical"}));
    api.send(create("alice", &json!({"id": 3, "name": "Cactus"}))).await.assert_error(409, "id 3");

    pages_to_the_end(&api).await;
    rejections(&api).await;

    // Another owner sees nothing of alice's.
    let bob = api.send(ApiGatewayEvent::list_plants(&bearer("bob"), "")).await;
    assert_json_200(&bob, json!([]));

    // The table holds alice's three plants as first written, and nothing else.
    let stored: Vec<Value> = app.stored_items().await;
    assert_eq!(
        stored,
        vec![
            json!({"owner": "alice", "id": 1, "name": "Fern"}),
            json!({"owner": "alice", "id": 2, "name": "Aloe", "tag": "succulent"}),
            json!({"owner": "alice", "id": 3, "name": "Monstera", "tag": "tropical"}),
        ]
    );
}

/// GET at limit 2 and then through each `Link` until there is none.
async fn pages_to_the_end(api: &SamApi<'_>) {
    let mut pages = Vec::new();
    let mut next = Some("/plants?limit=2".to_owned());
    while let Some(target) = next {
        let request =
            ApiGatewayEvent::new("GET", &target).header("authorization", &bearer("alice"));
        let response = api.send(request).await;
        assert_eq!(response.status, 200, "{target}: {}", response.body);
        assert_eq!(response.header("content-type"), Some("application/json"));
        next = next_link(&response);
        pages.push(response.body);
        assert!(pages.len() <= 2, "more pages than plants: {pages:?}");
    }
    assert_eq!(
        pages,
        vec![
            json!([{"name": "Fern"}, {"name": "Aloe", "tag": "succulent"}]),
            json!([{"name": "Monstera", "tag": "tropical"}]),
        ]
    );
}

/// Every kind of rejection, each with its status, headers and Error body.
async fn rejections(api: &SamApi<'_>) {
    let alice = bearer("alice");
    api.send(create("alice", &json!({"id": 4}))).await.assert_error(400, "name");
    api.send(ApiGatewayEvent::list_plants(&alice, "limit=0")).await.assert_error(400, "limit");

    let missing = api.send(ApiGatewayEvent::new("GET", "/plants")).await;
    missing.assert_error(401, "token");
    assert_eq!(missing.header("www-authenticate"), Some(CHALLENGE));
    // A valid signature from another issuer.
    let forged = keys().es256().token("https://someone.else", None, "alice", 3600).unwrap();
    let invalid = api.send(ApiGatewayEvent::list_plants(&format!("Bearer {forged}"), "")).await;
    invalid.assert_error(401, "token");
    assert_eq!(invalid.header("www-authenticate"), Some(INVALID_TOKEN));

    let unknown = ApiGatewayEvent::new("GET", "/gardens").header("authorization", &alice);
    api.send(unknown).await.assert_error(404, "path");
    let delete = ApiGatewayEvent::new("DELETE", "/plants").header("authorization", &alice);
    let not_allowed = api.send(delete).await;
    not_allowed.assert_error(405, "DELETE");
    assert_eq!(not_allowed.header("allow"), Some("GET, POST"));

    let large = json!({"id": 5, "name": "x".repeat(17 * 1024)});
    api.send(create("alice", &large)).await.assert_error(413, "16384 bytes");
    let text = ApiGatewayEvent::new("POST", "/plants")
        .header("authorization", &alice)
        .header("content-type", "text/plain")
        .body(r#"{"id": 6, "name": "Ivy"}"#);
    api.send(text).await.assert_error(415, "Content-Type");

    // CORS is off by default: a preflight is the function's, a 405, and no
    // origin is admitted.
    let preflight = api.send(cors_preflight("https://app.example.com")).await;
    preflight.assert_error(405, "OPTIONS");
    assert_eq!(preflight.header("access-control-allow-origin"), None);
}

fn cors_preflight(origin: &str) -> ApiGatewayEvent {
    ApiGatewayEvent::new("OPTIONS", "/plants")
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization,content-type")
}

#[tokio::test]
#[ignore = "needs sam build's artifact and a container engine: scripts/test prepares them and runs it"]
async fn cors_admits_the_configured_origins_only() {
    let sam = prepared_sam_local();
    let app = TestApp::new().await;
    let origin = "https://app.example.com";
    let api = SamApi::start(
        &sam,
        &app.function_env(),
        &["CorsAllowedOrigins=https://app.example.com,http://localhost:5173"],
    );

    // API Gateway answers the preflight of a listed origin itself.
    let (status, headers, _) = api.send_raw(cors_preflight(origin)).await.unwrap();
    assert_eq!(status, 200);
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    assert_eq!(header("access-control-allow-origin"), Some(origin));
    let methods = header("access-control-allow-methods").unwrap_or_default();
    assert!(methods.contains("POST") && methods.contains("GET"), "{methods}");
    let allowed = header("access-control-allow-headers").unwrap_or_default();
    assert!(allowed.contains("authorization"), "{allowed}");
    assert_eq!(header("access-control-allow-credentials"), None);

    // The function's answers carry the origin for a listed origin only.
    let listed = ApiGatewayEvent::list_plants(&bearer("alice"), "").header("origin", origin);
    let response = api.send(listed).await;
    assert_json_200(&response, json!([]));
    assert_eq!(response.header("access-control-allow-origin"), Some(origin));
    let (_, other, _) = api.send_raw(cors_preflight("https://evil.example")).await.unwrap();
    assert_eq!(other.get("access-control-allow-origin"), None);
    let unlisted =
        ApiGatewayEvent::list_plants(&bearer("alice"), "").header("origin", "https://evil.example");
    assert_eq!(api.send(unlisted).await.header("access-control-allow-origin"), None);
}
