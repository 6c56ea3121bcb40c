package collective

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

// collect keeps the flows (copying deps, which the emitter reuses).
type collect struct{ flows []stream.Flow }

func (c *collect) Flow(f *stream.Flow) error {
	g := *f
	g.Deps = append([]int64(nil), f.Deps...)
	c.flows = append(c.flows, g)
	return nil
}

type setup struct {
	topo *topo.Topology
	fab  Fabric
	m    ServerModel
}

func newSetup(t testing.TB, p topo.Params) setup {
	t.Helper()
	tp, _, err := topo.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := nccl.ModelFromTopology(tp)
	if err != nil {
		t.Fatal(err)
	}
	return setup{tp, FabricOf(tp), m}
}

// run decomposes a workload, after the optional set-up steps on the
// decomposer, and checks the DAG is well formed.
func (s setup) run(t *testing.T, opt Options, l Layout, w *Workload, with ...func(*Decomposer)) (*collect, []Coll) {
	t.Helper()
	pl, err := NewPlanner(s.m, s.fab, opt)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecomposer(s.fab, l, pl)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range with {
		f(d)
	}
	colls, err := d.Prepare(w)
	if err != nil {
		t.Fatal(err)
	}
	c := &collect{}
	if err := d.Emit(w, colls, NewEmitter(c)); err != nil {
		t.Fatal(err)
	}
	checkDAG(t, c.flows)
	var comm []Coll // compute phases' pseudo-collectives left out
	for _, co := range colls {
		if !co.Compute {
			comm = append(comm, co)
		}
	}
	return c, comm
}

// one is a workload of a single step.
func one(st Step) *Workload { return &Workload{Steps: []Step{st}} }

// checkDAG: ids dense, every dep names an earlier flow (so the DAG is
// acyclic), transfers between distinct nodes (a COLL node stands for a
// whole collective on its rank).
func checkDAG(t *testing.T, flows []stream.Flow) {
	t.Helper()
	for i, f := range flows {
		if f.ID != int64(i) {
			t.Fatalf("flow %d has id %d", i, f.ID)
		}
		for _, d := range f.Deps {
			if d < 0 || d >= f.ID {
				t.Fatalf("flow %d depends on %d, not an earlier flow", f.ID, d)
			}
		}
		if f.ConnType != stream.ConnDelay && f.ConnType != stream.ConnColl && f.Src == f.Dst {
			t.Fatalf("flow %d sends to itself", f.ID)
		}
	}
}

func sentBy(flows []stream.Flow) map[int32]int64 {
	m := map[int32]int64{}
	for _, f := range flows {
		if f.ConnType != stream.ConnDelay {
			m[f.Src] += f.Size
		}
	}
	return m
}

// Bytes each rank sends equal the algorithm's factor times the size.
func TestRingFactors(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100"})
	const S = 64 << 20
	cases := []struct {
		op     Op
		group  string
		n      int
		factor float64
	}{
		{AllReduce, DP, 2, 2.0 * 1 / 2},
		{AllReduce, TP, 8, 2.0 * 7 / 8},
		{AllGather, TP, 8, 7.0 / 8},
		{ReduceScatter, TP, 8, 7.0 / 8},
		{AllToAll, TP, 8, 7.0 / 8},
		{AllReduce, DP, 16, 2.0 * 15 / 16},
	}
	for _, c := range cases {
		l := Layout{TP: 8, DP: 2, PP: 1, EP: 1}
		if c.n == 16 {
			l = Layout{TP: 1, DP: 16, PP: 1, EP: 1}
		}
		col, colls := s.run(t, Options{Algo: pickAlgo(c.op), Proto: "simple", PXN: "off", RingChannels: 4}, l, one(Step{Op: c.op, Size: S, Group: c.group}))
		want := int64(math.Round(c.factor * S))
		for r, b := range sentBy(col.flows) {
			if b != want {
				t.Errorf("%s on %d ranks: rank %d sent %d bytes, want %g x size = %d", c.op, c.n, r, b, c.factor, want)
			}
		}
		if len(sentBy(col.flows)) != 16 {
			t.Errorf("%s: %d ranks sent, want 16", c.op, len(sentBy(col.flows)))
		}
		if len(colls) != 16/c.n {
			t.Errorf("%s: %d collectives, want %d groups", c.op, len(colls), 16/c.n)
		}
	}
}

func pickAlgo(op Op) string {
	if op == AllToAll {
		return "direct"
	}
	return "ring"
}

