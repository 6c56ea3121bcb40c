// Package packet is fabricsim's packet-level RoCEv2 backend, modelled the
// way htsim models networks: a packet carries its route, and each hop (an
// egress port with its eight priority queues, a switch's shared-buffer MMU,
// a NIC with its queue pairs) receives the packet and schedules the next
// step. Events are value types in one flat queue (pkg/des); packets live in
// a pool and are referred to by index, so the hot path does not allocate.
package packet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"unsafe"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/internal/grow"
	"github.com/fabricsim/fabricsim/pkg/cc"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/units"
)

const nQ = 8 // priority queues per port; queue 0 carries ACK/NACK/CNP

// dataQ is the priority of RDMA data (SimAI's pg 3).
const dataQ = 3

const (
	evArrive          uint16 = iota // Target packet: it reaches the far end of its link
	evTxDone                        // Target port: serialization finished
	evWake                          // Target port: a pacing or PAUSE deadline passed
	evPFC                           // Target port: a PFC frame arrives; Arg = queue<<1 | pause
	evCCTimer                       // Target QP; Arg = timer generation
	evRTO                           // Target QP; Arg = RTO generation
	evDelayDone                     // Target flow: a delay node's time is up
	evMonitor                       // sample the monitors
	evLinkDown                      // Target link index
	evPFCRefresh                    // Target ingress queue (link*8+queue): re-send PAUSE while still congested
	evSend                          // Target flow: its send latency is over, open its queue pairs
	evSurrogate                     // Arg 1: enter surrogate mode, 0: leave it
	evBypass                        // Target packet: delivered by the surrogate predictor
	evSurrogateSample               // a window of the surrogate's steady-state detection ends
	evStepLat                       // Target: a stepLane; its head flow's step latency (less its path's) is over, open its queue pairs
	evRTOFIFO                       // the RTO FIFO's head is due
	evFlowSent                      // Target flow: a bypassed transfer's last byte left its NIC
	evFlowRecv                      // Target flow: a bypassed transfer's last byte arrived
	evStart                         // the head of the delay nodes released with the run ends (queueStarts)
	evBacklogSample                 // Arg the sampling generation: count the host ports with data waiting (surrogate service rates)
)

const (
	pktData uint8 = iota
	pktAck
	pktNack
)

type packet struct {
	seq  int64 // data: first byte; ACK/NACK: next byte expected
	sent int64 // ps the data packet left its sender, echoed for RTT
	born int64 // ps this packet (data or control) was created
	qp   int32
	ep   int32 // the QP's epoch when sent: a recycled QP ignores stale packets
	path int32 // the QP's forward or reverse path id
	inDL int32 // link it arrived on at the current switch, -1 at the source
	size int32 // payload bytes
	wire int32 // bytes on the wire
	intI int32 // INT record slot, -1 when none
	// link being traversed, for a data packet under a per-packet routing
	// (the others read it from their path)
	link    int32
	flowlet uint16 // its queue pair's flowlet when sent (ROUTING flowlet)
	hop     uint8  // index of the link being traversed
	kind    uint8
	q       uint8
	ecn     bool
	// ackReq: a data packet its sender wants acknowledged at once
	// (ACK_COALESCE; the BTH AckReq bit)
	ackReq bool
	// zombie, when not 0: frozen in the fabric when surrogate mode began
	// (zombieFrozen); it loads queues and links after the fabric resumes
	// but is never delivered. Until the predictor delivers its copy (made
	// then, zombieCopy) it also has copyPending, with its ECN mark as
	// frozen in copyECN, and copyGone once it left the fabric: its slot is
	// freed when the copy is made.
	zombie uint8
}

const (
	zombieFrozen uint8 = 1 << iota
	copyPending
	copyECN
	copyGone
)

