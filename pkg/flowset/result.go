package flowset

import (
	"maps"
	"slices"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/des"
)

// Result is what every backend reports of a flow, in ps: when it was
// released and ended, its ideal FCT (alone on an idle fabric), and
// whether it delivered. The trace rows of all of them come from it
// through Rows, so the ps -> ns rules are one.
type Result struct {
	Start, End, Ideal des.Time
	Failed            bool // a failed link left it without a path (trace.StatusFailed)
}

// Rows writes a set's trace rows. It caches the collective looked up last
// (flows of one collective come together, so most rows skip the map
// lookups), so a run makes its own and uses it from one goroutine; the
// set itself is never written.
type Rows struct {
	in   *Set
	last collInfo
}

// Rows starts a row writer over the set.
func (in *Set) Rows() *Rows { return &Rows{in: in} }

// Row is flow i's trace row for its result: ids, ends, size (transfers
// only), connection and the collective's columns, its training-iteration
// position and NCCL model (flows/v2), its status. Times round to the
// nearest ns (des.Time.Ns), the ideal to a lower bound (des.BoundNs).
// Delay nodes and joins get ideal = fct, so their slowdown is 1.
func (w *Rows) Row(i int32, res Result) trace.Row {
	in := w.in
	f := in.Flow(i)
	startNs, endNs := res.Start.Ns(), res.End.Ns()
	r := trace.Row{FlowID: f.ID, CollectiveID: f.Coll, Src: f.Src, Dst: f.Dst, ConnType: in.ConnName(f),
		Channel: f.Channel, Chunk: f.Chunk, StartNs: startNs, EndNs: endNs, FctNs: endNs - startNs,
		IdealFctNs: des.BoundNs(res.Ideal, res.Start, res.End)}
	if f.Kind == Transfer || f.Kind == Coll {
		r.SizeBytes = f.Size
	}
	if f.Kind == Delay || f.Kind == Join {
		r.IdealFctNs = r.FctNs
	}
	c := &w.last
	if !c.cached || c.id != f.Coll {
		in.coll(f.Coll, c)
	}
	r.Op, r.Algorithm, r.CollSizeBytes, r.GroupType, r.NRanks = c.op, c.algo, c.size, c.groupType, c.nranks
	r.Layer, r.LayerName, r.Phase, r.Microbatch, r.Stage = c.layer, c.layerName, c.phase, c.microbatch, c.stage
	r.Protocol, r.PredictedNs, r.Status = c.proto, c.predictedNs, trace.StatusOK
	if res.Failed {
		r.Status = trace.StatusFailed
	}
	r.Job = in.jobName(f, c)
	return r
}

// Cut is what a run that stopped early left unfinished, for the partial
// trace's metadata (trace.Cut): the collectives it cut, a count of those
// it never started, and the jobs with unfinished flows. written(i) says
// whether flow i has a row. nil when every flow has one, or when the
// stream has neither collectives nor jobs.
func (in *Set) Cut(written func(int32) bool) *trace.Cut {
	type count struct{ finished, flows int64 }
	colls := map[int64]*count{}
	jobs := map[string]*count{}
	var last collInfo
	unfinished := false
	for i := int32(0); i < int32(in.Flows()); i++ {
		f, done := in.Flow(i), int64(0)
		if written(i) {
			done = 1
		} else {
			unfinished = true
		}
		if f.Coll >= 0 {
			c := colls[f.Coll]
			if c == nil {
				c = &count{}
				colls[f.Coll] = c
			}
			c.finished, c.flows = c.finished+done, c.flows+1
		}
		if len(in.Jobs) == 0 {
			continue
		}
		if !last.cached || last.id != f.Coll {
			in.coll(f.Coll, &last)
		}
		j := in.jobName(f, &last)
		c := jobs[j]
		if c == nil {
			c = &count{}
			jobs[j] = c
		}
		c.finished, c.flows = c.finished+done, c.flows+1
	}
	if !unfinished || len(colls) == 0 && len(jobs) == 0 {
		return nil // whole, or raw flows alone: nothing to say per group
	}
	cut := &trace.Cut{Collectives: []trace.CutCollective{}}
	for _, id := range slices.Sorted(maps.Keys(colls)) {
		switch c := colls[id]; {
		case c.finished == 0 && (in.Collectives[id] == nil || in.Collectives[id].Op != stream.OpCompute):
			cut.NotStarted++ // compute phases are no collectives to a report
		case c.finished == 0:
		case c.finished < c.flows:
			cut.Collectives = append(cut.Collectives, trace.CutCollective{ID: id, Finished: c.finished, Flows: c.flows})
		}
	}
	for _, j := range slices.Sorted(maps.Keys(jobs)) {
		if c := jobs[j]; j != "" && c.finished < c.flows {
			cut.Jobs = append(cut.Jobs, trace.CutJob{Job: j, Finished: c.finished, Flows: c.flows})
		}
	}
	return cut
}
