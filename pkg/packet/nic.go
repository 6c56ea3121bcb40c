package packet

import (
	"fmt"

	"github.com/fabricsim/fabricsim/internal/grow"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/expand"
)

// qp is one RDMA queue pair: the sender's window and rate state and the
// receiver's expected sequence number.
//
// A 4096-GPU AllToAll holds millions at once, so it keeps only what every
// pair uses (240 bytes): its ends are its flow's, the surrogate's caches
// and HPCC's INT history live in tables of their own.
type qp struct {
	size      int64
	sndNxt    int64
	sndUna    int64
	maxSent   int64
	nextAvail int64
	lastProg  int64
	ccWake    int64
	ccGen     int64
	rtoGen    int64
	rtoAt     int64
	rcvNext   int64
	nackAt    int64
	nackSeq   int64
	flow      int32
	port      int32 // first-hop port of the data path
	slot      int32 // index in its port's round robin
	rcvCount  int32
	sport     uint16
	rxDone    bool // the receiver has every byte
	rcvECN    bool
	done      bool
	parked    bool // done, its slot waiting for its last packets (recycle)
	cc        cc.State
}

// surQP is a queue pair's surrogate state.
type surQP struct {
	predData int64 // predicted latency of data and of control packets
	predCtl  int64
	latData  int32 // latency class of data and of control packets + 1, 0 before the first
	latCtl   int32
}

func (s *Sim) allocQP() int32 {
	if n := len(s.freeQP); n > 0 {
		i := s.freeQP[n-1]
		s.freeQP = s.freeQP[:n-1]
		return i
	}
	s.qps = grow.Append(s.qps, qp{})
	if s.usesINT {
		s.hist = grow.Append(s.hist, cc.HopHistory{})
	}
	if s.surWatch {
		s.sur.addQP()
	}
	s.fwding.addQP()
	s.tp.addQP()
	s.epoch = grow.Append(s.epoch, 0)
	s.live = grow.Append(s.live, 0)
	if s.part != nil {
		s.shadowOf = append(s.shadowOf, qpKey{qp: -1})
	}
	for range 2 * s.pathW {
		s.paths = grow.Append(s.paths, 0)
	}
	s.pathLen = grow.Append(s.pathLen, 0, 0)
	return int32(len(s.qps) - 1)
}

// addPending puts a pending queue pair, part j of transfer flow, in its
// port's round robin as ^(flow<<pendShift | j): the slot itself says what
// to open, so a pending pair costs its four bytes there and nothing more.
func (s *Sim) addPending(pid int32, flow, j int32) {
	p := &s.ports[pid]
	p.qps = append(p.qps, ^(flow<<s.pendShift | j))
}

// pending is the transfer and part a pending slot addPending made stands for.
func (s *Sim) pending(slot int32) (flow int32, j int64) {
	k := ^slot
	return k >> s.pendShift, int64(k & (1<<s.pendShift - 1))
}

// materialize gives the pending queue pair at slot i of port pid's round
// robin its state, as opening it would have.
func (s *Sim) materialize(pid int32, i int) int32 {
	p := &s.ports[pid]
	flow, j := s.pending(p.qps[i])
	qi := s.allocQP()
	if err := s.initQP(qi, flow, j); err != nil {
		panic(fmt.Sprintf("packet: queue pair routed when opened fails later: %v", err)) // same inputs, same route
	}
	p.qps[i] = qi
	s.qps[qi].slot = int32(i)
	return qi
}

