package nccl

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/ncclpath"
)

// aws-ofi-nccl's p5 regions for AllReduce at 8 ranks a server, read off
// its polygons by hand (v1.16.3, src/tuner/nccl_ofi_regions.cpp): the
// Tree LL128 edge runs from 30 MiB at 16 ranks to 36 MiB at 32 and 112
// MiB at 64; Ring LL128 reaches 1 GiB + 15/47 GiB at 32 ranks (its lower
// edge from (1 GiB, 17) to (2 GiB, 64)) and 2 GiB at 64 (a vertex, which
// counts); Ring Simple starts at 1.5 GiB at 32 ranks and 2.5 GiB at 64;
// NVLS-Tree Simple holds 4 GiB at 128 ranks (its lower edge); one or two
// servers, other ranks per server and other operations are NCCL's.
func TestAWSP5Regions(t *testing.T) {
	m := ServerModel{CC: 90, GPUs: 8, NICs: 8, NICGBps: 50, NVLinkGBps: 370.8, NVSwitch: true,
		IntraType: ncclpath.PathNVL, InterType: ncclpath.PathPXB, GPUGPUGBps: 370.8, GPUNICGBps: 50, PXN: true, NVLS: true}
	const MiB, GiB = 1 << 20, 1 << 30
	for _, c := range []struct {
		nodes int
		size  int64
		algo  Algo
		proto Proto
		ok    bool
	}{
		{4, 32 * MiB, AlgoTree, LL128, true},
		{4, 64 * MiB, AlgoRing, LL128, true},
		{4, 1 * GiB, AlgoRing, LL128, true},
		{4, 2 * GiB, AlgoRing, Simple, true},
		{8, 64 * MiB, AlgoTree, LL128, true},
		{8, 128 * MiB, AlgoRing, LL128, true},
		{8, 2 * GiB, AlgoRing, LL128, true},
		{8, 4 * GiB, AlgoRing, Simple, true},
		{16, 256 * MiB, AlgoTree, LL128, true},
		{16, 1 * GiB, AlgoRing, LL128, true},
		{16, 4 * GiB, AlgoNVLSTree, Simple, true},
		{2, 64 * MiB, 0, 0, false},
	} {
		a, p, ok := NewTuner(m, 8*c.nodes, c.nodes).PluginChoice("aws-p5", AllReduce, c.size)
		if ok != c.ok || ok && (a != c.algo || p != c.proto) {
			t.Errorf("%d servers, %d B: %v %v %v, want %v %v %v", c.nodes, c.size, a, p, ok, c.algo, c.proto, c.ok)
		}
	}
	if _, _, ok := NewTuner(m, 32, 4).PluginChoice("aws-p5", AllGather, 64*MiB); ok {
		t.Error("AllGather at 8 ranks a server: the plugin has no region, NCCL's model chooses")
	}
	if _, _, ok := NewTuner(m, 32, 4).PluginChoice("nccl", AllReduce, 64*MiB); ok {
		t.Error("tuner nccl: no plugin choice")
	}
	if _, _, ok := NewTuner(m, 16, 4).PluginChoice("aws-p5", AllReduce, 64*MiB); ok {
		t.Error("4 ranks a server: the 8-a-server regions do not apply")
	}
}

// The network plugin's latency in NCCL's choice (tuning.cc: interLat +=
// latencyInter, twice for Simple): a ring AllGather on 8 servers has 7
// steps across them, so Simple pays 7 x 2 x 75 us more and LL128 7 x 75;
// a ring AllReduce 14 steps, x 1.4 (the ring plateau) for Simple; a tree
// 2 x log2(8). With p5's facts (aws-ofi-nccl's 75 us, AMD hosts, and
// the ring graph NCCL finds there, 8 channels at 48 GB/s) NCCL's model
// keeps the AllGather ring on LL128 to 8 MiB a rank on 16, 32 and 64
// ranks and takes Simple from 16 MiB a rank, the size where each p5 run's
// busbw dips before it climbs (NCCL 2.28.7, examples/reference/aws-p5-
// {2,4,8}x8h100-efa_allgather.csv): the dip is Simple's first size, at
// the same bytes a rank on every server count; without the plugin's
// latency the 64-rank ring leaves LL128 above 256 MiB.
func TestNetLatencySelection(t *testing.T) {
	m := ServerModel{CC: 90, GPUs: 8, NICs: 8, NICGBps: 50, NVLinkGBps: 370.8, NVSwitch: true,
		IntraType: ncclpath.PathNVL, InterType: ncclpath.PathPXB, GPUGPUGBps: 370.8, GPUNICGBps: 50, PXN: true, NVLS: true}
	tu := NewTuner(m, 64, 8)
	tu.NetLatencyUs = 75
	const GiB = 1 << 30
	for _, c := range []struct {
		op   Op
		a    Algo
		p    Proto
		want float64
	}{
		{AllGather, AlgoRing, Simple, 7 * 2 * 75},
		{AllGather, AlgoRing, LL128, 7 * 75},
		{AllReduce, AlgoRing, Simple, 14 * 2 * 75 * 1.4},
		{AllReduce, AlgoTree, LL128, 2 * 3 * 75},
	} {
		if d := tu.SelectionTime(c.op, c.a, c.p, GiB) - tu.Time(c.op, c.a, c.p, GiB); d < c.want-1e-6 || d > c.want+1e-6 {
			t.Errorf("%s %v %v: selection time %.1f us above the model's, want %.1f", c.op, c.a, c.p, d, c.want)
		}
	}
	m.AMDCPU = true
	for _, nodes := range []int{2, 4, 8} {
		tu = NewTuner(m, 8*nodes, nodes)
		tu.NetLatencyUs = 75
		perRank := int64(8 * nodes << 20)
		for size, want := range map[int64]Proto{8 * perRank: LL128, 16 * perRank: Simple} {
			if _, p, _, _ := tu.Select(AllGather, size); p != want {
				t.Errorf("p5 AllGather on %d ranks, %d B: %v, want %v", 8*nodes, size, p, want)
			}
		}
	}
	if _, p, _, _ := NewTuner(m, 64, 8).Select(AllGather, 512<<20); p != Simple {
		t.Errorf("without the plugin's latency, 512 MiB: %v, want simple", p)
	}
}
