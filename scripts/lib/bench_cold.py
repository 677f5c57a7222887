"""The cold-start benchmark's measurements (scripts/bench prepares the stack).

Each function runs as Lambda runs it: its binary started by the Runtime API
stand-in (runtime_api.py) with the Lambda environment, talking to DynamoDB
Local through a TLS terminator. Three functions, interleaved round by round
so that machine drift hits all alike:

- function: the plant-store release binary;
- minimal: the same DynamoDB calls with no auth and no validation (the
  latency floor, with the best set-up found);
- hello: a bare lambda_runtime loop (the init floor of any Rust Lambda).

Figures are medians (cold) and percentiles (warm) over the runs; they are
printed as a table with ratios and written to target/bench-results/.

Usage: bench_cold.py CONFIG_JSON (see scripts/bench for its fields).
"""

import itertools
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from runtime_api import RuntimeApi  # noqa: E402


def load_event(path, token):
    with open(path) as f:
        return f.read().replace("{{token}}", token)


def post_event(template, plant_id):
    event = json.loads(template)
    event["body"] = json.dumps({"id": plant_id, "name": "Fern", "tag": "bench"})
    event["headers"]["content-length"] = str(len(event["body"]))
    return json.dumps(event)


def status_of(invocation):
    if invocation.error is not None:
        raise RuntimeError(f"the function failed: {invocation.error!r}")
    return json.loads(invocation.response).get("statusCode")


def ms(seconds):
    return seconds * 1000.0


def percentile(samples, fraction):
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def start_environment(spec):
    """A new execution environment running the function; and its init time
    (process start to first /next), in seconds."""
    api = RuntimeApi()
    try:
        api.start_function(spec["command"], spec["env"])
        return api, api.wait_until_ready()
    except Exception:
        api.stop()
        raise


def cold_start(spec, event):
    """One cold start: init and the first invocation (event handed out to
    answer), in seconds."""
    command, expect_status = spec["command"], spec.get("expect_status")
    api, init = start_environment(spec)
    try:
        first = api.invoke(event)
        status = status_of(first)
        if expect_status is not None and status != expect_status:
            raise RuntimeError(f"{command[0]}: status {status} on the first request: {first.response!r}")
        return init, first.answered - first.handed_out
    finally:
        api.stop()


