package packet

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fabricsim/fabricsim/internal/grow"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// The partitioned event loop (Options.Partitions > 1): a conservative
// parallel simulation. The fabric is cut into parts along whole servers;
// each part is a Sim of its own with its own calendar, packet pool and
// queue pairs, and owns the ports leaving its nodes, its switches' buffers
// and the flows whose source is one of its GPUs. A packet put on a link
// into another part, or a PFC frame sent up one, reaches it no sooner than
// that link's latency later, so every part may run a window as long as the
// shortest link between two parts (the lookahead) without hearing from the
// others; between windows the parts swap what crossed.
//
// The run is the single loop's, event for event at every node, whatever
// the parts and threads: an event is numbered by the node that made it and
// that node's count (Sim.seq), not by when it was pushed; each port
// draws from random streams of its own; a queue pair's slot is never taken
// by another pair while a packet of it is out anywhere (reclaim); and a switch
// judges a PFC deadlock by its own last move. Each part pops its events
// in the single loop's order, and what two parts share (a flow's columns,
// the DAG's counters) one part touches at a time, a window apart.
//
// A queue pair lives in its source's part. Its packets, once in another
// part, refer there to a shadow slot: a copy of the pair's paths, size,
// flow and base RTT, which the receiver's state (the next byte expected,
// NACK pacing) lives in when the receiver is in that part. A packet
// entering its pair's own part is its pair's again, checked against the
// slot's epoch as every packet is at every hop.
//
// A finished pair's slot, and its shadows, serve other pairs once none of
// its packets is left in any part, as the single loop's slots do
// (nic.recycle): see reclaim. Without that, a 2048-GPU AllToAll on two
// parts held a slot for each of its 4.2 M pairs and a shadow for 93% of
// them, and its parts cost 1.22x the single loop's CPU in cache misses.
//
// Dependencies must be released where their dependants start (checked
// before the run): a ring's next step starts at the GPU that received the
// previous one, which is where the receive completion happens; a flow
// waiting on another GPU's send would need a message with no lookahead.

// partitioning assigns every node to a part.
type partitioning struct {
	of        []uint8 // part of each node
	n         int
	lookahead int64  // ps: the shortest link between two parts
	by        string // how the parts were cut: blocks, tiers or clusters
	// keepsDeps: every dependency is released in its dependant's part,
	// as the load model's units made sure (planParts), so checkReleases
	// need not read the DAG again: serial work before the first window,
	// 1.06 G (instructions plus misses, cachegrind) of the 5.46 G two
	// parts added to the 2048-GPU AllToAll's setup.
	keepsDeps bool
}

// PartitionedSlotBytes is what a partitioned run may hold per queue pair
// beyond the single loop: the shadows of a pair in the parts its packets
// cross, while the pair is open. The 1024-GPU DP AllReduce (132,096
// flows, all open at once) peaks 83 MB above the single loop with two
// parts. Finished pairs give their slots and shadows back (reclaim): the
// 2048-GPU AllToAll (4.2 M one-packet flows) peaks at 1.13 GB on two
// parts, as the single loop does, where it took 4.7 GB before. Each slot
// keeps which parts hold its shadow (slotState: 24 bytes, was 12).
const PartitionedSlotBytes = 652

// maxPartitions bounds Partitions (a part is a uint8).
const maxPartitions = 64

// newPartitioning cuts t into n parts: servers in n contiguous blocks (a
// server's GPUs and NVSwitches stay together, so the cut never crosses
// an NVLink), then each network switch, tier by tier, into the part most
// of its already placed neighbours are in; a switch whose neighbours
// spread evenly (a spine) goes to the part with the fewest switches of
// its tier so far.
func newPartitioning(t *topo.Topology, n int) (*partitioning, error) {
	if n < 2 || n > maxPartitions {
		return nil, fmt.Errorf("partitions: %d is outside 2 to %d", n, maxPartitions)
	}
	servers := int32(0)
	for _, v := range t.Nodes {
		servers = max(servers, v.Server+1)
	}
	if int(servers) < n {
		return nil, fmt.Errorf("partitions: %d parts but the topology has %d servers (a part holds whole servers)", n, servers)
	}
	pt := &partitioning{of: make([]uint8, len(t.Nodes)), n: n, by: "blocks of servers"}
	placed := make([]bool, len(t.Nodes))
	var switches []int32
	for i, v := range t.Nodes {
		if v.Server >= 0 {
			pt.of[i] = uint8(int64(v.Server) * int64(n) / int64(servers))
			placed[i] = true
		} else {
			switches = append(switches, int32(i))
		}
	}
	slices.SortStableFunc(switches, func(a, b int32) int { return int(t.Nodes[a].Tier) - int(t.Nodes[b].Tier) })
	adj := topo.BuildAdjacency(t)
	perTier := map[int8][]int{}
	for _, v := range switches {
		count := make([]int, n)
		for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
			l := &t.Links[li]
			w := l.A
			if w == v {
				w = l.B
			}
			if placed[w] {
				count[pt.of[w]]++
			}
		}
		tier := t.Nodes[v].Tier
		if perTier[tier] == nil {
			perTier[tier] = make([]int, n)
		}
		seen := perTier[tier]
		best := 0
		for k := 1; k < n; k++ {
			if count[k] > count[best] || (count[k] == count[best] && seen[k] < seen[best]) {
				best = k
			}
		}
		pt.of[v], placed[v] = uint8(best), true
		seen[best]++
	}
	pt.lookahead = maxTime
	for li, l := range t.Links {
		if pt.of[l.A] == pt.of[l.B] {
			continue
		}
		if l.LatencyPs <= 0 {
			return nil, fmt.Errorf("partitions: links[%d] (%d-%d) joins two parts with no latency: a part could not run ahead of the other at all", li, l.A, l.B)
		}
		pt.lookahead = min(pt.lookahead, l.LatencyPs)
	}
	return pt, nil
}

// qpKey names a queue pair across parts: its source's part, its slot
// there and the slot's epoch when the pair was opened.
type qpKey struct {
	part uint8
	qp   int32
	ep   int32
}

