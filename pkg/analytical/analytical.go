// Package analytical holds fabricsim's analytical backends. Both execute the
// flow DAG (pkg/dag) on the discrete-event core (pkg/des) over routed paths
// (pkg/route):
//
//   - busbw: no contention between collectives, as SimAI's analytical
//     backend: flows of different collectives (and workload-level flows)
//     never slow each other. The flows of one collective do share each
//     link, since a collective's own channels cannot push more bytes
//     through a link than it carries (a ring's channels all cross each
//     GPU's NVLink): max-min fairly, re-solved as flows start and finish,
//     except that a finish on links carrying thousands of the collective's
//     flows hands its share on at the next start instead (still never
//     above capacity), which keeps a 1M-flow AllToAll at one solve. A flow
//     alone on its path takes its path latency plus its size over the
//     path's bottleneck.
//   - fluid: every directed link is shared max-min fairly among all the
//     flows crossing it (progressive filling), recomputed whenever flows
//     start or finish. It shows incast, ECMP collisions and oversubscribed
//     uplinks between collectives too.
//
// Timing model, common to both so that fluid equals busbw when no link is
// shared: a transfer released at t (when its last dep completes) waits
// max(0, step latency - path latency), its delay_ps less the propagation
// its path adds anyway, then sends its bytes at its rate; when the last
// byte has left, it arrives one path latency later, and that is the flow's
// end. Its dependants that send from the same source (the next chunk on its
// connection) start when its last byte has left; the others at its end. Uncontended, it ends max(step latency, path latency) + size /
// bottleneck after release. A flow holds bandwidth on every link of its
// path while it sends, not while it waits or during the trailing latency.
// A COLL node (a whole collective, collective granularity) ends, under
// busbw, its delay_ps (NCCL's model time) plus what the fabric beyond the
// NICs adds (collload.go) after release; under fluid the collectives in
// flight share the links they load (collshare.go). Its ideal_fct is its
// delay_ps. Delay nodes end
// delay_ps after release; joins (DELAY flows of size 0
// without delay_ps) as soon as they are released; other size-0 flows after
// max(step latency, path latency). ideal_fct is that uncontended
// time, plus any send latency (for delay nodes and joins it is fct_ns, as
// formats/trace.md specifies).
//
// Trace rows come in completion order. Times are kept in picoseconds and
// rounded to nanoseconds in the trace; fct_ns is end_ns - start_ns.
//
// Cost: without sharing a flow is a few heap operations. The fluid solver
// is exact and incremental (see fluid.go): collectives, whose concurrent
// flows have equal sizes, re-solve a handful of flows per event; thousands
// of concurrent flows of widely different sizes sharing one set of links
// make most finishes re-solve a good part of them. busbw runs the same
// solver over per-collective copies of the links, so its sub-problems are
// one collective's flows. BenchmarkFluidRandom (make bench) prints both
// cases' times: every flow released at once on 1024 GPUs, of one size or
// of widely different sizes.
package analytical

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"unsafe"

	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/internal/prefetch"
	"github.com/fabricsim/fabricsim/pkg/dag"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/expand"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/linkload"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Model selects the backend.
type Model int

// The models.
const (
	Fluid Model = iota
	Busbw
)

// ParseModel reads "fluid" or "busbw".
func ParseModel(s string) (Model, error) {
	switch s {
	case "fluid":
		return Fluid, nil
	case "busbw":
		return Busbw, nil
	}
	return 0, fmt.Errorf("unknown model %q (fluid or busbw)", s)
}

func (m Model) String() string {
	if m == Busbw {
		return "busbw"
	}
	return "fluid"
}

// Backend is the trace's fabricsim.backend value.
func (m Model) Backend() string { return "analytical-" + m.String() }

