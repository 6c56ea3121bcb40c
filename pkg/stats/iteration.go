package stats

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// The iteration report: where one training iteration's time goes on each
// rank. Definitions (integer nanoseconds throughout):
//
//   - The iteration runs from the earliest start to the latest end over
//     every row of the trace.
//   - A rank computes while one of its compute rows (op compute, a delay
//     node src = dst = rank) runs; compute time is the union of them.
//   - A rank's span of a collective is min(start) .. max(end) over the
//     collective's rows the rank sends or receives (its launch-latency
//     delay nodes included).
//   - Every instant of the iteration a rank does not compute is idle. An
//     idle instant during which one of the rank's collective spans is open
//     is exposed communication of that collective (its group type, layer
//     and phase). When several are open, the one the rank is blocked on is
//     taken: forward, input-gradient and pipeline transfers before
//     weight-gradient collectives (which run asynchronously), then the one
//     ending last, then the lowest collective_id. An idle instant with no
//     collective open is bubble: the rank waits for another rank (a
//     pipeline stage upstream, a peer not yet at the collective) or has
//     finished early.
//   - Hence, per rank and exactly: compute + exposed + bubble = iteration.
//     The critical rank is the one with the most compute + exposed time
//     (least bubble), lowest rank on ties; the per-layer table is its
//     view, as SimAI reports one rank.

// ExposedTypes are the group types the report breaks exposed
// communication into, in SimAI's column order; collectives of any other
// group type count as "other".
var ExposedTypes = []string{"DP", "DP_EP", "TP", "EP", "PP"}

const otherType = 5 // index of "other" in exposure arrays

// RankBreakdown is one rank's iteration.
type RankBreakdown struct {
	Rank           int32 `json:"rank"`
	Stage          int32 `json:"stage"`
	ComputeNs      int64 `json:"compute_ns"`
	ExposedDPNs    int64 `json:"exposed_dp_ns"`
	ExposedDPEPNs  int64 `json:"exposed_dp_ep_ns"`
	ExposedTPNs    int64 `json:"exposed_tp_ns"`
	ExposedEPNs    int64 `json:"exposed_ep_ns"`
	ExposedPPNs    int64 `json:"exposed_pp_ns"`
	ExposedOtherNs int64 `json:"exposed_other_ns"`
	ExposedNs      int64 `json:"exposed_ns"` // the six above together
	BubbleNs       int64 `json:"bubble_ns"`
	IterationNs    int64 `json:"iteration_ns"`
}

// Exposed returns the exposed time per ExposedTypes, then other.
func (b *RankBreakdown) Exposed() [6]int64 {
	return [6]int64{b.ExposedDPNs, b.ExposedDPEPNs, b.ExposedTPNs, b.ExposedEPNs, b.ExposedPPNs, b.ExposedOtherNs}
}

func (b *RankBreakdown) setExposed(e [6]int64) {
	b.ExposedDPNs, b.ExposedDPEPNs, b.ExposedTPNs, b.ExposedEPNs, b.ExposedPPNs, b.ExposedOtherNs = e[0], e[1], e[2], e[3], e[4], e[5]
	b.ExposedNs = 0
	for _, v := range e {
		b.ExposedNs += v
	}
}

// MeanBreakdown is the mean of every rank's breakdown.
type MeanBreakdown struct {
	ComputeNs      Num `json:"compute_ns"`
	ExposedDPNs    Num `json:"exposed_dp_ns"`
	ExposedDPEPNs  Num `json:"exposed_dp_ep_ns"`
	ExposedTPNs    Num `json:"exposed_tp_ns"`
	ExposedEPNs    Num `json:"exposed_ep_ns"`
	ExposedPPNs    Num `json:"exposed_pp_ns"`
	ExposedOtherNs Num `json:"exposed_other_ns"`
	ExposedNs      Num `json:"exposed_ns"`
	BubbleNs       Num `json:"bubble_ns"`
}

