package packet

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fabricsim/fabricsim/pkg/des"
)

// PFC deadlock detection by wait-for graph.
//
// A PFC deadlock is a cycle of paused egress queues: each waits for its
// downstream ingress to drain, and that ingress's packets sit in the next
// egress of the cycle, itself paused. It never ends by itself. Starvation
// looks the same from one switch (a port paused for milliseconds under a
// 127-to-1 incast sends nothing for that long) but always ends, and a
// fabric routed up-down (a fat-tree) has no cycle to deadlock on. So a
// switch that has sent no data packet for the stall window only makes the
// run look for a cycle; a deadlock is reported when the same cycle is
// found again a persistence window later and none of its ports has sent a
// data packet meanwhile. Without a cycle the run warns of the starvation,
// once, and goes on.

// waitWatch is the detector's state between looks.
type waitWatch struct {
	s *Sim
	// lastMove is, per node, when a data packet last left it; a switch
	// still refreshing PAUSE long after means nothing can move (deadlock).
	// A node's own record, so that the verdict is the same whichever part
	// of a partitioned run the node is in.
	lastMove []int64
	// lastMoveAny is the latest of them, for PFC_MODE port's check: kept,
	// not taken as their maximum, as that check runs at every live timeout.
	lastMoveAny int64
	// portMove is, per egress port, when a data packet last left it: a
	// deadlocked cycle is one none of whose ports sends.
	portMove []int64
	// stallFloorPs is the stall window's floor, 1 ms; tests lower it so
	// that a run of microseconds puts the detector to work.
	stallFloorPs int64
	stalled      *Incomplete // the deadlock (or stall) that stops the run

	cycle  []int32 // the candidate cycle's egress ports, in wait order
	since  int64   // when it was found (nothing in it sent since)
	next   int64   // earliest next look: a look scans every queued packet
	warned bool    // the starvation warning was given
	// suspect: under partitions, a part saw switch v stalled while its
	// ingress k (-1: unknown) paused; the coordinator looks across parts
	// between windows.
	suspect bool
	v, k    int32
}

// persistWindow is how long a cycle must stay with nothing sent through
// it: half the stall window, ten PAUSE lifetimes and at least 0.5 ms. Had
// any ingress of the cycle drained meanwhile, its PAUSE would have lapsed
// and its egress sent; a dynamic threshold that rises as the rest of the
// buffer drains would have let it go as well.
func (ww *waitWatch) persistWindow() int64 {
	return ww.stallWindow() / 2
}

// stalledSwitch is called when switch v, whose ingress k still refreshes
// PAUSE upstream, has sent no data packet for the stall window.
func (ww *waitWatch) stalledSwitch(v, k int32) {
	s := ww.s
	if s.pv.part != nil { // other parts' ports are not ours to read now
		ww.suspect, ww.v, ww.k = true, v, k
		return
	}
	ww.lookForDeadlock([]*Sim{s}, s.now, v, k)
}

// lookForDeadlock builds the wait-for graph over every part's ports at
// time now and stops the run (ww.stalled) on a cycle that persisted; v and
// k (-1 when unknown) name the stalled switch and ingress for the warning.
func (ww *waitWatch) lookForDeadlock(sims []*Sim, now int64, v, k int32) {
	s := ww.s
	w := &s.watch
	if ww.stalled != nil || now < w.next {
		return
	}
	if s.bypassing {
		w.cycle = nil // the surrogate holds the fabric: nothing to judge
		return
	}
	w.next = now + ww.persistWindow()/4
	cycle, paused := ww.waitCycle(sims, now)
	if cycle == nil {
		w.cycle = nil
		if !w.warned {
			w.warned = true
			s.warn(ww.starvation(sims, now, v, k, paused))
		}
		return
	}
	owner := func(pid int32) *Sim { return sims[ww.partOf(s.fab.ports[pid].from)] }
	moved := func() bool {
		for _, pid := range cycle {
			if owner(pid).watch.portMove[pid] >= w.since {
				return true
			}
		}
		return false
	}
	if !sameCycle(w.cycle, cycle) || moved() {
		w.cycle, w.since = cycle, now
		return
	}
	if now-w.since < ww.persistWindow() {
		return
	}
	names := make([]string, 0, len(cycle)+1)
	for _, pid := range cycle {
		names = append(names, s.fab.nodeName(s.fab.ports[pid].from))
	}
	names = append(names, names[0])
	ww.stalled = &Incomplete{Reason: fmt.Sprintf("PFC deadlock: %d egress ports paused, in a cycle %s, none of which has sent a data packet since %s",
		paused, strings.Join(names, " -> "), des.Time(w.since))}
}

