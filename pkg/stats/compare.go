package stats

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Comparison of run B against run A (the reference).
type Comparison struct {
	A string `json:"a"`
	B string `json:"b"`
	// Flows that never finished in a partial run (only with
	// --allow-partial; the comparison is then PARTIAL).
	UnfinishedFlowsA int64 `json:"unfinished_flows_a,omitempty"`
	UnfinishedFlowsB int64 `json:"unfinished_flows_b,omitempty"`
	// Makespans (last end − first start over all rows) and B / A.
	MakespanANs   int64 `json:"makespan_a_ns"`
	MakespanBNs   int64 `json:"makespan_b_ns"`
	MakespanRatio Num   `json:"makespan_ratio"`
	// Collectives matched by collective_id; Ratio = time B / time A
	// (above 1: B is slower). Collectives of one run only are counted.
	Collectives      []CollectiveRatio `json:"collectives"`
	Summary          []SummaryRatio    `json:"summary"`
	CollectivesOnlyA int               `json:"collectives_only_a"`
	CollectivesOnlyB int               `json:"collectives_only_b"`
	// Flow latencies (fct_ns), delay nodes excluded, matched as MatchedBy
	// says: "flow_id" when both are fabricsim traces, else
	// "src,dst,size,start order" (see Compare).
	MatchedBy   string `json:"flows_matched_by"`
	FlowsA      int    `json:"flows_a"`
	FlowsB      int    `json:"flows_b"`
	Matched     int    `json:"flows_matched"`
	OnlyA       int    `json:"flows_only_a"`
	OnlyB       int    `json:"flows_only_b"`
	MSEus2      Num    `json:"mse_us2"`          // mean of (fct_B − fct_A)², µs²
	RMSEus      Num    `json:"rmse_us"`          // its square root, µs
	MeanErrUs   Num    `json:"mean_error_us"`    // mean of fct_B − fct_A, µs (bias)
	MaxAbsErrNs int64  `json:"max_abs_error_ns"` // largest |fct_B − fct_A|
	// The flows compared are those starting in [WindowFromNs, WindowToNs)
	// on each side (CompareWindow); the whole run when not set.
	WindowFromNs int64 `json:"window_from_ns,omitempty"`
	WindowToNs   int64 `json:"window_to_ns,omitempty"`
	// Latency curves, as the hybrid-PDES paper plots and scores them
	// (its Figure 3 and MSE): the flows ending in each CurveBinNs of the
	// window (or of the runs), their mean latency per run, and the error
	// over the bins both runs have flows in. Unlike the matched flows'
	// error this does not depend on the order a backlogged NIC serves
	// its transfers in, and counts the flows of both runs, not only those
	// both finished.
	CurveBinNs     int64 `json:"curve_bin_ns"`
	CurveBins      int   `json:"curve_bins"`
	CurveOnlyA     int   `json:"curve_bins_only_a"`
	CurveOnlyB     int   `json:"curve_bins_only_b"`
	CurveMSEus2    Num   `json:"curve_mse_us2"`
	CurveMeanErrUs Num   `json:"curve_mean_error_us"`
	// Whole runs, for throughput: bytes of their flows (delay nodes carry
	// none) and their makespans.
	BytesA int64 `json:"flow_bytes_a"`
	BytesB int64 `json:"flow_bytes_b"`
}

// CollectiveRatio is one collective in both runs.
type CollectiveRatio struct {
	ID int64 `json:"collective_id"`
	CollKey
	TimeANs int64 `json:"time_a_ns"`
	TimeBNs int64 `json:"time_b_ns"`
	Ratio   Num   `json:"ratio"` // NaN unless both completed
	// Status is ok, or says in which run it failed or its stop cut it
	// ("failed in A", "cut in B", "failed in both", "failed in A, cut
	// in B"): left out of Summary.
	Status string `json:"status"`
}

// SummaryRatio aggregates matched collectives that are identical in run A
// (same key as Summary): the ratio of mean times.
type SummaryRatio struct {
	CollKey
	Count       int `json:"count"`
	TimeMeanANs Num `json:"time_mean_a_ns"`
	TimeMeanBNs Num `json:"time_mean_b_ns"`
	Ratio       Num `json:"ratio"`
}

// MatchByID and MatchByOrder name the two ways flows are matched.
const (
	MatchByID    = "flow_id"
	MatchByOrder = "src,dst,size,start order"
)

