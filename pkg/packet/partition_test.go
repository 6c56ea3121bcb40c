package packet

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Parts hold whole servers in contiguous blocks; a switch goes where most
// of its neighbours are, spines (neighbours in every part alike) spread
// evenly; the lookahead is the shortest link between parts.
func TestPartitioning(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 64, GPUType: "A100", NICBW: 100e9, PSWs: 4})
	adj := topo.BuildAdjacency(tp)
	for _, n := range []int{2, 3, 8} {
		pt, err := newPartitioning(tp, n)
		if err != nil {
			t.Fatal(err)
		}
		perTier := map[int8][]int{}
		for v, node := range tp.Nodes {
			if node.Server >= 0 {
				if want := uint8(int(node.Server) * n / 8); pt.of[v] != want {
					t.Fatalf("%d parts: node %d of server %d in part %d, want %d", n, v, node.Server, pt.of[v], want)
				}
				continue
			}
			count := make([]int, n)
			for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
				l := tp.Links[li]
				w := l.A
				if w == int32(v) {
					w = l.B
				}
				if tp.Nodes[w].Tier < node.Tier {
					count[pt.of[w]]++
				}
			}
			if count[pt.of[v]] != slices.Max(count) {
				t.Fatalf("%d parts: switch %d in part %d, its lower neighbours by part %v", n, v, pt.of[v], count)
			}
			if perTier[node.Tier] == nil {
				perTier[node.Tier] = make([]int, n)
			}
			perTier[node.Tier][pt.of[v]]++
		}
		if n == 2 {
			// 8 rail switches with 4 servers each side, 4 spines: even.
			for tier, c := range perTier {
				if c[0] != c[1] {
					t.Fatalf("tier %d: %v switches per part", tier, c)
				}
			}
		}
		if pt.lookahead != 500_000 {
			t.Fatalf("%d parts: lookahead %d ps, want the 500 ns of NIC and switch links", n, pt.lookahead)
		}
	}
	if _, err := newPartitioning(tp, 9); err == nil || !strings.Contains(err.Error(), "8 servers") {
		t.Fatalf("9 parts of 8 servers: %v", err)
	}
	flat := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 64, GPUType: "A100", NICBW: 100e9, NICLatencyPs: topo.ZeroLatency})
	if _, err := newPartitioning(flat, 2); err == nil || !strings.Contains(err.Error(), "no latency") {
		t.Fatalf("zero-latency NIC links between parts: %v", err)
	}
}

// runParts runs the specs with partitions parts on threads threads,
// checking that every byte arrived and that bytes are conserved.
func runParts(t *testing.T, tp *topo.Topology, cfg Config, ccMode int, specs []flowSpec, parts, threads int) (*Sim, *Flows) {
	t.Helper()
	s, fl := newSim(t, tp, cfg, ccMode, specs)
	s.parts, s.threads = parts, threads
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range specs {
		total += f.size
	}
	if st := s.Stats(); st.Delivered != total || st.SentBytes != st.Delivered+st.DroppedBytes+st.Discarded {
		t.Fatalf("%d parts: delivered %d of %d bytes; sent %d = delivered + dropped %d + discarded %d?", parts, st.Delivered, total, st.SentBytes, st.DroppedBytes, st.Discarded)
	}
	if parts > 1 {
		// The run was cut, and packets crossed parts (each crossing pair
		// had a shadow slot in the part it entered).
		shadows := 0
		for _, p := range s.pv.peers {
			shadows += p.pv.madeShadows
		}
		if s.pv.part == nil || s.pv.part.n != parts || shadows == 0 {
			t.Fatalf("%d parts: the run was not partitioned, or no packet crossed parts (%d shadow slots)", parts, shadows)
		}
	}
	return s, fl
}

