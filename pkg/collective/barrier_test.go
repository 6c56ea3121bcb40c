package collective

import (
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// Each size of a sweep starts after every rank has finished the previous
// one: its first transfers all wait on one join that waits on every rank's
// exit of the previous collective. A 0-byte size is a no-op: a join per rank
// and no transfer.
func TestSweepBarrier(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100"})
	w := workload.FromSweep(AllGather, TP, []int64{0, 1 << 20, 4 << 20})
	col, colls := s.run(t, Options{LaunchLatency: true}, Layout{TP: 8, DP: 2, PP: 1, EP: 1}, w)
	if len(colls) != 6 || !colls[0].Plan.NoOp || colls[2].Plan.NoOp {
		t.Fatalf("%d collectives, plans %+v", len(colls), colls[0].Plan)
	}
	byID := map[int64]stream.Flow{}
	var barriers []stream.Flow
	transfers := map[int64]int{}
	for _, f := range col.flows {
		byID[f.ID] = f
		if f.ConnType == stream.ConnDelay && f.Collective == -1 {
			barriers = append(barriers, f)
		}
		if f.ConnType != stream.ConnDelay {
			transfers[f.Collective]++
		}
	}
	if transfers[0]+transfers[1] != 0 || transfers[2] == 0 {
		t.Errorf("transfers per collective %v: the 0-byte ones have none", transfers)
	}
	if len(barriers) != 3 {
		t.Fatalf("%d barriers, want one per size", len(barriers))
	}
	// The barrier after size 2 (collectives 2, 3) waits for all 16 ranks'
	// exits; collective 4's launch delays all wait on it.
	b := barriers[1]
	ranks := map[int32]bool{}
	for _, d := range b.Deps {
		if f := byID[d]; f.Collective == 2 || f.Collective == 3 {
			ranks[f.Src] = true
		}
	}
	if len(ranks) != 16 {
		t.Errorf("barrier waits on ranks %v, want all 16", ranks)
	}
	for _, f := range col.flows {
		if f.Collective == 4 && f.ConnType == stream.ConnDelay && f.DelayPs > 0 && !slices.Equal(f.Deps, []int64{b.ID}) {
			t.Errorf("launch of collective 4 on rank %d waits on %v, want the barrier %d", f.Src, f.Deps, b.ID)
		}
	}
}
