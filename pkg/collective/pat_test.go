package collective

import (
	"math"
	"math/bits"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Each non-root position of a binomial tree receives its block once, so
// a rank sends n-1 blocks over PAT's phases, whatever n.
func TestPATBlocksAddUp(t *testing.T) {
	for n := 2; n <= 130; n++ {
		sum, last := 0, n
		for _, d := range patPhases(n) {
			if d >= last || bits.OnesCount(uint(d)) != 1 {
				t.Fatalf("n=%d: phase distances %v not powers of two, largest first", n, patPhases(n))
			}
			last = d
			sum += patBlocks(n, d)
		}
		if sum != n-1 {
			t.Errorf("n=%d: %d blocks sent, want %d", n, sum, n-1)
		}
		if want := bits.Len(uint(n - 1)); len(patPhases(n)) != want {
			t.Errorf("n=%d: %d phases, want ceil(log2 n) = %d", n, len(patPhases(n)), want)
		}
	}
	// By hand, 8 ranks: 1 block at distance 4, 2 at 2, 4 at 1.
	for d, want := range map[int]int{4: 1, 2: 2, 1: 4} {
		if got := patBlocks(8, d); got != want {
			t.Errorf("8 ranks, distance %d: %d blocks, want %d", d, got, want)
		}
	}
}

// NCCL's rules for PAT (tuning.cc, enqueue.cc): AllGather and
// ReduceScatter, Simple, one GPU per server; latency 8 us + 2.8 us per
// rank + log2(servers) network steps of 14/3.5 us; bandwidth 0.75 of the
// tree graph's channels. It wins small messages over many servers and
// leaves large ones to the ring.
func TestPATTuningByHand(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 128, GPUType: "A100"})
	tu := nccl.NewTuner(s.m, 16, 16)
	for _, c := range []struct {
		op   Op
		p    Proto
		want bool
	}{{AllGather, Simple, true}, {ReduceScatter, Simple, true}, {AllGather, LL, false}, {AllReduce, Simple, false}, {Broadcast, Simple, false}} {
		if got := tu.Available(c.op, AlgoPAT, c.p); got != c.want {
			t.Errorf("16 ranks on 16 servers: PAT %s %s available %v, want %v", c.op, c.p, got, c.want)
		}
	}
	if nccl.NewTuner(s.m, 128, 16).Available(AllGather, AlgoPAT, Simple) {
		t.Error("PAT offered with 8 GPUs per server")
	}
	g := tu.Ring
	const size = 1 << 20
	want := 8 + 2.8*16 + 4*14/3.5 + size/(1000*0.75*float64(g.NChannels)*g.BwInter)
	if got := tu.Time(AllGather, AlgoPAT, Simple, size); math.Abs(got-want) > 1e-6 {
		t.Errorf("PAT AllGather 1 MiB on 16 servers: %g us, want %g", got, want)
	}
	if a, _, _, _ := tu.Select(AllGather, 64<<10); a != AlgoPAT {
		t.Errorf("64 KiB AllGather on 16 servers picked %s, want pat", a)
	}
	if a, _, _, _ := tu.Select(AllGather, 1<<30); a != AlgoRing {
		t.Errorf("1 GiB AllGather on 16 servers picked %s, want ring", a)
	}
}

// The DAG moves what PAT moves: each rank sends (n-1)/n of the buffer,
// only to ranks a power of two positions on (AllGather) or back
// (ReduceScatter), on tree connections; the collective-granularity
// traffic matrix holds the same bytes per pair.
func TestPATDecomposition(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 128, GPUType: "A100"})
	const size, n = 16 << 20, 16
	for _, op := range []Op{AllGather, ReduceScatter} {
		col, colls := s.run(t, Options{Algo: "pat"}, Layout{TP: 8, DP: n, PP: 1, EP: 1}, one(Step{Op: op, Size: size, Group: DP}))
		if colls[0].Plan.Algo != AlgoPAT {
			t.Fatalf("%s: planned %s", op, colls[0].Plan.Algo)
		}
		pair := map[[2]int32]float64{}
		for _, f := range col.flows {
			if f.ConnType == stream.ConnDelay {
				continue
			}
			if f.ConnType != stream.ConnTree {
				t.Fatalf("%s: flow %d is %s, want TREE", op, f.ID, f.ConnType)
			}
			dist := (int(f.Dst/8) - int(f.Src/8) + n) % n // DP positions: ranks 0, 8, 16, ...
			if op == ReduceScatter {
				dist = n - dist
			}
			if bits.OnesCount(uint(dist)) != 1 {
				t.Errorf("%s: flow %d from %d to %d is %d positions on", op, f.ID, f.Src, f.Dst, dist)
			}
			if f.Src%8 == 0 { // the first DP group's, as ranks below
				pair[[2]int32{f.Src, f.Dst}] += float64(f.Size)
			}
		}
		for r, b := range sentBy(col.flows) {
			if want := float64(size) * (n - 1) / n; math.Abs(float64(b)-want) > 0.001*want {
				t.Errorf("%s: rank %d sends %d bytes, want %.0f", op, r, b, want)
			}
		}
		ranks := make([]int32, n)
		for i := range ranks {
			ranks[i] = int32(8 * i)
		}
		model := map[[2]int32]float64{}
		sp := TrafficSpec{Op: op, Algo: AlgoPAT, Proto: Simple, Channels: colls[0].Plan.Channels}
		if err := Traffic(s.fab, sp, size, ranks, func(a, b int32, x float64) { model[[2]int32{a, b}] += x }); err != nil {
			t.Fatal(err)
		}
		if len(model) != len(pair) {
			t.Errorf("%s: traffic matrix has %d pairs, the DAG %d", op, len(model), len(pair))
		}
		for k, b := range pair {
			if math.Abs(model[k]-b) > 0.001*b {
				t.Errorf("%s: pair %v: DAG %.0f bytes, traffic matrix %.0f", op, k, b, model[k])
			}
		}
	}
}
