//! template.yaml as CloudFormation reads it, for the tests that hold it to
//! the code.

use std::collections::BTreeSet;

use plant_store::config::DEFAULT_MAX_PLANTS_PER_OWNER;
use plant_store_testkit::fault_proxy::{Fault, FaultProxy};
use plant_store_testkit::{TestApp, bearer};
use serde_yaml_ng::Value;

fn template() -> Value {
    serde_yaml_ng::from_str(include_str!("../../template.yaml")).unwrap()
}

/// The key the firewall's per-caller rate limit counts a request with this
/// `Authorization` under: the value through `RateLimitPerCaller`'s text
/// transformations, as AWS WAF documents them.
pub(crate) fn caller_key(authorization: &str) -> String {
    let template = template();
    let rules = template["Resources"]["WebAcl"]["Properties"]["Rules"].as_sequence().unwrap();
    let rule = rules.iter().find(|rule| rule["Name"] == "RateLimitPerCaller").unwrap();
    let header = &rule["Statement"]["RateBasedStatement"]["CustomKeys"][0]["Header"];
    let mut transformations = header["TextTransformations"].as_sequence().unwrap().clone();
    transformations.sort_by_key(|transformation| transformation["Priority"].as_u64());
    let transform = |key: String, transformation: &Value| match transformation["Type"].as_str() {
        Some("NONE") => key,
        Some("LOWERCASE") => key.to_lowercase(),
        // \f \t \n \r \v and the no-break space become spaces, and a run of
        // spaces one.
        Some("COMPRESS_WHITE_SPACE") => key.chars().fold(String::new(), |mut key, c| {
            let c = if "\u{c}\t\n\r\u{b}\u{a0}".contains(c) { ' ' } else { c };
            if c != ' ' || !key.ends_with(' ') {
                key.push(c);
            }
            key
        }),
        other => panic!("a text transformation this test does not know: {other:?}"),
    };
    transformations.iter().fold(authorization.to_owned(), transform)
}

/// The DynamoDB calls template.yaml grants the function (`FunctionCalls`,
/// its policy's and the VPC endpoint's) are those its store makes, each
/// seen on its way to DynamoDB Local: a create's every path (the count, the
/// put, the place given back, the read at the bound), a listing, the warm-up.
#[tokio::test]
async fn the_template_grants_exactly_the_calls_the_store_makes_and_the_codes_bound() {
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::PassThrough).await;
    let app = TestApp::with_store_endpoint_and_bound(&proxy.url, 2).await;
    for plant in [(1, "Fern"), (1, "Ivy"), (2, "Ivy"), (3, "Moss")] {
        let body = format!(r#"{{"id": {}, "name": "{}"}}"#, plant.0, plant.1);
        app.post(&bearer("alice"), &body).await;
    }
    app.get(&bearer("alice"), "").await;
    app.api.prepare().await;
    let made: BTreeSet<_> = proxy.calls_since(0).into_iter().map(|call| call.operation).collect();
    let template = template();
    let granted = template["Mappings"]["FunctionCalls"]["DynamoDB"]["Actions"].as_sequence();
    let granted = granted.unwrap().iter().map(|action| action.as_str().unwrap());
    let granted: BTreeSet<_> = granted.map(|action| action.replace("dynamodb:", "")).collect();
    assert_eq!(granted, made);
    let bound = &template["Parameters"]["MaxPlantsPerOwner"]["Default"];
    assert_eq!(bound.as_u64(), Some(DEFAULT_MAX_PLANTS_PER_OWNER.into()));
}