// LayerRow is one workload layer on the critical rank, summed over
// microbatches: compute, exposed and total communication per phase
// (forward, input gradient, weight gradient), and the bandwidths of the
// phase's collectives: algbw = their bytes / their total time, busbw the
// same with each collective's bytes times nccl-tests' factor (GB/s, 1 GB
// = 1e9 B).
type LayerRow struct {
	Layer        int32  `json:"layer"`
	Name         string `json:"layer_name"`
	FwdComputeNs int64  `json:"fwd_compute_ns"`
	WgComputeNs  int64  `json:"wg_compute_ns"`
	IgComputeNs  int64  `json:"ig_compute_ns"`
	FwdExposedNs int64  `json:"fwd_exposed_ns"`
	WgExposedNs  int64  `json:"wg_exposed_ns"`
	IgExposedNs  int64  `json:"ig_exposed_ns"`
	FwdCommNs    int64  `json:"fwd_comm_ns"`
	FwdBytes     int64  `json:"fwd_comm_bytes"`
	FwdAlgbw     Num    `json:"fwd_algbw_gbps"`
	FwdBusbw     Num    `json:"fwd_busbw_gbps"`
	WgCommNs     int64  `json:"wg_comm_ns"`
	WgBytes      int64  `json:"wg_comm_bytes"`
	WgAlgbw      Num    `json:"wg_algbw_gbps"`
	WgBusbw      Num    `json:"wg_busbw_gbps"`
	IgCommNs     int64  `json:"ig_comm_ns"`
	IgBytes      int64  `json:"ig_comm_bytes"`
	IgAlgbw      Num    `json:"ig_algbw_gbps"`
	IgBusbw      Num    `json:"ig_busbw_gbps"`

	ph [3]phaseSums // fwd, ig, wg, gathered before the named fields are set
}

// phaseSums are one layer's figures for one phase.
type phaseSums struct {
	compute, exposed, comm, bytes int64
	bus                           float64 // bytes × nccl-tests' busbw factor
	cut                           bool    // a collective of it was cut: no bandwidth
}

// Iteration is the report of one trace.
type Iteration struct {
	Source string `json:"source"`
	// Job: the job of a trace of several (its job column), whose rows
	// alone the report covers (AnalyzeIterations); "" otherwise.
	Job     string `json:"job,omitempty"`
	Backend string `json:"backend,omitempty"`
	// A partial trace's (only with --allow-partial): the report covers
	// the flows that finished.
	Partial         bool     `json:"partial,omitempty"`
	UnfinishedFlows int64    `json:"unfinished_flows,omitempty"`
	Notes           []string `json:"notes,omitempty"` // the trace's fabricsim.notes
	// Approximate says what the run approximated (fabricsim.approximate).
	Approximate  string          `json:"approximate,omitempty"`
	StartNs      int64           `json:"start_ns"`
	EndNs        int64           `json:"end_ns"`
	IterationNs  int64           `json:"iteration_ns"`
	CriticalRank int32           `json:"critical_rank"`
	Critical     RankBreakdown   `json:"critical"`
	Mean         MeanBreakdown   `json:"mean"`
	Ranks        []RankBreakdown `json:"ranks"`
	Layers       []LayerRow      `json:"layers"`
	// PerStage: a collective-granularity trace, in which each rank stands
	// for every rank of its pipeline stage.
	PerStage bool `json:"one_rank_per_stage"`
	// With a solo run of the same job (SetSolo): its iteration alone on
	// the fabric, where it came from, and this one's ratio to it.
	SoloSource      string  `json:"solo_source,omitempty"`
	SoloIterationNs int64   `json:"solo_iteration_ns,omitempty"`
	Slowdown        float64 `json:"slowdown,omitempty"`
	// SoloPartial: the solo run stopped early, so its iteration is a
	// lower bound (and Slowdown no ratio of two iterations).
	SoloPartial bool `json:"solo_partial,omitempty"`

	// Segments per rank (with IterationOptions.KeepSegments): the
	// iteration cut into compute, exposed and bubble pieces, for plots.
	segments map[int32][]Segment
	// spans per rank, for the Chrome trace.
	spans map[int32][]rankSpan
	colls map[int64]*collMeta
	comp  map[int32][]computeRow
}