// crossing is a packet for another part, at its arrival time there
// (evArrive). The first packet of a pair for a part other than the pair's
// own carries what that part needs to make the pair's shadow slot
// (pairs[pair] of its outbox, firstTo); the others, and those going home,
// need only its key: the pair's part in part, its slot and epoch there in
// pkt.qp and pkt.ep, which the receiver sets anew (as it sets pkt.path
// but for its direction). A crossing costs the cache lines written and
// read back by the other part: it is one and a half lines (96 bytes; 112
// with the key apart), and the pair's paths and a packet's INT record,
// which few crossings need, wait beside it (outbox), not in it. At 432
// bytes a crossing with them, a window's box overflowed the caches
// (measured on a 1024-GPU AllToAll, a quarter of whose events cross). It
// also carries the link the packet crossed (target), as an arrival pushed
// in the part's own loop does, so that the loop loads its port ahead.
type crossing struct {
	at     int64
	seq    uint64 // the event's number (its maker's, as Sim.seq gives)
	target int32  // the link
	pair   int32  // the index of its pair in pairs, or -1
	part   uint8  // the pair's part
	nHops  uint8  // the INT record's hops (when pkt.intI >= 0: its index in hops)
	pkt    packet
}

// home is c's pair's key.
func (c *crossing) home() qpKey { return qpKey{part: c.part, qp: c.pkt.qp, ep: c.pkt.ep} }

// frame is a PFC frame for another part (evPFC), a quarter of a
// crossing: on two parts of the 2048-GPU AllToAll 3.58 M of the 20.04 M
// things that crossed, each written and read back as 112 bytes before.
type frame struct {
	at   int64
	seq  uint64
	port int32
	arg  int32 // queue<<1 | pause
}

// crossPair is what makes a queue pair's shadow slot in another part.
type crossPair struct {
	size   int64  // the pair's bytes
	rtt    int64  // the pair's base RTT (go-back-N's NACK pacing)
	hash   uint64 // the pair's ECMP hash (per-packet routings' seed)
	flow   int32
	cell   uint16 // its NVLink cells' payload (cellFor)
	fwdLen uint8
	revLen uint8
	fwd    [maxPath]route.DirLink
	rev    [maxPath]route.DirLink
}

// outbox is what one part sends another in a window: the crossings, and
// what some of them refer to by index.
type outbox struct {
	c     []crossing
	f     []frame
	pairs []crossPair
	// The packets' INT records (HPCC), copied: their slots were the
	// sending part's.
	hops [][cc.MaxHops]cc.IntHop
}

// reset empties b, keeping its arrays.
func (b *outbox) reset() {
	b.c, b.f, b.pairs, b.hops = b.c[:0], b.f[:0], b.pairs[:0], b.hops[:0]
}

// partView is a Sim as one part of a partitioned run: what it shares with
// the other parts and sends them. Unpartitioned, part is nil.
type partView struct {
	s *Sim
	// Which part each node is in, this Sim's, and the others.
	part  *partitioning
	me    uint8
	peers []*Sim
	// What this part sends each other part, in the window of parity par
	// (read by the receiver in the next window, while this one fills the
	// other), and the earliest of it.
	out     [2][]outbox
	par     int
	sentMin int64
	// The queue pairs of other parts whose packets cross this one: their
	// shadow slots by part and slot there; and by slot, what sendAway
	// reads (slotState).
	shadows [][]shadowRef
	slots   []slotState
	// isShadow has bit qi set when slot qi is a shadow: a packet leaving
	// a slot of this part's own reads one bit, not its slotState's key.
	isShadow []uint64
	// What the run measured of its ceiling (the first part's), the CSV
	// of its windows if asked for, and the crossings this part took in.
	stats    *ParallelStats
	log      io.Writer
	received uint64
	frames   uint64 // of received, the PFC frames
	// end is the current window's; early the first crossing due before
	// it (a cut the lookahead missed: the run stops rather than be wrong).
	end   int64
	early error
	// cpu is the thread CPU time (ns) this part's last timed window
	// took (runWindow).
	cpu int64
	// Slot reclaiming (reclaim): the messages to each part, by window
	// parity as out; this part's slots whose pairs finished and wait to
	// be asked about; the answers awaited, by slot; and the shadows made.
	rel         [2][][]relMsg
	finished    []int32
	asked       []relWait
	madeShadows int
	pairsSent   int // the pairs put in outboxes (firstTo)
	freedAtOnce int // the pairs whose slots retire freed without asking
	// ends and moves are relEnds' until the dependencies are checked.
	ends  []int32
	moves []uint64
}

// check stops the run if what it sends node v at time at is due inside
// the window: the part there may already have run past it.
func (pv *partView) check(at int64, v int32) {
	if at < pv.end {
		pv.tooEarly(at, v) // apart, so that check inlines (once a crossing)
	}
}

// tooEarly records check's error, the first.
func (pv *partView) tooEarly(at int64, v int32) {
	if pv.early == nil {
		s := pv.s
		pv.early = fmt.Errorf("partitions: internal: node %d (part %d) sent node %d (part %d) something due at %d ps, inside the window ending at %d ps (lookahead %d ps); run with one partition",
			s.cur, pv.me, v, pv.part.of[v], at, pv.end, pv.part.lookahead)
	}
}

// ParallelStats is what the partitioned run measured (nil after the
// single loop).
func (s *Sim) ParallelStats() *ParallelStats { return s.pv.stats }

// abroad reports whether node v is in another part than this Sim's (never
// in the single loop).
func (pv *partView) abroad(v int32) bool {
	return pv.part != nil && pv.part.of[v] != pv.me
}

// home is the part a flow starts in: its source's (a join without one:
// the first part).
func (pv *partView) home(i int32) uint8 { return pv.partOf(pv.s.flowNode(i)) }

// postPFC queues a PFC frame (evPFC: arg, for port) for the part node v
// is in, due there at time at, numbered seq.
func (pv *partView) postPFC(v int32, at int64, seq uint64, port int32, arg int64) {
	pv.check(at, v)
	box := &pv.out[pv.par][pv.part.of[v]]
	box.f = append(box.f, frame{at: at, seq: seq, port: port, arg: int32(arg)})
	pv.sentMin = min(pv.sentMin, at)
}

