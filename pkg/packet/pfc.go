package packet

import (
	"math"
	"math/bits"

	"github.com/fabricsim/fabricsim/pkg/des"
)

// Priority flow control, both PFC_MODEs, in one place: the frames a
// switch sends upstream, what they do to the egress port they reach, the
// refreshes, PFC_MODE port's ingress accounting, and when a stalled
// fabric is looked at for a deadlock (waitfor.go finds the cycle).
//
//   - priority (SimAI's): each ingress queue of a switch has its share of
//     the shared buffer (the MMU's dynamic threshold, mmu.go, decides when
//     it is over); above it the switch PAUSEs that priority upstream for
//     PAUSE_TIME, refreshing at half of it while still over, and RESUMEs
//     once the queue drains below the threshold by the resume offset.
//   - port: the switch accounts each ingress port as one queue, as htsim's
//     lossless input queues and many switches do. Above the high
//     threshold it sends one PAUSE for the whole port; the upstream egress
//     stops every data priority until a RESUME, which comes once the port
//     has drained below the low threshold. No refresh, no dynamic
//     threshold, no headroom: the gap between the buffer and the high
//     threshold absorbs what is in flight. Control frames (ACK, NACK, CNP)
//     still pass, as they do under priority PFC. A switch whose buffer is
//     nevertheless full drops.
//
// Control frames (queue 0) are never admitted, paused or accounted.

// portPFC is the queue number a port-wide PAUSE or RESUME carries.
const portPFC = -1

// pfc is the Sim's flow control. It reaches the Sim for the clock, the
// events and the ports; the state below is its own.
type pfc struct {
	s *Sim
	// priority: per ingress queue of a switch (dl*nQ + q), whether it has
	// paused its sender; the MMU (mmu.go) decides when to pause and resume.
	pausedQ []bool
	// port: PFC_MODE port. Then per directed link into a switch: the bytes
	// its ingress port holds and whether it has paused its sender; high
	// and low are the marks.
	port      bool
	ing       []int64
	pausedUp  []bool
	high, low int64
	// kept: the PAUSE-expiry wakes kept out of the calendar (keep).
	kept keptWakes
	// pauseTime is PAUSE_TIME, half (PAUSE_TIME/2) a refresh's period,
	// stallMin the stall window's least (waitWatch.stallWindow): read by
	// every PAUSE applied and every refresh.
	pauseTime, half, stallMin int64
}

func newPFC(s *Sim, cfg *Config, links int) pfc {
	f := pfc{s: s, port: cfg.PortPFC, pauseTime: cfg.PauseTimePs, half: cfg.PauseTimePs / 2, stallMin: stallPauses * cfg.PauseTimePs}
	if !f.port {
		f.pausedQ = make([]bool, links*nQ)
		f.kept.on = cfg.PauseTimePs >= 2 // a refresh comes before the expiry
	} else {
		f.high, f.low = cfg.portThresholds()
		f.ing = make([]int64, links)
		f.pausedUp = make([]bool, links)
	}
	return f
}

// portThresholds returns PFC_MODE port's high and low thresholds in
// bytes, htsim's 15 and 12 packets unless configured.
func (c *Config) portThresholds() (high, low int64) {
	pkt := float64(c.PayloadSize + c.HeaderBytes)
	kb := func(x, pkts float64) int64 {
		if x == 0 {
			return int64(pkts * pkt)
		}
		return int64(math.Round(x * 1024))
	}
	return kb(c.PortHighKB, 15), kb(c.PortLowKB, 12)
}

// enter admits a packet into switch v's buffer, accounting it to the link
// it came in on, and sends PAUSE upstream when that queue (or port) is
// over its share. Control frames bypass admission.
func (f *pfc) enter(v int32, pkt *packet) bool {
	if pkt.q == 0 {
		return true
	}
	s := f.s
	if f.port {
		return f.enterPort(v, pkt)
	}
	k := pkt.inDL*nQ + int32(pkt.q)
	ok, pause := s.mmu.admit(v, pkt.inDL, pkt.q, int64(pkt.wire), f.pausedQ[k])
	if pause {
		f.pausedQ[k] = true
		f.send(pkt.inDL, int(pkt.q), true)
		s.push(s.now+f.half, evPFCRefresh, k, 0)
	}
	return ok
}