// A ring AllReduce of 8 ranks on one channel: 2(n-1) = 14 flows per rank
// per chunk, and each flow waits for the one that brought its data.
func TestRingStructure(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: "A100"})
	l := Layout{TP: 8, DP: 1, PP: 1, EP: 1}
	// 8 ranks x 2 MiB chunks = 16 MiB per loop; 32 MiB = 2 chunks (loops).
	col, colls := s.run(t, Options{Algo: "ring", Proto: "simple", RingChannels: 1}, l, one(Step{Op: AllReduce, Size: 32 << 20, Group: TP}))
	if colls[0].Plan.Channels != 1 || colls[0].Plan.Chunk != 2<<20 {
		t.Fatalf("plan %+v", colls[0].Plan)
	}
	per := map[[2]int32]int{}
	for _, f := range col.flows {
		if f.ConnType == stream.ConnRing {
			per[[2]int32{f.Src, f.Chunk}]++
			if f.Size != 2<<20 {
				t.Fatalf("flow %d carries %d bytes, want a 2 MiB slice", f.ID, f.Size)
			}
			if f.ChunkCount != 2 {
				t.Fatalf("chunk_count %d", f.ChunkCount)
			}
		}
	}
	if len(per) != 16 {
		t.Fatalf("%d (rank, chunk) pairs", len(per))
	}
	for k, n := range per {
		if n != 14 {
			t.Errorf("rank %d chunk %d: %d flows, want 14", k[0], k[1], n)
		}
	}
	// Step s>0 of rank r depends on step s-1 of rank r-1 (its data) and,
	// from the second loop on, of rank r (its connection); in the first
	// loop the connection dependency would add the latency of a slow hop
	// up along its connection, so it is not there.
	byKey := map[[3]int32]int64{}
	step := map[int64]int32{}
	cnt := map[[2]int32]int32{}
	for _, f := range col.flows {
		if f.ConnType != stream.ConnRing {
			continue
		}
		k := [2]int32{f.Src, f.Chunk}
		step[f.ID] = cnt[k]
		byKey[[3]int32{f.Src, f.Chunk, cnt[k]}] = f.ID
		cnt[k]++
	}
	for _, f := range col.flows {
		if f.ConnType != stream.ConnRing || step[f.ID] == 0 {
			continue
		}
		prevData := byKey[[3]int32{(f.Src + 7) % 8, f.Chunk, step[f.ID] - 1}]
		prevConn := byKey[[3]int32{f.Src, f.Chunk, step[f.ID] - 1}]
		if !has(f.Deps, prevData) || has(f.Deps, prevConn) != (f.Chunk > 0) {
			t.Fatalf("flow %d (chunk %d) deps %v: data dep %d, connection dep %d only after chunk 0", f.ID, f.Chunk, f.Deps, prevData, prevConn)
		}
	}
}

func has(s []int64, x int64) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// NCCL's binary tree for 14 nodes, from trees.cc's documented example: 0 is
// the root with child 8; 8 has 4 and 12; 4 has 2 and 6; 12 has 10 and 13.
func TestBtree(t *testing.T) {
	want := map[int][]int{0: {8}, 8: {4, 12}, 4: {2, 6}, 12: {10, 13}, 1: nil, 13: nil}
	for r, w := range want {
		_, ch := btree(14, r)
		if len(ch) != len(w) {
			t.Errorf("node %d children %v, want %v", r, ch, w)
			continue
		}
		for i := range w {
			if ch[i] != w[i] {
				t.Errorf("node %d children %v, want %v", r, ch, w)
			}
		}
	}
	if p, _ := btree(14, 13); p != 12 {
		t.Errorf("parent of 13 = %d, want 12", p)
	}
	// Tree 1 of an even count mirrors tree 0: node 13 is its root.
	if p, _ := dtree(14, 13, 1); p != -1 {
		t.Errorf("mirrored root has parent %d", p)
	}
}

// Tree AllReduce on 2 servers of 2 GPUs, by hand. Channel 0 rides rail 0:
// each server's chain starts at its local GPU 0 (0<-1 and 2<-3) and server
// 1 hangs off server 0 between those heads, 2->0. Up 1->0, 3->2, 2->0; down
// 0->1, 0->2, 2->3: ranks 0 and 2 send 2S, ranks 1 and 3 send S. Channel 1
// rides rail 1 (heads 1 and 3) on the other tree, whose root is server 1:
// up 0->1, 2->3, 1->3; down 3->2, 3->1, 1->0.
func TestTreeByHand(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 4, GPUsPerServer: 2, GPUType: "A100"})
	const S = 4 << 20
	for _, c := range []struct {
		channels int
		sent     map[int32]int64
		edges    [][2]int32
	}{
		{1, map[int32]int64{0: 2 * S, 1: S, 2: 2 * S, 3: S}, [][2]int32{{1, 0}, {3, 2}, {2, 0}, {0, 1}, {0, 2}, {2, 3}}},
		{2, map[int32]int64{0: 3 * S / 2, 1: 3 * S / 2, 2: 3 * S / 2, 3: 3 * S / 2},
			[][2]int32{{1, 0}, {3, 2}, {2, 0}, {0, 1}, {0, 2}, {2, 3}, {0, 1}, {2, 3}, {1, 3}, {3, 2}, {3, 1}, {1, 0}}},
	} {
		col, _ := s.run(t, Options{Algo: "tree", Proto: "simple", RingChannels: c.channels}, Layout{TP: 1, DP: 4, PP: 1, EP: 1}, one(Step{Op: AllReduce, Size: S, Group: DP}))
		got := sentBy(col.flows)
		for r, w := range c.sent {
			if got[r] != w {
				t.Errorf("%d channels: rank %d sent %d, want %d", c.channels, r, got[r], w)
			}
		}
		edges := map[[2]int32]bool{}
		for _, f := range col.flows {
			if f.ConnType == stream.ConnTree {
				edges[[2]int32{f.Src, f.Dst}] = true
			}
		}
		for _, e := range c.edges {
			if !edges[e] {
				t.Errorf("%d channels: missing tree edge %v in %v", c.channels, e, edges)
			}
		}
		for e := range edges {
			if !slices.Contains(c.edges, e) {
				t.Errorf("%d channels: unexpected tree edge %v", c.channels, e)
			}
		}
	}
}

// Multi-node tree on 16 servers of 8 GPUs with 16 channels: every GPU's
// NIC carries tree traffic (channels take rails in turn) and, 16 being a
// multiple of the 8 NICs, the NICs of a server send and receive the same
// bytes across servers, each carrying tree 0 once and tree 1 once. (Across
// servers they differ: a tree's root has one child, so the two roots'
// servers move half as much.)
func TestTreeSpreadsOverNICs(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 128, GPUType: "A100", NICBW: 100e9})
	col, _ := s.run(t, Options{Algo: "tree", Proto: "simple", RingChannels: 16}, Layout{TP: 1, DP: 128, PP: 1, EP: 1}, one(Step{Op: AllReduce, Size: 16 << 20, Group: DP}))
	tx := make([]int64, 128)
	rx := make([]int64, 128)
	for _, f := range col.flows {
		if f.ConnType == stream.ConnTree && f.Src/8 != f.Dst/8 {
			tx[f.Src] += f.Size
			rx[f.Dst] += f.Size
		}
	}
	for _, all := range [][]int64{tx, rx} {
		for srv := 0; srv < 16; srv++ {
			per := all[srv*8 : srv*8+8]
			if lo, hi := slices.Min(per), slices.Max(per); lo == 0 || float64(hi) > 1.1*float64(lo) {
				t.Errorf("server %d: cross-server tree bytes per NIC %v, want all within 10%%", srv, per)
			}
		}
	}
}