// sendAway hands packet pi, put on link (a port) to node v of another
// part, to that part, arriving at time at.
func (pv *partView) sendAway(pi int32, at int64, v int32, link int32) {
	pv.check(at, v)
	s := pv.s
	pkt := &s.pkts[pi]
	qi := pkt.qp
	to := pv.part.of[v]
	st := &pv.slots[qi]
	home := qpKey{part: pv.me, qp: qi, ep: pkt.ep}
	if pv.shadowed(qi) {
		home = st.key
	}
	box := &pv.out[pv.par][to]
	if len(box.c) < cap(box.c) {
		box.c = box.c[:len(box.c)+1]
	} else {
		box.c = append(box.c, crossing{})
	}
	c := &box.c[len(box.c)-1]
	// The packet apart: in one assignment with the rest it went through a
	// copy on the stack first (16 more moves a crossing).
	c.pkt = *pkt
	c.at, c.seq, c.target, c.part, c.pair = at, s.seq(at), link, home.part, -1
	c.pkt.qp, c.pkt.ep = home.qp, home.ep
	if home.part != to && st.firstTo(home, to) {
		c.pair = int32(len(box.pairs))
		pv.pairsSent++
		if len(box.pairs) < cap(box.pairs) {
			box.pairs = box.pairs[:len(box.pairs)+1]
		} else {
			box.pairs = append(box.pairs, crossPair{})
		}
		cp := &box.pairs[c.pair]
		q := &s.nic.qps[qi]
		cp.flow, cp.size, cp.rtt, cp.cell = q.flow, q.size, q.cc.BaseRTT, q.cell
		cp.hash = s.fab.fwding.hash(qi)
		cp.fwdLen = uint8(copy(cp.fwd[:], s.fab.path(2*qi)))
		cp.revLen = uint8(copy(cp.rev[:], s.fab.path(2*qi+1)))
	}
	if pkt.intI >= 0 {
		c.nHops, c.pkt.intI = s.intN[pkt.intI], int32(len(box.hops))
		box.hops = append(box.hops, s.ints[pkt.intI])
	}
	pv.sentMin = min(pv.sentMin, at)
	// freePacket but for the pair's live count, which only decides when
	// a slot may serve another pair, as a part's never does (recycle): a
	// part keeps it only for packets it made (its own, and the replies
	// its shadows make), not for those that cross. At 512 GPUs, reading
	// the count and the slot beside it cost 3% of a part's time.
	if pkt.intI >= 0 {
		s.freeINT = append(s.freeINT, pkt.intI)
		pkt.intI = -1
	}
	s.freePkts = append(s.freePkts, pi)
}

// slotState is what sendAway reads of a slot, in one cache line: the
// pair a shadow stands for (key); and which parts were sent the pair the
// slot is now (key, for a slot of this part's own: the last pair sent),
// with a packet of it (sent, a bit a part). They hold its shadow until
// the pair's part reclaims it, when the slot serves another pair (of
// another key).
type slotState struct {
	sent uint64
	key  qpKey
}

// freeSlot is a slot that stands for no pair of another part.
var freeSlot = slotState{key: qpKey{qp: -1}}

// firstTo reports whether the packet of pair home that sendAway puts in
// the outbox to part to is the first of that pair there: only that one
// carries the pair. Sent with every packet, the pair's bytes, paths and
// hash cost a multi-packet flow's crossings (SimAI's mixed case: 85
// packets a flow) a tenth of the part's time, reading the slot and
// writing three lines a packet.
func (st *slotState) firstTo(home qpKey, to uint8) bool {
	if st.key != home {
		*st = slotState{key: home}
	}
	if st.sent&(1<<to) != 0 {
		return false
	}
	st.sent |= 1 << to
	return true
}

// takeFrame puts PFC frame f, which another part sent, in this part's
// calendar. A PAUSE waits at its port as one sent from this part does
// (pfc.send): all of a port's come from the one node at the far end of its
// link, so in order. As events they were 4% of the 2048-GPU AllToAll's on
// two parts, the difference from the single loop's count.
func (pv *partView) takeFrame(f *frame) {
	s := pv.s
	if p := &s.fab.ports[f.port]; f.arg&1 == 1 && p.lz < lzCap && !s.suspended {
		p.lzPush(lzFrame{at: f.at, seq: f.seq, q: int8(f.arg >> 1)})
		return
	}
	s.q.PushSeq(des.Time(f.at), f.seq, evPFC, f.port, int64(f.arg))
}

// takeIn puts crossing c of box b, which another part sent, in this
// part's calendar.
func (pv *partView) takeIn(b *outbox, c *crossing) {
	s := pv.s
	pi := s.newPacket()
	pkt := &s.pkts[pi]
	*pkt = c.pkt
	if pkt.intI >= 0 {
		pkt.intI = s.nic.newINT()
		s.intN[pkt.intI], s.ints[pkt.intI] = c.nHops, b.hops[c.pkt.intI]
	}
	dir := c.pkt.path & 1
	if c.part != pv.me {
		sh := pv.made(c.home())
		if sh < 0 {
			if sh = pv.shadow(b, c); sh < 0 { // the run stops (early)
				s.freePkts = append(s.freePkts, pi)
				return
			}
		}
		pkt.qp, pkt.ep = sh, s.nic.epoch[sh]
	}
	pkt.path = 2*pkt.qp + dir
	s.q.PushSeq(des.Time(c.at), c.seq, evArrive, pi, int64(c.target)+1)
}

// shadowRef is the shadow slot of a queue pair of another part, by that
// part and slot, plus one (0: none yet), with the pair's epoch.
type shadowRef struct {
	ep, sh int32
}

// shadow is the slot standing for c's queue pair in this part, made on
// its first packet here. It stays until the pair's part reclaims the pair
// (a late duplicate may still come), so a slot of another part is one
// pair while it has a shadow here.
func (pv *partView) shadow(b *outbox, c *crossing) int32 {
	k := c.home()
	refs := pv.shadows[k.part]
	if int(k.qp) >= len(refs) {
		refs = grow.Append(refs, make([]shadowRef, int(k.qp)+1-len(refs))...)
		refs = refs[:cap(refs)]
		pv.shadows[k.part] = refs
	}
	r := &refs[k.qp]
	if r.sh == 0 || r.ep != k.ep {
		if c.pair < 0 { // sendAway sends the pair wherever it is not home
			if pv.early == nil {
				pv.early = fmt.Errorf("partitions: internal: part %d got a packet of queue pair %d of part %d without the pair; run with one partition", pv.me, k.qp, k.part)
			}
			return -1
		}
		*r = shadowRef{ep: k.ep, sh: pv.newShadow(k, &b.pairs[c.pair]) + 1}
	}
	return r.sh - 1
}