// leave releases a departing packet's buffer and resumes the upstream
// queue once the MMU says it may go on.
func (f *pfc) leave(pkt *packet) {
	if pkt.q == 0 {
		return
	}
	if f.port {
		f.leavePort(pkt)
		return
	}
	s := f.s
	dl := pkt.inDL
	pkt.inDL = -1
	if k := dl*nQ + int32(pkt.q); s.mmu.release(s.fab.ports[dl].to, dl, pkt.q, int64(pkt.wire), f.pausedQ[k]) {
		f.pausedQ[k] = false
		f.send(dl, int(pkt.q), false)
	}
}

// refresh re-sends PAUSE before the previous one expires, for as long as
// ingress queue k stays above its threshold. A switch that has sent
// nothing for the stall window meanwhile has the run look for a deadlock
// (waitfor.go).
func (f *pfc) refresh(k int32) {
	s := f.s
	dl := int32(uint32(k) / nQ) // k >= 0: a shift, not a signed division
	// The port's first cache line holds its node, its link's latency and
	// how many PAUSEs wait (lz): a table of the nodes beside it missed the
	// cache too.
	p := &s.fab.ports[dl]
	v := p.to
	s.cur = v
	if !f.pausedQ[k] {
		return
	}
	if d := s.now - s.watch.lastMove[v]; d > f.stallMin && d > s.watch.stallWindow() {
		if s.watch.stalledSwitch(v, k); s.watch.stalled != nil {
			return
		}
	}
	q := int(uint32(k) % nQ)
	if p.lz < lzCap && s.pv.part == nil && !s.suspended && s.mon == nil {
		// send's common case for a refresh (kept at its port) without its
		// others: a refresh is most of a PFC-heavy incast's events.
		s.stats.Pauses++
		at := s.now + p.lat
		p.lzPush(lzFrame{at: at, seq: s.seq(at), q: int8(q)})
	} else {
		f.send(dl, q, true)
	}
	if checkLooked {
		f.mustHaveLooked(v)
	}
	at := s.now + f.half
	s.q.PushSeq(des.Time(at), s.seqLooked(at), evPFCRefresh, k, 0)
}

// send sends PAUSE or RESUME for queue q to the port feeding link dl; a
// PFC frame is tiny and jumps the queue, so it arrives one propagation
// delay later.
func (f *pfc) send(dl int32, q int, pause bool) {
	s := f.s
	arg := int64(q) << 1
	if pause {
		arg |= 1
		s.stats.Pauses++
	}
	p := &s.fab.ports[dl]
	at := s.now + p.lat
	switch up := p.from; {
	case s.pv.abroad(up):
		s.pv.postPFC(up, at, s.seq(at), dl, arg)
	case pause && p.lz < lzCap && !s.suspended:
		p.lzPush(lzFrame{at: at, seq: s.seq(at), q: int8(q)})
	default:
		s.push(at, evPFC, dl, arg)
	}
	if s.mon != nil {
		mq := q
		if q == portPFC {
			mq = dataQ // a port-wide frame, logged on the data priority
		}
		s.mon.pfc(s.now, s.fab.ports[dl].to, s.fab.ports[dl].from, mq, pause)
	}
}

// frame is a PFC frame (evPFC's arg) reaching egress port pid.
func (f *pfc) frame(pid int32, arg int64) {
	s := f.s
	p := &s.fab.ports[pid]
	s.cur = p.from
	f.look(p.from)
	f.settleLooked(p)
	q := int(arg >> 1)
	if arg&1 == 1 {
		f.pause(p, q, s.now)
		return
	}
	if q == portPFC {
		f.portFrame(pid, false)
		return
	}
	f.unkeep(pid) // the port may send again: its wake is an event again
	p.paused[q] = false
	s.fab.tryTx(pid)
}

// pause applies a PAUSE of queue q (portPFC: the whole port) that reached
// egress port p at time at.
func (f *pfc) pause(p *port, q int, at int64) {
	if q == portPFC {
		for q := 1; q < nQ; q++ {
			p.paused[q] = true
			p.pauseTill[q] = maxTime
		}
		return
	}
	p.paused[q] = true
	p.pauseTill[q] = at + f.pauseTime
}

