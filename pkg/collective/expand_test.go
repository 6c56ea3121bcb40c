package collective

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Expanding a COLL node gives the flows flow granularity writes for the
// same collective, field for field, ids and deps included (the collective
// id aside: flow granularity gives each group its own record).
func TestExpandMatchesFlowGranularity(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "H100"})
	dp := Layout{TP: 1, DP: 32, PP: 1, EP: 1}
	tp := Layout{TP: 8, DP: 4, PP: 1, EP: 1}
	ep := Layout{TP: 1, DP: 32, PP: 1, EP: 8}
	lat := Options{LaunchLatency: true, MaxChunks: 16}
	with := func(o Options, f func(*Options)) Options { f(&o); return o }
	for _, c := range []struct {
		name string
		opt  Options
		l    Layout
		st   Step
	}{
		{"ring allreduce, NCCL's choice", lat, dp, Step{Op: AllReduce, Size: 48 << 20, Group: DP}},
		{"ring, no latency, no cap", Options{Algo: "ring", Proto: "simple", RingChannels: 4}, dp, Step{Op: AllReduce, Size: 48 << 20, Group: DP}},
		{"tp groups of four servers", with(lat, func(o *Options) { o.Algo, o.Proto = "ring", "ll128" }), tp, Step{Op: AllGather, Size: 12 << 20, Group: TP}},
		{"dp groups across servers", with(lat, func(o *Options) { o.Algo, o.PXN = "ring", "on" }), tp, Step{Op: ReduceScatter, Size: 24 << 20, Group: DP}},
		{"tree ll", with(lat, func(o *Options) { o.Algo, o.Proto = "tree", "ll" }), dp, Step{Op: AllReduce, Size: 1 << 20, Group: DP}},
		{"nvls", with(lat, func(o *Options) { o.Algo = "nvls" }), tp, Step{Op: AllReduce, Size: 48 << 20, Group: TP}},
		{"nvls reducescatter", with(lat, func(o *Options) { o.Algo = "nvls" }), tp, Step{Op: ReduceScatter, Size: 48 << 20, Group: TP}},
		{"nvls-tree", with(lat, func(o *Options) { o.Algo = "nvls-tree" }), dp, Step{Op: AllReduce, Size: 48 << 20, Group: DP}},
		{"broadcast", with(lat, func(o *Options) { o.Algo = "ring" }), dp, Step{Op: Broadcast, Size: 8 << 20, Group: DP}},
		{"alltoall pxn", with(lat, func(o *Options) { o.Algo = "pxn" }), ep, Step{Op: AllToAll, Size: 4 << 20, Group: EP}},
		{"alltoall direct", with(lat, func(o *Options) { o.Algo = "direct" }), ep, Step{Op: AllToAll, Size: 4 << 20, Group: EP}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, _ := s.run(t, c.opt, c.l, one(c.st))
			var d *Decomposer
			got, colls := s.run(t, c.opt, c.l, one(c.st), func(x *Decomposer) { x.Collectives = true; d = x })
			rec := colls[0].Rec
			groups := groupsOf(t, d, rec.Group)
			var flows []stream.Flow
			gotGroups := map[int32]bool{}
			p, err := NewExpander(s.topo).Start(&rec, groups, func(o Origin, f *stream.Flow) error {
				gotGroups[o.Group] = true
				h := *f
				h.Deps = slices.Clone(f.Deps)
				flows = append(flows, h)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Rows come out of the channels in turn, as a backend would
			// pull them; ids still come out as at flow granularity.
			for more := true; more; {
				more = false
				for g := 0; g < p.Gens(); g++ {
					ok, err := p.Row(g)
					if err != nil {
						t.Fatal(err)
					}
					more = more || ok
				}
			}
			if rows := rec.Algorithm == "ring" && rec.Op != "broadcast" || rec.Algorithm == "nvls"; rows != (p.Gens() > 0) {
				t.Errorf("%s %s: %d channels made row by row", rec.Algorithm, rec.Op, p.Gens())
			}
			n := len(flows)
			slices.SortFunc(flows, func(a, b stream.Flow) int { return int(a.ID - b.ID) })
			if len(got.flows) != 1 || got.flows[0].ConnType != stream.ConnColl {
				t.Fatalf("collective granularity wrote %d flows, want one COLL", len(got.flows))
			}
			if int(n) != len(flows) || len(flows) != len(want.flows) || len(gotGroups) != len(groups) {
				t.Fatalf("expanded %d flows (%d returned) over %d groups; flow granularity has %d over %d", len(flows), n, len(gotGroups), len(want.flows), len(groups))
			}
			for i := range flows {
				w, g := want.flows[i], flows[i]
				w.Collective, g.Collective = 0, 0
				if len(w.Deps) == 0 {
					w.Deps = nil
				}
				if len(g.Deps) == 0 {
					g.Deps = nil
				}
				if !reflect.DeepEqual(w, g) {
					t.Fatalf("flow %d: expanded %+v, flow granularity %+v", i, g, w)
				}
			}
		})
	}
}

// groupsOf is a group's ranks followed by its siblings'.
func groupsOf(t *testing.T, d *Decomposer, id int64) [][]int32 {
	t.Helper()
	byID := map[int64]stream.Group{}
	for _, g := range d.Groups() {
		byID[g.ID] = g
	}
	g, ok := byID[id]
	if !ok {
		t.Fatalf("no group %d", id)
	}
	out := [][]int32{g.Ranks}
	for _, s := range g.Siblings {
		out = append(out, byID[s].Ranks)
	}
	return out
}

func TestExpandRefuses(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	x := NewExpander(s.topo)
	ranks := [][]int32{{0, 8}}
	for _, c := range []struct {
		rec  stream.Collective
		want string
	}{
		{stream.Collective{ID: 3, Op: "allreduce", Algorithm: "ring", Protocol: "simple", Size: 1 << 20}, "no cut record"},
		{stream.Collective{ID: 3, Op: "allreduce", Algorithm: "msccl", Protocol: "simple", Size: 1 << 20, Cut: &stream.Cut{}}, "MSCCL"},
		{stream.Collective{ID: 3, Op: "allsum", Algorithm: "ring", Protocol: "simple", Size: 1 << 20, Cut: &stream.Cut{}}, "allsum"},
	} {
		_, err := x.Start(&c.rec, ranks, func(Origin, *stream.Flow) error { return nil })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %q", c.rec, err, c.want)
		}
	}
}
