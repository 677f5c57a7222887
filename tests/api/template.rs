//! What template.yaml shares with the function, held to the function's own
//! side: the metrics its alarms and dashboard read (a request's EMF line),
//! the variables it sets (what `Config` looks up), the table's key
//! (`store::layout`), Cognito's scopes (openapi.yaml's accesses), and the
//! numbers both state. Each disagreement names both sides; the mutation
//! test makes one of each kind.

use std::cell::RefCell;
use std::collections::BTreeSet;

use axum::response::IntoResponse;
use plant_store::config::MAX_PLANTS_PER_OWNER_LIMIT as MOST_PLANTS;
use plant_store::config::{Config, DEFAULT_MAX_PLANTS_PER_OWNER, TelemetryConfig};
use plant_store::domain::limits::{LIMIT_DEFAULT, LIMIT_MAX, NAME_MAX_CHARS, TAG_MAX_CHARS};
use plant_store::error::ApiError;
use plant_store::store::layout::TABLE_KEY;
use plant_store_testkit::{ApiGatewayEvent, TestApp, bearer};
use serde_json::{Value, json};

use crate::interface::sources;

/// The function's side: its EMF directive, as its binary writes it; the
/// variables it reads, and those it cannot start without.
#[derive(Clone)]
struct Function {
    directive: Value,
    reads: BTreeSet<String>,
    needs: BTreeSet<String>,
}

async fn function() -> Function {
    let app = TestApp::new().await;
    let process = crate::start_function(&app, &[]).await;
    process.invoke(&ApiGatewayEvent::list_plants(&bearer("alice"), "").event()).await;
    let lines = process.output().into_iter().filter_map(|l| serde_json::from_str::<Value>(&l).ok());
    let emf = lines.into_iter().find(|line| line.get("_aws").is_some()).unwrap();
    let base =
        [("PLANTS_TABLE", "plants"), ("AUTH_ISSUER", "https://i.example"), ("AUTH_AUDIENCE", "a")];
    let reads = RefCell::new(BTreeSet::new());
    let starts = |without: &str| {
        let lookup = |name: &str| {
            reads.borrow_mut().insert(name.to_owned());
            base.iter().find(|set| set.0 == name && name != without).map(|set| set.1.to_owned())
        };
        TelemetryConfig::from_lookup(lookup);
        Config::from_lookup(lookup).is_ok()
    };
    assert!(starts(""));
    let needs = base.iter().filter(|(name, _)| !starts(name)).map(|(name, _)| (*name).into());
    let directive = emf["_aws"]["CloudWatchMetrics"][0].clone();
    Function { directive, needs: needs.collect(), reads: reads.into_inner() }
}

/// Every value in `value`, with its JSON pointer.
fn nodes(value: &Value) -> Vec<(String, &Value)> {
    let children: Vec<(String, &Value)> = match value {
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
        Value::Object(map) => map.iter().map(|(key, v)| (key.clone(), v)).collect(),
        _ => Vec::new(),
    };
    let nested = children.into_iter().flat_map(|(key, child)| {
        nodes(child).into_iter().map(move |(at, v)| (format!("/{key}{at}"), v))
    });
    [(String::new(), value)].into_iter().chain(nested).collect()
}

