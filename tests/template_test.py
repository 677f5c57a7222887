"""What template.yaml must keep that no linter checks (cfn-lint's custom
rules, tests/template-rules.txt, and Checkov check the rest; cargo test
holds what it shares with the function): IAM exactly the FunctionCalls
mapping's calls, on the table alone; gradual, reversible deploys whose
rollback alarms trip for a broken version, not a handful of failures;
retained table and user pool; CORS off by default, every origin it admits
as browsers send it; the edge's Retry-After and rate limits; and in each
mode SAM's translation (after AWS::LanguageExtensions, as the SAM CLI
emulates it), no resource depending on itself. Each check also runs on
copies with one protection removed or widened, and must fail there.
Run: python3 tests/template_test.py (scripts/test: with cfn-lint's venv).
"""

import copy
import functools
import json
import os
import pathlib
import re
import subprocess
import sys
import unittest

from cfnlint.decode import decode
from samcli.lib.cfn_language_extensions.sam_integration import expand_language_extensions
from samtranslator.translator.transform import transform

ROOT = pathlib.Path(__file__).resolve().parent.parent
FUNCTION, TABLE, ALIAS = "PlantsFunction", "PlantsTable", "live"
# The alarms that roll a deployment back: by reference, or by name where a
# reference would be circular (the API's alarm; see template.yaml).
ROLLBACK_ALARMS = [{"Ref": "FunctionErrorsAlarm"}, {"Ref": "FunctionServerErrorsAlarm"},
                   {"Fn::Sub": "${AWS::StackName}-api-5xx"}]
# The table's ARN: this stack's, or global-table.yaml's replica here.
TABLE_ARN = {"Fn::If": ["OwnTable", {"Fn::GetAtt": [TABLE, "Arn"]}, {"Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${GlobalTableName}"}]}
NAMED_ALARMS = {"Api5xxAlarm": {"Fn::Sub": "${AWS::StackName}-api-5xx"}}
# Lambda Managed Instances with made-up (well-formed) network ids.
MANAGED_INSTANCES = {
    "ComputeType": "ManagedInstances", "ManagedInstancesVpcId": "vpc-0a1b2c3d4e5f60708",
    "ManagedInstancesSubnetIds": "subnet-0a1b2c3d4e5f60708,subnet-0a1b2c3d4e5f60709",
    "ManagedInstancesSecurityGroupIds": "sg-0a1b2c3d4e5f60708",
    "ManagedInstancesRouteTableIds": "rtb-0a1b2c3d4e5f60708"}
SIGNED = "arn:aws:signer:us-east-1:123456789012:/signing-profiles/PlantStore/abcdef1234"
# A Region of a deployment in several (global-table.yaml's table, a custom
# domain behind Route 53).
REGIONS = {"GlobalTableName": "plant-store-plants", "DomainName": "plants.example.com",
           "CreateUserPool": "false", "AuthCognitoClientIds": "1example23456789",
           "AuthIssuer": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_example",
           "CertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d",
           "HostedZoneId": "Z0123456789ABCDEFGHIJ"}
MODES = [{}, {"DeploymentType": "AllAtOnce", "ApiEdge": "Http", "SigningProfileVersionArn": SIGNED},
         MANAGED_INSTANCES, REGIONS, {**REGIONS, "ApiEdge": "Http"}]
# What only a deployment in several Regions makes.
REGION_RESOURCES = {"ApiDomain", "RegionHealthCheck", "RegionRecord"}


@functools.cache
def load_template():
    """The parsed template, read once; callers that change it take a copy."""
    template, errors = decode(str(ROOT / "template.yaml"))
    assert not errors, errors
    return template


def holds(template, condition, parameters):
    """Whether a condition holds with these parameters (the others at their defaults)."""
    def value(v):
        if isinstance(v, dict) and "Ref" in v:
            return parameters.get(v["Ref"], template["Parameters"][v["Ref"]].get("Default"))
        if isinstance(v, dict) and "Condition" in v:
            return holds(template, v["Condition"], parameters)
        if isinstance(v, dict) and "Fn::Join" in v:
            return v["Fn::Join"][0].join(as_list(value(v["Fn::Join"][1])))
        [(name, args)] = v.items() if isinstance(v, dict) else [(None, v)]
        return {"Fn::Equals": lambda: str(value(args[0])) == str(value(args[1])),
                "Fn::Not": lambda: not value(args[0]), "Fn::And": lambda: all(map(value, args)),
                "Fn::Or": lambda: any(map(value, args))}.get(name, lambda: v)()
    return value(template["Conditions"][condition])


