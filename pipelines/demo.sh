#!/usr/bin/env bash
# make demo: two 128-GPU fabrics side by side (topogen --summary), then the
# whole pipeline on a 16-GPU Spectrum-X cluster, reported by fctstats, and
# one training iteration of SimAI's 9216-GPU example with its breakdown.
# Writes out/demo.parquet (one row per flow) and out/demo.png (slowdown CDF
# and per-rank timelines), out/demo-iteration.{parquet,png}.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
bin/topogen --family spectrum-x --gpus 128 --gpu-type A100 --nic-bw 100Gbps --summary >out/spectrum-x.txt
bin/topogen --family dcn-single-tor --gpus 128 --gpu-type A100 --nic-bw 100Gbps --summary >out/dcn.txt
echo "128 A100 GPUs at 100 Gbps per NIC: rail-optimized Spectrum-X (left) vs DCN+ single ToR (right)"
echo
awk 'NR==FNR { left[FNR] = $0; n = FNR; next }
     { printf "%-78s | %s\n", left[FNR], $0 }' out/spectrum-x.txt out/dcn.txt
echo
echo "SimAI's micro workload (TP AllReduce 1 MiB, DP AllReduce 64 MiB, EP AllToAll 16 MiB) on 16 H100s,"
echo "Spectrum-X, tp 8, ep 2, max-min fair fluid model:"
echo
echo "  topogen --family spectrum-x --gpus 16 | ncclpath \\"
echo "    | simccl-decompose --workload examples/workloads/micro_allreduce.txt --tp 8 --ep 2 \\"
echo "    | flowsim-analytical --out out/demo.parquet"
echo "  fctstats out/demo.parquet --plot out/demo.png --timeline"
echo
bin/topogen --family spectrum-x --gpus 16 | bin/ncclpath |
	bin/simccl-decompose --workload examples/workloads/micro_allreduce.txt --tp 8 --ep 2 |
	bin/flowsim-analytical --out out/demo.parquet
bin/fctstats out/demo.parquet --plot out/demo.png --timeline
echo "Wrote out/demo.parquet, one row per flow: pd.read_parquet(\"out/demo.parquet\") in pandas with pyarrow,"
echo "or duckdb.read_parquet(\"out/demo.parquet\").df() with duckdb; and out/demo.png (slowdown CDF per"
echo "connection type, flows in flight per rank)."
echo
echo "One training iteration of SimAI's 9216-GPU example (tp 2, ep 16, pp 12, vpp 8, ga 24, 1789"
echo "lines), one rank per pipeline stage standing for the stage, collectives at NCCL's model time with the"
echo "NCCL transport's per-step costs calibrated for H100 (the default, --transport preset=auto: h100-ib)"
echo "plus what their traffic on every group of the stage costs on the fabric (ECMP, as in every backend):"
echo
echo "  topogen --family spectrum-x --gpus 9216 \\"
echo "    | simccl-decompose --workload examples/workloads/simai_workload_analytical.txt --granularity collective \\"
echo "    | flowsim-analytical --out out/demo-iteration.parquet --link-loads out/demo-iteration-links.parquet"
echo "  fctstats --iteration out/demo-iteration.parquet --plot out/demo-iteration.png"
echo
bin/topogen --family spectrum-x --gpus 9216 2>/dev/null |
	bin/simccl-decompose --workload examples/workloads/simai_workload_analytical.txt --granularity collective 2>/dev/null |
	bin/flowsim-analytical --out out/demo-iteration.parquet --link-loads out/demo-iteration-links.parquet
bin/fctstats --iteration out/demo-iteration.parquet --plot out/demo-iteration.png >out/demo-iteration.txt
awk '/^Layers on rank/ { exit } { print }' out/demo-iteration.txt
echo "Wrote out/demo-iteration.txt (with each layer), out/demo-iteration.parquet and out/demo-iteration.png (each stage's iteration: compute,"
echo "exposed communication per group type, bubble); fctstats --iteration --format simai-e2e writes"
echo "SimAI's EndToEnd.csv, --format chrome-trace a trace for ui.perfetto.dev."
echo "out/demo-iteration-links.parquet holds the bytes every link carried, by group type and op:"
echo "fctstats --links out/demo-iteration-links.parquet --plot links.png shows which tier is hot."