// NVLS AllReduce on one H100 server, by hand: the switch (node 8) reads
// every GPU's data and returns each GPU its reduced eighth, which the GPU
// stores back for the switch to multicast to all eight. Per GPU S + S/8
// each way, on the wire S(1 + 1/8)/0.85 with Hopper's NVLS efficiency (each
// flow rounds up to a whole byte).
func TestNVLSByHand(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: "H100"})
	const S = 16 << 20
	col, colls := s.run(t, Options{Algo: "nvls"}, Layout{TP: 8, DP: 1, PP: 1, EP: 1}, one(Step{Op: AllReduce, Size: S, Group: TP}))
	if colls[0].Plan.Channels != 16 {
		t.Fatalf("NVLS channels %d, want 16 on Hopper", colls[0].Plan.Channels)
	}
	sent, recv, flows := map[int32]int64{}, map[int32]int64{}, map[int32]int64{}
	for _, f := range col.flows {
		if f.ConnType == stream.ConnNVLS {
			sent[f.Src] += f.Size
			recv[f.Dst] += f.Size
			flows[f.Src]++
		}
	}
	want := float64(S) * (1 + 1.0/8) / 0.85
	for r := int32(0); r < 8; r++ {
		for what, got := range map[string]int64{"sent": sent[r], "received": recv[r]} {
			if float64(got) < want || float64(got) > want+float64(flows[r]) {
				t.Errorf("GPU %d %s %d bytes, want %.0f", r, what, got, want)
			}
		}
	}
	if float64(sent[8]) < 8*want || float64(sent[8]) > 8*want+float64(flows[8]) {
		t.Errorf("NVSwitch sent %d, want 8 x %.0f", sent[8], want)
	}
}

// PXN on a rail-optimized ring: crossings between servers leave on the
// receiver's rail, via an NVLink hop to the proxy GPU.
func TestRingPXN(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	col, _ := s.run(t, Options{Algo: "ring", Proto: "simple", PXN: "on", RingChannels: 2}, Layout{TP: 1, DP: 16, PP: 1, EP: 1}, one(Step{Op: AllReduce, Size: 64 << 20, Group: DP}))
	kinds := map[string]int{}
	for _, f := range col.flows {
		kinds[f.ConnType]++
		switch f.ConnType {
		case stream.ConnNet:
			if f.Src/8 == f.Dst/8 || f.Src%8 != f.Dst%8 {
				t.Fatalf("NET flow %d from %d to %d is not same-rail across servers", f.ID, f.Src, f.Dst)
			}
		case stream.ConnPXNInit:
			if f.Src/8 != f.Dst/8 {
				t.Fatalf("PXN_INIT flow %d leaves the server", f.ID)
			}
		case stream.ConnRing:
			if f.Src/8 != f.Dst/8 {
				t.Fatalf("ring flow %d crosses servers without PXN", f.ID)
			}
		}
	}
	if kinds[stream.ConnNet] == 0 || kinds[stream.ConnNet] != kinds[stream.ConnPXNInit] {
		t.Fatalf("kinds %v", kinds)
	}
}

func TestAllToAllPXN(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	const S = 16 << 20
	col, _ := s.run(t, Options{Algo: "pxn"}, Layout{TP: 1, DP: 16, PP: 1, EP: 16}, one(Step{Op: AllToAll, Size: S, Group: EP}))
	// Data delivered to each destination still totals (n-1)/n x S.
	recv := map[int32]int64{}
	for _, f := range col.flows {
		if f.ConnType == stream.ConnNet || f.ConnType == stream.ConnA2A {
			recv[f.Dst] += f.Size
		}
		if f.ConnType == stream.ConnNet && f.Src%8 != f.Dst%8 {
			t.Fatalf("NET flow %d crosses rails", f.ID)
		}
	}
	for r := int32(0); r < 16; r++ {
		if recv[r] != S*15/16 {
			t.Errorf("GPU %d received %d, want %d", r, recv[r], S*15/16)
		}
	}
}