// Segments are rank's pieces of the iteration in time order (nil unless
// it was analysed with IterationOptions.KeepSegments). The slice is the
// iteration's own: callers must not modify it.
func (it *Iteration) Segments(rank int32) []Segment { return it.segments[rank] }

// ExposedKind tells exposed communication (SegExposedDP to
// SegExposedOther) from compute and bubble.
func ExposedKind(k SegmentKind) bool { return k >= SegExposedDP && k < SegBubble }

// Segment is a piece of one rank's iteration and what filled it.
type Segment struct {
	StartNs, EndNs int64
	Kind           SegmentKind
}

// SegmentKind says what a rank did during a segment.
type SegmentKind uint8

// Segment kinds: compute per phase, exposed communication per group type
// (in ExposedTypes order, then other), bubble.
const (
	SegFwd SegmentKind = iota
	SegIg
	SegWg
	SegCompute // compute outside a known phase
	SegExposedDP
	SegExposedDPEP
	SegExposedTP
	SegExposedEP
	SegExposedPP
	SegExposedOther
	SegBubble
	// NumSegmentKinds counts the kinds above (SegmentNames' length).
	NumSegmentKinds
)

// SegmentNames label segment kinds in plots and traces.
var SegmentNames = [NumSegmentKinds]string{"compute fwd", "compute ig", "compute wg", "compute", "exposed DP", "exposed DP_EP",
	"exposed TP", "exposed EP", "exposed PP", "exposed other", "bubble"}

// IterationOptions tune AnalyzeIteration.
type IterationOptions struct {
	KeepSegments bool // for --plot
	KeepSpans    bool // for the Chrome trace
}

type collMeta struct {
	op, algo, groupType, phase, layerName string
	size                                  int64
	nranks, layer, microbatch, stage      int32
	gt                                    int8 // index into ExposedTypes, otherType if none
	flows                                 []trace.Row
	// cut: a partial run's stop cut it (or may have: a partial trace
	// without fabricsim.cut), so its span is no completion time.
	cut bool
}

type computeRow struct {
	start, end   int64
	layer, mb    int32
	stage        int32
	phase        int8 // 0 fwd, 1 ig, 2 wg, -1 none
	name         string
	collectiveID int64
}

type rankSpan struct {
	coll       int64
	start, end int64
}

type spanKey struct {
	coll int64
	rank int32
}

func phaseIndex(p string) int8 {
	switch p {
	case "fwd":
		return 0
	case "ig":
		return 1
	case "wg":
		return 2
	}
	return -1
}

func groupIndex(gt string) int8 {
	for i, t := range ExposedTypes {
		if t == gt {
			return int8(i)
		}
	}
	return otherType
}

// MaxChromeFlows bounds the flows a Chrome trace carries: beyond it the
// trace holds compute and collectives only (Perfetto slows past a few
// hundred thousand slices).
const MaxChromeFlows = 200_000

// iterAcc gathers what the report needs from the rows.
type iterAcc struct {
	opt       IterationOptions
	name      string
	rows      int64
	start     int64
	end       int64
	comp      map[int32][]computeRow
	unphased  int64 // compute rows without a phase
	spans     map[spanKey]*rankSpan
	colls     map[int64]*collMeta
	lastColl  *collMeta
	lastID    int64
	flowsKept int
	perStage  bool
}

func newIterAcc(name string, opt IterationOptions) *iterAcc {
	return &iterAcc{opt: opt, name: name, comp: map[int32][]computeRow{}, spans: map[spanKey]*rankSpan{},
		colls: map[int64]*collMeta{}, lastID: -1}
}

