package collective

import (
	"math"
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

type pair struct{ src, dst int32 }

// trafficOf is Traffic summed per pair for a prepared collective.
func trafficOf(t *testing.T, s setup, co Coll) map[pair]float64 {
	t.Helper()
	sp, err := SpecOf(&co.Rec, s.topo.GPUType)
	if err != nil {
		t.Fatal(err)
	}
	out := map[pair]float64{}
	if err := Traffic(s.fab, sp, float64(co.Rec.Size), co.Ranks, func(a, b int32, x float64) { out[pair{a, b}] += x }); err != nil {
		t.Fatal(err)
	}
	return out
}

// The traffic matrix is the decomposition's bytes per pair, for every
// algorithm with a model: what the flows move is what a model pricing the
// fabric must load the links with.
func TestTrafficMatchesDecomposition(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "H100"})
	dp := Layout{TP: 1, DP: 32, PP: 1, EP: 1}
	for _, c := range []struct {
		name string
		opt  Options
		l    Layout
		st   Step
	}{
		{"ring allreduce", Options{Algo: "ring", Proto: "simple", RingChannels: 4}, dp, Step{Op: AllReduce, Size: 48 << 20, Group: DP}},
		// More channels than a server has GPUs: channels 0-3 and 8-11
		// share rings, which Traffic adds once with weight 2.
		{"ring allreduce 12 channels", Options{Algo: "ring", Proto: "simple", RingChannels: 12}, dp, Step{Op: AllReduce, Size: 48 << 20, Group: DP}},
		{"ring in one server", Options{Algo: "ring", Proto: "simple", RingChannels: 24}, Layout{TP: 8, DP: 4, PP: 1, EP: 1}, Step{Op: ReduceScatter, Size: 48 << 20, Group: TP}},
		{"ring pxn ll128", Options{Algo: "ring", Proto: "ll128", PXN: "on", RingChannels: 2}, dp, Step{Op: AllReduce, Size: 48 << 20, Group: DP}},
		{"ring allgather ll", Options{Algo: "ring", Proto: "ll", RingChannels: 2}, dp, Step{Op: AllGather, Size: 3 << 20, Group: DP}},
		{"ring broadcast", Options{Algo: "ring", Proto: "simple"}, dp, Step{Op: Broadcast, Size: 8 << 20, Group: DP}},
		{"tree", Options{Algo: "tree", Proto: "simple"}, dp, Step{Op: AllReduce, Size: 48 << 20, Group: DP}},
		{"nvls", Options{Algo: "nvls", Proto: "simple"}, Layout{TP: 8, DP: 4, PP: 1, EP: 1}, Step{Op: AllReduce, Size: 48 << 20, Group: TP}},
		{"nvls allgather", Options{Algo: "nvls", Proto: "simple"}, Layout{TP: 8, DP: 4, PP: 1, EP: 1}, Step{Op: AllGather, Size: 48 << 20, Group: TP}},
		{"nvls-tree", Options{Algo: "nvls-tree", Proto: "simple"}, dp, Step{Op: AllReduce, Size: 48 << 20, Group: DP}},
		{"direct", Options{Algo: "direct"}, Layout{TP: 1, DP: 32, PP: 1, EP: 32}, Step{Op: AllToAll, Size: 32 << 20, Group: EP}},
		{"pxn", Options{Algo: "pxn"}, Layout{TP: 1, DP: 32, PP: 1, EP: 32}, Step{Op: AllToAll, Size: 32 << 20, Group: EP}},
	} {
		t.Run(c.name, func(t *testing.T) {
			col, colls := s.run(t, c.opt, c.l, one(c.st))
			flows := map[pair]float64{}
			for _, f := range col.flows {
				if f.ConnType != stream.ConnDelay && f.Collective == colls[0].Rec.ID {
					flows[pair{f.Src, f.Dst}] += float64(f.Size)
				}
			}
			model := trafficOf(t, s, colls[0])
			if len(flows) == 0 || len(model) != len(flows) {
				t.Fatalf("%d pairs in the model, %d in the flows", len(model), len(flows))
			}
			for p, want := range flows {
				// Integer chunking rounds each flow by under a byte.
				if got := model[p]; math.Abs(got-want) > 1e-3*want+64 {
					t.Errorf("%d->%d: model %.0f B, flows %.0f B", p.src, p.dst, got, want)
				}
			}
		})
	}
}

// Independent of the decomposition: on a ring AllReduce every rank sends
// 2(n-1)/n of the size; on a direct AllToAll (n-1)/n.
func TestTrafficClosedForm(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "H100"})
	ranks := make([]int32, 32)
	for i := range ranks {
		ranks[i] = int32(i)
	}
	const S = 1 << 30
	for _, c := range []struct {
		sp   TrafficSpec
		want float64
	}{
		{TrafficSpec{Op: AllReduce, Algo: AlgoRing, Proto: Simple, Channels: 16}, 2 * 31.0 / 32 * S},
		{TrafficSpec{Op: AllGather, Algo: AlgoRing, Proto: Simple, Channels: 3}, 31.0 / 32 * S},
		{TrafficSpec{Op: AllToAll, Algo: AlgoDirect}, 31.0 / 32 * S},
	} {
		sent := map[int32]float64{}
		if err := Traffic(s.fab, c.sp, S, ranks, func(a, _ int32, x float64) { sent[a] += x }); err != nil {
			t.Fatal(err)
		}
		for _, r := range ranks {
			if math.Abs(sent[r]-c.want) > 1e-9*c.want {
				t.Errorf("%s %s: rank %d sends %.0f, want %.0f", c.sp.Algo, c.sp.Op, r, sent[r], c.want)
			}
		}
	}
}

// A PXN AllToAll's link loads relay each share through the rank the flows
// use (allToAllPXN): the group's rank in the sender's server at the
// receiver's index among the group's ranks in its server. On 12 ranks
// placed from GPU 4 of two 8-GPU servers (server 0 holds 4-7, server 1
// 8-15), 4's share for 10 (index 2) goes through 6, not GPU 2 (outside
// the group: the GPU of server 0 on rail 2), and 9's for 6 (index 2)
// through 10, not 14; 4's for 13 (index 5, 5 mod 4 = 1) through 5.
func TestTrafficConnsPXNRelayInGroup(t *testing.T) {
	f := Fabric{GPUs: 16, GPUsPerServer: 8}
	ranks := []int32{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	via := map[[2]int32]int32{}
	from := map[int32][]int32{} // hand-offs by their relay
	err := TrafficConns(f, TrafficSpec{Op: AllToAll, Algo: AlgoPXN, Proto: Simple, Channels: 1}, 12, ranks, func(src, dst int32, bytes float64, conns int) {
		if f.server(src) == f.server(dst) {
			from[dst] = append(from[dst], src)
		} else if conns == 0 {
			via[[2]int32{src, dst}] = src // the relay's own flow carries it
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ src, dst, relay int32 }{{4, 10, 6}, {9, 6, 10}, {4, 13, 5}} {
		if !slices.Contains(from[c.relay], c.src) || via[[2]int32{c.relay, c.dst}] != c.relay {
			t.Errorf("%d to %d: want it relayed through %d (hand-offs to %d: %v)", c.src, c.dst, c.relay, c.relay, from[c.relay])
		}
	}
	for r := range from {
		if !slices.Contains(ranks, r) {
			t.Errorf("GPU %d, outside the group, relays %v", r, from[r])
		}
	}
}
