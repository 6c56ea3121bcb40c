package packet

import (
	"cmp"
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// A PAUSE kept at its port (not in the calendar) applies exactly when its
// event would have popped: not to an event before it in (time, number)
// order, to every one after; several apply in the order sent, the last
// setting the expiry; a RESUME event between two settles the first only.
func TestLazyPauseAppliesInEventOrder(t *testing.T) {
	s := &Sim{cfg: Config{PauseTimePs: 5000}}
	fc := newPFC(s, &s.cfg, 1)
	f := &fc
	p := &port{}
	p.lzPush(lzFrame{at: 100, seq: 7, q: dataQ})
	p.lzPush(lzFrame{at: 300, seq: 2, q: dataQ})
	f.settleAt(p, 100, 7) // the same event: not before itself
	if p.paused[dataQ] || p.lz != 2 {
		t.Fatalf("applied at its own event: paused %v, %d waiting", p.paused[dataQ], p.lz)
	}
	f.settleAt(p, 100, 8)
	if !p.paused[dataQ] || p.pauseTill[dataQ] != 100+5000 || p.lz != 1 || p.lzAt(0).at != 300 {
		t.Fatalf("after the first: paused %v till %d, %d waiting", p.paused[dataQ], p.pauseTill[dataQ], p.lz)
	}
	p.paused[dataQ] = false // a RESUME event at 200 (frame settles, then resumes)
	if p.pausedNow(dataQ, 250, false) {
		t.Fatal("paused between the RESUME and the second PAUSE")
	}
	f.settleAt(p, 300, 3)
	if !p.paused[dataQ] || p.pauseTill[dataQ] != 300+5000 || p.lz != 0 {
		t.Fatalf("after the second: paused %v till %d, %d waiting", p.paused[dataQ], p.pauseTill[dataQ], p.lz)
	}
	// The ring's oldest is now its third slot: a full ring wraps past the
	// end, and its PAUSEs still apply oldest first, the last one due
	// setting the expiry.
	for i, at := range []int64{310, 320, 330, 340} {
		p.lzPush(lzFrame{at: at, seq: uint64(i), q: dataQ})
	}
	f.settleAt(p, 335, 0)
	if p.pauseTill[dataQ] != 330+5000 || p.lz != 1 || p.lzAt(0).at != 340 {
		t.Fatalf("wrapped: till %d, %d waiting, next at %d", p.pauseTill[dataQ], p.lz, p.lzAt(0).at)
	}
	f.settleAt(p, 341, 0)
	if p.pauseTill[dataQ] != 340+5000 || p.lz != 0 {
		t.Fatalf("wrapped, the last: till %d, %d waiting", p.pauseTill[dataQ], p.lz)
	}
	p.lzPush(lzFrame{at: 400, seq: 1, q: portPFC})
	f.settleAt(p, 401, 0)
	for q := 1; q < nQ; q++ {
		if !p.paused[q] || p.pauseTill[q] != maxTime {
			t.Fatalf("port PAUSE: queue %d paused %v till %d", q, p.paused[q], p.pauseTill[q])
		}
	}
}

// A PAUSE-expiry wake kept at its port (pfcwake.go) is the event it stands
// for, run at its own time and number: every node makes as many events as
// when each wake is an event, so every other event keeps its number (Sim.seq;
// skipping the wakes, 3918e14, left nodes making fewer: their 24-bit counts
// then wrap elsewhere, and the 4096-GPU all-to-all's single loop changed),
// and every flow ends at the same time with the same
// PAUSEs, drops and packets, on fewer calendar events. Incasts through a
// two-tier fat-tree (PAUSEs between switches and to hosts), a second
// incast crossing the first's paused switches, transfers that start behind
// others (queue pairs joining and leaving paused ports), with and without
// DCQCN's pacing (wakes of paused ports beside pacing wakes).
func TestKeptWakesAreExact(t *testing.T) {
	checkLooked = true // and every refresh numbers after its switch's due wakes
	defer func() { checkLooked = false }()
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, GPUs: 16, GPUsPerServer: 1, NICBW: 100e9, SwitchBW: 100e9})
	var specs []flowSpec
	for i := int32(1); i < 16; i++ {
		specs = append(specs, flowSpec{i, 0, 1 << 20, nil})
		if i%4 == 0 { // a second incast, crossing the first's paused switches
			specs = append(specs, flowSpec{i, 5, 256 << 10, nil})
		}
		if i%3 == 0 { // behind the host's first: it joins a paused port
			specs = append(specs, flowSpec{i, 0, 128 << 10, []int64{int64(len(specs) - 1)}})
		}
	}
	for _, mode := range []int{cc.ModeNone, cc.ModeDCQCN} {
		cfg := DefaultConfig()
		cfg.BufferBytes = 256 << 10
		var ends [2][]int64
		var stats [2]Stats
		var made [2][]uint64
		var wakes [2][]wakeRec
		for k, off := range []bool{true, false} {
			s, fl := newSim(t, tp, cfg, mode, specs)
			s.pfc.kept.off = off
			stop := logWakes(&wakes[k])
			if err := s.Run(); err != nil {
				t.Fatal(err)
			}
			stop()
			ends[k], stats[k], made[k] = fl.End, s.Stats(), s.made
		}
		sameWakes(t, wakes)
		if stats[0].Pauses == 0 {
			t.Fatalf("cc %d: no PAUSE in a 15-to-1 incast into 256 KB buffers", mode)
		}
		if stats[1].Events >= stats[0].Events {
			t.Fatalf("cc %d: %d events with kept wakes, %d with every wake an event", mode, stats[1].Events, stats[0].Events)
		}
		for v := range made[0] {
			if made[0][v] != made[1][v] {
				t.Fatalf("cc %d: node %d made %d events with every wake an event, %d with kept wakes", mode, v, made[0][v], made[1][v])
			}
		}
		for i := range specs {
			if ends[0][i] != ends[1][i] {
				t.Fatalf("cc %d: flow %d ends at %d with every wake an event, %d with kept wakes", mode, i, ends[0][i], ends[1][i])
			}
		}
		stats[0].Events, stats[1].Events = 0, 0
		if stats[0] != stats[1] {
			t.Fatalf("cc %d: stats %+v with every wake an event, %+v with kept wakes", mode, stats[0], stats[1])
		}
		// A partitioned run keeps none (its switch may be another part's)
		// and is the single loop's, flow for flow.
		sp, fp := runParts(t, tp, cfg, mode, specs, 2, 2)
		for _, c := range sp.pv.peers {
			if c.pfc.kept.nodes != nil {
				t.Fatalf("cc %d: a part kept a wake", mode)
			}
		}
		for i := range specs {
			if fp.End[i] != ends[1][i] {
				t.Fatalf("cc %d: flow %d ends at %d in 2 parts, %d in the single loop with kept wakes", mode, i, fp.End[i], ends[1][i])
			}
		}
	}
}

