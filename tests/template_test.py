"""What matters in template.yaml for safety and cost, beyond the linters.

- The function's IAM policy grants exactly the DynamoDB actions the
  function's code calls (read from src/), on the plants table only, and the
  template defines no other IAM.
- Every log group has a retention, and the function and the API log into
  log groups of the template (not ones created on first use, kept forever).
- Every alarm notifies the alarm topic when it fires, and each thing the
  docs/operating.md's "Operating it" names is watched.
- The table is protected: deletion protection (unless a development stack
  turns it off), point-in-time recovery, retained with the stack.
- The Cognito user pool admits only admin-created users unless asked, and
  it outlives the stack as the table does (deletion protection, retained
  on deletion and on replacement): its users' `sub`s own the plants.
- Outside Cognito mode the stack cannot be created without an audience.
- CORS is off by default and never admits every origin.
- Every Checkov finding the template suppresses has its reason, and the
  function's concurrency is reserved (and so capped) by default.
- Every deploy is gradual and reversible: the function publishes the alias
  `live`, its deployment preference takes its type from the DeploymentType
  parameter, and the function's errors, its 5xx and the API's 5xx alarms
  roll a deployment back; each alarm is a rate over a minimum of requests,
  evaluated here as CloudWatch would: a single failing request, or a
  handful, never trips one, and a version failing every request does.

Each check is also run on copies of the template with one protection
removed or widened, and must fail there (`MutationsAreCaught`), so the checks
cannot pass vacuously.

Both compute types and both kinds of deployment (`ComputeTypes`): the
template lints clean with cfn-lint as classic Lambda (the default) and as
Lambda Managed Instances, each with a canary and with AllAtOnce, and SAM
translates each (after AWS::LanguageExtensions, as the SAM CLI emulates it)
into what that mode needs: the API calls the alias, CodeDeploy shifts it and
rolls it back on the alarms, and no resource depends on itself (cfn-lint
does not see cycles that only the SAM transform creates).

With RequireScopes (`Scopes`): the function requires plants/read and
plants/write, and the Cognito resource server, domain and clients that grant
them exist only then.

The named environments of samconfig.toml (`Environments`) differ as
docs/deploying.md says, and name only parameters and values the template
allows.

Run: python3 tests/template_test.py (scripts/test runs it with the venv that
has cfn-lint, whose YAML loader understands the intrinsic-function tags).
"""

import copy
import functools
import json
import os
import pathlib
import re
import subprocess
import sys
import tomllib
import unittest

from cfnlint.decode import decode
from samcli.lib.cfn_language_extensions.sam_integration import expand_language_extensions
from samtranslator.translator.transform import transform

ROOT = pathlib.Path(__file__).resolve().parent.parent
FUNCTION = "PlantsFunction"
TABLE = "PlantsTable"
TOPIC = "AlarmTopic"
ALIAS = "live"
# The alarms that roll a deployment back: by reference, or by name where a
# reference would be circular (the API's alarm; see template.yaml).
ROLLBACK_ALARMS = [
    {"Ref": "FunctionErrorsAlarm"},
    {"Ref": "FunctionServerErrorsAlarm"},
    {"Fn::Sub": "${AWS::StackName}-api-5xx"},
]
NAMED_ALARMS = {"Api5xxAlarm": {"Fn::Sub": "${AWS::StackName}-api-5xx"}}
# The alarms "Operating it" describes, by the metric each watches.
WATCHED = {
    ("PlantStore", "ServerErrors"),
    ("AWS/Lambda", "Errors"),
    ("AWS/Lambda", "Throttles"),
    ("AWS/ApiGateway", "5xx"),
    ("AWS/ApiGateway", "Latency"),
    ("AWS/DynamoDB", "ReadThrottleEvents"),
    ("AWS/DynamoDB", "WriteThrottleEvents"),
}


# Lambda Managed Instances with made-up (well-formed) network ids.
MANAGED_INSTANCES = {
    "ComputeType": "ManagedInstances",
    "ManagedInstancesSubnetIds": "subnet-0a1b2c3d4e5f60708,subnet-0a1b2c3d4e5f60709",
    "ManagedInstancesSecurityGroupIds": "sg-0a1b2c3d4e5f60708",
    "ManagedInstancesVpcId": "vpc-0a1b2c3d4e5f60708",
    "ManagedInstancesRouteTableIds": "rtb-0a1b2c3d4e5f60708",
}


@functools.cache
def load_template():
    """The parsed template, read once; callers that change it take a copy."""
    template, errors = decode(str(ROOT / "template.yaml"))
    assert not errors, errors
    return template


# What IAM checks for the items of a TransactWriteItems call: each item's own
# action (there is no dynamodb:TransactWriteItems action).
TRANSACTION_ITEMS = {"Put": "put_item", "Update": "update_item", "Delete": "delete_item",
                     "ConditionCheck": "condition_check_item"}


def dynamodb_actions_in_code():
    """`dynamodb:PutItem` for every `.client.put_item()` (and so on) in the
    sources of src/ that use the DynamoDB SDK, and for every `Put::builder()`
    (and so on) of a transaction. Other clients (`https.rs`'s hyper client)
    are not DynamoDB's."""
    calls = set()
    for source in (ROOT / "src").rglob("*.rs"):
        text = source.read_text()
        if "aws_sdk_dynamodb" not in text:
            continue
        calls |= set(re.findall(r"\.client\s*\.([a-z_]+)\(\)", text))
        # The client's configuration (`PlantStore::traced`), not an operation.
        calls.discard("config")
        if "transact_write_items" in calls:
            calls.discard("transact_write_items")
            for item in re.findall(r"\b(Put|Update|Delete|ConditionCheck)::builder\(\)", text):
                calls.add(TRANSACTION_ITEMS[item])
    return {"dynamodb:" + "".join(part.title() for part in call.split("_")) for call in calls}