/// The metrics of namespaces not AWS's the template reads, as `(where,
/// [namespace, metric, dimensions...])`: its alarms', and its dashboard's
/// searches and rows.
fn metrics_read(template: &Value) -> Vec<(String, Vec<String>)> {
    let text =
        |keys: Vec<&Value>| keys.iter().map(|k| k.as_str().unwrap_or_default().into()).collect();
    let mut read: Vec<(String, Vec<String>)> = (nodes(template).into_iter())
        .filter(|(_, metric)| metric.get("Namespace").is_some())
        .map(|(at, metric)| {
            let dimensions = metric["Dimensions"].as_array().into_iter().flatten();
            let keys = [&metric["Namespace"], &metric["MetricName"]].into_iter();
            (at, text(keys.chain(dimensions.map(|d| &d["Name"])).collect()))
        })
        .collect();
    let body = template.pointer("/Resources/Dashboard/Properties/DashboardBody/!Sub/0").unwrap();
    let body =
        body.as_str().unwrap().split("${").map(|part| part.split_once('}').map_or(part, |p| p.1));
    let body: Value = serde_json::from_str(&body.collect::<Vec<_>>().join("x")).unwrap();
    for (_, row) in nodes(&body).into_iter().filter(|(at, _)| at.contains("/metrics/")) {
        let Some(row) = row.as_array() else { continue };
        let search = row[0]["expression"].as_str().and_then(|text| text.split_once("('{"));
        let keys: Vec<String> = match search {
            Some((_, search)) => {
                let (keys, rest) = search.split_once('}').unwrap();
                let name = rest.split("MetricName=\"").nth(1).and_then(|m| m.split('"').next());
                let mut keys: Vec<String> = keys.split(',').map(Into::into).collect();
                keys.insert(1, name.unwrap_or_default().into());
                keys
            }
            None => text(row.iter().take(2).chain(row.iter().skip(2).step_by(2)).collect()),
        };
        read.push(("the dashboard".into(), keys));
    }
    read.retain(|(_, keys)| !keys[0].starts_with("AWS/"));
    read
}

/// Where the template reads a metric the function does not write.
fn metric_drift(template: &Value, directive: &Value) -> Vec<String> {
    let names = directive["Metrics"].as_array().unwrap().iter().map(|metric| &metric["Name"]);
    let (namespace, sets) = (&directive["Namespace"], &directive["Dimensions"]);
    let names = json!(names.collect::<Vec<_>>());
    let written = format!("the function writes {namespace} {names} by {sets}");
    let drift = metrics_read(template).into_iter().filter(|(_, keys)| {
        let (metric, by) = (json!(keys[1]).to_string(), json!(keys[2..]));
        *namespace != keys[0]
            || !written.contains(&metric)
            || !sets.as_array().unwrap().contains(&by)
    });
    drift.map(|(at, keys)| format!("template.yaml's {at} reads {keys:?}; {written}")).collect()
}

/// Where the variables the template sets and those the function reads (and
/// deploying.md names) or needs differ; where a table's key is not
/// `store::layout`'s: this stack's, and that of several Regions.
fn variable_and_key_drift(template: &Value, function: &Function) -> Vec<String> {
    let set: BTreeSet<String> =
        template.pointer(VARIABLES).unwrap().as_object().unwrap().keys().cloned().collect();
    let (reads, docs) = (&function.reads, include_str!("../../docs/deploying.md"));
    let mut found: Vec<String> = (set.difference(reads))
        .map(|name| format!("template.yaml sets {name}; the function reads {reads:?}"))
        .chain(function.needs.difference(&set).map(|name| format!("the function needs {name}")))
        .chain(
            (reads.iter().filter(|name| !docs.contains(&format!("`{name}`"))))
                .map(|name| format!("the function reads {name}; deploying.md does not name it")),
        )
        .collect();
    let global = serde_yaml_ng::from_str(include_str!("../../global-table.yaml")).unwrap();
    let global = crate::interface::json(global);
    let layout =
        json!(TABLE_KEY.map(|k| json!([k.name, k.key_type.as_str(), k.attribute_type.as_str()])));
    for (file, source, name) in [
        ("template.yaml", template, "PlantsTable"),
        ("global-table.yaml", &global, "PlantsGlobalTable"),
    ] {
        let table = &source["Resources"][name]["Properties"];
        let types = table["AttributeDefinitions"].as_array().unwrap();
        let key = table["KeySchema"].as_array().unwrap().iter().map(|key| {
            let typed = types.iter().find(|t| t["AttributeName"] == key["AttributeName"]);
            json!([key["AttributeName"], key["KeyType"], typed.map(|t| &t["AttributeType"])])
        });
        let key = Value::Array(key.collect());
        if key != layout {
            found.push(format!("{file}'s table key is {key}; store::layout's {layout}"));
        }
    }
    found
}

