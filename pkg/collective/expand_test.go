package collective

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
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
	ib := DefaultTransport()
	if err := ib.Set("preset=h100-ib"); err != nil {
		t.Fatal(err)
	}
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
		{"ring simple pxn, h100-ib transport (queued first loop)", with(lat, func(o *Options) { o.Algo, o.Proto, o.PXN, o.Transport = "ring", "simple", "on", &ib }), dp, Step{Op: AllGather, Size: 48 << 20, Group: DP}},
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
			if c.opt.Transport != nil {
				// A Simple ring's first loop under the transport: a latency
				// node per connection and later step (ringConns.send), 31
				// steps of 32 connections a channel.
				delays := 0
				for _, f := range want.flows {
					if f.ConnType == stream.ConnDelay && f.DelayPs > 0 {
						delays++
					}
				}
				if delays < 31*32 {
					t.Fatalf("%d delay nodes; want a first-loop latency node per connection and step", delays)
				}
			}
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

// firstFlows records the id of each collective's first flow.
type firstFlows struct {
	first map[int64]int64
	n     int64
}

func (c *firstFlows) Flow(f *stream.Flow) error {
	if _, ok := c.first[f.Collective]; !ok {
		c.first[f.Collective] = f.ID
	}
	c.n++
	return nil
}

// At collective granularity each collective's cut names the id flow
// granularity gives its first flow (the representative's group's), which
// expanded flows count their ids from: compute phases, barriers, PP
// transfers, latency nodes and the other stages' and groups' flows all
// taken into account, with or without launch latency.
func TestFirstFlowIsFlowGranularitys(t *testing.T) {
	file := func(path string) *Workload {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w, err := workload.Read(f, path)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// SimAI's MoE example cut to its first 16 lines, on 2 stages of 16
	// GPUs (tp 2, ep 4), two microbatches.
	simai, err := os.ReadFile("../../examples/workloads/simai_workload_analytical.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(simai), "\n", 19)[2:18]
	moe, err := workload.Read(strings.NewReader("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 4 pp: 2 vpp: 1 ga: 2 all_gpus: 32 pp_comm 1048576\n16\n"+strings.Join(lines, "\n")), "moe")
	if err != nil {
		t.Fatal(err)
	}
	sweep := &Workload{Steps: []Step{{Op: AllToAll, Size: 4 << 20, Group: EP}, {Barrier: true}, {Op: AllReduce, Size: 16 << 20, Group: DP},
		{Barrier: true}, {Op: AllGather, Size: 1 << 20, Group: TP}, {Op: AllToAll, Size: 4 << 20, Group: EP}}}
	lat := Options{LaunchLatency: true, MaxChunks: 16}
	with := func(o Options, f func(*Options)) Options { f(&o); return o }
	ib := DefaultTransport()
	if err := ib.Set("preset=h100-ib"); err != nil {
		t.Fatal(err)
	}
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "H100"})
	for _, c := range []struct {
		name string
		opt  Options
		l    Layout
		w    *Workload
	}{
		{"moe, 2 stages", lat, Layout{TP: 2, DP: 8, PP: 2, EP: 4}, moe},
		{"moe, no latency", Options{MaxChunks: 16}, Layout{TP: 2, DP: 8, PP: 2, EP: 4}, moe},
		{"pipeline pp4 ga8", lat, Layout{TP: 1, DP: 8, PP: 4, EP: 1}, file("../../examples/workloads/pipeline_pp4_ga8.txt")},
		{"gpt-13b", lat, Layout{TP: 8, DP: 4, PP: 1, EP: 1}, file("../../examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt")},
		{"barriers", lat, Layout{TP: 8, DP: 4, PP: 1, EP: 2}, sweep},
		{"micro", lat, Layout{TP: 8, DP: 4, PP: 1, EP: 2}, file("../../examples/workloads/micro_allreduce.txt")},
		{"tree", with(lat, func(o *Options) { o.Algo = "tree" }), Layout{TP: 8, DP: 4, PP: 1, EP: 1}, &Workload{Steps: []Step{
			{Op: AllReduce, Size: 1 << 20, Group: TP}, {Op: AllReduce, Size: 16 << 20, Group: DP}, {Op: AllReduce, Size: 1 << 20, Group: TP}}}},
		{"nvls", with(lat, func(o *Options) { o.Algo = "nvls" }), Layout{TP: 8, DP: 4, PP: 1, EP: 1}, &Workload{Steps: []Step{
			{Op: AllReduce, Size: 16 << 20, Group: TP}, {Op: ReduceScatter, Size: 16 << 20, Group: TP}, {Op: AllReduce, Size: 16 << 20, Group: TP}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prep := func(coll bool) (*Decomposer, []Coll) {
				pl, err := NewPlanner(s.m, s.fab, c.opt)
				if err != nil {
					t.Fatal(err)
				}
				d, err := NewDecomposer(s.fab, c.l, pl)
				if err != nil {
					t.Fatal(err)
				}
				d.Collectives = coll
				colls, err := d.Prepare(c.w)
				if err != nil {
					t.Fatal(err)
				}
				return d, colls
			}
			d, flow := prep(false)
			ff := &firstFlows{first: map[int64]int64{}}
			if err := d.Emit(c.w, flow, NewEmitter(ff)); err != nil {
				t.Fatal(err)
			}
			type at struct {
				step  int
				group int64
			}
			want := map[at]int64{}
			for _, co := range flow {
				if first, ok := ff.first[co.Rec.ID]; ok && !co.Compute {
					want[at{co.Step, co.Rec.Group}] = first
				}
			}
			_, coll := prep(true)
			checked := 0
			for _, co := range coll {
				if co.Compute || co.Plan.NoOp {
					continue
				}
				w, ok := want[at{co.Step, co.Rec.Group}]
				if co.Rec.Cut == nil || co.Rec.Cut.FirstFlow == nil || !ok || *co.Rec.Cut.FirstFlow != w {
					t.Fatalf("step %d (%s %s on group %d): cut %+v, first flow at flow granularity %d (%v)", co.Step, co.Rec.Label, co.Rec.Op, co.Rec.Group, co.Rec.Cut, w, ok)
				}
				checked++
			}
			if checked < 3 {
				t.Fatalf("%d collectives checked", checked)
			}
			t.Logf("%d collectives, %d flows at flow granularity", checked, ff.n)
		})
	}
}
