//! What the contract decides for every operation, read from openapi.yaml:
//! 404, 405 with `Allow`, HEAD, CORS (owners apart: the acceptance suite's;
//! each operation's own decisions are in the file named after it).

use std::collections::BTreeSet;

use plant_store::route::OPERATIONS;
use plant_store_testkit::documented::methods_of;
use plant_store_testkit::{ApiGatewayEvent, TestApp, bearer, operations};
use serde_json::json;

/// A header's comma-separated list, in order.
fn sorted(list: Option<&str>) -> Vec<String> {
    let mut items: Vec<_> = list.unwrap_or_default().split(',').map(str::to_owned).collect();
    items.sort();
    items
}

#[tokio::test]
async fn unknown_paths_get_404_and_other_methods_405_with_allow() {
    let app = TestApp::new().await;
    let alice = bearer("alice");
    for path in ["/", "/plant", "/plantsx", "/v1/plants"] {
        let request = ApiGatewayEvent::new("GET", path).header("authorization", &alice);
        app.send(request).await.assert_error(404, "path");
    }
    // On each operation's path, the methods openapi.yaml documents there and
    // HEAD with GET (RFC 9110) are allowed; any other is 405 naming them.
    for operation in operations() {
        let mut allowed = methods_of(&operation.path);
        if allowed.iter().any(|method| method == "GET") {
            allowed.push("HEAD".into());
        }
        for method in ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
            if !allowed.iter().any(|allowed| allowed == method) {
                let request = ApiGatewayEvent::new(method, &operation.target);
                let response = app.send(request.header("authorization", &alice)).await;
                response.assert_error(405, method);
                assert_eq!(sorted(response.header("allow")), sorted(Some(&allowed.join(","))));
            }
        }
        // HEAD is GET without a body (RFC 9110, section 9.3.2).
        if operation.method == "GET" {
            let head = ApiGatewayEvent::example(&operation, Some(&alice)).method("HEAD");
            let head = app.send(head).await;
            assert_eq!((head.status, &head.body), (200, &json!("")), "{}", operation.id);
        }
    }
}

#[tokio::test]
async fn a_listed_origin_is_answered_for_browsers_and_no_other() {
    let origin = "https://app.example.com";
    let app = TestApp::new().await.with_cors(&[origin]);
    let options =
        |path: &str, from: &str| ApiGatewayEvent::new("OPTIONS", path).header("origin", from);
    let preflight = |path: &str, from: &str, method: &str| {
        options(path, from).header("access-control-request-method", method)
    };
    // The operations' methods, each once.
    let methods: BTreeSet<&str> = OPERATIONS.iter().map(|op| op.method.as_str()).collect();
    for operation in operations() {
        let (path, method) = (operation.target.as_str(), operation.method.as_str());
        // Only a listed origin's preflight of an operation's path is one; any
        // other OPTIONS is a method without an operation, named for no origin.
        for (request, status) in [
            (preflight(path, "https://evil.example", method), 405),
            (options(path, origin), 405),
            (preflight("/nowhere", origin, method), 404),
        ] {
            let refused = app.send(request).await;
            let answered = (refused.status, refused.header("access-control-allow-origin"));
            assert_eq!((answered, &refused.body["error"]), ((status, None), &json!(status)));
        }
        let answer = app.send(preflight(path, origin, method)).await;
        let named = ["origin", "headers"]
            .map(|name| answer.header(&format!("access-control-allow-{name}")));
        assert_eq!(named, [Some(origin), Some("authorization,content-type")]);
        let allowed = sorted(answer.header("access-control-allow-methods"));
        assert_eq!(allowed, Vec::from_iter(methods.iter().map(|method| method.to_string())));
        assert_eq!((answer.status, answer.header("access-control-max-age")), (200, Some("600")));
        // Every answer to a listed origin names it, an error too.
        let answered = ApiGatewayEvent::example(&operation, Some(&bearer("alice")));
        let unauthorized = ApiGatewayEvent::example(&operation, None);
        // An unreadable event's 400 (a control character in a header) too.
        let unreadable = ApiGatewayEvent::example(&operation, None).header("x-bad", "a\u{7}b");
        for (request, refused) in
            [(answered, None), (unauthorized, Some(401)), (unreadable, Some(400))]
        {
            let response = app.send(request.header("origin", origin)).await;
            if let Some(refused) = refused {
                assert_eq!(response.body["error"], json!(refused));
            }
            let named = ["expose-headers", "allow-origin"]
                .map(|n| response.header(&format!("access-control-{n}")));
            assert_eq!(named, [Some("link,retry-after,www-authenticate"), Some(origin)]);
            let vary = "origin, access-control-request-method, access-control-request-headers";
            assert_eq!(response.header("vary"), Some(vary));
        }
    }
}
