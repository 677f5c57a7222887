//! The interface's facts held to their one source, openapi.yaml
//! (docs/contract.md): the router's operations (`route::OPERATIONS`), the
//! function's error answers, and template.yaml's gateway answers; and the
//! template's DynamoDB grants to the calls the store makes. Each check
//! lists what disagrees, and its mutation test shows every kind found.

use std::collections::{BTreeMap, BTreeSet};

use axum::body::to_bytes;
use axum::response::IntoResponse;
use plant_store::auth::{Access, AuthError};
use plant_store::config::DEFAULT_MAX_PLANTS_PER_OWNER;
use plant_store::domain::{NewPlant, PlantError};
use plant_store::error::ApiError;
use plant_store::route::OPERATIONS;
use plant_store_testkit::fault_proxy::{Fault, FaultProxy};
use plant_store_testkit::{ApiGatewayEvent, TestApp, bearer};
use serde_yaml_ng::Value;

fn openapi() -> Value {
    serde_yaml_ng::from_str(include_str!("../../openapi.yaml")).unwrap()
}

fn template() -> Value {
    serde_yaml_ng::from_str(include_str!("../../template.yaml")).unwrap()
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// One operation: as the router serves it, or as openapi.yaml documents it.
#[derive(Clone)]
struct Route {
    id: String,
    method: String,
    path: String,
    /// `read` or `write`: the scopes of its `security` requirement.
    access: String,
    statuses: BTreeSet<u16>,
}

fn routed() -> Vec<Route> {
    let route = |operation: &plant_store::route::Operation| Route {
        id: operation.id.to_owned(),
        method: operation.method.to_string(),
        path: operation.path.to_owned(),
        access: match operation.access {
            Access::Read => "read".to_owned(),
            Access::Write => "write".to_owned(),
        },
        statuses: operation.answers.iter().copied().collect(),
    };
    OPERATIONS.iter().map(route).collect()
}

fn documented(spec: &Value) -> Vec<Route> {
    let mut routes = Vec::new();
    for (path, item) in spec["paths"].as_mapping().unwrap() {
        for (method, operation) in item.as_mapping().unwrap() {
            let scopes = operation["security"][0]["bearerAuth"].as_sequence().cloned();
            let statuses = operation["responses"].as_mapping().into_iter().flatten();
            routes.push(Route {
                id: text(&operation["operationId"]),
                method: text(method).to_uppercase(),
                path: text(path),
                access: scopes.unwrap_or_default().iter().map(text).collect::<Vec<_>>().join(" "),
                statuses: statuses.filter_map(|(status, _)| text(status).parse().ok()).collect(),
            });
        }
    }
    routes
}

/// The statuses API Gateway itself answers with: the template's gateway
/// responses' and the firewall's.
fn gateway_statuses(template: &Value) -> BTreeSet<u16> {
    gateway_answers(template)
        .values()
        .filter_map(|(status, _)| u16::try_from(*status).ok())
        .collect()
}

/// Where the router's operations and openapi.yaml's disagree: an operation
/// on one side only, its `operationId`, its access, a status the function
/// answers it with that is not documented, or one documented that neither
/// the function nor the gateway answers.
fn route_disagreements(routed: &[Route], spec: &Value, template: &Value) -> Vec<String> {
    let (documented, gateway) = (documented(spec), gateway_statuses(template));
    let mut found = Vec::new();
    for route in routed {
        let name = format!("{} {}", route.method, route.path);
        let Some(spec) =
            documented.iter().find(|d| (&d.method, &d.path) == (&route.method, &route.path))
        else {
            found.push(format!("{name} is routed, not in openapi.yaml"));
            continue;
        };
        if spec.id != route.id {
            found
                .push(format!("{name} is {} in the router, {} in openapi.yaml", route.id, spec.id));
        }
        if spec.access != route.access {
            found.push(format!(
                "{name} needs {} access, openapi.yaml says {:?}",
                route.access, spec.access
            ));
        }
        for status in route.statuses.difference(&spec.statuses) {
            found.push(format!("{name} answers {status}, not in openapi.yaml"));
        }
        for status in spec.statuses.difference(&route.statuses).filter(|s| !gateway.contains(s)) {
            found.push(format!("openapi.yaml lists {status} for {name}: nothing answers it"));
        }
    }
    for spec in documented
        .iter()
        .filter(|d| !routed.iter().any(|r| (&r.method, &r.path) == (&d.method, &d.path)))
    {
        found.push(format!("openapi.yaml's {} {} is not routed", spec.method, spec.path));
    }
    found
}

/// Every example of an Error body in openapi.yaml's responses, by name.
fn examples(spec: &Value) -> BTreeMap<String, serde_json::Value> {
    let responses = spec["components"]["responses"].as_mapping().unwrap().values();
    let examples = responses
        .filter_map(|response| response["content"]["application/json"]["examples"].as_mapping());
    let examples = examples
        .flatten()
        .map(|(name, example)| (text(name), serde_json::to_value(&example["value"]).unwrap()));
    examples.filter(|(_, value)| value.get("error").is_some()).collect()
}

/// API Gateway's own answers by the name openapi.yaml's example of each
/// has: each gateway response type's, and the firewall's custom body (for
/// each status a rule sends it with), as status and body.
fn gateway_answers(template: &Value) -> BTreeMap<String, (u64, serde_json::Value)> {
    let resources = &template["Resources"];
    let body = |text: &Value| serde_json::from_str(text.as_str().unwrap()).unwrap();
    let mut answers = BTreeMap::new();
    let responses =
        resources["PlantsRestApi"]["Properties"]["GatewayResponses"].as_mapping().unwrap();
    for (kind, response) in responses {
        let status = response["StatusCode"].as_u64().unwrap_or_default();
        answers
            .insert(text(kind), (status, body(&response["ResponseTemplates"]["application/json"])));
    }
    let firewall = &resources["WebAcl"]["Properties"];
    for rule in firewall["Rules"].as_sequence().unwrap() {
        let response = &rule["Action"]["Block"]["CustomResponse"];
        if let Some(key) = response["CustomResponseBodyKey"].as_str() {
            let status = response["ResponseCode"].as_u64().unwrap_or_default();
            let content = body(&firewall["CustomResponseBodies"][key]["Content"]);
            answers.insert(format!("{key} ({})", text(&rule["Name"])), (status, content));
        }
    }
    answers
}

/// Where the gateway's answers and openapi.yaml disagree: an answer without
/// its example (named for its type or firewall body) or with another
/// status or body, and an example in capitals that no answer is.
fn gateway_disagreements(spec: &Value, template: &Value) -> Vec<String> {
    let examples = examples(spec);
    let answers = gateway_answers(template);
    let mut found = Vec::new();
    for (name, (status, body)) in &answers {
        let example = name.split(' ').next().and_then(|name| examples.get(name));
        match example {
            None => found.push(format!("{name}: no example in openapi.yaml")),
            Some(example) if example != body => {
                found.push(format!("{name} answers {body}, openapi.yaml {example}"))
            }
            Some(_) if body["error"] != *status => {
                found.push(format!("{name} answers {body} with status {status}"))
            }
            Some(_) => {}
        }
    }
    let named = |example: &str| answers.keys().any(|name| name.split(' ').next() == Some(example));
    for example in
        examples.keys().filter(|name| name.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
    {
        if !named(example) {
            found.push(format!("openapi.yaml's {example} is no answer of the gateway's"));
        }
    }
    found
}

/// The function's errors each example in lower case shows.
fn function_errors() -> BTreeMap<&'static str, ApiError> {
    let id = NewPlant::from_json(br#"{"id": 7, "name": "Fern"}"#).unwrap().id;
    let (method, path) = ("DELETE".to_owned(), "/plants".to_owned());
    BTreeMap::from([
        ("missing_field", ApiError::InvalidBody(PlantError::MissingField("name"))),
        ("invalid_token", AuthError::InvalidToken(String::new()).into()),
        ("insufficient_scope", AuthError::InsufficientScope("plants/write".into()).into()),
        ("no_route", ApiError::NotFound),
        ("other_method", ApiError::MethodNotAllowed { method, path }),
        ("other_content", ApiError::Conflict(id)),
        ("at_the_bound", ApiError::TooManyPlants(DEFAULT_MAX_PLANTS_PER_OWNER)),
        ("over_16_kib", ApiError::PayloadTooLarge),
        ("not_json", ApiError::UnsupportedMediaType),
        ("unexpected", ApiError::Internal(String::new())),
        ("store", ApiError::Unavailable(String::new())),
    ])
}

/// Where the function's answers and openapi.yaml's examples of them (in
/// lower case, but the HTTP API's) disagree.
async fn function_disagreements(spec: &Value, errors: BTreeMap<&str, ApiError>) -> Vec<String> {
    let examples = examples(spec);
    let mut found = Vec::new();
    for (name, example) in
        examples.iter().filter(|(name, _)| name.chars().all(|c| !c.is_ascii_uppercase()))
    {
        let Some(error) = errors.get(name.as_str()) else {
            found.push(format!("openapi.yaml's {name} is no error of the function's"));
            continue;
        };
        let answer = to_bytes(error.clone().into_response().into_body(), usize::MAX).await.unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        if answer != *example {
            found.push(format!("{name}: the function answers {answer}, openapi.yaml {example}"));
        }
    }
    found.extend(
        errors
            .keys()
            .filter(|name| !examples.contains_key(**name))
            .map(|name| format!("{name}: no example")),
    );
    found
}

/// Every disagreement of the router, the function and the template with
/// openapi.yaml.
async fn disagreements(routed: &[Route], spec: &Value, template: &Value) -> Vec<String> {
    let mut found = route_disagreements(routed, spec, template);
    found.extend(gateway_disagreements(spec, template));
    found.extend(function_disagreements(spec, function_errors()).await);
    found
}

#[tokio::test]
async fn the_router_the_functions_errors_and_the_gateways_answers_agree_with_openapi_yaml() {
    let found = disagreements(&routed(), &openapi(), &template()).await;
    assert_eq!(found, Vec::<String>::new());
}

/// Each documented operation is routed, and needs a token: 401 without.
#[tokio::test]
async fn every_operation_of_openapi_yaml_is_routed_and_needs_a_token() {
    let app = TestApp::new().await;
    for operation in documented(&openapi()) {
        let segments = operation.path.split('/');
        let path: Vec<_> = segments.map(|s| if s.starts_with('{') { "1" } else { s }).collect();
        let path = path.join("/");
        let response = app.send(ApiGatewayEvent::new(&operation.method, &path)).await;
        assert_eq!(response.status, 401, "{} {path}: {:?}", operation.method, response.body);
    }
}

type Change = fn(&mut Value, &mut Value, &mut Vec<Route>);

fn plants(spec: &mut Value) -> &mut serde_yaml_ng::Mapping {
    spec["paths"]["/plants"].as_mapping_mut().unwrap()
}

fn gateway_response<'t>(template: &'t mut Value, kind: &str) -> &'t mut Value {
    &mut template["Resources"]["PlantsRestApi"]["Properties"]["GatewayResponses"][kind]
}

