package workload

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Sweep is nccl-tests' size sweep: -b MIN -e MAX -f FACTOR.
type Sweep struct {
	Min, Max int64
	Factor   int64
}

// ParseSweep reads "MIN:MAX:FACTOR" (sizes as 8, 64KiB, 16GiB; an integer
// factor of at least 2, as nccl-tests' -f).
func ParseSweep(s string) (Sweep, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Sweep{}, fmt.Errorf("%q: want MIN:MAX:FACTOR, e.g. 8:16GiB:2", s)
	}
	var sw Sweep
	for i, p := range parts[:2] {
		v, err := units.ParseSize(p)
		if err != nil {
			return Sweep{}, fmt.Errorf("%q: %v", s, err)
		}
		if v <= 0 || v > math.MaxInt64/2 {
			return Sweep{}, fmt.Errorf("%q: size %q must be positive and below 4 EiB", s, p)
		}
		if i == 0 {
			sw.Min = v
		} else {
			sw.Max = v
		}
	}
	f, err := strconv.ParseInt(strings.TrimSpace(parts[2]), 10, 64)
	switch {
	case err != nil:
		return Sweep{}, fmt.Errorf("%q: factor %q is not an integer", s, parts[2])
	case f <= 1:
		return Sweep{}, fmt.Errorf("%q: factor %d must be at least 2", s, f)
	case sw.Min > sw.Max:
		return Sweep{}, fmt.Errorf("%q: MIN %s is larger than MAX %s", s, units.HumanSize(sw.Min), units.HumanSize(sw.Max))
	}
	sw.Factor = f
	return sw, nil
}

// Sizes lists the sweep's sizes. Each must be a multiple of the element
// size; for operations whose size is the whole buffer of all ranks
// (AllGather, ReduceScatter, AllToAll) nccl-tests rounds the per-rank
// count down, so the sizes are rounded down to a multiple of elem x ranks,
// and a size that rounds to 0 is a no-op, as in nccl-tests' output.
func (sw Sweep) Sizes(op nccl.Op, elem int64, ranks int) ([]int64, error) {
	for _, v := range []int64{sw.Min, sw.Max} {
		if v%elem != 0 {
			return nil, fmt.Errorf("size %d is not a multiple of the %d-byte element", v, elem)
		}
	}
	unit := elem
	switch op {
	case nccl.AllGather, nccl.ReduceScatter, nccl.AllToAll:
		unit *= int64(max(ranks, 1))
	}
	var out []int64
	for v := sw.Min; v <= sw.Max; {
		out = append(out, v/unit*unit)
		if v > sw.Max/sw.Factor {
			break
		}
		v *= sw.Factor
	}
	return out, nil
}

// FromSweep runs op on group once per size, each after every rank has
// finished the previous one (nccl-tests times each size on its own).
func FromSweep(op nccl.Op, group string, sizes []int64) *Workload {
	w := &Workload{}
	for _, s := range sizes {
		w.Steps = append(w.Steps, Step{Op: op, Size: s, Group: group, Label: fmt.Sprintf("%s %s", op, units.ExactSize(s))}, Step{Barrier: true})
	}
	return w
}
