#!/usr/bin/env bash
# make bench's fabric tables (issue 29): the same workloads through every
# model on fabrics a network architect compares, each group type's exposed
# time and the wall time and peak memory of each run.
#   1. a 64 MiB AllToAll (ep 128) on a 128-GPU k=16 fat-tree: collective
#      granularity (busbw), flows (fluid) and packets under ecmp, spray and
#      adaptive routing;
#   2. AICB's GPT-13B on 1024 GPUs (k=16 fat-tree at 1:1 and 4:1 thinned by
#      uplinks, Spectrum-X, dual-plane HPN): busbw and fluid at collective
#      granularity against the expanded flows (fluid), ecmp and adaptive;
#   3. SimAI's 9216-GPU example at collective granularity (Spectrum-X and a
#      k=48 fat-tree at 1:1 and 4:1): busbw and fluid;
#   4. GPT-13B on 8192 Spectrum-X GPUs as flows (--expand);
#   5. flows against packets: one MoE layer of the 128-GPU MoE example on
#      five 128-GPU fabrics and on 1024-GPU Spectrum-X, and GPT-13B on a
#      128-GPU fat-tree and Spectrum-X, expanded into flows through fluid
#      and packet by packet (DCQCN), ecmp (about 11 CPU minutes, most of
#      it GPT-13B's packets on the fat-tree and the 1024-GPU MoE layer's).
# Usage: pipelines/fabric.sh [--out DIR] [--quick] (--quick: tables 1 and 3,
# without packets). The tables also go to DIR/tables.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
out=out/bench/fabric
quick=0
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--quick) quick=1; shift ;;
	*) echo "fabric.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
mkdir -p "$out"
exec > >(tee "$out/tables.txt")
bin=bin
gpt=examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt
simai=examples/workloads/simai_workload_analytical.txt
echo "fabric tables on $(nproc) cores, $(uname -m), load $(cut -d' ' -f1-3 /proc/loadavg) at start"

# timed FILE PROG ARGS...: runs PROG with stdin FILE, the trace to $out/last,
# and prints "wall_s peak_MB".
timed() {
	local in=$1
	shift
	/usr/bin/time -f "%e %M" -o "$out/time" "$@" <"$in" >"$out/last.arrows" 2>"$out/stderr" ||
		{ cat "$out/stderr" >&2; exit 1; }
	awk '{printf "%6.2f %5.0f", $1, $2/1024}' "$out/time"
}
# end_ms: the last run's simulated end, from its summary line, in ms.
end_ms() {
	grep -o 'simulated [0-9.]*[mun]*s' "$out/stderr" | tail -1 | awk '{
		v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[mun]*s$/, "", v)
		f = (u == "s") ? 1e3 : (u == "ms") ? 1 : (u == "us") ? 1e-3 : 1e-6
		printf "%.3f", v * f }'
}
exposed() { "$bin/fctstats" --iteration "$out/last.arrows" | awk '/^  exposed (TP|DP|EP|DP_EP) /{printf " %s %8s", $2, $3} /^  iteration /{printf "  iteration %9s", $2}'; }

echo
echo "1. 64 MiB AllToAll, ep 128, 128 GPUs, k=16 fat-tree 1:1 (ms; wall s, peak MB)"
"$bin/topogen" --family fat-tree --fat-tree-k 16 --gpus 128 | "$bin/ncclpath" >"$out/ft128.topo"
for g in flow collective; do
	"$bin/simccl-decompose" --op alltoall --size 64MiB --group ep --ep 128 --granularity $g <"$out/ft128.topo" >"$out/a2a-$g.stream" 2>/dev/null
done
printf "  %-9s %-28s %-28s %-28s\n" routing "collective busbw" "flows fluid" "packets"
for r in ecmp spray adaptive; do
	line=$(printf "  %-9s" $r)
	t=$(timed "$out/a2a-collective.stream" "$bin/flowsim-analytical" --model busbw --routing $r)
	line+=$(printf " %8s ms (%s)" "$(end_ms)" "$t")
	t=$(timed "$out/a2a-flow.stream" "$bin/flowsim-analytical" --routing $r)
	line+=$(printf " %8s ms (%s)" "$(end_ms)" "$t")
	if [ $quick = 0 ]; then
		t=$(timed "$out/a2a-flow.stream" "$bin/flowsim-packet" --routing $r)
		line+=$(printf " %8s ms (%s)" "$(end_ms)" "$t")
	fi
	echo "$line"
done