// sendFromQP lets the port's queue pairs send one data packet, round robin,
// each within its window and pacing rate. It returns whether it sent.
func (s *Sim) sendFromQP(pid int32) bool {
	p := &s.ports[pid]
	if s.pfc.holds(p, dataQ) {
		return false
	}
	earliest := int64(-1)
	n := len(p.qps)
	for k := 0; k < n; k++ {
		if p.qpRR >= len(p.qps) {
			p.qpRR = 0
		}
		qi := p.qps[p.qpRR]
		if qi < 0 {
			// Pending: nothing sent, so neither window nor pacing holds it.
			qi = s.materialize(pid, p.qpRR)
			p.qpRR++
			s.sendData(pid, qi, 0)
			return true
		}
		q := &s.qps[qi]
		p.qpRR++
		// A selective retransmission goes first; the window, which it is
		// inside, does not hold it back.
		seq := s.tp.retransmit(q, qi)
		switch {
		case seq >= 0:
		case q.sndNxt >= q.size:
			continue
		case s.cfg.HasWin:
			win := q.cc.BaseWin
			if s.cfg.VarWin {
				win = int64(float64(win) * q.cc.Rate / q.cc.LineRate)
				if win < 1 {
					win = 1
				}
			}
			// SACKed packets have left the network (RFC 6675's pipe):
			// new data keeps flowing while a hole is repaired, and its
			// SACKs tell whether a repair was lost again.
			inflight := q.sndNxt - q.sndUna - s.tp.sackedBytes(qi)
			if inflight >= win {
				continue
			}
		}
		if q.nextAvail > s.now {
			if earliest < 0 || q.nextAvail < earliest {
				earliest = q.nextAvail
			}
			continue
		}
		if seq < 0 {
			seq = q.sndNxt
		}
		s.sendData(pid, qi, seq)
		return true
	}
	if earliest > 0 {
		s.wake(pid, earliest)
	}
	return false
}

// sendData sends queue pair qi's packet starting at byte seq: its next new
// one (seq = sndNxt), or a selective retransmission (TRANSPORT sack).
func (s *Sim) sendData(pid int32, qi int32, seq int64) {
	q := &s.qps[qi]
	size := min(int64(s.cfg.PayloadSize), q.size-seq)
	pi := s.newPacket()
	s.live[qi]++
	pkt := &s.pkts[pi]
	*pkt = packet{seq: seq, sent: s.now, born: s.now, qp: qi, ep: s.epoch[qi], path: 2 * qi, inDL: -1, size: int32(size),
		wire: int32(size) + int32(s.cfg.HeaderBytes), intI: -1, kind: pktData, q: dataQ}
	if s.usesINT {
		pkt.intI = s.newINT()
	}
	if s.fwding.perPacket() {
		pkt.link, pkt.flowlet = pid, s.fwding.sent(qi, s.now)
	}
	if seq < q.maxSent {
		s.Stats.Retransmitted += size
	}
	if seq == q.sndNxt {
		q.sndNxt += size
		if q.maxSent < q.size && q.sndNxt >= q.size {
			s.sent(q.flow)
		}
		q.maxSent = max(q.maxSent, q.sndNxt)
	} else { // a selective retransmission (TRANSPORT sack)
		s.tp.resent(q, qi, seq, size)
	}
	q.nextAvail = s.now + int64(float64(pkt.wire)*8e12/s.paceRate(q))
	s.Stats.DataPackets++
	s.Stats.SentBytes += size
	if s.surWatch {
		s.sur.sent(pid, int64(pkt.wire))
	}
	if q.rtoAt == 0 {
		s.armRTO(qi)
	}
	s.transmit(pid, pi, -1)
}

// paceRate is the rate a queue pair's packets leave at: its congestion
// control's, or line rate under RATE_BOUND 0 (ns-3's test switch), which
// leaves only the window to the algorithm.
func (s *Sim) paceRate(q *qp) float64 {
	if !s.cfg.CC.RateBound {
		return q.cc.LineRate
	}
	return q.cc.Rate
}

func (s *Sim) newINT() int32 {
	if n := len(s.freeINT); n > 0 {
		i := s.freeINT[n-1]
		s.freeINT = s.freeINT[:n-1]
		s.intN[i] = 0
		return i
	}
	s.ints = append(s.ints, [cc.MaxHops]cc.IntHop{})
	s.intN = append(s.intN, 0)
	return int32(len(s.ints) - 1)
}