// Stats counts what a run did.
type Stats struct {
	Events        uint64
	DataPackets   uint64 // data packets transmitted by senders (retransmissions included)
	SentBytes     int64  // payload bytes of those packets
	Delivered     int64  // payload bytes delivered to receivers (in order, or placed out of order: per-packet routing, TRANSPORT sack)
	Discarded     int64  // payload bytes receivers threw away (out of order, duplicate) or no longer expected (stale)
	Reordered     uint64 // data packets placed out of order (per-packet routing, TRANSPORT sack)
	Bypassed      uint64 // packets delivered by the surrogate predictor
	Zombies       uint64 // packets frozen in the fabric by surrogate mode
	Dropped       uint64 // packets the network lost (buffer overflow, link errors, failed links)
	Stale         uint64 // packets their queue pair no longer expected (see stale); not losses
	DroppedBytes  int64
	Retransmitted int64 // payload bytes sent again after a NACK or timeout
	Pauses        uint64
	PeakIngress   int64  // PFC_MODE port: the most bytes one ingress port held
	CNPs          uint64 // ECN echoes returned to senders that the algorithm took (DCQCN's MIN_TIME_BETWEEN_CNPS discards some)
	SimPs         int64  // when the last flow ended (when the run stopped, if some did not)
	// Failed transfers (LINK_DOWN left them no path) and the bytes they
	// never delivered: neither sent nor dropped, so not in the sums above.
	Failed      int
	FailedBytes int64
}

// Sim is one packet-level simulation. It keeps the clock, the event
// queue and its dispatch (run.go: each event kind is one call to its
// owner), the packet pool and the flows' release; the parts own the rest,
// each in its file: nic (queue pairs, their opening, RTO, transport,
// placement), fab (ports, paths, forwarding: fabric.go, routing.go and a
// file per routing policy), mmu (switch buffers), pfc (PAUSE and RESUME,
// both PFC modes and their state), starts and lanes (flows waiting without
// an event each, waits.go), watch (the deadlock detector, waitfor.go), pv
// (this Sim as a part of a partitioned run, set only then) and sur (the
// surrogate, nil unless on; its wiring is hooks.go). They are held by value
// and called as concrete types: the per-packet path makes no interface
// call but the transport's and the congestion control's (and, under a
// per-packet routing, its forwarder's).
type Sim struct {
	// sameSrc picks the transfers from sentSrc: a flow's dependants that a
	// NIC may start once the flow's last byte has left (built once, so
	// releasing them allocates nothing).
	sameSrc func(j int32) bool
	sentSrc int32
	// pace is the transport's limit on a connection's steps, as the
	// analytical backends apply it (flowset.Pacer).
	pace flowset.Pacer
	// fromDst likewise picks those from the destination of rcvFlow that a
	// receive completion releases. The flow, not its destination: read
	// only for a flow with dependants, its record (a cache miss per
	// message delivered, the flows at random) is skipped for one without,
	// as nearly every message of a traffic pattern is (an eighth of
	// seed 003's surrogate window, its zombies' copies).
	fromDst func(j int32) bool
	rcvFlow int32

	cfg Config
	t   *topo.Topology
	// failure collects transfers failed links left without a path;
	// downLinks and downNames are the links that have failed so far.
	failure   *FlowsFailed
	downLinks int
	downNames string
	// The PFC deadlock detector (waitfor.go).
	watch waitWatch
	// err is what stopped this part's window (partition.go).
	err error
	// Warnings are configuration problems the run works around, and
	// what the run found worth telling (PFC starvation) as it went.
	Warnings []string
	// SurrogateSwitches are the surrogate's openings and closings, in
	// order, with --surrogate auto.
	SurrogateSwitches []SurrogateSwitch
	r                 *route.Router
	alg               cc.Algorithm
	// usesINT is alg.UsesINT(), read per data packet without an interface call.
	usesINT bool
	q       *des.Calendar
	now     int64
	// Events of one time are ordered by their numbers (seq): cur is the
	// node making events now (where the current event happens; a flow's
	// own node while the run's first flows start; len(Nodes) for the
	// run-wide ones), made[n] how many events node n has made, curSeq the
	// current event's number.
	cur    int32
	made   []uint64
	curSeq uint64
	pushed uint64 // events numbered so far, under TIE_ORDER push
	seed   uint64
	// The links, their ports and the packets' paths (fabric.go).
	fab fabric
	mmu mmu // the switches' buffers and PFC decisions (mmu.go)
	pfc pfc // the PAUSE and RESUME frames and what they stop (pfc.go)

	pkts     []packet
	freePkts []int32
	ints     [][cc.MaxHops]cc.IntHop
	intN     []uint8
	freeINT  []int32

	// The delay nodes released with the run (waits.go).
	starts startList

	// The NICs: queue pairs, their timers and loss recovery (nic.go).
	nic nic

	// Flows waiting out their step latency, by the time it ends (waits.go).
	lanes stepLanes

	flows *Flows
	stats Stats
	mon   *Monitors
	// flows started or finished at the current instant, processed in order
	// (a loop rather than recursion: chains of joins can be long).
	work []int32
	// The surrogate (surrogate.go), nil without --surrogate. The core
	// calls it only under these flags, which it sets: surWatch, it is
	// configured (it follows queue pairs, NIC ports and deliveries);
	// bypassing, it is open (packets leaving NICs go to its predictor);
	// suspended, and the fabric is frozen (not lite: its events are held
	// and PAUSE holds no host); surCount, it counts the transfers in
	// progress (--surrogate auto).
	sur                                      *surrogate
	surWatch, bypassing, suspended, surCount bool

	// What NewRun's Options set besides the configuration (see Options).
	sendLatPs      int64
	noSymmetry     bool
	progress       func(done, total int, nowPs int64)
	loopWin        *LoopWindow
	onWarning      func(string)
	parts, threads int
	busy           func() bool
	ownMon         bool // NewRun opened the monitors (MonitorDir): Run closes them

	// This Sim as a part of a partitioned run (partition.go).
	pv partView

	// readAhead: the loop touches the next event's packet and port ahead
	// of it (loop), for fabrics whose ports outgrow the caches.
	readAhead bool
}