// The time formula by hand for 8xA100 in one server (12 channels x 20 GB/s):
// Ring Simple AllReduce of 1 GiB: busBw 240, algBw 240*8/14, latency
// 8.4 + 14 steps x 3.4 us = 56 us; time = 56 + 2^30/(1000*137.142857) us.
// For 1 KiB Ring LL wins: busBw min(87.7, 240/2), latency 6.6 + 14 x 0.6.
func TestTuningByHand(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: "A100"})
	tu := nccl.NewTuner(s.m, 8, 1)
	want := 56 + float64(1<<30)/(1000*240*8.0/14)
	if got := tu.Time(AllReduce, AlgoRing, Simple, 1<<30); math.Abs(got-want) > 1e-6 {
		t.Errorf("ring simple 1 GiB: %g us, want %g", got, want)
	}
	a, p, tm, err := tu.Select(AllReduce, 1<<30)
	if err != nil || a != AlgoRing || p != Simple || math.Abs(tm-want) > 1e-6 {
		t.Errorf("select 1 GiB: %s/%s %g %v", a, p, tm, err)
	}
	wantLL := 6.6 + 14*0.6 + 1024/(1000*87.7*8/14)
	a, p, tm, _ = tu.Select(AllReduce, 1024)
	if a != AlgoRing || p != LL || math.Abs(tm-wantLL) > 1e-6 {
		t.Errorf("select 1 KiB: %s/%s %g, want ring/ll %g", a, p, tm, wantLL)
	}
	// NCCL_ALGO=^ring leaves the tree.
	pl, _ := NewPlanner(s.m, s.fab, Options{AlgoList: "^ring"})
	plan, err := pl.Plan(AllReduce, 1<<30, TP, []int32{0, 1, 2, 3, 4, 5, 6, 7})
	if err != nil || plan.Algo != AlgoTree {
		t.Errorf("NCCL_ALGO=^ring chose %s (%v)", plan.Algo, err)
	}
	if _, err := NewPlanner(s.m, s.fab, Options{AlgoList: "ring;bogus:tree"}); err == nil {
		t.Error("bad NCCL_ALGO accepted")
	}
	// Hopper with NVLS: large AllReduce on one server goes through the switch.
	h := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: "H100"})
	if a, _, _, _ := nccl.NewTuner(h.m, 8, 1).Select(AllReduce, 1<<30); a != AlgoNVLS {
		t.Errorf("H100 1 GiB AllReduce picked %s, want nvls", a)
	}
}

func TestSimAISelector(t *testing.T) {
	h := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	pl, _ := NewPlanner(h.m, h.fab, Options{Selector: "simai", SimAINVLS: true})
	p, err := pl.Plan(AllReduce, 1<<20, TP, []int32{0, 1, 2, 3, 4, 5, 6, 7})
	if err != nil || p.Algo != AlgoNVLS || p.Proto != Simple {
		t.Errorf("SimAI TP AllReduce on H100: %s/%s %v", p.Algo, p.Proto, err)
	}
	p, _ = pl.Plan(AllReduce, 1<<20, DP, []int32{0, 8})
	if p.Algo != AlgoRing {
		t.Errorf("SimAI DP AllReduce: %s", p.Algo)
	}
	pl, _ = NewPlanner(h.m, h.fab, Options{Selector: "simai"})
	if p, _ = pl.Plan(AllReduce, 1<<20, TP, []int32{0, 1, 2, 3, 4, 5, 6, 7}); p.Algo != AlgoRing {
		t.Errorf("SimAI without AS_NVLS_ENABLE: %s", p.Algo)
	}
}

// Megatron layout, TP innermost: 8 ranks as tp 2 x dp 2 x pp 2.
func TestLayout(t *testing.T) {
	l, err := workload.NewLayout(8, 2, 0, 2, 1)
	if err != nil || l.DP != 2 {
		t.Fatal(l, err)
	}
	want := map[string][][]int32{
		TP: {{0, 1}, {2, 3}, {4, 5}, {6, 7}},
		DP: {{0, 2}, {1, 3}, {4, 6}, {5, 7}},
		PP: {{0, 4}, {1, 5}, {2, 6}, {3, 7}},
	}
	for k, w := range want {
		g, _ := l.Groups(k)
		if len(g) != len(w) {
			t.Fatalf("%s: %v", k, g)
		}
		for i := range w {
			for j := range w[i] {
				if g[i][j] != w[i][j] {
					t.Fatalf("%s: %v, want %v", k, g, w)
				}
			}
		}
	}
	l2, _ := workload.NewLayout(16, 2, 0, 1, 2) // dp 8, ep 2: EP pairs consecutive DP ranks
	ep, _ := l2.Groups(EP)
	if len(ep) != 8 || ep[0][0] != 0 || ep[0][1] != 2 {
		t.Fatalf("EP groups %v", ep)
	}
	dpep, _ := l2.Groups(DPEP)
	if len(dpep) != 4 || len(dpep[0]) != 4 || dpep[0][1] != 4 {
		t.Fatalf("DP_EP groups %v", dpep)
	}
	if _, err := workload.NewLayout(16, 3, 0, 1, 1); err == nil {
		t.Fatal("tp 3 on 16 GPUs accepted")
	}
}

func TestWorkloads(t *testing.T) {
	f, err := os.Open("../../examples/workloads/simai_microAllReduce.txt")
	if err != nil {
		t.Fatal(err)
	}
	w, err := workload.Read(f, "simai_microAllReduce.txt")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if w.TP != 8 || w.PP != 1 {
		t.Fatalf("parallelism tp %d pp %d", w.TP, w.PP)
	}
	var comms, computes int
	for _, s := range w.Steps {
		switch {
		case s.ComputePs > 0:
			computes++
		case s.Op != "":
			comms++
		}
	}
	// Two layers, each: fwd compute 556 us + fwd AllReduce on TP, then the
	// backward's ig and wg computes of 1 ns each (no collectives there).
	if comms != 2 || computes != 6 || w.Steps[0].ComputePs != 556000*1000 {
		t.Fatalf("%d collectives, %d computes: %+v", comms, computes, w.Steps[:3])
	}
	bad := []struct{ text, want string }{
		{"1 ALLREDUCE 64MiB XP\n", "w: line 1, field group"},
		{"1 ALLREDUCE 64MiB DP\n1 ALLSCATTER 1 DP\n", "w: line 2, field op"},
		{"0 ALLREDUCE 1 DP\n", "field passes"},
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8\n1\nl -1 5 ALLREDUCE 10 1 NONE 0 1 NONE 0\n", "w: line 3: layer has 11 fields"},
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8\nx\nl -1 5 ALLREDUCE 10 1 NONE 0 1 NONE 0 1\n", "line 2, field layers"},
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ga: 0\n1\nl -1 5 ALLREDUCE 10 1 NONE 0 1 NONE 0 1\n", "line 1, field ga"},
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD pp: 2 vpp: 3 ga: 2\n2\nl -1 5 ALLREDUCE 10 1 NONE 0 1 NONE 0 1\nl -1 5 ALLREDUCE 10 1 NONE 0 1 NONE 0 1\n", "line 1, field vpp"},
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD pp: 2 vpp: 2 ga: 3\n2\nl -1 5 ALLREDUCE 10 1 NONE 0 1 NONE 0 1\nl -1 5 ALLREDUCE 10 1 NONE 0 1 NONE 0 1\n", "line 1, field ga"},
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8\n1\nl -1 5 ALLREDUCE x 1 NONE 0 1 NONE 0 1\n", "line 3, field fwd_size"},
	}
	for _, b := range bad {
		if _, err := workload.Read(strings.NewReader(b.text), "w"); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q: error %v, want %q", b.text, err, b.want)
		}
	}
	// SimAI reads the layers that are there when the count disagrees; so
	// do we, with a warning (aicb's Llama-65B file announces 839, holds 33).
	w, err = workload.Read(strings.NewReader("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8\n839\nl -1 5 ALLREDUCE 10 1 NONE 0 1 NONE 0 1\n"), "w")
	if err != nil || len(w.AICB.Layers) != 1 || len(w.Warnings) != 1 || !strings.Contains(w.Warnings[0], "announces 839 layers, the file has 1") {
		t.Errorf("layer count mismatch: err %v, warnings %q", err, w.Warnings)
	}
}