// made is pair k's shadow slot if it has one, else -1: shadow's common
// case, inlined (shadow was a call a crossing).
func (pv *partView) made(k qpKey) int32 {
	refs := pv.shadows[k.part]
	if q := uint(k.qp); q < uint(len(refs)) && refs[q].ep == k.ep {
		return refs[q].sh - 1 // -1 when none
	}
	return -1
}

// shadowed reports whether slot qi is a shadow.
func (pv *partView) shadowed(qi int32) bool {
	w := int(qi >> 6)
	return w < len(pv.isShadow) && pv.isShadow[w]&(1<<(qi&63)) != 0
}

// newShadow makes the shadow slot of queue pair home, c.
func (pv *partView) newShadow(home qpKey, c *crossPair) int32 {
	s := pv.s
	sh := s.nic.allocQP()
	s.nic.epoch[sh]++
	q := &s.nic.qps[sh]
	// The timer generations carry over, as initQP's do: the slot may have
	// been a pair of this part's, whose stale timers are still due.
	*q = qp{flow: c.flow, size: c.size, done: true, ccGen: q.ccGen, rtoGen: q.rtoGen}
	q.cc.BaseRTT = c.rtt
	if s.nic.placed != nil {
		s.nic.placed.clear(sh)
	}
	pv.madeShadows++
	s.fab.fwding.open(sh, c.hash)
	for d, p := range [2][]route.DirLink{c.fwd[:c.fwdLen], c.rev[:c.revLen]} {
		if len(p) > s.fab.pathW {
			s.fab.widenPaths(len(p))
		}
		copy(s.fab.paths[int(2*sh+int32(d))*s.fab.pathW:], p)
		s.fab.pathLen[2*sh+int32(d)] = uint8(len(p))
	}
	// The receiver counts a cell's acknowledgements as its sender cut it
	// (cellFor, which read the flow's record: a cache miss a pair).
	q.cell = c.cell
	pv.slots[sh] = slotState{key: home}
	for int(sh>>6) >= len(pv.isShadow) {
		pv.isShadow = append(pv.isShadow, 0)
	}
	pv.isShadow[sh>>6] |= 1 << (sh & 63)
	return sh
}

// Reclaiming a finished pair's slot. The single loop frees a slot when its
// pair is done and its live count (packets made less packets freed) falls
// to 0. A pair's packets are made in its own part but may be freed in
// any, so each part's live count of the pair (of its slot or shadow) is
// only a share, which may be negative; their sum is the pair's packets
// still out, those crossing between parts included. Between two windows
// every part stands still, so the shares each part reads at the end of
// a window (the pair's part) or at the start of the next (the others)
// add up to the pair's packets at that barrier. A done pair makes no
// more packets, so once that sum is 0 none will ever come. So: the
// pair's part asks the others for their shares at the end of the window
// it finished in (relAsk), each answers at the start of the next
// (relShare), and when the answers, read a window later, sum with its
// own share to 0, it frees the slot and tells the others to free their
// shadows (relFree), which they read before any packet of that window:
// a packet of the slot's next pair then makes a shadow of its own.
// Otherwise it asks again after that window. With two parts the other
// part frees its shadow as it answers, when the ask's share (which the
// ask carries) and its own sum to 0: two messages, no relFree (pairs()). Which slot a pair gets does
// not change the run, so the trace stays the single loop's.
const (
	relAsk uint8 = iota
	relShare
	relFree
)

// relMsg is a reclaiming message about slot qp of the sending part's
// pairs (relAsk, relFree) or of the receiving part's (relShare); n is
// the sender's share (relAsk's: read by the other of two parts, pairs).
type relMsg struct {
	kind uint8
	qp   int32
	n    int32
}

// relWait is a finished pair's sum of shares so far and the answers
// still awaited.
type relWait struct {
	sum, waiting int32
}

// retire queues slot qi, whose pair is done, for reclaiming; or frees it
// at once, as the single loop does, when no packet of the pair ever left
// this part (its slotState is still freeSlot: sendAway never saw it, so
// no other part holds a shadow or a share of it) and none is left here.
// In an AllToAll on two parts that is about half the pairs, which then
// skip the reclaiming messages and take a slot still in cache.
func (pv *partView) retire(qi int32) {
	if pv.slots[qi].key.qp < 0 && pv.s.nic.live[qi] == 0 {
		pv.s.nic.freeQP = append(pv.s.nic.freeQP, qi)
		pv.freedAtOnce++
		return
	}
	pv.finished = append(pv.finished, qi)
}

// ask asks every other part for its share of each pair retired in this
// window (at its end: this part's own share is read now).
func (pv *partView) ask() {
	s := pv.s
	for _, qi := range pv.finished {
		if int(qi) >= len(pv.asked) {
			pv.asked = grow.Append(pv.asked, make([]relWait, int(qi)+1-len(pv.asked))...)
			pv.asked = pv.asked[:cap(pv.asked)]
		}
		pv.asked[qi] = relWait{sum: s.nic.live[qi], waiting: int32(pv.part.n - 1)}
		for k := range pv.peers {
			if k != int(pv.me) {
				// With its own share (read by the peer of two parts: pairs).
				pv.rel[pv.par][k] = append(pv.rel[pv.par][k], relMsg{kind: relAsk, qp: qi, n: s.nic.live[qi]})
			}
		}
	}
	pv.finished = pv.finished[:0]
}

