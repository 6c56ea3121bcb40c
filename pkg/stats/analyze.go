// Package stats computes what fctstats reports from flow traces and SimAI
// fct.txt files: per-collective completion time with nccl-tests' algbw and
// busbw, flow completion time and slowdown percentiles per size bucket and
// connection type, run-versus-run comparisons (completion-time ratios, the
// mean squared error of flow latencies) and plots.
//
// Definitions (all exact, on integer nanoseconds where possible):
//   - A collective's completion time is max(end_ns) − min(start_ns) over all
//     rows of its collective_id, its delay nodes (launch latency, joins)
//     included, as formats/trace.md defines it. Rows with a negative
//     collective_id (compute phases of a workload) belong to no collective.
//   - algbw = coll_size_bytes / time in GB/s with 1 GB = 1e9 B (bytes per
//     nanosecond), busbw = algbw × nccl-tests' factor for the op and
//     n = nranks (BusBwFactor).
//   - Flow statistics exclude delay nodes (conn_type DELAY): they carry no
//     bytes. Slowdown is fct_ns / ideal_fct_ns over flows with
//     ideal_fct_ns > 0. Size buckets are powers of two, [2^k, 2^(k+1)) bytes,
//     with empty flows in a bucket of their own.
//   - Percentiles are nearest-rank (NearestRank).
package stats

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Run is everything reported about one input.
type Run struct {
	Source   string              `json:"source"`
	Input    string              `json:"input"` // arrow-stream, arrow-file, parquet, simai-fct
	Backend  string              `json:"backend,omitempty"`
	Topology *trace.TopologyMeta `json:"topology,omitempty"`
	Params   map[string]any      `json:"params,omitempty"`
	Columns  []string            `json:"columns"`
	// Partial: the trace says its run stopped early with UnfinishedFlows
	// flows never finished (formats/trace.md); only read when the caller
	// allowed it, and every output then says PARTIAL.
	Partial         bool  `json:"partial,omitempty"`
	UnfinishedFlows int64 `json:"unfinished_flows,omitempty"`
	// CutUnknown: a partial trace with collectives written before
	// fabricsim.cut, which does not say which of them the stop cut.
	CutUnknown bool `json:"cut_unknown,omitempty"`
	// Notes: what the stream's producers left out or assumed (the
	// trace's fabricsim.notes); every text output prints them.
	Notes []string `json:"notes,omitempty"`
	// Approximate says what the run approximated (fabricsim.approximate).
	Approximate string `json:"approximate,omitempty"`
	Totals      Totals `json:"totals"`
	// Collectives lists every collective by id; Summary aggregates
	// identical ones (same op, size, group type, ranks and algorithm).
	Collectives []Collective `json:"collectives"`
	Summary     []Summary    `json:"summary"`
	// Flows has one row per (size bucket, conn_type); AllFlows is every
	// flow together.
	Flows    []FlowStats `json:"flows"`
	AllFlows FlowStats   `json:"all_flows"`
	// Jobs: per job of a trace of several (its job column, simccl-decompose
	// --merge), in name order; absent in a trace without jobs.
	Jobs []JobSpan `json:"jobs,omitempty"`

	cut     *trace.Cut   // the partial trace's fabricsim.cut
	buckets []*bucketAcc // samples, kept for the CDF plot
	allSlow []float64    // every slowdown, sorted
	flows   []Flow       // with Options.KeepFlows
}

// Totals are sums over every row of the input, delay nodes included, so
// that they equal what SQL's COUNT(*), SUM(size_bytes) and SUM(fct_ns) give
// on the same file.
type Totals struct {
	Rows         int64 `json:"rows"`
	Flows        int64 `json:"flows"`      // rows that are not delay nodes
	DelayRows    int64 `json:"delay_rows"` // conn_type DELAY
	Collectives  int   `json:"collectives"`
	SumSizeBytes int64 `json:"sum_size_bytes"`
	SumFctNs     int64 `json:"sum_fct_ns"`
	StartNs      int64 `json:"start_ns"`    // earliest start
	EndNs        int64 `json:"end_ns"`      // latest end
	MakespanNs   int64 `json:"makespan_ns"` // end − start
	// Rows whose status is not ok (a failed link cut them off), and the
	// collectives they belong to, which did not complete.
	FailedFlows       int64 `json:"failed_flows"`
	FailedCollectives int   `json:"failed_collectives"`
	// In a partial trace: collectives the stop cut (some flows finished,
	// some not: status cut) and those it never started (no row).
	CutCollectives        int   `json:"cut_collectives,omitempty"`
	NotStartedCollectives int64 `json:"collectives_not_started,omitempty"`
}

