#!/bin/sh
# Writes flowsim-packet traces for the benchmark workloads and the
# mechanisms they do not reach (SACK, HPCC, PFC port mode, LINK_DOWN,
# the surrogate, monitors), and prints one md5 a case. Refactorings of
# pkg/packet that must not change a trace compare this output before and
# after:
#
#   tests/packet-traces.sh BIN OUT >before.md5   (then change, make build)
#   tests/packet-traces.sh BIN OUT >after.md5 && diff before.md5 after.md5
#
# Not part of make test: the workloads take minutes, and the md5s are
# whatever the tree gives now, not answers a test could hold.
# The inputs (topologies, streams) are cached in OUT/in; a run of the
# packet backend is redone every time. CASES=regex limits the cases;
# BIG=1 adds the 4096-GPU AllToAll (below).
set -eu
BIN=${1:-bin}
OUT=${2:-out/packet-traces}
CASES=${CASES:-.}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONF=$ROOT/examples/conf/default.conf
mkdir -p "$OUT/in" "$OUT/runs"

input() { # name, then the pipeline as a shell string
	[ -s "$OUT/in/$1" ] || { (cd "$ROOT" && eval "$2") >"$OUT/in/$1.tmp" && mv "$OUT/in/$1.tmp" "$OUT/in/$1"; }
}
# The inputs keep NCCL's model latencies (preset=none, simccl-decompose's
# default before stop 48), so that their md5s carry over from stop to
# stop; micro128tr is the same workload under the calibrated transport,
# simccl-decompose's default now (transfers with a pace).
T=$BIN/topogen D="$BIN/simccl-decompose --transport preset=none"
input micro128 "$T --family spectrum-x --gpus 128 --gpu-type A100 --nic-bw 100Gbps | $D --workload examples/workloads/micro_allreduce.txt --tp 8 --ep 16"
input ar1024 "$T --family spectrum-x --gpus 1024 | $D --op allreduce --size 64MiB --group dp --tp 8"
input a2a128 "$T --family spectrum-x --gpus 128 | $D --op alltoall --size 16MiB --group dp --algo direct"
input gpt128coll "$T --family spectrum-x --gpus 128 | $BIN/ncclpath | $D --workload examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt --granularity collective"
input ar16 "$T --family spectrum-x --gpus 16 --gpu-type A100 --nic-bw 100Gbps | $D --op allreduce --size 64MiB --group dp --tp 8"
input ar16coll "$T --family spectrum-x --gpus 16 --gpu-type A100 --nic-bw 100Gbps | $D --op allreduce --size 64MiB --group dp --tp 8 --granularity collective"
input incast16 "$T --family spectrum-x --gpus 16 --gpu-type A100 --nic-bw 100Gbps | $D --op alltoall --size 4MiB --group dp --algo direct"
input htinc16 "$T --family fat-tree --gpus 16 --gpus-per-server 1 2>/dev/null | $D --from-htsim examples/htsim/incast16.cm"
input micro128tr "$T --family spectrum-x --gpus 128 --gpu-type A100 --nic-bw 100Gbps | $BIN/simccl-decompose --workload examples/workloads/micro_allreduce.txt --tp 8 --ep 16"
input seed003 "$T --family dragonfly --gpus 72 --gpus-per-server 1 --routers-per-group 4 --terminals-per-router 2 --global-per-router 2 --switch-bw 16Gbps --nic-bw 16Gbps | $D --pattern uniform --msg-size 1KiB --rate 100% --duration 1ms --seed 1"
# BIG=1 adds make bench's 4096-GPU AllToAll (16.8 M flows: about 5 min and
# 3.3 GB a packet run; its collective-granularity stream feeds
# analytical-traces.sh).
if [ "${BIG:-0}" = 1 ]; then
	input a2a4096 "$T --family spectrum-x --gpus 4096 | $D --op alltoall --size 16MiB --group dp --algo direct"
	input a2a4096coll "$T --family spectrum-x --gpus 4096 | $D --op alltoall --size 16MiB --group dp --algo direct --granularity collective"
fi