func (s *Sim) armRTO(qi int32) {
	q := &s.qps[qi]
	q.rtoGen++
	q.rtoAt = s.now + s.cfg.RTOPs
	s.pushRTO(q.rtoAt, qi, q.rtoGen)
}

// rtoEntry is a timeout waiting in the RTO FIFO: its time, the insertion
// number its own event would have had, its queue pair and the low bits of
// its generation (2^32 re-arms of one slot within one RTO would take
// billions of events).
type rtoEntry struct {
	at  int64
	seq uint64
	qi  int32
	gen uint32
}

// rtoChunk entries (96 KB) per block of the RTO FIFO.
const rtoChunk = 4096

// rtoFIFO holds the timeouts armed at now + RTO, which therefore come due
// in push order; only the head is in the calendar. A pair that finishes
// leaves its timeout behind until it is due (1 ms by default, against a
// few microseconds of life), so millions wait at once: as heap events in
// the calendar's far queue they took 32 bytes each and a doubling array.
// Blocks spare the copies of growing and are reused as the head passes.
//
// Every arm kills the pair's previous timeout, so at most one entry per
// queue pair is live: when the FIFO holds more than twice as many entries
// as there are pairs, pushRTO drops the dead ones (a 4096-GPU AllToAll's
// 16.8 M finished pairs otherwise keep 400 MB of them), in amortized
// constant time per push.
type rtoFIFO struct {
	blocks [][]rtoEntry
	head   int // in blocks[0]
	n      int // entries from the head on
	free   [][]rtoEntry
}

// pushRTO schedules qi's timeout gen at time at, which must not be before
// any timeout already in the FIFO.
func (s *Sim) pushRTO(at int64, qi int32, gen int64) {
	f := &s.rto
	if f.n > 2*len(s.qps)+rtoChunk {
		s.compactRTO()
	}
	seq := s.lateSeq()
	n := len(f.blocks)
	if n == 0 || len(f.blocks[n-1]) == rtoChunk {
		var b []rtoEntry
		if k := len(f.free); k > 0 {
			b, f.free = f.free[k-1], f.free[:k-1]
		} else {
			b = make([]rtoEntry, 0, rtoChunk)
		}
		f.blocks = append(f.blocks, b)
		n++
	}
	f.blocks[n-1] = append(f.blocks[n-1], rtoEntry{at: at, seq: seq, qi: qi, gen: uint32(gen)})
	f.n++
	if n == 1 && len(f.blocks[0]) == f.head+1 { // it is the head
		s.q.PushSeq(des.Time(at), seq, evRTOFIFO, 0, 0)
	}
}

// popRTO takes the FIFO's head, whose event just popped, puts the next
// live one in the calendar, and returns the head's pair and generation (-1
// when the pair has been re-armed or reused since, as a stale heap event
// would not have matched).
//
// Timeouts that died while waiting (their pair was re-armed, finished or
// recycled: most of them) are dropped here rather than each popped as an
// event that does nothing (5% of seed 003's events at 100% load).
func (s *Sim) popRTO() (int32, int64) {
	f := &s.rto
	e := f.blocks[0][f.head]
	s.advanceRTO()
	for f.n > 0 {
		next := &f.blocks[0][f.head]
		if uint32(s.qps[next.qi].rtoGen) == next.gen {
			s.q.PushSeq(des.Time(next.at), next.seq, evRTOFIFO, 0, 0)
			break
		}
		s.advanceRTO()
	}
	gen := s.qps[e.qi].rtoGen
	if uint32(gen) != e.gen {
		gen = -1
	}
	return e.qi, gen
}