// Options configure a run.
type Options struct {
	Model Model
	Seed  uint64 // enters only the ECMP hash
	// Routing is how flows take the equal-cost paths (route.Policy; the
	// packet backend's ROUTING): ecmp and flowlet pin a flow to its hashed
	// path, spray splits its bytes evenly over them, adaptive over the
	// least loaded next hops at each hop when it starts. At collective granularity
	// ecmp and flowlet price the expected hash collisions, spray and
	// adaptive the even split (collload.go).
	Routing route.Policy
	// ECMPKey is what a hashed path is drawn for at flow granularity (and
	// expanded): each transfer (default) or each connection (its ends and
	// channel: NCCL's one queue pair per connection, every chunk on its
	// path). Collective granularity prices draws per connection either way.
	ECMPKey route.HashKey
	// SendLat delays every transfer's start (SimAI's AS_SEND_LAT): the
	// flow is released at its time but moves data SendLat later.
	SendLat des.Time
	// Progress, when set, is called every few thousand completed flows.
	Progress func(done, total int, now des.Time)
	// ApproxLockstep, with Expand under fluid, runs the sibling groups of
	// each COLL node not run exactly by symmetry in lockstep with a
	// representative per layout class (lockstep.go): an APPROXIMATION,
	// which the trace's metadata states (fabricsim.approximate).
	ApproxLockstep bool
	// LockstepGroups bounds the groups of a lockstep class (0: every
	// sibling group of a layout): fewer couple less and cost more.
	LockstepGroups int
	// LockstepRate is how a lockstep class's common rate is found.
	LockstepRate LockstepRate
	// MergeChannels, with Expand under fluid, moves the ring channels of
	// a group that make the same flows as one (expand/chanmerge.go):
	// exact, checked at every solve; when the check fails, run again with
	// the failing collective shape unmerged (RunResults). Off by default:
	// a weighted link's sums round differently, so times may move by a
	// nanosecond.
	MergeChannels bool
	// skipMerge: the collective shapes (expand.Store.Shape) a run merging
	// channels leaves unmerged, found inexact by an earlier run.
	skipMerge []string
	// ApproxMergeChannels merges them as MergeChannels does but never
	// runs again: where a link only some of a class's channels cross
	// limits them, the class moves at that rate (its slowest channel's):
	// an APPROXIMATION, which the trace's metadata states.
	ApproxMergeChannels bool
	// Expand runs each COLL node of a collective-granularity stream as
	// the flows flow granularity would have held (expand.go) instead of
	// its model time and the fabric's price.
	Expand bool
	// MemoryLimit bounds the bytes expanded flows may hold (0: none): a
	// run that would pass it stops with an estimate, not for want of memory.
	MemoryLimit int64
	// NoSymmetry expands every sibling group of a COLL node under the
	// fluid model, even those that would run exactly as the first
	// (expand.FindSymmetry).
	NoSymmetry bool
	// Reuse: a group standing for its siblings (symmetry) takes the time
	// it took on the same collective shape the last time instead of
	// running again (expand.Store.UseReuse). The rows are those without
	// it; rows that end in the same picosecond may come in another order.
	Reuse bool
	// ApproxReuse: a COLL node takes the time of the first node of the
	// same collective shape on groups placed alike instead of running
	// (expand.Store.UseApproxReuse; not one whose groups a pipeline
	// transfer may overlap): an APPROXIMATION, which the trace's metadata
	// states. Not with LinkLoads or Faults.
	ApproxReuse bool
	// ApproxReuseIdle: with ApproxReuse, also a node some of whose groups
	// a pipeline transfer may overlap, when no stream transfer is in
	// flight on their GPUs at its release (expand.Store.UseApproxReuseIdle).
	ApproxReuseIdle bool
	// ApproxRails: of a COLL node whose groups run in full, only those
	// on its first rails when the groups on the others are their images
	// under a relabelling of a rail-optimized fabric's rails
	// (expand.Store.UseApproxRails): an APPROXIMATION, which the trace's
	// metadata states. Not with LinkLoads, Faults or ApproxLockstep.
	ApproxRails bool
	// ApproxPodRotation: on a fat-tree, of a COLL node whose groups are
	// images of its first under a rotation of GPU indexes and pods, only
	// the first runs, each of its links standing for its orbit
	// (expand.PodRotation): an APPROXIMATION, which the trace's metadata
	// states. Not with LinkLoads, Faults, ApproxLockstep or ApproxRails.
	ApproxPodRotation bool
	// LinkLoads sums the bytes every directed link carries, by group type
	// and op, into Result.Loads: a flow's over its path (or its sprayed
	// links' shares), a COLL node's from its traffic matrix as priced.
	LinkLoads bool
	// Faults degrade or fail links (faults.go); nil: none.
	Faults *Faults

	verify func(*fluid) // tests: checks the solver after every update
}

// Meta is the trace metadata of a run.
func Meta(in *flowset.Set, opt Options) trace.Meta {
	m := trace.Meta{
		Backend:  opt.Model.Backend(),
		Params:   map[string]any{"model": opt.Model.String(), "seed": opt.Seed, "routing": opt.Routing.String(), "expand": opt.Expand, "symmetry": opt.Expand && opt.Model == Fluid && !opt.NoSymmetry},
		Topology: in.TopologyMeta(),
		Notes:    in.Notes,
	}
	if opt.Lockstepping(in) {
		m.Params["approx_lockstep"] = true
		m.Params["lockstep_groups"] = opt.LockstepGroups
		m.Params["lockstep_rate"] = [...]string{"representative", "slowest"}[opt.LockstepRate]
		m.Approximate = ApproxLockstepNote
	}
	if opt.ECMPKey != route.KeyTransfer {
		m.Params["ecmp_key"] = opt.ECMPKey.String()
	}
	if opt.Reuse && opt.Expand && opt.Model == Fluid && !opt.NoSymmetry && !opt.LinkLoads {
		m.Params["reuse"] = true
	}
	if opt.ApproxMergeChannels && opt.merging(in) {
		m.Params["approx_merge_channels"] = true
		m.Approximate = ApproxMergeNote
	}
	if opt.approxReusing(in) {
		m.Params["approx_reuse"] = true
		if m.Approximate != "" {
			m.Approximate += "; "
		}
		m.Approximate += ApproxReuseNote
		if opt.ApproxReuseIdle {
			m.Params["approx_reuse_idle"] = true
			m.Approximate += "; " + ApproxReuseIdleNote
		}
	}
	if opt.approxRailing(in) {
		m.Params["approx_rails"] = true
		if m.Approximate != "" {
			m.Approximate += "; "
		}
		m.Approximate += ApproxRailsNote
	}
	if opt.approxRotating(in) {
		m.Params["approx_pod_rotation"] = true
		if m.Approximate != "" {
			m.Approximate += "; "
		}
		m.Approximate += ApproxPodRotationNote
	}
	return m
}

// ApproxPodRotationNote is what the trace (fabricsim.approximate) says of
// a run with Options.ApproxPodRotation.
const ApproxPodRotationNote = "approx-pod-rotation: of COLL nodes whose groups are images of the first under a rotation of GPU indexes and pods, only the first ran, loading each link's orbit (the others' ECMP draws were its own, moved by pods)"

// approxRotating reports whether Options.ApproxPodRotation takes effect.
func (opt Options) approxRotating(in *flowset.Set) bool {
	return opt.ApproxPodRotation && opt.Expand && opt.Model == Fluid && in.CollNodes > 0 && !opt.LinkLoads && !opt.Faults.active() && !opt.ApproxLockstep && !opt.ApproxRails
}

// ApproxReuseIdleNote is what the trace (fabricsim.approximate) says of a
// run with Options.ApproxReuseIdle.
const ApproxReuseIdleNote = "approx-reuse-idle: so did COLL nodes a pipeline transfer may overlap, when none was in flight on their GPUs at their release (a transfer starting during one met it from then: its groups ran again, each flow cut to the share of the kept time left, and shared the links with the transfer)"