def resources(template, kind):
    return {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] == kind
    }


def as_list(value):
    return value if isinstance(value, list) else [value]


def iam_problems(template):
    problems = []
    function = template["Resources"][FUNCTION]["Properties"]
    if "Role" in function:
        problems.append("the function has a Role of its own instead of its Policies")
    iam = [name for name, r in template["Resources"].items() if r["Type"].startswith("AWS::IAM::")]
    if iam:
        problems.append(f"IAM resources besides the function's policy: {iam}")
    policies = function.get("Policies", [])
    if len(policies) != 1 or not isinstance(policies[0], dict):
        return problems + [f"the function's Policies are not one inline policy: {policies}"]
    granted = set()
    for statement in policies[0]["Statement"]:
        if statement.get("Effect") != "Allow":
            continue
        if "NotAction" in statement or "NotResource" in statement:
            problems.append(f"NotAction/NotResource grant everything else: {statement}")
        actions = set(as_list(statement.get("Action", [])))
        granted |= actions
        resource = as_list(statement.get("Resource", []))
        if resource != [{"Fn::GetAtt": [TABLE, "Arn"]}]:
            problems.append(f"{sorted(actions)} granted on {resource}, not on the table alone")
    wanted = dynamodb_actions_in_code()
    if granted != wanted:
        problems.append(f"the policy grants {sorted(granted)}; the code calls {sorted(wanted)}")
    return problems


def log_problems(template):
    problems = []
    groups = resources(template, "AWS::Logs::LogGroup")
    for name, group in groups.items():
        if "RetentionInDays" not in group.get("Properties", {}):
            problems.append(f"log group {name} keeps its logs forever (no RetentionInDays)")
    logging = template["Resources"][FUNCTION]["Properties"].get("LoggingConfig", {})
    if logging.get("LogGroup", {}).get("Ref") not in groups:
        problems.append("the function logs to a group Lambda creates, without retention")
    apis = resources(template, "AWS::Serverless::HttpApi")
    for name, api in apis.items():
        destination = api["Properties"].get("AccessLogSettings", {}).get("DestinationArn", {})
        if destination.get("Fn::GetAtt", [None])[0] not in groups:
            problems.append(f"the HTTP API {name} writes no access log to a group of the template")
    return problems


def composed_alarms(composite):
    """The alarms a composite alarm's rule names, and the rule's operators."""
    rule = composite["Properties"]["AlarmRule"]
    rule = rule.get("Fn::Sub", "") if isinstance(rule, dict) else rule
    return re.findall(r'ALARM\("\$\{(\w+)\}"\)', rule), re.findall(r"\b(AND|OR|NOT)\b", rule)


def alarm_problems(template):
    problems = []
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    composites = resources(template, "AWS::CloudWatch::CompositeAlarm")
    watched = set()
    # An alarm a composite alarm combines notifies through the composite.
    notifying = {
        name
        for composite in composites.values()
        if {"Ref": TOPIC} in composite["Properties"].get("AlarmActions", [])
        for name in composed_alarms(composite)[0]
    }
    for name, composite in composites.items():
        if {"Ref": TOPIC} not in composite["Properties"].get("AlarmActions", []):
            problems.append(f"alarm {name} notifies nobody (no AlarmActions to {TOPIC})")
    for name, alarm in alarms.items():
        properties = alarm["Properties"]
        if {"Ref": TOPIC} not in properties.get("AlarmActions", []) and name not in notifying:
            problems.append(f"alarm {name} notifies nobody (no AlarmActions to {TOPIC})")
        metrics = [properties] + [
            m["MetricStat"]["Metric"] for m in properties.get("Metrics", []) if "MetricStat" in m
        ]
        watched |= {(m["Namespace"], m["MetricName"]) for m in metrics if "MetricName" in m}
    for missing in sorted(WATCHED - watched):
        problems.append(f"no alarm watches {missing[0]} {missing[1]}")
    if template["Resources"].get(TOPIC, {}).get("Type") != "AWS::SNS::Topic":
        problems.append(f"no SNS topic {TOPIC} for the alarms")
    return problems


def table_problems(template):
    table = template["Resources"][TABLE]
    properties = table["Properties"]
    problems = []
    protection = template["Parameters"]["TableDeletionProtection"].get("Default")
    if properties.get("DeletionProtectionEnabled") != {"Fn::If": ["ProtectTable", True, False]}:
        problems.append("the table's deletion protection does not follow TableDeletionProtection")
    if protection != "true":
        problems.append("the table has no deletion protection by default")
    pitr = properties.get("PointInTimeRecoverySpecification", {})
    if pitr.get("PointInTimeRecoveryEnabled") is not True:
        problems.append("the table has no point-in-time recovery")
    for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
        if table.get(policy) != "Retain":
            problems.append(f"the table's {policy} is not Retain")
    return problems


def user_pool_problems(template):
    parameter = template["Parameters"]["AllowSelfSignUp"]
    pool = template["Resources"]["UserPool"]["Properties"]
    admin_only = pool.get("AdminCreateUserConfig", {}).get("AllowAdminCreateUserOnly")
    if parameter.get("Default") != "false" or admin_only != {"Fn::If": ["SelfSignUp", False, True]}:
        return ["anyone can sign up to the user pool by default"]
    return []


def user_pool_retention_problems(template):
    pool = template["Resources"]["UserPool"]
    problems = []
    if pool["Properties"].get("DeletionProtection") != "ACTIVE":
        problems.append("the user pool has no deletion protection")
    for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
        if pool.get(policy) != "Retain":
            problems.append(f"the user pool's {policy} is not Retain")
    return problems