// A PAUSE, unlike a RESUME, does nothing when it arrives but set its
// egress port's state, which only the port's own events and a few
// lookers read. So a PAUSE to a port of this part skips the calendar (in
// a PFC-heavy incast PAUSE arrivals were a third of the events): the port
// keeps it, with the time and number its event would have had (send), and
// applies it once an event that would have popped after it looks
// (settle). A port keeps up to lzCap (PAUSEs to one port arrive in the
// order sent: one link's latency, one sender); more, every RESUME, frames
// from another part and frames while the surrogate holds the fabric are
// events as before, and frame settles the waiting ones first, so frames
// still apply in their order.

// lzCap is how many PAUSEs a port keeps out of the calendar: SimAI's
// refreshes pile up (a queue that resumes and pauses again within half a
// PAUSE_TIME keeps its old refresh going beside the new one). A power of
// two: the waiting PAUSEs are a ring (lzHead), so applying the oldest
// moves none of the others (in a 127-to-1 incast most settles applied one
// of two or three).
const lzCap = 4

// lzFrame is a PAUSE of queue q (portPFC: the port) reaching a port at
// time at, its event numbered seq.
type lzFrame struct {
	at  int64
	seq uint64
	q   int8
}

// lzAt is the i-th oldest waiting PAUSE.
func (p *port) lzAt(i int) *lzFrame { return &p.lzs[(int(p.lzHead)+i)&(lzCap-1)] }

// lzPush appends a waiting PAUSE (p.lz < lzCap).
func (p *port) lzPush(e lzFrame) {
	*p.lzAt(int(p.lz)) = e
	p.lz++
}

// settle applies port p's waiting PAUSEs whose events would have popped
// before the event being handled.
func (f *pfc) settle(p *port) {
	f.look(p.from) // its node's kept wakes saw the port before (pfcwake.go)
	f.settleLooked(p)
}

// settleLooked is settle where p's node has just looked (a second look
// finds nothing due: a 127-to-1 incast made four million of them).
func (f *pfc) settleLooked(p *port) {
	if p.lz > 0 {
		f.settleAt(p, f.s.now, f.s.curSeq)
	}
}

// settleAt applies port p's waiting PAUSEs whose events would have popped
// before one at time now numbered seq.
func (f *pfc) settleAt(p *port, now int64, seq uint64) {
	// The ring's head and count in locals, written back once.
	h, n := p.lzHead, p.lz
	for ; n > 0; n-- {
		e := &p.lzs[h&(lzCap-1)]
		if e.at > now || e.at == now && e.seq >= seq {
			break
		}
		f.pause(p, int(e.q), e.at)
		h++
	}
	p.lz, p.lzHead = n, h&(lzCap-1)
}

// settleAll applies every waiting PAUSE whose event would have popped
// before one at time now numbered seq (a look across all ports).
func (f *pfc) settleAll(now int64, seq uint64) {
	for v := range f.kept.nodes {
		f.look(int32(v)) // the kept wakes saw the ports before (pfcwake.go)
	}
	for pid := range f.s.fab.ports {
		f.settleAt(&f.s.fab.ports[pid], now, seq)
	}
}

// unsettle puts the waiting PAUSEs back in the calendar as the events
// they stand for, for the surrogate to hold while it suspends the fabric.
func (f *pfc) unsettle() {
	s := f.s
	for pid := range s.fab.ports {
		p := &s.fab.ports[pid]
		for i := range int(p.lz) {
			e := p.lzAt(i)
			s.q.PushSeq(des.Time(e.at), e.seq, evPFC, int32(pid), int64(e.q)<<1|1)
		}
		p.lz, p.lzHead = 0, 0
	}
}

// holds reports whether priority q of egress port p is paused now. A
// suspended fabric (--surrogate, not lite) does not hold hosts back.
func (f *pfc) holds(p *port, q int) bool {
	f.settleLooked(p) // its only caller, tryTx, looked
	return p.pausedNow(q, f.s.now, f.s.suspended && !f.s.fab.isSwitch[p.from])
}