// JobSpan is one job's part of a run: its rows, collectives (compute
// phases left out) and span, from its first operation (its start node,
// which waits for the job's start, left out) to its last.
type JobSpan struct {
	Job         string `json:"job"`
	Rows        int64  `json:"rows"`
	Collectives int    `json:"collectives"`
	StartNs     int64  `json:"start_ns"`
	EndNs       int64  `json:"end_ns"`
	MakespanNs  int64  `json:"makespan_ns"`
	// CutFlows: in a partial trace, the job's flows that never finished
	// (fabricsim.cut); its span is then a lower bound.
	CutFlows int64 `json:"cut_flows,omitempty"`
}

// CollKey is what makes collectives identical: Summary and SummaryRatio
// group by it. Embedded in the report rows, its fields are flattened into
// their JSON objects and their CSV and Parquet columns.
type CollKey struct {
	Op        string `json:"op"`
	Algorithm string `json:"algorithm"`
	GroupType string `json:"group_type"`
	SizeBytes int64  `json:"coll_size_bytes"`
	NRanks    int32  `json:"nranks"`
}

// Collective is one collective_id. A collective with a failed flow
// (status other than ok) did not complete: Status is "failed", TimeNs is
// only the span of its rows, and it has no algbw or busbw. So is one a
// partial run's stop cut (Status "cut", CutFlows of its flows never
// finished): its TimeNs is a lower bound.
type Collective struct {
	ID int64 `json:"collective_id"`
	CollKey
	Status      string `json:"status"` // StatusOK, StatusFailed or StatusCut
	FailedFlows int    `json:"failed_flows"`
	// CutFlows: flows (delay nodes included) that never finished, the
	// run having stopped first. A column only with fctstats
	// --allow-partial (PartialColumns).
	CutFlows  int64 `json:"cut_flows,omitempty"`
	Flows     int   `json:"flows"`      // rows that are not delay nodes
	Bytes     int64 `json:"flow_bytes"` // bytes its flows carried
	StartNs   int64 `json:"start_ns"`
	EndNs     int64 `json:"end_ns"`
	TimeNs    int64 `json:"time_ns"`
	AlgbwGBps Num   `json:"algbw_gbps"`
	BusbwGBps Num   `json:"busbw_gbps"`

	rows int64 // delay nodes included, checked against fabricsim.cut
}

// StatusCut is a collective's status when a partial run's stop cut it:
// some of its flows finished, some never did.
const StatusCut = "cut"

// PartialColumns are the table columns only fctstats --allow-partial
// writes, so that the tables of whole runs read as before.
var PartialColumns = []string{"cut_flows", "cut"}

// Summary aggregates identical collectives. Like nccl-tests, which
// averages the time over iterations before dividing, algbw is
// coll_size_bytes / mean time. Failed and cut collectives are counted
// apart and left out of the times.
type Summary struct {
	CollKey
	Count  int `json:"count"`  // completed
	Failed int `json:"failed"` // with a failed flow
	// Cut: cut by a partial run's stop (PartialColumns).
	Cut int `json:"cut,omitempty"`

	TimeMeanNs Num   `json:"time_mean_ns"`
	TimeMinNs  int64 `json:"time_min_ns"`
	TimeMaxNs  int64 `json:"time_max_ns"`
	AlgbwGBps  Num   `json:"algbw_gbps"`
	BusbwGBps  Num   `json:"busbw_gbps"`
}