// Compare compares run b against run a. Both must have been analyzed with
// Options.KeepFlows.
//
// Flows are matched by flow_id when both runs are fabricsim traces (the
// same stream simulated twice has the same ids). A SimAI fct.txt has no
// flow ids, so when either run is one, flows are matched by (src, dst,
// size_bytes) and, among the flows sharing those, by start order: the k-th
// earliest such flow of A with the k-th earliest of B (ties in start keep
// file order). Flows left over on either side are counted, not guessed.
//
// The mean squared error of flow latencies is that of the hybrid-PDES
// paper (Cruz-Camacho et al., SIGSIM-PADS '23): the mean over matched
// flows of (fct_B − fct_A)², in µs², with A the reference.
func Compare(a, b *Run) (*Comparison, error) { return CompareWindow(a, b, 0, 0, DefaultCurveBinNs) }

// DefaultCurveBinNs is the latency curves' bin: the paper's 100 µs.
const DefaultCurveBinNs = 100_000

// CompareWindow is Compare with the flow latencies compared only for flows
// that start in [from, to) ns on each side (to 0: no window), and the
// latency curves over the flows that end in it, in bins of binNs;
// collectives and whole-run figures are not windowed. The hybrid-PDES
// paper measures its error over the last 2 ms of a run, after the
// surrogate.
func CompareWindow(a, b *Run, from, to, binNs int64) (*Comparison, error) {
	if binNs <= 0 {
		return nil, fmt.Errorf("stats: latency curve bin %d ns: must be positive", binNs)
	}
	if a.flows == nil && a.Totals.Rows > 0 || b.flows == nil && b.Totals.Rows > 0 {
		return nil, fmt.Errorf("stats: Compare needs runs analyzed with KeepFlows")
	}
	if err := SameWorkload(a, b); err != nil {
		return nil, err
	}
	c := &Comparison{A: a.Source, B: b.Source, Collectives: []CollectiveRatio{}, Summary: []SummaryRatio{}, MakespanANs: a.Totals.MakespanNs, MakespanBNs: b.Totals.MakespanNs,
		MakespanRatio:    ratio(float64(b.Totals.MakespanNs), float64(a.Totals.MakespanNs)),
		UnfinishedFlowsA: a.UnfinishedFlows, UnfinishedFlowsB: b.UnfinishedFlows}
	c.compareCollectives(a, b)
	c.BytesA, c.BytesB = a.Totals.SumSizeBytes, b.Totals.SumSizeBytes
	if to > 0 {
		c.WindowFromNs, c.WindowToNs = from, to
	} else {
		from, to = math.MinInt64, math.MaxInt64
	}
	fa, fb := netFlows(a.flows, from, to), netFlows(b.flows, from, to)
	c.FlowsA, c.FlowsB = len(fa), len(fb)
	var pairs [][2]int64
	if a.Input != string(KindSimAIFCT) && b.Input != string(KindSimAIFCT) {
		c.MatchedBy = MatchByID
		pairs = matchSorted(fa, fb, func(x, y Flow) int { return cmp.Compare(x.ID, y.ID) },
			func(x, y Flow) int { return cmp.Compare(x.ID, y.ID) })
	} else {
		c.MatchedBy = MatchByOrder
		key := func(x, y Flow) int {
			return cmp.Or(cmp.Compare(x.Src, y.Src), cmp.Compare(x.Dst, y.Dst), cmp.Compare(x.SizeBytes, y.SizeBytes))
		}
		pairs = matchSorted(fa, fb, func(x, y Flow) int { return cmp.Or(key(x, y), cmp.Compare(x.StartNs, y.StartNs)) }, key)
	}
	c.Matched = len(pairs)
	c.OnlyA, c.OnlyB = len(fa)-len(pairs), len(fb)-len(pairs)
	c.MSEus2, c.RMSEus, c.MeanErrUs = Num(math.NaN()), Num(math.NaN()), Num(math.NaN())
	if len(pairs) > 0 {
		var sum, sq float64
		for _, p := range pairs {
			d := p[1] - p[0]
			c.MaxAbsErrNs = max(c.MaxAbsErrNs, d, -d)
			fd := float64(d) / 1e3 // µs
			sum += fd
			sq += fd * fd
		}
		n := float64(len(pairs))
		c.MSEus2 = Num(sq / n)
		c.RMSEus = Num(math.Sqrt(sq / n))
		c.MeanErrUs = Num(sum / n)
	}
	c.compareCurves(a.flows, b.flows, from, to, binNs)
	return c, nil
}

