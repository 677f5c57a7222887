//! The interface as consumers meet it: the reference page (Redocly CLI, read
//! in headless Chromium), and the breaking-change gate against 1.0.0 (Optic,
//! and a narrowed bound or another major version), proved on `xtask/gate/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use plant_store_local_support::process::{output, run};
use plant_store_local_support::tools::{
    ensure_chromium, ensure_npm_tools, npm_prefix, npm_tool, temp_dir,
};
use plant_store_local_support::{Result, documented, log, root};
use serde_json::Value;

/// The interface as released: 1.x changes to openapi.yaml are additive.
const RELEASED: &str = "docs/openapi-1.0.0.yaml";
/// The reference page, and its screenshot beside it (`.png`).
pub(crate) const PAGE: &str = "target/api-reference/plant-store-api.html";
/// Redoc's badge loads Redocly's logo from their CDN, the page's one
/// request beyond its file: an empty inline image instead, for offline.
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
pub(crate) fn reference_page() -> Result<PathBuf> {
    log!("the API reference page: Redocly CLI, then headless Chromium");
    let page = root().join(PAGE);
    std::fs::create_dir_all(page.parent().unwrap())?;
    build_page(Path::new("openapi.yaml"), &page)?;
    check_page(&page)?;
    let dir = temp_dir("reference")?;
    let mut spec: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string("openapi.yaml")?)?;
    let operation = documented::operations().pop().ok_or("openapi.yaml has no operation")?;
    let item = spec["paths"][&operation.path].as_object_mut().ok_or("no path item")?;
    item.remove(&operation.method.to_lowercase());
    let (without, incomplete) = (dir.path().join("openapi.json"), dir.path().join("page.html"));
    std::fs::write(&without, spec.to_string())?;
    build_page(&without, &incomplete)?;
    let (method, path) = (&operation.method, &operation.path);
    if check_page(&incomplete).is_ok() {
        return Err(format!("the page check passed a page without {method} {path}").into());
    }
    log!("the page check refused a page without {method} {path}, as it must");
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

/// Whether `current` breaks a client of `released`: an error naming the
/// breaking changes.
fn gate(released: &Path, current: &Path) -> Result {
    let mut optic = Command::new(npm_tool("optic")?);
    let optic = optic.arg("diff").arg(released).arg(current).arg("--check").output()?;
    if !optic.status.success() {
        // Optic prints each broken rule as `x [rule] why`, among the diff.
        let printed =
            String::from_utf8_lossy(&optic.stdout) + String::from_utf8_lossy(&optic.stderr);
        let broken: Vec<&str> =
            printed.lines().map(str::trim).filter(|line| line.starts_with("x [")).collect();
        let why = if broken.is_empty() { printed.trim().to_owned() } else { broken.join("\n  ") };
        return Err(format!("Optic:\n  {why}").into());
    }
    let problems = beyond_optic(&dereferenced(released)?, &dereferenced(current)?);
    if !problems.is_empty() {
        return Err(format!("breaking:\n  {}", problems.join("\n  ")).into());
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
    let major =
        |spec: &Value| Some(spec["info"]["version"].as_str()?.split('.').next()?.to_owned());
    if major(current) != major(released) {
        let version = &current["info"]["version"];
        problems.push(format!("info.version {version} is another major version"));
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

/// The gate's proof, on its own fixtures (`xtask/gate/`): it refuses each
/// `breaking-*.yaml` against `base.yaml` and passes each `additive-*.yaml`;
/// then the gate: openapi.yaml against the released 1.0.0.
pub(crate) fn breaking_change_gate() -> Result {
    log!("the breaking-change gate, on its fixtures (xtask/gate/)");
    let fixtures = root().join("xtask/gate");
    let mut variants: Vec<PathBuf> =
        std::fs::read_dir(&fixtures)?.map(|entry| Ok(entry?.path())).collect::<Result<_>>()?;
    variants.sort();
    for variant in variants.iter().filter(|variant| !variant.ends_with("base.yaml")) {
        let name = variant.file_stem().unwrap().to_string_lossy();
        match (gate(&fixtures.join("base.yaml"), variant), name.starts_with("breaking-")) {
            (Ok(()), true) => return Err(format!("the gate passed {name}").into()),
            (Err(error), false) => return Err(format!("the gate refused {name}: {error}").into()),
            (Err(error), true) => log!("the gate refuses {name}: {error}"),
            (Ok(()), false) => log!("the gate passes {name}"),
        }
    }
    log!("the breaking-change gate: openapi.yaml against the released 1.0.0 ({RELEASED})");
    gate(Path::new(RELEASED), Path::new("openapi.yaml"))
}