// FlowStats are FCT and slowdown percentiles of a set of flows.
type FlowStats struct {
	// Bucket is "all" or the size range; BucketLoBytes ≤ size <
	// BucketHiBytes (both 0 for the empty-flow bucket and for "all").
	Bucket        string `json:"size_bucket"`
	BucketLoBytes int64  `json:"bucket_lo_bytes"`
	BucketHiBytes int64  `json:"bucket_hi_bytes"`
	ConnType      string `json:"conn_type"`
	Flows         int    `json:"flows"`
	FctP50Ns      int64  `json:"fct_p50_ns"`
	FctP95Ns      int64  `json:"fct_p95_ns"`
	FctP99Ns      int64  `json:"fct_p99_ns"`
	FctMaxNs      int64  `json:"fct_max_ns"`
	// Slowdowns counts the flows with ideal_fct_ns > 0, over which the
	// slowdown percentiles are taken.
	Slowdowns   int `json:"slowdowns"`
	SlowdownP50 Num `json:"slowdown_p50"`
	SlowdownP95 Num `json:"slowdown_p95"`
	SlowdownP99 Num `json:"slowdown_p99"`
	SlowdownMax Num `json:"slowdown_max"`
}

// Flow is the compact per-flow record kept for comparisons and timelines.
type Flow struct {
	ID        int64
	Src, Dst  int32
	SizeBytes int64
	StartNs   int64
	EndNs     int64
	FctNs     int64
	ConnType  string
}

// Options tune Analyze.
type Options struct {
	// KeepFlows keeps a compact copy of every row (Run.Flows): needed by
	// Compare and by the timeline plot, not by the report.
	KeepFlows bool
}

// BusBwFactor is nccl-tests' busbw / algbw for op on n ranks: AllReduce
// 2(n−1)/n; AllGather, ReduceScatter, AllToAll (and Scatter, Gather)
// (n−1)/n; Broadcast, Reduce and SendRecv 1. Unknown ops and n < 1 give
// NaN. op is matched case-insensitively without underscores, so SimAI's
// ALL_REDUCE spelling works too.
func BusBwFactor(op string, n int) float64 {
	if n < 1 {
		return math.NaN()
	}
	nf := float64(n)
	switch strings.ToLower(strings.ReplaceAll(op, "_", "")) {
	case "allreduce":
		return 2 * (nf - 1) / nf
	case "allgather", "reducescatter", "alltoall", "alltoallv", "scatter", "gather":
		return (nf - 1) / nf
	case "broadcast", "bcast", "reduce", "sendrecv", "p2p":
		return 1
	}
	return math.NaN()
}

// Algbw is bytes / time in GB/s (1 GB = 1e9 B): bytes per nanosecond.
// A zero or negative time gives NaN.
func Algbw(bytes int64, timeNs float64) float64 {
	if timeNs <= 0 {
		return math.NaN()
	}
	return float64(bytes) / timeNs
}

type bucketKey struct {
	exp  int // -1: size 0; else floor(log2(size))
	conn string
}

type bucketAcc struct {
	key  bucketKey
	fct  []int64
	slow []float64
}

