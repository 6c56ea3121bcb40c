#!/bin/sh
# Prints one md5 a case for simccl-decompose's streams (the cached inputs
# of tests/packet-traces.sh) and flowsim-analytical's traces on them: the
# fluid and busbw models, --expand with and without symmetry, the lockstep
# approximation, routing policies, link loads and a failed link. A
# refactoring that must not change a stream or an analytical trace
# compares this output before and after, like packet-traces.sh:
#
#   tests/analytical-traces.sh BIN OUT >before.md5   (then change, make build)
#   tests/analytical-traces.sh BIN OUT >after.md5 && diff before.md5 after.md5
#
# The inputs are made (or reused) by packet-traces.sh in OUT/in, so one OUT
# serves both scripts; BIG=1 adds the 4096-GPU AllToAll. An input made by
# an older binary is reused as it is: to compare streams, give each run its
# own OUT. CASES=regex limits the cases. Not part of make test (minutes).
set -eu
BIN=${1:-bin}
OUT=${2:-out/packet-traces}
CASES=${CASES:-.}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# Only the inputs: no packet case matches an empty name.
CASES='^$' "$ROOT/tests/packet-traces.sh" "$BIN" "$OUT" >/dev/null
mkdir -p "$OUT/fluid"

# in-NAME: the stream simccl-decompose wrote for each input.
for f in "$OUT"/in/*; do
	name=in-$(basename "$f")
	case $name in *.tmp) continue ;; esac
	echo "$name" | grep -Eq "$CASES" || continue
	echo "$name $(md5sum <"$f" | cut -d' ' -f1)"
done

arun() { # case name, input, flowsim-analytical arguments
	name=$1 in=$2
	shift 2
	echo "$name" | grep -Eq "$CASES" || return 0
	[ -s "$OUT/in/$in" ] || return 0 # a BIG input not made
	rc=0
	rm -f "$OUT/fluid/$name.parquet" "$OUT/fluid/$name.links.csv"
	(cd "$ROOT" && "$BIN/flowsim-analytical" --quiet "$@" -o "$OUT/fluid/$name.parquet" <"$OUT/in/$in") 2>"$OUT/fluid/$name.log" || rc=$?
	sum=none
	[ ! -f "$OUT/fluid/$name.parquet" ] || sum=$(md5sum <"$OUT/fluid/$name.parquet" | cut -d' ' -f1)
	extra=
	[ ! -f "$OUT/fluid/$name.links.csv" ] || extra=" links=$(md5sum <"$OUT/fluid/$name.links.csv" | cut -d' ' -f1)"
	echo "$name $sum rc=$rc$extra"
}
arun fluid-micro128 micro128
arun busbw-micro128 micro128 --model busbw
arun fluid-ar1024 ar1024
arun fluid-a2a128 a2a128
arun fluid-a2a128-adaptive a2a128 --routing adaptive
arun fluid-a2a128-seed2 a2a128 --seed 2
arun fluid-gpt128x gpt128coll --expand
arun fluid-gpt128x-nosym gpt128coll --expand --no-symmetry
arun fluid-gpt128x-lockstep gpt128coll --expand --approx-lockstep
arun busbw-gpt128coll gpt128coll --model busbw
arun fluid-ar16-links ar16 --link-loads "$OUT/fluid/fluid-ar16-links.links.csv"
arun fluid-ar16-down ar16 --link-down 0-18@20us
arun fluid-ar16coll-x ar16coll --expand
arun fluid-htinc16 htinc16
arun busbw-a2a4096coll a2a4096coll --model busbw