// advanceRTO drops the FIFO's head entry.
func (s *Sim) advanceRTO() {
	f := &s.rto
	f.head++
	f.n--
	if f.head == len(f.blocks[0]) {
		if len(f.blocks) > 1 || f.head == rtoChunk {
			f.free = append(f.free, f.blocks[0][:0])
			f.blocks = f.blocks[:copy(f.blocks, f.blocks[1:])]
		} else {
			f.blocks[0] = f.blocks[0][:0]
		}
		f.head = 0
	}
}

// compactRTO drops the RTO FIFO's dead entries (their pair re-armed,
// finished or was reused since), keeping the order of the rest. The head
// stays whatever it is: its event is in the calendar.
func (s *Sim) compactRTO() {
	f := &s.rto
	wb, wi := 0, f.head+1 // write position, just after the head
	for rb := range f.blocks {
		ri := 0
		if rb == 0 {
			ri = f.head + 1
		}
		blk := f.blocks[rb] // its length before the writes below shorten it
		for ; ri < len(blk); ri++ {
			e := blk[ri]
			if uint32(s.qps[e.qi].rtoGen) != e.gen {
				continue
			}
			if wi == rtoChunk {
				wb, wi = wb+1, 0
			}
			f.blocks[wb] = f.blocks[wb][:wi+1]
			f.blocks[wb][wi] = e
			wi++
		}
	}
	f.blocks[wb] = f.blocks[wb][:wi]
	for _, b := range f.blocks[wb+1:] {
		f.free = append(f.free, b[:0])
	}
	clear(f.blocks[wb+1:])
	f.blocks = f.blocks[:wb+1]
	f.n = -f.head
	for _, b := range f.blocks {
		f.n += len(b)
	}
}

// onRTO goes back to the first unacknowledged byte when a queue pair made
// no progress for a whole timeout (a lost tail leaves no later packet to
// trigger a NACK).
func (s *Sim) onRTO(qi int32, gen int64) {
	q := &s.qps[qi]
	if gen != q.rtoGen || q.done || s.pfc.deadlocked() {
		return
	}
	q.rtoAt = 0
	if q.sndUna >= q.sndNxt && q.sndNxt >= q.size {
		return
	}
	if s.now-q.lastProg >= s.cfg.RTOPs {
		if q.sndNxt > q.sndUna {
			s.tp.timeout(q, qi)
			q.lastProg = s.now
			s.tryTx(q.port)
		}
		s.armRTO(qi)
		return
	}
	q.rtoGen++
	q.rtoAt = q.lastProg + s.cfg.RTOPs
	s.push(q.rtoAt, evRTO, qi, q.rtoGen)
}

// deliver hands a packet to the endpoint at the end of its path.
func (s *Sim) deliver(pi int32) {
	pkt := &s.pkts[pi]
	if pkt.kind != pktData {
		s.onAck(pi)
		return
	}
	q := &s.qps[pkt.qp]
	switch {
	case pkt.seq > q.rcvNext && s.placed != nil:
		// Per-packet routing: placed where it belongs, acknowledged
		// cumulatively; a duplicate is thrown away and re-acknowledged.
		if !s.placed.add(pkt.qp, pkt.seq) {
			s.Stats.Discarded += int64(pkt.size)
			s.sendCtl(pi, pktAck, q.rcvNext, pkt.ecn)
			return
		}
		s.Stats.Delivered += int64(pkt.size)
		s.Stats.Reordered++
		q.rcvCount++
		q.rcvECN = q.rcvECN || pkt.ecn
		if int(q.rcvCount) >= s.cfg.AckInterval || s.ackEach {
			s.sendCtl(pi, pktAck, q.rcvNext, q.rcvECN)
			q.rcvCount, q.rcvECN = 0, false
			return
		}
	case pkt.seq == q.rcvNext:
		q.rcvNext += int64(pkt.size)
		if s.placed != nil {
			q.rcvNext = s.placed.advance(pkt.qp, q.rcvNext, int64(s.cfg.PayloadSize), q.size)
		}
		s.Stats.Delivered += int64(pkt.size)
		q.rcvCount++
		q.rcvECN = q.rcvECN || pkt.ecn
		if q.rcvNext >= q.size && !q.rxDone {
			q.rxDone = true // the receiver knows the message size: receive completion
			s.received(q.flow)
		}
		if int(q.rcvCount) >= s.cfg.AckInterval || q.rcvNext >= q.size {
			s.sendCtl(pi, pktAck, q.rcvNext, q.rcvECN)
			q.rcvCount, q.rcvECN = 0, false
			return
		}
	case pkt.seq > q.rcvNext:
		if s.tp.gap(pi, q) {
			return
		}
	default:
		s.Stats.Discarded += int64(pkt.size)
		// A duplicate after a go-back-N: re-acknowledge.
		s.sendCtl(pi, pktAck, q.rcvNext, pkt.ecn)
		return
	}
	s.freePacket(pi)
}

