"""Reads fctstats --format csv with pandas and checks it against fctstats --format json.

    /usr/bin/python3 check_csv.py COLLECTIVES.csv FCTSTATS.json

Debian's pandas (python3-pandas) has no Parquet engine, so pandas users of a
bare Debian read fctstats' CSV; this checks that what they get is what
fctstats computed: one row per collective, the JSON's column names and
numbers, integer columns as int64 and bandwidths as float64.
"""
import json
import sys

import pandas as pd

csv_path, json_path = sys.argv[1], sys.argv[2]
want = json.load(open(json_path))
df = pd.read_csv(csv_path)
problems = []


def expect(what, got, exp):
    if got != exp:
        problems.append(f"{what}: pandas reads {got!r}, fctstats says {exp!r}")


colls = want["collectives"]
expect("rows", len(df), len(colls))
expect("columns", list(df.columns), ["source"] + list(colls[0].keys()))
expect("source", set(df["source"]), {want["source"]})
for col in ("collective_id", "coll_size_bytes", "nranks", "time_ns", "start_ns", "end_ns"):
    expect(f"{col} dtype", str(df[col].dtype), "int64")
    expect(f"sum({col})", int(df[col].sum()), sum(c[col] for c in colls))
for col in ("algbw_gbps", "busbw_gbps"):
    expect(f"{col} dtype", str(df[col].dtype), "float64")
    # The CSV carries shortest round-trip decimals: equal as float64.
    expect(col, [None if pd.isna(v) else v for v in df[col]], [c[col] for c in colls])
expect("op", list(df["op"]), [c["op"] for c in colls])

if problems:
    for p in problems:
        print(f"interop: {csv_path}: {p}", file=sys.stderr)
    sys.exit(1)
print(f"interop: pandas {pd.__version__} read {csv_path}: {len(df)} collectives, "
      f"{len(df.columns)} columns, times and bandwidths as fctstats says")
