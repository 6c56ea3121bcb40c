#!/bin/sh
# Runs every fuzz target of the module for FUZZTIME each (make fuzz),
# printing how many inputs each executed (0 when a loaded machine spent
# the whole time replaying the corpus). A
# new failing input is minimized for at most 2 s (the default 60 s spent a
# whole short run minimizing one input instead of fuzzing).
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime expires while a worker is mid-call on a loaded
# machine (golang/go#75804, fixed in Go 1.27). Such a run writes no failing
# input, so it is retried once; anything else fails at once.
set -u
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-2s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The targets are read from the test sources: `go test -list` would link a
# test binary per package only to name them (about 15 s in all). No test
# file here has build constraints, so every declared target is built.
mod=$($GO list -m)
dirs=$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
for dir in $dirs; do
  pkg=$(echo "$dir" | sed "s|^\.|$mod|")
  for f in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$dir"/*_test.go | sort); do
    echo "fuzz $pkg $f ($FUZZTIME)"
    for try in 1 2; do
      if $GO test -run '^$' -fuzz "^$f\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 2s "$pkg" >"$log" 2>&1; then
        # The last progress line says how far the target got.
        execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
        echo "  ${execs:-0} execs"
        break
      fi
      if [ "$try" = 1 ] && grep -q 'context deadline exceeded' "$log" &&
        ! grep -q 'Failing input written' "$log"; then
        echo "  deadline race at the end of -fuzztime (golang/go#75804), no failing input: retrying"
        continue
      fi
      cat "$log"
      exit 1
    done
  done
done
