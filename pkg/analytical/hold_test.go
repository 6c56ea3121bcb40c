package analytical

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// A drain held back while it moves later (schedule) pops where pushing it
// at once would have: on random traffic with random deps and many equal
// sizes (exact ties) through a 2:1 fat-tree, the trace rows, their order
// and the events counted are those of a run pushing every drain.
func TestHeldDrainsSameTrace(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, Oversub: 2, GPUsPerServer: 1})
	g := int32(tp.GPUs)
	rng := rand.New(rand.NewPCG(5, 7))
	flows := randomDAG(rng, g, 600, func() int64 { return MiB * (1 + rng.Int64N(4)) }) // few sizes: drains tie
	in := mustRead(t, tp, flows)
	run := func(hold bool) ([]trace.Row, Result, uint64) {
		holdDrains = hold
		defer func() { holdDrains = true }()
		var rows []trace.Row
		var holds uint64
		res, err := Run(in, Options{Model: Fluid, verify: func(f *fluid) { holds = f.holds }}, func(r *trace.Row) error {
			rows = append(rows, *r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return rows, res, holds
	}
	held, resHeld, holds := run(true)
	pushed, resPushed, _ := run(false)
	if holds < 100 {
		t.Fatalf("only %d drains held: the case does not test holding", holds)
	}
	if !reflect.DeepEqual(held, pushed) {
		t.Errorf("holding drains changed the trace (%d drains held)", holds)
	}
	if resHeld.Events != resPushed.Events || resHeld.End != resPushed.End {
		t.Errorf("events %d, end %v held; %d, %v pushed", resHeld.Events, resHeld.End, resPushed.Events, resPushed.End)
	}
}

// randomDAG is n transfers between random distinct GPUs of g, of size(),
// each after up to two random earlier ones.
func randomDAG(rng *rand.Rand, g int32, n int64, size func() int64) []stream.Flow {
	var flows []stream.Flow
	for id := int64(0); id < n; id++ {
		sz := size()
		src, dst := rng.Int32N(g), rng.Int32N(g-1)
		if dst >= src {
			dst++
		}
		f := flow(id, src, dst, sz)
		for k := rng.IntN(3); k > 0 && id > 0; k-- {
			f.Deps = append(f.Deps, rng.Int64N(id))
		}
		flows = append(flows, f)
	}
	return flows
}
