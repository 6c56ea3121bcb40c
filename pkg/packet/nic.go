package packet

import (
	"fmt"

	"github.com/fabricsim/fabricsim/internal/grow"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/expand"
	"github.com/fabricsim/fabricsim/pkg/route"
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
	// cell: the payload of its packets when it sends NVLink cells
	// (nvcell.go), 0 for PACKET_PAYLOAD_SIZE (in the struct's padding)
	cell uint16
	cc   cc.State
}

// surQP is a queue pair's surrogate state.
type surQP struct {
	predData int64 // predicted latency of data and of control packets
	predCtl  int64
	latData  int32 // latency class of data and of control packets + 1, 0 before the first
	latCtl   int32
	src, dst int32 // its flow's ends (openQP): a prediction needs no look at the flow
}

// nic is the hosts' side of the packet core: the queue pairs (their
// slots, windows, pacing, congestion control state and retransmission
// timers), the transport's loss recovery and the receivers' placement.
// Its methods reach the rest of the Sim (clock, events, ports, flows)
// through s.
type nic struct {
	s *Sim

	qps    []qp
	hist   []cc.HopHistory // per QP slot, for an algorithm that uses INT
	epoch  []int32         // per QP slot, bumped on reuse and reroute; dense so every hop's check stays in cache
	live   []int32         // per QP slot, its pair's packets not yet freed (recycle)
	freeQP []int32

	// lazy: a queue pair takes a slot in qps (240 bytes and two paths)
	// only when it sends its first packet; until then its port's round
	// robin holds ^(flow<<pendShift | j) (addPending). A 4096-rank AllToAll
	// opens 16.8 M queue pairs at once, of which a few per NIC are sending
	// at any time. Monitors (which list every open pair) and LINK_DOWN
	// (which walks them) keep every pair materialized.
	lazy      bool
	pendShift uint8 // bits of a queue pair's index within its flow

	// The receivers' out-of-order placements (per-packet routing or
	// TRANSPORT sack); nil while packets can only arrive in order.
	placed *seqSet
	// The loss recovery (TRANSPORT, transport.go), and whether its
	// receivers acknowledge every out-of-order placement (read per such
	// packet, so a field rather than a call).
	tp      transport
	ackEach bool
	// ackEvery: a receiver acknowledges every ackEvery in-order packets
	// (L2_ACK_INTERVAL, or ACK_COALESCE when set).
	ackEvery int32

	rto rtoFIFO
	fb  cc.Feedback // onAck's, reused: passed through the interface it would escape
	// fbHops: fb's INT records may be set (OnFeedback reads them, never
	// writes).
	fbHops bool
}

func (nc *nic) allocQP() int32 {
	s := nc.s
	if n := len(nc.freeQP); n > 0 {
		i := nc.freeQP[n-1]
		nc.freeQP = nc.freeQP[:n-1]
		return i
	}
	nc.qps = grow.Append(nc.qps, qp{})
	if s.usesINT {
		nc.hist = grow.Append(nc.hist, cc.HopHistory{})
	}
	if s.surWatch {
		s.sur.addQP()
	}
	s.fab.fwding.addQP()
	nc.tp.addQP()
	nc.epoch = grow.Append(nc.epoch, 0)
	nc.live = grow.Append(nc.live, 0)
	if s.pv.part != nil {
		s.pv.slots = grow.Append(s.pv.slots, freeSlot)
	}
	for range 2 * s.fab.pathW {
		s.fab.paths = grow.Append(s.fab.paths, 0)
	}
	s.fab.pathLen = grow.Append(s.fab.pathLen, 0, 0)
	return int32(len(nc.qps) - 1)
}

// addPending puts a pending queue pair, part j of transfer flow, in its
// port's round robin as ^(flow<<pendShift | j): the slot itself says what
// to open, so a pending pair costs its four bytes there and nothing more.
func (nc *nic) addPending(pid int32, flow, j int32) {
	s := nc.s
	p := &s.fab.ports[pid]
	s.pfc.look(p.from) // a kept wake sees the pairs it would have (pfcwake.go)
	p.qps = append(p.qps, ^(flow<<nc.pendShift | j))
}