// A whole iteration: compute phases become delay nodes and collectives
// follow each rank's program order.
func TestIterationDAG(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	f, _ := os.Open("../../examples/workloads/simai_microAllReduce.txt")
	w, err := workload.Read(f, "w")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	l, _ := workload.NewLayout(16, w.TP, 0, w.PP, w.EP)
	c, colls := s.run(t, Options{LaunchLatency: true}, l, w)
	if len(colls) != 4 {
		t.Fatalf("%d collectives, want 2 layers x 2 TP groups", len(colls))
	}
	// Each rank's forward computes, in program order: the first has no
	// deps, the second waits for exactly the first layer's collective on
	// that rank (colls[0] and [1] are layer 0's two TP groups).
	fwd := map[int32][]stream.Flow{}
	for _, f := range c.flows {
		if f.ConnType == stream.ConnDelay && f.DelayPs == 556000*1000 {
			fwd[f.Src] = append(fwd[f.Src], f)
		}
	}
	for r := int32(0); r < 16; r++ {
		if len(fwd[r]) != 2 {
			t.Fatalf("rank %d: %d forward computes, want 2 layers", r, len(fwd[r]))
		}
		first, second := fwd[r][0], fwd[r][1]
		layer0 := colls[r/8].Rec.ID
		if len(first.Deps) != 0 || len(second.Deps) != 1 || c.flows[second.Deps[0]].Collective != layer0 {
			t.Errorf("rank %d: first compute deps %v, second %v; want none, then one flow of collective %d", r, first.Deps, second.Deps, layer0)
		}
	}
}

// An async collective runs beside the compute issued after it; a wait
// joins it back: the compute after the wait depends on both.
func TestAsyncWait(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	w := &Workload{Steps: []Step{
		{Op: AllReduce, Size: 1 << 20, Group: DP, Async: true, Tag: "g", Label: "grad"},
		{ComputePs: 1000, Label: "c1"},
		{Wait: "g"},
		{ComputePs: 2000, Label: "c2"},
	}}
	c, colls := s.run(t, Options{Algo: "ring", Proto: "simple"}, Layout{TP: 8, DP: 2, PP: 1, EP: 1}, w)
	if len(colls) != 8 {
		t.Fatalf("%d collectives, want 8 DP groups", len(colls))
	}
	// What each rank's part of each collective ends with: its last flow
	// touching the rank, or the join node finish adds.
	exit := map[int32]int64{}
	for _, f := range c.flows {
		if f.Collective >= 0 && f.DelayPs == 0 {
			exit[f.Src] = f.ID
			if f.ConnType != stream.ConnDelay {
				exit[f.Dst] = f.ID
			}
		}
	}
	c1, c2 := map[int32]stream.Flow{}, map[int32]stream.Flow{}
	for _, f := range c.flows {
		switch f.DelayPs {
		case 1000:
			c1[f.Src] = f
		case 2000:
			c2[f.Src] = f
		}
	}
	for r := int32(0); r < 16; r++ {
		if len(c1[r].Deps) != 0 {
			t.Errorf("rank %d: compute c1 waits for %v, want nothing (the AllReduce is async)", r, c1[r].Deps)
		}
		if d := c2[r].Deps; len(d) != 2 || d[0] != c1[r].ID || d[1] != exit[r] {
			t.Errorf("rank %d: compute c2 waits for %v, want [c1 %d, AllReduce exit %d]", r, d, c1[r].ID, exit[r])
		}
	}
}