func (a *iterAcc) add(r *trace.Row) {
	if a.rows == 0 || r.StartNs < a.start {
		a.start = r.StartNs
	}
	if a.rows == 0 || r.EndNs > a.end {
		a.end = r.EndNs
	}
	a.rows++
	if r.Op == stream.OpCompute {
		ph := phaseIndex(r.Phase)
		if ph < 0 {
			a.unphased++
		}
		a.comp[r.Src] = append(a.comp[r.Src], computeRow{start: r.StartNs, end: r.EndNs, layer: r.Layer, mb: r.Microbatch,
			stage: r.Stage, phase: ph, name: r.LayerName, collectiveID: r.CollectiveID})
		return
	}
	if r.CollectiveID < 0 {
		return // raw flows belong to no collective a rank waits on
	}
	if r.ConnType == stream.ConnColl {
		a.perStage = true
	}
	c := a.lastColl
	if c == nil || a.lastID != r.CollectiveID {
		c = a.colls[r.CollectiveID]
		if c == nil {
			c = &collMeta{op: r.Op, algo: r.Algorithm, groupType: r.GroupType, phase: r.Phase, layerName: r.LayerName, size: r.CollSizeBytes,
				nranks: r.NRanks, layer: r.Layer, microbatch: r.Microbatch, stage: r.Stage, gt: groupIndex(r.GroupType)}
			a.colls[r.CollectiveID] = c
		}
		a.lastColl, a.lastID = c, r.CollectiveID
	}
	if a.opt.KeepSpans && a.flowsKept < MaxChromeFlows && r.ConnType != stream.ConnDelay {
		c.flows = append(c.flows, *r)
		a.flowsKept++
	}
	a.span(r.CollectiveID, r.Src, r)
	if r.Dst != r.Src {
		a.span(r.CollectiveID, r.Dst, r)
	}
}

func (a *iterAcc) span(coll int64, rank int32, r *trace.Row) {
	k := spanKey{coll, rank}
	s := a.spans[k]
	if s == nil {
		a.spans[k] = &rankSpan{coll: coll, start: r.StartNs, end: r.EndNs}
		return
	}
	s.start, s.end = min(s.start, r.StartNs), max(s.end, r.EndNs)
}

// AnalyzeIteration reads every row of in and computes the iteration
// report. It fails when the trace holds no compute phases (a trace of
// single collectives, or SimAI's fct.txt) or none with a phase (a
// fabricsim.flows/v1 trace).
func AnalyzeIteration(in *Input, opt IterationOptions) (*Iteration, error) {
	its, err := analyzeIterations(in, opt, false)
	if err != nil {
		return nil, err
	}
	return its[0], nil
}

// AnalyzeIterations is AnalyzeIteration per job of a trace whose rows
// carry jobs (simccl-decompose --merge): one report per job, in job name
// order, each from its own rows, its start node left out (a job's
// iteration runs from its start); a trace without jobs gives one.
func AnalyzeIterations(in *Input, opt IterationOptions) ([]*Iteration, error) {
	return analyzeIterations(in, opt, true)
}

// jobStart reports whether r is a job's start node: a delay of no
// collective that takes time (joins of no collective take none).
func jobStart(r *trace.Row) bool {
	return r.Job != "" && r.CollectiveID < 0 && r.ConnType == stream.ConnDelay && r.SizeBytes == 0 && r.FctNs > 0
}

