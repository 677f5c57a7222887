//! OAuth 2.0 scopes: without the operation's, 403 `insufficient_scope`
//! before the body or the store; `scope` and `scp` in each form grant; write
//! does not imply read; with scopes off, nothing changes.

use plant_store::auth::Verifier;
use plant_store::config::ScopeRules;
use plant_store::jwks::KeySource;
use plant_store_testkit::forgeries::{claims, with};
use plant_store_testkit::{
    ApiGatewayEvent, INVALID_TOKEN, TestApp, TestResponse, keys, operations, token_rules,
};
use serde_json::{Value, json};

const READ: &str = "plants/read";
const WRITE: &str = "plants/write";

async fn app_requiring_scopes() -> TestApp {
    let rules = token_rules(Some(ScopeRules { read: READ.into(), write: WRITE.into() }));
    TestApp::with_verifier(Verifier::new(KeySource::inline(&keys().jwks).unwrap(), &rules)).await
}

/// `Bearer` and a token for alice with `claim` set to `value`.
fn bearer_with(claim: &str, value: Value) -> String {
    let token = keys().eddsa().sign(&with(claims("alice"), claim, value)).unwrap();
    format!("Bearer {token}")
}

fn assert_insufficient_scope(response: &TestResponse, scope: &str) {
    response.assert_error(403, scope);
    let challenge =
        format!(r#"Bearer realm="plants", error="insufficient_scope", scope="{scope}""#);
    assert_eq!(response.header("www-authenticate"), Some(challenge.as_str()));
}

/// A token with each of these claims may list and create.
async fn assert_each_may_read_and_write(
    app: &TestApp,
    claims: impl IntoIterator<Item = (&str, Value)>,
) {
    for (n, (claim, value)) in claims.into_iter().enumerate() {
        let caller = bearer_with(claim, value.clone());
        let body = json!({"id": n, "name": "Fern"}).to_string();
        let created = app.post(&caller, &body).await;
        assert_eq!(created.status, 200, "{claim}: {value}");
        assert_eq!(app.get(&caller, "").await.status, 200, "{claim}: {value}");
    }
}

/// Each operation needs its access's scope: the other's gets 403 naming it
/// before the body (not 415 or 413) or the store; its own, a documented status.
#[tokio::test]
async fn each_operation_needs_the_scope_of_its_access_and_no_other() {
    let app = app_requiring_scopes().await;
    for operation in operations() {
        let (needed, other) =
            if operation.access == "read" { (READ, WRITE) } else { (WRITE, READ) };
        let stored = app.stored_items().await;
        let calls = app.dynamodb_calls();
        let refused =
            ApiGatewayEvent::example(&operation, Some(&bearer_with("scp", json!([other]))));
        let refused = match &operation.body {
            Some(_) => refused.header("content-type", "text/plain").body(&"x".repeat(17 * 1024)),
            None => refused,
        };
        assert_insufficient_scope(&app.send(refused).await, needed);
        assert_eq!(app.dynamodb_calls(), calls, "{}: the store was called", operation.id);
        assert_eq!(app.stored_items().await, stored, "{}", operation.id);
        let granted =
            ApiGatewayEvent::example(&operation, Some(&bearer_with("scope", json!(needed))));
        let status = app.send(granted).await.status;
        let passed = ![401, 403].contains(&status) && operation.statuses.contains(&status);
        assert!(passed, "{}: {status}", operation.id);
    }
}

#[tokio::test]
async fn both_claims_in_every_form_grant_their_scopes_and_with_scopes_off_none_matters() {
    let both = format!("{READ} {WRITE}");
    let forms = [("scope", json!(both)), ("scp", json!(both)), ("scp", json!([READ, WRITE]))];
    assert_each_may_read_and_write(&app_requiring_scopes().await, forms).await;
    let unscoped = [("scope", json!("openid")), ("scope", json!(5)), ("scp", json!({"a": [1]}))];
    let unscoped = unscoped.into_iter().chain([("scp", Value::Null)]);
    assert_each_may_read_and_write(&TestApp::new().await, unscoped).await;
}

#[tokio::test]
async fn tokens_without_the_scope_in_a_usable_form_are_refused_with_403() {
    let app = app_requiring_scopes().await;
    for (claim, value) in [
        ("scope", json!("openid email")),
        ("scope", json!("")),
        ("scope", json!(format!("{READ},{WRITE}"))),
        ("scope", json!([READ, WRITE])),
        ("scp", json!({"plants/read": true})),
        ("scp", json!(7)),
        ("scope", Value::Null),
        ("scope", json!("plants/readx PLANTS/READ plants/rea")),
    ] {
        assert_insufficient_scope(&app.get(&bearer_with(claim, value), "").await, READ);
    }
    // An invalid token is still a 401, whatever it claims.
    let forged = bearer_with("scope", json!(READ)).replace("Bearer ey", "Bearer ex");
    assert_eq!(app.get(&forged, "").await.status, 401);
}

/// Claims whose JSON repeats `scope`: each value in turn.
struct RepeatedScope(Vec<&'static str>);

impl serde::Serialize for RepeatedScope {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in claims("alice").as_object().unwrap() {
            map.serialize_entry(key, value)?;
        }
        for scope in &self.0 {
            map.serialize_entry("scope", scope)?;
        }
        map.end()
    }
}

#[tokio::test]
async fn a_repeated_scope_claim_counts_by_its_last_value() {
    let sign = |scopes: Vec<&'static str>| {
        format!("Bearer {}", keys().eddsa().sign(&RepeatedScope(scopes)).unwrap())
    };
    let app = app_requiring_scopes().await;
    assert_eq!(app.get(&sign(vec![WRITE, READ]), "").await.status, 200);
    assert_insufficient_scope(&app.get(&sign(vec![READ, WRITE]), "").await, READ);
    // With scopes off, a repeated claim refuses no token.
    let app = TestApp::new().await;
    assert_eq!(app.get(&sign(vec![READ, WRITE]), "").await.status, 200);
}

#[tokio::test]
async fn a_token_without_a_subject_is_invalid_before_its_scopes_are_read() {
    let app = app_requiring_scopes().await;
    for sub in [String::new(), " ".to_owned(), "al\0ice".to_owned(), "x".repeat(513)] {
        let token = keys().eddsa().sign(&with(claims(&sub), "scope", json!(""))).unwrap();
        let response = app.get(&format!("Bearer {token}"), "").await;
        response.assert_error(401, "token");
        assert_eq!(response.header("www-authenticate"), Some(INVALID_TOKEN));
    }
}