// ApproxRailsNote is what the trace (fabricsim.approximate) says of a run
// with Options.ApproxRails.
const ApproxRailsNote = "approx-rails: of COLL nodes whose groups on other rails are images of those on the first, only the first rails' groups ran (not the others' own ECMP draws, and the others loaded no link)"

// approxRailing reports whether Options.ApproxRails takes effect.
func (opt Options) approxRailing(in *flowset.Set) bool {
	return opt.ApproxRails && opt.Expand && opt.Model == Fluid && in.CollNodes > 0 && !opt.LinkLoads && !opt.Faults.active() && !opt.ApproxLockstep
}

// ApproxReuseNote is what the trace (fabricsim.approximate) says of a run
// with Options.ApproxReuse.
const ApproxReuseNote = "approx-reuse: COLL nodes of one collective shape on groups placed alike took the time of the first one run (not their own ECMP draws, and they loaded no link)"

// approxReusing reports whether Options.ApproxReuse takes effect.
func (opt Options) approxReusing(in *flowset.Set) bool {
	return opt.ApproxReuse && opt.Expand && opt.Model == Fluid && in.CollNodes > 0 && !opt.LinkLoads && !opt.Faults.active()
}

// Lockstepping reports whether a run of in under opt runs groups in
// lockstep (Options.ApproxLockstep takes effect).
func (opt Options) Lockstepping(in *flowset.Set) bool {
	return opt.ApproxLockstep && opt.Expand && opt.Model == Fluid && in.CollNodes > 0
}

// MetaFaults is Meta naming the run's faults in its params.
func MetaFaults(in *flowset.Set, opt Options) trace.Meta {
	m := Meta(in, opt)
	opt.Faults.params(m.Params)
	return m
}

// Result summarises a run.
type Result struct {
	Flows      int
	Bytes      int64
	End        des.Time // when the last flow ended
	Events     uint64   // events pushed on the queue
	Recomputes uint64   // rate recomputations (one per instant with starts or finishes)
	// Expanded COLL nodes (Options.Expand): the flows they were cut into,
	// and the most held at once.
	Expanded, PeakExpanded int64
	// Of those, the flows sibling groups ran as their first group did,
	// in SymmetricNodes COLL nodes: only the first group's were made.
	Mirrored       int64
	SymmetricNodes int
	// Of those, ReusedNodes: the COLL nodes whose standing group took the
	// time it took the last time instead of running again; ReusedFlows
	// its flows (in Expanded, not in Mirrored).
	ReusedNodes, ReusedFlows int64
	// Of those, ApproxReusedNodes: the COLL nodes that took another's time
	// (Options.ApproxReuse) instead of running; ApproxReusedFlows the
	// flows they stood for (in Expanded, not in Mirrored).
	ApproxReusedNodes, ApproxReusedFlows int64
	ApproxWaited                         int64 // of ApproxReusedNodes, released while the one they matched still ran
	// RailNodes: the COLL nodes of which only the first rails' groups ran
	// (Options.ApproxRails); RailFlows the flows those stood for.
	RailNodes, RailFlows int64
	// RotNodes: the COLL nodes of which only the first group ran
	// (Options.ApproxPodRotation); RotFlows the flows it stood for.
	RotNodes, RotFlows int64
	// ApproxMet: of ApproxReusedNodes (Options.ApproxReuseIdle), those a
	// stream transfer met while they stood as a delay, whose groups then ran.
	ApproxIdle, ApproxMet int64
	// Of those, approx-lockstep's: the COLL nodes whose groups moved in
	// lockstep, the classes (representatives) they ran, and the flows that
	// moved with their representatives' (in Expanded, not in Mirrored).
	LockstepNodes, LockstepClasses, LockstepMembers int64
	// Of Expanded, the flows that moved with another channel's
	// (chanmerge.go), and whether a run merging them was found inexact
	// and ran again: MergeReruns times, the last with MergeSkipped
	// collective shapes unmerged (0: with none merged; then
	// ChannelsMerged is 0).
	ChannelsMerged int64
	MergeRerun     bool
	MergeReruns    int
	MergeSkipped   int
	// A run merging channels exactly: the shapes of the merged flows found
	// inexact, and whether one had none (RunResults).
	inexactShapes  []string
	inexactUnknown bool
	// With ApproxMergeChannels: the solves in which a merged flow was
	// limited by a link only some of its channels cross.
	MergeInexact uint64
	Warnings     []string      // what the run could not model, once each
	Loads        *linkload.Acc // with Options.LinkLoads
	// With Options.Faults: trace rows of flows failed links left without a
	// path, and the bytes they never delivered.
	Failed      int
	FailedBytes int64
}

// Event kinds.
const (
	evComplete uint16 = iota // Target flow index, Arg its ideal FCT in ps (transfers)
	evDrained                // Target fluid slot, Arg the slot's generation
	evSend                   // Target flow index: its send latency is over
	evStart                  // Target flow index: its step latency is over, the bytes go
	evCollDone               // Target COLL node (fluid), Arg its share generation
	evLinkDown               // Target link index (Options.Faults)
	evScale                  // Target link index, Arg its Options.Faults.Scale index
)

// progressEvery is how many completions pass between Progress calls:
// often enough for a fluid run's few thousand completions a second.
const progressEvery = 1 << 12