def as_list(value):
    return value if isinstance(value, list) else [value]


def resolved(template, value):
    """`value` with a FindInMap or a Ref resolved, parameters at their defaults."""
    if isinstance(value, dict) and "Ref" in value:
        return template["Parameters"][value["Ref"]]["Default"]
    if isinstance(value, dict) and "Fn::FindInMap" in value:
        [name, key, value] = [resolved(template, k) for k in value["Fn::FindInMap"]]
        return template["Mappings"][name][key][value]
    return value


def iam_problems(template):
    problems = []
    function = template["Resources"][FUNCTION]["Properties"]
    iam = [name for name, r in template["Resources"].items() if r["Type"].startswith("AWS::IAM::")]
    if "Role" in function or iam:
        problems.append(f"IAM besides the function's own policy: {iam or function['Role']}")
    policies = function.get("Policies", [])
    if len(policies) != 1 or not isinstance(policies[0], dict):
        return problems + [f"the function's Policies are not one inline policy: {policies}"]
    endpoint = template["Resources"]["DynamoDbEndpoint"]["Properties"]["PolicyDocument"]
    # The calls the function makes (tests/api/interface.rs holds them to the store's).
    wanted = set(calls(template))
    for who, statements in [("the policy", policies[0]["Statement"]),
                            ("the VPC endpoint", endpoint["Statement"])]:
        granted = set()
        for statement in statements:
            if "NotAction" in statement or "NotResource" in statement:
                problems.append(f"{who}: NotAction/NotResource grant everything else: {statement}")
            granted |= set(as_list(resolved(template, statement.get("Action", []))))
            if as_list(statement.get("Resource")) != [TABLE_ARN]:
                problems.append(f"{who}: {sorted(granted)} on {statement.get('Resource')}, not on the table alone")
        if granted != wanted:
            problems.append(f"{who} allows {sorted(granted)}; the function calls {sorted(wanted)}")
    return problems


def deployment_problems(template):
    properties = template["Resources"][FUNCTION]["Properties"]
    problems = []
    if properties.get("AutoPublishAlias") != ALIAS:
        problems.append(f"the function publishes no alias {ALIAS!r} on every deploy")
    preference = properties.get("DeploymentPreference", {})
    if preference.get("Type") != {"Ref": "DeploymentType"}:
        problems.append("the deployment type is not the DeploymentType parameter")
    for wanted in ROLLBACK_ALARMS:
        if wanted not in preference.get("Alarms", []):
            problems.append(f"{wanted} does not roll a deployment back")
    for name, alarm_name in NAMED_ALARMS.items():
        if alarm(template, name).get("AlarmName") != alarm_name:
            problems.append(f"alarm {name} is not named as the deployment preference names it")
    return problems


# What an alarm's metrics count: failures, or all requests.
FAILURES = {"ServerErrors", "Errors", "5xx", "5XXError"}
REQUESTS = {"Requests", "Invocations", "Count"}


def trips(template, properties, failures, requests):
    """Whether the alarm fires on a one-minute datapoint of `failures` of
    `requests` requests, parameters at their defaults, as CloudWatch
    computes it (an alarm of a form not understood here trips)."""
    if "MetricName" in properties:
        value = failures if resolved(template, properties["MetricName"]) in FAILURES else None
    else:
        values, expression = {}, None
        for metric in properties.get("Metrics", []):
            if "MetricStat" in metric:
                name = resolved(template, metric["MetricStat"]["Metric"]["MetricName"])
                values[metric["Id"]] = (
                    failures if name in FAILURES else requests if name in REQUESTS else None
                )
            elif metric.get("ReturnData", True):
                expression = metric["Expression"]
        if isinstance(expression, dict):
            parameter = lambda m: str(template["Parameters"][m.group(1)]["Default"])
            expression = re.sub(r"\$\{(\w+)\}", parameter, expression["Fn::Sub"])
        if not isinstance(expression, str) or None in values.values():
            return True
        value = eval(expression, {"__builtins__": {}, "IF": lambda c, t, f: t if c else f}, values)
    if value is None:
        return True
    threshold = float(resolved(template, properties["Threshold"]))
    above = properties["ComparisonOperator"] == "GreaterThanThreshold"
    return value > threshold if above else value >= threshold