// reclaim reads what the other parts sent about reclaiming in the last
// window (before any crossing of it: see above).
func (pv *partView) reclaim() {
	s := pv.s
	for _, src := range pv.peers {
		from := src.pv.me
		box := src.pv.rel[1-pv.par][pv.me]
		for _, m := range box {
			switch m.kind {
			case relAsk:
				n := int32(0)
				if refs := pv.shadows[from]; int(m.qp) < len(refs) && refs[m.qp].sh != 0 {
					n = s.nic.live[refs[m.qp].sh-1]
				}
				if pv.pairs() && m.n+n == 0 {
					pv.freeShadow(from, m.qp) // while its lines are in cache
				}
				pv.rel[pv.par][from] = append(pv.rel[pv.par][from], relMsg{kind: relShare, qp: m.qp, n: n})
			case relShare:
				a := &pv.asked[m.qp]
				a.sum += m.n
				if a.waiting--; a.waiting > 0 {
					break
				}
				if a.sum != 0 {
					pv.finished = append(pv.finished, m.qp) // ask again
					break
				}
				for k := range pv.peers {
					if k != int(pv.me) && !pv.pairs() { // of two parts, the peer freed it
						pv.rel[pv.par][k] = append(pv.rel[pv.par][k], relMsg{kind: relFree, qp: m.qp})
					}
				}
				s.nic.live[m.qp] = 0
				pv.slots[m.qp] = freeSlot // retire's test: nothing of the next pair sent yet
				s.nic.freeQP = append(s.nic.freeQP, m.qp)
			case relFree:
				pv.freeShadow(from, m.qp)
			}
		}
		src.pv.rel[1-pv.par][pv.me] = box[:0]
	}
}

// pairs reports a run of two parts. There the pair's part and the one
// other part each know both shares once the other reads the ask (which
// carries the asker's), so the other frees its shadow as it answers, when
// they sum to 0, and no relFree follows: a message and a second pass over
// the shadow's cold lines less a pair (on a 512-GPU AllToAll, reclaim and
// ask were 525 M of the 3.24 G cachegrind score two parts added). The
// asker frees its slot a window later, when it reads the answer: a packet
// of the slot's next pair reaches the other part a window after that.
func (pv *partView) pairs() bool { return pv.part.n == 2 }

// freeShadow frees this part's shadow of slot qp of part from, if any.
func (pv *partView) freeShadow(from uint8, qp int32) {
	refs := pv.shadows[from]
	if int(qp) >= len(refs) || refs[qp].sh == 0 {
		return
	}
	sh := refs[qp].sh - 1
	refs[qp] = shadowRef{}
	pv.slots[sh] = freeSlot
	pv.isShadow[sh>>6] &^= 1 << (sh & 63)
	s := pv.s
	s.nic.live[sh] = 0
	s.nic.freeQP = append(s.nic.freeQP, sh)
}

// partitionable says why this run cannot be partitioned, if it cannot.
func (s *Sim) partitionable() error {
	var why []string
	if s.flows.expanding() {
		why = append(why, "--expand")
	}
	if s.mon != nil {
		why = append(why, "monitors")
	}
	if s.surWatch {
		why = append(why, "--surrogate")
	}
	if s.loopWin != nil {
		why = append(why, "--loop-window")
	}
	if len(s.cfg.LinkDown) > 0 {
		why = append(why, "LINK_DOWN")
	}
	if s.cfg.PortPFC {
		why = append(why, "PFC_MODE port")
	}
	if len(why) > 0 {
		return fmt.Errorf("partitions: not supported with %s; run with one partition", strings.Join(why, ", "))
	}
	return nil
}

// relEnds is, for each flow i, the node it starts at (flowNode; at
// 2i) and the node a dependant starting there is released at (2i+1: a
// transfer's destination, a delay's or join's own node), side by side,
// made once and kept until the dependencies are checked (checkReleases).
// Each dependency reads both of its flow's: read in the flows' records
// (56 bytes, at random), they missed the last-level cache 1.0 M times
// on a 512-GPU AllToAll's 785 k dependencies. moves has bit i set when
// flow i is a transfer of some bytes: with ends, the load model reads
// the records only of the flows it spreads (one pass over the 2048-GPU
// AllToAll's 4.2 M records rather than two).
func (pv *partView) relEnds() (ends []int32, moves []uint64) {
	if pv.ends != nil {
		return pv.ends, pv.moves
	}
	s := pv.s
	f := s.flows
	n := int32(f.DAG.Len())
	e, mv := make([]int32, 2*n), make([]uint64, (n+63)/64)
	for i := range n {
		v := s.flowNode(i)
		e[2*i], e[2*i+1] = v, v
		if f.size(i) > 0 {
			e[2*i+1] = f.dst(i)
			mv[i>>6] |= 1 << (i & 63)
		}
	}
	pv.ends, pv.moves = e, mv
	return e, mv
}

// releaser is the node where flow p releases its dependant c (ends from
// relEnds): the receiver's when c sends from p's destination (received),
// else the sender's (sent, or p's completion: its last ACK, or a delay's
// end), as sameSrc and fromDst decide.
func releaser(ends []int32, p, c int32) int32 {
	if d := ends[2*p+1]; ends[2*c] == d {
		return d
	}
	return ends[2*p]
}

// partOf is the part node v is in (v past the nodes, as flowNode gives
// for a join without a node: the first part).
func (pv *partView) partOf(v int32) uint8 {
	if int(v) < len(pv.part.of) {
		return pv.part.of[v]
	}
	return 0
}

// checkReleases refuses a DAG with a dependency released in another part
// than its dependant's: the release would reach it with no lookahead.
func (pv *partView) checkReleases() error {
	s := pv.s
	d := s.flows.DAG
	ends, _ := pv.relEnds()
	for i := int32(0); int(i) < d.Len(); i++ {
		deps := d.Deps(i)
		if len(deps) == 0 {
			continue
		}
		h := pv.partOf(ends[2*i])
		for _, p := range deps {
			if r := pv.partOf(releaser(ends, p, i)); r != h {
				return fmt.Errorf("partitions: flow %d (from node %d, part %d) waits on flow %d, which releases it in part %d (%d -> %d): a partitioned run needs every dependency released where its dependant starts; run with one partition",
					d.ID(i), s.flows.src(i), h, d.ID(p), r, s.flows.src(p), s.flows.dst(p))
			}
		}
	}
	return nil
}