type engine struct {
	replayed map[int64]bool // SimAI replay's collectives (flowset.Set.Replayed)
	foreign  bool           // tell ex of every stream transfer's release and end (Options.ApproxReuseIdle)
	in       *flowset.Set
	run      *dag.Run // this run's DAG state: the set is never written
	opt      Options
	r        *route.Router
	q        *des.Calendar
	now      des.Time
	emit     func(int32, flowset.Result) error
	ready    []int32
	path     []route.DirLink
	// a sprayed flow's links and the share of its bytes on each
	// (spreadAt: per directed link, while sprayed sums them)
	spread   []route.DirLink
	weights  []float32
	spreadAt []float64
	load     func(route.DirLink) float64 // adaptive routing's view of the links
	key      int64                       // busbw: the private links adaptive routing looks at
	fl       *fluid
	res      Result
	// approx-lockstep's union of a flow's and its members' links
	// (lockstep.go), their weights, and a member's path
	lockLinks []route.DirLink
	unions    map[uint64]*union // lockstepUnion's, per connection (route.KeyConnection, connKey)
	lockW     []float32
	lockPath  []route.DirLink
	hardAt    []bool // per directed link, while lockstepUnion sums
	lockAbs   []float32
	// sameSrc picks the transfers sending from sentSrc (built once: no
	// allocation per release).
	sameSrc func(j int32) bool
	sentSrc int32
	pace    flowset.Pacer       // the transport's limit on a connection's steps
	share   *collShare          // fluid at collective granularity
	price   *collLoad           // the fabric's cost for COLL nodes
	ex      *expand.Store       // COLL nodes run as their flows
	merging bool                // ex merges ring channels (chanmerge.go)
	rot     *expand.PodRotation // Options.ApproxPodRotation: rotated flows load links' orbits
	rotPath []route.DirLink     // rotate's scratch
	rotW    []float32
	badColl map[int32]bool // COLL nodes noted inexact (noteInexact)
	// An exact merging run: per collective shape, its COLL nodes not
	// yet ended (shapeLeft), and how many shapes not noted inexact have
	// some (shapesOpen): once a run found inexact has none, no later solve
	// can note a new shape, so the rest of it is not run (settled).
	shapeLeft  map[string]int
	shapesOpen int
	sym        *expand.Symmetry
	steps      steps         // busbw: the collective records run as one workload step
	links      *linkload.Acc // Options.LinkLoads
	n          int32         // the stream's flows; indexes from n on are ex's
	fail       failures      // Options.Faults
	// start is when each flow was released, by index (expanded flows'
	// slots after the stream's): run state, kept out of the set.
	start []des.Time
}

// The event calendar's geometry: 16.4 ns buckets, a 268 us horizon. The
// model's events are mostly a chunk's drain or completion microseconds
// ahead: a push is an append, where the heap it replaced (GPT-13B on 1024
// GPUs expanded, 226 k flows held) took a fifth of the CPU profile in
// sifting.
const calShift, calLog = 14, 14

// after schedules an event d after now.
func (e *engine) after(d des.Time, kind uint16, target int32, arg int64) {
	e.q.Push(e.now.Add(d), kind, target, arg)
}

// Run simulates the input and calls emit once per flow, in completion
// order, with its trace row (the row is reused: copy it to keep it). An
// Input may be run several times, not concurrently.
func Run(in *flowset.Set, opt Options, emit func(*trace.Row) error) (Result, error) {
	rows := in.Rows()
	var row trace.Row
	return RunResults(in, opt, func(i int32, r flowset.Result) error {
		row = rows.Row(i, r)
		return emit(&row)
	})
}

// RunResults is Run that reports each flow's result (by DAG index, in
// completion order) instead of its trace row: the contract every backend
// keeps (flowset.Result, written as rows by flowset.Rows).
func RunResults(in *flowset.Set, opt Options, emit func(i int32, r flowset.Result) error) (Result, error) {
	if !opt.merging(in) || opt.ApproxMergeChannels {
		return runResults(in, opt, emit)
	}
	// The merged run's rows are held until it is known to be exact. A
	// run found inexact goes on as --approx-merge-channels would, noting
	// the collective shape (expand.Store.Shape) of every merged flow that
	// fails the check, until no COLL node of a shape not noted is left
	// to end (engine.settled: GPT-13B's DP ReduceScatter on a fat-tree
	// fails as the iteration's last collective, and running that merged to
	// its end cost a third more than the unmerged run); the next leaves
	// those shapes unmerged and the others merged, and is checked again.
	// Shapes noted after the first failure may not have failed in the
	// exact run: they only merge less. Each rerun adds a shape (those left unmerged cannot
	// fail), so reruns are bounded by the shapes; should one not (a
	// failing flow of no known shape), the run is repeated unmerged.
	type row struct {
		i int32
		r flowset.Result
	}
	var rows []row
	hold := func(i int32, r flowset.Result) error {
		rows = append(rows, row{i, r})
		return nil
	}
	opt.skipMerge = nil
	for reruns := 0; ; reruns++ {
		rows = rows[:0]
		res, err := runResults(in, opt, hold)
		if res.inexactUnknown || len(res.inexactShapes) > 0 {
			added := false
			for _, sh := range res.inexactShapes {
				if !slices.Contains(opt.skipMerge, sh) {
					opt.skipMerge = append(slices.Clip(opt.skipMerge), sh)
					added = true
				}
			}
			if !added || res.inexactUnknown {
				opt.MergeChannels, opt.skipMerge = false, nil
				res, err = runResults(in, opt, emit)
				res.MergeRerun, res.MergeReruns = true, reruns+1
				return res, err
			}
			continue
		}
		if reruns > 0 {
			res.MergeRerun, res.MergeReruns, res.MergeSkipped = true, reruns, len(opt.skipMerge)
		}
		if err != nil {
			return res, err
		}
		for _, x := range rows {
			if err := emit(x.i, x.r); err != nil {
				return res, err
			}
		}
		return res, nil
	}
}

// noteInexact notes the collective shapes of the merged flows the
// solve just made found inexact (RunResults).
func (e *engine) noteInexact() {
	for _, i := range e.fl.inexactFlows {
		if i < e.n {
			e.res.inexactUnknown = true
			continue
		}
		c := e.ex.Coll(i)
		if e.badColl[c] {
			continue
		}
		if e.badColl == nil {
			e.badColl = map[int32]bool{}
		}
		e.badColl[c] = true
		if sh := e.ex.Shape(i); !slices.Contains(e.res.inexactShapes, sh) {
			e.res.inexactShapes = append(e.res.inexactShapes, sh)
			if e.shapeLeft[sh] > 0 {
				e.shapesOpen--
			}
		}
	}
	e.fl.inexactFlows = e.fl.inexactFlows[:0]
}