// maxLinkLatency keeps every time sum far from int64's end (1 s of
// propagation on one link is already no datacenter).
const maxLinkLatency = 1e12

// maxTime is the latest simulated time (about 53 days).
const maxTime = 1 << 62

// maxPath bounds a route's hops (the families here need at most 6).
const maxPath = 16

// Stats is what the run did (so far).
func (s *Sim) Stats() Stats { return s.stats }

// Algorithm is the congestion control the simulation runs.
func (s *Sim) Algorithm() cc.Algorithm { return s.alg }

// New prepares a simulation of flows over a topology, with the congestion
// control cfg names (CC_MODE and its keys).
func New(t *topo.Topology, r *route.Router, cfg Config, flows *Flows, seed uint64) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkForwarder(cfg.Routing); err != nil {
		return nil, err
	}
	// Validate built the algorithm once: it cannot fail here.
	alg, _ := cc.New(cfg.CCMode, cfg.CC)
	s := &Sim{cfg: cfg, t: t, r: r, alg: alg, usesINT: alg.UsesINT(), q: des.NewCalendar(10, 14), seed: seed, // 1.024 ns buckets, 16.8 us horizon
		flows: flows}
	s.nic.s, s.fab.s, s.fab.pathW, s.watch.s, s.pv.s = s, s, 6, s, s
	s.starts.s, s.lanes.s, s.lanes.at = s, s, map[laneKey]int32{}
	if len(t.Nodes) >= 1<<23 {
		return nil, fmt.Errorf("%d nodes: more than the packet backend numbers (2^23)", len(t.Nodes))
	}
	s.made = make([]uint64, len(t.Nodes)+1)
	s.cur = int32(len(t.Nodes))
	s.watch.lastMove = make([]int64, len(t.Nodes))
	s.sameSrc = func(j int32) bool {
		if flows.src(j) != s.sentSrc || flows.size(j) <= 0 {
			return false
		}
		if flows.set != nil {
			s.pace.Mark(j, flows.rec(j))
		}
		return true
	}
	s.fromDst = func(j int32) bool { return flows.src(j) == flows.dst(s.rcvFlow) }
	for 1<<s.nic.pendShift < cfg.QPsPerConn {
		s.nic.pendShift++
	}
	if int64(flows.DAG.Len())<<s.nic.pendShift > math.MaxInt32 {
		return nil, fmt.Errorf("%d flows of up to %d queue pairs: more queue pairs than the packet backend numbers (2^31)", flows.DAG.Len(), cfg.QPsPerConn)
	}
	s.fab.fwding = forwarding{mode: cfg.Routing, gapPs: cfg.FlowletGapPs}
	if s.fab.fwding.perPacket() || cfg.Transport.caps().placesOutOfOrder {
		s.nic.placed = newSeqSet()
	}
	s.nic.tp, s.nic.ackEach = newTransport(s), cfg.Transport.caps().ackEach
	s.nic.ackEvery = int32(cfg.AckInterval)
	if cfg.AckCoalesce > 0 {
		s.nic.ackEvery = int32(cfg.AckCoalesce)
	}
	nd := 2 * len(t.Links)
	s.fab.ports = make([]port, nd)
	// Below 1.5 MB of ports they stay in a core's second-level cache,
	// where a load missing the first costs less than reading ahead: a
	// peek and a call per event, after which the loop reloads what it
	// kept in registers. A k=8 fat-tree's 768 ports (480 KB): only its
	// PFC incasts' loop paid for it. SimAI's 128-GPU fabrics' 1536 (983
	// KB): 6% of the instructions of micro AllReduce's first 1 ms (2.72 G
	// against 2.56 G); whole runs on one core under SCHED_FIFO (the other
	// core loaded), alternating, wall on average: micro AllReduce 1.40 s
	// against 1.47 s (faster in 8 of 10), mixed H100 1.20 s against
	// 1.37 s (8 of 10).
	s.readAhead = uintptr(nd)*unsafe.Sizeof(port{}) > 1536<<10
	s.fab.rngs = make([]rand.PCG, 2*nd)
	s.watch.portMove = make([]int64, nd)
	s.watch.stallFloorPs = 1_000_000_000
	s.fab.isSwitch = make([]bool, len(t.Nodes))
	for i := range t.Nodes {
		s.fab.isSwitch[i] = t.Nodes[i].Kind != stream.NodeGPU
	}
	m, short, worst := newMMU(t, &cfg)
	s.mmu = *m
	s.pfc = newPFC(s, &cfg, nd)
	for li, l := range t.Links {
		if l.LatencyPs > maxLinkLatency {
			return nil, fmt.Errorf("links[%d]: latency %d ps is over the packet backend's limit of 1 s", li, l.LatencyPs)
		}
		for dir := 0; dir < 2; dir++ {
			dl := 2*li + dir
			p := &s.fab.ports[dl]
			p.from, p.to = l.A, l.B
			if dir == 1 {
				p.from, p.to = l.B, l.A
			}
			p.bw, p.lat, p.bitPs = l.BWbps, l.LatencyPs, 8e12/l.BWbps
			s.fab.rngs[2*dl].Seed(seed, uint64(2*dl))
			s.fab.rngs[2*dl+1].Seed(seed, uint64(2*dl+1))
			p.lossProb = 1 - (1-l.ErrorRate)*(1-cfg.ErrorRate)
			// ECN marking at network switches only: the NVLink fabric is
			// credit-based and never marks.
			if cfg.EnableQCN && alg.UsesECN() && t.Nodes[p.from].Kind == stream.NodeSwitch {
				p.marks = true
				p.kmin = int64(cfg.KMin.At(l.BWbps) * 1024)
				p.kmax = int64(cfg.KMax.At(l.BWbps) * 1024)
				p.pmax = cfg.PMax.At(l.BWbps)
			}
			p.inINT = s.usesINT && s.fab.isSwitch[p.from] // NVSwitches report too
		}
	}
	if short > 0 && !cfg.PortPFC {
		// No shared pool left: every packet past a queue's reserve pauses
		// its sender (or, lossy, is dropped) however light the load.
		s.Warnings = append(s.Warnings, fmt.Sprintf("BUFFER_SIZE %s leaves %d switches no shared buffer: their ports' reserves and PFC headroom (about one bandwidth-delay product each) need up to %s (switch %d); expect PAUSE or loss at any load",
			units.HumanSize(cfg.BufferBytes), short, units.HumanSize(s.mmu.rsrvHdrm[worst]), worst))
	}
	for _, ld := range cfg.LinkDown {
		li := -1
		for i, l := range t.Links {
			if (l.A == ld.A && l.B == ld.B) || (l.A == ld.B && l.B == ld.A) {
				li = i
				break
			}
		}
		if li < 0 {
			return nil, ld.noLink(len(t.Nodes))
		}
		s.push(ld.AtPs, evLinkDown, int32(li), 0)
	}
	return s, nil
}

