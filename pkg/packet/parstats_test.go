package packet

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// The parallel loop's counts add up: its windows' events per part are the
// run's events, the single loop's one for one, and the ideal speedup
// (events over the sum of each window's busiest part) lies between 1 and
// the parts, whatever the threads; the CSV holds the same counts.
func TestParallelStatsCounts(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "A100", NICBW: 100e9})
	specs := crossServerAllToAll(64 << 10)
	cfg := DefaultConfig()
	one, _ := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	if one.ParallelStats() != nil {
		t.Fatal("the single loop reported parallel stats")
	}
	for _, parts := range []int{2, 4} {
		s, _ := newSim(t, tp, cfg, cc.ModeDCQCN, specs)
		s.parts, s.threads = parts, 1
		var csv bytes.Buffer
		s.pv.log = &csv
		if err := s.Run(); err != nil {
			t.Fatal(err)
		}
		ps := s.ParallelStats()
		if ps == nil || ps.Parts != parts || ps.Windows == 0 {
			t.Fatalf("%d parts: stats %+v", parts, ps)
		}
		var sum uint64
		for _, e := range ps.PartEvents {
			sum += e
		}
		// Each part but the first has a timeout FIFO of its own, whose
		// head's event may pop after its timeout died (popRTO drops the
		// dead behind the head, not the head): here one event each.
		if ps.Events != one.Stats().Events+uint64(parts-1) || sum != ps.Events || s.Stats().Events != ps.Events {
			t.Fatalf("%d parts: %d events counted by window, %d by part, %d in the run's stats; the single loop ran %d", parts, ps.Events, sum, s.Stats().Events, one.Stats().Events)
		}
		if id := ps.Ideal(); id < 1 || id > float64(parts) || ps.MaxSum > ps.Events || ps.MaxSum*uint64(parts) < ps.Events {
			t.Fatalf("%d parts: ideal speedup %.3f (%d events, %d in the busiest parts)", parts, id, ps.Events, ps.MaxSum)
		}
		// Longer windows: the busiest parts' sum never grows as windows
		// merge, and never falls below a part's share.
		prev := ps.MaxSum
		for i := range widerBy {
			if w := ps.Wider[i]; w > prev || w*uint64(parts) < ps.Events {
				t.Fatalf("%d parts: windows %dx as long: busiest parts' sum %d (%dx shorter: %d, events %d)", parts, widerBy[i], w, widerBy[max(i-1, 0)], prev, ps.Events)
			}
			prev = ps.Wider[i]
		}
		for i := range ps.TakenBy {
			if p := ps.ProjectedTaken(i); p > float64(ps.TakenBy[i])+1e-9 || (threadCPU() != 0 && p <= 0) {
				t.Fatalf("%d parts on %d threads: projected speedup %.2f", parts, ps.TakenBy[i], p)
			}
		}
		// Fewer threads taking the parts: never faster than the busiest
		// part, nor than the threads sharing every event.
		for i, th := range ps.TakenBy {
			if x := ps.Taken[i]; x < ps.MaxSum || x*uint64(th) < ps.Events || x > ps.Events {
				t.Fatalf("%d parts on %d threads: busiest threads' sum %d (busiest parts' %d, events %d)", parts, th, x, ps.MaxSum, ps.Events)
			}
		}
		if ps.IdealThreads() != 1 {
			t.Fatalf("%d parts on one thread: ideal %.3f, want 1", parts, ps.IdealThreads())
		}
		lines := strings.Split(strings.TrimSuffix(csv.String(), "\n"), "\n")
		if len(lines) != ps.Windows+1 {
			t.Fatalf("%d parts: %d CSV lines for %d windows", parts, len(lines), ps.Windows)
		}
		var csvSum, csvMax uint64
		for _, l := range lines[1:] {
			f := strings.Split(l, ",")
			if len(f) != parts+5 {
				t.Fatalf("%d parts: CSV line %q", parts, l)
			}
			for _, x := range f[3 : 3+parts] {
				v, _ := strconv.ParseUint(x, 10, 64)
				csvSum += v
			}
			v, _ := strconv.ParseUint(f[3+parts], 10, 64)
			csvMax += v
		}
		if csvSum != ps.Events || csvMax != ps.MaxSum {
			t.Fatalf("%d parts: CSV has %d events, %d in busiest parts; stats %d, %d", parts, csvSum, csvMax, ps.Events, ps.MaxSum)
		}
		t.Logf("%d parts: %s", parts, ps.Summary())
		checkCPU(t, ps)
	}
}

