#!/usr/bin/env bash
# nccl-tests on a simulated cluster: one size sweep (all_reduce_perf -b -e -f)
# decomposed once, run through each chosen backend, printed as nccl-tests
# prints it, and drawn as bus bandwidth against size with published curves.
#
#   pipelines/nccl-tests.sh [--gpus 8] [--gpu-type A100] [--family spectrum-x]
#       [--nic-bw 400Gbps] [--op allreduce] [--group tp] [--min 8] [--max 16GiB]
#       [--factor 2] [--backends "busbw fluid packet"] [--reference FILE]...
#       [--transport KEY=VALUE]... [--out out/nccl-tests]
#
# Writes DIR/sweep.stream, DIR/<backend>.parquet, DIR/<backend>.txt (the
# nccl-tests table) and DIR/busbw.png and DIR/busbw.svg. --group tp with
# --tp = --gpus puts every GPU in one communicator, as nccl-tests does.
# --transport passes simccl-decompose's (e.g. preset=h100-ib), in order.
set -euo pipefail
cd "$(dirname "$0")/.."

gpus=8 gpu_type=A100 family=spectrum-x nic_bw="" op=allreduce group=tp
min=8 max=16GiB factor=2 backends="busbw fluid packet" out=out/nccl-tests
refs=() transport=()
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || { [ "$1" = -h ] || [ "$1" = --help ] || echo "nccl-tests.sh: $1 needs a value" >&2; usage; }
	case "$1" in
	--gpus) gpus=$2 ;;
	--gpu-type) gpu_type=$2 ;;
	--family) family=$2 ;;
	--nic-bw) nic_bw=$2 ;;
	--op) op=$2 ;;
	--group) group=$2 ;;
	--min) min=$2 ;;
	--max) max=$2 ;;
	--factor) factor=$2 ;;
	--backends) backends=$2 ;;
	--reference) refs+=("$2") ;;
	--transport) transport+=(--transport "$2") ;;
	--out) out=$2 ;;
	*) echo "nccl-tests.sh: unknown option $1" >&2; usage ;;
	esac
	shift 2
done
for b in $backends; do
	case "$b" in busbw | fluid | packet) ;; *) echo "nccl-tests.sh: unknown backend $b (busbw, fluid, packet)" >&2; exit 2 ;; esac
done
for r in ${refs[@]+"${refs[@]}"}; do
	[ -r "$r" ] || { echo "nccl-tests.sh: cannot read reference $r" >&2; exit 2; }
done

mkdir -p "$out"
topo=(bin/topogen --family "$family" --gpus "$gpus" --gpu-type "$gpu_type")
[ -n "$nic_bw" ] && topo+=(--nic-bw "$nic_bw")
parallel=(--tp "$gpus")
[ "$group" != tp ] && parallel=(--tp 1)
echo "${topo[*]} | bin/ncclpath | bin/simccl-decompose --op $op --group $group ${parallel[*]} --sweep $min:$max:$factor ${transport[*]+${transport[*]}}" >&2
"${topo[@]}" | bin/ncclpath |
	bin/simccl-decompose --op "$op" --group "$group" "${parallel[@]}" --sweep "$min:$max:$factor" ${transport[@]+"${transport[@]}"} -o "$out/sweep.stream"

traces=()
for b in $backends; do
	case "$b" in
	busbw) cmd=(bin/flowsim-analytical --model busbw) ;;
	fluid) cmd=(bin/flowsim-analytical --model fluid) ;;
	packet) cmd=(bin/flowsim-packet) ;;
	esac
	"${cmd[@]}" "$out/sweep.stream" --out "$out/$b.parquet"
	bin/fctstats --format nccl-tests "$out/$b.parquet" | tee "$out/$b.txt"
	traces+=("$out/$b.parquet")
	# Against each published curve, at every size both have: the time
	# ratio simulated / measured (below 1: faster than the hardware).
	for r in ${refs[@]+"${refs[@]}"}; do
		echo "# $b against $(sed -n 's/^# label: //p' "$r" | head -1)"
		awk -F, 'FNR == NR { if ($0 !~ /^#/ && $1 ~ /^[0-9]+$/ && $2 > 0) pub[$1] = $2; next }
			$0 !~ /^#/ && ($1 in pub) { printf "%12s B  measured %10.1f us  %s %10.1f us  ratio %.2f\n", $1, pub[$1], b, $6, $6 / pub[$1] }' \
			b="$b" "$r" <(tr -s ' ' ',' <"$out/$b.txt" | sed 's/^,//') | tee -a "$out/$b-vs-reference.txt"
	done
done
refargs=()
for r in ${refs[@]+"${refs[@]}"}; do refargs+=(--reference "$r"); done
for ext in png svg; do
	bin/fctstats --format nccl-tests "${traces[@]}" ${refargs[@]+"${refargs[@]}"} --plot "$out/busbw.$ext" >/dev/null
done
echo "Wrote $out/busbw.png and $out/busbw.svg; tables in $out/<backend>.txt, traces in $out/<backend>.parquet" >&2
