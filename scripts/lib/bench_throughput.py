"""The throughput benchmark (scripts/bench prepares the stack and the config).

One execution environment as Lambda Managed Instances runs it: the release
binary started by the Runtime API stand-in with AWS_LAMBDA_MAX_CONCURRENCY
set, handed a batch of requests at once (GETs, then POSTs of new ids),
against DynamoDB Local behind the TLS terminator. Requests per second of one
process at each concurrency, for the function and for the minimal baseline
(the same DynamoDB calls and nothing else, also on run_concurrent), and a
`compared` build of the function if BENCH_COMPARE names one, with the
function's CPU time per request and how busy the machine was: when the
baseline stops scaling too and both cores are busy, the limit is the store
and this 2-core machine, not the function. Rounds interleave the functions;
figures are medians.

Usage: bench_throughput.py CONFIG_JSON (the cold-start config, plus
`throughput`: {"requests", "rounds", "concurrency"}).
"""

import itertools
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_cold import load_event, post_event, start_environment, status_of, write_results  # noqa: E402

# `compared` (BENCH_COMPARE, another build of the function) when given.
MEASURED = ("function", "minimal", "compared")
TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def processes(marker):
    """Pids of the processes whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if marker in cmdline.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


# Who else works for each request on this machine, by command line.
NEIGHBOURS = {"dynamodb_local": b"DynamoDBLocal.jar", "haproxy": b"haproxy"}


def cpu_of(pids):
    total = 0.0
    for pid in pids:
        try:
            total += process_cpu_seconds(pid)
        except OSError:
            pass
    return total


def machine_cpu():
    """(busy, total) jiffies of the whole machine, all cores."""
    with open("/proc/stat") as stat:
        values = [int(value) for value in stat.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def batch(spec, concurrency, events):
    """One environment at this concurrency, primed, then every event handed
    out at once. Requests per second, the most in flight, the peak RSS, the
    function's CPU time per request and how busy the whole machine was."""
    env = dict(spec["env"], AWS_LAMBDA_MAX_CONCURRENCY=str(concurrency))
    api, _ = start_environment(dict(spec, env=env))
    try:
        for event in events[:20]:  # connection, TLS and JIT of the store warmed
            api.invoke(event)
        measured = events[20:]
        pids = {name: processes(marker) for name, marker in NEIGHBOURS.items()}
        pids["function"], pids["stand_in"] = [api.process.pid], [os.getpid()]
        cpu_before = {name: cpu_of(found) for name, found in pids.items()}
        machine_before = machine_cpu()
        started = time.perf_counter()
        invocations = [api.submit(event) for event in measured]
        for invocation in invocations:
            if not invocation.done.wait(60):
                raise RuntimeError(f"no answer to {invocation.request_id} within 60 s")
            if status_of(invocation) != 200:
                raise RuntimeError(f"status {status_of(invocation)}: {invocation.response!r}")
        elapsed = max(invocation.answered for invocation in invocations) - started
        cores = {name: (cpu_of(found) - cpu_before[name]) / elapsed for name, found in pids.items()}
        busy, total = (after - before for after, before in zip(machine_cpu(), machine_before))
        return {
            "requests_per_second": len(measured) / elapsed,
            "max_in_flight": api.max_in_flight,
            "peak_rss_mib": api.peak_rss_kib() / 1024.0,
            "cpu_ms_per_request": cores["function"] * elapsed * 1000.0 / len(measured),
            "machine_busy_percent": 100.0 * busy / total,
            "cores_used": cores,
        }
    finally:
        api.stop()


