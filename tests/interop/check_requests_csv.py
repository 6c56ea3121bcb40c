"""Reads a serving run's CSVs with pandas and checks them against fctstats --requests --format json.

    /usr/bin/python3 check_requests_csv.py REQUEST_METRICS.csv LATENCIES.csv SERVING.json

REQUEST_METRICS.csv is simccl-serve --request-metrics (Vidur's
request_metrics.csv columns, seconds, formats/requests.md): one row per
request, token counts as int64 whose sums are fctstats' prefill_tokens and
decode_tokens, and prefill_e2e_time (TTFT) and request_e2e_time whose means
are fctstats' ttft and e2e means. LATENCIES.csv is fctstats --requests FILE
--format csv: one row per latency, the JSON's numbers. Debian's pandas has
no Parquet engine (no pyarrow), so the Parquet file itself is DuckDB's
(check.mjs requests).
"""
import json
import math
import sys

import pandas as pd

metrics_path, lat_path, json_path = sys.argv[1], sys.argv[2], sys.argv[3]
want = json.load(open(json_path))
problems = []


def expect(what, got, exp):
    if got != exp:
        problems.append(f"{what}: pandas reads {got!r}, fctstats says {exp!r}")


def near(what, got, exp, rel=1e-9):
    if not math.isclose(got, exp, rel_tol=rel):
        problems.append(f"{what}: pandas reads {got!r}, fctstats says {exp!r}")


m = pd.read_csv(metrics_path)
expect("request_metrics columns", list(m.columns), [
    "Request Id", "request_num_prefill_tokens", "request_num_decode_tokens", "request_num_tokens",
    "request_e2e_time", "request_e2e_time_normalized", "request_scheduling_delay", "prefill_e2e_time",
    "decode_time_execution_plus_preemption_normalized"])
expect("request_metrics rows", len(m), want["requests"])
for col in ("Request Id", "request_num_prefill_tokens", "request_num_decode_tokens", "request_num_tokens"):
    expect(f"{col} dtype", str(m[col].dtype), "int64")
expect("sum(request_num_prefill_tokens)", int(m["request_num_prefill_tokens"].sum()), want["prefill_tokens"])
expect("sum(request_num_decode_tokens)", int(m["request_num_decode_tokens"].sum()), want["decode_tokens"])
expect("sum(request_num_tokens)", int(m["request_num_tokens"].sum()), want["prefill_tokens"] + want["decode_tokens"])
lat = {l["metric"]: l for l in want["latencies"]}
# Seconds written to the ns: the means agree to float rounding.
near("mean(prefill_e2e_time) in ns", float(m["prefill_e2e_time"].mean()) * 1e9, lat["ttft"]["mean_ns"])
near("mean(request_e2e_time) in ns", float(m["request_e2e_time"].mean()) * 1e9, lat["e2e"]["mean_ns"])

t = pd.read_csv(lat_path)
expect("latency columns", list(t.columns), ["source", "metric", "count", "p50_ns", "p90_ns", "p99_ns", "max_ns", "mean_ns"])
expect("latency rows", list(t["metric"]), list(lat))
for col in ("count", "p50_ns", "p90_ns", "p99_ns", "max_ns"):
    expect(f"{col} dtype", str(t[col].dtype), "int64")
    expect(col, [int(v) for v in t[col]], [l[col] for l in want["latencies"]])
expect("mean_ns dtype", str(t["mean_ns"].dtype), "float64")
for got, l in zip(t["mean_ns"], want["latencies"]):
    near(f"{l['metric']} mean_ns", float(got), l["mean_ns"], 1e-12)

if problems:
    for p in problems:
        print(f"interop: {metrics_path}, {lat_path}: {p}", file=sys.stderr)
    sys.exit(1)
print(f"interop: pandas {pd.__version__} read {metrics_path}: {len(m)} requests, {len(m.columns)} columns, "
      f"token sums and TTFT and e2e means, and {lat_path}: {len(t)} latencies: as fctstats --requests says")
