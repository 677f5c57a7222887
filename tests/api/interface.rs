//! The interface's facts held to their one source, openapi.yaml
//! (docs/contract.md): the router's operations (`route::OPERATIONS`), the
//! function's error answers and template.yaml's gateway answers; and the
//! template's DynamoDB grants to the calls the store makes. The check lists
//! what disagrees, and its mutation test shows every kind found.

use std::collections::BTreeSet;

use axum::body::to_bytes;
use axum::response::IntoResponse;
use plant_store::auth::Access;
use plant_store::domain::limits::MAX_HEADER_BYTES;
use plant_store::error::ApiError;
use plant_store::route::OPERATIONS;
use plant_store_testkit::documented::operations_of;
use plant_store_testkit::fault_proxy::{Fault, FaultProxy};
use plant_store_testkit::{TestApp, bearer};
use serde_json::{Map, Value, json};
use serde_yaml_ng::Value as Yaml;

/// A YAML document as JSON, CloudFormation's tags as `{"!Tag": value}`.
pub(crate) fn json(yaml: Yaml) -> Value {
    match yaml {
        Yaml::Tagged(tagged) => json!({ tagged.tag.to_string(): json(tagged.value) }),
        Yaml::Sequence(items) => items.into_iter().map(json).collect(),
        Yaml::Mapping(map) => {
            let key = |key: Yaml| match json(key) {
                Value::String(key) => key,
                other => other.to_string(),
            };
            Value::Object(map.into_iter().map(|(k, v)| (key(k), json(v))).collect())
        }
        scalar => serde_json::to_value(scalar).unwrap(),
    }
}

/// openapi.yaml, template.yaml and the router's table (each operation's
/// `operationId`, access and statuses by `METHOD path`), as JSON.
pub(crate) fn sources() -> [Value; 3] {
    let yaml = |text: &str| json(serde_yaml_ng::from_str(text).unwrap());
    let routed = OPERATIONS.iter().map(|operation| {
        let access = match operation.access {
            Access::Read => "read",
            Access::Write => "write",
        };
        let facts = json!({"id": operation.id, "access": [access], "statuses": operation.answers});
        (format!("{} {}", operation.method, operation.path), facts)
    });
    let (spec, template) =
        (include_str!("../../openapi.yaml"), include_str!("../../template.yaml"));
    [yaml(spec), yaml(template), Value::Object(routed.collect())]
}

/// openapi.yaml's operations, as the router's table states them.
fn documented(spec: &Value) -> Map<String, Value> {
    let operations = operations_of(spec).into_iter().map(|operation| {
        let method = &spec["paths"][&operation.path][operation.method.to_lowercase()];
        let access = &method["security"][0]["bearerAuth"];
        let facts = json!({"id": operation.id, "access": access, "statuses": operation.statuses});
        (format!("{} {}", operation.method, operation.path), facts)
    });
    operations.collect()
}