// A partitioned run is the single loop's, flow for flow, whatever the
// parts and threads: simultaneous events are ordered by the node that made
// them, and each port draws RED marks from a stream of its own. Under
// HPCC, the INT records of packets that cross parts go with them; under
// per-packet routings, every part's switches choose from the pair's hash
// and flowlet as the single loop's do; lost packets are resent alike,
// going back (go-back-N) or selectively (SACK).
func TestPartitionedThreadsIdentical(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "A100", NICBW: 100e9})
	specs := crossServerAllToAll(256 << 10)
	// A second round after each flow's receive: dependants released
	// where they start.
	for i, n := 0, len(specs); i < n; i++ {
		f := specs[i]
		specs = append(specs, flowSpec{f.dst, f.src, 128 << 10, []int64{int64(i)}})
	}
	// And an 8:1 incast from the other part by senders without a window:
	// queues past RED thresholds, PFC pauses.
	for src := int32(16); src < 32; src += 2 {
		specs = append(specs, flowSpec{src, 1, 2 << 20, nil})
	}
	type runCase struct {
		mode      int
		routing   Routing
		transport Transport
		loss      float64
		short     bool // one of make test's (-short) cases
	}
	// Two parts free a finished pair's shadows on the share answers
	// (pairs()), three or more by the three-message protocol: the short
	// cases with loss are the ones where a share is still out.
	partCounts := []int{2, 3}
	for _, c := range []runCase{
		{cc.ModeDCQCN, RouteECMP, TransportRoCE, 0, true}, {cc.ModeHPCC, RouteECMP, TransportRoCE, 0, true},
		{cc.ModeDCQCN, RouteSpray, TransportRoCE, 0, false}, {cc.ModeDCQCN, RouteFlowlet, TransportRoCE, 0, true}, {cc.ModeDCQCN, RouteAdaptive, TransportRoCE, 0, false},
		{cc.ModeDCQCN, RouteECMP, TransportRoCE, 0.002, false}, {cc.ModeDCQCN, RouteECMP, TransportSACK, 0.002, false}, {cc.ModeDCQCN, RouteSpray, TransportSACK, 0.002, true},
	} {
		if testing.Short() && !c.short {
			continue
		}
		// Under the race detector (make test's race step) two short cases
		// share what the parts share: HPCC's INT records crossing parts,
		// and reordering, loss and selective acknowledgement.
		if testing.Short() && raceDetector && c.mode != cc.ModeHPCC && c.transport != TransportSACK {
			continue
		}
		cfg := DefaultConfig()
		cfg.HasWin, cfg.BufferBytes, cfg.Routing, cfg.Transport, cfg.ErrorRate = false, 2<<20, c.routing, c.transport, c.loss
		one, f0 := runFlows(t, tp, cfg, c.mode, specs)
		name := fmt.Sprintf("%s %s %s loss %g", one.Algorithm().Name(), c.routing, c.transport, c.loss)
		if c.routing != RouteECMP && one.Stats().Reordered == 0 {
			t.Fatalf("%s: no packet arrived out of order", name)
		}
		if c.loss > 0 && one.Stats().Retransmitted == 0 {
			t.Fatalf("%s: nothing was resent", name)
		}
		for _, parts := range partCounts {
			s2, f2 := runParts(t, tp, cfg, c.mode, specs, parts, 2)
			// The race step runs the two threads only, against the single
			// loop: one thread, which shares nothing, has the same run
			// against the same loop in go test -short.
			s1, f1 := s2, f2
			if !raceDetector {
				s1, f1 = runParts(t, tp, cfg, c.mode, specs, parts, 1)
			}
			if s1.Stats() != s2.Stats() {
				t.Fatalf("%s, %d parts: stats differ with two threads: %+v vs %+v", name, parts, s1.Stats(), s2.Stats())
			}
			if !slices.Equal(f1.End, f2.End) || !slices.Equal(f1.Start, f2.Start) {
				t.Fatalf("%s, %d parts: flow times differ with two threads", name, parts)
			}
			if (c.mode == cc.ModeDCQCN && s1.Stats().CNPs == 0) || s1.Stats().Pauses == 0 {
				t.Fatalf("%s, %d parts: %d CNPs, %d pauses: marking and PFC were not exercised", name, parts, s1.Stats().CNPs, s1.Stats().Pauses)
			}
			t.Logf("%s, %d parts: makespan %d ps (single loop %d ps), %d CNPs, %d pauses", name, parts, s1.Stats().SimPs, one.Stats().SimPs, s1.Stats().CNPs, s1.Stats().Pauses)
			for i := range f0.End {
				if f1.End[i] != f0.End[i] || f1.Start[i] != f0.Start[i] {
					t.Fatalf("%s, %d parts: flow %d ran %d-%d ps, in the single loop %d-%d ps", name, parts, i, f1.Start[i], f1.End[i], f0.Start[i], f0.End[i])
				}
			}
			// All stats but the events (a part counts its window ends).
			a, b := s1.Stats(), one.Stats()
			a.Events, b.Events = 0, 0
			if a != b {
				t.Fatalf("%s, %d parts: stats %+v, single loop %+v", name, parts, a, b)
			}
		}
	}
}

