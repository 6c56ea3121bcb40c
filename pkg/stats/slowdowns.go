package stats

import (
	"slices"
	"strings"
)

// Series is one line of a CDF plot: sorted values and their name.
type Series struct {
	Name   string
	Values []float64
}

// SlowdownSeries returns the run's slowdowns, one series per conn_type
// (sorted by name) and, when there are several, one for all flows.
func (run *Run) SlowdownSeries() []Series {
	by := map[string][]float64{}
	for _, b := range run.buckets {
		by[b.key.conn] = append(by[b.key.conn], b.slow...)
	}
	var out []Series
	for conn, v := range by {
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		out = append(out, Series{Name: cmpStr(conn, "flows"), Values: v})
	}
	slices.SortFunc(out, func(a, b Series) int { return strings.Compare(a.Name, b.Name) })
	if len(out) > 1 {
		out = append(out, Series{Name: "all", Values: run.allSlow})
	}
	return out
}

// AllSlowdowns is every slowdown of the run, sorted. The slice is the
// run's own: callers must not modify it.
func (run *Run) AllSlowdowns() []float64 { return run.allSlow }

// KeptFlows are the run's flows, kept when it was analysed with
// Options.KeepFlows (nil otherwise or after DropFlows), in trace order.
// The slice is the run's own: callers must not modify it.
func (run *Run) KeptFlows() []Flow { return run.flows }