// countShapes sets shapeLeft and shapesOpen at the start of an exact
// merging run.
func (e *engine) countShapes() {
	e.shapeLeft = map[string]int{}
	for i := range int32(e.n) {
		if e.in.Flow(i).Kind == flowset.Coll {
			sh := e.ex.NodeShape(i)
			if e.shapeLeft[sh] == 0 {
				e.shapesOpen++
			}
			e.shapeLeft[sh]++
		}
	}
}

// shapeEnded counts COLL node i, ended, off its shape's.
func (e *engine) shapeEnded(i int32) {
	sh := e.ex.NodeShape(i)
	if e.shapeLeft[sh]--; e.shapeLeft[sh] == 0 && !slices.Contains(e.res.inexactShapes, sh) {
		e.shapesOpen--
	}
}

// settled reports whether an exact merging run found inexact can stop:
// every shape it might still note has ended (the rest would be thrown
// away). A failure of no known shape reruns unmerged at once.
func (e *engine) settled() bool {
	if !e.fl.noteFlows || (!e.res.inexactUnknown && len(e.res.inexactShapes) == 0) {
		return false
	}
	return e.res.inexactUnknown || e.shapesOpen == 0
}

// ApproxMergeNote is what the trace (fabricsim.approximate), the summary
// line and fctstats say of an --approx-merge-channels run.
const ApproxMergeNote = "approx-merge-channels: a ring's channels of one order moved as one flow, at their slowest channel's rate where ECMP gave them different links"

// merging reports whether a run of in under opt merges ring channels
// (chanmerge.go).
func (opt Options) merging(in *flowset.Set) bool {
	return (opt.MergeChannels || opt.ApproxMergeChannels) && opt.Expand && opt.Model == Fluid && in.CollNodes > 0 && !opt.ApproxLockstep && !opt.Faults.active()
}

