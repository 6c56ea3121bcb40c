#!/bin/sh
# Runs every fuzz target of the module for FUZZTIME each (make fuzz), two
# targets at a time with one fuzzing worker each (FUZZJOBS=1 runs one at a
# time with every core), printing how many inputs each executed (0 when a
# loaded machine spent the whole time replaying the corpus). A new failing
# input is minimized for at most 2 s (the default 60 s spent a whole short
# run minimizing one input instead of fuzzing).
#
# Each package's instrumented test binary is linked once (go test -c -fuzz),
# two packages at a time, and its targets run from it: go test -fuzz per
# target linked it again for each of a package's targets (29 targets in 18
# packages, about 1.3 s of CPU per link). The binary runs in its package's
# directory with go test's fuzz cache, so the corpus it grows and any
# failing input it writes (testdata/fuzz) are where go test puts them.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime expires while a worker is mid-call on a loaded
# machine (golang/go#75804, fixed in Go 1.27). Such a run writes no failing
# input, so it is retried once; anything else fails the step.
set -u
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-1s}
FUZZJOBS=${FUZZJOBS:-2}

# --build DIR PKG BIN: link PKG's instrumented test binary.
if [ "${1:-}" = --build ]; then
  if ! out=$($GO test -c -fuzz . -o "$4" "$3" 2>&1); then
    printf 'fuzz %s: building its test binary FAILED\n%s\n' "$3" "$out"
    exit 1
  fi
  exit 0
fi

# --one DIR PKG TARGET BIN CACHE: fuzz one target.
if [ "${1:-}" = --one ]; then
  dir=$2 pkg=$3 f=$4 bin=$5 cache=$6
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  par=""
  [ "$FUZZJOBS" -gt 1 ] && par="-test.parallel 1"
  for try in 1 2; do
    if (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^$f\$" -test.fuzztime "$FUZZTIME" \
      -test.fuzzminimizetime 2s -test.fuzzcachedir "$cache/$pkg" $par) >"$log" 2>&1; then
      # The last progress line says how far the target got.
      execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
      printf 'fuzz %s %s (%s): %s execs\n' "$pkg" "$f" "$FUZZTIME" "${execs:-0}"
      exit 0
    fi
    if [ "$try" = 1 ] && grep -q 'context deadline exceeded' "$log" &&
      ! grep -q 'Failing input written' "$log"; then
      continue
    fi
    printf 'fuzz %s %s (%s): FAILED\n' "$pkg" "$f" "$FUZZTIME"
    cat "$log"
    exit 1
  done
fi

# The targets are read from the test sources: `go test -list` would link a
# test binary per package only to name them (about 15 s in all). No test
# file here has build constraints, so every declared target is built.
root=$(pwd)
mod=$($GO list -m)
cache=$($GO env GOCACHE)/fuzz
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT
dirs=$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
for dir in $dirs; do
  pkg=$(echo "$dir" | sed "s|^\.|$mod|")
  echo "$dir $pkg $bins/$(echo "$dir" | tr / _).test"
done | GO=$GO xargs -P "$FUZZJOBS" -L 1 "$0" --build || exit 1
for dir in $dirs; do
  pkg=$(echo "$dir" | sed "s|^\.|$mod|")
  for f in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$dir"/*_test.go | sort); do
    echo "$root/$dir $pkg $f $bins/$(echo "$dir" | tr / _).test $cache"
  done
done | GO=$GO FUZZTIME=$FUZZTIME FUZZJOBS=$FUZZJOBS xargs -P "$FUZZJOBS" -L 1 "$0" --one