// An incast across parts under PFC, congestion control off: no packet is
// lost (the PAUSE frames cross parts too), and the receiver's NIC, the
// bottleneck, is busy from the first byte to the last: the makespan is the
// bytes at its rate, plus about one round trip.
func TestPartitionedIncastClosedForm(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 64, GPUType: "A100", NICBW: 100e9})
	var specs []flowSpec
	var total int64
	for server := int32(4); server < 8; server++ {
		for rail := int32(0); rail < 2; rail++ {
			specs = append(specs, flowSpec{server*8 + rail, 0, 4 << 20, nil})
			total += 4 << 20
		}
	}
	cfg := DefaultConfig()
	cfg.HasWin, cfg.BufferBytes = false, 1<<20
	s, _ := runParts(t, tp, cfg, cc.ModeNone, specs, 2, 2)
	if s.Stats().Dropped != 0 || s.Stats().Pauses == 0 {
		t.Fatalf("%d dropped, %d pauses: want a lossless incast held back by PAUSE", s.Stats().Dropped, s.Stats().Pauses)
	}
	frames := uint64(0)
	for _, p := range s.pv.peers {
		frames += p.pv.frames
	}
	if frames == 0 {
		t.Fatalf("no PFC frame crossed parts (%d pauses): the senders are in the other part", s.Stats().Pauses)
	}
	wire := float64(total) * float64(cfg.PayloadSize+cfg.HeaderBytes) / float64(cfg.PayloadSize)
	ideal := int64(wire * 8e12 / 100e9)
	if got := s.Stats().SimPs; got < ideal || got > ideal+20_000_000 {
		t.Fatalf("makespan %d ps: want the %d ps the receiver's 100 Gb/s takes, plus at most 20 us", got, ideal)
	}
}

// What crosses parts is written by one part and read back by another a
// window later, cold by then: a packet's crossing is one and a half cache
// lines, a PFC frame (18% of what crosses on two parts of the 2048-GPU
// AllToAll) three eighths of one.
func TestCrossingSizes(t *testing.T) {
	if c, f := unsafe.Sizeof(crossing{}), unsafe.Sizeof(frame{}); c > 96 || f > 24 {
		t.Fatalf("a crossing is %d bytes, a frame %d: want at most 96 and 24", c, f)
	}
}