// pending is the transfer and part a pending slot addPending made stands for.
func (nc *nic) pending(slot int32) (flow int32, j int64) {
	k := ^slot
	return k >> nc.pendShift, int64(k & (1<<nc.pendShift - 1))
}

// materialize gives the pending queue pair at slot i of port pid's round
// robin its state, as opening it would have.
func (nc *nic) materialize(pid int32, i int) int32 {
	s := nc.s
	p := &s.fab.ports[pid]
	flow, j := nc.pending(p.qps[i])
	qi := nc.allocQP()
	if err := nc.initQP(qi, flow, j); err != nil {
		panic(fmt.Sprintf("packet: queue pair routed when opened fails later: %v", err)) // same inputs, same route
	}
	p.qps[i] = qi
	nc.qps[qi].slot = int32(i)
	return qi
}

// sendFromQP lets the port's queue pairs send one data packet, round robin,
// each within its window and pacing rate. It returns whether it sent.
func (nc *nic) sendFromQP(pid int32) bool {
	s := nc.s
	p := &s.fab.ports[pid]
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
			qi = nc.materialize(pid, p.qpRR)
			p.qpRR++
			nc.sendData(pid, qi, 0)
			return true
		}
		q := &nc.qps[qi]
		p.qpRR++
		// A selective retransmission goes first; the window, which it is
		// inside, does not hold it back.
		seq := nc.tp.retransmit(q, qi)
		switch {
		case seq >= 0:
		case q.sndNxt >= q.size:
			continue
		case s.cfg.HasWin && nc.windowRoom(q, qi) <= 0:
			continue
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
		nc.sendData(pid, qi, seq)
		return true
	}
	if earliest > 0 {
		s.fab.wake(pid, earliest)
	}
	return false
}

// windowRoom is what queue pair q's window (HAS_WIN) leaves for new data:
// sendFromQP sends none without room, and ACK_COALESCE marks the packet
// that fills it.
func (nc *nic) windowRoom(q *qp, qi int32) int64 {
	win := q.cc.BaseWin
	if nc.s.cfg.VarWin {
		win = int64(float64(win) * q.cc.Rate / q.cc.LineRate)
		if win < 1 {
			win = 1
		}
	}
	// SACKed packets have left the network (RFC 6675's pipe): new data
	// keeps flowing while a hole is repaired, and its SACKs tell whether
	// a repair was lost again.
	return win - (q.sndNxt - q.sndUna - nc.tp.sackedBytes(qi))
}

// sendData sends queue pair qi's packet starting at byte seq: its next new
// one (seq = sndNxt), or a selective retransmission (TRANSPORT sack).
func (nc *nic) sendData(pid int32, qi int32, seq int64) {
	s := nc.s
	q := &nc.qps[qi]
	size := min(nc.payload(q), q.size-seq)
	pi := s.newPacket()
	nc.live[qi]++
	pkt := &s.pkts[pi]
	*pkt = packet{seq: seq, sent: s.now, born: s.now, qp: qi, ep: nc.epoch[qi], path: 2 * qi, inDL: -1, size: int32(size),
		wire: int32(size) + nc.header(q, size), intI: -1, kind: pktData, q: dataQ}
	if s.usesINT {
		pkt.intI = nc.newINT()
	}
	if s.fab.fwding.perPacket() {
		pkt.link, pkt.flowlet = pid, s.fab.fwding.sent(qi, s.now)
	}
	if seq < q.maxSent {
		s.stats.Retransmitted += size
	}
	if seq == q.sndNxt {
		q.sndNxt += size
		if q.maxSent < q.size && q.sndNxt >= q.size {
			nc.sent(q.flow)
		}
		q.maxSent = max(q.maxSent, q.sndNxt)
	} else { // a selective retransmission (TRANSPORT sack)
		nc.tp.resent(q, qi, seq, size)
	}
	// ACK_COALESCE: a window this packet fills would wait for an ACK
	// coalescing holds back; ask for it (AckReq), as a requester does
	// when it needs its responder's acknowledgement. (The window has
	// room for the coalesced packets, baseRTT: this is for a window that
	// congestion control has shrunk.)
	if s.cfg.AckCoalesce > 0 && s.cfg.HasWin && nc.windowRoom(q, qi) <= 0 {
		pkt.ackReq = true
	}
	q.nextAvail = s.now + int64(float64(pkt.wire)*8e12/nc.paceRate(q))
	s.stats.DataPackets++
	s.stats.SentBytes += size
	if s.surWatch {
		s.sur.sent(pid, int64(pkt.wire))
	}
	if q.rtoAt == 0 {
		nc.armRTO(qi)
	}
	s.fab.transmit(pid, pi, -1)
}

