package packet

import "github.com/fabricsim/fabricsim/pkg/des"

// A paused port with something to send wakes when its PAUSE expires
// (wakeAtExpiry). While the switch it feeds still holds that queue over
// its threshold, the wake finds the port paused again: the switch's
// refresh (at most half a PAUSE_TIME after its last PAUSE) arrives before
// the PAUSE it renews expires, and the chain of such wakes ends only at a
// RESUME. In a 127-to-1 incast these wakes were a quarter of the events.
//
// Leaving them out (3918e14, reverted: the 4096-GPU all-to-all's single
// loop changed, its partitioned run did not) was not exact in two ways.
// Every wake is an event its port's node made, so each one skipped lowered
// the numbers (Sim.seq) of that node's later events; their order among
// themselves held, except where the 24-bit count wraps, which then fell
// elsewhere among ties one node made for one instant. And the wake still
// pending when the RESUME arrives pops later: a look at a port that may
// send, whose pending time holds back pacing wakes (fabric.wake keeps the
// earliest) until it pops and makes them then, numbered from then.
//
// So the wake is kept, not skipped: numbered when made, as the calendar
// would have it, but held at its port (kept) instead of in the calendar,
// and run, at its own time and number, as soon as anything could tell:
// before the node it happens at makes an event (Sim.seq) or looks at its
// ports (tryTx, onTxDone, onWake, a PFC frame, a settle of waiting PAUSEs,
// the deadlock watch's included, a queue pair joining or leaving), so the
// node's count and the port's state are what the event would have seen. A
// RESUME puts a kept wake back in the calendar (from then on it may send),
// as does a port left with nothing to send (drained). Only where nothing
// else moves frames or time: not for a part of a partitioned run (its
// switch may be another part's), under the surrogate (it holds PFC
// events), with failing links, or under TIE_ORDER push (numbers are the
// push count there).

// keptWakes are the ports' kept wakes, a port's one at most: per node
// the earliest of its ports' times (maxTime: none), which is all a look
// reads when none is due, and where in w its ports' are (its out-degree of
// slots from off, n of them taken).
type keptWakes struct {
	on    bool // priority PFC with a refresh before the expiry
	off   bool // tests: every wake an event
	nodes []keptNode
	w     []keptWake
}

type keptNode struct {
	next int64
	off  int32
	n    int32
}

// keptWake is port pid's wake at time at, numbered seq.
type keptWake struct {
	at  int64
	seq uint64
	pid int32
}

// list is node v's kept wakes.
func (k *keptWakes) list(v int32) []keptWake {
	nd := &k.nodes[v]
	return k.w[nd.off : nd.off+nd.n]
}

// init sizes the kept wakes of s's nodes by their ports.
func (k *keptWakes) init(s *Sim) {
	k.nodes = make([]keptNode, len(s.t.Nodes)+1)
	for i := range s.fab.ports {
		k.nodes[s.fab.ports[i].from].off++ // the out-degree, for now
	}
	off := int32(0)
	for v := range k.nodes {
		deg := k.nodes[v].off
		k.nodes[v] = keptNode{next: maxTime, off: off}
		off += deg
	}
	k.w = make([]keptWake, off)
}

// keeps reports whether port pid's wake at its PAUSE's expiry may be kept
// out of the calendar: the switch it feeds holds its data queue paused.
func (f *pfc) keeps(pid int32) bool {
	s := f.s
	return f.kept.on && !f.kept.off && f.pausedQ[pid*nQ+dataQ] &&
		s.pv.part == nil && s.sur == nil && !s.cfg.PushTies && len(s.cfg.LinkDown) == 0
}

// keep is fabric.wake for a wake kept at port pid (p).
func (f *pfc) keep(pid int32, p *port, at int64) {
	s := f.s
	if at <= s.now {
		at = s.now + 1
	}
	if p.wakeAt != 0 && p.wakeAt <= at && p.wakeAt > s.now {
		return
	}
	p.wakeAt = at
	seq := s.seq(at)
	k := &f.kept
	if k.nodes == nil {
		k.init(s)
	}
	// One still to come at this instant stays an event: a port keeps one.
	f.unkeep(pid)
	nd := &k.nodes[p.from]
	k.w[nd.off+nd.n] = keptWake{at, seq, pid}
	nd.n++
	nd.next = min(nd.next, at)
}

// unkeep puts port pid's kept wake, if any, in the calendar.
func (f *pfc) unkeep(pid int32) {
	k := &f.kept
	if k.nodes == nil {
		return
	}
	v := f.s.fab.ports[pid].from
	l := k.list(v)
	for i, w := range l {
		if w.pid == pid {
			f.s.q.PushSeq(des.Time(w.at), w.seq, evWake, pid, 0)
			l[i] = l[len(l)-1]
			l = l[:len(l)-1]
			next := int64(maxTime)
			for _, w := range l {
				next = min(next, w.at)
			}
			k.nodes[v].n, k.nodes[v].next = int32(len(l)), next
			return
		}
	}
}

// drained is port pid (p) left with no queue pair: with nothing queued
// either, its kept wake is an event again. The wake may then find the port
// busy sending a control frame with no end event (transmit schedules one
// only when something waits), and schedule it, which a kept one cannot.
func (f *pfc) drained(pid int32, p *port) {
	if p.full&(1<<dataQ) == 0 {
		f.unkeep(pid)
	}
}

// look runs the kept wakes of node v's ports that come before the current
// event.
func (f *pfc) look(v int32) {
	if nodes := f.kept.nodes; nodes != nil && nodes[v].next <= f.s.now {
		f.catchUp(v)
	}
}