// What the partitioned loop cannot do is refused, naming why.
func TestPartitionedRefusals(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 64, GPUType: "A100", NICBW: 100e9})
	cross := []flowSpec{{0, 63, 1 << 20, nil}}
	cfg := DefaultConfig()
	cfg.LinkDown = []LinkDown{{AtPs: 1000, A: 0, B: 64}}
	portPFC := DefaultConfig()
	portPFC.PortPFC = true
	for _, c := range []struct {
		cfg   Config
		cc    int
		specs []flowSpec
		want  string
	}{
		{cfg, cc.ModeDCQCN, cross, "LINK_DOWN"},
		{portPFC, cc.ModeDCQCN, cross, "PFC_MODE port"},
	} {
		s, _ := newSim(t, tp, c.cfg, c.cc, c.specs)
		s.parts = 2
		if err := s.Run(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %q, got %v", c.want, err)
		}
	}
	// The receiver's next step, released where it starts, runs.
	runParts(t, tp, DefaultConfig(), cc.ModeDCQCN, append(cross, flowSpec{63, 40, 1 << 20, []int64{0}}), 2, 2)
	// GPU 40's flow waits on 0 -> 63, whose completion (its last ACK)
	// happens at GPU 0: the parts keep GPUs 0 and 40 together, and the
	// run is the single loop's.
	waits := append(cross, flowSpec{40, 41, 1 << 20, []int64{0}})
	_, f0 := runFlows(t, tp, DefaultConfig(), cc.ModeDCQCN, waits)
	s, f1 := runParts(t, tp, DefaultConfig(), cc.ModeDCQCN, waits, 2, 2)
	if p := s.pv.part; p.of[0] != p.of[40] || !slices.Equal(f0.End, f1.End) {
		t.Fatalf("GPUs 0 and 40 in parts %d and %d; flows ended at %v, in the single loop %v", p.of[0], p.of[40], f1.End, f0.End)
	}
	// A part that would have to hear of a release at once is refused.
	pt, err := newPartitioning(tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	s, _ = newSim(t, tp, DefaultConfig(), cc.ModeDCQCN, waits)
	s.pv.part, s.pv.s = pt, s
	if err := s.pv.checkReleases(); err == nil || !strings.Contains(err.Error(), "waits on flow 0") {
		t.Errorf("blocks of servers: want an error naming the release, got %v", err)
	}
	// The planned cut keeps GPUs 0 and 40 together, so the run skips the
	// check (keepsDeps), which would pass.
	s, _ = newSim(t, tp, DefaultConfig(), cc.ModeDCQCN, waits)
	if pt, err = s.planParts(2); err != nil || !pt.keepsDeps {
		t.Fatalf("planned cut: keepsDeps %v, err %v; want a cut known to keep the release", pt != nil && pt.keepsDeps, err)
	}
	s.pv.part, s.pv.me = pt, 0
	if err := s.pv.checkReleases(); err != nil {
		t.Fatalf("planned cut said to keep every release: %v", err)
	}
	// A join without a node runs in the first part, which the model's
	// sets cannot hold: a flow waiting on it is still checked.
	joined := append(slices.Clone(cross), flowSpec{-1, -1, 0, []int64{0}}, flowSpec{40, 41, 1 << 20, []int64{1}})
	s, _ = newSim(t, tp, DefaultConfig(), cc.ModeDCQCN, joined)
	if pt, err = s.planParts(2); err != nil || pt.keepsDeps {
		t.Fatalf("a release from a join without a node: keepsDeps %v, err %v; want it left to checkReleases", pt != nil && pt.keepsDeps, err)
	}
	// Two delays at idle GPUs, one releasing the other: a set the model
	// gives no load, which the cut may split. Then the run must refuse.
	idle := []flowSpec{{8, 8, 0, nil}, {49, 49, 0, []int64{0}}}
	for g := int32(0); g < 64; g++ {
		if d := (g + 8) % 64; g != 8 && g != 49 && d != 8 && d != 49 {
			idle = append(idle, flowSpec{g, d, 1 << 20, nil})
		}
	}
	delays := make([]int64, len(idle))
	delays[0], delays[1] = 1000, 1000
	s, _, err = newSimDelays(t, tp, DefaultConfig(), cc.ModeDCQCN, idle, delays)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err = s.planParts(2); err != nil {
		t.Fatal(err)
	}
	if pt.of[8] == pt.of[49] {
		// The case stands for a split set: if the planner learns to keep
		// such sets whole, this should check that it does instead.
		t.Fatalf("GPUs 8 and 49 both in part %d: the case no longer splits a set without load", pt.of[8])
	}
	if pt.keepsDeps {
		t.Fatalf("GPUs 8 and 49, a delay and the delay it releases, in parts %d and %d: the cut cannot say it keeps every release", pt.of[8], pt.of[49])
	}
	s, _, _ = newSimDelays(t, tp, DefaultConfig(), cc.ModeDCQCN, idle, delays)
	s.parts = 2
	if err := s.Run(); err == nil || !strings.Contains(err.Error(), "waits on flow 0") {
		t.Errorf("a release across the cut: want an error naming it, got %v", err)
	}
}

// A finished pair's slot serves other pairs in a partitioned run as in the
// single loop, once none of its packets is left in any part, and so do its
// shadows: 200 one-packet flows bouncing between two servers in different
// parts, each started by the previous one's arrival, never have more than
// a few pairs out at once, so each part needs a few slots (a pair's own,
// a shadow of the other's, one or two waiting to be reclaimed) instead of
// one a pair and a shadow. The flows run as in the single loop.
func TestPartitionedSlotsReclaimed(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "A100", NICBW: 100e9})
	const flows = 200
	specs := bouncing(0, 24, flows) // servers 0 and 3: parts 0 and 1 of two
	cfg := DefaultConfig()
	_, f0 := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	for _, threads := range []int{1, 2} {
		s, f := runParts(t, tp, cfg, cc.ModeDCQCN, specs, 2, threads)
		if !slices.Equal(f.End, f0.End) {
			t.Fatalf("%d threads: flow ends differ from the single loop's", threads)
		}
		for _, p := range s.pv.peers {
			if n := len(p.nic.qps); n > 8 || p.pv.madeShadows < flows/2 {
				t.Fatalf("%d threads: part %d holds %d queue pair slots for %d pairs of its own and %d shadows made", threads, p.pv.me, n, flows/2, p.pv.madeShadows)
			}
		}
	}
}