func runResults(in *flowset.Set, opt Options, emit func(i int32, r flowset.Result) error) (Result, error) {
	r, err := route.New(opt.Faults.Topology(in.Topology))
	if err != nil {
		return Result{}, err
	}
	n := in.DAG.Len()
	e := &engine{in: in, run: in.DAG.NewRun(), start: make([]des.Time, n), opt: opt, r: r, emit: emit, n: int32(n), replayed: in.Replayed()}
	e.sameSrc = func(j int32) bool {
		f := e.flow(j)
		if f.Kind != flowset.Transfer || f.Src != e.sentSrc {
			return false
		}
		e.pace.Mark(j, f)
		return true
	}
	e.q = des.NewCalendar(calShift, calLog)
	switch {
	case in.CollNodes > 0 && opt.Expand:
		e.ex = expand.New(in, opt.MemoryLimit, func(dep, d *flowset.Flow) expand.Early {
			if d.Kind == flowset.Transfer && d.Src == dep.Src {
				return expand.OnSent // as sameSrc
			}
			return expand.AtCompletion
		})
		e.ex.Mark = func(j int32) { e.pace.Mark(j, e.flow(j)) }
		if opt.Model == Fluid && !opt.NoSymmetry && !opt.Faults.active() { // a degraded link makes one group unlike its siblings
			// Max-min rates on one group's links depend only on the
			// flows over them: a group alone on its links runs as its
			// siblings do.
			sym := expand.FindSymmetry(in, r, expand.SymmetryRules{Fabric: true})
			e.ex.UseSymmetry(sym)
			if sym != nil {
				e.res.SymmetricNodes = sym.Nodes
				// The link loads add up the standing group's flows as
				// they run.
				if opt.Reuse && !opt.LinkLoads {
					e.ex.UseReuse(func() des.Time { return e.now })
				}
			}
			e.sym = sym
		}
		if opt.Lockstepping(in) {
			e.ex.UseLockstep(opt.LockstepGroups)
		}
		if opt.approxReusing(in) {
			e.ex.UseApproxReuse(func() des.Time { return e.now })
			if opt.ApproxReuseIdle {
				e.ex.UseApproxReuseIdle()
				e.foreign = true
			}
		}
		if opt.approxRailing(in) {
			if err := e.ex.UseApproxRails(); err != nil {
				return Result{}, err
			}
		}
		if opt.approxRotating(in) {
			rot, err := expand.NewPodRotation(in.Topology)
			if err != nil {
				return Result{}, fmt.Errorf("--approx-pod-rotation: %v", err)
			}
			e.ex.UseApproxPodRotation(rot)
			e.rot = rot
		}
		if opt.merging(in) {
			e.ex.UseChannelMerge()
			for _, sh := range opt.skipMerge {
				e.ex.SkipChannelMerge(sh)
			}
			e.merging = true
		}
	case in.CollNodes > 0:
		e.price = newCollLoad(in, r, opt.Routing, opt.Seed, &e.res)
	}
	if opt.LinkLoads {
		e.links = linkload.New(in, r.DirLinks())
		e.res.Loads = e.links
		if e.price == nil && in.CollNodes > 0 {
			e.price = newCollLoad(in, r, opt.Routing, opt.Seed, &e.res) // the siblings a symmetric expansion did not run
		}
	}
	if opt.Model == Fluid {
		e.fl = newFluid(r, e.q)
		e.fl.noteFlows = e.merging && !opt.ApproxMergeChannels
		if e.fl.noteFlows {
			e.countShapes()
		}
		if e.price != nil && e.ex == nil {
			e.share = newCollShare(e.price, r.DirLinks())
		}
	} else {
		e.fl = newPrivateFluid(r, e.q)
		e.steps = stepsOf(in)
	}
	e.load = func(l route.DirLink) float64 {
		if e.fl.private {
			c, ok := e.fl.copies[linkCopy{e.key, l}]
			if !ok {
				return 0
			}
			l = c
		}
		return e.fl.load(l)
	}
	if opt.verify != nil {
		fl := e.fl
		fl.verify = func() { opt.verify(fl) }
	}
	if opt.Faults.active() {
		if err := e.scheduleFaults(); err != nil {
			return e.res, err
		}
	}
	for _, i := range in.DAG.Ready() {
		if err := e.release(i); err != nil {
			return e.res, err
		}
	}
	e.fl.update(0)
	if len(e.fl.inexactFlows) > 0 {
		e.noteInexact()
	}
	for e.q.Len() > 0 {
		// Handle every event of this instant before recomputing rates once:
		// a ring step or an incast releases many flows at the same time.
		// The instant's first event sets it; PopBefore pops the others in
		// one pass over the wheel (peeking, then popping, scanned for the
		// bucket twice an event, a tenth of the calendar's cost).
		ev := e.q.Pop()
		e.now = ev.At
		for ok := true; ok; ev, ok = e.nextNow() {
			e.readAhead()
			switch ev.Kind {
			case evComplete:
				if err := e.complete(ev.Target, des.Time(ev.Arg)); err != nil {
					return e.res, err
				}
			case evSend:
				if err := e.send(ev.Target, false); err != nil {
					return e.res, err
				}
			case evStart:
				if err := e.send(ev.Target, true); err != nil {
					return e.res, err
				}
			case evCollDone:
				if e.share.done(e, ev.Target, ev.Arg) {
					if err := e.complete(ev.Target, e.in.Flow(ev.Target).Lat); err != nil {
						return e.res, err
					}
				}
			case evLinkDown:
				if err := e.linkDown(ev.Target); err != nil {
					return e.res, err
				}
				e.busbwFaultNote()
			case evScale:
				if err := e.linkScale(ev.Target, e.opt.Faults.Scale[ev.Arg].Factor); err != nil {
					return e.res, err
				}
				e.busbwFaultNote()
			case evDrained:
				if f := e.fl; f.slots[ev.Target].gen == ev.Arg {
					s := &f.slots[ev.Target]
					e.after(s.lat, evComplete, s.flow, int64(s.ideal))
					flow := s.flow
					if flow >= e.n {
						e.ex.Prefetch(flow) // sent reads it: load it while remove works
					}
					f.remove(ev.Target)
					if err := e.sent(flow); err != nil {
						return e.res, err
					}
				} else {
					f.repush(ev.Target, ev.Arg)
				}
			}
		}
		e.fl.update(e.now)
		if len(e.fl.inexactFlows) > 0 {
			e.noteInexact()
		}
		if e.settled() {
			return e.res, nil // RunResults runs again: nothing of this run is kept
		}
	}
	if e.run.Done() != n {
		i, _ := e.run.Stuck()
		return e.res, in.FlowError(i, "deps", fmt.Errorf("flow %d never became ready", in.DAG.ID(i)))
	}
	e.res.Flows = n
	if e.ex != nil {
		e.res.Mirrored, _ = e.ex.Mirrored()
		e.res.Expanded, e.res.PeakExpanded = e.ex.Made(), e.ex.Peak()
		e.res.LockstepNodes, e.res.LockstepClasses, e.res.LockstepMembers = e.ex.Lockstepped()
		e.res.ReusedNodes, e.res.ReusedFlows = e.ex.Reused()
		e.res.ApproxReusedNodes, e.res.ApproxReusedFlows, e.res.ApproxWaited = e.ex.ApproxReused()
		e.res.RailNodes, e.res.RailFlows = e.ex.RailMirrored()
		e.res.RotNodes, e.res.RotFlows = e.ex.PodRotated()
		e.res.ApproxIdle, e.res.ApproxMet = e.ex.IdleReused()
	}
	if e.merging {
		e.res.ChannelsMerged = e.ex.ChannelsMerged()
		e.res.MergeInexact = e.fl.inexacts
	}
	e.res.Events = e.q.Pushed()
	e.res.Recomputes = e.fl.recomputes
	e.res.Failed, e.res.FailedBytes = e.fail.count, e.fail.lost
	return e.res, e.failed()
}

// steps maps each collective record to the first record of its workload
// step. At flow granularity every group running a step has a record of
// its own (the DP AllReduce of a layer on each of a stage's DP groups),
// yet they run at once as one collective, as a COLL node stands for them
// all; busbw, which keeps collectives apart, shares links within a step.
type steps map[int64]int64

// stepKey is what makes records one step.
type stepKey struct {
	label, op, phase, groupType string
	size                        int64
	layer, microbatch, stage    int32
}

func stepsOf(in *flowset.Set) steps {
	first := map[stepKey]int64{}
	s := steps{}
	ids := slices.Sorted(maps.Keys(in.Collectives))
	for _, id := range ids {
		c := in.Collectives[id]
		k := stepKey{label: c.Label, op: c.Op, phase: c.Phase, size: c.Size, layer: c.Layer, microbatch: c.Microbatch, stage: c.Stage}
		if g := in.Groups[c.Group]; g != nil {
			k.groupType = g.Type
		}
		f, ok := first[k]
		if !ok {
			f = id
			first[k] = id
		}
		if f != id {
			s[id] = f
		}
	}
	return s
}

// of is collective id's step (its first record).
func (s steps) of(id int64) int64 {
	if f, ok := s[id]; ok {
		return f
	}
	return id
}

// nextNow pops the next event of the current instant, if any.
func (e *engine) nextNow() (des.Event, bool) {
	if e.now == des.Never { // no time after it to pop before
		if e.q.Len() > 0 && e.q.PeekTime() == des.Never {
			return e.q.Pop(), true
		}
		return des.Event{}, false
	}
	if ev := e.q.PopBefore(e.now + 1); ev != nil {
		return *ev, true
	}
	return des.Event{}, false
}

