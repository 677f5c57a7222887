//! The interface as the API's consumers meet it (docs/contract.md): the
//! reference page built from openapi.yaml by Redocly CLI and read in
//! headless Chromium; the breaking-change gate against the released 1.0.0
//! (Optic, and what its rules do not see: a narrowed request bound, another
//! major version), with its own
//! proof that it catches each kind of breaking change; and the typed
//! TypeScript client, generated from openapi.yaml and run against a stack.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use plant_store_local_support::process::{output, run};
use plant_store_local_support::tools::{
    ensure_chromium, ensure_npm_tools, npm_prefix, npm_tool, temp_dir,
};
use plant_store_local_support::{Result, log, root};
use serde_json::Value;

/// The interface as released: 1.x changes to openapi.yaml are additive.
const RELEASED: &str = "docs/openapi-1.0.0.yaml";
/// The reference page, and its screenshot beside it (`.png`).
pub const PAGE: &str = "target/api-reference/plant-store-api.html";
/// Redoc 3's sidebar badge ("API docs by Redocly") loads Redocly's logo
/// from their CDN: the page's one request beyond its file. The badge keeps
/// its text and link; its image becomes an empty inline one, so that the
/// page works offline.
const BADGE_LOGOS: [&str; 2] =
    ["https://cdn.redoc.ly/redoc/logo-mini-full.svg", "https://cdn.redoc.ly/redoc/logo-mini.svg"];
const EMPTY_IMAGE: &str =
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='64' height='16'/%3E";

/// Builds the reference page of `spec` into `page`: one static HTML file,
/// Redoc's script inlined.
fn build_page(spec: &Path, page: &Path) -> Result {
    let mut redocly = Command::new(npm_tool("redocly")?);
    redocly.args(["build-docs", "--inlineBundle", "--output"]).arg(page).arg(spec);
    redocly.env("REDOCLY_TELEMETRY", "off").env("REDOCLY_SUPPRESS_UPDATE_NOTICE", "true");
    output(&mut redocly)?;
    let html = std::fs::read_to_string(page)?;
    let offline = (BADGE_LOGOS.iter()).fold(html, |html, logo| html.replace(logo, EMPTY_IMAGE));
    std::fs::write(page, offline)?;
    Ok(())
}

/// The page in headless Chromium (`tests/contract/reference_page.mjs`).
fn check_page(page: &Path) -> Result {
    let script = beside_npm_tools("reference_page.mjs")?;
    run(Command::new("node").arg(script).arg(page).arg(ensure_chromium()?))
}

/// `cargo xtask api-docs`, and the full run: the page of openapi.yaml,
/// built and read in Chromium; then a page without one operation, which
/// the check must refuse.
pub fn reference_page() -> Result<PathBuf> {
    log!("the API reference page: Redocly CLI, then headless Chromium");
    let page = root().join(PAGE);
    std::fs::create_dir_all(page.parent().unwrap())?;
    build_page(Path::new("openapi.yaml"), &page)?;
    check_page(&page)?;
    let dir = temp_dir("reference")?;
    let spec = std::fs::read_to_string("openapi.yaml")?;
    let (without_post, incomplete) =
        (dir.path().join("openapi.yaml"), dir.path().join("page.html"));
    let post = spec.find("    post:\n").ok_or("openapi.yaml has no POST operation")?;
    let components = spec.find("\ncomponents:").ok_or("openapi.yaml has no components")?;
    std::fs::write(&without_post, format!("{}{}", &spec[..post], &spec[components + 1..]))?;
    build_page(&without_post, &incomplete)?;
    if check_page(&incomplete).is_ok() {
        return Err("the page check passed a page without POST /plants".into());
    }
    log!("the page check refused a page without POST /plants, as it must");
    Ok(page)
}

/// A file of tests/contract/, copied beside the npm tools that it imports
/// (Node and tsc resolve them from the file's folder): the copy.
fn beside_npm_tools(name: &str) -> Result<PathBuf> {
    ensure_npm_tools()?;
    let copy = npm_prefix().join("contract").join(name);
    std::fs::create_dir_all(copy.parent().unwrap())?;
    std::fs::copy(root().join("tests/contract").join(name), &copy)?;
    Ok(copy)
}

/// Whether `current` breaks a client of the released interface (given
/// `released`, dereferenced): an error naming the breaking changes.
fn gate(released: &Value, current: &Path) -> Result {
    let optic = Command::new(npm_tool("optic")?)
        .args(["diff", RELEASED])
        .arg(current)
        .arg("--check")
        .output()?;
    if !optic.status.success() {
        // Optic prints each broken rule as `x [rule] why`, among the diff.
        let printed =
            String::from_utf8_lossy(&optic.stdout) + String::from_utf8_lossy(&optic.stderr);
        let broken: Vec<&str> =
            printed.lines().map(str::trim).filter(|line| line.starts_with("x [")).collect();
        let why = if broken.is_empty() { printed.trim().to_owned() } else { broken.join("\n  ") };
        return Err(format!("Optic, against {RELEASED}:\n  {why}").into());
    }
    let problems = beyond_optic(released, &dereferenced(current)?);
    if !problems.is_empty() {
        return Err(format!("breaking against {RELEASED}:\n  {}", problems.join("\n  ")).into());
    }
    Ok(())
}

