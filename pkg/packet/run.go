package packet

import (
	"fmt"
	"math"
	"slices"
	"syscall"
	"time"
	"unsafe"

	"github.com/fabricsim/fabricsim/internal/prefetch"

	"github.com/fabricsim/fabricsim/pkg/dag"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/expand"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Flows is the DAG to run, by column, indexed like the DAG (which holds
// the flow ids), or read in place from a loaded stream (FromSet). The run
// fills Start, End and Ideal (ps).
type Flows struct {
	DAG *dag.DAG
	// run is this simulation's DAG state (prepare makes it afresh): the
	// DAG itself is never written.
	run *dag.Run
	// set, when not nil, holds what the input columns would (which are then
	// nil): copying them cost 33 bytes a flow, 550 MB at 16.8 M flows.
	set   *flowset.Set
	Src   []int32
	Dst   []int32
	Size  []int64 // bytes; 0 for delay nodes and joins
	Delay []int64 // ps for delay nodes
	// Lat is each transfer's step latency in ps (nil: none): its queue
	// pairs open Lat less the path's propagation after release.
	Lat []int64
	// replayed: SimAI replay's collectives (flowset.Set.Replayed), whose
	// transfers open their whole step latency after release.
	replayed map[int64]bool
	// Port is each transfer's connection index at its source (nil: none):
	// a dual-homed NIC sends queue pair j on port Port+j mod 2.
	Port []uint8

	// Start is when each flow was released (ps, -1: never): run state,
	// kept out of the flow set.
	Start, End, Ideal []int64
	RxDone            []int64 // ps the receiver got the last byte (0 for delays); nil from FromSet (only tests read it)
	// Failed marks transfers a failed link left without a path (nil when
	// none did): they end when that is found, having delivered what they
	// had, and their dependants go on.
	Failed []bool
	// Per flow counts of queue pairs (at most 64, QPS_PER_CONNECTION).
	qpsLeft []uint8
	rxLeft  []uint8 // queue pairs still receiving
	txLeft  []uint8 // queue pairs still to put their last byte on the wire
	// The first queue pair's source port, for SimAI's fct.txt.
	Sport []uint16

	// ex runs COLL nodes as their flows (Expand; Run makes it afresh);
	// indexes from n on are its flows, and the run columns above grow to
	// cover them. n is the stream's flow count under Expand, else MaxInt32.
	ex      *expand.Store
	n       int32
	exLimit int64 // Expand's memory limit
}

// Expand runs the set's COLL nodes as the flows flow granularity would
// hold, made when each is released and freed as they finish
// (expand.Store); limit bounds their memory (0: none). Each COLL node's
// row spans its flows, and its ideal time is NCCL's model time.
func (f *Flows) Expand(limit int64) {
	if f.set == nil || f.set.CollNodes == 0 {
		return
	}
	f.exLimit, f.n = limit, int32(f.DAG.Len())
}

// expanding reports whether COLL nodes run as their flows (Expand).
func (f *Flows) expanding() bool { return f.n < math.MaxInt32 }

// newStore starts the expansions afresh, with flow indexes below maxIndex.
func (f *Flows) newStore(maxIndex int64) {
	f.ex = expand.New(f.set, f.exLimit, func(dep, d *flowset.Flow) expand.Early {
		switch { // as sameSrc and fromDst decide for the stream's flows
		case d.Src == dep.Src && d.Kind == flowset.Transfer && d.Size > 0:
			return expand.OnSent
		case d.Src == dep.Dst:
			return expand.OnReceived
		}
		return expand.AtCompletion
	})
	f.ex.LimitIndex(maxIndex)
}

// Expanded is the number of flows COLL nodes were expanded into, the
// most held at once (hidden joins included), and the bytes they carried;
// of those, the flows and bytes groups standing for their siblings did not
// run (Options.NoSymmetry).
func (f *Flows) Expanded() (made, peak, bytes, mirrored, mirroredBytes int64) {
	if f.ex == nil {
		return 0, 0, 0, 0, 0
	}
	mirrored, mirroredBytes = f.ex.Mirrored()
	return f.ex.Made(), f.ex.Peak(), f.ex.Bytes(), mirrored, mirroredBytes
}

// symmetric reports whether this run may let a COLL node's first group
// stand for its siblings (expand.FindSymmetry): a group alone on its
// server's NVLinks and NVSwitch runs as its siblings do, event for event,
// unless something couples the groups: a random draw on their links (loss,
// ECN marking; FindSymmetry checks the links), or a run-wide mechanism
// (monitors list every queue pair, the surrogate measures the whole
// fabric, a failed link reroutes, per-packet routing).
func (s *Sim) symmetric() bool {
	return !s.noSymmetry && s.mon == nil && !s.surWatch && len(s.cfg.LinkDown) == 0 && !s.fab.fwding.perPacket()
}

// cover grows the run columns over the expanded flows' slots.
func (f *Flows) cover() {
	n := int(f.n) + f.ex.Slots()
	if len(f.End) >= n {
		return
	}
	k := n - len(f.End)
	f.Start = append(f.Start, make([]int64, k)...)
	f.End = append(f.End, make([]int64, k)...)
	f.Ideal = append(f.Ideal, make([]int64, k)...)
	f.qpsLeft = append(f.qpsLeft, make([]uint8, k)...)
	f.rxLeft = append(f.rxLeft, make([]uint8, k)...)
	f.txLeft = append(f.txLeft, make([]uint8, k)...)
	f.Sport = append(f.Sport, make([]uint16, k)...)
}

// rec is flow i's record, of the set or expanded.
func (f *Flows) rec(i int32) *flowset.Flow {
	if i >= f.n {
		return f.ex.Flow(i)
	}
	return f.set.Flow(i)
}

// id is flow i's id (expanded: as at flow granularity, expand.Store.Flow).
func (f *Flows) id(i int32) int64 {
	if i >= f.n {
		return f.ex.Flow(i).ID
	}
	return f.DAG.ID(i)
}

// channel is flow i's channel (-1: none, and for flows given as columns).
func (f *Flows) channel(i int32) int32 {
	if f.set != nil {
		return f.rec(i).Channel
	}
	return -1
}

// hashID is the id transfer i's queue pairs are hashed on (ECMP_KEY):
// its own, or its connection's.
func (s *Sim) hashID(i int32) int64 {
	if s.cfg.ECMPKey == route.KeyTransfer {
		return s.flows.id(i)
	}
	return s.cfg.ECMPKey.ID(s.flows.id(i), s.flows.channel(i))
}

// name names flow i in a message.
func (f *Flows) name(i int32) string {
	if i >= f.n {
		return fmt.Sprintf("flow %d of COLL node %d (expanded)", f.ex.Index(i), f.DAG.ID(f.ex.Coll(i)))
	}
	return fmt.Sprintf("flow %d", f.DAG.ID(i))
}

// NewFlows sizes the result columns.
func NewFlows(d *dag.DAG, src, dst []int32, size, delay []int64) *Flows {
	f := newFlows(d)
	f.Src, f.Dst, f.Size, f.Delay = src, dst, size, delay
	f.RxDone = make([]int64, d.Len())
	return f
}

func newFlows(d *dag.DAG) *Flows {
	n := d.Len()
	return &Flows{DAG: d, n: math.MaxInt32, Start: make([]int64, n), End: make([]int64, n), Ideal: make([]int64, n),
		qpsLeft: make([]uint8, n), rxLeft: make([]uint8, n), txLeft: make([]uint8, n), Sport: make([]uint16, n)}
}

// StartPs is when flow i was released (ps), -1 if it never was.
func (f *Flows) StartPs(i int32) int64 { return f.Start[i] }

// Result is flow i's outcome as every backend reports it (ps).
func (f *Flows) Result(i int32) flowset.Result {
	return flowset.Result{Start: des.Time(f.StartPs(i)), End: des.Time(f.End[i]), Ideal: des.Time(f.Ideal[i]),
		Failed: f.Failed != nil && f.Failed[i]}
}

func (f *Flows) setStart(i int32, t int64) { f.Start[i] = t }

// The input columns, from the set or the slices. A set's delay node keeps
// its delay in Size, a collective node its model time in Lat.

func (f *Flows) src(i int32) int32 {
	if f.set != nil {
		return f.rec(i).Src
	}
	return f.Src[i]
}

func (f *Flows) dst(i int32) int32 {
	if f.set != nil {
		return f.rec(i).Dst
	}
	return f.Dst[i]
}

// transfer is flow i's source, destination, bytes and step latency
// (src, dst, size and lat), its record read once: openQPs reads the four
// for every transfer, and while the surrogate is open that is most of a
// message's cost.
func (f *Flows) transfer(i int32) (src, dst int32, size, lat int64) {
	if f.set == nil {
		return f.Src[i], f.Dst[i], f.Size[i], f.lat(i)
	}
	r := f.rec(i)
	if r.Kind != flowset.Transfer {
		return r.Src, r.Dst, 0, 0
	}
	return r.Src, r.Dst, r.Size, int64(r.Lat)
}

// size is a transfer's bytes, 0 for delay nodes and joins.
func (f *Flows) size(i int32) int64 {
	if f.set != nil {
		if r := f.rec(i); r.Kind == flowset.Transfer {
			return r.Size
		}
		return 0
	}
	return f.Size[i]
}

func (f *Flows) delay(i int32) int64 {
	if f.set != nil {
		switch r := f.rec(i); r.Kind {
		case flowset.Delay:
			return r.Size
		case flowset.Coll: // expanded (startFlow), refused (RefuseColl), or else NCCL's model time
			return int64(r.Lat)
		}
		return 0
	}
	return f.Delay[i]
}

// Run simulates until every flow is done (or SIMULATOR_STOP_TIME).
func (s *Sim) Run() (err error) {
	if s.ownMon {
		defer func() {
			if cerr := s.mon.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	if s.parts > 1 && s.busy != nil && s.partitionable() == nil && s.busy() {
		s.parts, s.threads = 0, 1
	}
	if s.parts > 1 {
		return s.runPartitioned()
	}
	if s.threads > 1 {
		return fmt.Errorf("partitions: %d threads need as many parts", s.threads)
	}
	s.prepare()
	if err := s.begin(); err != nil {
		return err
	}
	if err := s.loop(0, false); err != nil {
		return err
	}
	if s.loopWin != nil {
		s.loopWin.cross(maxTime, s.stats.Events) // a run that ends inside the window
	}
	return s.finish()
}

// prepare starts the flows' run state afresh, so that a second
// simulation of the same flows (another Sim) runs as the first did.
func (s *Sim) prepare() {
	f := s.flows
	f.run = f.DAG.NewRun()
	s.pace = flowset.Pacer{}
	if f.expanding() {
		// Queue pair j of flow i is numbered i<<pendShift | j.
		f.newStore(math.MaxInt32 >> s.nic.pendShift)
		f.ex.Mark = func(j int32) { s.pace.Mark(j, f.rec(j)) }
		if s.symmetric() {
			f.ex.UseSymmetry(expand.FindSymmetry(f.set, s.r, expand.SymmetryRules{WholeServers: true, LinkOK: func(dl route.DirLink) bool {
				p := &s.fab.ports[dl]
				return p.lossProb == 0 && !p.marks
			}}))
		}
		n := f.n
		f.Start, f.End, f.Ideal, f.qpsLeft, f.rxLeft, f.txLeft, f.Sport = f.Start[:n], f.End[:n], f.Ideal[:n], f.qpsLeft[:n], f.rxLeft[:n], f.txLeft[:n], f.Sport[:n]
	}
	for i := range f.End {
		f.setStart(int32(i), -1)
		f.End[i] = -1
	}
	clear(f.Ideal)
	clear(f.RxDone)
	clear(f.qpsLeft)
	clear(f.rxLeft)
	clear(f.txLeft)
	clear(f.Sport)
	f.Failed = nil
}

// begin starts the flows ready at time 0 (under partitions, those whose
// source is this partition's) and puts the delay nodes among them in the
// calendar.
func (s *Sim) begin() error {
	if s.mon != nil {
		s.mon.start(s)
	}
	s.nic.lazy = s.mon == nil && len(s.cfg.LinkDown) == 0
	s.work = s.work[:0]
	for _, i := range s.flows.DAG.Ready() {
		if s.pv.part == nil || s.pv.home(i) == s.pv.me {
			s.work = append(s.work, i)
		}
	}
	delays := 0
	for _, i := range s.work {
		if s.flows.delay(i) > 0 {
			delays++
		}
	}
	s.starts.reset(delays)
	err := s.drain()
	s.starts.collect = false
	if err != nil {
		return err
	}
	s.starts.queue()
	return nil
}

// loop runs events: all of them, or (window) those before end, as one
// part of a partitioned run. One loop for both, with the handlers inline:
// a call per event cost the single loop 4%.
func (s *Sim) loop(end int64, window bool) error {
	stop := s.cfg.StopPs
	if !window {
		end = int64(des.Never)
		if stop > 0 && stop < end {
			end = stop + 1 // events at the horizon run
		}
	}
	for {
		ev := s.q.PopBefore(des.Time(end))
		if ev == nil {
			if !window && s.q.Len() > 0 {
				s.now = stop // the horizon was reached, not merely the last event
			}
			return nil
		}
		s.now = int64(ev.At)
		if s.loopWin != nil && s.now >= s.loopWin.next {
			s.loopWin.cross(s.now, s.stats.Events)
		}
		s.stats.Events++
		// Touch the next arrival's packet now: at 1024 GPUs packets and
		// ports are no longer in cache, and the load overlaps this event's
		// work instead of stalling the next one.
		if s.readAhead {
			if e := s.q.NearHead(); e != nil {
				switch e.Kind {
				case evArrive:
					prefetch.Line(unsafe.Pointer(&s.pkts[e.Target]))
					if e.Arg > 0 {
						prefetch.Line(unsafe.Pointer(&s.fab.ports[e.Arg-1]))
					}
				case evTxDone:
					prefetch.Line(unsafe.Pointer(&s.fab.ports[e.Target]))
				}
			}
		}
		if s.suspended && s.sur.hold(*ev) {
			continue
		}
		// The node this event happens at makes the events it leads
		// to (arrive sets it once it knows the link).
		s.curSeq, s.cur = ev.Seq(), int32(len(s.t.Nodes))
		// Each kind is its owner's: one concrete call a case (a table of
		// handlers, an indirect call per event, cost the loop 4%).
		switch ev.Kind {
		case evArrive:
			s.fab.arrive(ev.Target, ev.Arg)
		case evTxDone:
			s.fab.onTxDone(ev.Target)
		case evWake:
			s.fab.onWake(ev.Target)
		case evPFC:
			s.pfc.frame(ev.Target, ev.Arg)
		case evPFCRefresh:
			s.pfc.refresh(ev.Target)
		case evCCTimer:
			s.nic.onCCTimer(ev.Target, ev.Arg)
		case evRTO:
			s.nic.onRTO(ev.Target, ev.Arg)
		case evRTOFIFO:
			s.nic.onRTO(s.nic.popRTO())
		case evFlowSent:
			s.nic.sent(ev.Target)
		case evFlowRecv:
			s.nic.received(ev.Target)
		case evSend:
			if err := s.nic.onSend(ev.Target); err != nil {
				return err
			}
		case evStepLat:
			if err := s.lanes.due(ev.Target); err != nil {
				return err
			}
		case evDelayDone:
			s.cur = s.flowNode(ev.Target)
			s.finishFlow(ev.Target)
		case evStart:
			if s.bypassing {
				if err := s.sur.foldStarts(end); err != nil {
					return err
				}
				break
			}
			s.starts.due()
		case evLinkDown:
			if err := s.fab.linkDown(ev.Target); err != nil {
				return err
			}
		case evMonitor:
			s.mon.sample(s, ev.Arg)
		case evSurrogate, evBypass, evSurrogateSample, evBacklogSample:
			if err := s.sur.event(*ev); err != nil {
				return err
			}
		}
		if len(s.work) > 0 {
			if err := s.drain(); err != nil {
				return err
			}
		}
		if s.watch.stalled != nil {
			return nil
		}
		if !window && s.progress != nil && s.stats.Events&(1<<20-1) == 0 {
			s.progress(s.flows.run.Done(), s.flows.DAG.Len(), s.now)
		}
	}
}

// finish ends a run: the simulated time, and what stopped it early.
func (s *Sim) finish() error {
	stop := s.cfg.StopPs
	s.stats.SimPs = s.now
	if d := s.flows.run; s.watch.stalled == nil && d.Done() == d.Len() && len(s.flows.End) > 0 {
		// Every flow is done: the simulated time is the last one's end,
		// not the last event's (a finished pair's timeout lingers for
		// RTO_US after it, doing nothing).
		s.stats.SimPs = slices.Max(s.flows.End[:s.flows.DAG.Len()])
	}
	if s.watch.stalled != nil {
		s.watch.stalled.Done, s.watch.stalled.Flows = s.flows.run.Done(), s.flows.DAG.Len()
		return s.watch.stalled
	}
	if i, stuck := s.flows.run.Stuck(); stuck {
		if s.failure != nil {
			return s.failure
		}
		if stop > 0 && s.now >= stop {
			return &Incomplete{Reason: fmt.Sprintf("SIMULATOR_STOP_TIME reached with flow %d unfinished", s.flows.DAG.ID(i)),
				Done: s.flows.run.Done(), Flows: s.flows.DAG.Len(), StopTime: true}
		}
		return fmt.Errorf("flow %d never completed (%d of %d done): a failed link cut its path, or its dependencies never finished",
			s.flows.DAG.ID(i), s.flows.run.Done(), s.flows.DAG.Len())
	}
	if s.failure != nil {
		return s.failure
	}
	return nil
}

// LoopWindow is the event loop's wall time and events while the simulated
// time was within [StartPs, EndPs): how long a part of a run took, in one
// process (the surrogate's speedup is one window's against another's).
// CPUSecs is the process's CPU time over it (user and system, garbage
// collection included): on a shared machine, the time to compare.
type LoopWindow struct {
	StartPs, EndPs int64
	Secs, CPUSecs  float64
	Events         uint64
	next           int64 // the simulated time of the next crossing (StartPs, then EndPs)
	from           time.Time
	cpuFrom        float64
	events         uint64
}

// NewLoopWindow measures [start, end).
func NewLoopWindow(start, end int64) *LoopWindow {
	return &LoopWindow{StartPs: start, EndPs: end, next: start}
}

// cross notes the loop reaching simulated time now with events popped.
func (w *LoopWindow) cross(now int64, events uint64) {
	if w.next == w.StartPs && now >= w.StartPs {
		w.from, w.cpuFrom, w.events, w.next = time.Now(), cpuSecs(), events, w.EndPs
	}
	if w.next == w.EndPs && now >= w.EndPs {
		w.Secs, w.CPUSecs, w.Events, w.next = time.Since(w.from).Seconds(), cpuSecs()-w.cpuFrom, events-w.events, math.MaxInt64
	}
}

// cpuSecs is the process's CPU time so far (0 where getrusage fails).
func cpuSecs() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)*1e-6
}

// Incomplete is what Run returns when it stopped before every flow was
// done: at SIMULATOR_STOP_TIME, or on a PFC deadlock. The flows that
// finished have their times; the others have Start or End -1.
type Incomplete struct {
	Reason      string
	Done, Flows int
	StopTime    bool // the configured horizon, not a deadlock
}

func (e *Incomplete) Error() string {
	return fmt.Sprintf("%s (%d of %d flows finished)", e.Reason, e.Done, e.Flows)
}

// FlowsFailed is what Run returns when failed links left transfers
// without a path: every other flow finished, Flows.Failed marks these.
type FlowsFailed struct {
	Count int
	First error // the first: which flow, which link
}

func (e *FlowsFailed) Error() string {
	if e.Count == 1 {
		return e.First.Error()
	}
	return fmt.Sprintf("%v (and %d more flows failed)", e.First, e.Count-1)
}

// finishFlow marks a flow done and queues what it releases; the last
// flow of a COLL node's expansion ends the node too.
func (s *Sim) finishFlow(i int32) {
	if s.surCount && s.flows.size(i) > 0 {
		s.sur.transfersInProgress(-1) // only --surrogate auto reads the load
	}
	s.flows.End[i] = s.now
	if i < s.flows.n {
		s.work = s.flows.run.Complete(i, s.work)
		return
	}
	var coll int32
	s.work, coll = s.flows.ex.Complete(i, s.work)
	if coll >= 0 {
		s.finishFlow(coll)
	}
}

// drain starts every flow released at this instant, in release order.
// Starting one may release more (joins, local copies finish at once), so
// the list is walked by index as it grows, then emptied keeping its array.
func (s *Sim) drain() error {
	for k := 0; k < len(s.work); k++ {
		if err := s.startFlow(s.work[k]); err != nil {
			return err
		}
	}
	s.work = s.work[:0]
	return nil
}

func (s *Sim) startFlow(i int32) error {
	f := s.flows
	if s.starts.collect {
		// Released with the run: what starting it makes, its node makes.
		// Later, the node whose event released it does, so that the flows
		// one event releases number their events in release order (a
		// collective's ranks started at once, each numbering by its own
		// node, left the calendar thousands of ties to sort).
		s.cur = s.flowNode(i)
	}
	if i >= f.n {
		// Its channel's next row waits on its row: make it now.
		ready, err := f.ex.Started(i)
		if err != nil {
			return err
		}
		f.cover()
		s.work = append(s.work, ready...)
	} else if f.expanding() && f.set.Flow(i).Kind == flowset.Coll {
		return s.expand(i)
	}
	f.setStart(i, s.now)
	size := f.size(i)
	switch delay := f.delay(i); {
	case delay > 0:
		if delay > maxTime-s.now {
			return fmt.Errorf("%s: delay node ends after the %d ps the simulator can represent", f.name(i), int64(maxTime))
		}
		f.Ideal[i] = delay
		if s.starts.collect {
			s.starts.add(s.now+delay, i)
			return nil
		}
		s.push(s.now+delay, evDelayDone, i, 0)
		return nil
	case size == 0:
		// Joins and zero-byte transfers: no network; a transfer still
		// takes its step latency. (The stream has no transfer from a
		// node to itself.)
		if lat := f.lat(i); lat > 0 {
			f.Ideal[i] = lat
			s.push(s.now+lat, evDelayDone, i, 0)
			return nil
		}
		s.finishFlow(i)
		return nil
	}
	f.Ideal[i] = 0
	// An expanded flow's slot may have held a flow that ended without its
	// queue pairs counting down (bypassed, or failed).
	f.qpsLeft[i], f.rxLeft[i], f.txLeft[i] = 0, 0, 0
	if s.surCount {
		s.sur.transfersInProgress(1)
	}
	if s.sendLatPs > 0 {
		s.push(s.now+s.sendLatPs, evSend, i, 0)
		return nil
	}
	return s.nic.openQPs(i, false)
}

// expand runs COLL node i as its flows; one that moves nothing ends now.
// Its ideal time is NCCL's model time, as at collective granularity.
func (s *Sim) expand(i int32) error {
	f := s.flows
	f.setStart(i, s.now)
	f.Ideal[i] = int64(f.set.Flow(i).Lat)
	ready, err := f.ex.Expand(i)
	if err != nil {
		return err
	}
	f.cover()
	if len(ready) == 0 {
		s.finishFlow(i)
		return nil
	}
	s.work = append(s.work, ready...)
	return nil
}

// port is the NIC port index of queue pair j of flow i (-1: hash).
func (f *Flows) port(i int32, j int) int {
	if f.set != nil {
		return int(f.rec(i).Port) + j
	}
	if f.Port == nil {
		return -1
	}
	return int(f.Port[i]) + j
}

func (f *Flows) lat(i int32) int64 {
	if f.set != nil {
		if r := f.rec(i); r.Kind == flowset.Transfer {
			return int64(r.Lat)
		}
		return 0
	}
	if f.Lat == nil {
		return 0
	}
	return f.Lat[i]
}

// idealPath is what a transfer's ideal FCT needs of its paths: the
// propagation both ways, and the time per byte at the first of the forward
// path's slowest hops and summed over its other hops. It does not depend on
// the size, so a prediction can keep it.
type idealPath struct {
	prop          int64
	bottle, other float64 // ps per byte
}

// partSize is the bytes of queue pair j of transfer i: its packets are
// split over QPS_PER_CONNECTION pairs, the last taking what is left.
func (s *Sim) partSize(i int32, j int64) int64 { return s.partOf(s.flows.size(i), j) }

// partOf is partSize for a transfer of size bytes. One that fits in a
// packet is its only pair's, without the divisions: a bypassed 1 KiB
// message made four of them.
func (s *Sim) partOf(size, j int64) int64 {
	pay := int64(s.cfg.PayloadSize)
	if j == 0 && size <= pay {
		return size
	}
	pktsTotal := packets(size, pay)
	nq := min(int64(s.cfg.QPsPerConn), pktsTotal)
	per := (pktsTotal + nq - 1) / nq
	return min(size-j*per*pay, per*pay)
}

// FromSet takes a loaded stream's flows: transfers, delay nodes (their
// delay) and joins (size 0), read in place.
func FromSet(set *flowset.Set) *Flows {
	f := newFlows(set.DAG)
	f.set = set
	f.replayed = set.Replayed()
	return f
}
