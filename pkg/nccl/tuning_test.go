package nccl

import (
	"math"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/topo"
)

// NCCL's own worked numbers for the search (NCCL_FACTS section 3.2).
func TestSearchWorkedExamples(t *testing.T) {
	for _, c := range []struct {
		gpu string
		ch  int
		bw  float64
	}{{"A100", 12, 20}, {"H100", 12, 30}} {
		g := search(topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: c.gpu}), 1, false)
		if g.NChannels != c.ch || g.BwIntra != c.bw {
			t.Errorf("%s: %d channels x %g GB/s, want %d x %g", c.gpu, g.NChannels, g.BwIntra, c.ch, c.bw)
		}
	}
	// Two servers of 8 H100s, each GPU with a 400G NIC behind its PCIe
	// switch (path 48 GB/s, as NCCL's PCIe Gen5 x16 is): NCCL 2.28 logs
	// "Pattern 4, crossNic 2, nChannels 8, bw 48.000000/48.000000, type
	// NVL/PIX" on such a system (NV18, 8 x 400G RoCE rails, 2 x 8 ranks).
	// A channel crosses NVLink 7 times over 8 GPUs, so 8 channels at 48
	// load a GPU's NVLink (370.8 GB/s) with 336; counting 8 crossings
	// allowed only 7 and the search settled on 8 at 45.
	m := topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100", NICBW: 400e9})
	if g := search(m, 2, false); g.NChannels != 8 || g.BwIntra != 48 {
		t.Errorf("2 x 8 H100, 400G NICs: %d channels x %g GB/s, want 8 x 48", g.NChannels, g.BwIntra)
	}
	// 2 x 8 A100s, each GPU and its NIC behind a PCIe Gen4 switch (every
	// link x16, 24 GB/s; NCCL_FACTS 2.2). NCCL's search (2.27.7 search.cc
	// followPath) takes a channel's bw off each link of the path NET →
	// NIC → switch → GPU and back, so a NIC carries floor(24 / s)
	// channels each way whatever its port. By hand, on the SM80
	// inter-server ladder from maxBw 24: at 24, NVLink 240 / 24 = 10
	// crossings serve 11 channels (x 8/7), the NICs 8 x 1: 8 x 24 = 192;
	// 20, 18 and 15 give 8 (NIC-bound), 12 gives 16 x 12 = 192, not more;
	// 10 / 24 < 0.49 stops. 24 < 25: no duplication. Counting the port
	// alone gave 16 x 15 at 275G, 14 x 18 at 300G and 11 x 24 at 400 and
	// 800G (32, 28, 22 and 22 channels at run time against 200G's 16).
	// The port is set as NCCL reads it (the NIC's rate): topogen caps an
	// A100's NIC link at what its PCIe carries (28.3 GB/s), which alone
	// would give these floors at 24 and leave the search untested.
	for _, nic := range []float64{200e9, 275e9, 300e9, 400e9, 800e9} {
		m := topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100", NICBW: nic})
		m.NICGBps = nic / 8e9
		if g := search(m, 2, false); g.NChannels != 8 || g.BwIntra != 24 {
			t.Errorf("2 x 8 A100, %gG NICs: %d channels x %g GB/s, want 8 x 24", nic/1e9, g.NChannels, g.BwIntra)
		}
	}
	// B200 (PCIe Gen5 x16, 48 GB/s) with 800G NICs: one channel of 48 a
	// NIC, 8 x 48 as at 400G, not 16 x 48 (two a 100 GB/s port).
	m = topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "B200", NICBW: 800e9})
	if g := search(m, 2, false); g.NChannels != 8 || g.BwIntra != 48 {
		t.Errorf("2 x 8 B200, 800G NICs: %d channels x %g GB/s, want 8 x 48", g.NChannels, g.BwIntra)
	}
}