// A switch starved for milliseconds in a 127-to-1 incast
// (TestIncastStarvationIsNoDeadlock's) looks at its ports only now and
// then, so a kept wake it runs late may, once fired and kept again at its
// PAUSE's new expiry, be due again before the event that looked, and run
// again at that expiry. Run so, the kept wakes are exact: every node makes
// as many events as when each wake is an event, and every flow ends at
// the same time with the same PAUSEs and packets.
func TestKeptWakesAreExactStarved(t *testing.T) {
	checkLooked = true
	defer func() { checkLooked = false }()
	tp := incastFatTree(t)
	var ends [2][]int64
	var stats [2]Stats
	var made [2][]uint64
	var wakes [2][]wakeRec
	for k, off := range []bool{true, false} {
		c := incastCase{seed: 3, set: with(lossless, "BUFFER_SIZE=2", "PAUSE_TIME=5"), hook: func(string) {}, unkept: off}
		stop := logWakes(&wakes[k])
		s, err := runIncast(t, tp, c, 127, 2e6)
		stop()
		checkIncastWhole(t, c, s, err, 127, 2e6)
		ends[k], stats[k], made[k] = s.flows.End, s.Stats(), s.made
	}
	sameWakes(t, wakes)
	if stats[1].Events >= stats[0].Events {
		t.Fatalf("%d events with kept wakes, %d with every wake an event", stats[1].Events, stats[0].Events)
	}
	if !slices.Equal(made[0], made[1]) {
		t.Fatalf("nodes made %v events with every wake an event, %v with kept wakes", made[0], made[1])
	}
	if !slices.Equal(ends[0], ends[1]) {
		t.Fatalf("flows end at %v with every wake an event, %v with kept wakes", ends[0], ends[1])
	}
	stats[0].Events, stats[1].Events = 0, 0
	if stats[0] != stats[1] {
		t.Fatalf("stats %+v with every wake an event, %+v with kept wakes", stats[0], stats[1])
	}
}

// wakeRec is a wake that popped: its port, time and number (wakeLog).
type wakeRec struct {
	pid int32
	at  int64
	seq uint64
}

// logWakes has the single loop log every wake into l until stop is
// called (the partitioned loops' threads would race on it).
func logWakes(l *[]wakeRec) (stop func()) {
	wakeLog = func(pid int32, at int64, seq uint64) { *l = append(*l, wakeRec{pid, at, seq}) }
	return func() { wakeLog = nil }
}

// sameWakes: the run with every wake an event (w[0]) and the one with
// kept wakes (w[1]) popped the same wakes at the same times with the
// same numbers: a kept wake fired ahead of its turn, or numbered out of
// its node's order, differs here even when no flow's end moves.
func sameWakes(t *testing.T, w [2][]wakeRec) {
	t.Helper()
	for k := range w {
		slices.SortFunc(w[k], func(a, b wakeRec) int {
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq), cmp.Compare(a.pid, b.pid))
		})
	}
	if len(w[0]) == 0 {
		t.Fatal("no wake popped")
	}
	if !slices.Equal(w[0], w[1]) {
		n := min(len(w[0]), len(w[1]))
		i := 0
		for i < n && w[0][i] == w[1][i] {
			i++
		}
		t.Fatalf("%d wakes with every wake an event, %d with kept wakes; first difference at %d", len(w[0]), len(w[1]), i)
	}
}