def audience_problems(template):
    """Outside Cognito mode, a Rule refuses a stack without AuthAudience."""
    rule = template.get("Rules", {}).get("IssuerWithoutUserPool", {})
    required = {"Fn::Not": [{"Fn::Equals": [{"Ref": "AuthAudience"}, ""]}]}
    if rule.get("RuleCondition") != {"Fn::Equals": [{"Ref": "CreateUserPool"}, "false"]} or not any(
        assertion.get("Assert") == required for assertion in rule.get("Assertions", [])
    ):
        return ["a stack without the user pool can be created without AuthAudience"]
    return []


def cors_problems(template):
    parameter = template["Parameters"]["CorsAllowedOrigins"]
    pattern = parameter.get("AllowedPattern", ".*")
    problems = []
    if parameter.get("Default") != "":
        problems.append("CORS is on by default")
    for origin in ("*", "https://app.example.com,*", "null"):
        if re.fullmatch(pattern, origin):
            problems.append(f"CorsAllowedOrigins admits {origin!r}")
    if not re.fullmatch(pattern, "https://app.example.com,http://localhost:5173"):
        problems.append("CorsAllowedOrigins refuses a list of origins")
    return problems


def local_endpoint_problems(template):
    # `sam local --env-vars` sets only declared variables: undeclared, the
    # local endpoint is dropped and a local run reaches the real DynamoDB.
    variables = template["Resources"][FUNCTION]["Properties"]["Environment"]["Variables"]
    if variables.get("AWS_ENDPOINT_URL_DYNAMODB") != "":
        return ["AWS_ENDPOINT_URL_DYNAMODB is not declared empty, so sam local cannot set it"]
    return []


def scanner_problems(template):
    """Every Checkov finding the template suppresses says why, and the
    function has a reserved-concurrency limit unless a stack turns it off."""
    problems = []
    for name, resource in template["Resources"].items():
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
            if len(skip.get("comment", "").strip()) < 40:
                problems.append(f"{name} suppresses {skip.get('id')} without a reason")
    reserved = template["Resources"][FUNCTION]["Properties"].get("ReservedConcurrentExecutions")
    if reserved != {"Fn::If": ["ReserveConcurrency", {"Ref": "ReservedConcurrency"}, {"Ref": "AWS::NoValue"}]}:
        problems.append("the function has no reserved-concurrency limit")
    if template["Parameters"]["ReservedConcurrency"].get("Default", 0) < 1:
        problems.append("the reserved-concurrency limit is off by default")
    return problems


def parameter_default(template, value):
    if isinstance(value, dict) and "Ref" in value:
        return float(template["Parameters"][value["Ref"]]["Default"])
    return float(value)


# The metrics an alarm may divide: failures, and all requests. A latency
# SLO's failures are the requests over its threshold (a trimmed count), of
# all the latencies measured (their sample count).
FAILURES = {"ServerErrors", "Errors", "5xx"}
REQUESTS = {"Requests", "Invocations", "Count"}


def counted(metric_stat):
    """Whether a metric of an alarm counts failures or requests (or neither)."""
    name, stat = metric_stat["Metric"]["MetricName"], metric_stat["Stat"]
    stat = stat.get("Fn::Sub", "") if isinstance(stat, dict) else stat
    if name in FAILURES or (name == "Latency" and stat.startswith("TC(")):
        return "failures"
    if name in REQUESTS or (name == "Latency" and stat == "SampleCount"):
        return "requests"
    return None


def alarm_value(template, properties, failures, requests):
    """The value CloudWatch computes for a one-minute datapoint of the alarm
    when `failures` of `requests` requests failed, parameters at their
    defaults; None where the alarm's form is not understood."""
    if "MetricName" in properties:
        return failures if properties["MetricName"] in FAILURES else None
    values = {}
    expression = None
    for metric in properties.get("Metrics", []):
        if "MetricStat" in metric:
            values[metric["Id"]] = {"failures": failures, "requests": requests}.get(
                counted(metric["MetricStat"])
            )
        elif metric.get("ReturnData", True):
            expression = metric["Expression"]
    if isinstance(expression, dict) and "Fn::Sub" in expression:
        expression = re.sub(
            r"\$\{(\w+)\}",
            lambda m: str(template["Parameters"][m.group(1)]["Default"]),
            expression["Fn::Sub"],
        )
    if not isinstance(expression, str) or None in values.values():
        return None
    return eval(expression, {"__builtins__": {}, "IF": lambda c, t, f: t if c else f}, values)


def trips(template, properties, failures, requests):
    value = alarm_value(template, properties, failures, requests)
    threshold = parameter_default(template, properties["Threshold"])
    if value is None:
        return True
    if properties["ComparisonOperator"] == "GreaterThanThreshold":
        return value > threshold
    return value >= threshold


def rollback_alarm_problems(template):
    """A single failing request (or a handful) never trips a rollback alarm;
    a version that fails every request does."""
    problems = []
    by_name = {json.dumps(name, sort_keys=True): resource for resource, name in NAMED_ALARMS.items()}
    for wanted in ROLLBACK_ALARMS:
        resource = wanted.get("Ref") or by_name.get(json.dumps(wanted, sort_keys=True))
        if resource not in template["Resources"]:
            continue
        properties = alarm(template, resource)
        few = [(1, n) for n in (1, 2, 5, 100, 1000)] + [(n, n) for n in range(1, 10)]
        for failures, requests in few:
            if trips(template, properties, failures, requests):
                problems.append(
                    f"{resource}: {failures} failed of {requests} requests roll a deployment back"
                )
                break
        if not trips(template, properties, 100, 100):
            problems.append(f"{resource}: a version failing every request is not rolled back")
    return problems


# Each SLO: its objective's parameter, and the metric whose failures burn it.
SLOS = {
    "availability": ("AvailabilityObjectivePercent", "5xx"),
    "latency": ("LatencyObjectivePercent", "Latency"),
}


