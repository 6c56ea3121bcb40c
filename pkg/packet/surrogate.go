package packet

import (
	"cmp"
	"fmt"
	"slices"
	"unsafe"

	"github.com/fabricsim/fabricsim/internal/grow"
	"github.com/fabricsim/fabricsim/internal/prefetch"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Surrogate configures hybrid simulation after Cruz-Camacho et al.
// (SIGSIM-PADS '23, seed 003): between StartPs and EndPs packets bypass the
// fabric and reach their destination after a predicted latency — the
// average one-way latency measured for the same (source, destination, kind)
// before StartPs, or the path's unloaded latency when nothing was measured.
// Queue pairs open when the window opens keep their windows, rates and
// NIC serialization, so their congestion control runs as usual; only the
// fabric is skipped. A transfer opened inside the window that fits in one
// packet, or that nothing waits on, has no queue pair (bypassFlow): its
// bytes leave its NIC at line rate, arrive the predicted latency later,
// and its acknowledgement the predicted latency after that, so the DAG
// runs as usual with an event or none per message.
//
// A NIC port that could not keep up while latencies were tracked (it had
// bytes waiting to be sent at nearly every sample: PFC held it or its
// congestion control cut its rate, as at saturation) sends through the
// surrogate at the rate the fabric delivered its data then, not at line
// rate; so does one whose data the fabric delivered markedly less of than
// it sent (the switches' buffers were filling). The predicted
// latencies carry the fabric's queueing but not its limit on throughput,
// and at line rate a saturated fabric's surrogate delivered a third more
// than the fabric did. What a port has scheduled through the surrogate
// keeps it busy after the window closes.
//
// In the default "hybrid" strategy the fabric is suspended: packets in
// flight at StartPs are frozen where they are (their events are held and
// happen as much later as the surrogate stayed open), copies of them are
// delivered by the predictor, and at
// EndPs the frozen packets resume as zombies — they load queues and links
// like any packet, so the network restarts hot, and are discarded on
// arrival. "hybrid-lite" (Lite) does not suspend: in-flight packets drain
// during the surrogate period and the network restarts empty.
type Surrogate struct {
	StartPs, EndPs int64
	Lite           bool
	// TrackPs is how long before StartPs latencies are recorded (0: from
	// the beginning of the run).
	TrackPs int64
	// AutoWindowPs, when positive, replaces StartPs..EndPs by steady-state
	// detection over windows of this length: the surrogate opens once the
	// fabric has been steady for autoWindows windows, predicting from the
	// latencies measured over them, and closes when the load moves (a
	// new phase of the workload); it may open again later.
	AutoWindowPs int64
}

// Steady state, for AutoWindowPs. The surrogate predicts the latencies it
// measured, which is only faithful while the fabric stays as it was
// (seed 003 switches by hand after the warm-up); these thresholds decide
// "as it was".
const (
	// autoWindows consecutive windows whose mean packet latency and
	// packets in flight (averaged over the window) each stay within
	// autoTolerance of the streak's first window open the surrogate.
	autoWindows   = 3
	autoTolerance = 0.1
	// autoMinPackets packets must arrive in a window for its mean latency
	// to mean anything; a quieter window breaks the streak.
	autoMinPackets = 100
	// autoLoadChange: a window whose load (transfers in progress,
	// averaged over the window) differs by more than this share from the
	// steady windows' closes the surrogate. Bytes released per window
	// were no measure: a collective releases its steps in bursts, and the
	// surrogate closed at every quiet window.
	autoLoadChange = 0.2
	// autoMinWindowPs is the shortest window: a sample event per window
	// costs little only while windows are long against packet times.
	autoMinWindowPs = 1_000_000
)

// SurrogateSwitch is one opening or closing of the surrogate, and why.
type SurrogateSwitch struct {
	AtPs int64
	On   bool
	Why  string
}

// autoSample is one window's view of the fabric.
type autoSample struct {
	latPs, inFlight, load float64
}

type latStat struct {
	sum int64
	n   int64
}

type surrogate struct {
	s *Sim // the simulation it is a part of, for the clock, queue pairs and fabric
	Surrogate
	active bool
	qps    []surQP          // per queue pair slot
	stats  []latStat        // per latency class
	class  map[uint64]int32 // latKey -> index in stats + 1, beyond densePairNodes
	dense  []int32          // the same by (src*nodes+dst)*2+ctl, up to densePairNodes
	onAt   int64            // when the surrogate last opened
	// held are the suspended fabric's events that came due while the
	// surrogate was open; they happen as much later as it stayed open.
	held []des.Event
	// Steady-state detection (AutoWindowPs): this window's latency sum
	// and count, the transfers in progress integrated over the window
	// up to lastChange (inProgressPs), the current streak of steady
	// windows, and the load the open surrogate was measured under.
	winLat, winN                         int64
	inProgress, inProgressPs, lastChange int64
	streak                               []autoSample
	baseLoad                             float64
	// Transfers opened while the surrogate is open skip their queue pairs
	// (bypassFlow): each pair's prediction, and when each NIC port has
	// sent what was bypassed through it.
	pairs pairTable
	nic   []surNIC // by port; only host ports' are used
	// deferred are the transfers whose NIC would start them only after
	// a fixed window closes: they open queue pairs when it does.
	deferred []int32
	// zombies are the frozen packets whose copies are due, in delivery
	// order from zHead (zombieNext).
	zombies []zombieDue
	zHead   int
	zTmp    []zombieDue // sortZombies' scratch
	conv    []convFlow  // scratch of bypassPending
	load    SurrogateLoad
	// folded counts the start times run without their calendar round
	// trip (foldStarts); noFold, for tests, runs each through it.
	folded int
	noFold bool
	noList bool // for tests: every zombie's delivery its own event
	// Service rates (see Surrogate): the host ports, and the backlog
	// samples taken since trackFrom.
	hostPorts []int32
	samples   int32
	trackFrom int64
	sampleGen int64
}

// convFlow is a transfer bypassPending runs without queue pairs, and
// whether nothing waits on it (bypasses).
type convFlow struct {
	i     int32
	alone bool
}

// surNIC is a host port under the surrogate.
type surNIC struct {
	// free is when the port will have sent what was bypassed through it
	// (and what its queue pairs held when the window opened); bypassEnd
	// when the last bypassed transfer's bytes leave it, the port staying
	// busy that long after the window.
	free, bypassEnd int64
	// While tracking: data wire bytes sent, and of them delivered, since
	// the first sample, and the samples that found bytes waiting.
	sent, delivered int64
	backlogged      int32
	// While open: the measured picoseconds per byte (0: line rate).
	psPerByte float64
}

// Backlog sampling, for the service rates: backlogSamples samples over a
// fixed tracking time (backlogSamplesAuto per window in auto mode); a
// port is saturated when all but backlogSlack of them found it with bytes
// waiting (a port that keeps up has idle moments between messages even at
// 90% of line rate; one the fabric holds back never empties), or when it
// sent more than 1 + backlogSlack times what the fabric delivered of it
// (the switches' buffers were filling: sources send at line rate into
// megabytes of buffer long before PFC holds them); and in either case
// when what was delivered is below line rate / (1 + backlogSlack).
const (
	backlogSamples     = 64
	backlogSamplesAuto = 16
	backlogSlack       = 0.1
)

// pairKey names a transfer's source, destination (below maxSurrogateNodes)
// and NIC port choice (-1: hashed) as one word: the map's fast path.
func pairKey(src, dst int32, port int) uint64 {
	return uint64(uint32(src))<<40 | uint64(uint32(dst))<<16 | uint64(uint16(port+1))
}

// maxSurrogateNodes bounds the nodes pairKey names.
const maxSurrogateNodes = 1 << 24

// pairPrediction is what a bypassed transfer between two nodes takes: the
// first hop's port, the predicted latency of a data packet and of its
// acknowledgement, the window on the unloaded round trip, and the path's
// figures for its ideal time. With pairTable's port it fills one cache
// line (pairtable_test.go): the table is read at random, a line missed per
// message, two while an entry took 72 bytes.
type pairPrediction struct {
	port      int32 // the first hop's
	data, ack int64
	win       int64 // the window on the unloaded round trip (bytes)
	ideal     idealPath
}

// SetSurrogate turns hybrid simulation on; call before Run.
func (s *Sim) SetSurrogate(c Surrogate) error {
	if c.AutoWindowPs > 0 {
		switch {
		case c.AutoWindowPs < autoMinWindowPs:
			return fmt.Errorf("auto: a window of %s; want %s or more (a window must see %d packets arrive)", des.Time(c.AutoWindowPs), des.Time(autoMinWindowPs), autoMinPackets)
		case c.AutoWindowPs > maxTime/4:
			return fmt.Errorf("auto: a window of %s; want at most %s", des.Time(c.AutoWindowPs), des.Time(maxTime/4))
		case c.TrackPs > 0:
			return fmt.Errorf("auto: no tracking time; it tracks its steady windows")
		}
	} else if c.StartPs < 0 || c.EndPs <= c.StartPs {
		return fmt.Errorf("surrogate window %d..%d ps: the end must come after the start", c.StartPs, c.EndPs)
	}
	if c.EndPs > maxTime/2 {
		return fmt.Errorf("surrogate window ends too late")
	}
	if len(s.t.Nodes) >= maxSurrogateNodes {
		return fmt.Errorf("the surrogate predicts per pair of nodes, up to %d nodes; the topology has %d", maxSurrogateNodes, len(s.t.Nodes))
	}
	if s.fab.fwding.perPacket() || !s.cfg.Transport.caps().surrogate {
		// The predictor learns latencies per path, and frozen packets
		// resume along their queue pair's path.
		return fmt.Errorf("the surrogate needs ROUTING ecmp and TRANSPORT roce, not %s and %s", s.cfg.Routing, s.cfg.Transport)
	}
	sg := &surrogate{s: s, Surrogate: c, class: map[uint64]int32{}, pairs: newPairTable(len(s.t.Nodes)), nic: make([]surNIC, len(s.fab.ports))}
	if n := len(s.t.Nodes); n <= densePairNodes {
		sg.dense = make([]int32, 2*n*n)
	}
	for pid := range s.fab.ports {
		if !s.fab.isSwitch[s.fab.ports[pid].from] {
			sg.hostPorts = append(sg.hostPorts, int32(pid))
		}
	}
	s.sur, s.surWatch, s.surCount = sg, true, c.AutoWindowPs > 0
	if c.AutoWindowPs > 0 {
		s.push(c.AutoWindowPs, evSurrogateSample, 0, 0)
		s.push(0, evBacklogSample, 0, 0)
		return nil
	}
	s.push(sg.trackStart(), evBacklogSample, 0, 0)
	s.push(c.StartPs, evSurrogate, 0, 1)
	s.push(c.EndPs, evSurrogate, 0, 0)
	return nil
}

// latKey names a (source, destination, data or control) latency class.
func latKey(src, dst int32, ctl bool) uint64 {
	k := uint64(uint32(src))<<33 | uint64(uint32(dst))<<1
	if ctl {
		k |= 1
	}
	return k
}

// classSlot is where class (src, dst, ctl)'s index + 1 is kept: in the
// dense table up to densePairNodes nodes (the map's lookups were a tenth
// of opening seed 003's surrogate, one per frozen packet's queue pair),
// else nil (the map).
func (sg *surrogate) classSlot(src, dst int32, ctl bool) *int32 {
	if sg.dense == nil {
		return nil
	}
	i := (int(src)*len(sg.s.t.Nodes) + int(dst)) * 2
	if ctl {
		i++
	}
	return &sg.dense[i]
}

// classOf is class (src, dst, ctl)'s index + 1, 0 when none was measured.
func (sg *surrogate) classOf(src, dst int32, ctl bool) int32 {
	if p := sg.classSlot(src, dst, ctl); p != nil {
		return *p
	}
	return sg.class[latKey(src, dst, ctl)]
}

func (sg *surrogate) setClass(src, dst int32, ctl bool, c int32) {
	if p := sg.classSlot(src, dst, ctl); p != nil {
		*p = c
		return
	}
	sg.class[latKey(src, dst, ctl)] = c
}

// ends are a packet's source and destination nodes, as its queue pair
// noted them when it opened: as the surrogate opens, finding them through
// the pair's flow was two cache misses per frozen packet.
func (sg *surrogate) ends(pkt *packet) (int32, int32) {
	q := &sg.qps[pkt.qp]
	if pkt.kind == pktData {
		return q.src, q.dst
	}
	return q.dst, q.src
}

// track records a delivered packet's one-way latency while tracking.
func (sg *surrogate) track(pkt *packet) {
	s := sg.s
	switch {
	case sg.active:
		return
	case sg.AutoWindowPs > 0:
		if pkt.kind == pktData {
			sg.winLat += s.now - pkt.born
			sg.winN++
		}
	case s.now >= sg.StartPs || (sg.TrackPs > 0 && s.now < sg.StartPs-sg.TrackPs):
		return
	}
	// A pair's classes never change, so it keeps their indexes: no map
	// lookup per packet.
	q := &sg.qps[pkt.qp]
	c := &q.latData
	if pkt.kind != pktData {
		c = &q.latCtl
	}
	if *c == 0 {
		src, dst := sg.ends(pkt)
		ctl := pkt.kind != pktData
		if *c = sg.classOf(src, dst, ctl); *c == 0 {
			sg.stats = append(sg.stats, latStat{})
			*c = int32(len(sg.stats))
			sg.setClass(src, dst, ctl, *c)
		}
	}
	st := &sg.stats[*c-1]
	st.sum += s.now - pkt.born
	st.n++
	if pkt.kind == pktData {
		sg.nic[s.fab.paths[int(pkt.path)*s.fab.pathW]].delivered += int64(pkt.wire)
	}
}

// predict is the latency a packet gets in surrogate mode. The table no
// longer changes once the window opens, so each queue pair caches it.
func (sg *surrogate) predict(pkt *packet) int64 {
	s := sg.s
	q := &sg.qps[pkt.qp]
	cache := &q.predData
	if pkt.kind != pktData {
		cache = &q.predCtl
	}
	if *cache > 0 {
		return *cache
	}
	// A pair that delivered packets of this kind while latencies were
	// tracked holds its class: its mean, without finding the pair's ends
	// (two cache misses a pair as the surrogate opens) and the class map.
	lat := q.latData
	if pkt.kind != pktData {
		lat = q.latCtl
	}
	if lat > 0 {
		st := sg.stats[lat-1]
		*cache = max(st.sum/st.n, 1)
		return *cache
	}
	src, dst := sg.ends(pkt)
	*cache = sg.measured(src, dst, pkt.kind != pktData, s.fab.path(pkt.path), int64(pkt.wire))
	return *cache
}

// measured is latency class (src, dst, ctl)'s mean, or when nothing was measured the
// unloaded latency of a packet of wire bytes along path.
func (sg *surrogate) measured(src, dst int32, ctl bool, path []route.DirLink, wire int64) int64 {
	s := sg.s
	if c := sg.classOf(src, dst, ctl); c > 0 {
		st := sg.stats[c-1]
		return max(st.sum/st.n, 1)
	}
	l := int64(0)
	for _, dl := range path {
		p := &s.fab.ports[dl]
		l += p.lat + int64(float64(wire)*p.bitPs+0.5)
	}
	return max(l, 1)
}

// bypass sends a packet leaving its source straight to its destination
// after the predicted latency (minus the serialization already paid).
func (sg *surrogate) bypass(pi int32, tx int64) {
	s := sg.s
	at := sg.bypassAt(pi, tx)
	var copyOf int64 // a zombie's copy is made when delivered (onBypass)
	if s.pkts[pi].zombie != 0 {
		copyOf = 1
	}
	s.push(at, evBypass, pi, copyOf)
}

// bypassAt counts packet pi as bypassed and says when the predictor
// delivers it.
func (sg *surrogate) bypassAt(pi int32, tx int64) int64 {
	s := sg.s
	pkt := &s.pkts[pi]
	s.stats.Bypassed++
	return max(pkt.born+sg.predict(pkt), s.now+tx)
}

// zombieDue is a frozen packet whose copy the predictor delivers at at:
// the number its event would have had, and its queue pair.
type zombieDue struct {
	at     int64
	seq    uint64
	pi, qp int32
}

// sortZombies sorts z by delivery time, then number, as the calendar
// pops them, using tmp as scratch; it returns the sorted list and the
// other array. A radix sort by time (stable, eight bits a pass over the
// bits in which the times differ), then equal times by number: compared
// one pair at a time, seed 003's 69 k random times took a tenth of the
// window in mispredicted branches.
func sortZombies(z, tmp []zombieDue) ([]zombieDue, []zombieDue) {
	if len(z) < 2 {
		return z, tmp
	}
	lo, hi := z[0].at, z[0].at
	for _, e := range z {
		lo, hi = min(lo, e.at), max(hi, e.at)
	}
	tmp = slices.Grow(tmp[:0], len(z))[:len(z)]
	for shift := uint(0); shift < 64 && (hi-lo)>>shift > 0; shift += 8 {
		var count [257]int
		for _, e := range z {
			count[(e.at-lo)>>shift&0xff+1]++
		}
		for d := 1; d < 257; d++ {
			count[d] += count[d-1]
		}
		for _, e := range z {
			d := (e.at - lo) >> shift & 0xff
			tmp[count[d]] = e
			count[d]++
		}
		z, tmp = tmp, z
	}
	for i := 0; i < len(z); { // equal times (rare): by number
		j := i + 1
		for j < len(z) && z[j].at == z[i].at {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(z[i:j], func(a, b zombieDue) int { return cmp.Compare(a.seq, b.seq) })
		}
		i = j
	}
	return z, tmp
}

// zombieAhead is how many deliveries of the list ahead zombieNext
// prefetches: a few events' time, for the loads to arrive.
const zombieAhead = 4

// zombieNext delivers the copy of the zombie list's head, whose event
// (evBypass, Arg zombieList) just popped, and puts the next in the
// calendar with the number its own event would have had: the calendar
// pops them in the order their own events would have popped.
func (sg *surrogate) zombieNext() {
	s := sg.s
	z := sg.zombies[sg.zHead]
	sg.zHead++
	if sg.zHead < len(sg.zombies) {
		n := &sg.zombies[sg.zHead]
		s.q.PushSeq(des.Time(n.at), n.seq, evBypass, n.pi, zombieList)
		// In delivery order the frozen packets, their queue pairs and
		// their flows are at random: their loads, started some deliveries
		// ahead, overlap the events before them instead of stalling each
		// delivery. The flow is known once its pair has arrived.
		if k := sg.zHead + 2*zombieAhead; k < len(sg.zombies) {
			a := &sg.zombies[k]
			prefetch.Line(unsafe.Pointer(&s.pkts[a.pi]))
			q := &s.nic.qps[a.qp]
			prefetch.Line(unsafe.Pointer(q))
			prefetch.Line(unsafe.Pointer(&q.rcvNext))
			prefetch.Line(unsafe.Pointer(&q.cc))
			prefetch.Line(unsafe.Pointer(&s.nic.epoch[a.qp]))
			prefetch.Line(unsafe.Pointer(&s.nic.live[a.qp]))
			prefetch.Line(unsafe.Pointer(&sg.qps[a.qp]))
		}
		if k := sg.zHead + zombieAhead; k < len(sg.zombies) {
			f := s.flows
			if i := s.nic.qps[sg.zombies[k].qp].flow; i >= 0 && int(i) < len(f.End) {
				prefetch.Line(unsafe.Pointer(&f.rxLeft[i]))
				prefetch.Line(unsafe.Pointer(&f.qpsLeft[i]))
				prefetch.Line(unsafe.Pointer(&f.End[i]))
			}
		}
	} else {
		sg.zombies, sg.zHead = sg.zombies[:0], 0
	}
	sg.onBypass(z.pi, true)
}

// bypassFlow runs transfer i, opened while the surrogate is open, without
// queue pairs or packets: its bytes leave its NIC port back to back after
// what the port already has to send, at line rate (held by its window
// over the predicted round trip when longer than it); its last packet
// arrives the predicted data latency after it left, and the sender learns
// of it the predicted acknowledgement latency later. The releases happen
// then, as for a transfer with queue pairs (sent, received, finishFlow).
// Per-message host work (queue pair, packets, acknowledgements, congestion
// control) would otherwise run through the surrogate: with one event per
// packet and hop gone, it was most of what remained.
//
// alone: nothing waits on it, so without a stop time or load tracking
// to honour it ends with no event at all.
func (sg *surrogate) bypassFlow(i, src, dst int32, size int64, alone bool) error {
	s := sg.s
	f := s.flows
	pp, err := sg.pairPrediction(i, src, dst)
	if err != nil {
		return s.fab.noPath(i, err)
	}
	p := &s.fab.ports[pp.port]
	pay, hdr := int64(s.cfg.PayloadSize), int64(s.cfg.HeaderBytes)
	n := packets(size, pay)
	last := size - (n-1)*pay
	// The NIC serializes the bytes after what it already has to send; a
	// transfer longer than its window (HAS_WIN) waits out the predicted
	// round trip for each further window, as its queue pair would: the
	// measured latencies hold the fabric's queueing, so a congested
	// fabric slows it as it slows queue pairs.
	wire := size + n*hdr
	nic := &sg.nic[pp.port]
	start := max(s.now, p.busyUntil, nic.free)
	if sg.AutoWindowPs == 0 && start >= sg.EndPs {
		// Its NIC gets to it only after the window: the full model sends
		// it then, into the fabric, as it would the backlog it builds.
		sg.deferred = append(sg.deferred, i)
		sg.load.Deferred++
		return nil
	}
	sent := start + sg.nicTime(pp.port, wire)
	nic.free, nic.bypassEnd = sent, sent
	if s.cfg.HasWin && wire > pp.win {
		rounds := (wire - 1) / pp.win
		sent += rounds * max(pp.data+pp.ack-int64(float64(pp.win)*p.bitPs+0.5), 0)
	}
	rx := max(sent-int64(float64(last+hdr)*p.bitPs+0.5)+pp.data, sent)
	f.Sport[i] = s.nic.sport(i, 0)
	f.Ideal[i] += s.fab.idealFCT(s.partOf(size, 0), pp.ideal, 0)
	s.stats.DataPackets += uint64(n)
	s.stats.Bypassed += uint64(n)
	s.stats.SentBytes += size
	s.stats.Delivered += size
	end := rx + pp.ack
	if alone && f.RxDone == nil && sg.AutoWindowPs == 0 && (s.cfg.StopPs == 0 || end <= s.cfg.StopPs) {
		// A message of a traffic pattern, and nothing counts transfers in
		// progress: it is done, its end known.
		s.work = f.run.Complete(i, s.work)
		f.End[i] = end
		return nil
	}
	f.rxLeft[i], f.txLeft[i] = 1, 1 // counted down by evFlowRecv and evFlowSent
	s.push(sent, evFlowSent, i, 0)
	s.push(rx, evFlowRecv, i, 0)
	s.push(end, evDelayDone, i, 0)
	return nil
}

// foldStarts runs the start time whose event just popped (evStart), then
// the following ones of the sorted list (queueStarts) for as long as each
// still comes before every event in the calendar and before end, each as
// its own event would have run (same time, number and order), without
// pushing and popping it. While the surrogate is open a traffic
// pattern's message costs no event past its start (bypassFlow), and the
// calendar round trip of its start was a large share of what is left.
func (sg *surrogate) foldStarts(end int64) error {
	s := sg.s
	sl := &s.starts
	// The calendar's head, read again only once something was pushed
	// (nothing is popped meanwhile): a sparse wheel's head is a scan away.
	var headAt des.Time
	var headSeq uint64
	var pending = -1
	for {
		i := sl.list[sl.head].flow
		sl.head++
		s.cur = s.flowNode(i)
		s.finishFlow(i)
		if len(s.work) > 0 {
			if err := s.drain(); err != nil {
				return err
			}
		}
		if sl.head == len(sl.list) {
			sl.list, sl.head = sl.list[:0], 0
			return nil
		}
		h := &sl.list[sl.head]
		if n := s.q.Len(); n != pending {
			pending = n
			var ok bool
			if headAt, headSeq, ok = s.q.PeekSeq(); !ok {
				headAt = des.Never
			}
		}
		first := des.Time(h.at) < headAt || des.Time(h.at) == headAt && h.seq < headSeq
		if sg.noFold || !s.bypassing || h.at >= end || !first {
			s.q.PushSeq(des.Time(h.at), h.seq, evStart, 0, 0)
			return nil
		}
		// The loop's bookkeeping of an event.
		s.now, s.curSeq = h.at, h.seq
		if s.loopWin != nil && s.now >= s.loopWin.next {
			s.loopWin.cross(s.now, s.stats.Events)
		}
		s.stats.Events++
		sg.folded++
	}
}

// trackStart is when a fixed window's tracking starts.
func (sg *surrogate) trackStart() int64 {
	if sg.TrackPs > 0 {
		return max(sg.StartPs-sg.TrackPs, 0)
	}
	return 0
}

// nicTime is how long host port pid takes to send wire bytes through the
// open surrogate: at line rate, or at its measured rate when the fabric
// saturated it.
func (sg *surrogate) nicTime(pid int32, wire int64) int64 {
	s := sg.s
	r := sg.nic[pid].psPerByte
	if r == 0 {
		r = s.fab.ports[pid].bitPs
	}
	return int64(float64(wire)*r + 0.5)
}

// backlogSample counts the host ports with data waiting to be sent, while
// latencies are tracked, and schedules the next sample.
func (sg *surrogate) backlogSample(gen int64) {
	s := sg.s
	if gen != sg.sampleGen || sg.active {
		return
	}
	for _, pid := range sg.hostPorts {
		nic := &sg.nic[pid]
		if sg.samples == 0 {
			nic.sent, nic.delivered, nic.backlogged = 0, 0, 0
		}
		if sg.waitingData(pid) {
			nic.backlogged++
		}
	}
	if sg.samples == 0 {
		sg.trackFrom = s.now
	}
	sg.samples++
	if sg.AutoWindowPs > 0 {
		if sg.runGoesOn() {
			s.push(s.now+max(sg.AutoWindowPs/backlogSamplesAuto, 1), evBacklogSample, 0, gen)
		}
		return
	}
	if next := s.now + max((sg.StartPs-sg.trackStart())/backlogSamples, 1); next < sg.StartPs {
		s.push(next, evBacklogSample, 0, gen)
	}
}

// waitingData says whether a queue pair of host port pid has data not yet
// sent (a pending pair has all of it).
func (sg *surrogate) waitingData(pid int32) bool {
	s := sg.s
	for _, qi := range s.fab.ports[pid].qps {
		if qi < 0 || s.nic.qps[qi].sndNxt < s.nic.qps[qi].size {
			return true
		}
	}
	return false
}

// serviceRates sets, as the surrogate opens, the rate of each host port
// that was saturated while tracking: what the fabric delivered of its data
// over that time. Not what it sent: the switches' buffers (tens of MB in
// SimAI's configurations) take in more than the fabric delivers for
// milliseconds, and the fabric's rate is what lasts.
func (sg *surrogate) serviceRates() {
	s := sg.s
	for _, pid := range sg.hostPorts {
		sg.nic[pid].psPerByte = 0
	}
	sg.load.Saturated, sg.load.MeasuredBps, sg.load.LineBps = 0, 0, 0
	dur := s.now - sg.trackFrom
	if sg.samples == 0 || dur <= 0 {
		return
	}
	for _, pid := range sg.hostPorts {
		nic, p := &sg.nic[pid], &s.fab.ports[pid]
		wire := nic.delivered
		backlogged := float64(nic.backlogged) >= (1-backlogSlack)*float64(sg.samples)
		if wire <= 0 || !backlogged && float64(nic.sent) <= (1+backlogSlack)*float64(wire) {
			continue
		}
		// Within backlogSlack of line rate the NIC itself is the limit
		// (a collective's large transfers): what was delivered then lags
		// what was sent by the bytes in flight at the ends of the
		// tracking time, and holding such a port to it slowed SimAI's
		// micro benchmark by 1.2%.
		if r := float64(dur) / float64(wire); r > p.bitPs*(1+backlogSlack) {
			nic.psPerByte = r
			sg.load.Saturated++
			sg.load.MeasuredBps += 8e12 / r
			sg.load.LineBps += p.bw
		}
	}
}

// SurrogateLoad is what the surrogate did about load (Sim.SurrogateLoad).
type SurrogateLoad struct {
	// At its last opening: the host ports the fabric saturated while
	// tracking, which sent at the rate it delivered their data, and
	// those rates and their line rates summed (bit/s).
	Saturated            int
	MeasuredBps, LineBps float64
	// Transfers waiting at a NIC with nothing sent when it opened, run
	// without queue pairs from there (Backlog), and transfers whose NIC
	// would have started them only after a fixed window closed, which
	// the fabric ran then (Deferred).
	Backlog, Deferred int
}

// SurrogateLoad reports the service rates and backlogs of the run's
// surrogate (zero without one).
func (s *Sim) SurrogateLoad() SurrogateLoad {
	if s.sur == nil {
		return SurrogateLoad{}
	}
	return s.sur.load
}

// restartSampling starts counting backlogs afresh from now.
func (sg *surrogate) restartSampling() {
	s := sg.s
	sg.samples = 0
	sg.sampleGen++
	s.push(s.now, evBacklogSample, 0, sg.sampleGen)
}

// bypasses says whether transfer i, opened while the surrogate is open,
// goes without queue pairs (bypassFlow): one that fits in one packet, or
// that nothing waits on (alone). A longer transfer others wait on keeps
// its queue pair: a NIC serves its pairs round robin, and serving whole
// transfers in turn instead let a collective's next steps start early (5%
// short on SimAI's micro benchmark).
func (sg *surrogate) bypasses(i int32, size int64) (alone, ok bool) {
	f := sg.s.flows
	alone = i < f.n && f.run.Dependants(i) == 0
	return alone, alone || size <= int64(sg.s.cfg.PayloadSize)
}

// bypassPending runs, as the surrogate opens, the transfers that wait in
// their NIC's round robin with nothing sent yet (one pending queue pair)
// as a transfer opened now would run, without queue pairs, behind what
// the open pairs still have to send. At saturation thousands wait at each
// NIC, and sending them packet by packet through the predictor was most
// of the surrogate's work.
func (sg *surrogate) bypassPending() error {
	s := sg.s
	f := s.flows
	conv := sg.conv[:0]
	for _, pid := range sg.hostPorts {
		p := &s.fab.ports[pid]
		kept := p.qps[:0]
		for _, qi := range p.qps {
			if qi < 0 {
				if i, j := s.nic.pending(qi); j == 0 && f.qpsLeft[i] == 1 {
					if alone, ok := sg.bypasses(i, f.size(i)); ok {
						conv = append(conv, convFlow{i, alone})
						continue
					}
				}
			}
			kept = append(kept, qi)
		}
		for k, qi := range kept {
			if qi >= 0 {
				s.nic.qps[qi].slot = int32(k)
			}
		}
		p.qps = kept
		if p.qpRR >= len(kept) {
			p.qpRR = 0
		}
	}
	sg.nicBacklogs()
	sg.load.Backlog += len(conv)
	// Opening a transfer that waited for nothing (no step latency, no
	// pace: Ideal was 0) added its path's ideal time and nothing else:
	// it goes back to 0 without routing the transfer again (a third of
	// the opening's time on seed 003). Once a link failed, its path now
	// may not be the one it was opened on, which is what Ideal holds.
	noWait := s.downLinks == 0 && (f.set == nil || !s.pace.Held())
	for _, c := range conv {
		i := c.i
		// Back to released and not opened: its ideal time loses what
		// opening added (bypassFlow adds its own).
		f.qpsLeft[i], f.rxLeft[i], f.txLeft[i] = 0, 0, 0
		if noWait && f.lat(i) == 0 {
			f.Ideal[i] = 0
		} else {
			if err := s.fab.routePart(i, 0); err != nil {
				return err // routed the same way when it was opened
			}
			f.Ideal[i] -= s.fab.routedIdeal(i, 0)
		}
		if err := sg.bypassFlow(i, f.src(i), f.dst(i), f.size(i), c.alone); err != nil {
			return err
		}
	}
	sg.conv = conv[:0]
	return nil
}

// nicBacklogs starts each NIC port's bypass clock where the port will
// have sent what its queue pairs still hold: those keep sending through
// the NIC, and a bypassed transfer waits its turn behind them rather than
// adding a second line rate to the port.
func (sg *surrogate) nicBacklogs() {
	s := sg.s
	pay, hdr := int64(s.cfg.PayloadSize), int64(s.cfg.HeaderBytes)
	for _, pid := range sg.hostPorts { // a switch has no queue pairs
		p := &s.fab.ports[pid]
		var bytes int64
		for _, qi := range p.qps {
			left := int64(0)
			if qi >= 0 {
				left = s.nic.qps[qi].size - s.nic.qps[qi].sndNxt
			} else { // pending: its whole part
				left = s.partSize(s.nic.pending(qi))
			}
			bytes += left + (left+pay-1)/pay*hdr
		}
		if bytes > 0 {
			sg.nic[pid].free = max(s.now, p.busyUntil) + sg.nicTime(pid, bytes)
		}
	}
}

// pairPrediction is transfer i's (src to dst) prediction, made once per
// pair and NIC port choice (a hashed port is the pair's first transfer's;
// a failed link clears them): the latencies measured for the pair's data
// and acknowledgement classes, or the unloaded path's where none was.
func (sg *surrogate) pairPrediction(i, src, dst int32) (*pairPrediction, error) {
	s := sg.s
	port := s.flows.port(i, 0)
	if pp, ok := sg.pairs.get(src, dst, port); ok {
		return pp, nil
	}
	h := route.QPHash(src, dst, s.hashID(i), 0, s.seed)
	if err := s.fab.route(&s.fab.fwd, &s.fab.fwdLen, src, dst, h, port); err != nil {
		return nil, err
	}
	if err := s.fab.route(&s.fab.rev, &s.fab.revLen, dst, src, h^0x5bd1e995, -1); err != nil {
		return nil, fmt.Errorf("acknowledgements: %v", err)
	}
	fwd, rev := s.fab.fwd[:s.fab.fwdLen], s.fab.rev[:s.fab.revLen]
	pp := pairPrediction{port: int32(fwd[0]), ideal: s.fab.idealPath(fwd, rev)}
	_, pp.win = s.fab.baseRTT(fwd, rev, s.fab.ports[fwd[0]].bw)
	pp.data = sg.measured(src, dst, false, fwd, int64(s.cfg.PayloadSize+s.cfg.HeaderBytes))
	pp.ack = sg.measured(dst, src, true, rev, int64(s.cfg.AckBytes))
	sg.pairs.put(src, dst, port, pp)
	return &pp, nil
}

// onBypass delivers a packet that skipped the fabric; with zombie set, a
// copy of frozen packet pi, made now.
func (sg *surrogate) onBypass(pi int32, zombie bool) {
	s := sg.s
	if zombie {
		pi = sg.zombieCopy(pi)
	}
	pkt := &s.pkts[pi]
	if pkt.ep != s.nic.epoch[pkt.qp] {
		s.fab.stale(pi)
		return
	}
	s.nic.deliver(pi)
}

// surrogateSwitch enters (on) or leaves surrogate mode.
func (sg *surrogate) surrogateSwitch(on bool) error {
	s := sg.s
	sg.active = on
	s.bypassing, s.suspended = on, on && !sg.Lite
	if !on {
		// The suspended fabric's events happen as much later as it slept.
		for _, ev := range sg.held {
			at := ev.At + des.Time(s.now-sg.onAt)
			sg.heldLater(ev, at)
			s.q.PushSeq(at, ev.Seq(), ev.Kind, ev.Target, ev.Arg)
		}
		sg.held = sg.held[:0]
		if !sg.Lite {
			sg.portsLater()
			// So did the fabric's record of its last moves: a switch that
			// sent a packet just before it slept has not starved since.
			slept := s.now - sg.onAt
			for v := range s.watch.lastMove {
				s.watch.lastMove[v] += slept
			}
			for pid := range s.watch.portMove {
				s.watch.portMove[pid] += slept
			}
			s.watch.lastMoveAny += slept
		}
		for _, pid := range sg.hostPorts {
			// The transfers a port sent around its queue pairs keep it
			// busy; hosts may have been paused by the frozen fabric.
			p := &s.fab.ports[pid]
			p.busyUntil = max(p.busyUntil, sg.nic[pid].bypassEnd)
			s.fab.tryTx(pid)
		}
		for _, i := range sg.deferred {
			if err := s.nic.openQPs(i, true); err != nil {
				return err
			}
		}
		sg.deferred = sg.deferred[:0]
		return nil
	}
	sg.onAt = s.now
	sg.serviceRates()
	if err := sg.bypassPending(); err != nil {
		return err
	}
	if sg.Lite {
		return nil
	}
	s.pfc.unsettle() // the frozen fabric holds PAUSEs on their way as events
	// Suspend: what waits in a host's NIC leaves through the predictor; what
	// is in the fabric freezes and a copy goes through the predictor.
	free := make([]bool, len(s.pkts))
	for _, i := range s.freePkts {
		free[i] = true
	}
	inQueue := make([]bool, len(s.pkts))
	for pid := range s.fab.ports {
		p := &s.fab.ports[pid]
		for q := 0; q < nQ; q++ {
			if s.fab.isSwitch[p.from] {
				for _, pi := range p.q[q].buf[p.q[q].head:] {
					inQueue[pi] = true
				}
				continue
			}
			for p.q[q].len() > 0 {
				pi := p.pop(q)
				p.qBytes[q] -= int64(s.pkts[pi].wire)
				inQueue[pi] = true
				sg.bypass(pi, 0)
			}
		}
	}
	// The frozen packets' deliveries wait in a list sorted as the calendar
	// would pop them, only its head in the calendar (as startList does):
	// seed 003's 69 k deliveries, milliseconds ahead, were as many pushes
	// and pops in the calendar's far heap, and in delivery order their
	// packets and queue pairs are at random (zombieNext prefetches them).
	// A list not yet delivered from an earlier opening (auto mode) keeps
	// the new ones in the calendar.
	listed := len(sg.zombies) == 0 && !sg.noList
	n := len(s.pkts)
	const ahead = 8 // packets: the queue pairs of tens of thousands are out of cache
	for pi := 0; pi < n; pi++ {
		if pa := pi + ahead; pa < n {
			if qi := s.pkts[pa].qp; qi >= 0 && int(qi) < len(sg.qps) {
				prefetch.Line(unsafe.Pointer(&sg.qps[qi])) // predict reads only the pair's surrogate state
			}
		}
		if free[pi] || s.pkts[pi].zombie != 0 || (inQueue[pi] && !s.fab.isSwitch[s.fab.ports[s.fab.dl(&s.pkts[pi])].from]) {
			continue
		}
		// In the fabric (on a wire or in a switch queue): freeze it as a
		// zombie, deliver a copy. The copy is made when the predictor
		// delivers it: made here, seed 003's 69 k at once doubled the
		// packet pool in one step, half of the 95 ms the switch took.
		z := &s.pkts[pi]
		z.zombie = zombieFrozen | copyPending
		if z.ecn {
			z.zombie |= copyECN // it may be marked again before its copy is due
		}
		s.stats.Zombies++
		if !listed {
			sg.bypass(int32(pi), 0)
			continue
		}
		at := sg.bypassAt(int32(pi), 0)
		sg.zombies = append(sg.zombies, zombieDue{at: at, seq: s.seq(at), pi: int32(pi), qp: z.qp})
	}
	if listed && len(sg.zombies) > 0 {
		sg.zombies, sg.zTmp = sortZombies(sg.zombies, sg.zTmp)
		h := &sg.zombies[0]
		s.q.PushSeq(des.Time(h.at), h.seq, evBypass, h.pi, zombieList)
	}
	return nil
}

// heldLater: held event ev of a switch port now happens at at. The
// port's record of it moves with it: a txDoneAt left at the old time
// passed the moved event for a stale one (seed 5's 127-to-1 incast under
// PFC then never sent again), and a wakeAt left there let a later wake
// be scheduled beside it.
func (sg *surrogate) heldLater(ev des.Event, at des.Time) {
	var t *int64
	switch ev.Kind {
	case evTxDone:
		t = &sg.s.fab.ports[ev.Target].txDoneAt
	case evWake:
		t = &sg.s.fab.ports[ev.Target].wakeAt
	default:
		return
	}
	if *t == int64(ev.At) {
		*t = int64(at)
	}
}

// portsLater moves the ports' ends that fell in the window as much later
// as the fabric slept, as heldLater moved their events: a switch port's
// end of serialization (busyUntil), and every port's PAUSE end
// (pauseTill). Left, a packet reaching such a port after the resume
// started up to a packet time, or a PAUSE, early. Hosts' too: a host
// ignores PAUSE while the fabric sleeps (the predictor's rates stand for
// it), but its switch wakes as it slept, over its threshold, and sends
// the refresh that keeps the host paused as much later; a host freed at
// the resume sent into that full queue until the refresh came
// (TestSurrogateResumeKeepsPortsBusy). A time past the window stays, as
// its event in the calendar does (maxTime: a port-wide PAUSE holds until
// its RESUME); a host port's busyUntil is its NIC's own, which ran
// through the window.
func (sg *surrogate) portsLater() {
	s := sg.s
	from, to, slept := sg.onAt, s.now, s.now-sg.onAt
	later := func(t *int64) {
		if *t > 0 && *t >= from && *t < to {
			*t += slept
		}
	}
	for pid := range s.fab.ports {
		p := &s.fab.ports[pid]
		for q := range p.pauseTill {
			later(&p.pauseTill[q])
		}
		if s.fab.isSwitch[p.from] {
			later(&p.busyUntil)
		}
	}
}

// zombieCopy makes the copy of zombie pi the predictor delivers now: the
// packet as it was frozen, and frees pi if it has left the fabric since.
func (sg *surrogate) zombieCopy(pi int32) int32 {
	s := sg.s
	cp := s.newPacket()
	z := &s.pkts[pi]
	c := &s.pkts[cp]
	*c = *z
	s.nic.live[c.qp]++
	c.zombie, c.ecn, c.inDL, c.intI = 0, z.zombie&copyECN != 0, -1, -1
	gone := z.zombie&copyGone != 0
	z.zombie = zombieFrozen
	if gone {
		s.freePacket(pi)
	}
	return cp
}

// freeZombie frees a zombie leaving the fabric, or marks it gone while its
// copy is still due.
func (sg *surrogate) freeZombie(pi int32) {
	s := sg.s
	if z := &s.pkts[pi]; z.zombie&copyPending != 0 {
		z.zombie |= copyGone
		return
	}
	s.freePacket(pi)
}

// frozen reports whether an event belongs to the suspended fabric: it then
// happens as much later as the surrogate stays open (held until it closes).
func (sg *surrogate) frozen(kind uint16, target int32) bool {
	s := sg.s
	if !sg.active || sg.Lite {
		return false
	}
	switch kind {
	case evArrive:
		return s.pkts[target].zombie != 0
	case evTxDone, evWake:
		return s.fab.isSwitch[s.fab.ports[target].from]
	case evPFC, evPFCRefresh:
		return true
	}
	return false
}

// surrogateSample closes one window of steady-state detection: it opens
// the surrogate after autoWindows steady windows, closes it when the
// offered load moves, and schedules the next window while the run goes on.
func (sg *surrogate) surrogateSample() error {
	s := sg.s
	sg.transfersInProgress(0)
	load := float64(sg.inProgressPs) / float64(sg.AutoWindowPs)
	sg.inProgressPs = 0
	if sg.active {
		if d := load/sg.baseLoad - 1; d > autoLoadChange || d < -autoLoadChange {
			if err := sg.surrogateSwitch(false); err != nil {
				return err
			}
			s.SurrogateSwitches = append(s.SurrogateSwitches, SurrogateSwitch{AtPs: s.now, Why: fmt.Sprintf("transfers in progress %+.0f%%", 100*d)})
			sg.restartTracking()
		}
	} else {
		// Packets in flight, averaged over the window (Little's law: the
		// latencies summed over the window's length); a snapshot at the
		// window's end swings with the packets of the moment.
		smp := autoSample{inFlight: float64(sg.winLat) / float64(sg.AutoWindowPs), load: load}
		if sg.winN >= autoMinPackets {
			smp.latPs = float64(sg.winLat) / float64(sg.winN)
		}
		switch {
		case smp.latPs == 0 || (len(sg.streak) > 0 && !near(smp, sg.streak[0])):
			sg.restartTracking() // not steady: measure afresh from here
		default:
			sg.streak = append(sg.streak, smp)
		}
		if len(sg.streak) == autoWindows {
			var lat, fly, load float64
			for _, w := range sg.streak {
				lat, fly, load = lat+w.latPs, fly+w.inFlight, load+w.load
			}
			n := float64(len(sg.streak))
			sg.baseLoad = max(load/n, 1e-9)
			s.SurrogateSwitches = append(s.SurrogateSwitches, SurrogateSwitch{AtPs: s.now, On: true,
				Why: fmt.Sprintf("steady for %d windows of %s: packet latency %s, %.0f packets in flight", autoWindows, des.Time(sg.AutoWindowPs), des.Time(lat/n), fly/n)})
			if err := sg.surrogateSwitch(true); err != nil {
				return err
			}
			sg.streak = sg.streak[:0]
		}
		sg.winLat, sg.winN = 0, 0
	}
	if sg.runGoesOn() {
		s.push(s.now+sg.AutoWindowPs, evSurrogateSample, 0, 0)
	}
	return nil
}

// runGoesOn says whether anything but the surrogate's own sampling is
// left to happen: the samples alone must not keep a finished (or stuck)
// run alive.
func (sg *surrogate) runGoesOn() bool {
	s := sg.s
	return s.q.Len() > 0 && s.flows.run.Done() < s.flows.DAG.Len()
}

// transfersInProgress adds d to the transfers in progress, integrating
// the count over time for the window's mean.
func (sg *surrogate) transfersInProgress(d int64) {
	s := sg.s
	sg.inProgressPs += sg.inProgress * (s.now - sg.lastChange)
	sg.lastChange = s.now
	sg.inProgress += d
}

// near says whether window b is within autoTolerance of window a in mean
// packet latency and packets in flight.
func near(b, a autoSample) bool {
	within := func(x, y float64) bool { return x <= y*(1+autoTolerance) && x >= y*(1-autoTolerance) }
	return within(b.latPs, a.latPs) && within(b.inFlight, a.inFlight)
}

// restartTracking forgets the latencies measured so far (and the queue
// pairs' cached predictions): the next surrogate predicts from the steady
// windows before it only.
func (sg *surrogate) restartTracking() {
	sg.restartSampling()
	sg.streak = sg.streak[:0]
	sg.winLat, sg.winN = 0, 0
	if len(sg.stats) == 0 {
		// Nothing learned since the last restart, so no pair holds a class
		// or a prediction: predictions are made only while the surrogate
		// is open, which it opens only from measured windows, and it
		// restarts tracking as soon as it closes.
		return
	}
	// Clearing every pair's entry costs a pass over millions of them at
	// scale: only when there is something to forget, not every unsteady
	// window of a warm-up.
	sg.stats = sg.stats[:0]
	clear(sg.class)
	clear(sg.dense)
	for k := range sg.qps {
		q := &sg.qps[k]
		q.predData, q.predCtl, q.latData, q.latCtl = 0, 0, 0, 0 // its ends stay
	}
	sg.pairs.reset()
}

// The core's calls into the surrogate, each made only under the flag
// SetSurrogate or surrogateSwitch set (Sim.surWatch, bypassing,
// suspended, surCount): without --surrogate the core never reaches here.

// addQP: the Sim made a queue pair slot.
func (sg *surrogate) addQP() { sg.qps = grow.Append(sg.qps, surQP{}) }

// openQP: slot qi holds a new pair, whose classes are yet to be learnt;
// its flow's record was just read (initQP), so its ends cost nothing now.
func (sg *surrogate) openQP(qi int32) {
	f := sg.s.flows
	i := sg.s.nic.qps[qi].flow
	sg.qps[qi] = surQP{src: f.src(i), dst: f.dst(i)}
}

// sent: a data packet of wire bytes left host port pid.
func (sg *surrogate) sent(pid int32, wire int64) { sg.nic[pid].sent += wire }

// hold keeps an event of the suspended fabric for when it resumes.
func (sg *surrogate) hold(ev des.Event) bool {
	if !sg.frozen(ev.Kind, ev.Target) {
		return false
	}
	sg.held = append(sg.held, ev)
	return true
}