// A pair none of whose packets left its part frees its slot when it is
// done, as in the single loop, without asking the other parts: 200
// chained flows between two GPUs of server 0 (NVLink, inside part 0)
// reuse two slots, none through a reclaiming message, and end as in the
// single loop; the one pair sent to part 1 beside them is not freed so.
func TestPartitionedLocalPairsFreedAtOnce(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "A100", NICBW: 100e9})
	const flows = 200
	specs := bouncing(0, 1, flows)
	specs = append(specs, flowSpec{2, 24, 4096, nil}) // to server 3, part 1: a pair that asks
	cfg := DefaultConfig()
	_, f0 := runFlows(t, tp, cfg, cc.ModeDCQCN, specs)
	s, f := runParts(t, tp, cfg, cc.ModeDCQCN, specs, 2, 1)
	if !slices.Equal(f.End, f0.End) {
		t.Fatal("flow ends differ from the single loop's")
	}
	p := s.pv.peers[0]
	if p.pv.part.of[0] != p.pv.me {
		t.Fatal("GPU 0 is not in the first part")
	}
	if n := len(p.nic.qps); p.pv.freedAtOnce != flows || n > 3 || p.pv.pairsSent != 1 {
		t.Fatalf("part 0: %d of %d pairs freed at once, %d slots, %d pairs sent", p.pv.freedAtOnce, flows, n, p.pv.pairsSent)
	}
}

// A pair's shadow is made from what its first packet into a part brings;
// the pair's later packets there carry only its key. Four 64 KiB flows
// (16 packets each) between a server of one part and a server of another
// make at least four shadows, each from one pair sent, in at least 64
// crossings (each data packet crosses), on 2, 3 or 4 parts.
func TestPartitionedPairSentOnce(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "A100", NICBW: 100e9})
	cfg := DefaultConfig()
	var specs []flowSpec
	for g := range int32(4) {
		f := flowSpec{g, 28 + g, 64 << 10, nil} // servers 0 and 3, other rails
		if g%2 == 1 {
			f.src, f.dst = f.dst, f.src
		}
		specs = append(specs, f)
	}
	for _, parts := range []int{2, 3, 4} {
		s, _ := runParts(t, tp, cfg, cc.ModeDCQCN, specs, parts, 1)
		sent, made := 0, 0
		crossings := uint64(0)
		for _, p := range s.pv.peers {
			sent += p.pv.pairsSent
			made += p.pv.madeShadows
			crossings += p.pv.received
		}
		if sent != made || made < len(specs) || crossings < 16*uint64(len(specs)) {
			t.Fatalf("%d parts: %d pairs sent for %d shadows made (at least %d), in %d crossings", parts, sent, made, len(specs), crossings)
		}
	}
}

// bouncing is n one-packet flows between GPUs a and b, back and forth,
// each started by the previous one's arrival.
func bouncing(a, b int32, n int) []flowSpec {
	var specs []flowSpec
	for i := range n {
		f := flowSpec{a, b, 4096, nil}
		if i > 0 {
			f.deps = []int64{int64(i - 1)}
		}
		specs = append(specs, f)
		a, b = b, a
	}
	return specs
}

// check refuses a crossing due inside the window (a cut the lookahead
// missed) and keeps the first such; one due at the window's end or
// later is fine.
func TestPartitionCheckEarly(t *testing.T) {
	pv := &partView{s: &Sim{}, part: &partitioning{of: []uint8{0, 1}, n: 2, lookahead: 500}, end: 1000}
	pv.check(1000, 1)
	if pv.early != nil {
		t.Fatalf("due at the window's end: %v", pv.early)
	}
	pv.check(999, 1)
	pv.check(10, 1)
	if pv.early == nil || !strings.Contains(pv.early.Error(), "due at 999 ps, inside the window ending at 1000 ps") {
		t.Fatalf("due 1 ps before the end: got %v, want the first refusal", pv.early)
	}
}