/// One of each kind of disagreement, to make in a copy of openapi.yaml,
/// template.yaml or the router's table.
const CHANGES: [(&str, Change); 14] = [
    ("openapi.yaml without POST /plants", |spec, _, _| _ = plants(spec).remove("post")),
    ("openapi.yaml's GET /plants as PUT", |spec, _, _| {
        let get = plants(spec).remove("get").unwrap();
        plants(spec).insert("put".into(), get);
    }),
    ("openapi.yaml's GET /plants at /plant", |spec, _, _| {
        let item = spec["paths"].as_mapping_mut().unwrap().remove("/plants").unwrap();
        spec["paths"].as_mapping_mut().unwrap().insert("/plant".into(), item);
    }),
    ("openapi.yaml's GET /plants needing write", |spec, _, _| {
        spec["paths"]["/plants"]["get"]["security"][0]["bearerAuth"] = vec!["write"].into();
    }),
    ("openapi.yaml's GET /plants without 400", |spec, _, _| {
        _ = spec["paths"]["/plants"]["get"]["responses"].as_mapping_mut().unwrap().remove("400");
    }),
    ("openapi.yaml's GET /plants with 409", |spec, _, _| {
        let conflict = spec["paths"]["/plants"]["post"]["responses"]["409"].clone();
        spec["paths"]["/plants"]["get"]["responses"]["409"] = conflict;
    }),
    ("openapi.yaml's GET /plants named getPlants", |spec, _, _| {
        spec["paths"]["/plants"]["get"]["operationId"] = "getPlants".into();
    }),
    ("the router with GET /plants/{id}", |_, _, routed| {
        let by_id = Route { path: "/plants/{id}".into(), ..routed[0].clone() };
        routed.push(by_id);
    }),
    ("the router answering GET /plants with 409", |_, _, routed| {
        _ = routed[0].statuses.insert(409)
    }),
    ("the function's 404 with another message", |spec, _, _| {
        let examples =
            &mut spec["components"]["responses"]["NotFound"]["content"]["application/json"];
        examples["examples"]["no_route"]["value"]["message"] = "Not here.".into();
    }),
    ("THROTTLED with status 503", |_, template, _| {
        gateway_response(template, "THROTTLED")["StatusCode"] = 503.into();
    }),
    ("WAF_FILTERED with another message", |_, template, _| {
        let body = r#"{"error": 403, "message": "Forbidden."}"#;
        gateway_response(template, "WAF_FILTERED")["ResponseTemplates"]["application/json"] =
            body.into();
    }),
    ("a gateway response without its example", |_, template, _| {
        let throttled = gateway_response(template, "THROTTLED").clone();
        *gateway_response(template, "QUOTA_EXCEEDED") = throttled;
    }),
    ("the firewall's body with another message", |_, template, _| {
        let bodies = &mut template["Resources"]["WebAcl"]["Properties"]["CustomResponseBodies"];
        bodies["RATE_LIMITED"]["Content"] = r#"{"error": 429, "message": "Slow down."}"#.into();
    }),
];

/// Each change is found (and printed: `--nocapture`).
#[tokio::test]
async fn every_kind_of_disagreement_is_found() {
    for (change, make) in CHANGES {
        let (mut spec, mut template, mut routed) = (openapi(), template(), routed());
        make(&mut spec, &mut template, &mut routed);
        let found = disagreements(&routed, &spec, &template).await;
        println!("{change}:\n  {}", found.join("\n  "));
        assert!(!found.is_empty(), "{change} went unnoticed");
    }
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