def rollback_alarm_problems(template):
    problems = []
    for resource in ["FunctionErrorsAlarm", "FunctionServerErrorsAlarm", *NAMED_ALARMS]:
        properties = alarm(template, resource)
        few = [(1, n) for n in (1, 2, 5, 100, 1000)] + [(n, n) for n in range(1, 10)]
        tripped = [(f, r) for f, r in few if trips(template, properties, f, r)]
        if tripped:
            problems.append(f"{resource}: {tripped[0][0]} failed of {tripped[0][1]} roll back")
        if not trips(template, properties, 100, 100):
            problems.append(f"{resource}: a version failing every request is not rolled back")
    return problems


def other_problems(template):
    problems = []
    for name in (TABLE, "UserPool"):
        resource = template["Resources"][name]
        if resource.get("DeletionPolicy") != "Retain" or resource.get("UpdateReplacePolicy") != "Retain":
            problems.append(f"{name} is not retained on deletion and on replacement")
    cors = template["Parameters"]["CorsAllowedOrigins"]
    if cors["Default"] != "":
        problems.append("CORS is on by default")
    pattern, refused = re.compile(cors["AllowedPattern"]), ["null", "*", "https://a.example/", "https://A.example"]
    if not pattern.fullmatch("https://a.example,http://[::1]:5173") or any(map(pattern.fullmatch, refused)):
        problems.append(f"the origins' pattern does not read origins as browsers send them: {pattern.pattern}")
    return problems


def translation_problems(template):
    try:
        return edge_problems(translated({"CorsAllowedOrigins": "https://a.example"}, template))
    except Exception as error:  # noqa: BLE001 (any failure to translate is one)
        return [f"SAM does not translate it: {error}"]


CHECKS = [iam_problems, deployment_problems, rollback_alarm_problems, other_problems,
          translation_problems]


def problems(template):
    return [problem for check in CHECKS for problem in check(template)]


def alarm(t, name):
    return t["Resources"][name]["Properties"]


def function(t):
    return alarm(t, FUNCTION)


def statement(t, resource=FUNCTION):
    properties = alarm(t, resource)
    return (properties.get("PolicyDocument") or properties["Policies"][0])["Statement"][0]


def calls(t):
    return t["Mappings"]["FunctionCalls"]["DynamoDB"]["Actions"]


# Each: what is changed, and the change. Every one must make `problems` report.
MUTATIONS = {
    "a wildcard action": lambda t: statement(t).update(Action=["dynamodb:*"]),
    "the endpoint's own list, without Query":
        lambda t: statement(t, "DynamoDbEndpoint").update(Action=calls(t)[:-1]),
    "every table": lambda t: statement(t).update(Resource="*"),
    "a managed policy": lambda t: function(t)["Policies"].append("AmazonDynamoDBFullAccess"),
    "the alias": lambda t: function(t).pop("AutoPublishAlias"),
    "a fixed deployment type": lambda t: function(t)["DeploymentPreference"].update(Type="AllAtOnce"),
    "a rollback alarm": lambda t: function(t)["DeploymentPreference"]["Alarms"].pop(),
    "the API alarm's name": lambda t: alarm(t, "Api5xxAlarm").pop("AlarmName"),
    "a rollback alarm on a single error": lambda t: alarm(t, "FunctionErrorsAlarm").update(
        Metrics=None, MetricName="Errors", Threshold=1, ComparisonOperator="GreaterThanOrEqualToThreshold"),
    "a rate without a minimum of requests":
        lambda t: alarm(t, "Api5xxAlarm")["Metrics"][2].update(Expression="100 * errors / requests"),
    "a minimum of requests that a handful meets":
        lambda t: t["Parameters"]["RollbackMinimumRequests"].update(Default=2),
    "the table's retain policy": lambda t: t["Resources"][TABLE].pop("DeletionPolicy"),
    "the user pool's replacement policy": lambda t: t["Resources"]["UserPool"].pop("UpdateReplacePolicy"),
    "CORS on by default": lambda t: t["Parameters"]["CorsAllowedOrigins"].update(Default="https://a.example"),
    "an origin's pattern admitting a path": lambda t: t["Parameters"]["CorsAllowedOrigins"].update(
        AllowedPattern="^$|^https?://[^,*\\s]+(,https?://[^,*\\s]+)*$"),
    "the firewall's 429 unreadable": lambda t: alarm(t, "WebAcl")["Rules"][0]["Action"]["Block"][
        "CustomResponse"].update(ResponseHeaders=[{"Name": "Retry-After", "Value": "60"}]),
    "the web ACL not associated": lambda t: t["Resources"].pop("WebAclAssociation"),
    "both rate limits by address": lambda t: next(
        r for r in alarm(t, "WebAcl")["Rules"] if r["Name"] == "RateLimitPerCaller")["Statement"][
        "RateBasedStatement"].update(AggregateKeyType="IP", CustomKeys=None),
}