if [ $quick = 0 ]; then
	echo
	echo "2. AICB GPT-13B, 1024 GPUs, exposed per group type (ms; wall s, peak MB)"
	for f in "fat-tree 1:1|--family fat-tree --fat-tree-k 16 --gpus 1024" \
		"fat-tree 4:1|--family fat-tree --fat-tree-k 16 --gpus 1024 --oversubscription 4 --oversubscribe-by uplinks" \
		"spectrum-x|--family spectrum-x --gpus 1024" "hpn-dual-plane|--family hpn-dual-plane --gpus 1024"; do
		name=${f%%|*}
		# shellcheck disable=SC2086
		"$bin/topogen" ${f#*|} 2>/dev/null | "$bin/ncclpath" |
			"$bin/simccl-decompose" --workload $gpt --granularity collective >"$out/gpt.stream" 2>/dev/null
		for r in ecmp adaptive; do
			for m in "busbw|--model busbw" "fluid|--model fluid" "expanded|--expand"; do
				# shellcheck disable=SC2086
				t=$(timed "$out/gpt.stream" "$bin/flowsim-analytical" ${m#*|} --routing $r)
				printf "  %-15s %-9s %-9s%s  (%s)\n" "$name" $r "${m%%|*}" "$(exposed)" "$t"
			done
		done
	done
fi

echo
echo "3. SimAI's 9216-GPU example at collective granularity (ms; wall s, peak MB; targets: busbw <= 2 s, fluid <= 10 s)"
for f in "spectrum-x|--family spectrum-x --gpus 9216" \
	"fat-tree 1:1|--family fat-tree --fat-tree-k 48 --gpus 9216" \
	"fat-tree 4:1|--family fat-tree --fat-tree-k 48 --gpus 9216 --oversubscription 4 --oversubscribe-by uplinks"; do
	name=${f%%|*}
	# shellcheck disable=SC2086
	"$bin/topogen" ${f#*|} 2>/dev/null |
		"$bin/simccl-decompose" --workload $simai --granularity collective >"$out/simai.stream" 2>/dev/null
	for r in ecmp adaptive; do
		for m in busbw fluid; do
			t=$(timed "$out/simai.stream" "$bin/flowsim-analytical" --model $m --routing $r)
			printf "  %-13s %-9s %-6s%s  (%s)\n" "$name" $r $m "$(exposed)" "$t"
		done
	done
done

if [ $quick = 0 ]; then
	echo
	echo "4. AICB GPT-13B on 8192 Spectrum-X GPUs as flows (--expand, fluid, ecmp; wall s, peak MB; target <= 60 s, 2 GB)"
	"$bin/topogen" --family spectrum-x --gpus 8192 2>/dev/null | "$bin/ncclpath" |
		"$bin/simccl-decompose" --workload $gpt --granularity collective >"$out/gpt8k.stream" 2>/dev/null
	t=$(timed "$out/gpt8k.stream" "$bin/flowsim-analytical" --expand)
	printf "  spectrum-x 8192%s  (%s)\n" "$(exposed)" "$t"
fi
if [ $quick = 0 ]; then
	echo
	echo "5. flows (--expand, fluid) against packets (flowsim-packet --expand, DCQCN), ecmp, exposed per group type (ms; wall s, peak MB)"
	# One layer of the 128-GPU MoE example: its header, the embedding,
	# attention and MoE lines, no gradient sync.
	{ sed -n 1p examples/workloads/simai_moe_128gpus.txt; echo 10; sed -n 9,18p examples/workloads/simai_moe_128gpus.txt; } >"$out/moe_layer.txt"
	for c in "MoE layer|128|fat-tree 1:1|--family fat-tree --fat-tree-k 16" \
		"MoE layer|128|fat-tree 2:1|--family fat-tree --fat-tree-k 16 --oversubscription 2 --oversubscribe-by uplinks" \
		"MoE layer|128|fat-tree 4:1|--family fat-tree --fat-tree-k 16 --oversubscription 4 --oversubscribe-by uplinks" \
		"MoE layer|128|spectrum-x|--family spectrum-x" "MoE layer|128|hpn-dual-plane|--family hpn-dual-plane" \
		"MoE layer|1024|spectrum-x|--family spectrum-x" \
		"GPT-13B|128|fat-tree 1:1|--family fat-tree --fat-tree-k 16" "GPT-13B|128|spectrum-x|--family spectrum-x"; do
		IFS='|' read -r w g name fargs <<<"$c"
		wl=$out/moe_layer.txt
		[ "$w" = GPT-13B ] && wl=$gpt
		# shellcheck disable=SC2086
		"$bin/topogen" $fargs --gpus "$g" 2>/dev/null | "$bin/ncclpath" |
			"$bin/simccl-decompose" --workload "$wl" --granularity collective >"$out/fp.stream" 2>/dev/null
		for m in "flows|flowsim-analytical" "packets|flowsim-packet"; do
			t=$(timed "$out/fp.stream" "$bin/${m#*|}" --expand --quiet)
			printf "  %-9s %4s %-15s %-8s%s  (%s)\n" "$w" "$g" "$name" "${m%%|*}" "$(exposed)" "$t"
		done
	done
	rm -f "$out/moe_layer.txt"
fi
rm -f "$out/last.arrows" "$out/time" "$out/stderr" "$out"/*.stream