def slo_problems(template):
    """Each SLO pages through a composite alarm that needs both a slow and
    a fast window burning its budget: a burst, or a slow leak alone, does
    not page; failing everything does; the objective is its parameter."""
    problems = []
    composites = resources(template, "AWS::CloudWatch::CompositeAlarm")
    for slo, (objective, metric) in SLOS.items():
        found = False
        for name, composite in composites.items():
            windows, operators = composed_alarms(composite)
            burns = [template["Resources"].get(window, {}).get("Properties", {}) for window in windows]
            metrics = [
                m["MetricStat"]["Metric"]["MetricName"]
                for burn in burns
                for m in burn.get("Metrics", [])
                if "MetricStat" in m
            ]
            if metric not in metrics:
                continue
            found = True
            periods = {
                m["MetricStat"]["Period"]
                for burn in burns
                for m in burn.get("Metrics", [])
                if "MetricStat" in m
            }
            if len(windows) < 2 or set(operators) != {"AND"}:
                problems.append(f"SLO {slo}: {name} does not need every window to burn")
            if not (min(periods, default=0) <= 900 and max(periods, default=0) >= 3600):
                problems.append(f"SLO {slo}: {name} lacks a fast (<= 15 min) and a slow (>= 1 h) window")
            for window, burn in zip(windows, burns):
                if not burn:
                    problems.append(f"SLO {slo}: {name} names {window}, which is not in the template")
                    continue
                expression = json.dumps(burn.get("Metrics", []))
                if "${" + objective + "}" not in expression:
                    problems.append(f"SLO {slo}: {window}'s objective is not {objective}")
                if trips(template, burn, 1, 1000) or trips(template, burn, 5, 5):
                    problems.append(f"SLO {slo}: {window} burns on a lone failure")
                if not trips(template, burn, 1000, 1000):
                    problems.append(f"SLO {slo}: {window} does not burn when everything fails")
        if not found:
            problems.append(f"no SLO alarm for {slo} (a composite alarm over the {metric} burn)")
    return problems


# What the dashboard must show, each as text its widgets must hold.
DASHBOARD = {
    "requests by route": "MetricName=\\\"Requests\\\"",
    "p50 latency by route": "\"Latency\\\"', 'p50'",
    "p99 latency by route": "\"Latency\\\"', 'p99'",
    "4xx by route": "MetricName=\\\"ClientErrors\\\"",
    "5xx by route": "MetricName=\\\"ServerErrors\\\"",
    "cold starts and init duration": "initDurationMs",
    "DynamoDB latency": "SuccessfulRequestLatency",
    "DynamoDB throttles": "WriteThrottleEvents",
    "DynamoDB consumed capacity": "ConsumedWriteCapacityUnits",
    "503s": '"Unavailable"',
    "the bound's 409s": '"BoundRefusals"',
    "the availability SLO": "${AvailabilitySloAlarm.Arn}",
    "the latency SLO": "${LatencySloAlarm.Arn}",
}
# What each saved query must hold.
QUERIES = {
    "p50/p90/p99 of cold and of warm invocations": [
        "platform.report", "initDurationMs", "durationMs, 50)", "durationMs, 90)",
        "durationMs, 99)", "by coldStart",
    ],
    "the slowest requests with their trace ids": ["sort latency_ms desc", "span.traceId"],
    "the errors by message": ["status >= 400", "error", "by status"],
}


def operations_problems(template):
    """The dashboard and the saved queries an operator starts from; every
    metric the function emits is on the dashboard."""
    problems = []
    dashboards = resources(template, "AWS::CloudWatch::Dashboard")
    body = " ".join(
        json.dumps(d["Properties"]["DashboardBody"]) for d in dashboards.values()
    )
    for shown, text in DASHBOARD.items():
        if json.dumps(text)[1:-1] not in body:
            problems.append(f"the dashboard does not show {shown}")
    emitted = re.findall(r'\{"Name": "(\w+)"', (ROOT / "src/metrics.rs").read_text())
    for metric in emitted:
        if metric not in body:
            problems.append(f"the dashboard does not chart the function's metric {metric}")
    for dashboard in dashboards.values():
        text = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
        try:
            json.loads(re.sub(r"\$\{[\w.:]+\}", "x", text))
        except json.JSONDecodeError as error:
            problems.append(f"the dashboard body is not JSON: {error}")
    queries = resources(template, "AWS::Logs::QueryDefinition")
    for wanted, texts in QUERIES.items():
        if not any(
            all(text in query["Properties"]["QueryString"] for text in texts)
            and query["Properties"].get("LogGroupNames") == [{"Ref": "PlantsFunctionLogGroup"}]
            for query in queries.values()
        ):
            problems.append(f"no saved query of the function's log for {wanted}")
    return problems


def deployment_problems(template):
    properties = template["Resources"][FUNCTION]["Properties"]
    problems = []
    if properties.get("AutoPublishAlias") != ALIAS:
        problems.append(f"the function publishes no alias {ALIAS!r} on every deploy")
    preference = properties.get("DeploymentPreference", {})
    if preference.get("Type") != {"Ref": "DeploymentType"}:
        problems.append("the deployment type is not the DeploymentType parameter")
    if preference.get("Enabled", True) is not True:
        problems.append("the deployment preference is disabled")
    alarms = preference.get("Alarms", [])
    for wanted in ROLLBACK_ALARMS:
        if wanted not in alarms:
            problems.append(f"{wanted} does not roll a deployment back")
    for name, alarm_name in NAMED_ALARMS.items():
        if template["Resources"].get(name, {}).get("Properties", {}).get("AlarmName") != alarm_name:
            problems.append(f"alarm {name} is not named as the deployment preference names it")
    return problems


CHECKS = [
    iam_problems,
    log_problems,
    alarm_problems,
    table_problems,
    user_pool_problems,
    user_pool_retention_problems,
    audience_problems,
    cors_problems,
    local_endpoint_problems,
    deployment_problems,
    rollback_alarm_problems,
    slo_problems,
    operations_problems,
    scanner_problems,
]