// checkCPU checks the CPU figures add up: one window in timedEvery read
// the clocks, each part ran some of it, the busiest parts' sum lies
// between a part's share and the whole, the projection between 1 and the
// parts, and all of it within the process's CPU over the loop.
func checkCPU(t *testing.T, ps *ParallelStats) {
	t.Helper()
	if threadCPU() == 0 {
		t.Skip("no thread CPU clock here")
	}
	want := 0
	for w := range ps.Windows {
		if timedWindow(w) {
			want++
		}
	}
	if ps.Timed != want || want == 0 || ps.TimedEvents == 0 || ps.TimedEvents > ps.Events {
		t.Fatalf("%d windows timed of %d (%d of %d events), want %d", ps.Timed, ps.Windows, ps.TimedEvents, ps.Events, want)
	}
	var sum time.Duration
	for k, c := range ps.PartCPU {
		if c <= 0 {
			t.Fatalf("part %d: CPU %v in the timed windows", k, c)
		}
		sum += c
	}
	if ps.CPUMaxSum > sum || ps.CPUMaxSum*time.Duration(ps.Parts) < sum {
		t.Fatalf("busiest parts' CPU %v against %v over %d parts", ps.CPUMaxSum, sum, ps.Parts)
	}
	if p := ps.ProjectedCPU(); p <= 0 || p > float64(ps.Parts) {
		t.Fatalf("projected speedup %.2f with %d parts", p, ps.Parts)
	}
	// The process's clock ticks coarser (getrusage): a margin.
	if ps.PartsCPU() > ps.ProcessCPU+50*time.Millisecond {
		t.Fatalf("parts' CPU %v above the process's %v", ps.PartsCPU(), ps.ProcessCPU)
	}
}

// DP rings along the rails of a rail-optimised fabric (each rail's GPUs
// under one leaf) cut into as many parts as rails: each leaf goes with
// its GPUs, no packet crosses parts, each part runs an eighth of the
// events, and the lookahead is still the network's 500 ns (the NVLinks
// cut carry nothing: no GPU sends another of its server anything). In
// blocks of servers every hop to or from a leaf crossed.
func TestPlanPartsRails(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 64, GPUType: "A100", NICBW: 100e9, PSWs: 4})
	var specs []flowSpec
	for rail := int32(0); rail < 8; rail++ {
		for server := int32(0); server < 8; server++ {
			specs = append(specs, flowSpec{server*8 + rail, (server+1)%8*8 + rail, 256 << 10, nil})
		}
	}
	cfg := DefaultConfig()
	one, f0 := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	s, f1 := newSim(t, tp, cfg, cc.ModeDCQCN, specs)
	s.parts, s.threads = 8, 2
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	pt, ps := s.pv.part, s.ParallelStats()
	for rail := int32(0); rail < 8; rail++ {
		for server := int32(1); server < 8; server++ {
			if pt.of[server*8+rail] != pt.of[rail] {
				t.Fatalf("rail %d: GPU %d in part %d, GPU %d in part %d", rail, rail, pt.of[rail], server*8+rail, pt.of[server*8+rail])
			}
		}
	}
	if pt.lookahead != 500_000 || ps.Crossings != 0 || ps.Ideal() < 7.5 {
		t.Fatalf("lookahead %d ps, %d crossings, ideal speedup %.2f: want 500 ns, none, about 8", pt.lookahead, ps.Crossings, ps.Ideal())
	}
	if !slices.Equal(f0.End, f1.End) || s.Stats().Delivered != one.Stats().Delivered {
		t.Fatalf("flows ended at %v, in the single loop %v", f1.End, f0.End)
	}
	blocks, err := newPartitioning(tp, 8)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.model()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := m.cost(s, pt), m.cost(s, blocks); a >= b {
		t.Fatalf("estimated cost %.0f, blocks of servers %.0f", a, b)
	}
}

// refine only lowers the model's cost: from a cut that piles all but a
// few sets of nodes into one part, on 64 GPUs each sending to eight
// others in turn (eight phases), it spreads them (to a local minimum:
// one set moves at a time, 7.2e7 here where blocks of servers cost
// 5.9e7), keeps every set that must share a part whole and leaves no
// part without load.
func TestRefineLowersCost(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 64, GPUType: "A100", NICBW: 100e9, PSWs: 4})
	var specs []flowSpec
	for g := int32(0); g < 64; g++ {
		for k := int32(1); k <= 8; k++ {
			specs = append(specs, flowSpec{g, (g + 8*k) % 64, 64 << 10, nil})
		}
	}
	s, _ := newSim(t, tp, DefaultConfig(), cc.ModeDCQCN, specs)
	m, err := s.model()
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	uf := &unionFind{up: slices.Clone(m.units.up)}
	nodes := len(tp.Nodes)
	weight := make([]float64, nodes)
	for v := range nodes {
		weight[uf.find(int32(v))] += m.w[v]
	}
	partOf := make([]int, nodes)
	k := 0
	for v := range nodes {
		partOf[v] = -1
		if uf.find(int32(v)) == int32(v) && weight[v] > 0 {
			partOf[v] = max(0, n-1-k) // the first n-1 sets alone, the rest in part 0
			k++
		}
	}
	before := m.cost(s, s.place(m, uf, partOf, n))
	s.refine(m, uf, partOf, n)
	pt := s.place(m, uf, partOf, n)
	after := m.cost(s, pt)
	if after >= 0.6*before {
		t.Fatalf("cost %.4g before refining, %.4g after", before, after)
	}
	if !m.keeps(pt) {
		t.Fatal("a set of nodes that must share a part was split")
	}
	load := make([]float64, n)
	for v := range nodes {
		load[pt.of[v]] += m.w[v]
	}
	if slices.Min(load) == 0 {
		t.Fatalf("a part without load: %v", load)
	}
	t.Logf("cost %.4g -> %.4g; parts' loads %v", before, after, load)
}

