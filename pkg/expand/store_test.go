package expand_test

import (
	"bytes"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/expand"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

func readSet(t *testing.T, data []byte) *flowset.Set {
	t.Helper()
	r, err := stream.NewReader(bytes.NewReader(data), "test")
	if err != nil {
		t.Fatal(err)
	}
	in, err := flowset.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// drain runs COLL node i's expansion to its end with no backend: every
// ready flow starts, then completes, in the order it became ready. It
// returns the transfers run and their bytes. A slot freed by a completed
// flow may hold a later one, so "ready twice" is checked among live flows.
func drain(t *testing.T, x *expand.Store, i int32) (n, bytes int64) {
	t.Helper()
	ready, err := x.Expand(i)
	if err != nil {
		t.Fatal(err)
	}
	queue := append([]int32(nil), ready...)
	live := map[int32]bool{}
	ended := int32(-1)
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		if live[j] {
			t.Fatalf("flow %d made ready twice", j)
		}
		live[j] = true
		more, err := x.Started(j)
		if err != nil {
			t.Fatal(err)
		}
		queue = append(queue, more...)
		if f := x.Flow(j); f.Kind == flowset.Transfer {
			n++
			bytes += f.Size
		}
		var done int32
		queue, done = x.Complete(j, queue)
		delete(live, j)
		if done >= 0 {
			if done != i || ended >= 0 {
				t.Fatalf("COLL node %d ended (again: %v) while running %d", done, ended >= 0, i)
			}
			ended = done
		}
	}
	if ended != i {
		t.Fatalf("COLL node %d: its flows ran out without ending it", i)
	}
	return n, bytes
}

// A COLL node's expansion, run by hand, moves what flow granularity's
// transfers move, counted from the flow-granularity stream (every group,
// symmetry off): the same transfers and bytes, each flow made ready once
// and the node ended once, by its last flow. Rows are made as the ones
// before them start, so a ring of many chunks never holds all its flows:
// the slots stay far below the flows made, and are reused by the next
// collective.
func TestStoreRunsFlowGranularitysFlows(t *testing.T) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "A100"})
	if err != nil {
		t.Fatal(err)
	}
	l := workload.Layout{TP: 8, DP: 4, PP: 1, EP: 1}
	for _, st := range []workload.Step{
		{Op: nccl.AllReduce, Size: 256 << 20, Group: workload.DP},
		{Op: nccl.AllGather, Size: 16 << 20, Group: workload.TP},
		{Op: nccl.AllToAll, Size: 4 << 20, Group: workload.DP},
	} {
		w := &workload.Workload{Steps: []workload.Step{st}}
		flowSt, _ := decompose(t, tp, l, w, false)
		collSt, _ := decompose(t, tp, l, w, true)
		var wantN, wantB int64
		fl := readSet(t, flowSt)
		for i := int32(0); i < int32(fl.DAG.Len()); i++ {
			if f := fl.Flow(i); f.Kind == flowset.Transfer {
				wantN++
				wantB += f.Size
			}
		}
		in := readSet(t, collSt)
		x := expand.New(in, 0, func(_, _ *flowset.Flow) expand.Early { return expand.AtCompletion })
		var colls []int32
		for i := int32(0); i < int32(in.DAG.Len()); i++ {
			if in.Flow(i).Kind == flowset.Coll {
				colls = append(colls, i)
			}
		}
		if len(colls) != 1 {
			t.Fatalf("%s %s: %d COLL nodes, want one", st.Op, st.Group, len(colls))
		}
		n, b := drain(t, x, colls[0])
		if n != wantN || b != wantB {
			t.Errorf("%s %s: expansion ran %d transfers of %d bytes, flow granularity has %d of %d", st.Op, st.Group, n, b, wantN, wantB)
		}
		if made, _ := x.Mirrored(); made != 0 {
			t.Errorf("%s %s: %d flows mirrored without symmetry", st.Op, st.Group, made)
		}
		if st.Op == nccl.AllReduce && int64(x.Slots())*4 > wantN {
			t.Errorf("AllReduce: %d slots for %d transfers: rows were not made as the ones before started", x.Slots(), wantN)
		}
		t.Logf("%s %s: %d transfers, %d bytes, %d slots", st.Op, st.Group, n, b, x.Slots())
		// Again on the same store: the slots freed are reused.
		slots := x.Slots()
		drain(t, x, colls[0])
		if x.Slots() != slots {
			t.Errorf("%s %s: %d slots after a second run, %d after the first", st.Op, st.Group, x.Slots(), slots)
		}
	}
}