// paceRate is the rate a queue pair's packets leave at: its congestion
// control's, or line rate under RATE_BOUND 0 (ns-3's test switch), which
// leaves only the window to the algorithm.
func (nc *nic) paceRate(q *qp) float64 {
	s := nc.s
	if !s.cfg.CC.RateBound {
		return q.cc.LineRate
	}
	return q.cc.Rate
}

func (nc *nic) newINT() int32 {
	s := nc.s
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

func (nc *nic) armRTO(qi int32) {
	s := nc.s
	q := &nc.qps[qi]
	q.rtoGen++
	q.rtoAt = s.now + s.cfg.RTOPs
	nc.pushRTO(q.rtoAt, qi, q.rtoGen)
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
func (nc *nic) pushRTO(at int64, qi int32, gen int64) {
	s := nc.s
	f := &nc.rto
	if f.n > 2*len(nc.qps)+rtoChunk {
		nc.compactRTO()
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
func (nc *nic) popRTO() (int32, int64) {
	s := nc.s
	f := &nc.rto
	e := f.blocks[0][f.head]
	nc.advanceRTO()
	for f.n > 0 {
		next := &f.blocks[0][f.head]
		if uint32(nc.qps[next.qi].rtoGen) == next.gen {
			s.q.PushSeq(des.Time(next.at), next.seq, evRTOFIFO, 0, 0)
			break
		}
		nc.advanceRTO()
	}
	gen := nc.qps[e.qi].rtoGen
	if uint32(gen) != e.gen {
		gen = -1
	}
	return e.qi, gen
}

// advanceRTO drops the FIFO's head entry.
func (nc *nic) advanceRTO() {
	f := &nc.rto
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
func (nc *nic) compactRTO() {
	f := &nc.rto
	wb, wi := 0, f.head+1 // write position, just after the head
	for rb := range f.blocks {
		ri := 0
		if rb == 0 {
			ri = f.head + 1
		}
		blk := f.blocks[rb] // its length before the writes below shorten it
		for ; ri < len(blk); ri++ {
			e := blk[ri]
			if uint32(nc.qps[e.qi].rtoGen) != e.gen {
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
func (nc *nic) onRTO(qi int32, gen int64) {
	s := nc.s
	s.cur = nc.qpNode(qi)
	q := &nc.qps[qi]
	if gen != q.rtoGen || q.done || s.pfc.deadlocked() {
		return
	}
	q.rtoAt = 0
	if q.sndUna >= q.sndNxt && q.sndNxt >= q.size {
		return
	}
	if s.now-q.lastProg >= s.cfg.RTOPs {
		if q.sndNxt > q.sndUna {
			nc.tp.timeout(q, qi)
			q.lastProg = s.now
			s.fab.tryTx(q.port)
		}
		nc.armRTO(qi)
		return
	}
	q.rtoGen++
	q.rtoAt = q.lastProg + s.cfg.RTOPs
	s.push(q.rtoAt, evRTO, qi, q.rtoGen)
}

// deliver hands a packet to the endpoint at the end of its path.
func (nc *nic) deliver(pi int32) {
	s := nc.s
	pkt := &s.pkts[pi]
	if pkt.kind != pktData {
		nc.onAck(pi)
		return
	}
	q := &nc.qps[pkt.qp]
	switch {
	case pkt.seq > q.rcvNext && nc.placed != nil:
		// Per-packet routing: placed where it belongs, acknowledged
		// cumulatively; a duplicate is thrown away and re-acknowledged.
		if !nc.placed.add(pkt.qp, pkt.seq) {
			s.stats.Discarded += int64(pkt.size)
			nc.sendCtl(pi, pktAck, q.rcvNext, pkt.ecn)
			return
		}
		s.stats.Delivered += int64(pkt.size)
		s.stats.Reordered++
		q.rcvCount++
		q.rcvECN = q.rcvECN || pkt.ecn
		if q.rcvCount >= nc.ackEvery || nc.ackEach || pkt.ackReq {
			nc.sendCtl(pi, pktAck, q.rcvNext, q.rcvECN)
			q.rcvCount, q.rcvECN = 0, false
			return
		}
	case pkt.seq == q.rcvNext:
		q.rcvNext += int64(pkt.size)
		if nc.placed != nil {
			q.rcvNext = nc.placed.advance(pkt.qp, q.rcvNext, int64(s.cfg.PayloadSize), q.size)
		}
		s.stats.Delivered += int64(pkt.size)
		if q.cell == 0 {
			q.rcvCount++
		} else {
			q.rcvCount += nc.cellAcks(q.rcvNext, int64(pkt.size))
		}
		q.rcvECN = q.rcvECN || pkt.ecn
		if q.rcvNext >= q.size && !q.rxDone {
			q.rxDone = true // the receiver knows the message size: receive completion
			nc.received(q.flow)
		}
		if q.rcvCount >= nc.ackEvery || q.rcvNext >= q.size || pkt.ackReq {
			nc.sendCtl(pi, pktAck, q.rcvNext, q.rcvECN)
			q.rcvCount, q.rcvECN = 0, false
			return
		}
	case pkt.seq > q.rcvNext:
		if nc.tp.gap(pi, q) {
			return
		}
	default:
		s.stats.Discarded += int64(pkt.size)
		// A duplicate after a go-back-N: re-acknowledge.
		nc.sendCtl(pi, pktAck, q.rcvNext, pkt.ecn)
		return
	}
	s.freePacket(pi)
}

// received handles a queue pair's receive completion: once all of a
// flow's pairs have it, the flow's dependants that send from its
// destination (a ring's next step forwarding what just arrived, the
// receiver's end-of-collective join) start, without waiting for the ACK
// that completes the flow at its sender.
func (nc *nic) received(f int32) {
	s := nc.s
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
	s.rcvFlow = f
	s.work = fl.run.ReleaseEarly(f, s.fromDst, s.work)
}

// sent handles a queue pair putting its last byte on the wire: once all of
// a flow's pairs have, the flow's dependants that send from its source (the
// next chunk on the same connection) start, as NCCL posts a connection's
// steps back to back instead of waiting for each one's acknowledgement.
func (nc *nic) sent(f int32) {
	s := nc.s
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
	s.work = fl.run.ReleaseEarly(f, s.sameSrc, s.work)
}

// sendCtl turns a delivered data packet into an ACK or NACK travelling the
// QP's reverse path on queue 0, echoing ECN (the CNP) and INT.
func (nc *nic) sendCtl(pi int32, kind uint8, seq int64, ecn bool) {
	s := nc.s
	pkt := &s.pkts[pi]
	qi := pkt.qp
	nc.tp.tag(pkt)
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
	s.fab.enqueue(pi, s.fab.dl(pkt))
}

func (nc *nic) onAck(pi int32) {
	s := nc.s
	pkt := &s.pkts[pi]
	qi := pkt.qp
	q := &nc.qps[qi]
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
	nc.tp.acked(q, qi, pkt)
	// One Feedback reused: passed through the interface it would escape.
	// Field by field, its INT records zeroed only when the last ACK's
	// set them: the whole literal (232 bytes) cost about 70 instructions
	// an ACK under algorithms without INT. (Every field of Feedback is
	// set below: a new one must be too.)
	fb := &nc.fb
	fb.Now, fb.Acked, fb.AckSeq, fb.SndNxt, fb.ECN, fb.RTT, fb.Prev = s.now, acked, pkt.seq, q.sndNxt, pkt.ecn, s.now-pkt.sent, nil
	if s.usesINT {
		fb.Prev = &nc.hist[qi]
	}
	if pkt.intI >= 0 {
		fb.NHops = int(s.intN[pkt.intI])
		fb.Hops = s.ints[pkt.intI]
		nc.fbHops = true
	} else if nc.fbHops {
		fb.NHops, fb.Hops, nc.fbHops = 0, [cc.MaxHops]cc.IntHop{}, false
	}
	s.freePacket(pi)
	next := s.alg.OnFeedback(&q.cc, fb)
	if fb.ECN { // after OnFeedback, which clears an echo it discards
		s.stats.CNPs++
		if s.mon != nil {
			s.mon.cnp(qi)
		}
	}
	nc.ccSchedule(qi, next)
	if q.sndUna >= q.size {
		nc.qpDone(qi)
		return
	}
	s.fab.tryTx(q.port)
}

// removeQP takes a queue pair out of a port's round robin.
// The pair's slot in the list is kept in the pair, so this is O(1) however
// many pairs share the port (a 1024-rank all-to-all puts 1023 on each NIC).
func (nc *nic) removeQP(pid int32, qi int32) {
	s := nc.s
	p := &s.fab.ports[pid]
	s.pfc.look(p.from) // a kept wake sees the pairs it would have (pfcwake.go)
	i := nc.qps[qi].slot
	if int(i) >= len(p.qps) || p.qps[i] != qi {
		return
	}
	last := int32(len(p.qps) - 1)
	moved := p.qps[last]
	p.qps[i] = moved
	if moved >= 0 { // a pending pair learns its slot when it sends
		nc.qps[moved].slot = i
	}
	p.qps = p.qps[:last]
	if p.qpRR > int(last) {
		p.qpRR = 0
	}
	if last == 0 {
		s.pfc.drained(pid, p)
	}
}

// addQP puts a queue pair in its port's round robin.
func (nc *nic) addQP(pid int32, qi int32) {
	s := nc.s
	p := &s.fab.ports[pid]
	s.pfc.look(p.from) // a kept wake sees the pairs it would have (pfcwake.go)
	nc.qps[qi].slot = int32(len(p.qps))
	p.qps = append(p.qps, qi)
}

func (nc *nic) ccSchedule(qi int32, wake int64) {
	s := nc.s
	q := &nc.qps[qi]
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

func (nc *nic) onCCTimer(qi int32, gen int64) {
	s := nc.s
	s.cur = nc.qpNode(qi)
	q := &nc.qps[qi]
	if gen != q.ccGen || q.done {
		return
	}
	q.ccWake = 0
	nc.ccSchedule(qi, s.alg.OnTimer(&q.cc, s.now))
	s.fab.tryTx(q.port)
}

func (nc *nic) qpDone(qi int32) {
	s := nc.s
	q := &nc.qps[qi]
	q.done = true
	if nc.placed != nil {
		nc.placed.clear(qi)
	}
	nc.tp.close(qi)
	if s.mon != nil {
		s.mon.qpDone(qi)
	}
	q.rtoGen++
	q.ccGen++
	// Leave the port's round robin now: the slot is recycled.
	nc.removeQP(q.port, qi)
	f := q.flow
	s.flows.qpsLeft[f]--
	if s.flows.qpsLeft[f] == 0 {
		s.finishFlow(f)
	}
	nc.recycle(qi)
}

// recycle lets slot qi serve another queue pair once no packet of its
// pair is left (live), so that a packet outliving its pair (a duplicate
// after a spurious timeout) reaches its end as that pair's, never as
// another's. A partitioned run's packets may be in another part: its
// parts reclaim the slot together (partView.reclaim).
func (nc *nic) recycle(qi int32) {
	s := nc.s
	switch {
	case s.pv.part != nil:
		s.pv.retire(qi)
	case nc.live[qi] > 0:
		nc.qps[qi].parked = true
	default:
		nc.freeQP = append(nc.freeQP, qi)
	}
}

// qpNode is the node queue pair qi sends from.
func (nc *nic) qpNode(qi int32) int32 {
	s := nc.s
	return s.fab.ports[nc.qps[qi].port].from
}

// onSend opens transfer i's queue pairs once its send latency is over.
func (nc *nic) onSend(i int32) error {
	nc.s.cur = nc.s.flowNode(i)
	return nc.openQPs(i, false)
}

// openQPs creates a transfer's queue pairs and starts them sending, once
// its step latency less its path's propagation has passed (waited: it has;
// Ideal[i] holds that wait meanwhile).
func (nc *nic) openQPs(i int32, waited bool) error {
	s := nc.s
	f := s.flows
	src, dst, size, lat := f.transfer(i)
	if lat > 0 && !waited {
		var err error
		s.fab.buf, err = s.r.AppendPathPort(s.fab.buf[:0], src, dst, route.QPHash(src, dst, s.hashID(i), 0, s.seed), f.port(i, 0))
		if err != nil {
			return s.fab.noPath(i, err)
		}
		wait := lat - int64(s.r.Latency(s.fab.buf))
		if f.replayed != nil && f.replayed[f.rec(i).Coll] {
			wait = lat // SimAI replay: a send latency, before the propagation
		}
		if wait > 0 {
			f.Ideal[i] = wait
			s.lanes.push(s.now+wait, i)
			return nil
		}
	}
	if f.set != nil {
		// The connection's pace (flowset.Pacer): not before the transport
		// can start another step on it.
		if t := int64(s.pace.Take(i)); t > s.now {
			f.Ideal[i] = t - f.StartPs(i)
			s.lanes.push(t, i)
			return nil
		}
		s.pace.Began(i, f.rec(i), des.Time(s.now))
	}
	if s.bypassing {
		if alone, ok := s.sur.bypasses(i, size); ok {
			return s.sur.bypassFlow(i, src, dst, size, alone)
		}
	}
	// QPS_PER_CONNECTION: split the packets over QPs with distinct source
	// ports, hence distinct ECMP hashes.
	pktsTotal := packets(size, int64(s.cfg.PayloadSize))
	nq := min(int64(s.cfg.QPsPerConn), pktsTotal)
	per := (pktsTotal + nq - 1) / nq
	left := size
	for j := int64(0); j < nq && left > 0; j++ {
		left -= min(left, per*int64(s.cfg.PayloadSize))
		var port int32
		if nc.lazy {
			// Route now (the first hop names the port; errors surface
			// here as they always did), keep only the flow and j.
			if err := s.fab.routePart(i, j); err != nil {
				return err
			}
			port = int32(s.fab.fwd[0])
			if j == 0 {
				f.Sport[i] = nc.sport(i, j)
				f.Ideal[i] += s.fab.routedIdeal(i, nc.cellFor(i, s.partSize(i, 0), s.fab.fwd[:s.fab.fwdLen]))
			}
			nc.addPending(port, i, int32(j))
		} else {
			qi := nc.allocQP()
			if err := nc.initQP(qi, i, j); err != nil {
				if s.downLinks == 0 {
					return err
				}
				nc.qps[qi].done = true // never opened: failFlow must not close it again
				nc.recycle(qi)
				return s.fab.noPath(i, err)
			}
			q := &nc.qps[qi]
			port = q.port
			if j == 0 {
				f.Sport[i] = q.sport
				f.Ideal[i] += s.fab.idealFCT(s.partSize(i, 0), s.fab.idealPath(s.fab.path(2*qi), s.fab.path(2*qi+1)), q.cell)
			}
			nc.addQP(port, qi)
		}
		f.qpsLeft[i]++
		f.rxLeft[i]++
		f.txLeft[i]++
		s.fab.tryTx(port)
	}
	return nil
}

// initQP sets up queue pair qi as part j of transfer i: its share of the
// bytes, both paths, and its congestion control at line rate.
func (nc *nic) initQP(qi, i int32, j int64) error {
	s := nc.s
	f := s.flows
	src, dst := f.src(i), f.dst(i)
	id := f.id(i)
	part := s.partSize(i, j)
	q := &nc.qps[qi]
	nc.epoch[qi]++
	if nc.placed != nil {
		nc.placed.clear(qi)
	}
	nc.tp.open(qi)
	// The timer generations carry over from the slot's last pair: its
	// pending timer events must not match the new pair's.
	*q = qp{flow: i, size: part, lastProg: s.now, sport: nc.sport(i, j), ccGen: q.ccGen, rtoGen: q.rtoGen}
	h := route.QPHash(src, dst, s.hashID(i), j, s.seed)
	s.fab.fwding.open(qi, h)
	if err := s.fab.setPath(2*qi, src, dst, h, f.port(i, int(j))); err != nil {
		return fmt.Errorf("%s: %v", f.name(i), err)
	}
	if err := s.fab.setPath(2*qi+1, dst, src, h^0x5bd1e995, -1); err != nil {
		return fmt.Errorf("%s (acknowledgements): %v", f.name(i), err)
	}
	q.port = int32(s.fab.paths[int(2*qi)*s.fab.pathW])
	q.cell = nc.cellFor(i, part, s.fab.path(2*qi))
	lineRate := s.fab.ports[q.port].bw
	rtt, win := s.fab.baseRTT(s.fab.path(2*qi), s.fab.path(2*qi+1), lineRate)
	q.cc = cc.State{LineRate: lineRate, BaseRTT: rtt, BaseWin: win, Seed: s.seed ^ uint64(id)*0x9e3779b97f4a7c15 ^ uint64(j)}
	if s.usesINT {
		nc.hist[qi] = cc.HopHistory{}
	}
	if s.surWatch {
		s.sur.openQP(qi)
	}
	s.alg.Init(&q.cc)
	return nil
}

func (nc *nic) sport(i int32, j int64) uint16 {
	s := nc.s
	id := s.flows.id(i)
	if s.cfg.ECMPKey != route.KeyTransfer {
		// One queue pair per connection, so one port: a connection's
		// transfers rehash alike when a link fails (fabric.linkDown).
		f := s.flows
		id = int64(route.FlowHash(f.src(i), f.dst(i), s.hashID(i), 0) % 50000)
	}
	return uint16(10000 + (id*int64(s.cfg.QPsPerConn)+j)%50000)
}

// failFlow ends transfer i for want of a path: its queue pairs stop (what
// they have in flight is dropped as stale), the bytes they never delivered
// are counted, and the flow completes as failed so that its dependants,
// and the rest of the run, go on.
func (nc *nic) failFlow(i int32, why error) {
	s := nc.s
	f := s.flows
	if f.Failed == nil {
		f.Failed = make([]bool, f.DAG.Len())
	}
	row := i // an expanded flow's failure is its COLL node's
	if i >= f.n {
		row = f.ex.Coll(i)
	} else if f.Failed[i] {
		return
	}
	if s.failure == nil {
		s.failure = &FlowsFailed{First: why}
	}
	if !f.Failed[row] { // failed rows of the trace are counted, not expanded flows
		f.Failed[row] = true
		s.failure.Count++
		s.stats.Failed++
	}
	delivered := int64(0)
	for qi := range nc.qps {
		q := &nc.qps[qi]
		if q.flow != i || q.done {
			continue
		}
		delivered += q.rcvNext
		nc.epoch[qi]++
		q.done = true
		q.rtoGen++
		q.ccGen++
		if s.mon != nil {
			s.mon.qpDone(int32(qi))
		}
		nc.removeQP(q.port, int32(qi))
		nc.recycle(int32(qi))
	}
	s.stats.FailedBytes += max(f.size(i)-delivered, 0)
	if f.RxDone != nil && f.RxDone[i] == 0 {
		f.RxDone[i] = s.now
	}
	s.finishFlow(i)
}