// MaxChunks caps the pipeline: larger chunks, the same bytes. NVLS gets
// four times the cap.
func TestMaxChunks(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: "H100"})
	l := Layout{TP: 8, DP: 1, PP: 1, EP: 1}
	for _, c := range []struct {
		opt       Options
		size      int64
		uncapped  int32 // chunks per channel with NCCL's chunk size
		capped    int32 // with MaxChunks 2
		perRankTx int64
	}{
		// 8 ranks x 2 MiB per loop on one channel: 16 loops.
		{Options{Algo: "ring", Proto: "simple", RingChannels: 1}, 256 << 20, 16, 2, 2 * 7 * (256 << 20) / 8},
		// 16 channels of 1 MiB in 128 KiB chunks: 8 chunks each; a GPU
		// sends its data and its reduced eighth, at 0.85 efficiency
		// (16 MiB x 9/8 / 0.85, every flow's bytes rounded up). Capped: 4 x 2.
		{Options{Algo: "nvls"}, 16 << 20, 8, 8, 16 << 20 * 9 / 8 * 100 / 85},
		{Options{Algo: "nvls"}, 64 << 20, 32, 8, 64 << 20 * 9 / 8 * 100 / 85},
	} {
		for _, mc := range []int{0, 2} {
			opt := c.opt
			opt.MaxChunks = mc
			col, _ := s.run(t, opt, l, one(Step{Op: AllReduce, Size: c.size, Group: TP}))
			want := c.uncapped
			if mc > 0 {
				want = c.capped
			}
			for _, f := range col.flows {
				if f.ConnType != stream.ConnDelay && f.ChunkCount != want {
					t.Fatalf("%s, max chunks %d: flow %d has chunk_count %d, want %d", opt.Algo, mc, f.ID, f.ChunkCount, want)
				}
			}
			sends := map[int32]int64{}
			for _, f := range col.flows {
				if f.ConnType != stream.ConnDelay {
					sends[f.Src]++
				}
			}
			for r := int32(0); r < 8; r++ {
				// NVLS rounds each flow's wire bytes up to a whole byte.
				if got := sentBy(col.flows)[r]; got < c.perRankTx || got > c.perRankTx+sends[r] {
					t.Errorf("%s, max chunks %d: rank %d sent %d, want %d", opt.Algo, mc, r, got, c.perRankTx)
				}
			}
		}
	}
}

// MSCCL schedules replace the built-in algorithm: their sends become the
// flows, their protocol labels the collective and sets the wire bytes, and
// they start after the launch latency like any other collective.
// With a chunk size, the algorithm's steps repeat per loop: 8 MiB on the
// 8-GPU ring AllReduce (8 chunks a loop) in 256 KiB chunks is 4 loops of
// its 112 sends, in 300 KiB chunks 3 full loops and one of the 7 MiB left
// over; either way a GPU sends 2(n-1)/n x 8 MiB = 14 MiB.
func TestMSCCLChunkLoops(t *testing.T) {
	for _, c := range []struct {
		chunk int64
		flows int
	}{{0, 112}, {256 << 10, 4 * 112}, {300 << 10, 4 * 112}, {8 << 20, 112}} {
		f, err := os.Open("../../examples/msccl/ring_allreduce_8.xml")
		if err != nil {
			t.Fatal(err)
		}
		a, err := ParseMSCCL(f, "ring")
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		a.ChunkBytes = c.chunk
		s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: "A100"})
		col, _ := s.run(t, Options{}, Layout{TP: 8, DP: 1, PP: 1, EP: 1}, one(Step{Op: AllReduce, Size: 8 << 20, Group: TP}), func(d *Decomposer) { d.Planner.MSCCL = a })
		n := 0
		for _, fl := range col.flows {
			if fl.ConnType == stream.ConnMSCCL {
				n++
				if c.chunk > 0 && fl.Size > c.chunk {
					t.Errorf("chunk %d: a %d-byte flow", c.chunk, fl.Size)
				}
			}
		}
		if n != c.flows {
			t.Errorf("chunk %d: %d flows, want %d", c.chunk, n, c.flows)
		}
		for r, b := range sentBy(col.flows) {
			if b != 14<<20 {
				t.Errorf("chunk %d: GPU %d sent %d, want 14 MiB", c.chunk, r, b)
			}
		}
	}
}