/// An OpenAPI document as JSON with every `$ref` resolved (Redocly CLI's
/// bundle).
fn dereferenced(spec: &Path) -> Result<Value> {
    let dir = temp_dir("bundle")?;
    let bundle = dir.path().join("openapi.json");
    let mut redocly = Command::new(npm_tool("redocly")?);
    redocly.args(["bundle", "--dereferenced", "--ext", "json", "--output"]).arg(&bundle).arg(spec);
    output(redocly.env("REDOCLY_TELEMETRY", "off").env("REDOCLY_SUPPRESS_UPDATE_NOTICE", "true"))?;
    Ok(serde_json::from_slice(&std::fs::read(bundle)?)?)
}

/// The breaking changes that Optic's rules do not check: a request bound
/// narrowed (a client that sends what 1.0.0 allowed would be refused), and
/// another major version (which is served beside 1.x, never in its place).
fn beyond_optic(released: &Value, current: &Value) -> Vec<String> {
    let now = request_bounds(current);
    let mut problems: Vec<String> = request_bounds(released)
        .into_iter()
        .filter_map(|(place, old)| Some((place.clone(), narrowed(old, now.get(&place)?))))
        .flat_map(|(place, changes)| {
            changes.into_iter().map(move |change| format!("{place}: {change}"))
        })
        .collect();
    let major = |spec: &Value| {
        spec["info"]["version"].as_str().and_then(|v| v.split('.').next()).map(str::to_owned)
    };
    if major(current) != major(released) {
        problems
            .push(format!("info.version {} is another major version", current["info"]["version"]));
    }
    problems
}

/// The schema of each parameter and each request body property, by place
/// (`POST /plants body property name`).
fn request_bounds(spec: &Value) -> BTreeMap<String, &Value> {
    let mut found = BTreeMap::new();
    for (path, item) in spec["paths"].as_object().into_iter().flatten() {
        for (method, operation) in item.as_object().into_iter().flatten() {
            let place = format!("{} {path}", method.to_uppercase());
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                let name = format!("{place} {} {}", parameter["in"], parameter["name"]);
                found.insert(name.replace('"', ""), &parameter["schema"]);
            }
            let media = operation["requestBody"]["content"].as_object().into_iter().flatten();
            for (_, media) in media {
                body_properties(&media["schema"], &format!("{place} body property"), &mut found);
            }
        }
    }
    found
}

fn body_properties<'a>(schema: &'a Value, place: &str, found: &mut BTreeMap<String, &'a Value>) {
    for part in schema["allOf"].as_array().into_iter().flatten() {
        body_properties(part, place, found);
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        found.insert(format!("{place} {name}"), property);
    }
}

/// How `new` admits less than `old`: a lower bound raised, an upper bound
/// lowered (value, length and items alike), an enum added or one that lost
/// a value.
fn narrowed(old: &Value, new: &Value) -> Vec<String> {
    let lower = ["minimum", "exclusiveMinimum", "minLength", "minItems"].map(|key| (key, 1.0));
    let upper = ["maximum", "exclusiveMaximum", "maxLength", "maxItems"].map(|key| (key, -1.0));
    let mut changes: Vec<String> = (lower.into_iter().chain(upper))
        .filter(|&(key, raise)| match (old[key].as_f64(), new[key].as_f64()) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(old), Some(new)) => (new - old) * raise > 0.0,
        })
        .map(|(key, _)| match &old[key] {
            Value::Null => format!("{key} none -> {}", new[key]),
            bound => format!("{key} {bound} -> {}", new[key]),
        })
        .collect();
    if let Some(values) = new["enum"].as_array() {
        let kept = |value: &Value| values.contains(value);
        match old["enum"].as_array() {
            None => changes.push("an enum added".into()),
            Some(old) if !old.iter().all(kept) => changes.push("the enum lost values".into()),
            Some(_) => {}
        }
    }
    changes
}