// TreeSimpleChunk follows NCCL 2.17.1's enqueue.cc by hand: 16 ranks on 2
// servers have depth 8 - 1 + 1 = 8; on 8 channels from a 512 KiB step,
//   - 16 MiB: 16Mi/(8 x 512Ki) = 4 < 64 -> 256 KiB (8) -> 128 KiB (16,
//     not above 131072: stop); 16 < 32 -> 64 KiB (32, stop); 32 >= 8.
//   - 32 MiB: -> 128 KiB (32 a channel); 32 >= 32 and >= 8: 128 KiB.
//   - 256 MiB: 256Mi/(8 x 512Ki) = 64 >= 64: 512 KiB.
//   - 2 MiB: -> 128 KiB (2) -> 64 KiB (4 < 32, stop at 64 KiB) -> 4 < 8:
//     32 KiB (8, stop).
//   - 8 B: 32 KiB, the floor.
func TestTreeSimpleChunk(t *testing.T) {
	for _, c := range []struct {
		size, want int64
	}{{16 << 20, 64 << 10}, {32 << 20, 128 << 10}, {256 << 20, 512 << 10}, {2 << 20, 32 << 10}, {8, 32 << 10}} {
		if got := TreeSimpleChunk(512<<10, c.size, 8, 16, 2); got != c.want {
			t.Errorf("%d B on 8 channels, 2 x 8 ranks: chunk %d, want %d", c.size, got, c.want)
		}
	}
	// One server of 8: depth 7; 64 MiB on 16 channels is 8 chunks of 512
	// KiB, < 56 -> 256 KiB (16) -> 128 KiB (32, stop); 32 >= 28: 128 KiB.
	if got := TreeSimpleChunk(512<<10, 64<<20, 16, 8, 1); got != 128<<10 {
		t.Errorf("64 MiB on 16 channels, 1 x 8 ranks: chunk %d, want %d", got, 128<<10)
	}
}

// RaiseTreeIntra climbs NCCL's inter-server speed ladder from the ring's
// solution while the tree's intra-server bandwidth is below twice the
// inter-server one and the GPUs' NVLink still carries the channels.
func TestRaiseTreeIntra(t *testing.T) {
	// 2 x 8 A100s with a 50 Gb/s NIC each (AWS p4de's 400 Gb/s a server):
	// the ring's graph is 8 channels at 6 GB/s (a 6.25 GB/s NIC each), and
	// the tree's intra bandwidth climbs the ladder 6 -> 7 -> 9 -> 10 -> 12
	// (= 2 x 6): 8 channels at 12 GB/s cross a GPU's NVLink (240 GB/s)
	// well within it. Its model bandwidth doubles.
	m := topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100", NICBW: 50e9})
	tu := NewTuner(m, 16, 2)
	ring := tu.Ring
	if ring.NChannels != 8 || ring.BwIntra != 6 || ring.BwInter != 6 {
		t.Fatalf("ring graph %d x %g/%g GB/s, want 8 x 6/6", ring.NChannels, ring.BwIntra, ring.BwInter)
	}
	treeBefore := tu.BusBw(AllReduce, AlgoTree, Simple)
	tu.RaiseTreeIntra()
	g := tu.TreeGraph
	if g.NChannels != ring.NChannels || g.BwInter != ring.BwInter || g.BwIntra != 2*ring.BwInter {
		t.Fatalf("tree graph %d x %g/%g GB/s from the ring's %d x %g/%g, want the intra bandwidth doubled", g.NChannels, g.BwIntra, g.BwInter, ring.NChannels, ring.BwIntra, ring.BwInter)
	}
	if after := tu.BusBw(AllReduce, AlgoTree, Simple); after < 1.99*treeBefore || after > 2.01*treeBefore {
		t.Errorf("tree bus bandwidth %.1f -> %.1f GB/s, want doubled", treeBefore, after)
	}
	if tu.Ring != ring {
		t.Errorf("the ring's graph moved: %+v, was %+v", tu.Ring, ring)
	}
	// One server, or 4: no effect (NCCL's model uses bwInter above 2
	// servers, and a single server's trees keep the ring's graph here).
	for _, n := range []int{1, 4} {
		tu := NewTuner(topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 8 * n, GPUType: "A100", NICBW: 50e9}), 8*n, n)
		tu.RaiseTreeIntra()
		if tu.TreeGraph.NChannels != 0 {
			t.Errorf("%d servers: a tree graph %+v, want none", n, tu.TreeGraph)
		}
	}
}

// MaxChannels caps the runtime channels (NCCL_MAX_NCHANNELS) and small
// sizes still run on fewer: a tree Simple AllReduce's threshold is 64
// bytes a thread on 512 threads, 32 KiB a channel, so under a cap of 8
// 256 KiB runs on 8, 128 KiB on 4, 32 KiB (and below) on 1; 1 GiB on 8.
func TestMaxChannels(t *testing.T) {
	m := topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100", NICBW: 50e9})
	tu := NewTuner(m, 16, 2)
	if c := tu.RuntimeChannels(AlgoTree); c != 16 {
		t.Fatalf("uncapped: %d runtime channels, want 16 (8 searched, doubled)", c)
	}
	tu.MaxChannels = 8
	for _, c := range []struct {
		size int64
		want int
	}{{1 << 30, 8}, {256 << 10, 8}, {128 << 10, 4}, {32 << 10, 1}, {8, 1}} {
		if got := tu.Channels(AllReduce, AlgoTree, Simple, c.size); got != c.want {
			t.Errorf("%d B under a cap of 8: %d channels, want %d", c.size, got, c.want)
		}
	}
}