// Analyze reads every row of in and computes its report.
func Analyze(in *Input, opt Options) (*Run, error) {
	run := &Run{Source: in.Name, Input: in.Container, Columns: in.Columns()}
	if m := in.Meta; m != nil {
		run.Backend, run.Params = m.Backend, m.Params
		run.Partial, run.UnfinishedFlows = m.Partial(), m.Unfinished
		run.cut = m.Cut
		run.Notes = m.Notes
		run.Approximate = m.Approximate
		t := m.Topology
		run.Topology = &t
	}
	if n := in.Partial(); n > 0 && in.Meta == nil { // a partial fct.txt
		run.Partial, run.UnfinishedFlows = true, n
	}
	colls := map[int64]*Collective{}
	buckets := map[bucketKey]*bucketAcc{}
	jobs := map[string]*JobSpan{}
	jobColls := map[string]map[int64]bool{}
	computeRows := map[int64]int64{} // of the compute phases a partial trace says were cut
	var (
		lastJ    *JobSpan
		lastC    *Collective
		lastB    *bucketAcc
		tot      = &run.Totals
		haveTime bool
	)
	err := in.Each(func(row *trace.Row) error {
		tot.Rows++
		tot.SumSizeBytes += row.SizeBytes
		tot.SumFctNs += row.FctNs
		if !haveTime || row.StartNs < tot.StartNs {
			tot.StartNs = row.StartNs
		}
		if !haveTime || row.EndNs > tot.EndNs {
			tot.EndNs = row.EndNs
		}
		haveTime = true
		if row.Job != "" && !jobStart(row) {
			j := lastJ
			if j == nil || j.Job != row.Job {
				if j = jobs[row.Job]; j == nil {
					j = &JobSpan{Job: row.Job, StartNs: row.StartNs, EndNs: row.EndNs}
					jobs[row.Job] = j
					jobColls[row.Job] = map[int64]bool{}
				}
				lastJ = j
			}
			j.Rows++
			j.StartNs, j.EndNs = min(j.StartNs, row.StartNs), max(j.EndNs, row.EndNs)
			if row.CollectiveID >= 0 && row.Op != stream.OpCompute {
				jobColls[row.Job][row.CollectiveID] = true
			}
		}
		delay := row.ConnType == stream.ConnDelay
		if delay {
			tot.DelayRows++
		} else {
			tot.Flows++
		}
		if opt.KeepFlows {
			run.flows = append(run.flows, Flow{ID: row.FlowID, Src: row.Src, Dst: row.Dst, SizeBytes: row.SizeBytes,
				StartNs: row.StartNs, EndNs: row.EndNs, FctNs: row.FctNs, ConnType: row.ConnType})
		}
		// Compute phases are delay nodes of pseudo-collectives (op compute):
		// they are in the run's span, not in its collectives.
		if run.cut != nil && row.CollectiveID >= 0 && row.Op == stream.OpCompute {
			computeRows[row.CollectiveID]++
		}
		if row.CollectiveID >= 0 && row.Op != stream.OpCompute {
			c := lastC
			if c == nil || c.ID != row.CollectiveID {
				c = colls[row.CollectiveID]
				if c == nil {
					c = &Collective{ID: row.CollectiveID, CollKey: CollKey{Op: row.Op, Algorithm: row.Algorithm, GroupType: row.GroupType,
						SizeBytes: row.CollSizeBytes, NRanks: row.NRanks}, StartNs: row.StartNs, EndNs: row.EndNs}
					colls[row.CollectiveID] = c
				}
				lastC = c
			}
			c.StartNs = min(c.StartNs, row.StartNs)
			c.EndNs = max(c.EndNs, row.EndNs)
			c.rows++
			if !delay {
				c.Flows++
				c.Bytes += row.SizeBytes
			}
			if failedRow(row) {
				c.FailedFlows++
			}
		}
		if failedRow(row) {
			tot.FailedFlows++
		}
		if delay {
			return nil
		}
		k := bucketKey{exp: sizeExp(row.SizeBytes), conn: row.ConnType}
		b := lastB
		if b == nil || b.key != k {
			b = buckets[k]
			if b == nil {
				b = &bucketAcc{key: k}
				buckets[k] = b
			}
			lastB = b
		}
		b.fct = append(b.fct, row.FctNs)
		if row.IdealFctNs > 0 {
			b.slow = append(b.slow, float64(row.FctNs)/float64(row.IdealFctNs))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	tot.MakespanNs = tot.EndNs - tot.StartNs
	run.finishJobs(jobs, jobColls)
	if err := run.finishCollectives(colls, computeRows); err != nil {
		return nil, fmt.Errorf("%s: %v", in.Name, err)
	}
	run.finishFlows(buckets)
	// A stream of raw flows alone has no cut to say.
	run.CutUnknown = run.Partial && run.cut == nil && len(run.Collectives) > 0
	return run, nil
}

// finishJobs lists the jobs in name order. A partial trace's cut ones
// carry their unfinished flows (fabricsim.cut), and one it lists with no
// row (the stop came before it started) gets an empty span rather than
// vanish from the report.
func (run *Run) finishJobs(jobs map[string]*JobSpan, jobColls map[string]map[int64]bool) {
	if run.cut != nil {
		for _, cj := range run.cut.Jobs {
			j := jobs[cj.Job]
			if j == nil {
				j = &JobSpan{Job: cj.Job}
				jobs[cj.Job] = j
			}
			j.CutFlows = cj.Flows - cj.Finished
		}
	}
	for _, name := range slices.Sorted(maps.Keys(jobs)) {
		j := jobs[name]
		j.MakespanNs, j.Collectives = j.EndNs-j.StartNs, len(jobColls[name])
		run.Jobs = append(run.Jobs, *j)
	}
}

// failedRow reports whether a row's status says it was not delivered
// (v1 traces and fct.txt rows read as ok).
func failedRow(r *trace.Row) bool { return r.Status != trace.StatusOK && r.Status != "" }

// checkRow rejects rows whose numbers contradict each other, which would
// make every statistic wrong rather than fail; the trace reader checks
// types, not meaning.
func checkRow(in *Input, i int64, r *trace.Row) error {
	// fct.txt rows cannot get here: its reader rejects negative numbers
	// and end = start + fct.
	where := func() string { return fmt.Sprintf("%s: row %d (flow_id %d)", in.Name, i, r.FlowID) }
	switch {
	case r.FctNs < 0:
		return fmt.Errorf("%s, field fct_ns: %d is negative", where(), r.FctNs)
	case r.SizeBytes < 0:
		return fmt.Errorf("%s, field size_bytes: %d is negative", where(), r.SizeBytes)
	case r.IdealFctNs < 0:
		return fmt.Errorf("%s, field ideal_fct_ns: %d is negative", where(), r.IdealFctNs)
	case r.EndNs < r.StartNs:
		return fmt.Errorf("%s, field end_ns: %d is before start_ns %d", where(), r.EndNs, r.StartNs)
	}
	return nil
}

// sizeExp is the power-of-two bucket of a size: floor(log2(size)), -1 for 0.
func sizeExp(size int64) int {
	if size <= 0 {
		return -1
	}
	return bits.Len64(uint64(size)) - 1
}

func (run *Run) finishCollectives(colls map[int64]*Collective, computeRows map[int64]int64) error {
	if err := run.markCut(colls, computeRows); err != nil {
		return err
	}
	run.Collectives = make([]Collective, 0, len(colls))
	for _, p := range colls {
		c := *p
		c.TimeNs = c.EndNs - c.StartNs
		c.Status = trace.StatusOK
		c.AlgbwGBps = Num(Algbw(c.SizeBytes, float64(c.TimeNs)))
		c.BusbwGBps = Num(float64(c.AlgbwGBps) * BusBwFactor(c.Op, int(c.NRanks)))
		switch {
		case c.FailedFlows > 0:
			// It never completed: no bandwidth as if it had.
			c.Status = trace.StatusFailed
			run.Totals.FailedCollectives++
		case c.CutFlows > 0:
			// Nor did it finish: its time is a lower bound.
			c.Status = StatusCut
			run.Totals.CutCollectives++
		}
		if c.Status != trace.StatusOK {
			c.AlgbwGBps, c.BusbwGBps = Num(math.NaN()), Num(math.NaN())
		}
		run.Collectives = append(run.Collectives, c)
	}
	slices.SortFunc(run.Collectives, func(a, b Collective) int { return cmp.Compare(a.ID, b.ID) })
	run.Totals.Collectives = len(run.Collectives)
	run.Summary = Summarize(run.Collectives)
	return nil
}

// markCut sets the CutFlows of the collectives the partial trace's
// fabricsim.cut lists, checking that each (or each compute phase) has the
// rows it says finished: a cut collective read as whole is the error this
// exists to prevent.
func (run *Run) markCut(colls map[int64]*Collective, computeRows map[int64]int64) error {
	if run.cut == nil {
		return nil
	}
	for _, cc := range run.cut.Collectives {
		c, rows := colls[cc.ID], computeRows[cc.ID]
		if c != nil {
			rows = c.rows
		}
		if rows != cc.Finished {
			return fmt.Errorf("%s says collective %d has %d finished flows, the trace has %d rows of it", trace.KeyCut, cc.ID, cc.Finished, rows)
		}
		if c != nil {
			c.CutFlows = cc.Flows - cc.Finished
		}
	}
	run.Totals.NotStartedCollectives = run.cut.NotStarted
	return nil
}

// Summarize groups collectives with the same op, size, group type, ranks
// and algorithm, in order of their first (lowest) id.
func Summarize(cs []Collective) []Summary {
	idx := map[CollKey]int{}
	out := []Summary{} // [] in JSON, not null
	sums := []int64{}
	for _, c := range cs {
		i, ok := idx[c.CollKey]
		if !ok {
			i = len(out)
			idx[c.CollKey] = i
			out = append(out, Summary{CollKey: c.CollKey})
			sums = append(sums, 0)
		}
		s := &out[i]
		switch c.Status {
		case trace.StatusFailed:
			s.Failed++
			continue
		case StatusCut:
			s.Cut++
			continue
		}
		if s.Count == 0 || c.TimeNs < s.TimeMinNs {
			s.TimeMinNs = c.TimeNs
		}
		s.Count++
		sums[i] += c.TimeNs
		s.TimeMaxNs = max(s.TimeMaxNs, c.TimeNs)
	}
	for i := range out {
		s := &out[i]
		mean := math.NaN() // every one failed
		if s.Count > 0 {
			mean = float64(sums[i]) / float64(s.Count)
		}
		s.TimeMeanNs = Num(mean)
		s.AlgbwGBps = Num(Algbw(s.SizeBytes, mean))
		s.BusbwGBps = Num(float64(s.AlgbwGBps) * BusBwFactor(s.Op, int(s.NRanks)))
	}
	return out
}

func (run *Run) finishFlows(buckets map[bucketKey]*bucketAcc) {
	run.buckets = make([]*bucketAcc, 0, len(buckets))
	for _, b := range buckets {
		slices.Sort(b.fct)
		slices.Sort(b.slow)
		run.buckets = append(run.buckets, b)
	}
	slices.SortFunc(run.buckets, func(a, b *bucketAcc) int {
		if a.key.exp != b.key.exp {
			return a.key.exp - b.key.exp
		}
		return strings.Compare(a.key.conn, b.key.conn)
	})
	run.Flows = make([]FlowStats, 0, len(run.buckets))
	var all []int64
	for _, b := range run.buckets {
		fs := flowStats(b.fct, b.slow)
		fs.ConnType = b.key.conn
		fs.Bucket, fs.BucketLoBytes, fs.BucketHiBytes = bucketRange(b.key.exp)
		run.Flows = append(run.Flows, fs)
		all = append(all, b.fct...)
		run.allSlow = append(run.allSlow, b.slow...)
	}
	slices.Sort(all)
	slices.Sort(run.allSlow)
	run.AllFlows = flowStats(all, run.allSlow)
	run.AllFlows.Bucket, run.AllFlows.ConnType = "all", "all"
}

// flowStats takes sorted samples.
func flowStats(fct []int64, slow []float64) FlowStats {
	nan := Num(math.NaN())
	fs := FlowStats{Flows: len(fct), Slowdowns: len(slow),
		SlowdownP50: nan, SlowdownP95: nan, SlowdownP99: nan, SlowdownMax: nan}
	if len(fct) > 0 {
		fs.FctP50Ns = NearestRank(fct, 50)
		fs.FctP95Ns = NearestRank(fct, 95)
		fs.FctP99Ns = NearestRank(fct, 99)
		fs.FctMaxNs = fct[len(fct)-1]
	}
	if len(slow) > 0 {
		fs.SlowdownP50 = Num(NearestRank(slow, 50))
		fs.SlowdownP95 = Num(NearestRank(slow, 95))
		fs.SlowdownP99 = Num(NearestRank(slow, 99))
		fs.SlowdownMax = Num(slow[len(slow)-1])
	}
	return fs
}

// bucketRange labels bucket exp: "0B" for empty flows, else
// "[lo,hi)" with lo = 2^exp, hi = 2^(exp+1).
func bucketRange(exp int) (string, int64, int64) {
	if exp < 0 {
		return "0B", 0, 0
	}
	lo := int64(1) << exp
	hi := int64(math.MaxInt64)
	if exp < 62 {
		hi = lo << 1
	}
	return "[" + units.HumanSize(lo) + "," + units.HumanSize(hi) + ")", lo, hi
}

func appendFloat(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'g', -1, 64) }