// Windows taken widerBy at a time, by hand: two parts whose load swaps
// every window (3,1 then 1,3) run 8 events in 6 busiest-part events a
// window at a time (ideal 1.33) but in 4 two at a time (ideal 2); five
// windows leave a partial last group, counted too.
func TestWidenerByHand(t *testing.T) {
	ps := &ParallelStats{}
	w := newWidener(2)
	win := [][]uint64{{3, 1}, {1, 3}, {3, 1}, {1, 3}, {5, 0}}
	for _, e := range win {
		ps.Events += e[0] + e[1]
		ps.MaxSum += slices.Max(e)
		w.add(ps, e)
	}
	w.close(ps)
	// By 2: (4,4) (4,4) (5,0); by 4: (8,8) (5,0); by 16: (13,8).
	want := map[int]uint64{2: 4 + 4 + 5, 4: 8 + 5, 16: 13}
	for i, g := range widerBy {
		if ps.Wider[i] != want[g] {
			t.Fatalf("windows %dx as long: busiest parts' sum %d, want %d", g, ps.Wider[i], want[g])
		}
	}
	if got := ps.IdealWider(0); got != 21.0/13 {
		t.Fatalf("ideal at 2x: %v, want 21/13", got)
	}
}

// Parts taken by fewer threads, by hand: parts of 5, 1, 4 and 2 events
// taken heaviest first (5, 4, 2, 1) by two threads, each by the first one
// free: 5+1 and 4+2, 6 events the window; in part order 5+2 and 1+4, 7.
func TestTakenByHand(t *testing.T) {
	events := []uint64{5, 1, 4, 2}
	order := []int32{0, 1, 2, 3}
	ps := &ParallelStats{TakenBy: []int{2, 3}, Taken: make([]uint64, 2), TakenCPU: make([]time.Duration, 2)}
	free := make([]uint64, 4)
	ps.take(order, events, free)
	if ps.Taken[0] != 7 || ps.Taken[1] != 5 {
		t.Fatalf("in part order: busiest of 2 threads %d, of 3 %d; want 7 and 5", ps.Taken[0], ps.Taken[1])
	}
	takeOrder(order, events)
	if !slices.Equal(order, []int32{0, 2, 3, 1}) {
		t.Fatalf("order %v, want heaviest first 0 2 3 1", order)
	}
	ps.Taken = make([]uint64, 2)
	ps.take(order, events, free)
	if ps.Taken[0] != 6 || ps.Taken[1] != 5 {
		t.Fatalf("heaviest first: busiest of 2 threads %d, of 3 %d; want 6 and 5", ps.Taken[0], ps.Taken[1])
	}
	ps.takeCPU(order, []uint64{50, 10, 40, 20}, free)
	if ps.TakenCPU[0] != 60 || ps.TakenCPU[1] != 50 {
		t.Fatalf("heaviest first by CPU: busiest of 2 threads %v, of 3 %v; want 60 and 50 ns", ps.TakenCPU[0], ps.TakenCPU[1])
	}
	if got := takenBy(16); !slices.Equal(got, []int{2, 4, 8}) {
		t.Fatalf("takenBy(16) = %v", got)
	}
}

// The summary names the span its windows cover as the event loop's, which
// runs on past the last flow's end (the simulated time flowsim-packet's
// last line gives) to a pending timer: "15% of the 1000.500 us simulated"
// once sat above "simulated 428.434us".
func TestSummaryNamesLoopSpan(t *testing.T) {
	ps := &ParallelStats{Parts: 2, Threads: 1, Windows: 300, LookaheadPs: 500_000, SpanPs: 1_000_500_000, PartEvents: []uint64{1, 1}, Events: 2}
	if s := ps.Summary(); !strings.Contains(s, "windows cover 15% of the event loop's 1000.500 us (first window to last, which runs on past the last flow's end") {
		t.Errorf("summary:\n%s", s)
	}
}
