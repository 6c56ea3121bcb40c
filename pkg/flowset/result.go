package flowset

import (
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
