"""Checks openapi.yaml: valid OpenAPI 3.1 (openapi-spec-validator), and
compatible with the upstream sample for GET and POST /plants: same path and
parameter name, and Plant, NewPlant and Error with the same structure, the
same required fields and the same property types and formats (ours may only
add constraints, and `null` for the optional `tag`)."""

import json
import sys

import yaml
from openapi_spec_validator import validate

ours_path, upstream_path = sys.argv[1], sys.argv[2]
with open(ours_path) as f:
    ours = yaml.safe_load(f)
with open(upstream_path) as f:
    upstream = json.load(f)

validate(ours)
assert ours["openapi"].startswith("3.1"), "not OpenAPI 3.1"
assert ours["info"]["version"] == "1.0.0", "version must be 1.0.0"

problems = []


def types(schema):
    kind = schema.get("type")
    return set(kind) if isinstance(kind, list) else {kind}


def compare_object(name, theirs, mine, optional_nullable=()):
    if sorted(theirs.get("required", [])) != sorted(mine.get("required", [])):
        problems.append(f"{name}: required {mine.get('required')} != {theirs.get('required')}")
    if theirs.get("type") != mine.get("type"):
        problems.append(f"{name}: type {mine.get('type')} != {theirs.get('type')}")
    their_props, my_props = theirs.get("properties", {}), mine.get("properties", {})
    if set(their_props) != set(my_props):
        problems.append(f"{name}: properties {sorted(my_props)} != {sorted(their_props)}")
    for prop, their_schema in their_props.items():
        my_schema = my_props.get(prop, {})
        allowed = types(their_schema) | ({"null"} if prop in optional_nullable else set())
        if not types(their_schema) <= types(my_schema) <= allowed:
            problems.append(f"{name}.{prop}: type {my_schema.get('type')} vs {their_schema.get('type')}")
        if their_schema.get("format") != my_schema.get("format"):
            problems.append(f"{name}.{prop}: format {my_schema.get('format')} != {their_schema.get('format')}")


their_schemas, my_schemas = upstream["components"]["schemas"], ours["components"]["schemas"]
compare_object("Plant", their_schemas["Plant"], my_schemas["Plant"], optional_nullable={"tag"})
compare_object("Error", their_schemas["Error"], my_schemas["Error"])
their_new, my_new = their_schemas["NewPlant"]["allOf"], my_schemas["NewPlant"]["allOf"]
if [part.get("$ref") for part in their_new] != [part.get("$ref") for part in my_new]:
    problems.append("NewPlant: allOf must compose Plant as upstream does")
compare_object("NewPlant (id part)", their_new[1], my_new[1])

for method in ("get", "post"):
    theirs, mine = upstream["paths"]["/plants"][method], ours["paths"].get("/plants", {}).get(method)
    if mine is None:
        problems.append(f"{method.upper()} /plants is missing")
        continue
    their_params = {(p["name"], p["in"]) for p in theirs.get("parameters", [])}
    my_params = {(p["name"], p["in"]) for p in mine.get("parameters", [])}
    if not their_params <= my_params:
        problems.append(f"{method.upper()} /plants: parameters {their_params - my_params} missing")
    for status in theirs["responses"]:
        if status not in mine["responses"]:
            problems.append(f"{method.upper()} /plants: response {status} missing")
if (ours["paths"]["/plants"]["get"]["parameters"][0]["schema"]["type"]
        != upstream["paths"]["/plants"]["get"]["parameters"][0]["schema"]["type"]):
    problems.append("limit: type differs")

if problems:
    print("openapi.yaml is not compatible with the upstream sample:")
    for problem in problems:
        print(f"  - {problem}")
    sys.exit(1)
print(f"{ours_path}: valid OpenAPI {ours['openapi']}, compatible with {upstream_path}")