// readAhead starts loading what the next event reads first: at 1024 GPUs
// the held flows and the solver's slots are no longer in cache, and the
// load overlaps this event's work instead of stalling the next one.
func (e *engine) readAhead() {
	k, t, ok := e.q.PeekNear()
	switch {
	case !ok:
	case k == evDrained:
		s := &e.fl.slots[t] // its three lines: all are read
		prefetch.Value(s)
		prefetch.Line(unsafe.Pointer(&s.gen))
	case e.ex != nil && t >= e.n:
		e.ex.Prefetch(t)
	}
}

// flow is flow i, of the stream or expanded.
func (e *engine) flow(i int32) *flowset.Flow {
	if i >= e.n {
		return e.ex.Flow(i)
	}
	return e.in.Flow(i)
}

// flowError names flow i in an error: its stream record, or for an
// expanded flow its COLL node's.
func (e *engine) flowError(i int32, field string, err error) error {
	if i >= e.n {
		return e.ex.Error(i, err)
	}
	return e.in.FlowError(i, field, err)
}

// setStart records that flow i is released now, growing the column over
// the expanded flows' slots as the store makes them.
func (e *engine) setStart(i int32) {
	if int(i) >= len(e.start) {
		e.start = append(e.start, make([]des.Time, int(e.n)+e.ex.Slots()-len(e.start))...)
	}
	e.start[i] = e.now
}

// release starts flow i now.
func (e *engine) release(i int32) error {
	if i >= e.n {
		ready, err := e.ex.Started(i)
		if err != nil {
			return err
		}
		for _, j := range ready {
			if err := e.release(j); err != nil {
				return err
			}
		}
	}
	f := e.flow(i)
	e.setStart(i)
	size := f.Size
	switch f.Kind {
	case flowset.Delay:
		e.after(des.Time(size), evComplete, i, 0)
		return nil
	case flowset.Join:
		e.after(0, evComplete, i, 0)
		return nil
	case flowset.Coll: // collective granularity: NCCL's model time, shared under fluid
		if e.ex != nil {
			if e.links != nil && e.sym.Alone(i) {
				run, _ := e.sym.Run(i)
				if err := e.price.addSiblings(e.links, f, run); err != nil {
					return e.flowError(i, "collective", err)
				}
			}
			return e.expand(i)
		}
		if e.fail.down > 0 {
			if failed, err := e.collFails(i); failed || err != nil {
				return err
			}
		}
		if e.links != nil {
			e.price.addLoads(e.links, f)
		}
		if e.share != nil {
			e.share.start(e, i)
			return nil
		}
		e.after(e.price.alone(f), evComplete, i, int64(f.Lat))
		return nil
	}
	if e.foreign && i < e.n {
		// A reused node the transfer meets runs its groups from now.
		met, err := e.ex.Foreign(f.Src, f.Dst, true)
		if err != nil {
			return err
		}
		for _, j := range met {
			if err := e.release(j); err != nil {
				return err
			}
		}
	}
	if e.opt.SendLat > 0 {
		e.after(e.opt.SendLat, evSend, i, 0)
		return nil
	}
	return e.send(i, false)
}

// send puts a released transfer on its path, after its step latency less
// the path's own (started: that wait is over).
func (e *engine) send(i int32, started bool) error {
	f := e.flow(i)
	size := f.Size
	var err error
	// Every backend hashes a transfer as the packet backend's first queue
	// pair, so a seed routes it the same way in each.
	nm := e.memberCount(i)
	var kept *union
	if nm > 0 {
		kept = e.keptUnion(i, f)
	}
	if kept != nil { // the connection's path, routed when its union was kept
		e.path = append(e.path[:0], kept.path...)
	} else {
		hash := route.QPHash(f.Src, f.Dst, e.opt.ECMPKey.ID(f.ID, f.Channel), 0, e.opt.Seed)
		e.path, err = e.r.AppendPathPort(e.path[:0], f.Src, f.Dst, hash, int(f.Port))
	}
	if err != nil {
		if e.fail.down > 0 && errors.Is(err, route.ErrNoPath) {
			return e.failFlow(i, 0, 0, err)
		}
		return e.flowError(i, "dst", fmt.Errorf("flow %d: %v", f.ID, err))
	}
	lat := e.r.Latency(e.path)
	wait := f.Lat - lat
	if e.replayed != nil && e.replayed[f.Coll] {
		wait = f.Lat
	}
	if wait > 0 && !started {
		e.after(wait, evStart, i, 0)
		return nil
	}
	// The connection's pace (flowset.Pacer): not before the transport can
	// start another step on it.
	if t := e.pace.Take(i); t > e.now {
		e.after(t-e.now, evStart, i, 0)
		return nil
	}
	e.pace.Began(i, f, e.now)
	if nm > 0 { // approx-lockstep: f carries its siblings' flows
		if err := e.lockstepUnion(i, f, kept); err != nil {
			return e.flowError(i, "dst", err)
		}
	}
	path, w := e.path, []float32(nil)
	bottleneck := e.r.Bottleneck(path)
	key := e.steps.of(f.Coll) // busbw's private links: one set per workload step
	if nm > 0 && e.merging {
		// The merged channels' flows (chanmerge.go): the bottleneck stays
		// the flow's own, as each member's.
		path = e.lockLinks
		if len(e.lockW) > 0 {
			w = e.lockW
		}
	} else if nm > 0 {
		path = e.lockLinks
		if len(e.lockW) > 0 {
			w, bottleneck = e.lockW, math.Inf(1)
			for k, l := range path {
				if w[k] > 0 { // soft ones never limit it
					bottleneck = min(bottleneck, e.r.Bandwidth(l)/float64(w[k]))
				}
			}
		}
	} else if !e.opt.Routing.Hashed() && size > 0 && len(path) > 0 {
		e.key = key
		if path, w, err = e.sprayed(f); err != nil {
			if e.fail.down > 0 && errors.Is(err, route.ErrNoPath) {
				return e.failFlow(i, 0, 0, err)
			}
			return e.flowError(i, "dst", fmt.Errorf("flow %d: %v", f.ID, err))
		}
		if w != nil {
			bottleneck = math.Inf(1)
			for k, l := range path {
				bottleneck = min(bottleneck, e.r.Bandwidth(l)/float64(w[k]))
			}
		}
	}
	ideal := lat.Add(des.TransferTime(size, bottleneck))
	idealFCT := ideal.Add(e.now - e.start[i]) // send and step latency count in the flow's time
	if size == 0 || len(path) == 0 {
		e.after(ideal, evComplete, i, int64(idealFCT))
		return nil
	}
	if e.links != nil {
		if nm > 0 {
			w = e.lockstepLoads()
		}
		e.links.AddPath(f, path, w, size)
		if i < e.n && e.price != nil { // a stage's first rank stands for the others
			if err := e.price.addFlowSiblings(e.links, f); err != nil {
				return e.flowError(i, "src", err)
			}
		}
	}
	if e.fl.private {
		path = e.fl.privatePath(key, path)
	}
	if e.rot != nil && i >= e.n && e.ex.Rotated(i) {
		path, w = e.rotate(path, w)
	}
	id := e.fl.add(i, path, w, size, lat, idealFCT, e.now)
	if e.merging && nm > 0 {
		// A merged flow needs the weighted freeze (it finds the solve
		// inexact where no link is weighted full); freezeUnit runs only
		// while no sums of weights are kept.
		if e.fl.wsum == nil {
			e.fl.weigh()
		}
		e.fl.slots[id].full = float32(1 + nm)
	}
	return nil
}