/// Where Cognito's resource server, the scopes the template names of it,
/// the function's scope of each access and openapi.yaml's accesses differ.
fn scope_drift(template: &Value, spec: &Value) -> Vec<String> {
    let server = &template["Resources"]["PlantsResourceServer"]["Properties"]["Scopes"];
    let scopes: BTreeSet<&str> =
        server.as_array().unwrap().iter().filter_map(|s| s["ScopeName"].as_str()).collect();
    let accesses = nodes(spec).into_iter().filter(|(at, _)| at.contains("/security/0/bearerAuth/"));
    let accesses: BTreeSet<&str> = accesses.filter_map(|(_, access)| access.as_str()).collect();
    let mut found = Vec::new();
    if scopes != accesses {
        found.push(format!(
            "the resource server's scopes are {scopes:?}; openapi.yaml's accesses {accesses:?}"
        ));
    }
    for (at, text) in nodes(template) {
        let named = text.as_str().and_then(|text| text.strip_prefix("${PlantsResourceServer}/"));
        if let Some(scope) = named.filter(|scope| !scopes.contains(scope)) {
            found.push(format!(
                "template.yaml's {at} names the scope {scope}; the resource server has {scopes:?}"
            ));
        }
    }
    let variables = template.pointer(VARIABLES).unwrap();
    for access in accesses {
        let variable = &variables[format!("AUTH_SCOPE_{}", access.to_uppercase())];
        if !variable.to_string().contains(&format!("\"${{PlantsResourceServer}}/{access}\"")) {
            found.push(format!("the function's {access} scope with Cognito is {variable}, not the resource server's"));
        }
    }
    found
}

/// Where a number the template or openapi.yaml states is not the code's:
/// `MaxPlantsPerOwner`'s and the interface's limits.
fn number_drift(template: &Value, spec: &Value) -> Vec<String> {
    let parameters = spec["paths"]["/plants"]["get"]["parameters"].as_array().unwrap();
    let limit = &parameters.iter().find(|p| p["name"] == "limit").unwrap()["schema"];
    let plant = &spec["components"]["schemas"]["Plant"]["properties"];
    let bound = &template["Parameters"]["MaxPlantsPerOwner"];
    let stated = [
        ("MaxPlantsPerOwner's Default", &bound["Default"], json!(DEFAULT_MAX_PLANTS_PER_OWNER)),
        ("MaxPlantsPerOwner's MinValue", &bound["MinValue"], json!(0)),
        ("MaxPlantsPerOwner's MaxValue", &bound["MaxValue"], json!(MOST_PLANTS)),
        ("Plant.name's maxLength", &plant["name"]["maxLength"], json!(NAME_MAX_CHARS)),
        ("Plant.tag's maxLength", &plant["tag"]["maxLength"], json!(TAG_MAX_CHARS)),
        ("limit's maximum", &limit["maximum"], json!(LIMIT_MAX)),
        ("limit's default", &limit["default"], json!(LIMIT_DEFAULT)),
    ];
    let drift = stated.into_iter().filter(|(_, stated, code)| *stated != code);
    drift.map(|(what, stated, code)| format!("{what}: {stated}; the code's {code}")).collect()
}

