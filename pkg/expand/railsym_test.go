package expand_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/expand"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// railStore is a Store over a topology with one DP AllReduce.
func railStore(t *testing.T, p topo.Params) *expand.Store {
	t.Helper()
	tp, _, err := topo.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	w := &workload.Workload{Steps: []workload.Step{{Op: nccl.AllReduce, Size: 1 << 20, Group: workload.DP}}}
	st, _ := decompose(t, tp, workload.Layout{TP: 2, DP: tp.GPUs / 2, PP: 1, EP: 1}, w, true)
	return expand.New(readSet(t, st), 0, func(_, _ *flowset.Flow) expand.Early { return expand.AtCompletion })
}

// Rails as symmetry, by hand on 192 Spectrum-X GPUs (8 a server, rail i
// = GPU index i, 32 GPUs a segment): which groups run, and how many
// images of them the others are.
func TestApproxRailsPlan(t *testing.T) {
	x := railStore(t, topo.Params{Family: topo.SpectrumX, GPUs: 192, GPUType: "A100", NICsPerASW: 4})
	if why := expand.RailsAlike(x); why != "" {
		t.Fatalf("Spectrum-X's rails not alike: %s", why)
	}
	// on is rank k of a group on rail r of servers from, from+1, ...
	on := func(r int32, servers ...int32) []int32 {
		var g []int32
		for _, s := range servers {
			g = append(g, 8*s+r)
		}
		return g
	}
	every := func(first int32) []int32 { // every other GPU of servers 0-5
		var g []int32
		for k := first; k < 48; k += 2 {
			g = append(g, k)
		}
		return g
	}
	for _, c := range []struct {
		name   string
		groups [][]int32
		run    []int32 // nil: all run
		copies int32
	}{
		{"a DP ring per TP rank: rails 0,2,4,6 and 1,3,5,7", [][]int32{every(0), every(1)}, []int32{0}, 1},
		{"one group a rail (DP_EP)", [][]int32{on(0, 0, 2, 4), on(1, 0, 2, 4), on(2, 0, 2, 4), on(3, 0, 2, 4)}, []int32{0}, 3},
		{"two groups a rail, interleaved", [][]int32{on(0, 0, 2), on(5, 0, 2), on(0, 1, 3), on(5, 1, 3)}, []int32{0, 2}, 1},
		{"rails relabelled in another order", [][]int32{{0, 2, 8, 10}, {3, 1, 11, 9}}, []int32{0}, 1},
		{"the same rails, not one relabelling", [][]int32{{0, 2, 10, 8}, {1, 3, 9, 11}}, nil, 0},
		{"other servers", [][]int32{on(0, 0, 1), on(1, 0, 2)}, nil, 0},
		{"the servers in another order", [][]int32{on(0, 0, 1), on(1, 1, 0)}, nil, 0},
		{"groups sharing a rail: one component", [][]int32{on(0, 0, 1), on(0, 2, 3)}, nil, 0},
		{"components of other sizes", [][]int32{on(0, 0, 1), on(0, 2, 3), on(1, 0, 1)}, nil, 0},
		{"one group", [][]int32{every(0)}, nil, 0},
	} {
		run, copies := expand.RailPlan(x, c.groups)
		if !slices.Equal(run, c.run) || copies != c.copies {
			t.Errorf("%s: run %v (%d copies), want %v (%d)", c.name, run, copies, c.run, c.copies)
		}
	}
	for _, c := range []struct {
		p   topo.Params
		why string
	}{
		{topo.Params{Family: topo.FatTree, GPUs: 128, GPUType: "A100"}, "serves GPU indexes"},
		{topo.Params{Family: topo.DCNSingleToR, GPUs: 64, GPUType: "A100"}, "serves GPU indexes"},
		{topo.Params{Family: topo.HPNDualPlane, GPUs: 64, GPUType: "A100"}, "several NICs"},
	} {
		if why := expand.RailsAlike(railStore(t, c.p)); !strings.Contains(why, c.why) {
			t.Errorf("%s: rails alike %q, want %q", c.p.Family, why, c.why)
		}
	}
}