# The leaf of GPU 0's NIC link in the 16-GPU topology, for LINK_DOWN
# (topogen --format simai: the line "0 18 100Gbps").
LEAF=18
run() { # case name, input, flowsim-packet arguments
	name=$1 in=$2
	shift 2
	echo "$name" | grep -Eq "$CASES" || return 0
	rc=0
	case " $* " in *" --monitor-dir "*) rm -rf "$OUT/runs/$name.mon" ;; esac
	rm -f "$OUT/runs/$name.arrow"
	(cd "$ROOT" && "$BIN/flowsim-packet" "$@" -o "$OUT/runs/$name.arrow" <"$OUT/in/$in") 2>"$OUT/runs/$name.log" || rc=$?
	sum=none # no trace written (a usage error)
	[ ! -f "$OUT/runs/$name.arrow" ] || sum=$(md5sum <"$OUT/runs/$name.arrow" | cut -d' ' -f1)
	extra=
	if [ -d "$OUT/runs/$name.mon" ]; then
		extra=" mon=$(cd "$OUT/runs/$name.mon" && find . -type f | sort | xargs md5sum | md5sum | cut -d' ' -f1)"
	fi
	echo "$name $sum rc=$rc$extra"
}
P2="--threads 2 --partitions 2"
SUR="--set PACKET_PAYLOAD_SIZE=4096 --set SIMULATOR_STOP_TIME=1000000 --surrogate 300us:800us --surrogate-track 100us"
run micro128 micro128 --conf "$CONF"
run micro128-t2 micro128 --conf "$CONF" $P2
run micro128tr micro128tr --conf "$CONF"
run ar1024 ar1024 --conf "$CONF"
run ar1024-t2 ar1024 --conf "$CONF" $P2
run a2a128 a2a128 --conf "$CONF"
run a2a128-t2 a2a128 --conf "$CONF" $P2
run gpt128x gpt128coll --expand
run seed003-hf seed003 --conf "$CONF" --set PACKET_PAYLOAD_SIZE=4096 --set SIMULATOR_STOP_TIME=1000000
run seed003-hybrid seed003 --conf "$CONF" $SUR
run seed003-lite seed003 --conf "$CONF" $SUR --surrogate-lite
run sack16 ar16 --conf "$CONF" --set TRANSPORT=sack
run sack16-t2 ar16 --conf "$CONF" --set TRANSPORT=sack $P2
run sack-incast16 incast16 --conf "$CONF" --set TRANSPORT=sack
run hpcc16 ar16 --conf "$CONF" --set CC_MODE=3
run hpcc16-t2 ar16 --conf "$CONF" --set CC_MODE=3 $P2
run timely16 incast16 --conf "$CONF" --set CC_MODE=7
run dctcp16 incast16 --conf "$CONF" --set CC_MODE=8
run pint16 incast16 --conf "$CONF" --set CC_MODE=10
run pfcprio-incast16 incast16 --conf "$CONF" --set PFC_MODE=priority
run pfcport-incast16 incast16 --conf "$CONF" --set PFC_MODE=port
run pfcport16 ar16 --conf "$CONF" --set PFC_MODE=port --set PFC_PORT_HIGH_KB=200 --set PFC_PORT_LOW_KB=100
run spray16-t2 ar16 --set ROUTING=spray $P2
run adaptive16 incast16 --set ROUTING=adaptive
run linkdown16 ar16 --set "LINK_DOWN=20000 0 $LEAF"
run linkdown16x ar16coll --expand --set "LINK_DOWN=200000 0 $LEAF"
run monitors16 incast16 --conf "$CONF" --monitor-dir "$OUT/runs/monitors16.mon" --set QLEN_MON_INTERVAL=10 --set BW_MON_INTERVAL=10 --set QP_MON_INTERVAL=10
run qps3-16 ar16 --set QPS_PER_CONNECTION=3
# Losses, so that the transports retransmit (and SACK under spraying).
run lossy-roce16 incast16 --conf "$CONF" --set ERROR_RATE_PER_LINK=0.001
run lossy-sack16 incast16 --conf "$CONF" --set ERROR_RATE_PER_LINK=0.001 --set TRANSPORT=sack
run lossy-sack-spray16-t2 incast16 --conf "$CONF" --set ERROR_RATE_PER_LINK=0.001 --set TRANSPORT=sack --set ROUTING=spray $P2
run lossy-pfcport16 incast16 --conf "$CONF" --set ERROR_RATE_PER_LINK=0.001 --set PFC_MODE=port
# PFC at work: pauses under each mode (the cases above send none).
run pfcprio-nocc16 incast16 --set CC_MODE=0 --set BUFFER_SIZE=2
run pfcprio-nocc16-t2 incast16 --set CC_MODE=0 --set BUFFER_SIZE=2 $P2
run pfcport-htinc16 htinc16 --set CC_MODE=0 --set PFC_MODE=port
run pfcport-htinc16-lossy htinc16 --set CC_MODE=0 --set PFC_MODE=port --set ERROR_RATE_PER_LINK=0.001
if [ "${BIG:-0}" = 1 ]; then
	run a2a4096 a2a4096 --conf "$CONF"
	run a2a4096-t2 a2a4096 --conf "$CONF" $P2
fi