def main():
    with open(sys.argv[1]) as f:
        config = json.load(f)
    rounds, warm_requests = config["rounds"], config["warm_requests"]
    get_event = load_event(config["get_event"], config["token"])
    post_template = load_event(config["post_event"], config["token"])
    functions = config["functions"]  # name -> {command, env, expect_status}
    names = list(functions)

    # One warm environment per function, kept for the whole run.
    environments = {name: start_environment(functions[name])[0] for name in names}
    plant_ids = itertools.count(int(time.time() * 1000))
    warm = {name: {"GET": [], "POST": []} for name in names}

    def warm_requests_round(record):
        """One GET and one POST of a new id to each warm environment."""
        plant_id = next(plant_ids)
        for name in names:
            api = environments[name]
            for method, event in (("GET", get_event), ("POST", post_event(post_template, plant_id))):
                invocation = api.invoke(event)
                status = status_of(invocation)
                expected = functions[name].get("expect_status")
                if expected is not None and status != expected:
                    raise RuntimeError(f"{name} {method}: status {status}: {invocation.response!r}")
                if record:
                    warm[name][method].append(invocation.answered - invocation.handed_out)

    cold = {name: {"init": [], "first": []} for name in names}
    try:
        # DynamoDB Local runs on a JVM that speeds up as it compiles its hot
        # paths: prime it first, so that no phase of the run is measured
        # against a slower store than another.
        for _ in range(config.get("prime_requests", 200)):
            warm_requests_round(record=False)
        # Each round: one cold start of every function (in a rotating order),
        # then a share of the warm requests, so that cold and warm figures
        # meet the same machine and the same store.
        per_round = -(-warm_requests // rounds)
        for round_number in range(rounds):
            order = names[round_number % len(names) :] + names[: round_number % len(names)]
            for name in order:
                init, first = cold_start(functions[name], get_event)
                cold[name]["init"].append(init)
                cold[name]["first"].append(first)
            for _ in range(per_round):
                warm_requests_round(record=True)
        peak_rss = {name: environments[name].peak_rss_kib() for name in names}
    finally:
        for api in environments.values():
            api.stop()

    figures = {"rounds": rounds, "warm_requests": per_round * rounds, "functions": {}}
    for name in names:
        totals = [i + f for i, f in zip(cold[name]["init"], cold[name]["first"])]
        figures["functions"][name] = {
            "init_ms": ms(statistics.median(cold[name]["init"])),
            "first_invocation_ms": ms(statistics.median(cold[name]["first"])),
            "cold_total_ms": ms(statistics.median(totals)),
            "warm_get_p50_ms": ms(percentile(warm[name]["GET"], 0.50)),
            "warm_get_p99_ms": ms(percentile(warm[name]["GET"], 0.99)),
            "warm_post_p50_ms": ms(percentile(warm[name]["POST"], 0.50)),
            "warm_post_p99_ms": ms(percentile(warm[name]["POST"], 0.99)),
            "peak_rss_mib": peak_rss[name] / 1024.0,
            "binary_bytes": os.path.getsize(functions[name]["command"][0]),
        }
    figures.update(config.get("extra", {}))
    report = render(figures)
    write_results(config["results_dir"], "cold_start", report, figures)
    failed = [line for line in report.splitlines() if line.rstrip().endswith("MISSED")]
    if failed and config.get("enforce_targets"):
        sys.exit(f"{len(failed)} target(s) missed")


def write_results(out_dir, name, report, figures):
    """Prints the report and keeps it, with its figures, in out_dir."""
    print(report)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.txt"), "w") as f:
        f.write(report + "\n")
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(figures, f, indent=2)


def render(figures):
    f = figures["functions"]
    fn, minimal, hello = f["function"], f["minimal"], f["hello"]
    names = list(f)  # function, minimal, hello, and any other measured beside them
    rows = [
        ("init (process start to first /next)", "init_ms", "ms"),
        ("first invocation after a cold start", "first_invocation_ms", "ms"),
        ("cold total (init + first invocation)", "cold_total_ms", "ms"),
        ("warm GET p50", "warm_get_p50_ms", "ms"),
        ("warm GET p99", "warm_get_p99_ms", "ms"),
        ("warm POST p50", "warm_post_p50_ms", "ms"),
        ("warm POST p99", "warm_post_p99_ms", "ms"),
        ("peak RSS after the warm requests", "peak_rss_mib", "MiB"),
        ("binary size", "binary_bytes", "MB"),
    ]
    lines = [
        f"cold_start: {figures['rounds']} cold starts and {figures['warm_requests']} warm GET + POST "
        f"per function, interleaved; medians unless a percentile is named",
        "",
        f"{'figure':<42}" + "".join(f"{name:>11}" for name in names) + f"{'fn/minimal':>12}{'fn/hello':>10}",
    ]
    for label, key, unit in rows:
        scale = 1e-6 if unit == "MB" else 1.0
        cells = "".join(f"{f[name][key] * scale:>11.2f}" for name in names)
        ratios = f"{fn[key] / minimal[key]:>11.2f}x{fn[key] / hello[key]:>9.2f}x"
        lines.append(f"{label + ' (' + unit + ')':<42}{cells} {ratios}")

    def target(label, value, limit, unit="x"):
        verdict = "ok" if value <= limit else "MISSED"
        return f"{label:<62}{value:>8.2f}{unit}  (target <= {limit}{unit})  {verdict}"

    lines += ["", "targets (ratios within this run):"]
    lines.append(target("first invocation / warm GET p50 (function)", fn["first_invocation_ms"] / fn["warm_get_p50_ms"], 1.2))
    lines.append(target("cold total: function / minimal", fn["cold_total_ms"] / minimal["cold_total_ms"], 1.2))
    lines.append(target("warm GET p50: function / minimal", fn["warm_get_p50_ms"] / minimal["warm_get_p50_ms"], 1.1))
    lines.append(target("warm POST p50: function / minimal", fn["warm_post_p50_ms"] / minimal["warm_post_p50_ms"], 1.1))
    lines.append(target("warm GET p99: function / minimal", fn["warm_get_p99_ms"] / minimal["warm_get_p99_ms"], 1.3))
    lines.append(target("warm POST p99: function / minimal", fn["warm_post_p99_ms"] / minimal["warm_post_p99_ms"], 1.3))
    lines.append(target("peak RSS (function)", fn["peak_rss_mib"], 16, " MiB"))
    lines.append(target("stripped x86_64 binary (function)", fn["binary_bytes"] / 1e6, 8, " MB"))
    if "arm64_bootstrap_bytes" in figures:
        lines.append(target("arm64 bootstrap from sam build", figures["arm64_bootstrap_bytes"] / 1e6, 6, " MB"))
        lines.append(f"{'arm64 bootstrap zipped':<62}{figures['arm64_zip_bytes'] / 1e6:>8.2f} MB")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