// seq numbers an event made now for time at, by what does not depend on
// the order events were pushed in, so that a partitioned run orders
// simultaneous events as the single loop does: after those of its time
// made earlier (by its delay, in 32 ps steps up to 2 us), then by its
// maker, then by the maker's count. The makers' order is shuffled at every
// instant (their ids XOR a hash of the time): a fixed one would let the
// same node win every tie at a switch, for ever. Bits: 16 of inverted
// delay, 23 of node, 24 of count (which wraps: two events of one node and
// time 16 M events apart are not expected); the top bit is lateSeq's.
//
// Numbered in push order instead, the single loop ran a GPT-13B iteration
// on 128 GPUs (--expand) in 32 s rather than 38 s, as the calendar sorts
// the ties of a symmetric fabric faster so (des.Calendar.sortEvents), but
// its trace then differed from a partitioned run's in the order of exact
// ties (a 1024-GPU AllReduce ended 1.5% later).
//
// TIE_ORDER push numbers events in the order they are pushed instead
// (ns-3's order): the single loop only.
func (s *Sim) seq(at int64) uint64 {
	s.pfc.look(s.cur) // its kept wakes first (pfcwake.go); none under TIE_ORDER push
	return s.seqLooked(at)
}

// seqLooked is seq where the current node has looked at this event
// already (a refresh's second number, after its PAUSE's): a look then
// finds none of its kept wakes due, and skipping it saved about 17
// instructions a number in a 127-to-1 incast's refreshes. A kept wake
// firing inside catchUp numbers with number, for its own node and time.
func (s *Sim) seqLooked(at int64) uint64 {
	if s.cfg.PushTies {
		s.pushed++
		return s.pushed
	}
	return s.number(s.cur, s.now, at)
}