// compareCurves fills the latency-curve fields: bins of binNs from the
// window's start (from 0 without one) by when flows end.
func (c *Comparison) compareCurves(a, b []Flow, from, to, binNs int64) {
	c.CurveBinNs = binNs
	ba, bb := curveBins(a, from, to, binNs), curveBins(b, from, to, binNs)
	keys := slices.Collect(maps.Keys(ba))
	for k := range bb {
		if _, ok := ba[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // a fixed order of summing, for identical output
	var sum, sq float64
	for _, k := range keys {
		x, inA := ba[k]
		y, inB := bb[k]
		switch {
		case !inA:
			c.CurveOnlyB++
		case !inB:
			c.CurveOnlyA++
		default:
			d := (y.mean() - x.mean()) / 1e3 // µs
			sum += d
			sq += d * d
			c.CurveBins++
		}
	}
	c.CurveMSEus2, c.CurveMeanErrUs = Num(math.NaN()), Num(math.NaN())
	if c.CurveBins > 0 {
		c.CurveMSEus2, c.CurveMeanErrUs = Num(sq/float64(c.CurveBins)), Num(sum/float64(c.CurveBins))
	}
}

// latencyBin sums the latencies (ns) of the flows ending in one bin.
type latencyBin struct{ sum, n int64 }

func (b latencyBin) mean() float64 { return float64(b.sum) / float64(b.n) }

// curveBins bins the flows (delay nodes excluded) that end in [from, to)
// by their end, binNs wide from max(from, 0).
func curveBins(fs []Flow, from, to, binNs int64) map[int64]latencyBin {
	origin := max(from, 0)
	bins := map[int64]latencyBin{}
	for _, f := range fs {
		if f.ConnType == stream.ConnDelay || f.EndNs < from || f.EndNs >= to {
			continue
		}
		k := (f.EndNs - origin) / binNs
		b := bins[k]
		b.sum += f.FctNs
		b.n++
		bins[k] = b
	}
	return bins
}

// Curve is a run's latency curve: the mean latency (fct) of the flows
// ending in each bin, at the bin's middle, for the bins that have flows.
type Curve struct {
	Name   string
	BinNs  int64
	Ms, Us []float64 // bin middles (ms) and mean latencies (µs)
}

// LatencyCurve is the run's latency curve in bins of binNs from time 0.
// The run must have been analyzed with Options.KeepFlows.
func (run *Run) LatencyCurve(binNs int64) Curve {
	bins := curveBins(run.flows, math.MinInt64, math.MaxInt64, binNs)
	c := Curve{Name: run.Source, BinNs: binNs}
	for _, k := range slices.Sorted(maps.Keys(bins)) {
		c.Ms = append(c.Ms, (float64(k)+0.5)*float64(binNs)/1e6)
		c.Us = append(c.Us, bins[k].mean()/1e3)
	}
	return c
}

// DropFlows frees the copy of every row that Options.KeepFlows kept, once
// what needed them is done (a 28 M-flow trace keeps 1.8 GB).
func (run *Run) DropFlows() { run.flows = nil }

// netFlows drops delay nodes: they are not flows and fct.txt has none.
func netFlows(fs []Flow, from, to int64) []Flow {
	out := make([]Flow, 0, len(fs))
	for _, f := range fs {
		if f.ConnType != stream.ConnDelay && f.StartNs >= from && f.StartNs < to {
			out = append(out, f)
		}
	}
	return out
}

// matchSorted sorts both sides by order (stable, so ties keep file order)
// and pairs equal keys one to one in that order, returning (fct_A, fct_B)
// pairs.
func matchSorted(a, b []Flow, order, key func(x, y Flow) int) [][2]int64 {
	slices.SortStableFunc(a, order)
	slices.SortStableFunc(b, order)
	var pairs [][2]int64
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch k := key(a[i], b[j]); {
		case k < 0:
			i++
		case k > 0:
			j++
		default:
			pairs = append(pairs, [2]int64{a[i].FctNs, b[j].FctNs})
			i++
			j++
		}
	}
	return pairs
}

func (c *Comparison) compareCollectives(a, b *Run) {
	bi := make(map[int64]*Collective, len(b.Collectives))
	for i := range b.Collectives {
		bi[b.Collectives[i].ID] = &b.Collectives[i]
	}
	type acc struct{ sa, sb int64 }
	var sums []acc
	idx := map[CollKey]int{}
	matched := 0
	for _, ca := range a.Collectives {
		cb, ok := bi[ca.ID]
		if !ok {
			c.CollectivesOnlyA++
			continue
		}
		matched++
		cr := CollectiveRatio{ID: ca.ID, CollKey: ca.CollKey, TimeANs: ca.TimeNs, TimeBNs: cb.TimeNs,
			Ratio: ratio(float64(cb.TimeNs), float64(ca.TimeNs)), Status: "ok"}
		if ca.Status != trace.StatusOK || cb.Status != trace.StatusOK {
			// A time until a failure or a stop is no completion time to compare.
			cr.Ratio = Num(math.NaN())
			cr.Status = pairStatus(ca.Status, cb.Status)
			c.Collectives = append(c.Collectives, cr)
			continue
		}
		c.Collectives = append(c.Collectives, cr)
		i, ok := idx[ca.CollKey]
		if !ok {
			i = len(c.Summary)
			idx[ca.CollKey] = i
			c.Summary = append(c.Summary, SummaryRatio{CollKey: ca.CollKey})
			sums = append(sums, acc{})
		}
		c.Summary[i].Count++
		sums[i].sa += ca.TimeNs
		sums[i].sb += cb.TimeNs
	}
	c.CollectivesOnlyB = len(b.Collectives) - matched
	for i := range c.Summary {
		s := &c.Summary[i]
		n := float64(s.Count)
		s.TimeMeanANs = Num(float64(sums[i].sa) / n)
		s.TimeMeanBNs = Num(float64(sums[i].sb) / n)
		s.Ratio = ratio(float64(s.TimeMeanBNs), float64(s.TimeMeanANs))
	}
}

// pairStatus says which of two runs a collective did not complete in, and
// why, from its two statuses (one at least not ok).
func pairStatus(a, b string) string {
	switch {
	case a == b:
		return a + " in both"
	case b == trace.StatusOK:
		return a + " in A"
	case a == trace.StatusOK:
		return b + " in B"
	}
	return a + " in A, " + b + " in B"
}

// SameWorkload refuses to compare two traces of different workloads:
// matching collectives by id alone would set one run's AllReduce against
// another's SendRecv. The collectives must agree on id, op, size and ranks
// (the algorithm may differ: that is a thing to compare). A partial run may
// lack collectives whose flows never finished; a whole one may not. SimAI
// fct.txt files have no collectives and are not checked.
func SameWorkload(a, b *Run) error {
	if a.Input == string(KindSimAIFCT) || b.Input == string(KindSimAIFCT) {
		return nil
	}
	bi := make(map[int64]*Collective, len(b.Collectives))
	for i := range b.Collectives {
		bi[b.Collectives[i].ID] = &b.Collectives[i]
	}
	what := func(c *Collective) string {
		return fmt.Sprintf("%s %s on %s", cmpStr(c.Op, "(no op)"), units.HumanSize(c.SizeBytes), units.Plural(int64(c.NRanks), "rank"))
	}
	differ := func(format string, args ...any) error {
		return fmt.Errorf("--compare: %s and %s are not runs of the same workload: %s", a.Source, b.Source, fmt.Sprintf(format, args...))
	}
	for i := range a.Collectives {
		ca := &a.Collectives[i]
		cb, ok := bi[ca.ID]
		switch {
		case !ok && !b.Partial:
			return differ("collective %d (%s) is in A only", ca.ID, what(ca))
		case ok && (ca.Op != cb.Op || ca.SizeBytes != cb.SizeBytes || ca.NRanks != cb.NRanks):
			return differ("collective %d is %s in A, %s in B", ca.ID, what(ca), what(cb))
		}
		delete(bi, ca.ID)
	}
	if len(bi) > 0 && !a.Partial {
		first := slices.Min(slices.Collect(maps.Keys(bi)))
		return differ("collective %d (%s) is in B only", first, what(bi[first]))
	}
	return nil
}

// ratio is b / a, NaN when a is 0 (two instantaneous collectives have no
// meaningful ratio).
func ratio(b, a float64) Num {
	if a == 0 {
		return Num(math.NaN())
	}
	return Num(b / a)
}
