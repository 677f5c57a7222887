//! The acceptance suite against the handler over HTTP (the full run checks
//! that it passes against the function, behind cargo lambda and `sam
//! local`): it names the rule a broken front breaks, and in Cognito mode
//! (moto) creates, signs in and deletes its users on any password policy.

use std::sync::Arc;

use aws_sdk_cognitoidentityprovider::types::PasswordPolicyType;
use lambda_http::http::{HeaderValue, StatusCode};
use plant_store::auth::Verifier;
use plant_store::config::{AccessTokenRule, KeyConfig, KeyRefresh, TokenRules};
use plant_store::https::Https;
use plant_store::jwks::KeySource;
use plant_store_admin::acceptance;
use plant_store_admin::cognito::{self, TestUsers};
use plant_store_testkit::http_server::{Reply, body_bytes, listen, respond, serve};
use plant_store_testkit::moto::{MotoCognito, Pool};
use plant_store_testkit::{ApiGatewayEvent, TestApp, token};
use serde_json::Value;

/// The handler behind an HTTP server (each request an HTTP API event), less
/// `drop_header` if given (a broken deployment); its base URL.
async fn serve_over_http(app: Arc<TestApp>, drop_header: Option<&'static str>) -> String {
    let (listener, address) = listen().await;
    serve(listener, move |request| {
        let app = app.clone();
        async move {
            let (parts, body) = request.into_parts();
            let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
            let mut event = ApiGatewayEvent::new(parts.method.as_str(), target);
            for (name, value) in &parts.headers {
                event = event.header(name.as_str(), value.to_str().unwrap());
            }
            let body = body_bytes(body).await;
            if !body.is_empty() {
                event = event.body(std::str::from_utf8(&body).unwrap());
            }
            let response = app.send(event).await;
            let kept =
                response.headers.iter().filter(|(name, _)| Some(name.as_str()) != drop_header);
            let text = |value: &HeaderValue| value.to_str().unwrap().to_owned();
            let headers: Vec<_> = kept.map(|(name, value)| (name.as_str(), text(value))).collect();
            let status = StatusCode::from_u16(response.status).unwrap();
            Reply::Respond(respond(status, &headers, response.body.to_string()))
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn the_acceptance_suite_names_the_rule_an_api_breaks() {
    let app = Arc::new(TestApp::new().await);
    let url = serve_over_http(app, Some("link")).await;

    let alice = token("alice");
    let report = acceptance::run(&url, &alice, &token("bob")).await;

    let broken = report.broken.expect("a listing without Link is caught");
    assert_eq!(broken.rule, "GET /plants pages through Link: every plant once, by id, unchanged");
    // The rules before it held; none after it ran.
    assert_eq!(report.passed.len(), 4, "{:?}", report.passed);
    assert!(!broken.to_string().contains(&alice));
}

#[tokio::test]
async fn the_acceptance_suite_passes_whole_against_the_function() {
    let url = serve_over_http(Arc::new(TestApp::new().await), None).await;
    let report = acceptance::run(&url, &token("alice"), &token("bob")).await;
    assert!(report.broken.is_none(), "{}", report.broken.unwrap());
}

/// The function in Cognito mode for `pool`, its keys from the pool's JWKS URL.
async fn cognito_app(moto: &MotoCognito, pool: &Pool) -> TestApp {
    let access = AccessTokenRule::Cognito(vec![pool.client_id.clone()]);
    let rules = TokenRules::new(pool.issuer(), None, access, None).unwrap();
    let https = Https::new(&Default::default()).unwrap();
    let (url, refresh) = (moto.jwks_url(pool), KeyRefresh::default());
    let config = KeyConfig::Url { url, refresh, loopback_http: true };
    let keys = KeySource::from_config(&config, &https).unwrap();
    keys.load().await;
    TestApp::with_verifier(Verifier::new(keys, &rules)).await
}

#[tokio::test]
#[ignore = "needs moto's Cognito server, which scripts/test installs and runs this with"]
async fn the_cognito_mode_creates_signs_in_and_deletes_its_users_on_any_password_policy() {
    let moto = MotoCognito::start().await;
    let policy = |minimum: i32, symbols: bool| {
        let policy = PasswordPolicyType::builder().minimum_length(minimum).require_symbols(symbols);
        policy.require_lowercase(true).require_uppercase(true).require_numbers(true).build()
    };
    // template.yaml's policy, and Cognito's default (symbols required).
    for (name, policy) in [("template", policy(12, false)), ("default", policy(8, true))] {
        let pool = moto.create_pool(name, policy).await;
        let app = Arc::new(cognito_app(&moto, &pool).await);
        let url = serve_over_http(app.clone(), None).await;
        // Several runs: a password that meets the policy only by chance
        // fails some of them.
        let mut stored = Vec::new();
        for run in 0..3 {
            let users = TestUsers::with_client(moto.client.clone(), &pool.id);
            let report = cognito::run_as_test_users(users, &url, &pool.client_id)
                .await
                .unwrap_or_else(|error| panic!("{name} pool, run {run}: {error}"));
            assert!(report.broken.is_none(), "{name}: {:?}", report.broken);
            assert_eq!(moto.user_count(&pool).await, 0, "{name}: users left behind");
            stored.push(app.stored_items().await.len());
        }
        // Each run's two users owned what they wrote: six owners, and each
        // run wrote as many plants as the first.
        let owners = app.stored_owners().await;
        let owners: std::collections::BTreeSet<_> =
            owners.iter().filter_map(Value::as_str).collect();
        assert_eq!(owners.len(), 6, "{name}: {owners:?}");
        let first = stored[0];
        assert!(first > 0 && stored == [first, 2 * first, 3 * first], "{name}: {stored:?}");
    }
}