/// Edits of openapi.yaml that break 1.x clients, each as (what it does,
/// the text it replaces, the text it puts instead).
const BREAKING: [(&str, &str, &str); 6] = [
    (
        "a response field renamed",
        "\n        tag:\n          description: |\n            Tag",
        "\n        kind:\n          description: |\n            Tag",
    ),
    (
        "`tag` made required",
        "      required:\n        - name\n      type: object",
        "      required:\n        - name\n        - tag\n      type: object",
    ),
    (
        "a status code dropped",
        "        \"413\":\n          description: The request body is larger",
        "        \"499\":\n          description: The request body is larger",
    ),
    (
        "the `limit` bound narrowed",
        "            maximum: 1000\n            default: 100",
        "            maximum: 500\n            default: 100",
    ),
    (
        "a new required header",
        "      parameters:\n        - name: limit",
        "      parameters:\n        - name: X-Client-Version\n          in: header\n          required: true\n          schema:\n            type: string\n        - name: limit",
    ),
    ("a major version in place of 1.x", "\n  version: 1.0.0\n", "\n  version: 2.0.0\n"),
];
/// An additive edit: a new optional response field.
const ADDITIVE: (&str, &str, &str) = (
    "a new optional response field",
    "\n    NewPlant:",
    "\n        color:\n          description: The plant's colour, when known.\n          type: string\n    NewPlant:",
);

/// The gate against openapi.yaml; then its proof: it fails on each
/// breaking edit and passes the additive one. The edits are judged at once
/// (Node processes, mostly start-up: one after another they took 21 s of
/// the full run at a0b243e).
pub fn breaking_change_gate() -> Result {
    log!("the breaking-change gate: openapi.yaml against the released 1.0.0 ({RELEASED})");
    let released = dereferenced(Path::new(RELEASED))?;
    gate(&released, Path::new("openapi.yaml"))?;
    let spec = std::fs::read_to_string("openapi.yaml")?;
    let dir = temp_dir("gate")?;
    let edits: Vec<_> = BREAKING.iter().chain([&ADDITIVE]).enumerate().collect();
    for (_, (change, from, _)) in &edits {
        if !spec.contains(from) {
            return Err(format!("the edit for {change} no longer applies to openapi.yaml").into());
        }
    }
    let verdicts: Vec<Result> = std::thread::scope(|threads| {
        let judged: Vec<_> = edits
            .iter()
            .map(|(index, (_, from, to))| {
                let edited = dir.path().join(format!("edit-{index}.yaml"));
                let (spec, released) = (&spec, &released);
                threads.spawn(move || {
                    std::fs::write(&edited, spec.replacen(from, to, 1))?;
                    gate(released, &edited)
                })
            })
            .collect();
        judged.into_iter().map(|verdict| verdict.join().expect("a gate thread panicked")).collect()
    });
    for ((index, (change, _, _)), verdict) in edits.into_iter().zip(verdicts) {
        match (verdict, index < BREAKING.len()) {
            (Ok(()), true) => return Err(format!("the gate passed {change}").into()),
            (Err(error), false) => return Err(format!("the gate refused {change}: {error}").into()),
            (Err(error), true) => log!("the gate refuses {change}:\n{error}"),
            (Ok(()), false) => log!("the gate passes {change}"),
        }
    }
    Ok(())
}

/// The typed client (`tests/contract/typed_client.ts`) against the API at
/// `url`, as the owner of `token`, who has no plants yet: types generated
/// by openapi-typescript, compiled by `tsc --strict`, run by Node.js.
pub fn typed_client(url: &str, token: &str) -> Result {
    log!("the typed TypeScript client (openapi-typescript, openapi-fetch) at {url}");
    let client = beside_npm_tools("typed_client.ts")?;
    let dir = client.parent().unwrap();
    let types = dir.join("plant-store-api.d.ts");
    run(Command::new(npm_tool("openapi-typescript")?)
        .arg("openapi.yaml")
        .arg("--output")
        .arg(&types))?;
    let config = r#"{"compilerOptions": {"strict": true, "target": "es2022", "module": "nodenext",
        "moduleResolution": "nodenext", "lib": ["es2022", "dom"], "types": ["node"], "outDir": "out"},
        "files": ["typed_client.ts"]}"#;
    std::fs::write(dir.join("tsconfig.json"), config)?;
    run(Command::new(npm_tool("tsc")?).arg("--project").arg(dir))?;
    run(Command::new("node")
        .arg(dir.join("out/typed_client.js"))
        .env("BASE_URL", url)
        .env("TOKEN", token))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::narrowed;

    #[test]
    fn a_bound_narrows_when_it_admits_less_and_only_then() {
        let old = json!({"minLength": 1, "maxLength": 256, "enum": ["a", "b"]});
        assert!(narrowed(&old, &old).is_empty());
        let wider = json!({"minLength": 0, "maxLength": 512, "enum": ["a", "b", "c"]});
        assert!(narrowed(&old, &wider).is_empty());
        let narrower = json!({"minLength": 2, "maxLength": 255, "maxItems": 3, "enum": ["a"]});
        assert_eq!(
            narrowed(&old, &narrower),
            [
                "minLength 1 -> 2",
                "maxLength 256 -> 255",
                "maxItems none -> 3",
                "the enum lost values"
            ]
        );
        assert_eq!(narrowed(&json!({}), &json!({"enum": [1]})), ["an enum added"]);
    }
}