def main():
    with open(sys.argv[1]) as f:
        config = json.load(f)
    settings = config["throughput"]
    requests, rounds, levels = settings["requests"], settings["rounds"], settings["concurrency"]
    get_event = load_event(config["get_event"], config["token"])
    post_template = load_event(config["post_event"], config["token"])
    plant_ids = itertools.count(int(time.time() * 1000) * 1000)
    # Reads and writes apart: DynamoDB Local serialises writes.
    workloads = {
        "GET": lambda: [get_event] * (requests + 20),
        "POST": lambda: [post_event(post_template, next(plant_ids)) for _ in range(requests + 20)],
    }

    samples = {}
    for round_number in range(rounds):
        measured = [name for name in MEASURED if name in config["functions"]]
        order = measured if round_number % 2 == 0 else measured[::-1]
        for workload, events in workloads.items():
            for name in order:
                for level in levels:
                    figure = batch(config["functions"][name], level, events())
                    samples.setdefault((workload, name, level), []).append(figure)

    figures = {"requests_per_batch": requests, "rounds": rounds, "workloads": {}}
    for (workload, name, level), runs in samples.items():
        figures["workloads"].setdefault(workload, {}).setdefault(name, {})[f"concurrency_{level}"] = {
            "requests_per_second": statistics.median(run["requests_per_second"] for run in runs),
            "cpu_ms_per_request": statistics.median(run["cpu_ms_per_request"] for run in runs),
            "machine_busy_percent": statistics.median(run["machine_busy_percent"] for run in runs),
            "max_in_flight": max(run["max_in_flight"] for run in runs),
            "peak_rss_mib": max(run["peak_rss_mib"] for run in runs),
            "cores_used": {
                process: statistics.median(run["cores_used"][process] for run in runs)
                for process in runs[0]["cores_used"]
            },
        }
    report = render(figures, levels)
    write_results(config["results_dir"], "throughput", report, figures)
    if config.get("enforce_targets") and "MISSED" in report:
        sys.exit("throughput target missed")


def render(figures, levels):
    low, high = min(levels), max(levels)
    lines = [
        f"throughput: one process, {figures['requests_per_batch']} requests handed out at once, "
        f"{figures['rounds']} rounds; medians. cpu: the function's CPU time per request; "
        f"machine: how busy both cores were",
        "",
        f"{'':<14}"
        + "".join(f"{f'c={level} req/s':>12}{'in flight':>10}{'cpu ms':>8}{'machine':>9}" for level in levels)
        + f"{f'c={high}/c={low}':>11}",
    ]
    ratios = {}
    for workload, by_function in figures["workloads"].items():
        for name, by_level in by_function.items():
            cells = ""
            for level in levels:
                figure = by_level[f"concurrency_{level}"]
                cells += (
                    f"{figure['requests_per_second']:>12.0f}{figure['max_in_flight']:>10}"
                    f"{figure['cpu_ms_per_request']:>8.3f}{figure['machine_busy_percent']:>8.0f}%"
                )
            ratio = (
                by_level[f"concurrency_{high}"]["requests_per_second"]
                / by_level[f"concurrency_{low}"]["requests_per_second"]
            )
            ratios[(workload, name)] = ratio
            lines.append(f"{workload + ' ' + name:<14}{cells}{ratio:>10.2f}x")
    get_function = figures["workloads"]["GET"]["function"][f"concurrency_{high}"]
    lines += [
        "",
        f"{f'peak RSS of the function at c={high}':<62}{get_function['peak_rss_mib']:>8.2f} MiB",
    ]
    lines += ["", f"cores in use at c={high} (of {os.cpu_count()}), by process:"]
    for workload, by_function in figures["workloads"].items():
        for name, by_level in by_function.items():
            cores = by_level[f"concurrency_{high}"]["cores_used"]
            lines.append(
                f"  {workload + ' ' + name:<14}"
                + "  ".join(f"{process} {used:.2f}" for process, used in cores.items())
            )
    # The target: c=high at least 3x c=low. Where the minimal function, on
    # the same machine and store, cannot reach it either and the function
    # keeps up with it, the limit is the machine, not the function.
    lines.append("")
    for workload, by_function in figures["workloads"].items():
        rps = {name: by_level[f"concurrency_{high}"]["requests_per_second"] for name, by_level in by_function.items()}
        keeps_up = rps["function"] / rps["minimal"]
        lines.append(f"{f'{workload}: function / minimal at c={high}':<62}{keeps_up:>8.2f}x")
        if "compared" in rps:
            lines.append(
                f"{f'{workload}: function / compared at c={high}':<62}{rps['function'] / rps['compared']:>8.2f}x"
            )
        function_ratio, minimal_ratio = ratios[(workload, "function")], ratios[(workload, "minimal")]
        if function_ratio >= 3:
            verdict = "ok"
        elif minimal_ratio < 3 and keeps_up >= 0.9:
            verdict = f"machine-bound: minimal {minimal_ratio:.2f}x"
        else:
            verdict = "MISSED"
        lines.append(
            f"{f'{workload}: throughput c={high} / c={low} (function)':<62}"
            f"{function_ratio:>8.2f}x  (target >= 3x)  {verdict}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