// runPartitioned is Run with Partitions parts (see the top of this file).
func (s *Sim) runPartitioned() error {
	if err := s.partitionable(); err != nil {
		return err
	}
	pt, err := s.planParts(s.parts)
	if err != nil {
		return err
	}
	if pt == nil {
		if pt, err = newPartitioning(s.t, s.parts); err != nil {
			return err
		}
	}
	sims := make([]*Sim, pt.n)
	for k := range sims {
		c := s
		if k > 0 {
			r, err := route.New(s.t)
			if err != nil {
				return err
			}
			if c, err = New(s.t, r, s.cfg, s.flows, s.seed); err != nil {
				return err
			}
			c.sendLatPs, c.parts, c.watch.stallFloorPs = s.sendLatPs, s.parts, s.watch.stallFloorPs
		}
		c.pv.part, c.pv.me, c.pv.peers = pt, uint8(k), sims
		c.pv.out = [2][]outbox{make([]outbox, pt.n), make([]outbox, pt.n)}
		c.pv.rel = [2][][]relMsg{make([][]relMsg, pt.n), make([][]relMsg, pt.n)}
		c.pv.shadows = make([][]shadowRef, pt.n)
		c.pv.slots = slices.Repeat([]slotState{freeSlot}, len(c.nic.qps))
		sims[k] = c
	}
	if !pt.keepsDeps {
		err = s.pv.checkReleases()
	}
	s.pv.ends, s.pv.moves = nil, nil
	if err != nil {
		return err
	}
	s.prepare()
	s.flows.run.Concurrent()
	for _, c := range sims {
		// What the flows released with the run send is read in the first
		// window (parity 0 reads parity 1), and counts for its start.
		c.pv.par, c.pv.sentMin = 1, maxTime
		if err := c.begin(); err != nil {
			return err
		}
	}
	// Each thread's CPU clock times the parts it runs (runWindow).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	crew := newCrew(sims, min(max(s.threads, 1), pt.n))
	defer crew.stop()
	stop := s.cfg.StopPs
	var events uint64
	ps := &ParallelStats{Cut: pt.by, Parts: pt.n, Threads: crew.threads, LookaheadPs: pt.lookahead, PartEvents: make([]uint64, pt.n), PartCPU: make([]time.Duration, pt.n),
		TakenBy: takenBy(pt.n)}
	ps.Taken, ps.TakenCPU = make([]uint64, len(ps.TakenBy)), make([]time.Duration, len(ps.TakenBy))
	free, windowCPU := make([]uint64, pt.n), make([]uint64, pt.n)
	s.pv.stats = ps
	var wlog *windowLog
	if s.pv.log != nil {
		wlog = newWindowLog(s.pv.log, pt.n)
	}
	windowEvents := make([]uint64, pt.n)
	wider := newWidener(pt.n)
	first := int64(-1)
	loopStart, cpuStart, gcStart := time.Now(), cpuSecs(), gcCPU()
	var betweenFrom int64 // the caller's CPU clock as a timed window ended
	defer func() {
		wider.close(ps)
		ps.Loop = time.Since(loopStart)
		ps.ProcessCPU = time.Duration((cpuSecs() - cpuStart) * 1e9)
		ps.GCCPU = time.Duration((gcCPU() - gcStart) * 1e9)
		ps.Wait += time.Duration(crew.waited.Load())
		ps.Alone = crew.alone
		for _, c := range sims {
			ps.Crossings += c.pv.received
			ps.Frames += c.pv.frames
			ps.Pairs += uint64(c.pv.pairsSent)
		}
	}()
	for w := 0; ; w++ {
		// The next window starts at the earliest event anywhere, pending
		// or sent in the last window.
		next := int64(maxTime)
		for _, c := range sims {
			next = min(next, c.pv.sentMin, int64(c.q.PeekTime())) // Never when empty
		}
		if next == maxTime {
			break
		}
		if stop > 0 && next > stop {
			for _, c := range sims {
				c.now = stop
			}
			break
		}
		end := next + pt.lookahead
		if stop > 0 {
			end = min(end, stop+1)
		}
		for _, c := range sims {
			c.pv.sentMin = maxTime
		}
		if betweenFrom != 0 {
			ps.Between += time.Duration(threadCPU() - betweenFrom)
			betweenFrom = 0
		}
		// A CPU clock is a system call (1.5 us on a loaded VM, against
		// tens of microseconds a window on 128 GPUs): one window in
		// timedEvery reads them, picked by a hash of its number (a ring's
		// windows can repeat with a period of a few).
		timed := timedWindow(w)
		wait := crew.run(end, w&1, timed)
		if timed {
			betweenFrom = threadCPU()
			ps.Timed++
		}
		var total, most uint64
		var mostCPU int64
		stalled := false
		for k, c := range sims {
			if c.err != nil {
				if wlog != nil {
					wlog.close()
				}
				return c.err // the first part's: the same whatever the threads
			}
			stalled = stalled || c.watch.stalled != nil
			total += c.stats.Events
			windowEvents[k] = c.stats.Events - ps.PartEvents[k]
			ps.PartEvents[k] = c.stats.Events
			most = max(most, windowEvents[k])
			if timed {
				ps.PartCPU[k] += time.Duration(c.pv.cpu)
				windowCPU[k] = uint64(max(c.pv.cpu, 0))
				mostCPU = max(mostCPU, c.pv.cpu)
				ps.TimedEvents += windowEvents[k]
			}
		}
		ps.CPUMaxSum += time.Duration(mostCPU)
		if first < 0 {
			first = next
		}
		ps.Windows++
		ps.SpanPs = end - first
		ps.Events = total
		ps.MaxSum += most
		wider.add(ps, windowEvents)
		ps.take(crew.order, windowEvents, free)
		if timed {
			ps.takeCPU(crew.order, windowCPU, free)
		}
		takeOrder(crew.order, windowEvents)
		ps.ThreadSum += max(most, (total-events+uint64(ps.Threads)-1)/uint64(ps.Threads))
		if wlog != nil {
			wlog.line(w, next, end, windowEvents, most, wait)
		}
		if !stalled {
			// Every part is between windows: the deadlock detector may read
			// them all (a cycle can cross parts).
			for _, c := range sims {
				if c.watch.suspect {
					c.watch.suspect = false
					s.watch.lookForDeadlock(sims, end-1, c.watch.v, c.watch.k)
				}
			}
			stalled = s.watch.stalled != nil
		}
		if stalled {
			break
		}
		if s.progress != nil && total>>20 != events>>20 {
			s.progress(s.flows.run.Done(), s.flows.DAG.Len(), next)
		}
		events = total
	}
	if wlog != nil {
		if err := wlog.close(); err != nil {
			return fmt.Errorf("parallel report: %w", err)
		}
	}
	s.merge(sims)
	return s.finish()
}