func analyzeIterations(in *Input, opt IterationOptions, byJob bool) ([]*Iteration, error) {
	if in.Kind != KindTrace {
		return nil, fmt.Errorf("%s: --iteration (and --format chrome-trace or simai-e2e, its views) needs a fabricsim trace of a workload run; SimAI's fct.txt has no compute phases", in.Name)
	}
	if in.Meta != nil && in.Meta.Schema == trace.SchemaV1 {
		return nil, fmt.Errorf("%s: a %s trace has no layer, layer_name, phase, microbatch or stage columns, which --iteration needs: rerun the backend, which writes %s",
			in.Name, trace.SchemaV1, trace.SchemaName)
	}
	accs := map[string]*iterAcc{}
	var a *iterAcc
	job := ""
	var failed, first int64 = 0, -1
	if err := in.Each(func(r *trace.Row) error {
		if failedRow(r) {
			if failed == 0 {
				first = r.FlowID
			}
			failed++
		}
		if a == nil || byJob && r.Job != job {
			if byJob {
				job = r.Job
			}
			if a = accs[job]; a == nil {
				name := in.Name
				if job != "" {
					name += " job " + job
				}
				a = newIterAcc(name, opt)
				accs[job] = a
			}
		}
		if byJob && jobStart(r) {
			return nil
		}
		a.add(r)
		return nil
	}); err != nil {
		return nil, err
	}
	if failed > 0 {
		// Its collectives did not complete, so neither did the iteration.
		return nil, fmt.Errorf("%s: %d flows failed (status failed, first flow_id %d): the iteration did not complete and has no iteration time; fctstats without --iteration reports which collectives failed",
			in.Name, failed, first)
	}
	if len(accs) == 0 {
		accs[""] = newIterAcc(in.Name, opt)
	}
	var its []*Iteration
	for _, job := range slices.Sorted(maps.Keys(accs)) {
		accs[job].markCut(in.Meta)
		it, err := accs[job].finish()
		if err != nil && in.Meta != nil && in.Meta.Partial() {
			// A run stopped before a compute phase ended has none: say
			// that, not that the trace is not a training workload's.
			return nil, fmt.Errorf("%v (this partial trace's run stopped early: %d flows never finished)", err, in.Meta.Unfinished)
		}
		if err != nil {
			return nil, err
		}
		it.Job = job
		if in.Meta != nil {
			it.Backend = in.Meta.Backend
			it.Partial, it.UnfinishedFlows = in.Meta.Partial(), in.Meta.Unfinished
			it.Notes = in.Meta.Notes
			it.Approximate = in.Meta.Approximate
		}
		its = append(its, it)
	}
	return its, nil
}

// markCut marks the collectives a partial trace's stop cut; all of them
// when the trace does not say which (written before fabricsim.cut).
func (a *iterAcc) markCut(m *trace.Meta) {
	if m == nil || !m.Partial() {
		return
	}
	if m.Cut == nil {
		for _, c := range a.colls {
			c.cut = true
		}
		return
	}
	for _, cc := range m.Cut.Collectives {
		if c := a.colls[cc.ID]; c != nil {
			c.cut = true
		}
	}
}

func (a *iterAcc) finish() (*Iteration, error) {
	n := int64(0)
	for _, c := range a.comp {
		n += int64(len(c))
	}
	switch {
	case n == 0:
		return nil, fmt.Errorf("%s: no compute rows (op %q): --iteration (and --format chrome-trace or simai-e2e, its views) needs the trace of a training workload (simccl-decompose --workload FILE)", a.name, stream.OpCompute)
	case a.unphased == n:
		return nil, fmt.Errorf("%s: column phase: no compute row has a phase (fwd, ig, wg); a fabricsim.flows/v1 trace lacks it: rerun the backend", a.name)
	}
	it := &Iteration{Source: a.name, StartNs: a.start, EndNs: a.end, IterationNs: a.end - a.start, colls: a.colls, PerStage: a.perStage}
	perRank := map[int32][]rankSpan{}
	for k, s := range a.spans {
		if _, ok := a.comp[k.rank]; ok {
			perRank[k.rank] = append(perRank[k.rank], *s)
		}
	}
	ranks := make([]int32, 0, len(a.comp))
	for r := range a.comp {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)
	if a.opt.KeepSegments {
		it.segments = map[int32][]Segment{}
	}
	if a.opt.KeepSpans {
		it.spans, it.comp = perRank, a.comp
	}
	layerViews := map[int32]map[int32]*LayerRow{}
	best := -1
	for _, r := range ranks {
		b, layers, segs := a.rank(r, a.comp[r], perRank[r])
		it.Ranks = append(it.Ranks, b)
		layerViews[r] = layers
		if it.segments != nil {
			it.segments[r] = segs
		}
		if best < 0 || b.ComputeNs+b.ExposedNs > it.Ranks[best].ComputeNs+it.Ranks[best].ExposedNs {
			best = len(it.Ranks) - 1
		}
	}
	it.Critical = it.Ranks[best]
	it.CriticalRank = it.Critical.Rank
	it.Mean = meanBreakdown(it.Ranks)
	for _, l := range layerViews[it.CriticalRank] {
		l.finish()
		it.Layers = append(it.Layers, *l)
	}
	slices.SortFunc(it.Layers, func(x, y LayerRow) int { return cmp.Or(cmp.Compare(x.Layer, y.Layer), cmp.Compare(x.Name, y.Name)) })
	return it, nil
}

