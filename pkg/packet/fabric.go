package packet

import (
	"fmt"
	"math/rand/v2"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// fabric is the network side of the packet core: every directed link's
// egress port (egress.go) with its random streams, the queue pairs'
// paths, and forwarding, per queue pair (ECMP) or per packet (routing.go).
// It moves packets port to port (enqueue, tryTx, transmit, arrive); the
// switches' buffers and PFC are the Sim's mmu and pfc, the endpoints the
// nic. Its methods reach the rest of the Sim (clock, events) through s.
type fabric struct {
	s     *Sim
	ports []port
	// Each port's random streams, 2*port for RED marking as it transmits
	// and 2*port+1 for link errors as packets arrive over it: whichever
	// part of a partitioned run the port is in, and whatever happens
	// elsewhere, its draws are the same. (Kept out of port: its hot fields
	// share fewer cache lines so.)
	rngs []rand.PCG
	// isSwitch: per node, a switch (network or NVSwitch), not a GPU.
	isSwitch []bool

	paths   []route.DirLink // path 2*qp (the QP's data path) and 2*qp+1 (its ACK path), pathW slots each
	pathW   int
	pathLen []uint8

	// Per-packet routing (ROUTING other than ecmp, routing.go): the
	// forwarding policy and forward's scratch.
	fwding forwarding
	hops   []route.DirLink

	// Scratch of routing: a path (routeBuf), and a queue pair's forward
	// and reverse paths being set up (routePart).
	buf      []route.DirLink
	fwd, rev [maxPath]route.DirLink
	fwdLen   uint8
	revLen   uint8
}

func (fa *fabric) dl(pkt *packet) route.DirLink {
	return fa.paths[int(pkt.path)*fa.pathW+int(pkt.hop)]
}

// enqueue puts a packet on a port's queue and starts the port if idle.
func (fa *fabric) enqueue(pi int32, dl route.DirLink) {
	s := fa.s
	pkt := &s.pkts[pi]
	p := &fa.ports[dl]
	p.push(pkt.q, pi)
	p.qBytes[pkt.q] += int64(pkt.wire)
	fa.tryTx(int32(dl))
}

// tryTx starts the next transmission on an idle port: control frames first,
// then forwarded data by priority and queue pairs of a local sender, taking
// turns; paused priorities wait.
//
// A port schedules its transmission-complete event only when something
// waits to follow: an idle link costs no event per packet.
func (fa *fabric) tryTx(pid int32) {
	s := fa.s
	p := &fa.ports[pid]
	s.pfc.look(p.from) // its kept wakes first (pfcwake.go)
	if p.down {
		return
	}
	if s.now < p.busyUntil {
		if p.txDoneAt != p.busyUntil {
			p.txDoneAt = p.busyUntil
			s.push(p.busyUntil, evTxDone, pid, 0)
		}
		return
	}
	if p.full&1 != 0 {
		fa.transmit(pid, p.pop(0), 0)
		return
	}
	s.pfc.settleLooked(p) // its node looked above
	hostFree := s.suspended && !fa.isSwitch[p.from]
	fwd := p.nextQueue(s.now, hostFree)
	if fwd > 0 && (len(p.qps) == 0 || !p.qpTurn) {
		p.qpTurn = true
		fa.transmit(pid, p.pop(fwd), fwd)
		return
	}
	p.qpTurn = false
	if len(p.qps) > 0 && s.nic.sendFromQP(pid) {
		return
	}
	if fwd > 0 {
		fa.transmit(pid, p.pop(fwd), fwd)
		return
	}
	// Nothing sendable now: wake up when a PAUSE expires. A host the
	// surrogate frees is not held by PAUSE (one left from before it opened
	// has expired unrefreshed): waking for it spun every picosecond, a
	// million events per 0.2 us of a 127-to-1 incast under --surrogate.
	if !hostFree {
		s.pfc.wakeAtExpiry(pid, p)
	}
}

// onTxDone is port pid's serialization ending: the next packet goes,
// unless the event is stale (the port was started since).
func (fa *fabric) onTxDone(pid int32) {
	s := fa.s
	if p := &fa.ports[pid]; p.txDoneAt == s.now {
		s.pfc.look(p.from)
		p.txDoneAt, s.cur = 0, p.from
		fa.tryTx(pid)
	}
}

// onWake is port pid's pacing or PAUSE deadline passing.
func (fa *fabric) onWake(pid int32) {
	s := fa.s
	p := &fa.ports[pid]
	s.pfc.look(p.from)
	if wakeLog != nil {
		wakeLog(pid, s.now, s.curSeq)
	}
	if p.wakeAt == s.now {
		p.wakeAt = 0
	}
	s.cur = p.from
	fa.tryTx(pid)
}

// wake schedules a port re-check (the earliest pending one wins).
func (fa *fabric) wake(pid int32, at int64) {
	s := fa.s
	p := &fa.ports[pid]
	if at <= s.now {
		at = s.now + 1
	}
	if p.wakeAt != 0 && p.wakeAt <= at && p.wakeAt > s.now {
		return
	}
	p.wakeAt = at
	s.push(at, evWake, pid, 0)
}

// transmit serializes a packet taken from queue q, or built by a local
// sender when q < 0.
func (fa *fabric) transmit(pid int32, pi int32, q int) {
	s := fa.s
	p := &fa.ports[pid]
	pkt := &s.pkts[pi]
	if q >= 0 {
		p.qBytes[q] -= int64(pkt.wire)
		if pkt.inDL >= 0 {
			s.pfc.leave(pkt)
		}
	}
	if pkt.kind == pktData && p.marks && !pkt.ecn {
		pkt.ecn = p.red(p.qBytes[pkt.q], &fa.rngs[2*pid])
	}
	if p.inINT && pkt.kind == pktData && pkt.intI >= 0 {
		n := s.intN[pkt.intI]
		if int(n) < cc.MaxHops {
			s.ints[pkt.intI][n] = cc.IntHop{TimePs: s.now, TxBytes: p.txBytes, QLen: p.qBytes[pkt.q], LineRate: p.bw}
			s.intN[pkt.intI] = n + 1
		}
	}
	tx := int64(float64(pkt.wire)*p.bitPs + 0.5)
	if pkt.kind == pktData {
		s.watch.lastMove[p.from], s.watch.lastMoveAny, s.watch.portMove[pid] = s.now, s.now, s.now
	}
	// Under the surrogate it leaves its NIC (a data packet at the port's
	// measured rate when the fabric saturated it) and skips the fabric.
	bypass := s.bypassing && pkt.hop == 0 && pkt.zombie == 0
	if bypass && pkt.kind == pktData {
		tx = s.sur.nicTime(pid, int64(pkt.wire))
	}
	p.busyUntil = s.now + tx
	p.txBytes += int64(pkt.wire)
	switch {
	case bypass:
		s.sur.bypass(pi, tx)
	case s.pv.abroad(p.to):
		s.pv.sendAway(pi, s.now+tx+p.lat, p.to, pid)
	default:
		// The link rides in the event (plus one: 0 leaves arrive to read
		// the packet's path), so that the loop can load its port ahead.
		s.push(s.now+tx+p.lat, evArrive, pi, int64(pid)+1)
	}
	if len(p.qps) > 0 || p.full != 0 { // a queued packet has bytes: full is qBytes != 0
		p.txDoneAt = p.busyUntil
		s.push(p.busyUntil, evTxDone, pid, 0)
	}
}

// arrive handles a packet reaching the far end of its current link:
// link+1 when the event carries it (transmit), else 0.
func (fa *fabric) arrive(pi int32, link int64) {
	s := fa.s
	pkt := &s.pkts[pi]
	if pkt.ep != s.nic.epoch[pkt.qp] {
		fa.stale(pi)
		return
	}
	var dl route.DirLink
	switch {
	case link > 0:
		dl = route.DirLink(link - 1)
	case fa.fwding.perPacket() && pkt.kind == pktData:
		dl = route.DirLink(pkt.link)
	default:
		dl = fa.dl(pkt)
	}
	p := &fa.ports[dl]
	s.cur = p.to
	if p.down || (p.lossProb > 0 && unit(&fa.rngs[2*dl+1]) < p.lossProb) {
		fa.drop(pi)
		return
	}
	if int(pkt.hop)+1 == int(fa.pathLen[pkt.path]) {
		if pkt.zombie != 0 {
			s.sur.freeZombie(pi) // its copy goes through the predictor
			return
		}
		if s.surWatch {
			s.sur.track(pkt)
		}
		s.nic.deliver(pi)
		return
	}
	v := p.to
	pkt.inDL = int32(dl)
	pkt.hop++
	if !s.pfc.enter(v, pkt) {
		pkt.inDL = -1
		fa.drop(pi)
		return
	}
	next := fa.dl(pkt)
	if fa.fwding.perPacket() && pkt.kind == pktData {
		next = fa.forward(pkt, v)
		pkt.link = int32(next)
	}
	fa.enqueue(pi, next)
}

// stale discards a packet its queue pair no longer expects: one of a
// finished pair (a duplicate ACK, a retransmission overtaken by the final
// ACK) or one in flight when the pair moved to a new path. Its payload
// counts as discarded, sent and not delivered, but the network did not
// lose it: counted as dropped, a spurious timeout's copies read as loss
// on a lossless fabric (133 "drops" in a 4096-GPU AllToAll under PFC).
func (fa *fabric) stale(pi int32) {
	s := fa.s
	pkt := &s.pkts[pi]
	if pkt.inDL >= 0 {
		s.pfc.leave(pkt)
	}
	if pkt.zombie != 0 { // its copy goes through the predictor
		s.sur.freeZombie(pi)
		return
	}
	s.stats.Stale++
	s.stats.Discarded += int64(pkt.size)
	s.freePacket(pi)
}

func (fa *fabric) drop(pi int32) {
	s := fa.s
	if s.pkts[pi].zombie != 0 {
		s.sur.freeZombie(pi) // a duplicate of a packet the predictor delivers
		return
	}
	s.stats.Dropped++
	s.stats.DroppedBytes += int64(s.pkts[pi].size)
	s.freePacket(pi)
}

// routePart routes part j of transfer i into fa.fwd and fa.rev, as its
// queue pair will be.
func (fa *fabric) routePart(i int32, j int64) error {
	s := fa.s
	f := s.flows
	src, dst := f.src(i), f.dst(i)
	h := route.QPHash(src, dst, s.hashID(i), j, s.seed)
	if err := fa.route(&fa.fwd, &fa.fwdLen, src, dst, h, f.port(i, int(j))); err != nil {
		return fmt.Errorf("%s: %v", f.name(i), err)
	}
	if err := fa.route(&fa.rev, &fa.revLen, dst, src, h^0x5bd1e995, -1); err != nil {
		return fmt.Errorf("%s (acknowledgements): %v", f.name(i), err)
	}
	return nil
}

// routedIdeal is transfer i's ideal FCT over the paths routePart left in
// fa.fwd and fa.rev.
func (fa *fabric) routedIdeal(i int32, cell uint16) int64 {
	s := fa.s
	return fa.idealFCT(s.partSize(i, 0), fa.idealPath(fa.fwd[:fa.fwdLen], fa.rev[:fa.revLen]), cell)
}

func (fa *fabric) idealPath(fwd, rev []route.DirLink) idealPath {
	var a idealPath
	b := 0
	for k, dl := range fwd {
		if fa.ports[dl].bw < fa.ports[fwd[b]].bw {
			b = k
		}
	}
	for k, dl := range fwd {
		p := &fa.ports[dl]
		a.prop += p.lat
		if k == b {
			a.bottle = p.bitPs
		} else {
			a.other += p.bitPs
		}
	}
	for _, dl := range rev {
		a.prop += fa.ports[dl].lat
	}
	return a
}

// idealFCT is a queue pair of size bytes alone on the fabric, a lower bound
// on its FCT: the send latency, propagation both ways (the completing ACK's
// serialization left out), every packet with its header through the
// bottleneck, and its smallest packet stored and forwarded at every other
// hop (some packet is first through the bottleneck, and some last). SimAI's
// standalone FCT (a full-MTU packet at every hop plus size / bottleneck)
// exceeds the measured FCT of a transfer of a few packets: on a 16 Gb/s
// dragonfly 4 KiB transfers read slowdown 0.75 (issue 32).
func (fa *fabric) idealFCT(size int64, a idealPath, cell uint16) int64 {
	s := fa.s
	pay, hdr := int64(s.cfg.PayloadSize), float64(s.cfg.HeaderBytes)
	if cell != 0 {
		// NVLink cells (nvcell.go): the size's share of the headers,
		// the smallest cell stored and forwarded.
		h := int64(s.cfg.HeaderBytes)
		last := size - (size-1)/int64(cell)*int64(cell)
		smallest := float64(last + (h*last+pay-1)/pay)
		wire := float64(size) + float64(h*size)/float64(pay)
		return s.sendLatPs + a.prop + int64(wire*a.bottle+smallest*a.other)
	}
	n := packets(size, pay)
	smallest := float64(size-(n-1)*pay) + hdr
	wire := float64(size) + float64(n)*hdr
	return s.sendLatPs + a.prop + int64(wire*a.bottle+smallest*a.other)
}

// packets is how many packets of pay bytes carry size bytes (at least
// one), without a division for a transfer that fits in one.
func packets(size, pay int64) int64 {
	if size <= pay {
		return 1
	}
	return (size + pay - 1) / pay
}

// routeBuf computes the path from a to b into fa.buf, refusing one longer
// than a packet's route can hold.
func (fa *fabric) routeBuf(a, b int32, h uint64, port int) error {
	s := fa.s
	var err error
	fa.buf, err = s.r.AppendPathPort(fa.buf[:0], a, b, h, port)
	if err != nil {
		return err
	}
	if len(fa.buf) > maxPath {
		return fmt.Errorf("path from %d to %d has %d hops, more than %d", a, b, len(fa.buf), maxPath)
	}
	return nil
}

// route computes a path from a to b into a fixed buffer.
func (fa *fabric) route(dst *[maxPath]route.DirLink, n *uint8, a, b int32, h uint64, port int) error {
	if err := fa.routeBuf(a, b, h, port); err != nil {
		return err
	}
	copy(dst[:], fa.buf)
	*n = uint8(len(fa.buf))
	return nil
}

// setPath routes path id pid from node a to node b, on NIC port port of a
// dual-homed source (-1: by the hash). The router also takes a GPU to or
// from its NVSwitch (NVLS) over their direct links, and knows which links
// have failed.
func (fa *fabric) setPath(pid int32, a, b int32, h uint64, port int) error {
	if err := fa.routeBuf(a, b, h, port); err != nil {
		return err
	}
	if len(fa.buf) > fa.pathW {
		fa.widenPaths(len(fa.buf))
	}
	copy(fa.paths[int(pid)*fa.pathW:], fa.buf)
	fa.pathLen[pid] = uint8(len(fa.buf))
	return nil
}

// path is path pid's hops.
func (fa *fabric) path(pid int32) []route.DirLink {
	o := int(pid) * fa.pathW
	return fa.paths[o : o+int(fa.pathLen[pid])]
}

// widenPaths gives every path at least n slots. Paths start with 6 (the
// families here need at most 6; 16 slots for each of a queue pair's two
// paths were a fifth of its memory), and a longer route re-lays them all
// once.
func (fa *fabric) widenPaths(n int) {
	w := min(max(2*fa.pathW, n), maxPath)
	wide := make([]route.DirLink, len(fa.pathLen)*w)
	for pid := range fa.pathLen {
		copy(wide[pid*w:], fa.paths[pid*fa.pathW:(pid+1)*fa.pathW])
	}
	fa.paths, fa.pathW = wide, w
}

// baseRTT is the unloaded round trip, as SimAI's pairRtt: propagation both
// ways and a full packet serialized at every hop out (the ACK's own
// serialization is negligible). It sets the ideal FCT.
//
// The window (HAS_WIN) covers that round trip plus what an ACK may wait at
// each hop back: ACKs have priority but do not preempt, so one may queue
// behind a full data packet at every hop. With SimAI's plain
// bandwidth-delay product a flow whose receiver sends data of its own (every
// ring step) loses a fifth of its rate to that wait; with this margin an
// unloaded flow keeps line rate either way.
func (fa *fabric) baseRTT(fwd, rev []route.DirLink, lineRate float64) (rtt, win int64) {
	s := fa.s
	mtu := float64(s.cfg.PayloadSize + s.cfg.HeaderBytes)
	var ackWait int64
	for _, dl := range fwd {
		p := &fa.ports[dl]
		rtt += p.lat + int64(mtu*p.bitPs+0.5)
	}
	for _, dl := range rev {
		p := &fa.ports[dl]
		rtt += p.lat
		ackWait += int64((mtu+float64(s.cfg.AckBytes))*p.bitPs + 0.5)
	}
	win = int64(float64(rtt+ackWait) * lineRate / 8e12)
	if n := s.cfg.AckCoalesce; n > 1 {
		// ACK_COALESCE holds a packet's ACK back for up to n-1 more:
		// room for them, or the window stalls an unloaded flow.
		win += int64(n-1) * int64(mtu)
	}
	return rtt, max(win, int64(s.cfg.PayloadSize+s.cfg.HeaderBytes))
}

func (fa *fabric) bottleneck(path []route.DirLink) float64 {
	bw := 0.0
	for _, dl := range path {
		if b := fa.ports[dl].bw; bw == 0 || b < bw {
			bw = b
		}
	}
	return bw
}

// linkDown fails both directions of a link: what is on the wire and what
// waits in its queues is lost. Routing converges at once: later queue
// pairs avoid the link, and the ones crossing it move to a new path,
// losing what they had in flight (a new epoch: stale packets are dropped
// where they are) and going back to their first unacknowledged byte.
func (fa *fabric) linkDown(li int32) error {
	s := fa.s
	if err := s.r.Fail(li); err != nil {
		return err
	}
	if s.surWatch {
		s.sur.linkDown()
	}
	s.downLinks++
	if s.downNames != "" {
		s.downNames += ", "
	}
	s.downNames += fmt.Sprintf("%d (%s)", li, fa.linkName(li))
	for dir := int32(0); dir < 2; dir++ {
		p := &fa.ports[2*li+dir]
		p.down = true
		for q := 0; q < nQ; q++ {
			for p.q[q].len() > 0 {
				pi := p.pop(q)
				p.qBytes[q] -= int64(s.pkts[pi].wire)
				if pkt := &s.pkts[pi]; pkt.inDL >= 0 {
					s.pfc.leave(pkt)
				}
				fa.drop(pi)
			}
		}
	}
	for qi := range s.nic.qps {
		q := &s.nic.qps[qi]
		if q.done || q.size == 0 || !(fa.crosses(int32(2*qi), li) || fa.crosses(int32(2*qi+1), li)) {
			continue
		}
		old := q.port
		src, dst := s.flows.src(q.flow), s.flows.dst(q.flow)
		h := route.FlowHash(src, dst, s.hashID(q.flow)*64+int64(q.sport), s.seed^0xfa11)
		err := fa.setPath(int32(2*qi), src, dst, h, -1)
		if err == nil {
			err = fa.setPath(int32(2*qi+1), dst, src, h^0x5bd1e995, -1)
		}
		if err != nil {
			s.nic.failFlow(q.flow, fmt.Errorf("%s failed at %s: link %d (%s) went down and left it no path (%v)",
				s.flows.name(q.flow), des.Time(s.now), li, fa.linkName(li), err))
			continue
		}
		s.nic.epoch[qi]++
		q.sndNxt = q.sndUna
		q.port = int32(fa.paths[int(2*qi)*fa.pathW])
		if q.port != old {
			s.nic.removeQP(old, int32(qi))
			s.nic.addQP(q.port, int32(qi))
		}
		fa.tryTx(q.port)
	}
	return nil
}

// noPath handles a transfer that cannot be routed when it starts: with
// links down, it fails (and the run goes on); otherwise it is an error.
func (fa *fabric) noPath(i int32, err error) error {
	s := fa.s
	if s.downLinks == 0 {
		return fmt.Errorf("%s: %v", s.flows.name(i), err)
	}
	s.nic.failFlow(i, fmt.Errorf("%s failed at %s: link %s went down and left it no path (%v)", s.flows.name(i), des.Time(s.now), s.downNames, err))
	return nil
}

// linkName names a link by its two nodes.
func (fa *fabric) linkName(li int32) string {
	s := fa.s
	l := &s.t.Links[li]
	return fmt.Sprintf("%d-%d", l.A, l.B)
}

func (fa *fabric) crosses(pid int32, li int32) bool {
	for _, dl := range fa.path(pid) {
		if dl.Link() == li {
			return true
		}
	}
	return false
}

// nodeName is "GPU n" or "switch n".
func (fa *fabric) nodeName(v int32) string {
	s := fa.s
	if s.t.Nodes[v].Kind == stream.NodeGPU {
		return fmt.Sprintf("GPU %d", v)
	}
	return fmt.Sprintf("switch %d", v)
}