def translated(parameters, template=None):
    """The template as CloudFormation runs it with these parameters: the
    AWS::LanguageExtensions transform (the SAM CLI's emulation of it), then
    the SAM transform, with the code already uploaded as `sam deploy` does."""
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    pseudo = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
              "AWS::Partition": "aws", "AWS::StackName": "plant-store",
              "AWS::URLSuffix": "amazonaws.com"}
    template = json.loads(json.dumps(template or load_template()))
    expanded = expand_language_extensions(
        template, parameter_values={**pseudo, **parameters}, enabled=True
    ).expanded_template
    expanded["Resources"][FUNCTION]["Properties"]["CodeUri"] = "s3://artifacts/plant-store.zip"
    no_managed_policies = type("NoManagedPolicies", (), {"load": lambda self: {}})()
    return transform(expanded, parameters, no_managed_policies)["Resources"]


def references(value):
    """The logical ids that `value` refers to (Ref, GetAtt, Sub)."""
    if isinstance(value, list):
        return {name for item in value for name in references(item)}
    if not isinstance(value, dict):
        return set()
    found = set()
    for key, inner in value.items():
        if key == "Ref" and isinstance(inner, str):
            found.add(inner)
        elif key == "Fn::GetAtt":
            found.add(inner[0] if isinstance(inner, list) else inner.split(".")[0])
        elif key == "Fn::Sub":
            text = inner if isinstance(inner, str) else inner[0]
            found |= {name.split(".")[0] for name in re.findall(r"\$\{([^}!]+)\}", text)}
            found |= references(inner[1]) if isinstance(inner, list) else set()
        else:
            found |= references(inner)
    return found


def edge_problems(resources):
    """The protected edge as SAM translates it (CORS on): Retry-After on the
    gateway's 429 only, readable by a listed origin's page, the firewall's too; the web ACL on the API's stage;
    a rate limit per client address and one per caller."""
    problems = []
    [api] = [r for r in resources.values() if r["Type"] == "AWS::ApiGateway::RestApi"]
    answers = api["Properties"]["Body"].get("x-amazon-apigateway-gateway-responses", {})
    for kind, answer in answers.items():
        status = int(answer["statusCode"])
        exposed = "Access-Control-Expose-Headers\": \"'retry-after'" in json.dumps(answer)
        if (status == 429) != ("Retry-After" in json.dumps(answer)) or (status == 429) != exposed:
            problems.append(f"{kind}: Retry-After, on 429 only, which a listed origin may read")
    association = [r for r in resources.values() if r["Type"] == "AWS::WAFv2::WebACLAssociation"]
    if not any(a.get("DependsOn") in resources and "/stages/" in json.dumps(a) for a in association):
        problems.append("the web ACL guards no stage of the API")
    [acl] = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::WAFv2::WebACL"]
    keys = [json.dumps(r["Statement"].get("RateBasedStatement")) for r in acl["Rules"]]
    blocks = [r["Action"] for r in acl["Rules"] if "Block" in r.get("Action", {})]
    firewall = [json.dumps(b) for b in blocks if b["Block"]["CustomResponse"]["ResponseCode"] == 429]
    cors = ['"Access-Control-Allow-Origin", "Value": "*"', '"Value": "retry-after"']
    if not firewall or not all(c in rule for rule in firewall for c in cors):
        problems.append(f"a listed origin's page cannot read the firewall's 429: {firewall}")
    if not any('"IP"' in key for key in keys) or not any('"authorization"' in key for key in keys):
        problems.append(f"no rate limit per client address and per caller: {keys}")
    return problems