// rank computes one rank's breakdown, its per-layer view and (when kept)
// its segments.
func (a *iterAcc) rank(r int32, comp []computeRow, spans []rankSpan) (RankBreakdown, map[int32]*LayerRow, []Segment) {
	b := RankBreakdown{Rank: r, Stage: -1, IterationNs: a.end - a.start}
	layers := map[int32]*LayerRow{}
	layerOf := func(idx int32, name string) *LayerRow {
		l := layers[idx]
		if l == nil {
			l = &LayerRow{Layer: idx, Name: name}
			layers[idx] = l
		}
		return l
	}
	slices.SortFunc(comp, func(x, y computeRow) int { return cmp.Or(cmp.Compare(x.start, y.start), cmp.Compare(x.end, y.end)) })
	// Compute: per layer and phase, and the union on the rank.
	var busy [][2]int64
	var segs []Segment
	for _, c := range comp {
		if b.Stage < 0 && c.stage >= 0 {
			b.Stage = c.stage
		}
		if c.layer >= 0 && c.phase >= 0 {
			layerOf(c.layer, c.name).ph[c.phase].compute += c.end - c.start
		}
		if c.end <= c.start {
			continue
		}
		if a.opt.KeepSegments {
			kind := SegCompute
			if c.phase >= 0 {
				kind = SegmentKind(c.phase)
			}
			segs = appendSegment(segs, Segment{c.start, c.end, kind})
		}
		if n := len(busy); n > 0 && c.start <= busy[n-1][1] {
			busy[n-1][1] = max(busy[n-1][1], c.end)
			continue
		}
		busy = append(busy, [2]int64{c.start, c.end})
	}
	for _, s := range busy {
		b.ComputeNs += s[1] - s[0]
	}
	// Total communication per layer and phase: the rank's spans.
	for _, s := range spans {
		c := a.colls[s.coll]
		ph := phaseIndex(c.phase)
		if c.layer < 0 || ph < 0 {
			continue
		}
		p := &layerOf(c.layer, c.layerName).ph[ph]
		p.comm += s.end - s.start
		p.bytes += c.size
		p.cut = p.cut || c.cut
		if bus := float64(c.size) * BusBwFactor(c.op, int(c.nranks)); bus == bus { // not NaN: an op nccl-tests has a factor for
			p.bus += bus
		}
	}
	// Idle time: the complement of busy in the iteration, attributed.
	var exposed [6]int64
	slices.SortFunc(spans, func(x, y rankSpan) int { return cmp.Or(cmp.Compare(x.start, y.start), cmp.Compare(x.coll, y.coll)) })
	var active []rankSpan
	next := 0
	attribute := func(from, to int64) {
		for from < to {
			// Open spans at from: admit those started, drop those ended.
			for next < len(spans) && spans[next].start <= from {
				if spans[next].end > from {
					active = append(active, spans[next])
				}
				next++
			}
			active = slices.DeleteFunc(active, func(s rankSpan) bool { return s.end <= from })
			// The piece ends at the next span boundary.
			until := to
			if next < len(spans) {
				until = min(until, spans[next].start)
			}
			var pick *rankSpan
			for i := range active {
				s := &active[i]
				until = min(until, s.end)
				if pick == nil || a.blocks(s, pick) {
					pick = s
				}
			}
			kind := SegBubble
			if pick != nil {
				c := a.colls[pick.coll]
				exposed[c.gt] += until - from
				kind = SegExposedDP + SegmentKind(c.gt)
				if ph := phaseIndex(c.phase); ph >= 0 && c.layer >= 0 {
					layerOf(c.layer, c.layerName).ph[ph].exposed += until - from
				}
			} else {
				b.BubbleNs += until - from
			}
			if a.opt.KeepSegments {
				segs = appendSegment(segs, Segment{from, until, kind})
			}
			from = until
		}
	}
	at := a.start
	for _, s := range busy {
		attribute(at, s[0])
		at = s[1]
	}
	attribute(at, a.end)
	b.setExposed(exposed)
	if a.opt.KeepSegments {
		slices.SortFunc(segs, func(x, y Segment) int { return cmp.Compare(x.StartNs, y.StartNs) })
	}
	return b, layers, segs
}

