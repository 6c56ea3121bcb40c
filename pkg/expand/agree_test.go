package expand_test

import (
	"bytes"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/analytical"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// decompose writes w on tp at flow or collective granularity, as
// simccl-decompose does, and returns the stream and each collective
// record's step.
func decompose(t *testing.T, tp *topo.Topology, l workload.Layout, w *workload.Workload, coll bool) ([]byte, map[int64]int) {
	t.Helper()
	m, err := nccl.ModelFromTopology(tp)
	if err != nil {
		t.Fatal(err)
	}
	fab := collective.FabricOf(tp)
	pl, err := collective.NewPlanner(m, fab, collective.Options{LaunchLatency: true, MaxChunks: 16})
	if err != nil {
		t.Fatal(err)
	}
	d, err := collective.NewDecomposer(fab, l, pl)
	if err != nil {
		t.Fatal(err)
	}
	d.Collectives = coll
	colls, err := d.Prepare(w)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sw, err := stream.NewWriter(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Topology(tp); err != nil {
		t.Fatal(err)
	}
	for i := range d.Groups() {
		if err := sw.Group(&d.Groups()[i]); err != nil {
			t.Fatal(err)
		}
	}
	step := map[int64]int{}
	for i := range colls {
		if err := sw.Collective(&colls[i].Rec); err != nil {
			t.Fatal(err)
		}
		step[colls[i].Rec.ID] = colls[i].Step
	}
	if err := d.Emit(w, colls, collective.NewEmitter(sw)); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), step
}

// span is when a step's rows start and end: at flow granularity its
// groups' flows, at collective granularity its COLL node.
type span struct{ start, end int64 }

// spans runs a stream on the analytical model and returns each
// collective step's span.
func spans(t *testing.T, data []byte, step map[int64]int, opt analytical.Options) map[int]span {
	t.Helper()
	in := readSet(t, data)
	out := map[int]span{}
	if _, err := analytical.Run(in, opt, func(row *trace.Row) error {
		s, ok := step[row.CollectiveID]
		if !ok {
			return nil // a barrier's join
		}
		sp, seen := out[s]
		if !seen || row.StartNs < sp.start {
			sp.start = row.StartNs
		}
		sp.end = max(sp.end, row.EndNs)
		out[s] = sp
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// flowsim-analytical --expand runs a COLL node as exactly the flows flow
// granularity holds, ids included, so ECMP pins them to the same paths:
// on a 2:1 fat-tree, where EP AllToAlls and DP rings have uplinks to
// choose from, every collective starts and ends at the same ns as at flow
// granularity, under both models, with and without symmetric groups
// standing for their siblings. The barriers between the collectives keep
// every rank in step, as a COLL node does (README: a rank that finishes
// its part early starts its next operation early at flow granularity
// only). Expanded flows once took ids of their own (the COLL node's id
// << 32): under fluid the first AllToAll then ended 42 us (4.6%) late.
func TestExpandedRoutesAsFlowGranularity(t *testing.T) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.FatTree, K: 16, GPUs: 128, Oversub: 2})
	if err != nil {
		t.Fatal(err)
	}
	l := workload.Layout{TP: 8, DP: 16, PP: 1, EP: 16}
	w := &workload.Workload{Steps: []workload.Step{
		{Op: nccl.AllGather, Size: 8 << 20, Group: workload.TP}, {Barrier: true},
		{Op: nccl.AllToAll, Size: 16 << 20, Group: workload.EP}, {Barrier: true},
		{Op: nccl.AllReduce, Size: 64 << 20, Group: workload.DP}, {Barrier: true},
		{Op: nccl.AllToAll, Size: 32 << 20, Group: workload.EP},
	}}
	flowSt, flowStep := decompose(t, tp, l, w, false)
	collSt, collStep := decompose(t, tp, l, w, true)
	for _, c := range []struct {
		name string
		opt  analytical.Options
	}{
		{"fluid", analytical.Options{}},
		{"fluid, every group", analytical.Options{NoSymmetry: true}},
		{"busbw", analytical.Options{Model: analytical.Busbw}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := spans(t, flowSt, flowStep, c.opt)
			c.opt.Expand = true
			got := spans(t, collSt, collStep, c.opt)
			if len(want) != 4 || len(got) != 4 {
				t.Fatalf("%d collectives expanded, %d at flow granularity; want 4", len(got), len(want))
			}
			for s, ws := range want {
				if gs := got[s]; gs != ws {
					t.Errorf("step %d (%s %s): expanded %d..%d ns, flow granularity %d..%d ns", s, w.Steps[s].Op, w.Steps[s].Group, gs.start, gs.end, ws.start, ws.end)
				}
			}
		})
	}
}