def problems(template):
    return [problem for check in CHECKS for problem in check(template)]


class TemplateTest(unittest.TestCase):
    def test_the_template_has_none_of_the_problems(self):
        self.assertEqual(problems(load_template()), [])

    def test_the_code_calls_what_the_policy_should_grant(self):
        # Guards the derivation itself: if it found nothing, an empty policy
        # would pass the IAM check.
        self.assertEqual(
            dynamodb_actions_in_code(),
            {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:Query"},
        )


def statement(template):
    return template["Resources"][FUNCTION]["Properties"]["Policies"][0]["Statement"][0]


def alarm(template, name):
    return template["Resources"][name]["Properties"]


# Each: what is changed, and the change. Every one must make `problems` report.
MUTATIONS = {
    "a wildcard action": lambda t: statement(t).update(Action=["dynamodb:*"]),
    "one more action (Scan)": lambda t: statement(t)["Action"].append("dynamodb:Scan"),
    "every table": lambda t: statement(t).update(Resource="*"),
    "the table's indexes too": lambda t: statement(t).update(
        Resource=[{"Fn::GetAtt": [TABLE, "Arn"]}, {"Fn::Sub": "${PlantsTable.Arn}/index/*"}]
    ),
    "a managed policy": lambda t: t["Resources"][FUNCTION]["Properties"]["Policies"].append(
        "AmazonDynamoDBFullAccess"
    ),
    "a second statement": lambda t: t["Resources"][FUNCTION]["Properties"]["Policies"][0][
        "Statement"
    ].append({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}),
    "the function's log retention": lambda t: t["Resources"]["PlantsFunctionLogGroup"][
        "Properties"
    ].pop("RetentionInDays"),
    "the access log's retention": lambda t: t["Resources"]["ApiAccessLogGroup"]["Properties"].pop(
        "RetentionInDays"
    ),
    "the function's log group": lambda t: t["Resources"][FUNCTION]["Properties"][
        "LoggingConfig"
    ].pop("LogGroup"),
    "the API's access log": lambda t: t["Resources"]["PlantsApi"]["Properties"].pop(
        "AccessLogSettings"
    ),
    "an alarm's action": lambda t: alarm(t, "FunctionServerErrorsAlarm").pop("AlarmActions"),
    "the table throttle alarm's action": lambda t: alarm(t, "TableThrottlesAlarm").update(
        AlarmActions=[]
    ),
    "the availability SLO": lambda t: t["Resources"].pop("AvailabilitySloAlarm"),
    "the latency SLO's fast window": lambda t: t["Resources"].pop("LatencyBurnFastAlarm"),
    "the availability SLO's slow window from its rule": lambda t: alarm(
        t, "AvailabilitySloAlarm"
    ).update(AlarmRule={"Fn::Sub": 'ALARM("${AvailabilityBurnFastAlarm}")'}),
    "either window paging alone": lambda t: alarm(t, "LatencySloAlarm").update(
        AlarmRule={"Fn::Sub": 'ALARM("${LatencyBurnSlowAlarm}") OR ALARM("${LatencyBurnFastAlarm}")'}
    ),
    "an objective written in, not the parameter": lambda t: alarm(
        t, "AvailabilityBurnFastAlarm"
    )["Metrics"][2].update(
        Expression={"Fn::Sub": "IF(requests >= ${SloMinimumRequests}, (errors / requests) / 0.001, 0)"}
    ),
    "a burn rate without a minimum of requests": lambda t: alarm(t, "LatencyBurnSlowAlarm")[
        "Metrics"
    ][2].update(Expression={"Fn::Sub": "(slow / requests) / (1 - ${LatencyObjectivePercent} / 100)"}),
    "the SLO's action": lambda t: alarm(t, "LatencySloAlarm").pop("AlarmActions"),
    "the dashboard": lambda t: t["Resources"].pop("Dashboard"),
    "the dashboard's cold starts": lambda t: t["Resources"]["Dashboard"]["Properties"][
        "DashboardBody"
    ].update({"Fn::Sub": t["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
             .replace("initDurationMs", "durationMs")}),
    "the dashboard's bound refusals": lambda t: t["Resources"]["Dashboard"]["Properties"][
        "DashboardBody"
    ].update({"Fn::Sub": t["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
             .replace('"BoundRefusals"', '"Requests"')}),
    "the slowest-requests query": lambda t: t["Resources"].pop("SlowestRequestsQuery"),
    "the errors query": lambda t: t["Resources"].pop("ErrorsByMessageQuery"),
    "the cold and warm query's p90": lambda t: t["Resources"]["ColdAndWarmLatencyQuery"][
        "Properties"
    ].update(QueryString="filter type = \"platform.report\" | stats pct(record.metrics.durationMs, 50) by coldStart"),
    "the Lambda throttles alarm": lambda t: t["Resources"].pop("FunctionThrottlesAlarm"),
    "the alarm topic": lambda t: t["Resources"].pop(TOPIC),
    "deletion protection": lambda t: t["Resources"][TABLE]["Properties"].pop(
        "DeletionProtectionEnabled"
    ),
    "deletion protection off by default": lambda t: t["Parameters"][
        "TableDeletionProtection"
    ].update(Default="false"),
    "point-in-time recovery": lambda t: t["Resources"][TABLE]["Properties"].pop(
        "PointInTimeRecoverySpecification"
    ),
    "the retain policy": lambda t: t["Resources"][TABLE].pop("DeletionPolicy"),
    "admin-only sign-up": lambda t: t["Resources"]["UserPool"]["Properties"].pop(
        "AdminCreateUserConfig"
    ),
    "self sign-up on by default": lambda t: t["Parameters"]["AllowSelfSignUp"].update(
        Default="true"
    ),
    "the user pool's deletion protection": lambda t: t["Resources"]["UserPool"][
        "Properties"
    ].pop("DeletionProtection"),
    "the user pool's deletion policy": lambda t: t["Resources"]["UserPool"].pop("DeletionPolicy"),
    "the user pool's replacement policy": lambda t: t["Resources"]["UserPool"].pop(
        "UpdateReplacePolicy"
    ),
    "the audience rule": lambda t: t["Rules"]["IssuerWithoutUserPool"]["Assertions"].pop(),
    "CORS on by default": lambda t: t["Parameters"]["CorsAllowedOrigins"].update(
        Default="https://app.example.com"
    ),
    "a wildcard origin": lambda t: t["Parameters"]["CorsAllowedOrigins"].pop("AllowedPattern"),
    "a rollback alarm on a single error": lambda t: alarm(t, "FunctionErrorsAlarm").update(
        Metrics=None,
        Namespace="AWS/Lambda",
        MetricName="Errors",
        Statistic="Sum",
        Period=60,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
    )
    or alarm(t, "FunctionErrorsAlarm").pop("Metrics"),
    "a rate without a minimum of requests": lambda t: alarm(t, "Api5xxAlarm")["Metrics"][
        2
    ].update(Expression="100 * errors / requests"),
    "a minimum of requests that a handful meets": lambda t: t["Parameters"][
        "RollbackMinimumRequests"
    ].update(Default=2),
    "a rollback alarm on the server errors' count": lambda t: alarm(
        t, "FunctionServerErrorsAlarm"
    )["Metrics"][2].update(Expression="errors"),
    "the declared DynamoDB endpoint": lambda t: t["Resources"][FUNCTION]["Properties"][
        "Environment"
    ]["Variables"].pop("AWS_ENDPOINT_URL_DYNAMODB"),
    "a DynamoDB endpoint set in AWS": lambda t: t["Resources"][FUNCTION]["Properties"][
        "Environment"
    ]["Variables"].update(AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:8000"),
    "the alias": lambda t: t["Resources"][FUNCTION]["Properties"].pop("AutoPublishAlias"),
    "the deployment preference": lambda t: t["Resources"][FUNCTION]["Properties"].pop(
        "DeploymentPreference"
    ),
    "a fixed deployment type": lambda t: t["Resources"][FUNCTION]["Properties"][
        "DeploymentPreference"
    ].update(Type="AllAtOnce"),
    "a rollback alarm": lambda t: t["Resources"][FUNCTION]["Properties"]["DeploymentPreference"][
        "Alarms"
    ].pop(),
    "every rollback alarm": lambda t: t["Resources"][FUNCTION]["Properties"][
        "DeploymentPreference"
    ].pop("Alarms"),
    "the API alarm's name": lambda t: alarm(t, "Api5xxAlarm").pop("AlarmName"),
    "a suppression without a reason": lambda t: t["Resources"]["AlarmTopic"]["Metadata"][
        "checkov"
    ]["skip"][0].update(comment=""),
    "the reserved concurrency": lambda t: t["Resources"][FUNCTION]["Properties"].pop(
        "ReservedConcurrentExecutions"
    ),
    "no reserved concurrency by default": lambda t: t["Parameters"]["ReservedConcurrency"].update(
        Default=0
    ),
}


def translated(parameters):
    """The template as CloudFormation runs it with these parameters: the
    AWS::LanguageExtensions transform (the SAM CLI's emulation of it), then
    the SAM transform, with the code already uploaded as `sam deploy` does."""
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    pseudo = {
        "AWS::Region": "us-east-1",
        "AWS::AccountId": "123456789012",
        "AWS::Partition": "aws",
        "AWS::StackName": "plant-store",
        "AWS::URLSuffix": "amazonaws.com",
    }
    template = json.loads(json.dumps(load_template()))
    expanded = expand_language_extensions(
        template, parameter_values={**pseudo, **parameters}, enabled=True
    ).expanded_template
    expanded["Resources"][FUNCTION]["Properties"]["CodeUri"] = "s3://artifacts/plant-store.zip"

    class NoManagedPolicies:
        def load(self):
            return {}

    return transform(expanded, parameters, NoManagedPolicies())["Resources"]


def of_type(resources, kind, false_conditions=()):
    """The properties of every resource of this kind that CloudFormation
    creates: those without a Condition that is false in this mode."""
    return [
        resource["Properties"]
        for resource in resources.values()
        if resource["Type"] == kind and resource.get("Condition") not in false_conditions
    ]


DEFAULT_DEPLOYMENT = "Canary10Percent5Minutes"
SCOPES = {"RequireScopes": "true"}
# Each compute type with the default deployment (a canary) and AllAtOnce;
# and with scopes required.
MODES = [
    {},
    {"DeploymentType": "AllAtOnce"},
    MANAGED_INSTANCES,
    {**MANAGED_INSTANCES, "DeploymentType": "AllAtOnce"},
    SCOPES,
]


def mode_name(parameters):
    compute = parameters.get("ComputeType", "Lambda")
    scopes = ", scopes" if parameters.get("RequireScopes") == "true" else ""
    return f"{compute}, {parameters.get('DeploymentType', DEFAULT_DEPLOYMENT)}{scopes}"


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
            if isinstance(inner, list):
                found |= references(inner[1])
        else:
            found |= references(inner)
    return found


def dependency_cycle(resources):
    """A cycle of references between resources (CloudFormation refuses such
    a template), as a list of logical ids, or None."""
    edges = {
        name: sorted(references(resource) & resources.keys())
        for name, resource in resources.items()
    }

    def visit(name, path):
        if name in path:
            return path[path.index(name) :] + [name]
        for target in edges[name]:
            if cycle := visit(target, path + [name]):
                return cycle
        return None

    for name in edges:
        if cycle := visit(name, []):
            return cycle
    return None


class ComputeTypes(unittest.TestCase):
    def test_the_template_lints_clean_in_both_modes_and_deployment_types(self):
        for parameters in MODES:
            with self.subTest(mode=mode_name(parameters)):
                overrides = [f"{name}={value}" for name, value in parameters.items()]
                # The cfn-lint installed beside this Python (the pinned one).
                cfn_lint = str(pathlib.Path(sys.executable).parent / "cfn-lint")
                command = [cfn_lint, str(ROOT / "template.yaml")]
                if overrides:
                    command[1:1] = ["--parameters", *overrides, "--"]
                lint = subprocess.run(command, capture_output=True, text=True)
                self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)

    def test_classic_lambda_is_one_function_without_capacity_provider(self):
        resources = translated({})
        [function] = of_type(resources, "AWS::Lambda::Function")
        self.assertNotIn("CapacityProviderConfig", function)
        self.assertEqual(function["MemorySize"], 128)
        default = load_template()["Parameters"]["ReservedConcurrency"]["Default"]
        self.assertEqual(function["ReservedConcurrentExecutions"], default)
        not_created = ("UseManagedInstances", "CreateDynamoDbEndpoint")
        for kind in ("AWS::Lambda::CapacityProvider", "AWS::EC2::VPCEndpoint"):
            self.assertEqual(of_type(resources, kind, not_created), [], kind)

    def test_every_mode_deploys_gradually_through_the_alias(self):
        for parameters in MODES:
            with self.subTest(mode=mode_name(parameters)):
                resources = translated(parameters)
                self.assertEqual(dependency_cycle(resources), None)
                [alias_id] = [
                    name for name, r in resources.items() if r["Type"] == "AWS::Lambda::Alias"
                ]
                alias = resources[alias_id]
                self.assertEqual(alias["Properties"]["Name"], ALIAS)
                update = alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]
                group = resources[update["DeploymentGroupName"]["Ref"]]["Properties"]
                self.assertEqual(
                    json.dumps(group["DeploymentConfigName"]),
                    json.dumps(
                        {
                            "Fn::Sub": [
                                "CodeDeployDefault.Lambda${ConfigName}",
                                {"ConfigName": parameters.get("DeploymentType", DEFAULT_DEPLOYMENT)},
                            ]
                        }
                    ),
                )
                alarms = [a["Name"] for a in group["AlarmConfiguration"]["Alarms"]]
                # The named alarm's name as the stack resolves it.
                named = [resources[name]["Properties"]["AlarmName"] for name in NAMED_ALARMS]
                self.assertEqual(alarms, ROLLBACK_ALARMS[:2] + named)
                self.assertTrue(group["AlarmConfiguration"]["Enabled"])
                self.assertIn("DEPLOYMENT_STOP_ON_ALARM", group["AutoRollbackConfiguration"]["Events"])
                # Every route of the API invokes the alias, never $LATEST.
                [api] = of_type(resources, "AWS::ApiGatewayV2::Api")
                uris = [
                    json.dumps(operation["x-amazon-apigateway-integration"]["uri"])
                    for path in api["Body"]["paths"].values()
                    for operation in path.values()
                ]
                self.assertEqual(len(uris), 3)
                for uri in uris:
                    self.assertIn("${" + alias_id + "}", uri)

    def test_managed_instances_run_the_function_on_the_capacity_provider(self):
        resources = translated(MANAGED_INSTANCES)
        [function] = of_type(resources, "AWS::Lambda::Function")
        config = function["CapacityProviderConfig"]["LambdaManagedInstancesCapacityProviderConfig"]
        self.assertIn("PlantsCapacityProvider", json.dumps(config["CapacityProviderArn"]))
        default = load_template()["Parameters"]["MaxConcurrencyPerEnvironment"]["Default"]
        self.assertEqual(config["PerExecutionEnvironmentMaxConcurrency"], default)
        self.assertEqual(function["MemorySize"], 2048)  # the smallest environment
        # Managed Instances are bounded by their capacity provider instead.
        self.assertNotIn("ReservedConcurrentExecutions", function)
        [provider] = of_type(resources, "AWS::Lambda::CapacityProvider")
        self.assertEqual(provider["InstanceRequirements"]["Architectures"], ["arm64"])
        self.assertEqual(
            provider["VpcConfig"]["SubnetIds"], MANAGED_INSTANCES["ManagedInstancesSubnetIds"].split(",")
        )
        # The API invokes a published version, through the alias.
        [alias] = of_type(resources, "AWS::Lambda::Alias")
        self.assertEqual(alias["Name"], "live")
        # DynamoDB is reachable without a NAT, for the function's calls only.
        [endpoint] = of_type(resources, "AWS::EC2::VPCEndpoint")
        [statement] = endpoint["PolicyDocument"]["Statement"]
        self.assertEqual(set(statement["Action"]), dynamodb_actions_in_code())
        self.assertEqual(statement["Resource"], {"Fn::GetAtt": [TABLE, "Arn"]})


class Cors(unittest.TestCase):
    """CorsAllowedOrigins, as CloudFormation deploys it: off by default (no
    CORS on the API, so OPTIONS reaches the function); with origins, API
    Gateway's CORS for exactly those, GET and POST, no credentials."""

    def cors(self, parameters):
        [api] = of_type(translated(parameters), "AWS::ApiGatewayV2::Api")
        return api["Body"].get("x-amazon-apigateway-cors")

    def test_off_by_default(self):
        self.assertIsNone(self.cors({}))

    def test_with_origins_exactly_those(self):
        origins = "https://app.example.com,http://localhost:5173"
        cors = self.cors({"CorsAllowedOrigins": origins})
        self.assertEqual(cors["allowOrigins"], origins.split(","))
        self.assertEqual(sorted(cors["allowMethods"]), ["GET", "POST"])
        self.assertEqual(cors["allowHeaders"], ["authorization", "content-type"])
        self.assertFalse(cors.get("allowCredentials", False))


class Scopes(unittest.TestCase):
    """RequireScopes: the function requires plants/read and plants/write,
    which the Cognito resource server defines; the users' client may request
    both through the OAuth 2.0 endpoints, the machine client only the read
    scope; off by default, with none of these resources."""

    NOT_CREATED = ("ScopesWithCognito", "UseManagedInstances", "CreateDynamoDbEndpoint")

    def function_env(self, resources):
        [function] = of_type(resources, "AWS::Lambda::Function")
        return function["Environment"]["Variables"]

    def test_scopes_are_off_by_default(self):
        resources = translated({})
        env = self.function_env(resources)
        self.assertEqual((env["AUTH_SCOPE_READ"], env["AUTH_SCOPE_WRITE"]), ("", ""))
        for kind in ("AWS::Cognito::UserPoolResourceServer", "AWS::Cognito::UserPoolDomain"):
            self.assertEqual(of_type(resources, kind, self.NOT_CREATED), [], kind)
        self.assertEqual(len(of_type(resources, "AWS::Cognito::UserPoolClient", self.NOT_CREATED)), 1)

    def test_with_scopes_each_route_needs_its_scope_and_cognito_grants_them(self):
        resources = translated(SCOPES)
        env = self.function_env(resources)
        self.assertEqual((env["AUTH_SCOPE_READ"], env["AUTH_SCOPE_WRITE"]), ("plants/read", "plants/write"))
        [server] = of_type(resources, "AWS::Cognito::UserPoolResourceServer")
        self.assertEqual(server["Identifier"], "plants")
        self.assertEqual([s["ScopeName"] for s in server["Scopes"]], ["read", "write"])
        [_domain] = of_type(resources, "AWS::Cognito::UserPoolDomain")
        clients = {c["ClientName"]: c for c in of_type(resources, "AWS::Cognito::UserPoolClient")}
        # Compared as text: the SAM CLI's emulation of AWS::LanguageExtensions
        # leaves a Sub that names a resource as its bare string.
        read, write = "${PlantsResourceServer}/read", "${PlantsResourceServer}/write"
        users = clients["plant-store-cli"]
        self.assertEqual(users["AllowedOAuthFlows"], ["code"])
        self.assertEqual(json.dumps(users["AllowedOAuthScopes"]).count("PlantsResourceServer"), 2)
        self.assertIn(read, json.dumps(users["AllowedOAuthScopes"]))
        self.assertIn(write, json.dumps(users["AllowedOAuthScopes"]))
        machine = clients["plant-store-reader"]
        self.assertEqual(machine["AllowedOAuthFlows"], ["client_credentials"])
        scopes = json.dumps(machine["AllowedOAuthScopes"])
        self.assertIn(read, scopes)
        self.assertNotIn(write, scopes)
        self.assertEqual(len(machine["AllowedOAuthScopes"]), 1)
        # The function accepts both clients' access tokens.
        accepted = json.dumps(env["AUTH_COGNITO_CLIENT_ID"])
        self.assertIn("UserPoolClient", accepted)
        self.assertIn("ReadOnlyMachineClient", accepted)


class Bound(unittest.TestCase):
    def test_the_template_deploys_the_functions_default_bound(self):
        code = (ROOT / "src/config.rs").read_text()
        [default] = re.findall(r"DEFAULT_MAX_PLANTS_PER_OWNER: u32 = ([0-9_]+);", code)
        parameter = load_template()["Parameters"]["MaxPlantsPerOwner"]
        self.assertEqual(parameter["Default"], int(default.replace("_", "")))
        variables = load_template()["Resources"][FUNCTION]["Properties"]["Environment"]["Variables"]
        self.assertEqual(variables["MAX_PLANTS_PER_OWNER"], {"Ref": "MaxPlantsPerOwner"})


class Environments(unittest.TestCase):
    """samconfig.toml's `dev` and `prod`: what each must differ in, and
    overrides that name parameters of the template with values it allows."""

    def overrides(self, environment):
        config = tomllib.loads((ROOT / "samconfig.toml").read_text())
        deploy = config[environment]["deploy"]["parameters"]
        self.assertIn("CAPABILITY_AUTO_EXPAND", deploy["capabilities"])
        pairs = dict(pair.split("=", 1) for pair in deploy["parameter_overrides"].split())
        parameters = load_template()["Parameters"]
        for name, value in pairs.items():
            self.assertIn(name, parameters)
            allowed = parameters[name].get("AllowedValues")
            if allowed:
                self.assertIn(value, [str(v) for v in allowed], name)
        return deploy["stack_name"], pairs

    def test_dev_and_prod_are_separate_stacks_deployed_differently(self):
        dev_stack, dev = self.overrides("dev")
        prod_stack, prod = self.overrides("prod")
        self.assertNotEqual(dev_stack, prod_stack)
        self.assertEqual(dev["DeploymentType"], "AllAtOnce")
        self.assertTrue(prod["DeploymentType"].startswith(("Canary", "Linear")))
        self.assertLess(int(dev["LogRetentionDays"]), int(prod["LogRetentionDays"]))
        self.assertEqual(dev["TableDeletionProtection"], "false")
        self.assertEqual(prod["TableDeletionProtection"], "true")
        self.assertIn("@", prod["AlarmEmail"])


class MutationsAreCaught(unittest.TestCase):
    def test_every_removed_or_widened_protection_is_reported(self):
        original = load_template()
        for change, mutate in MUTATIONS.items():
            with self.subTest(change=change):
                template = copy.deepcopy(original)
                mutate(template)
                found = problems(template)
                self.assertTrue(found, f"removing/widening {change} went unnoticed")
                print(f"  {change}: {found[0]}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