def dependency_cycle(resources):
    """A cycle of references between resources, as logical ids, or None."""
    edges = {name: references(r) & resources.keys() for name, r in resources.items()}

    def visit(name, path):
        if name in path:
            return path[path.index(name):] + [name]
        return next(filter(None, (visit(target, path + [name]) for target in edges[name])), None)

    return next(filter(None, (visit(name, []) for name in edges)), None)


class TemplateTest(unittest.TestCase):
    def test_the_template_has_none_of_the_problems(self):
        self.assertEqual(problems(load_template()), [])

    def test_each_mode_lints_clean_and_deploys_gradually_through_the_alias(self):
        for parameters in MODES:
            with self.subTest(mode=parameters.get("ComputeType", parameters)):
                # The cfn-lint installed beside this Python (the pinned one).
                cfn_lint = [str(pathlib.Path(sys.executable).parent / "cfn-lint")]
                overrides = [f"{name}={value}" for name, value in parameters.items()]
                command = cfn_lint + (["--parameters", *overrides, "--"] if overrides else [])
                lint = subprocess.run(command + [str(ROOT / "template.yaml")],
                                      capture_output=True, text=True)
                self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)
                resources = translated(parameters)
                self.assertEqual(dependency_cycle(resources), None)
                made = {name for name, r in resources.items()
                        if "Condition" not in r or holds(load_template(), r["Condition"], parameters)}
                several = "GlobalTableName" in parameters
                self.assertEqual(REGION_RESOURCES & made, REGION_RESOURCES if several else set())
                self.assertEqual(TABLE in made, not several)
                if several:
                    check = resources["RegionHealthCheck"]["Properties"]["HealthCheckConfig"]
                    alarm_name = resources["Api5xxAlarm"]["Properties"]["AlarmName"]
                    self.assertEqual(check["AlarmIdentifier"]["Name"], alarm_name)
                    record = resources["RegionRecord"]["Properties"]
                    self.assertEqual(record["HealthCheckId"], {"Ref": "RegionHealthCheck"})
                [alias_id] = [n for n, r in resources.items() if r["Type"] == "AWS::Lambda::Alias"]
                self.assertEqual(resources[alias_id]["Properties"]["Name"], ALIAS)
                update = resources[alias_id]["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]
                group = resources[update["DeploymentGroupName"]["Ref"]]["Properties"]
                deployment = parameters.get("DeploymentType", "Canary10Percent5Minutes")
                self.assertIn(deployment, json.dumps(group["DeploymentConfigName"]))
                alarms = [a["Name"] for a in group["AlarmConfiguration"]["Alarms"]]
                named = [resources[name]["Properties"]["AlarmName"] for name in NAMED_ALARMS]
                self.assertEqual(alarms, ROLLBACK_ALARMS[:2] + named)
                self.assertIn("DEPLOYMENT_STOP_ON_ALARM", group["AutoRollbackConfiguration"]["Events"])
                edge = parameters.get("ApiEdge", "Protected")
                kind = {"Protected": "AWS::ApiGateway::RestApi", "Http": "AWS::ApiGatewayV2::Api"}[edge]
                [api] = [r for r in resources.values() if r["Type"] == kind]
                self.assertTrue(api["Properties"]["Body"]["paths"])
                for path in api["Properties"]["Body"]["paths"].values():
                    for operation in path.values():
                        uri = json.dumps(operation["x-amazon-apigateway-integration"]["uri"])
                        self.assertIn("${" + alias_id + "}", uri)


class MutationsAreCaught(unittest.TestCase):
    def test_every_removed_or_widened_protection_is_reported(self):
        for change, mutate in MUTATIONS.items():
            with self.subTest(change=change):
                template = copy.deepcopy(load_template())
                mutate(template)
                found = problems(template)
                self.assertTrue(found, f"removing/widening {change} went unnoticed")
                print(f"  {change}: {found[0]}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