fn statuses(facts: &Value) -> BTreeSet<u64> {
    facts["statuses"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect()
}

/// API Gateway's own answers as `(name, status, body)`: each gateway
/// response type's, and the firewall's custom body for each rule that
/// sends it, named as openapi.yaml's example of it.
fn gateway_answers(template: &Value) -> Vec<(String, u64, Value)> {
    let body = |text: &Value| serde_json::from_str(text.as_str().unwrap_or("null")).unwrap();
    let api = &template["Resources"]["PlantsRestApi"]["Properties"]["GatewayResponses"];
    let answer = |(kind, answer): (&String, &Value)| {
        let status = answer["StatusCode"].as_u64().unwrap_or_default();
        (kind.clone(), status, body(&answer["ResponseTemplates"]["application/json"]))
    };
    let mut answers: Vec<_> = api.as_object().unwrap().iter().map(answer).collect();
    let firewall = &template["Resources"]["WebAcl"]["Properties"];
    for rule in firewall["Rules"].as_array().unwrap() {
        let response = &rule["Action"]["Block"]["CustomResponse"];
        if let Some(key) = response["CustomResponseBodyKey"].as_str() {
            let content = body(&firewall["CustomResponseBodies"][key]["Content"]);
            answers.push((key.to_owned(), response["ResponseCode"].as_u64().unwrap(), content));
        }
    }
    answers
}

/// Where the router's operations and openapi.yaml's disagree: an operation
/// on one side only, its `operationId` or access; a status the function
/// answers that is not documented, or one documented that neither the
/// function nor the gateway (`gateway`) answers.
fn route_disagreements(spec: &Value, routed: &Value, gateway: &BTreeSet<u64>) -> Vec<String> {
    let documented = documented(spec);
    let mut found = Vec::new();
    for (operation, facts) in routed.as_object().unwrap() {
        let Some(spec) = documented.get(operation) else {
            found.push(format!("{operation} is routed, not in openapi.yaml"));
            continue;
        };
        for field in ["id", "access"].into_iter().filter(|field| facts[field] != spec[field]) {
            found.push(format!("{operation}'s {field}: {}, not {}", facts[field], spec[field]));
        }
        let (answered, listed) = (statuses(facts), statuses(spec));
        for status in answered.difference(&listed) {
            found.push(format!("{operation} answers {status}, not in openapi.yaml"));
        }
        for status in listed.difference(&answered).filter(|status| !gateway.contains(status)) {
            found.push(format!("openapi.yaml lists {status} for {operation}: nothing answers it"));
        }
    }
    let unrouted = documented.keys().filter(|operation| routed.get(operation).is_none());
    found.extend(unrouted.map(|operation| format!("openapi.yaml's {operation} is not routed")));
    found
}

/// Where the router, the function's errors and the gateway's answers
/// disagree with openapi.yaml: besides the routes', an answer unlike its
/// example (the Error body of its status), an example no one answers.
async fn disagreements([spec, template, routed]: &[Value; 3]) -> Vec<String> {
    let gateway = gateway_answers(template);
    let statuses = gateway.iter().map(|(_, status, _)| *status).collect();
    let mut found = route_disagreements(spec, routed, &statuses);
    let responses = spec["components"]["responses"].as_object().unwrap().values();
    let examples =
        responses.filter_map(|r| r["content"]["application/json"]["examples"].as_object());
    let examples: Map<_, _> = examples.flatten().map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut answered = BTreeSet::from(["http_api".to_owned()]);
    for (name, status, body) in gateway {
        match examples.get(&name).map_or(&Value::Null, |example| &example["value"]) {
            _ if body["error"] != status => found.push(format!("{name} answers {status}: {body}")),
            example if *example == body => {}
            example => found.push(format!("{name} answers {body}, openapi.yaml {example}")),
        }
        answered.insert(name);
    }
    // The function's own: each example names its error (`x-error`).
    for (name, example) in examples.iter().filter(|(_, example)| example.get("x-error").is_some()) {
        let text: &'static str = Box::leak(example["x-error"].to_string().into_boxed_str());
        let Ok(error) = serde_json::from_str::<ApiError>(text) else {
            found.push(format!("{name}'s x-error {text} is no ApiError"));
            continue;
        };
        let answer = to_bytes(error.into_response().into_body(), usize::MAX).await.unwrap();
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        let documented = &example["value"];
        if *documented != answer {
            found.push(format!("{name}: the function answers {answer}, openapi.yaml {documented}"));
        }
        answered.insert(name.clone());
    }
    let unanswered = examples.keys().filter(|name| !answered.contains(*name));
    found.extend(unanswered.map(|name| format!("openapi.yaml's {name} is no one's answer")));
    found.extend(uninspected_keys(template));
    found
}

/// Where the firewall could key a request without its `Authorization`: no
/// rule before `RateLimitPerCaller` blocks headers past what AWS WAF
/// inspects, or one that does reads another size than the function.
fn uninspected_keys(template: &Value) -> Vec<String> {
    let rules = template["Resources"]["WebAcl"]["Properties"]["Rules"].as_array().unwrap();
    let priority =
        |name: &str| rules.iter().find(|rule| rule["Name"] == name).map(|r| &r["Priority"]);
    let caller = priority("RateLimitPerCaller").and_then(Value::as_u64).unwrap_or_default();
    let whole = rules.iter().find(|rule| {
        let size = &rule["Statement"]["SizeConstraintStatement"];
        let headers = &size["FieldToMatch"]["Headers"];
        (headers["OversizeHandling"] == "MATCH" && headers["MatchScope"] == "ALL")
            && rule["Action"]["Block"].is_object()
            && rule["Priority"].as_u64().is_some_and(|at| at < caller)
    });
    let size = whole.map(|rule| &rule["Statement"]["SizeConstraintStatement"]["Size"]);
    let function = MAX_HEADER_BYTES as u64;
    let found = match size.and_then(Value::as_u64) {
        None => "no firewall rule before RateLimitPerCaller blocks what it cannot inspect".into(),
        Some(size) if size != function => format!("the firewall blocks headers over {size} bytes"),
        Some(_) => return Vec::new(),
    };
    vec![format!("{found}; the function, over {function}")]
}

#[tokio::test]
async fn the_router_the_functions_errors_and_the_gateways_answers_agree_with_openapi_yaml() {
    assert_eq!(disagreements(&sources()).await, Vec::<String>::new());
}

/// One of each kind of disagreement: in openapi.yaml (0), template.yaml (1)
/// or the router's table (2), the value at a JSON pointer set (`null`:
/// removed).
#[rustfmt::skip]
const CHANGES: [(&str, usize, &str, &str); 17] = [
    ("POST undocumented", 0, "/paths/~1plants/post", "null"),
    ("an operation documented only", 0, "/paths/~1no-operation", r#"{"put": {"responses": {}}}"#),
    ("GET as write", 0, "/paths/~1plants/get/security/0/bearerAuth", r#"["write"]"#),
    ("GET's 400 undocumented", 0, "/paths/~1plants/get/responses/400", "null"),
    ("GET documents 409", 0, "/paths/~1plants/get/responses/409", "{}"),
    ("GET named getPlants", 0, "/paths/~1plants/get/operationId", r#""getPlants""#),
    ("the function's 404 with another message", 0, "/components/responses/NotFound/content/application~1json/examples/no_route/value/message", r#""Not here.""#),
    ("RESOURCE_NOT_FOUND's example gone", 0, "/components/responses/NotFound/content/application~1json/examples/RESOURCE_NOT_FOUND", "null"),
    ("THROTTLED with 503", 1, "/Resources/PlantsRestApi/Properties/GatewayResponses/THROTTLED/StatusCode", "503"),
    ("WAF_FILTERED with another message", 1, "/Resources/PlantsRestApi/Properties/GatewayResponses/WAF_FILTERED/ResponseTemplates/application~1json", r#""{\"error\": 403}""#),
    ("a gateway response type without an example", 1, "/Resources/PlantsRestApi/Properties/GatewayResponses/QUOTA_EXCEEDED", r#"{"StatusCode": 429, "ResponseTemplates": {"application/json": "{\"error\": 429}"}}"#),
    ("the firewall's body with another message", 1, "/Resources/WebAcl/Properties/CustomResponseBodies/RATE_LIMITED/Content", r#""{\"error\": 429}""#),
    ("the firewall keys what it cannot inspect", 1, "/Resources/WebAcl/Properties/Rules/1/Statement/SizeConstraintStatement/FieldToMatch/Headers/OversizeHandling", r#""CONTINUE""#),
    ("the firewall inspects another size", 1, "/Resources/WebAcl/Properties/Rules/1/Statement/SizeConstraintStatement/Size", "16384"),
    ("an operation routed only", 2, "/PUT ~1no-operation", r#"{"id": "none", "statuses": []}"#),
    ("an example naming no error", 0, "/components/responses/Conflict/content/application~1json/examples/other_content/x-error", r#"{"Conflicting": 7}"#),
    ("GET routed to answer 409", 2, "/GET ~1plants/statuses/0", "409"),
];

/// Each change is found (and printed: `--nocapture`).
#[tokio::test]
async fn every_kind_of_disagreement_is_found() {
    for (change, source, pointer, value) in CHANGES {
        let mut sources = sources();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let key = key.replace("~1", "/");
        match (sources[source].pointer_mut(parent).unwrap(), serde_json::from_str(value).unwrap()) {
            (Value::Array(items), value) => items[key.parse::<usize>().unwrap()] = value,
            (Value::Object(map), Value::Null) => _ = map.remove(&key),
            (Value::Object(map), value) => _ = map.insert(key, value),
            (other, _) => panic!("{pointer}: {other}"),
        }
        let found = disagreements(&sources).await;
        println!("{change}:\n  {}", found.join("\n  "));
        assert!(!found.is_empty(), "{change} went unnoticed");
    }
}

/// The key the firewall's per-caller rate limit counts a request with this
/// `Authorization` under: the value through `RateLimitPerCaller`'s text
/// transformations, as AWS WAF documents them.
pub(crate) fn caller_key(authorization: &str) -> String {
    let [_, template, _] = sources();
    let rules = template["Resources"]["WebAcl"]["Properties"]["Rules"].as_array().unwrap();
    let rule = rules.iter().find(|rule| rule["Name"] == "RateLimitPerCaller").unwrap();
    let header = &rule["Statement"]["RateBasedStatement"]["CustomKeys"][0]["Header"];
    let mut transformations = header["TextTransformations"].as_array().unwrap().clone();
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

/// template.yaml's `FunctionCalls` (its policy's and VPC endpoint's) are the
/// calls the store makes on a create's every path, a listing and the warm-up.
#[tokio::test]
async fn the_template_grants_exactly_the_calls_the_store_makes() {
    let proxy = FaultProxy::start(&TestApp::dynamodb_url(), &[], Fault::PassThrough).await;
    let app = TestApp::with_store(Some(&proxy.url), 2).await;
    for plant in [(1, "Fern"), (1, "Ivy"), (2, "Ivy"), (3, "Moss")] {
        let body = format!(r#"{{"id": {}, "name": "{}"}}"#, plant.0, plant.1);
        app.post(&bearer("alice"), &body).await;
    }
    app.get(&bearer("alice"), "").await;
    app.api.prepare().await;
    let made: BTreeSet<_> = proxy.calls_since(0).into_iter().map(|call| call.operation).collect();
    let [_, template, _] = sources();
    let granted = template["Mappings"]["FunctionCalls"]["DynamoDB"]["Actions"].as_array().unwrap();
    let granted = granted.iter().map(|action| action.as_str().unwrap().replace("dynamodb:", ""));
    assert_eq!(granted.collect::<BTreeSet<_>>(), made);
}
