#!/bin/sh
# Runs every fuzz target of the module for FUZZTIME each (make fuzz), two
# targets at a time with one fuzzing worker each (FUZZJOBS=1 runs one at a
# time with every core), printing how many inputs each executed (0 when a
# loaded machine spent the whole time replaying the corpus). Two at a time,
# one target's test binary links while the other fuzzes. A new failing
# input is minimized for at most 2 s (the default 60 s spent a whole short
# run minimizing one input instead of fuzzing).
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime expires while a worker is mid-call on a loaded
# machine (golang/go#75804, fixed in Go 1.27). Such a run writes no failing
# input, so it is retried once; anything else fails the step.
set -u
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-2s}
FUZZJOBS=${FUZZJOBS:-2}

if [ "${1:-}" = --one ]; then
  pkg=$2 f=$3
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  par=""
  [ "$FUZZJOBS" -gt 1 ] && par="-parallel 1"
  for try in 1 2; do
    if $GO test -run '^$' -fuzz "^$f\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 2s $par "$pkg" >"$log" 2>&1; then
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
mod=$($GO list -m)
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do
  pkg=$(echo "$dir" | sed "s|^\.|$mod|")
  for f in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$dir"/*_test.go | sort); do
    echo "$pkg $f"
  done
done | GO=$GO FUZZTIME=$FUZZTIME FUZZJOBS=$FUZZJOBS xargs -P "$FUZZJOBS" -L 1 "$0" --one