func TestMSCCL(t *testing.T) {
	for _, c := range []struct {
		file, proto  string
		gpus, flows  int
		perGPUSent   int64 // MiB on the wire
		topoGPUs, tp int
	}{
		{"ring_allreduce_8.xml", "Simple", 8, 8 * 14, 14, 8, 8},
		{"ring_allreduce_8.xml", "LL", 8, 8 * 14, 2 * 14, 8, 8},
		{"hier_allreduce_2x8.xml", "Simple", 16, 16 * 15, 15, 16, 16},
	} {
		xml, err := os.ReadFile("../../examples/msccl/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		xml = []byte(strings.Replace(string(xml), `proto="Simple"`, `proto="`+c.proto+`"`, 1))
		a, err := ParseMSCCL(strings.NewReader(string(xml)), c.file)
		if err != nil {
			t.Fatal(err)
		}
		s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: c.topoGPUs, GPUType: "A100"})
		const S = 8 << 20 // 8 chunks of 1 MiB
		col, colls := s.run(t, Options{LaunchLatency: true}, Layout{TP: c.tp, DP: c.topoGPUs / c.tp, PP: 1, EP: 1},
			one(Step{Op: AllReduce, Size: S, Group: TP}), func(d *Decomposer) { d.Planner.MSCCL = a })
		name := c.file + "/" + c.proto
		if r := colls[0].Rec; r.Algorithm != "msccl" || r.Protocol != strings.ToLower(c.proto) || r.Channels != a.Channels || r.PredictedPs < 0 {
			t.Errorf("%s: collective %+v", name, r)
		}
		// NCCL's launch latency of a ring kernel of the schedule's protocol.
		base := nccl.NewTuner(s.m, c.gpus, 1).LatencyTerms(AllReduce, AlgoRing, a.Proto).Base
		n, launches := 0, 0
		for _, f := range col.flows {
			switch {
			case f.ConnType == stream.ConnMSCCL:
				n++
			case f.ConnType == stream.ConnDelay && f.DelayPs == int64(base*1e6):
				launches++
			}
		}
		if n != c.flows {
			t.Errorf("%s: %d flows, the XML has %d sends", name, n, c.flows)
		}
		if launches != c.gpus {
			t.Errorf("%s: %d launch-latency nodes, want one per GPU (%d)", name, launches, c.gpus)
		}
		for r, b := range sentBy(col.flows) {
			if b != c.perGPUSent<<20 {
				t.Errorf("%s: GPU %d sent %d, want %d MiB", name, r, b, c.perGPUSent)
			}
		}
	}
	bad := []struct{ xml, want string }{
		{`<algo name="x" coll="allreduce" ngpus="2" nchunksperloop="2"><gpu id="0"/></algo>`, `line 1: <algo> missing attribute "nchannels"`},
		{`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="2">
<gpu id="0"><tb id="0" send="1" recv="1" chan="0"><step s="0" type="s" cnt="1" depid="0" deps="5"/></tb></gpu>
<gpu id="1"><tb id="0" send="0" recv="0" chan="0"><step s="0" type="r" cnt="1" depid="-1" deps="-1"/></tb></gpu></algo>`, "line 2: <step> depends on step 5 of threadblock 0 of gpu 0, which does not exist"},
		{`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="2">
<gpu id="0"><tb id="0" send="1" recv="1" chan="0"><step s="0" type="s" cnt="1" depid="-1" deps="-1"/></tb></gpu>
<gpu id="1"><tb id="0" send="0" recv="0" chan="0"><step s="0" type="nop" cnt="1" depid="-1" deps="-1"/></tb></gpu></algo>`, "gpu 0 sends 1 times to gpu 1 on channel 0, which receives 0 times"},
		{`<algo name="x" coll="allreduce" ngpus="1" nchannels="1" nchunksperloop="1"><gpu id="0"><tb id="0" send="-1" recv="-1" chan="0"><step s="0" type="zz" cnt="1" depid="-1" deps="-1"/></tb></gpu></algo>`, `unknown type "zz"`},
		{`<algo`, "m.xml: line 1"},
		{`<algos><algo name="x" coll="allreduce" ngpus="1" nchannels="1" nchunksperloop="1"/></algos>`, "m.xml: line 1: <algos> is not <algo>"},
		{`<algo name="x" coll="allreduce" ngpus="1" nchannels="1" nchunksperloop="1">
<tb id="0" send="-1" recv="-1" chan="0"/></algo>`, "m.xml: line 2: <tb> outside <gpu>"},
		{`<algo name="x" coll="allreduce" ngpus="1" nchannels="1" nchunksperloop="1"><gpu id="0"><tb id="0" send="-1" recv="-1" chan="0"/>
<step s="0" type="nop" cnt="1" depid="-1" deps="-1"/></gpu></algo>`, "m.xml: line 2: <step> outside <tb>"},
		{`<algo name="x" coll="allreduce" ngpus="1" nchannels="1" nchunksperloop="1"><gpu id="0"><gpu id="1"/></gpu></algo>`, "m.xml: line 1: <gpu> inside <gpu>"},
		{`<algo name="x" coll="allreduce" ngpus="0x2" nchannels="1" nchunksperloop="1e3"/>`, `m.xml: line 1: <algo> attribute "nchunksperloop": "1e3" is not an integer`},
	}
	for _, b := range bad {
		if _, err := ParseMSCCL(strings.NewReader(b.xml), "m.xml"); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("error %v, want %q", err, b.want)
		}
	}
}

// latencyPath is the DAG's critical path when bandwidth is free: a flow
// ends its delay after its last dep (a transfer's delay_ps is its step
// latency), in ps.
func latencyPath(flows []stream.Flow) int64 {
	end := make([]int64, len(flows))
	var last int64
	for i, f := range flows {
		var t int64
		for _, d := range f.Deps {
			t = max(t, end[d])
		}
		end[i] = t + f.DelayPs
		last = max(last, end[i])
	}
	return last
}

