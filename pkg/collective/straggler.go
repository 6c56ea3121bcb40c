package collective

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/units"
)

// Stragglers slow or delay some of a job's ranks (simccl-decompose
// --straggler): a rank's compute phases take Factor times as long, and
// its first operation waits StartPs. Both are by job rank (0..World-1).
type Stragglers struct {
	Factor  map[int]float64
	StartPs map[int]int64
}

// ParseStragglers reads --straggler specs: rank=R:F or server=S:F (F, a
// factor > 0, scales the compute of the rank, or of every rank of the job
// on the fabric's server S), rank=R:+TIME or server=S:+TIME (the rank
// starts TIME late). A later spec for the same rank and kind wins. An
// error names the spec and its bad part.
func ParseStragglers(specs []string, l Layout, f Fabric) (Stragglers, error) {
	var st Stragglers
	for _, spec := range specs {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%q: %s (want rank=R:FACTOR, server=S:FACTOR, rank=R:+TIME or server=S:+TIME)", spec, fmt.Sprintf(format, a...))
		}
		kv, val, ok := strings.Cut(spec, ":")
		if !ok {
			return st, bad("no ':' before the factor or +delay")
		}
		key, id, ok := strings.Cut(kv, "=")
		if !ok {
			return st, bad("%q is not rank=R or server=S", kv)
		}
		n, err := strconv.Atoi(strings.TrimSpace(id))
		if err != nil {
			return st, bad("%s %q is not a number", key, id)
		}
		var ranks []int
		switch strings.TrimSpace(key) {
		case "rank":
			if n < 0 || n >= l.World() {
				return st, bad("rank %d is outside the job (ranks 0-%d)", n, l.World()-1)
			}
			ranks = []int{n}
		case "server":
			if f.GPUsPerServer <= 0 || n < 0 || n >= f.GPUs/f.GPUsPerServer {
				return st, bad("server %d is not in the topology (servers 0-%d)", n, f.GPUs/max(f.GPUsPerServer, 1)-1)
			}
			for r := range l.World() {
				if f.server(l.GPU(r)) == n {
					ranks = append(ranks, r)
				}
			}
			if len(ranks) == 0 {
				return st, bad("server %d has no rank of the job", n)
			}
		default:
			return st, bad("unknown key %q", key)
		}
		val = strings.TrimSpace(val)
		if d, ok := strings.CutPrefix(val, "+"); ok {
			ps, err := units.ParseDuration(d)
			if err != nil {
				return st, bad("delay %q: %v", d, err)
			}
			if ps > 1e15 {
				return st, bad("delay %q is over 1000s", d)
			}
			if st.StartPs == nil {
				st.StartPs = map[int]int64{}
			}
			for _, r := range ranks {
				st.StartPs[r] = ps
			}
			continue
		}
		x, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return st, bad("factor %q is not a number", val)
		}
		if x <= 0 || x > 1e6 {
			return st, bad("factor %q must be > 0 (and at most 1e6)", val)
		}
		if st.Factor == nil {
			st.Factor = map[int]float64{}
		}
		for _, r := range ranks {
			st.Factor[r] = x
		}
	}
	return st, nil
}

// computePs is how long compute step s takes on GPU g. At collective
// granularity the stage's representative takes the slowest pace of the
// ranks it stands for (the step's stage, or every rank): the largest
// factor among them, 1 for a rank without one.
func (d *Decomposer) computePs(s Step, g int32) int64 {
	if len(d.Stragglers.Factor) == 0 {
		return s.ComputePs
	}
	x := 1.0
	if d.Collectives {
		key := -1
		if s.Staged {
			key = s.Stage
		}
		var ok bool
		if x, ok = d.stageFactor[key]; !ok {
			lo, hi := 0, d.Layout.World()
			if key >= 0 {
				per := d.Layout.TP * d.Layout.DP
				lo, hi = key*per, (key+1)*per
			}
			x = 0
			for r := lo; r < hi; r++ {
				f, ok := d.Stragglers.Factor[r]
				if !ok {
					f = 1
				}
				x = max(x, f)
			}
			if d.stageFactor == nil {
				d.stageFactor = map[int]float64{}
			}
			d.stageFactor[key] = x
		}
	} else if f, ok := d.Stragglers.Factor[d.Layout.Rank(g)]; ok {
		x = f
	}
	if x == 1 {
		return s.ComputePs
	}
	return max(int64(math.Round(float64(s.ComputePs)*x)), 1)
}

// startNodes lists the GPUs that start late and by how much, in GPU
// order: at flow granularity each late rank's, at collective granularity
// each stage representative's, the latest start among its stage's ranks.
func (d *Decomposer) startNodes() (gpus []int32, ps []int64) {
	if len(d.Stragglers.StartPs) == 0 {
		return nil, nil
	}
	late := map[int32]int64{}
	per := d.Layout.TP * d.Layout.DP
	for r, p := range d.Stragglers.StartPs {
		if p <= 0 {
			continue
		}
		g := d.Layout.GPU(r)
		if d.Collectives {
			g = d.Layout.GPU(r / per * per)
		}
		late[g] = max(late[g], p)
	}
	gpus = slices.Sorted(func(yield func(int32) bool) {
		for g := range late {
			if !yield(g) {
				return
			}
		}
	})
	for _, g := range gpus {
		ps = append(ps, late[g])
	}
	return gpus, ps
}