// received handles a queue pair's receive completion: once all of a
// flow's pairs have it, the flow's dependants that send from its
// destination (a ring's next step forwarding what just arrived, the
// receiver's end-of-collective join) start, without waiting for the ACK
// that completes the flow at its sender.
func (s *Sim) received(f int32) {
	fl := s.flows
	if fl.rxLeft[f]--; fl.rxLeft[f] > 0 {
		return
	}
	if fl.RxDone != nil {
		fl.RxDone[f] = s.now
	}
	if f >= fl.n {
		s.work = fl.ex.Release(f, expand.OnReceived, s.work)
		return
	}
	s.rcvDst = fl.dst(f)
	s.work = fl.DAG.ReleaseEarly(f, s.fromDst, s.work)
}

// sent handles a queue pair putting its last byte on the wire: once all of
// a flow's pairs have, the flow's dependants that send from its source (the
// next chunk on the same connection) start, as NCCL posts a connection's
// steps back to back instead of waiting for each one's acknowledgement.
func (s *Sim) sent(f int32) {
	fl := s.flows
	if fl.txLeft[f]--; fl.txLeft[f] > 0 {
		return
	}
	if fl.set != nil {
		s.pace.Sent(f, fl.rec(f))
		defer s.pace.Clear()
	}
	if f >= fl.n {
		s.work = fl.ex.Release(f, expand.OnSent, s.work)
		return
	}
	s.sentSrc = fl.src(f)
	s.work = fl.DAG.ReleaseEarly(f, s.sameSrc, s.work)
}

// sendCtl turns a delivered data packet into an ACK or NACK travelling the
// QP's reverse path on queue 0, echoing ECN (the CNP) and INT.
func (s *Sim) sendCtl(pi int32, kind uint8, seq int64, ecn bool) {
	pkt := &s.pkts[pi]
	qi := pkt.qp
	s.tp.tag(pkt)
	pkt.kind, pkt.seq, pkt.ecn, pkt.born = kind, seq, ecn, s.now
	pkt.path, pkt.hop, pkt.q, pkt.inDL = 2*qi+1, 0, 0, -1
	pkt.size, pkt.wire = 0, int32(s.cfg.AckBytes)
	if s.bypassing {
		// The surrogate's predicted latency for an acknowledgement runs
		// from when it is made, its wait at the receiver's NIC included:
		// it skips that NIC as well as the fabric.
		s.sur.bypass(pi, 0)
		return
	}
	s.enqueue(pi, s.dl(pkt))
}

