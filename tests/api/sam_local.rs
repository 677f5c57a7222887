//! `sam build`'s artifact under `sam local start-api`: one smoke run of what
//! only SAM's emulation of the HTTP API shows (a create, pages through
//! `Link`, the CORS preflight API Gateway answers itself); the full run
//! prepares `sam local` and runs it by name.

use plant_store_testkit::sam_local::{SamApi, SamLocal};
use plant_store_testkit::{ApiGatewayEvent, TestApp, bearer};
use serde_json::json;

/// `sam local` as the full run prepared it.
pub(crate) fn prepared_sam_local() -> SamLocal {
    SamLocal::from_env().unwrap_or_else(|reason| panic!("sam local is not prepared: {reason}"))
}

#[tokio::test]
#[ignore = "needs sam build's artifact and a container engine: scripts/test prepares them and runs it"]
async fn creates_pages_and_preflights_through_sam_local_start_api() {
    let sam = prepared_sam_local();
    let app = TestApp::new().await;
    let origin = "https://app.example.com";
    let api = SamApi::start(&sam, &app.function_env(), &[&format!("CorsAllowedOrigins={origin}")]);

    for (id, name) in [(2, "Aloe"), (1, "Fern")] {
        let plant = json!({"id": id, "name": name}).to_string();
        let created = api.send(ApiGatewayEvent::create_plant(&bearer("alice"), &plant)).await;
        assert_eq!((created.status, created.body), (200, json!({"name": name})));
    }
    let first = api.send(ApiGatewayEvent::list_plants(&bearer("alice"), "limit=1")).await;
    assert_eq!((first.status, &first.body), (200, &json!([{"name": "Fern"}])));
    let link = first.header("link").expect("a Link to the next page");
    let next = link.strip_prefix('<').and_then(|link| link.split_once(">; rel=\"next\""));
    let get =
        ApiGatewayEvent::new("GET", next.unwrap().0).header("authorization", &bearer("alice"));
    let second = api.send(get).await;
    assert_eq!((second.status, second.header("link")), (200, None));
    assert_eq!(second.body, json!([{"name": "Aloe"}]));

    // API Gateway answers a listed origin's preflight itself, and no other's.
    for (from, admitted) in [(origin, Some(origin)), ("https://evil.example", None)] {
        let preflight = ApiGatewayEvent::new("OPTIONS", "/plants")
            .header("origin", from)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "authorization,content-type");
        let answer = api.send(preflight).await;
        assert_eq!(answer.header("access-control-allow-origin"), admitted, "{from}");
    }
}
