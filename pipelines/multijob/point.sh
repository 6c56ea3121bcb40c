#!/bin/sh
# One point of pipelines/multijob: FABRIC (1to1 or 4to1) and PLACEMENT
# (packed or spread). Four AICB jobs of 256 GPUs each fill a 1024-GPU k=16
# fat-tree (128 servers of 8 H100s; at 1:1 one server under each edge
# switch, at 4:1 four, whose 32 NICs share the edge's 8 uplinks); each job's stream is run alone and all four together through
# flowsim-analytical at collective granularity, and fctstats --solo writes
# each job's slowdown (iteration together / alone) as a CSV table on
# stdout with the point's parameters. The mix's link loads, and their
# report and picture per tier and job, land in RUNDIR/links.{parquet,txt,png}.
#
#   point.sh FABRIC PLACEMENT RUNDIR     (BIN: the programs; MODEL: fluid;
#                                          FAULTS: flowsim-analytical flags, e.g.
#                                          --link-down 1152-1280@100ms, for every run)
set -eu
fabric=$1 placement=$2 dir=$3
BIN=${BIN:?set BIN to the directory of the programs}
MODEL=${MODEL:-fluid}
FAULTS=${FAULTS:-}
W=$(cd "$(dirname "$0")/../../examples/workloads" && pwd)
mkdir -p "$dir"

case $fabric in
1to1) over=1 label=1:1 ;;
4to1) over=4 label=4:1 ;;
*) echo "point.sh: fabric $fabric: 1to1 or 4to1" >&2; exit 1 ;;
esac
"$BIN/topogen" --family fat-tree --fat-tree-k 16 --gpus 1024 --oversubscription $over \
	>"$dir/topo.stream"

# place I: job I's 256 GPUs (32 servers). packed: servers 32I to 32I+31,
# whole edge switches and pods of its own; spread: every fourth server from
# I, so that at 4:1 each edge switch holds one server of every job and
# their traffic shares its uplinks (at 1:1, the pods' aggregation and core
# links).
place() {
	case $placement in
	packed) echo "$((256 * $1))-$((256 * $1 + 255))" ;;
	spread)
		s=$1 list=
		while [ "$s" -lt 128 ]; do
			list="$list${list:+,}$((8 * s))-$((8 * s + 7))"
			s=$((s + 4))
		done
		echo "$list"
		;;
	*) echo "point.sh: placement $placement: packed or spread" >&2; exit 1 ;;
	esac
}

# The jobs: name, workload, data-parallel size (256 GPUs each).
set -- \
	gpt13b-a aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt 32 \
	llama7b-tp2 aicb_L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1_A100.txt 128 \
	llama7b-zero3 aicb_L7B-D1-C02_Llama7B_deepspeed_zero3_A100.txt 256 \
	gpt13b-b aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt 32
i=0 streams= solos=
while [ $# -gt 0 ]; do
	job=$1 wl=$2 dp=$3
	shift 3
	"$BIN/simccl-decompose" --workload "$W/$wl" --dp "$dp" --granularity collective --job "$job" \
		--place "$(place $i)" <"$dir/topo.stream" >"$dir/$job.stream" 2>"$dir/$job.log"
	# shellcheck disable=SC2086 # FAULTS is a list of flags
	"$BIN/flowsim-analytical" --model "$MODEL" $FAULTS -o "$dir/$job.parquet" "$dir/$job.stream" 2>>"$dir/$job.log"
	streams="$streams${streams:+,}$dir/$job.stream"
	solos="$solos${solos:+,}$job=$dir/$job.parquet"
	i=$((i + 1))
done
"$BIN/simccl-decompose" --merge "$streams" >"$dir/mix.stream"
# shellcheck disable=SC2086
"$BIN/flowsim-analytical" --model "$MODEL" $FAULTS -o "$dir/mix.parquet" --link-loads "$dir/links.parquet" "$dir/mix.stream" 2>"$dir/mix.log"
# Where the jobs met: per tier and job, drawn as a heat map.
"$BIN/fctstats" --links "$dir/links.parquet" --top 20 --plot "$dir/links.png" >"$dir/links.txt"
"$BIN/fctstats" --iteration --solo "$solos" --format csv --table slowdown \
	--param fabric="$label" --param placement="$placement" --param model="$MODEL" --param faults="${FAULTS:-none}" \
	--param case="$label $placement" "$dir/mix.parquet"