// sprayed is transfer f's bytes split evenly over its equal-cost paths
// (spray), or over the least loaded of them at each hop (adaptive): every
// link they cross with its share. A flow without a choice keeps its one
// path (w nil), as cheap as under ecmp.
func (e *engine) sprayed(f *flowset.Flow) (path []route.DirLink, w []float32, err error) {
	if e.spreadAt == nil {
		e.spreadAt = make([]float64, e.r.DirLinks())
	}
	e.spread = e.spread[:0]
	var load func(route.DirLink) float64
	if e.opt.Routing == route.Adaptive {
		load = e.load
	}
	err = e.r.SpreadLeast(f.Src, f.Dst, int(f.Port), 1, load, func(l route.DirLink, x float64) {
		if e.spreadAt[l] == 0 {
			e.spread = append(e.spread, l)
		}
		e.spreadAt[l] += x
	})
	slices.Sort(e.spread)
	e.weights = e.weights[:0]
	for _, l := range e.spread { // the weights, and the scratch cleared
		e.weights = append(e.weights, float32(min(e.spreadAt[l], 1)))
		e.spreadAt[l] = 0
	}
	if err != nil {
		return nil, nil, err
	}
	if len(e.spread) == len(e.path) {
		return e.path, nil, nil
	}
	return e.spread, e.weights, nil
}

// sent starts, once flow i's last byte has left, the dependants that send
// from its source: the next chunk on a connection goes out back to back,
// as NCCL posts a connection's steps, rather than after this one lands.
func (e *engine) sent(i int32) error {
	e.sentSrc = e.flow(i).Src
	e.pace.Sent(i, e.flow(i))
	if i >= e.n {
		e.ready = e.ex.Release(i, expand.OnSent, e.ready[:0])
	} else {
		e.ready = e.run.ReleaseEarly(i, e.sameSrc, e.ready[:0])
	}
	e.pace.Clear()
	for _, j := range e.ready {
		if err := e.release(j); err != nil {
			return err
		}
	}
	return nil
}

// complete ends flow i now: its trace row, then the flows it releases.
func (e *engine) complete(i int32, ideal des.Time) error {
	if i >= e.n {
		return e.completeExpanded(i)
	}
	failed := e.fail.flows != nil && e.fail.flows[i]
	if err := e.emit(i, flowset.Result{Start: e.start[i], End: e.now, Ideal: ideal, Failed: failed}); err != nil {
		return err
	}
	if f := e.in.Flow(i); f.Kind == flowset.Transfer || f.Kind == flowset.Coll {
		e.res.Bytes += f.Size
		if e.foreign && f.Kind == flowset.Transfer {
			if _, err := e.ex.Foreign(f.Src, f.Dst, false); err != nil {
				return err
			}
		}
	}
	e.res.End = e.now
	if e.shapeLeft != nil && e.in.Flow(i).Kind == flowset.Coll {
		e.shapeEnded(i)
	}
	e.ready = e.run.Complete(i, e.ready[:0])
	if p := e.opt.Progress; p != nil && e.run.Done()%progressEvery == 0 {
		p(e.run.Done(), e.in.DAG.Len(), e.now)
	}
	for _, j := range e.ready {
		if err := e.release(j); err != nil {
			return err
		}
	}
	return nil
}

// expand runs COLL node i as its flows; one that moves nothing ends now.
func (e *engine) expand(i int32) error {
	ready, err := e.ex.Expand(i)
	if err != nil {
		return err
	}
	met := e.ex.TakeMet() // reused nodes this one meets run from now
	if len(ready) == 0 && !e.ex.Waits() {
		e.after(0, evComplete, i, int64(e.in.Flow(i).Lat))
	}
	for _, j := range ready {
		if err := e.release(j); err != nil {
			return err
		}
	}
	for _, j := range met {
		if err := e.release(j); err != nil {
			return err
		}
	}
	return nil
}

// completeExpanded ends expanded flow i now: the flows it releases, then
// its COLL node if it was the last of its expansion (ideal: the node's
// model time, as unexpanded).
func (e *engine) completeExpanded(i int32) error {
	var coll int32
	e.ready, coll = e.ex.Complete(i, e.ready[:0])
	for _, j := range e.ready {
		if err := e.release(j); err != nil {
			return err
		}
	}
	if coll < 0 {
		return nil
	}
	return e.complete(coll, e.in.Flow(coll).Lat)
}