// starvation describes a stall without a cycle: switch v's, pausing the
// sender of ingress k, or (v -1, PFC_MODE port) the whole fabric's.
func (ww *waitWatch) starvation(sims []*Sim, now int64, v, k int32, paused int) string {
	s := ww.s
	if v < 0 {
		var last int64
		for _, c := range sims {
			last = max(last, c.watch.lastMoveAny)
		}
		return fmt.Sprintf("PFC starvation, not a deadlock: no data packet has moved for %s (since %s) while ports are paused; %d egress ports paused, in no cycle; the run goes on",
			des.Time(now-last), des.Time(last), paused)
	}
	last := sims[ww.partOf(v)].watch.lastMove[v]
	what := "its upstream"
	if k >= 0 {
		what = s.fab.nodeName(s.fab.ports[k/nQ].from)
	}
	return fmt.Sprintf("PFC starvation, not a deadlock: %s has sent no data packet for %s (since %s) while pausing %s; %d egress ports paused, in no cycle; the run goes on",
		s.fab.nodeName(v), des.Time(now-last), des.Time(last), what, paused)
}

// partOf is the part node v is in (0 without partitions).
func (ww *waitWatch) partOf(v int32) int {
	s := ww.s
	if s.pv.part == nil {
		return 0
	}
	return int(s.pv.part.of[v])
}

// waitCycle returns a cycle of the wait-for graph at time now, as egress
// ports in wait order (nil when there is none), and how many egress ports
// are paused with something to send. Port A waits on port B when A is
// paused on a queue it has data for, and B, paused on that queue too,
// holds packets that came in over A's link: A's PAUSE lasts until they
// leave.
func (ww *waitWatch) waitCycle(sims []*Sim, now int64) ([]int32, int) {
	s := ww.s
	// The PAUSEs still waiting at their ports (pfc.go) whose events would
	// have popped by now: before the event being handled, or, between a
	// partitioned run's windows, all before the window's end.
	seq := s.curSeq
	if s.pv.part != nil {
		seq = math.MaxUint64
	}
	for _, c := range sims {
		c.pfc.settleAll(now, seq)
	}
	blocked := func(c *Sim, pid int32, q int) bool {
		p := &c.fab.ports[pid]
		return p.pausedAt(uint8(q), now) && (p.full&(1<<q) != 0 || len(p.qps) > 0)
	}
	waits := map[int32][]int32{}
	paused := 0
	for pid := range s.fab.ports {
		c := sims[ww.partOf(s.fab.ports[pid].from)]
		p := &c.fab.ports[pid]
		isPaused := false
		for q := 1; q < nQ; q++ {
			if !blocked(c, int32(pid), q) {
				continue
			}
			isPaused = true
			f := &p.q[q]
			for _, pi := range f.buf[f.head:] {
				a := c.pkts[pi].inDL
				if a < 0 {
					continue
				}
				ca := sims[ww.partOf(s.fab.ports[a].from)]
				if blocked(ca, a, q) && !slices.Contains(waits[a], int32(pid)) {
					waits[a] = append(waits[a], int32(pid))
				}
			}
		}
		if isPaused {
			paused++
		}
	}
	// Depth-first search from each port, in port order for a stable answer.
	from := make([]int32, 0, len(waits))
	for a := range waits {
		from = append(from, a)
	}
	slices.Sort(from)
	state := map[int32]uint8{} // 1 on the stack, 2 done
	var stack, cycle []int32
	var dfs func(a int32) bool
	dfs = func(a int32) bool {
		state[a] = 1
		stack = append(stack, a)
		for _, b := range waits[a] {
			switch state[b] {
			case 1:
				cycle = slices.Clone(stack[slices.Index(stack, b):])
				return true
			case 0:
				if dfs(b) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[a] = 2
		return false
	}
	for _, a := range from {
		if state[a] == 0 && dfs(a) {
			break
		}
	}
	return cycle, paused
}

// sameCycle reports whether two cycles hold the same ports (in any
// rotation: the search may enter a cycle anywhere).
func sameCycle(a, b []int32) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// warn records a problem found while running, and reports it at once
// through OnWarning when set.
func (s *Sim) warn(msg string) {
	s.Warnings = append(s.Warnings, msg)
	if s.onWarning != nil {
		s.onWarning(msg)
	}
}

// stallWindow is how long a congested switch may send no data packet
// while it still pauses its upstream before the run looks for a deadlock:
// stallPauses PAUSE lifetimes and at least 1 ms.
func (ww *waitWatch) stallWindow() int64 {
	s := ww.s
	return max(stallPauses*s.cfg.PauseTimePs, ww.stallFloorPs)
}

// stallPauses is the stall window's least, in PAUSE lifetimes (pfc.stallMin
// reads it too).
const stallPauses = 20