/// Where a `Retry-After` and openapi.yaml's range for it disagree: the
/// gateway's 429 is its least, a rate rule's its window and the most, the
/// function's 503 within Unavailable's.
fn retry_after_drift(template: &Value, spec: &Value) -> Vec<String> {
    let range = |answer: &str| {
        let schema = &spec["components"]["responses"][answer]["headers"]["Retry-After"]["schema"];
        (schema["minimum"].as_u64(), schema["maximum"].as_u64())
    };
    let ((least, most), unavailable) = (range("TooManyRequests"), range("Unavailable"));
    let answer = ApiError::Unavailable(String::new()).into_response();
    let function = answer.headers()["retry-after"].to_str().unwrap().parse().ok();
    let throttled =
        template.pointer("/Resources/PlantsRestApi/Properties/GatewayResponses/THROTTLED").unwrap();
    let gateway = nodes(throttled).into_iter().find(|(at, _)| at.ends_with("/Retry-After"));
    let gateway = gateway.and_then(|(_, value)| value.as_str()?.trim_matches('\'').parse().ok());
    let mut sent = vec![
        ("the gateway's 429", gateway, least == gateway),
        ("the function's 503", function, unavailable.0 <= function && function <= unavailable.1),
    ];
    for rule in template["Resources"]["WebAcl"]["Properties"]["Rules"].as_array().unwrap() {
        if let Some(window) =
            rule["Statement"]["RateBasedStatement"]["EvaluationWindowSec"].as_u64()
        {
            let header = format!(r#"{{"Name":"Retry-After","Value":"{window}"}}"#);
            let held = rule["Action"].to_string().contains(&header) && Some(window) == most;
            sent.push(("a rate rule's 429, by its window", Some(window), held));
        }
    }
    let ranges = format!("openapi.yaml's 429 {least:?} to {most:?}, 503 {unavailable:?}");
    let drift = sent.into_iter().filter(|(_, _, held)| !held);
    drift.map(|(what, sent, _)| format!("{what} sends Retry-After {sent:?}; {ranges}")).collect()
}

/// Every disagreement between the template (with openapi.yaml) and the
/// function.
fn drift([spec, template, _]: &[Value; 3], function: &Function) -> Vec<String> {
    let mut found = metric_drift(template, &function.directive);
    found.extend(variable_and_key_drift(template, function));
    found.extend(scope_drift(template, spec));
    found.extend(number_drift(template, spec));
    found.extend(retry_after_drift(template, spec));
    found
}

const VARIABLES: &str = "/Resources/PlantsFunction/Properties/Environment/Variables";

/// One change of each kind, made alone: the value at a JSON pointer of
/// openapi.yaml (0), template.yaml (1) or the function's EMF directive (2).
#[rustfmt::skip]
const CHANGES: [(usize, &str, &str); 8] = [
    (1, "/Resources/FunctionServerErrorsAlarm/Properties/Metrics/0/MetricStat/Metric/Namespace", "PlantStore2"),
    (1, "/Resources/FunctionServerErrorsAlarm/Properties/Metrics/0/MetricStat/Metric/MetricName", "ServerError"),
    (2, "/Metrics/3/Name", "Errors5xx"),
    (1, "/Resources/PlantsTable/Properties/KeySchema/0/AttributeName", "ownr"),
    (1, "/Resources/PlantsResourceServer/Properties/Scopes/0/ScopeName", "reads"),
    (1, "/Parameters/MaxPlantsPerOwner/MaxValue", "2000000"),
    (0, "/components/schemas/Plant/properties/name/maxLength", "255"),
    (1, "/Resources/WebAcl/Properties/Rules/0/Statement/RateBasedStatement/EvaluationWindowSec", "120"),
];

#[tokio::test]
async fn the_template_shares_the_functions_metrics_variables_key_scopes_and_numbers() {
    let function = function().await;
    assert_eq!(drift(&sources(), &function), Vec::<String>::new());
    // Each value of CHANGES, then a variable's name.
    for change in CHANGES.iter().map(Some).chain([None]) {
        let (mut sources, mut function) = (sources(), function.clone());
        let change = match change {
            Some(&(source, pointer, value)) => {
                let target =
                    if source == 2 { &mut function.directive } else { &mut sources[source] };
                let value = serde_json::from_str(value).unwrap_or(json!(value));
                *target.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer}")) = value.clone();
                format!("{pointer}: {value}")
            }
            None => {
                let variables = sources[1].pointer_mut(VARIABLES).unwrap().as_object_mut().unwrap();
                let value = variables.remove("AUTH_SCOPE_READ").unwrap();
                variables.insert("AUTH_SCOPES_READ".into(), value);
                "AUTH_SCOPE_READ renamed AUTH_SCOPES_READ".into()
            }
        };
        let found = drift(&sources, &function);
        println!("{change}:\n  {}", found.join("\n  "));
        assert!(!found.is_empty(), "{change} went unnoticed");
    }
}