// NCCL corrects a tree AllReduce's bandwidth by size only below 512 MiB
// (tuning.cc: log2i(nBytes >> 6) < 23): at 256 MiB a Simple tree's bytes
// go at 0.9 of its bandwidth, from 512 MiB at all of it; a ring is never
// corrected. On 16 A100 servers of 100G NICs NCCL's model therefore takes
// the Simple tree at 512 MiB.
func TestTreeCorrectionBelow512MiB(t *testing.T) {
	tu := NewTuner(topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 128, GPUType: "A100", NICBW: 100e9}), 128, 16)
	bytesUs := func(a Algo, p Proto, n int64) float64 {
		return tu.Time(AllReduce, a, p, n) - tu.LatencyAt(AllReduce, a, p, n).Total
	}
	bw := tu.AlgBw(AllReduce, AlgoTree, Simple)
	for _, c := range []struct {
		n      int64
		factor float64
	}{{256 << 20, 0.9}, {512<<20 - 64, 0.9}, {512 << 20, 1}, {8 << 30, 1}} {
		if got, want := bytesUs(AlgoTree, Simple, c.n), float64(c.n)/(1000*bw*c.factor); math.Abs(got-want) > 1e-9*want {
			t.Errorf("tree Simple %d B: bytes take %.4f us, want %.4f (x%.1f of %.3f GB/s)", c.n, got, want, c.factor, bw)
		}
	}
	if got, want := bytesUs(AlgoRing, Simple, 8<<30), float64(8<<30)/(1000*tu.AlgBw(AllReduce, AlgoRing, Simple)); math.Abs(got-want) > 1e-9*want {
		t.Errorf("ring Simple 8 GiB: %.4f us, want %.4f", got, want)
	}
	// With the 0.9 kept at 512 MiB the LL128 ring won there.
	if a, p, _, err := tu.Select(AllReduce, 512<<20); err != nil || a != AlgoTree || p != Simple {
		t.Errorf("512 MiB: NCCL's model takes %v %v (%v), want tree simple", a, p, err)
	}
}

// TestTreeLatLegacy: under TreeLatLegacy NCCL's choice weighs a 2 x 8
// tree Simple AllReduce's latency as NCCL 2.22 and earlier do, by hand
// 2 x (7 NVLink hops + 1 network hop) x 28 us = 448 us, where the tuner's
// NCCL 2.23-2.27 table gives 8.4 + 2 x (7 x 4 + 14) = 92.4 us: 355.6 us
// more at every size, on the tree Simple only, and Time (what the DAG
// carries) unchanged.
func TestTreeLatLegacy(t *testing.T) {
	tu := NewTuner(topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100", NICBW: 200e9}), 16, 2)
	type key struct {
		a Algo
		p Proto
	}
	cases := []key{{AlgoTree, Simple}, {AlgoTree, LL128}, {AlgoTree, LL}, {AlgoRing, Simple}, {AlgoRing, LL128}}
	before := map[key]float64{}
	for _, c := range cases {
		before[c] = tu.SelectionTime(AllReduce, c.a, c.p, 512<<20)
	}
	if got := tu.LatencyTerms(AllReduce, AlgoTree, Simple).Total; math.Abs(got-92.4) > 1e-9 {
		t.Fatalf("tree Simple latency %.4f us, want 92.4", got)
	}
	tu.TreeLatLegacy = true
	for _, c := range cases {
		want := before[c]
		if c == (key{AlgoTree, Simple}) {
			want += 448 - 92.4
		}
		if got := tu.SelectionTime(AllReduce, c.a, c.p, 512<<20); math.Abs(got-want) > 1e-6 {
			t.Errorf("%v %v at 512 MiB: selection time %.4f us, want %.4f", c.a, c.p, got, want)
		}
	}
	if got, want := tu.Time(AllReduce, AlgoTree, Simple, 512<<20), before[key{AlgoTree, Simple}]; math.Abs(got-want) > 1e-9 {
		t.Errorf("tree Simple Time %.4f us moved (%.4f): only the choice weighs the legacy latency", got, want)
	}
}