// number is node v's next number for an event at time at made at now.
func (s *Sim) number(v int32, now, at int64) uint64 {
	n := s.made[v]
	s.made[v] = n + 1
	d := uint64(min((at-now)>>5, 1<<16-1))
	shuffle := uint64(at) * 0x9e3779b97f4a7c15 >> 41
	return (1<<16-1-d)<<47 | (uint64(v)^shuffle)<<24 | n&(1<<24-1)
}

// push schedules an event made by the current node.
func (s *Sim) push(at int64, kind uint16, target int32, arg int64) {
	s.q.PushSeq(des.Time(at), s.seq(at), kind, target, arg)
}

// lateSeq numbers an entry of a list only whose head waits in the
// calendar (the RTO FIFO): after every event of its time, then by the
// event that made it, so that entries of equal time stand in the order
// they were pushed, which is the order of their makers.
func (s *Sim) lateSeq() uint64 { return 1<<63 | s.curSeq>>1 }

// flowNode is the node flow i starts at (the run-wide maker for one
// without a source).
func (s *Sim) flowNode(i int32) int32 {
	if v := s.flows.src(i); v >= 0 && int(v) < len(s.t.Nodes) {
		return v
	}
	return int32(len(s.t.Nodes))
}

func (s *Sim) newPacket() int32 {
	if n := len(s.freePkts); n > 0 {
		i := s.freePkts[n-1]
		s.freePkts = s.freePkts[:n-1]
		return i
	}
	s.pkts = grow.Append(s.pkts, packet{})
	return int32(len(s.pkts) - 1)
}

func (s *Sim) freePacket(i int32) {
	p := &s.pkts[i]
	if p.intI >= 0 {
		s.freeINT = append(s.freeINT, p.intI)
		p.intI = -1
	}
	if s.nic.live[p.qp]--; s.nic.live[p.qp] == 0 && s.nic.qps[p.qp].parked {
		s.nic.qps[p.qp].parked = false
		s.nic.freeQP = append(s.nic.freeQP, p.qp)
	}
	s.freePkts = append(s.freePkts, i)
}