// At sizes where bandwidth does not matter, a collective's DAG takes the
// tuning model's latency: the base on each rank's entry, the per-step
// hardware latency on every transfer by its hop. The want column is NCCL
// 2.27's formula (tuning.cc) worked by hand from its tables.
func TestDAGLatencyIsModel(t *testing.T) {
	a100x2 := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100"})
	a100x16 := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 128, GPUType: "A100"})
	h100 := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "H100"})
	const tol = 0.10
	for _, c := range []struct {
		name  string
		s     setup
		l     Layout
		step  Step
		opt   Options
		want  float64 // us
		exact bool    // the critical path takes every term once
	}{
		// Ring LL over NVLink: 6.6 + 14 steps x 0.6.
		{"ring ll 8 gpus", a100x2, Layout{TP: 8, DP: 2, PP: 1, EP: 1}, Step{Op: AllReduce, Size: 4096, Group: TP}, Options{Algo: "ring", Proto: "ll"}, 6.6 + 14*0.6, true},
		// Ring Simple AllGather: 8.4 + 7 x 3.4.
		{"ring simple allgather", a100x2, Layout{TP: 8, DP: 2, PP: 1, EP: 1}, Step{Op: AllGather, Size: 4096, Group: TP}, Options{Algo: "ring", Proto: "simple"}, 8.4 + 7*3.4, true},
		// Ring LL on 2 servers: 30 steps, 2 of them network (2.7), the
		// others NVLink raised to the 1 us net overhead: 6.6 + 28 + 5.4.
		{"ring ll 2 servers", a100x2, Layout{TP: 1, DP: 16, PP: 1, EP: 1}, Step{Op: AllReduce, Size: 4096, Group: DP}, Options{Algo: "ring", Proto: "ll"}, 6.6 + 28*1 + 2*2.7, false},
		// Tree LL128 on 16 servers of 8: 14 + 2 x (7 x 1.25 + 4 x 8.5).
		{"tree ll128 16 servers", a100x16, Layout{TP: 1, DP: 128, PP: 1, EP: 1}, Step{Op: AllReduce, Size: 4096, Group: DP}, Options{Algo: "tree", Proto: "ll128"}, 14 + 2*(7*1.25+4*8.5), true},
		// Many chunks: a connection's later chunks hide their latency behind
		// the first (NCCL's FIFO), so the latency is still paid once per hop.
		{"tree ll128 16 servers 64MiB", a100x16, Layout{TP: 1, DP: 128, PP: 1, EP: 1}, Step{Op: AllReduce, Size: 64 << 20, Group: DP}, Options{Algo: "tree", Proto: "ll128"}, 14 + 2*(7*1.25+4*8.5), true},
		{"ring simple 8 gpus 1GiB", a100x2, Layout{TP: 8, DP: 2, PP: 1, EP: 1}, Step{Op: AllReduce, Size: 1 << 30, Group: TP}, Options{Algo: "ring", Proto: "simple"}, 8.4 + 14*3.4, false},
		// Tree LL on 2 servers of 8 (one network level): 6.8 + 2 x (7 x 0.6 + 1 x 5).
		{"tree ll 2 servers", a100x2, Layout{TP: 1, DP: 16, PP: 1, EP: 1}, Step{Op: AllReduce, Size: 4096, Group: DP}, Options{Algo: "tree", Proto: "ll"}, 6.8 + 2*(7*0.6+5), true},
		// PAT AllGather over 16 servers of one GPU each: 8 + 16 x 2.8 +
		// log2(16) network phases of 14/3.5.
		{"pat allgather 16 servers", a100x16, Layout{TP: 8, DP: 16, PP: 1, EP: 1}, Step{Op: AllGather, Size: 4096, Group: DP}, Options{Algo: "pat"}, 8 + 16*2.8 + 4*14/3.5, true},
		{"pat reducescatter 16 servers 16MiB", a100x16, Layout{TP: 8, DP: 16, PP: 1, EP: 1}, Step{Op: ReduceScatter, Size: 16 << 20, Group: DP}, Options{Algo: "pat"}, 8 + 16*2.8 + 4*14/3.5, true},
		// NVLS on one H100 server: NVLink's 25 us, no base.
		{"nvls", h100, Layout{TP: 8, DP: 4, PP: 1, EP: 1}, Step{Op: AllReduce, Size: 4096, Group: TP}, Options{Algo: "nvls"}, 25, true},
		// NVLS-Tree over 4 H100 servers: 25 + 2 x 2 levels x 14.
		{"nvls-tree", h100, Layout{TP: 1, DP: 32, PP: 1, EP: 1}, Step{Op: AllReduce, Size: 1 << 20, Group: DP}, Options{Algo: "nvls-tree"}, 25 + 2*2*14, true},
		// Broadcast, ring Simple inside a server: 8.4 + 8 steps x 4.0 (Tree's
		// Simple NVLink latency); the chain has 7 hops.
		{"broadcast", a100x2, Layout{TP: 8, DP: 2, PP: 1, EP: 1}, Step{Op: Broadcast, Size: 4096, Group: TP}, Options{Algo: "ring", Proto: "simple"}, 8.4 + 8*4.0, false},
		// AllToAll inside a server: launch 8.4 + one NVLink step 3.4.
		{"alltoall", a100x2, Layout{TP: 8, DP: 2, PP: 1, EP: 1}, Step{Op: AllToAll, Size: 65536, Group: TP}, Options{}, 8.4 + 3.4, true},
		// AllToAll across servers: launch + one network step 14.
		{"alltoall 2 servers", a100x2, Layout{TP: 1, DP: 16, PP: 1, EP: 1}, Step{Op: AllToAll, Size: 65536, Group: DP}, Options{}, 8.4 + 14, true},
	} {
		c.opt.LaunchLatency = true
		col, colls := c.s.run(t, c.opt, c.l, one(c.step))
		model := colls[0].Plan.Lat.Total
		if math.Abs(model-c.want) > 1e-9 {
			t.Errorf("%s: model latency %.3f us, want %.3f by hand", c.name, model, c.want)
		}
		got := float64(latencyPath(col.flows)) / 1e6
		if c.exact && math.Abs(got-c.want) > 1e-6 || math.Abs(got-c.want) > tol*c.want {
			t.Errorf("%s: DAG latency %.3f us, model %.3f us", c.name, got, c.want)
		}
	}
}

// A multi-server ring's NVLink hop under the transport's costs keeps
// NVLink's own latency (tuning.cc hwLat, Ring LL on NVLink: 0.6 us),
// where NCCL's model lifts every such step to its network overhead
// (getNetOverhead: 2 us on an AMD host), the proxy's posts the transport
// prices itself; with preset none (NCCL's model latencies) on the same
// AMD host the hop keeps the overhead. A 1 KiB AllGather on 2 x 8 A100
// runs Ring LL either way.
func TestRingHopWithoutNetOverhead(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100", NICBW: 200e9})
	hop := func(preset string) float64 {
		tr, err := NewTransport("A100", "", []string{"preset=" + preset, "host-cpu=amd"})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := NewPlanner(s.m, s.fab, Options{LaunchLatency: true, Transport: &tr})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pl.Plan(AllGather, 1024, DP, ranks32(16))
		if err != nil || p.Algo != AlgoRing || p.Proto != LL {
			t.Fatalf("%s: %s/%s %v, want ring/ll", preset, p.Algo, p.Proto, err)
		}
		return p.Lat.Intra
	}
	if got := hop("a100"); got != 0.6 {
		t.Errorf("a100: NVLink hop %.2f us, want 0.60", got)
	}
	if got := hop("none"); got != 2 {
		t.Errorf("none: NVLink hop %.2f us, want 2.00", got)
	}
}

// ranks32 is ranks 0 to n-1.
func ranks32(n int) []int32 {
	r := make([]int32, n)
	for i := range r {
		r[i] = int32(i)
	}
	return r
}
