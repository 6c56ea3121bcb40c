package collective

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/ncclpath"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// With or without ncclpath in the pipeline, a cluster gets the same NICs
// and plans: a dual-homed NIC (hpn-single-plane's two 200 Gbps ports) is
// one 400 Gbps adapter to both models.
func TestModelFromTopologyMatchesPaths(t *testing.T) {
	for _, fam := range []string{topo.SpectrumX, topo.HPNSinglePlane} {
		tp, _, err := topo.Generate(topo.Params{Family: fam, GPUs: 32, GPUType: "H100"})
		if err != nil {
			t.Fatal(err)
		}
		fromTopo, err := nccl.ModelFromTopology(tp)
		if err != nil {
			t.Fatal(err)
		}
		sys, err := ncclpath.Template("dgx-h100")
		if err != nil {
			t.Fatal(err)
		}
		res, err := ncclpath.Compute(sys, ncclpath.Options{})
		if err != nil {
			t.Fatal(err)
		}
		fromPaths, err := nccl.ModelFromPaths(res.StreamPaths(nil), tp)
		if err != nil {
			t.Fatal(err)
		}
		if fromTopo.NICs != 8 || fromTopo.NICGBps != 50 || fromPaths.NICs != fromTopo.NICs || fromPaths.NICGBps != fromTopo.NICGBps {
			t.Errorf("%s: topology gives %d NICs x %g GB/s, paths %d x %g, want 8 x 50", fam,
				fromTopo.NICs, fromTopo.NICGBps, fromPaths.NICs, fromPaths.NICGBps)
		}
		f := FabricOf(tp)
		all := make([]int32, 32)
		for i := range all {
			all[i] = int32(i)
		}
		for _, op := range []Op{AllReduce, AllGather, AllToAll} {
			var plans [2]Plan
			for i, m := range []ServerModel{fromTopo, fromPaths} {
				pl, err := NewPlanner(m, f, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if plans[i], err = pl.Plan(op, 64<<20, DP, all); err != nil {
					t.Fatal(err)
				}
			}
			if plans[0] != plans[1] {
				t.Errorf("%s %s: topology plans %+v, paths %+v", fam, op, plans[0], plans[1])
			}
		}
	}
}

// An NVLS-Tree loop's GPU work is a step cost on its own: under preset
// none (no other cost) nvls-tree-op and nvls-tree-bw still reach the
// plan's steps (they were dropped with the costs: 2 x 8 H100 64 MiB took
// 289.168 us at flow granularity with or without nvls-tree-bw=1).
func TestNVLSTreeWorkAloneIsACost(t *testing.T) {
	for _, c := range []struct {
		key            string
		serial, treeFs int64
	}{{"nvls-tree-op=50", 50e6, 0}, {"nvls-tree-bw=1", 0, 1e6}} {
		tr, err := NewTransport("H100", "", []string{"preset=none", c.key})
		if err != nil {
			t.Fatal(err)
		}
		s := Options{LaunchLatency: true, Transport: &tr}.stepCosts(Plan{Algo: AlgoNVLSTree, Proto: Simple})
		if s.serial != c.serial || s.treeFs != c.treeFs {
			t.Errorf("%s: serial %d ps, treeFs %d fs, want %d, %d", c.key, s.serial, s.treeFs, c.serial, c.treeFs)
		}
	}
}
