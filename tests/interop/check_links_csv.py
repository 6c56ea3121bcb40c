"""Reads fctstats --links FILE --format csv with pandas and checks it against fctstats --format json.

    /usr/bin/python3 check_links_csv.py TIERS.csv LINKS.json

The per-tier table of a per-link load file (formats/links.md): one row per
tier and group type (plus each tier's total, group_type "all"), the JSON's
column names and numbers, counts and bytes as int64, shares and
utilizations as float64, read by plain pd.read_csv with no options.
"""
import json
import math
import sys

import pandas as pd

csv_path, json_path = sys.argv[1], sys.argv[2]
want = json.load(open(json_path))
df = pd.read_csv(csv_path)
problems = []


def expect(what, got, exp):
    if got != exp:
        problems.append(f"{what}: pandas reads {got!r}, fctstats says {exp!r}")


tiers = want["tiers"]
expect("rows", len(df), len(tiers))
expect("columns", list(df.columns), ["source"] + list(tiers[0].keys()))
expect("source", set(df["source"]), {want["source"]})
for col in ("tier", "src_role", "dst_role", "kind", "group_type"):
    expect(col, list(df[col]), [t[col] for t in tiers])
for col in ("links", "bytes", "busy_ns"):
    expect(f"{col} dtype", str(df[col].dtype), "int64")
    expect(col, [int(v) for v in df[col]], [t[col] for t in tiers])
for col in ("share", "util_mean", "util_max", "util_tier_mean"):
    expect(f"{col} dtype", str(df[col].dtype), "float64")
    # The CSV carries shortest round-trip decimals; pandas' default parser
    # (no float_precision="round_trip") may land several ulps away (7e-15
    # relative seen on 0.006141937061240344).
    got, exp = list(df[col]), [t[col] for t in tiers]
    if len(got) != len(exp) or not all(math.isclose(g, e, rel_tol=1e-12, abs_tol=1e-300) for g, e in zip(got, exp)):
        problems.append(f"{col}: pandas reads {got!r}, fctstats says {exp!r}")
# The "all" rows total their tier: the file's bytes.
expect("sum(bytes) of the all rows", int(df[df["group_type"] == "all"]["bytes"].sum()), want["bytes"])

if problems:
    for p in problems:
        print(f"interop: {csv_path}: {p}", file=sys.stderr)
    sys.exit(1)
print(f"interop: pandas {pd.__version__} read {csv_path}: {len(df)} tier and group type rows, "
      f"{len(df.columns)} columns, links, bytes and utilizations as fctstats --links says")