// blocks reports whether s, rather than t, is the collective an idle rank
// waits on (see the package's definitions).
func (a *iterAcc) blocks(s, t *rankSpan) bool {
	sw, tw := a.colls[s.coll].phase == "wg", a.colls[t.coll].phase == "wg"
	if sw != tw {
		return !sw
	}
	if s.end != t.end {
		return s.end > t.end
	}
	return s.coll < t.coll
}

// appendSegment extends the last segment when the new one continues it.
func appendSegment(segs []Segment, s Segment) []Segment {
	if n := len(segs); n > 0 && segs[n-1].Kind == s.Kind && segs[n-1].EndNs == s.StartNs {
		segs[n-1].EndNs = s.EndNs
		return segs
	}
	return append(segs, s)
}

// finish sets the named fields from the per-phase sums.
func (l *LayerRow) finish() {
	bw := func(p *phaseSums) (Num, Num) {
		if p.comm <= 0 || p.bytes == 0 || p.cut {
			return Num(math.NaN()), Num(math.NaN())
		}
		return Num(Algbw(p.bytes, float64(p.comm))), Num(p.bus / float64(p.comm))
	}
	f, i, w := &l.ph[0], &l.ph[1], &l.ph[2]
	l.FwdComputeNs, l.IgComputeNs, l.WgComputeNs = f.compute, i.compute, w.compute
	l.FwdExposedNs, l.IgExposedNs, l.WgExposedNs = f.exposed, i.exposed, w.exposed
	l.FwdCommNs, l.IgCommNs, l.WgCommNs = f.comm, i.comm, w.comm
	l.FwdBytes, l.IgBytes, l.WgBytes = f.bytes, i.bytes, w.bytes
	l.FwdAlgbw, l.FwdBusbw = bw(f)
	l.IgAlgbw, l.IgBusbw = bw(i)
	l.WgAlgbw, l.WgBusbw = bw(w)
}

func meanBreakdown(rs []RankBreakdown) MeanBreakdown {
	var m MeanBreakdown
	n := Num(len(rs))
	for _, r := range rs {
		m.ComputeNs += Num(r.ComputeNs)
		m.ExposedDPNs += Num(r.ExposedDPNs)
		m.ExposedDPEPNs += Num(r.ExposedDPEPNs)
		m.ExposedTPNs += Num(r.ExposedTPNs)
		m.ExposedEPNs += Num(r.ExposedEPNs)
		m.ExposedPPNs += Num(r.ExposedPPNs)
		m.ExposedOtherNs += Num(r.ExposedOtherNs)
		m.ExposedNs += Num(r.ExposedNs)
		m.BubbleNs += Num(r.BubbleNs)
	}
	m.ComputeNs /= n
	m.ExposedDPNs /= n
	m.ExposedDPEPNs /= n
	m.ExposedTPNs /= n
	m.ExposedEPNs /= n
	m.ExposedPPNs /= n
	m.ExposedOtherNs /= n
	m.ExposedNs /= n
	m.BubbleNs /= n
	return m
}