// runWindow takes in what the other parts sent in the last window (in
// part order), then runs this part's events before end, sending in window
// parity par; timed, it reads its thread's CPU clock before and after.
func (s *Sim) runWindow(end int64, par int, timed bool) {
	var t0 int64
	if timed {
		t0 = threadCPU()
	}
	s.pv.par, s.pv.end = par, end
	s.pv.reclaim()
	for _, src := range s.pv.peers {
		box := &src.pv.out[1-par][s.pv.me]
		// Frames before packets: the calendar orders both by time and
		// number, whatever the order they come in, and a port's frames
		// keep theirs.
		for i := range box.f {
			s.pv.takeFrame(&box.f[i])
		}
		for i := range box.c {
			s.pv.takeIn(box, &box.c[i])
		}
		s.pv.received += uint64(len(box.c) + len(box.f))
		s.pv.frames += uint64(len(box.f))
		box.reset()
	}
	s.err = s.loop(end, true)
	if s.err == nil {
		s.err = s.pv.early
	}
	s.pv.ask()
	if timed {
		s.pv.cpu = threadCPU() - t0
	}
}

// crew runs the parts' windows on its threads. Each window, every thread
// takes its own part (thread t part t, the caller's goroutine part 0) if
// no other thread has, then the next part not yet taken until none is
// left; the caller then waits for the parts taken by the others. A part
// that stays on one thread keeps its working set in that core's caches:
// taken by whichever thread came first, the two parts of SimAI's mixed
// 128-GPU case changed cores about every other window, and their CPU at
// --threads 2 was 1.72-2.37 s against 1.39-1.67 s on one thread (eight
// rounds under SCHED_FIFO, so that the threads had the cores); each
// thread's own part first, 1.49-1.95 s.
// Which thread runs a part does not change what it does, so the trace is
// the same; but a thread the kernel has off its core takes no part, and
// on a machine whose cores are busy the caller then runs them all instead
// of waiting a time slice for it (--threads 2 ran 5.5x slower than one
// beside a CPU hog when each thread had its fixed share). Waiting threads
// spin briefly (a window is tens of microseconds, about what waking a
// sleeping thread takes), then sleep.
type crew struct {
	sims []*Sim
	// order is the parts in the order the threads take them: the
	// caller sets it between windows (takeOrder) and copies it to scan,
	// which the threads read (one late for a window may still read it
	// as the caller starts the next).
	order []int32
	scan  []atomic.Int32
	// next is the window's number (0 before the first); -1 stops the
	// threads. taken is, by part, the last window that took it: a take
	// of window w swaps w-1 for w, so a stale one cannot succeed later.
	next     signal
	taken    []atomic.Int64
	finished signal // parts done in the current window
	win      int64
	end      int64
	par      int
	threads  int
	// solo is the windows the caller runs alone from now, backoff how
	// many it ran alone last time (see run).
	solo, backoff int
	alone         int // windows the caller ran alone so far
	stopped       sync.WaitGroup
	// waited is the threads' time at barriers (ns), the workers' and
	// the caller's.
	waited atomic.Int64
	timed  bool // the window's parts read their CPU clocks
}

func newCrew(sims []*Sim, threads int) *crew {
	c := &crew{sims: sims, threads: threads, order: make([]int32, len(sims))}
	for k := range c.order {
		c.order[k] = int32(k)
	}
	// More threads than the scheduler's Ps: a waiting thread holds a P
	// another thread of the crew may need to run its part.
	yield := threads > runtime.GOMAXPROCS(0)
	c.next.init(yield)
	c.finished.init(yield)
	c.taken, c.scan = make([]atomic.Int64, len(sims)), make([]atomic.Int32, len(sims))
	for k := range c.scan {
		c.scan[k].Store(int32(k))
	}
	for t := 1; t < threads; t++ {
		c.stopped.Add(1)
		go c.work(t)
	}
	return c
}

func (c *crew) work(home int) {
	defer c.stopped.Done()
	runtime.LockOSThread() // for threadCPU; the thread ends with it
	seen := int64(0)
	for {
		t0 := time.Now()
		v := c.next.wait(func(v int64) bool { return v != seen })
		c.waited.Add(int64(time.Since(t0)))
		if v < 0 {
			return
		}
		seen = v
		if k := c.takeAll(home, v); k > 0 {
			c.finished.add(k)
		}
	}
}

// takeAll runs the parts of window win no other thread took, thread
// home's own part first, then the others in c.order; it returns how many
// it ran. c.end and c.par are the window's: it cannot end while a part
// taken in it runs.
func (c *crew) takeAll(home int, win int64) int64 {
	ran := int64(0)
	for k := c.claim(home, win); k >= 0; k = c.claim(home, win) {
		c.sims[k].runWindow(c.end, c.par, c.timed)
		ran++
	}
	return ran
}

// claim takes for thread home the next part of window win no thread has
// taken, its own first, then in c.order; -1 when none is left.
func (c *crew) claim(home int, win int64) int {
	if home < len(c.taken) && c.taken[home].CompareAndSwap(win-1, win) {
		return home
	}
	for i := range c.scan {
		if k := c.scan[i].Load(); c.taken[k].CompareAndSwap(win-1, win) {
			return int(k)
		}
	}
	return -1
}

// timedEvery is how often a window reads the threads' CPU clocks: one in
// timedEvery, 2^timedBits (timedWindow).
const (
	timedBits  = 3
	timedEvery = 1 << timedBits
)

// timedWindow picks window w's number by a hash to read the CPU clocks.
func timedWindow(w int) bool { return uint32(w)*0x9e3779b1>>(32-timedBits) == 0 }

// soloAfter is a wait for another thread's part that says the kernel took
// that thread off its core: about a time slice, against tens of
// microseconds of work a part.
const soloAfter = time.Millisecond