func (s *Sim) onAck(pi int32) {
	pkt := &s.pkts[pi]
	qi := pkt.qp
	q := &s.qps[qi]
	if q.done {
		s.freePacket(pi)
		return
	}
	var acked int64
	if pkt.seq > q.sndUna {
		acked = pkt.seq - q.sndUna
		q.sndUna = pkt.seq
		q.lastProg = s.now
		if q.sndNxt < q.sndUna {
			q.sndNxt = q.sndUna
		}
	}
	s.tp.acked(q, qi, pkt)
	// One Feedback reused: passed through the interface it would escape.
	fb := &s.fb
	*fb = cc.Feedback{Now: s.now, Acked: acked, AckSeq: pkt.seq, SndNxt: q.sndNxt, ECN: pkt.ecn, RTT: s.now - pkt.sent}
	if s.usesINT {
		fb.Prev = &s.hist[qi]
	}
	if pkt.intI >= 0 {
		fb.NHops = int(s.intN[pkt.intI])
		fb.Hops = s.ints[pkt.intI]
	}
	if pkt.ecn {
		s.Stats.CNPs++
		if s.mon != nil {
			s.mon.cnp(qi)
		}
	}
	s.freePacket(pi)
	s.ccSchedule(qi, s.alg.OnFeedback(&q.cc, fb))
	if q.sndUna >= q.size {
		s.qpDone(qi)
		return
	}
	s.tryTx(q.port)
}

// removeQP takes a queue pair out of a port's round robin.
// The pair's slot in the list is kept in the pair, so this is O(1) however
// many pairs share the port (a 1024-rank all-to-all puts 1023 on each NIC).
func (s *Sim) removeQP(pid int32, qi int32) {
	p := &s.ports[pid]
	i := s.qps[qi].slot
	if int(i) >= len(p.qps) || p.qps[i] != qi {
		return
	}
	last := int32(len(p.qps) - 1)
	moved := p.qps[last]
	p.qps[i] = moved
	if moved >= 0 { // a pending pair learns its slot when it sends
		s.qps[moved].slot = i
	}
	p.qps = p.qps[:last]
	if p.qpRR > int(last) {
		p.qpRR = 0
	}
}

// addQP puts a queue pair in its port's round robin.
func (s *Sim) addQP(pid int32, qi int32) {
	p := &s.ports[pid]
	s.qps[qi].slot = int32(len(p.qps))
	p.qps = append(p.qps, qi)
}

func (s *Sim) ccSchedule(qi int32, wake int64) {
	q := &s.qps[qi]
	if wake <= 0 || wake == q.ccWake {
		return
	}
	if wake < s.now {
		wake = s.now
	}
	q.ccGen++
	q.ccWake = wake
	s.push(wake, evCCTimer, qi, q.ccGen)
}

func (s *Sim) onCCTimer(qi int32, gen int64) {
	q := &s.qps[qi]
	if gen != q.ccGen || q.done {
		return
	}
	q.ccWake = 0
	s.ccSchedule(qi, s.alg.OnTimer(&q.cc, s.now))
	s.tryTx(q.port)
}

func (s *Sim) qpDone(qi int32) {
	q := &s.qps[qi]
	q.done = true
	if s.placed != nil {
		s.placed.clear(qi)
	}
	s.tp.close(qi)
	if s.mon != nil {
		s.mon.qpDone(qi)
	}
	q.rtoGen++
	q.ccGen++
	// Leave the port's round robin now: the slot is recycled.
	s.removeQP(q.port, qi)
	f := q.flow
	s.flows.qpsLeft[f]--
	if s.flows.qpsLeft[f] == 0 {
		s.finishFlow(f)
	}
	s.recycle(qi)
}

// recycle lets slot qi serve another queue pair once no packet of its
// pair is left (live), so that a packet outliving its pair (a duplicate
// after a spurious timeout) reaches its end as that pair's, never as
// another's. A partitioned run never reuses a slot: its packets may be
// in another part.
func (s *Sim) recycle(qi int32) {
	switch {
	case s.part != nil:
	case s.live[qi] > 0:
		s.qps[qi].parked = true
	default:
		s.freeQP = append(s.freeQP, qi)
	}
}

// qpNode is the node queue pair qi sends from.
func (s *Sim) qpNode(qi int32) int32 { return s.ports[s.qps[qi].port].from }
