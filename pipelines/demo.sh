#!/usr/bin/env bash
# make demo: two 128-GPU fabrics side by side, as topogen --summary sees them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
bin/topogen --family spectrum-x --gpus 128 --gpu-type A100 --nic-bw 100Gbps --summary >out/spectrum-x.txt
bin/topogen --family dcn-single-tor --gpus 128 --gpu-type A100 --nic-bw 100Gbps --summary >out/dcn.txt
echo "128 A100 GPUs at 100 Gbps per NIC: rail-optimized Spectrum-X (left) vs DCN+ single ToR (right)"
echo
awk 'NR==FNR { left[FNR] = $0; n = FNR; next }
     { printf "%-78s | %s\n", left[FNR], $0 }' out/spectrum-x.txt out/dcn.txt