// run runs one window on every part. After a wait of soloAfter for another
// thread, the caller runs the next windows alone, twice as many each time
// it happens again (up to 4096), and shares them again after: threads
// waiting on each other's time slices beside other work ran slower than
// one thread alone. It returns how long the caller waited for the others.
func (c *crew) run(end int64, par int, timed bool) time.Duration {
	if c.threads == 1 || c.solo > 0 {
		if c.threads > 1 {
			c.alone++
		}
		c.solo--
		for _, s := range c.sims {
			s.runWindow(end, par, timed)
		}
		return 0
	}
	n := int64(len(c.sims))
	c.end, c.par, c.timed = end, par, timed
	for i, k := range c.order {
		c.scan[i].Store(k)
	}
	c.finished.v.Store(0) // no part of this window is taken yet
	c.win++
	c.next.store(c.win)
	start := time.Now()
	mine := c.takeAll(0, c.win)
	if mine == n {
		return 0
	}
	t0 := time.Now()
	c.finished.wait(func(d int64) bool { return d+mine == n })
	waited := time.Since(t0)
	c.waited.Add(int64(waited))
	if descheduled(waited, t0.Sub(start)) {
		c.backoff = min(max(2*c.backoff, 16), 4096)
		c.solo = c.backoff
	} else {
		c.backoff /= 2
	}
	return waited
}

// descheduled says whether a wait of waited for the other threads' parts,
// after own of this thread's work in the window, is the kernel keeping a
// thread off its core rather than parts of unequal work: longer than
// soloAfter and than this thread's own work. Windows of milliseconds of
// work a part differ by more than soloAfter on their own: the 2048-GPU
// AllToAll's (8 ms a part) ran 3275 of 4219 windows alone on an idle VM,
// as fast as one thread (71.6 s against 69.3 s).
func descheduled(waited, own time.Duration) bool {
	return waited > soloAfter && waited > own
}

func (c *crew) stop() {
	c.next.store(-1)
	c.stopped.Wait()
}

// spinFor is how long a thread waiting for another spins before it
// sleeps: a window of the 128-GPU micro run takes about 35 us a part.
// There, with parts taken in turn, --threads 2 took 2.2-2.3 s spinning
// 20 us, 1.4-1.7 s at 100 us, 1.3-1.5 s at 300 us (the single loop
// 1.8 s) on a lightly loaded machine, and beside a CPU hog on each core
// 3.6-3.9, 3.9-4.0 and 3.8-6.0 s (the single loop 2.9-4.0 s); spinning
// without bound, with fixed shares, 5.7-18 s. Timings on a 2-core machine
// shared with other work: noisy.
var spinFor = 100 * time.Microsecond

// spinKeep is how long a waiting thread spins on its core before it also
// yields its P now and then (the garbage collector's workers may need it).
// A goroutine locked to its thread does not yield cheaply: its thread
// parks and another is woken to hand the P back, 5-58 us and a context
// switch a call on a loaded 2-core VM (2-8 us of the thread's CPU),
// against 0.2-0.8 us unlocked. Yielding every 64 loads from the start, a
// thread waiting out another part's last microseconds (the mixed 128-GPU
// case's windows are about 40 us a part) was parked when they ended:
// --threads 2 there switched context 101 k times a run, 50 k never
// yielding (medians of 20 runs, load 10-15). Past spinKeep it yields as
// before, which spinFor's timings were tuned with: on a loaded machine,
// never yielding within spinFor ran the mixed case slower (median walls
// 3.15 s against 2.60 s, the same runs).
var spinKeep = 20 * time.Microsecond

// signal is a counter threads wait on: spinning for up to spinFor, then
// asleep on a condition variable until a change wakes them.
type signal struct {
	v        atomic.Int64
	sleepers atomic.Int32
	// yield: the crew's threads outnumber the Ps, so a spinning thread
	// gives its P up (runtime.Gosched) every 64 loads from the start, for
	// another thread of the crew; otherwise only past spinKeep.
	yield bool
	mu    sync.Mutex
	cond  sync.Cond
}

func (s *signal) init(yield bool) { s.cond.L, s.yield = &s.mu, yield }

func (s *signal) add(d int64) { s.v.Add(d); s.wake() }

func (s *signal) store(v int64) { s.v.Store(v); s.wake() }

// wake wakes the sleepers. A sleeper counts itself under the lock before
// it reads v one last time, and the atomics are sequentially consistent,
// so either it reads the new value or wake sees it and takes the lock
// only once it waits.
func (s *signal) wake() {
	if s.sleepers.Load() > 0 {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// wait returns v once ready(v).
func (s *signal) wait(ready func(int64) bool) int64 {
	var start time.Time
	for i := 0; ; i++ {
		if v := s.v.Load(); ready(v) {
			return v
		}
		if i&63 == 63 {
			if i == 63 {
				start = time.Now()
			} else if d := time.Since(start); d > spinFor {
				break
			} else if s.yield || d > spinKeep {
				runtime.Gosched()
			}
		}
	}
	s.mu.Lock()
	s.sleepers.Add(1)
	v := s.v.Load()
	for !ready(v) {
		s.cond.Wait()
		v = s.v.Load()
	}
	s.sleepers.Add(-1)
	s.mu.Unlock()
	return v
}

// merge gathers the parts' counts, their ports' bytes (for the routing
// summary), the latest time and the first stall into s.
func (s *Sim) merge(sims []*Sim) {
	for _, c := range sims[1:] {
		a, b := &s.stats, &c.stats
		a.Events += b.Events
		a.DataPackets += b.DataPackets
		a.SentBytes += b.SentBytes
		a.Delivered += b.Delivered
		a.Discarded += b.Discarded
		a.Reordered += b.Reordered
		a.Dropped += b.Dropped
		a.Stale += b.Stale
		a.DroppedBytes += b.DroppedBytes
		a.Retransmitted += b.Retransmitted
		a.Pauses += b.Pauses
		a.PeakIngress = max(a.PeakIngress, b.PeakIngress)
		a.CNPs += b.CNPs
		s.now = max(s.now, c.now)
		if s.watch.stalled == nil {
			s.watch.stalled = c.watch.stalled
		}
	}
	for i := range s.fab.ports {
		if k := s.pv.part.of[s.fab.ports[i].from]; k != 0 {
			s.fab.ports[i].txBytes = sims[k].fab.ports[i].txBytes
		}
	}
}