// catchUp runs node v's kept wakes that come before the current event, in
// their order, each at its own time and number. Nothing a fire does looks
// (fireRun numbers with the node given), so none runs inside another.
func (f *pfc) catchUp(v int32) {
	s := f.s
	now, seq := s.now, s.curSeq
	k := &f.kept
	nd := &k.nodes[v]
	l := k.w[nd.off : nd.off+nd.n]
	next := int64(maxTime)
	if len(l) == 1 {
		// One port's wake (a host's NIC): no scan for the earliest. look
		// calls at its time, when it may still come after the event.
		if w := &l[0]; !w.before(now, seq) || f.fireRun(w, v, now, seq) {
			next = w.at
		} else {
			l = l[:0]
		}
	} else {
		l, next = f.fireAll(l, now, seq, v)
	}
	nd.n, nd.next = int32(len(l)), next
}

// fireAll runs the due wakes of l, node v's, before the event at now
// numbered seq, earliest first, and returns those left and the earliest
// time among them. Mostly one is due and is no longer once run (kept at
// its PAUSE's new expiry): then the scan that found it also gave the
// others' earliest time, and no second scan is needed.
func (f *pfc) fireAll(l []keptWake, now int64, seq uint64, v int32) (_ []keptWake, next int64) {
	for {
		best, dues := -1, 0
		idle := int64(maxTime) // the earliest of the wakes not due
		for i := range l {
			w := &l[i]
			if !w.before(now, seq) {
				idle = min(idle, w.at)
				continue
			}
			if dues++; best < 0 || w.before(l[best].at, l[best].seq) {
				best = i
			}
		}
		if best < 0 {
			return l, idle
		}
		// With others due, it runs until the earliest of them (every due
		// wake comes before the event, and no other does).
		end, endSeq := now, seq
		if dues > 1 {
			for i := range l {
				if w := &l[i]; i != best && w.before(end, endSeq) {
					end, endSeq = w.at, w.seq
				}
			}
		}
		w := &l[best]
		kept := f.fireRun(w, v, end, endSeq)
		if dues == 1 && kept {
			return l, min(idle, w.at)
		}
		if !kept {
			l[best] = l[len(l)-1]
			l = l[:len(l)-1]
			if dues == 1 {
				return l, idle
			}
		}
	}
}

// wakeLog, set by tests, is told of every wake that pops, as an event
// (fabric.onWake) or kept (fireRun): port, time and number. A run with
// kept wakes logs what the same run with every wake an event logs.
var wakeLog func(pid int32, at int64, seq uint64)

// checkLooked has a refresh check that its switch looked before it
// numbers its next refresh without a look (Sim.seqLooked): the PAUSE it
// numbered first looked. Tests set it; a look skipped there changes only
// the order of exact ties, which no trace of theirs showed.
var checkLooked bool

// mustHaveLooked panics when one of node v's kept wakes comes before the
// current event.
func (f *pfc) mustHaveLooked(v int32) {
	if f.kept.nodes == nil {
		return
	}
	for _, w := range f.kept.list(v) {
		if w.before(f.s.now, f.s.curSeq) {
			panic("packet: internal: a node numbered an event without running a kept wake due before it")
		}
	}
}

// before: w pops before the event at (now, seq) in the calendar's order.
func (w *keptWake) before(now int64, seq uint64) bool {
	return w.at < now || w.at == now && w.seq < seq
}

// fireRun is kept wake w of node v popping (fabric.onWake) at its time and
// number, and again at each time it is kept for, while that comes before
// the event at end numbered endSeq: its port is still paused (until a
// RESUME event), so of tryTx it only clears qpTurn and, while the port has
// something to send, wakes again at the expiry, kept in w (it reports
// whether). A busy port's wake does nothing (its transmission's end looks
// again). Anything else would act in the past: a broken invariant, not an
// input's fault. Between its fires nothing else happens at the port, so a
// fire after the first only applies the PAUSEs come meanwhile and renumbers.
func (f *pfc) fireRun(w *keptWake, v int32, end int64, endSeq uint64) bool {
	s := f.s
	p := &s.fab.ports[w.pid]
	now := w.at
	if wakeLog != nil {
		wakeLog(w.pid, now, w.seq)
	}
	if p.lz > 0 {
		f.settleAt(p, now, w.seq)
	}
	if !p.pausedAt(dataQ, now) || now < p.busyUntil && p.txDoneAt != p.busyUntil {
		panic(errWokeFree)
	}
	if p.wakeAt == now {
		p.wakeAt = 0
	}
	if now < p.busyUntil {
		return false
	}
	p.qpTurn = false
	// Control frames go at once, and one queued since (the event that
	// looks, enqueue) was not there then.
	if p.full&(1<<dataQ) == 0 && len(p.qps) == 0 {
		return false
	}
	for {
		at := p.pauseTill[dataQ] // after now: paused
		if p.wakeAt != 0 && p.wakeAt <= at && p.wakeAt > now {
			return false // an earlier wake is an event
		}
		p.wakeAt = at
		w.at, w.seq = at, s.number(v, now, at) // keeps: no TIE_ORDER push
		if !w.before(end, endSeq) {
			return true
		}
		// Its next fire: the port's wake is this one (wakeAt == now).
		now = at
		if wakeLog != nil {
			wakeLog(w.pid, now, w.seq)
		}
		if p.lz > 0 {
			f.settleAt(p, now, w.seq)
		}
		if !p.pausedAt(dataQ, now) {
			panic(errWokeFree)
		}
		p.wakeAt = 0
	}
}

// errWokeFree is a kept wake finding its port free to act.
const errWokeFree = "packet: internal: a kept PAUSE-expiry wake found its port free to act"