// wakeAtExpiry has port pid (p) look again when a PAUSE holding back
// something it has to send expires.
func (f *pfc) wakeAtExpiry(pid int32, p *port) {
	// The data queues with something to send: those holding packets, or
	// all of them for a port with queue pairs. Set bits only, in order.
	m := uint(p.full) &^ 1
	if len(p.qps) > 0 {
		m = 1<<nQ - 2
	}
	for ; m != 0; m &= m - 1 {
		if i := bits.TrailingZeros(m); p.paused[i] {
			if i == dataQ && f.keeps(pid) {
				f.keep(pid, p, p.pauseTill[i])
				continue
			}
			f.s.fab.wake(pid, p.pauseTill[i])
		}
	}
}

// pausedAt reports whether priority q of the port is paused at now
// (reading only: its waiting PAUSEs settled, pfc.settle).
func (p *port) pausedAt(q uint8, now int64) bool { return p.paused[q] && now < p.pauseTill[q] }

// pausedNow reports whether priority q is paused at now; a PAUSE that
// expired without a refresh is cleared. hostFree: the port is a host's and
// a suspended fabric (--surrogate) does not hold hosts back.
func (p *port) pausedNow(q int, now int64, hostFree bool) bool {
	if !p.paused[q] || hostFree {
		return false
	}
	if now >= p.pauseTill[q] { // PAUSE expired without a refresh
		p.paused[q] = false
		return false
	}
	return true
}

// --- PFC_MODE port ---

// enterPort admits a data packet into switch v under port PFC.
func (f *pfc) enterPort(v int32, pkt *packet) bool {
	s := f.s
	dl := pkt.inDL
	ok, pause := f.admitPort(&s.mmu, v, dl, int64(pkt.wire))
	if ok {
		s.stats.PeakIngress = max(s.stats.PeakIngress, f.ing[dl])
	}
	if pause {
		f.send(dl, portPFC, true)
	}
	return ok
}

// leavePort releases a departing data packet's bytes and resumes the
// sender once the port is below the low threshold.
func (f *pfc) leavePort(pkt *packet) {
	s := f.s
	dl := pkt.inDL
	pkt.inDL = -1
	if f.releasePort(&s.mmu, s.fab.ports[dl].to, dl, int64(pkt.wire)) {
		f.send(dl, portPFC, false)
	}
}

// admitPort takes a data packet's size bytes into switch v's ingress port
// dl, its buffer m: ok false when the buffer is full; pause when the port
// has just gone over its high mark.
func (f *pfc) admitPort(m *mmu, v, dl int32, size int64) (ok, pause bool) {
	if m.shared[v]+size > m.buffer[v] {
		return false, false
	}
	m.shared[v] += size // the node's whole occupancy in this mode
	f.ing[dl] += size
	if !f.pausedUp[dl] && f.ing[dl] > f.high {
		f.pausedUp[dl] = true
		return true, true
	}
	return true, false
}

// releasePort gives back size bytes of port dl of switch v; resume once
// the port is below its low mark.
func (f *pfc) releasePort(m *mmu, v, dl int32, size int64) (resume bool) {
	m.shared[v] -= size
	f.ing[dl] -= size
	if f.pausedUp[dl] && f.ing[dl] < f.low {
		f.pausedUp[dl] = false
		return true
	}
	return false
}

// portFrame pauses (until resumed) or resumes every data priority of
// egress port pid.
func (f *pfc) portFrame(pid int32, pause bool) {
	p := &f.s.fab.ports[pid]
	for q := 1; q < nQ; q++ {
		p.paused[q] = pause
		p.pauseTill[q] = maxTime
	}
	if !pause {
		f.s.fab.tryTx(pid)
	}
}

// deadlocked looks for a deadlock (waitfor.go) when, under port PFC,
// nothing has moved for the stall window while a port is still paused:
// without refreshes only a retransmission timeout keeps such a run's
// clock going. It reports whether the run stops.
func (f *pfc) deadlocked() bool {
	s := f.s
	if !f.port || s.watch.stalled != nil || s.now-s.watch.lastMoveAny <= s.watch.stallWindow() || !f.anyPaused() {
		return s.watch.stalled != nil
	}
	if s.pv.part != nil {
		s.watch.suspect, s.watch.v, s.watch.k = true, -1, -1
		return false
	}
	s.watch.lookForDeadlock([]*Sim{s}, s.now, -1, -1)
	return s.watch.stalled != nil
}

// anyPaused reports whether some ingress port holds its sender paused.
func (f *pfc) anyPaused() bool {
	for _, up := range f.pausedUp {
		if up {
			return true
		}
	}
	return false
}
