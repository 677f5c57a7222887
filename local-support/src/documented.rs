//! openapi.yaml's operations, each as a request made of its examples: its
//! path with each path parameter's example, a query of the examples of the
//! query parameters it needs or defaults (not those that continue
//! something, as a cursor does), its body's. What `scripts/dev`'s curl
//! lines, the acceptance suite and the tests send every operation, so that
//! a new one is covered without a line changed.

use serde_json::Value;

/// One operation of openapi.yaml, and its example request.
#[derive(Debug, Clone)]
pub struct Documented {
    pub id: String,
    pub method: String,
    /// The path as openapi.yaml names it (`/plants/{id}`), and with its
    /// examples and query (`/plants/7?limit=2`).
    pub path: String,
    pub target: String,
    /// Its `security` access (`read`, `write`) and the statuses it lists.
    pub access: String,
    pub statuses: Vec<u16>,
    /// Its body's example, as JSON.
    pub body: Option<String>,
}

/// The methods of openapi.yaml's path items (other keys are no operation).
const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/// Every operation of openapi.yaml, the interface's source.
pub fn operations() -> Vec<Documented> {
    operations_of(&serde_yaml_ng::from_str(include_str!("../../openapi.yaml")).unwrap())
}

/// Every operation of an OpenAPI document, read as JSON.
pub fn operations_of(spec: &Value) -> Vec<Documented> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let mut operations = Vec::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            let parameters = [&item["parameters"], &operation["parameters"]];
            let parameters = parameters.into_iter().filter_map(Value::as_array).flatten();
            let (mut target, mut query) = (path.clone(), Vec::new());
            for parameter in parameters {
                let (name, example) = (&parameter["name"], &parameter["example"]);
                let example = example.as_str().map_or_else(|| example.to_string(), Into::into);
                match parameter["in"].as_str() {
                    Some("path") => target = target.replace(&format!("{{{name}}}"), &example),
                    Some("query")
                        if parameter["required"] == true
                            || !parameter["schema"]["default"].is_null() =>
                    {
                        query.push(format!("{}={example}", name.as_str().unwrap()));
                    }
                    _ => {}
                }
            }
            if !query.is_empty() {
                target = format!("{target}?{}", query.join("&"));
            }
            let body = &operation["requestBody"]["content"]["application/json"]["example"];
            let statuses = operation["responses"].as_object().unwrap().keys();
            operations.push(Documented {
                id: text(&operation["operationId"]),
                method: method.to_uppercase(),
                path: path.clone(),
                target,
                access: text(&operation["security"][0]["bearerAuth"][0]),
                statuses: statuses.filter_map(|status| status.parse().ok()).collect(),
                body: (!body.is_null()).then(|| body.to_string()),
            });
        }
    }
    operations
}

/// The methods openapi.yaml documents for `path`.
pub fn methods_of(path: &str) -> Vec<String> {
    let operations = operations().into_iter().filter(|operation| operation.path == path);
    operations.map(|operation| operation.method).collect()
}
