package analytical

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/flowset"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// expansions runs COLL nodes as their flows (Options.Expand): when a COLL
// node is released, its collective is cut into the flows flow granularity
// would have held, on its group and every sibling group
// (collective.Expander), and those flows run like any other; the node
// completes with the last of them. A ring or NVLS channel's flows are
// made a row at a time, the next row when the first flow of the row before
// it starts (every dep of a row is in the row before it), and a flow's slot
// is freed when it completes, so memory follows the flows in flight, not
// the workload.
//
// Expanded flows are indexed after the stream's: flow i >= base is slot
// i - base. They write no trace rows; their COLL node's row spans them.
type expansions struct {
	x     *collective.Expander
	in    *flowset.Set
	base  int32
	flows []dynFlow
	// waiting is, per slot, the flow's deps not complete yet (-1 once
	// done): apart from the flows, because completing a flow counts down
	// its dependants', and 16 counters share a cache line where one
	// dynFlow takes two.
	waiting []int32
	free    []int32
	sets    []expSet
	free2   []int32 // free sets
	groups  map[int64][][]int32
	serial  int64
	ready   []int32 // scratch: made ready by the flows being made
	// The run of equal dep lists being made (shared).
	runSet  int32
	runDeps []int64
	runJoin int32

	inFlight, peak, total int64
	limit, slotCap        int64 // the memory budget; slots' capacity in all sets
}

type dynFlow struct {
	flowset.Flow
	set      int32 // its expansion
	gen, row int32 // its ring or NVLS channel (-1: none) and row there
	// Dependants. Those that are transfers from the same source are
	// released early (sent): the first is early (slot + 1, 0 for none),
	// any other is in succ as slot<<1 | 1 (-1 once released), the rest
	// as slot<<1. Deciding that once, and keeping the usual one (the next
	// chunk on the connection) in the flow itself, spares the walk of the
	// dependants each time a flow's last byte leaves: at 1024 GPUs those
	// walks missed the cache.
	early     int32
	moreEarly bool
	hidden    bool // a join of shared deps (shared), no flow of the stream's
	succ      []int32
}

// expSet is one COLL node's expansion.
type expSet struct {
	coll   int32 // the COLL node's flow index
	left   int32 // flows made and not complete
	p      *collective.Expansion
	idBase int64 // added to expansion ids: distinct ECMP hashes per node
	key    int64 // private-link key of its first group (busbw)
	ports  map[portKey]uint8
	next   map[int32]uint8
	// slots maps a flow's id in the expansion to its slot + 1 while it
	// is made and unfinished, 0 otherwise: a dep at 0 has finished. An
	// array, not a map: a 1024-GPU iteration looks up a billion deps.
	slots []int32
	emit  func(collective.Origin, *stream.Flow) error
}

type portKey struct{ src, dst, ch int32 }

func newExpansions(in *flowset.Set, limit int64) *expansions {
	return &expansions{x: collective.NewExpander(in.Topology), in: in, base: int32(in.DAG.Len()), limit: limit,
		groups: map[int64][][]int32{}, runSet: -1}
}

func (x *expansions) flow(i int32) *dynFlow { return &x.flows[i-x.base] }

// groupsOf is a group's ranks, then its siblings'.
func (x *expansions) groupsOf(id int64) ([][]int32, error) {
	if g, ok := x.groups[id]; ok {
		return g, nil
	}
	g := x.in.Groups[id]
	if g == nil {
		return nil, fmt.Errorf("no group %d", id)
	}
	out := [][]int32{g.Ranks}
	for _, s := range g.Siblings {
		out = append(out, x.in.Groups[s].Ranks) // the reader checked they exist
	}
	x.groups[id] = out
	return out, nil
}

// expand starts COLL node i's expansion and returns the flows ready now
// (a scratch slice, valid until the next call); none when the collective
// moves nothing, which the caller completes at once.
func (x *expansions) expand(i int32) ([]int32, error) {
	f := x.in.Flow(i)
	rec := x.in.Collectives[f.Coll] // the reader checked every COLL has one
	groups, err := x.groupsOf(rec.Group)
	if err != nil {
		return nil, x.in.FlowError(i, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(i), err))
	}
	var s int32
	if n := len(x.free2); n > 0 {
		s, x.free2 = x.free2[n-1], x.free2[:n-1]
	} else {
		s = int32(len(x.sets))
		x.sets = append(x.sets, expSet{ports: map[portKey]uint8{}, next: map[int32]uint8{}})
		x.sets[s].emit = func(o collective.Origin, sf *stream.Flow) error { return x.made(s, o, sf) }
	}
	x.serial++
	set := &x.sets[s]
	set.coll, set.left, set.idBase, set.key = i, 0, x.in.DAG.ID(i)<<32, -2-(x.serial<<20)
	clear(set.ports)
	clear(set.next)
	x.ready = x.ready[:0]
	x.runSet = -1
	p, err := x.x.Start(rec, groups, set.emit)
	if err != nil {
		return nil, x.in.FlowError(i, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(i), err))
	}
	x.sets[s].p = p
	if x.sets[s].left == 0 {
		x.free2 = append(x.free2, s)
	}
	return x.ready, nil
}

// made takes in flow sf of set s's expansion: a slot, its deps that have
// not finished, its NIC port; ready ones go to x.ready.
func (x *expansions) made(s int32, o collective.Origin, sf *stream.Flow) error {
	slot, err := x.alloc()
	if err != nil {
		return err
	}
	set := &x.sets[s]
	t := x.in.Topology
	gpus := int32(t.GPUs)
	d := &x.flows[slot]
	d.Flow = flowset.Flow{ID: set.idBase + sf.ID, Coll: set.key - int64(o.Group), Size: sf.Size, Lat: des.Time(sf.DelayPs),
		Src: sf.Src, Dst: sf.Dst, Chunk: sf.Chunk, Channel: sf.Channel, Kind: flowset.Transfer}
	switch {
	case sf.ConnType == stream.ConnDelay && sf.DelayPs > 0:
		d.Kind, d.Size, d.Lat = flowset.Delay, sf.DelayPs, 0
	case sf.ConnType == stream.ConnDelay:
		d.Kind = flowset.Join
	case sf.Src < gpus && sf.Dst < gpus && t.Nodes[sf.Src].Server != t.Nodes[sf.Dst].Server:
		// The connection's index among its source's connections to
		// other servers, as flowset numbers them at flow granularity.
		k := portKey{sf.Src, sf.Dst, sf.Channel}
		p, ok := set.ports[k]
		if !ok {
			p = set.next[sf.Src]
			set.next[sf.Src]++
			set.ports[k] = p
		}
		d.Port = p
	}
	x.waiting[slot] = 0
	d.set, d.gen, d.row, d.succ, d.early, d.moreEarly, d.hidden = s, o.Gen, o.Row, d.succ[:0], 0, false, false
	deps := sf.Deps
	if j := x.shared(s, slot, deps); j >= 0 {
		x.link(j, slot)
		deps = deps[len(deps)-1:]
	}
	for _, dep := range deps {
		if p := set.slots[dep] - 1; p >= 0 {
			x.link(p, slot)
		}
	}
	if n := int64(len(set.slots)); n <= sf.ID {
		if c := int64(cap(set.slots)); c <= sf.ID {
			if err := x.fits(max(sf.ID+1, 2*c) - c); err != nil {
				return err
			}
		}
		c0 := int64(cap(set.slots))
		set.slots = append(set.slots, make([]int32, sf.ID+1-n)...)
		x.slotCap += int64(cap(set.slots)) - c0
	}
	set.slots[sf.ID] = slot + 1
	if x.waiting[slot] == 0 && o.Gen >= 0 && o.Row > 0 {
		// Its row came too late: it would start now, not when its deps
		// finished. No cut makes such a row; refuse rather than mistime.
		return fmt.Errorf("flow %d of channel row %d was made after its deps finished", sf.ID, o.Row)
	}
	if x.waiting[slot] == 0 {
		x.ready = append(x.ready, slot+x.base)
	}
	set.left++
	x.total++
	x.inFlight++
	x.peak = max(x.peak, x.inFlight)
	return nil
}

// link makes the flow in slot d wait for the one in slot p; a transfer
// from p's source is released early (sent).
func (x *expansions) link(p, d int32) {
	f, q := &x.flows[d], &x.flows[p]
	x.waiting[d]++
	switch {
	case f.Kind != flowset.Transfer || q.Src != f.Src:
		q.succ = append(q.succ, d<<1)
	case q.early == 0:
		q.early = d + 1
	default:
		q.succ, q.moreEarly = append(q.succ, d<<1|1), true
	}
}

// minShared is the dep list length from which flows made one after the
// other with the same deps but their last wait on a hidden join instead.
const minShared = 5

// shared returns the hidden join the flow in slot d (set s) should wait
// on instead of all its deps but the last, or -1. An NVLS chunk's n
// reductions each wait for all n uploads (and the previous chunk's
// reduction on their connection, the last dep), and its n downloads for
// all n multicasts: 2n^2 edges a chunk, which at 1024 GPUs were most of
// the work of expanding. The first flow of a run of such dep lists keeps
// its own edges; from the second on, they share a join of the common
// deps (n + 2n edges). A join ends the instant its last dep does, and
// releases its dependants in that same instant, so no time changes. A
// flow with a dep it would start early from (a transfer from the same
// source, engine.sent) keeps its own edges.
func (x *expansions) shared(s, d int32, deps []int64) int32 {
	if len(deps) < minShared {
		return -1
	}
	set, f := &x.sets[s], &x.flows[d]
	deps = deps[:len(deps)-1]
	if s != x.runSet || !slices.Equal(deps, x.runDeps) {
		x.runSet, x.runDeps, x.runJoin = s, append(x.runDeps[:0], deps...), -1
		return -1
	}
	if f.Kind == flowset.Transfer {
		for _, dep := range deps {
			if p := set.slots[dep] - 1; p >= 0 && x.flows[p].Src == f.Src {
				return -1
			}
		}
	}
	if x.runJoin < 0 {
		live := 0
		for _, dep := range deps {
			if set.slots[dep] > 0 {
				live++
			}
		}
		if live == 0 {
			return -1 // nothing to wait for: the flow's own check decides
		}
		j, err := x.alloc()
		if err != nil {
			return -1 // the flow keeps its own edges
		}
		f = &x.flows[d] // alloc may have moved the flows
		jf := &x.flows[j]
		jf.Flow = flowset.Flow{ID: set.idBase - 1, Coll: f.Coll, Src: f.Src, Dst: f.Src, Kind: flowset.Join}
		x.waiting[j] = 0
		jf.set, jf.gen, jf.row, jf.succ, jf.early, jf.moreEarly, jf.hidden = s, -1, f.row, jf.succ[:0], 0, false, true
		for _, dep := range deps {
			if p := set.slots[dep] - 1; p >= 0 {
				x.link(p, j)
			}
		}
		set.left++
		x.inFlight++
		x.runJoin = j
	}
	return x.runJoin
}

// started makes, once expanded flow i starts, the next row of its ring
// channel if that is not made yet: the row's flows wait on this row's.
// It returns flows made ready (normally none) in a new slice.
func (x *expansions) started(i int32) ([]int32, error) {
	d := x.flow(i)
	if d.gen < 0 {
		return nil, nil
	}
	set := &x.sets[d.set]
	gen, row := int(d.gen), d.row
	// The caller may be walking x.ready (expand's result): what rows made
	// now make ready is appended past its end, copied out, and cut off.
	mark := len(x.ready)
	defer func() { x.ready = x.ready[:mark] }()
	x.runSet = -1
	for set.p.Rows(gen) <= row+1 {
		more, err := set.p.Row(gen)
		if err != nil {
			return nil, x.in.FlowError(set.coll, "collective", fmt.Errorf("COLL node %d: %v", x.in.DAG.ID(set.coll), err))
		}
		if !more {
			break
		}
	}
	if len(x.ready) == mark {
		return nil, nil
	}
	return append([]int32(nil), x.ready[mark:]...), nil
}

// maxExpanded bounds the expanded flows held at once: their slots are
// kept doubled in int32 dependant lists.
const maxExpanded = 1 << 30

func (x *expansions) alloc() (int32, error) {
	if n := len(x.free); n > 0 {
		s := x.free[n-1]
		x.free = x.free[:n-1]
		return s, nil
	}
	if limit := min(maxExpanded, math.MaxInt32-int64(x.base)); int64(len(x.flows)) >= limit {
		return 0, fmt.Errorf("more than %d flows held at once", limit)
	}
	if err := x.fits(1); err != nil {
		return 0, err
	}
	x.flows = append(x.flows, dynFlow{})
	x.waiting = append(x.waiting, 0)
	return int32(len(x.flows) - 1), nil
}

// heldFlowBytes is what a held expanded flow costs: its record, its
// dependants (two or three) and its share of the fluid model's state.
const heldFlowBytes = int64(unsafe.Sizeof(dynFlow{})) + 4 + 64

// fits refuses, before it is made, the table growth that would take the
// expansions past the run's memory budget (Options.MemoryLimit): the held
// flows, and 4 bytes per flow of every collective in flight (slots).
func (x *expansions) fits(newSlots int64) error {
	if x.limit <= 0 {
		return nil
	}
	held := int64(len(x.flows)+1) * heldFlowBytes
	if need := held + 4*(x.slotCap+newSlots); need > x.limit {
		return fmt.Errorf("the expanded flows held at once (%d) would take about %s, beyond the %s this run may use (FABRICSIM_MEMORY, or 90%% of the available memory); run without --expand (the collective-level model), on fewer GPUs, or decompose with a smaller --max-chunks (fewer, larger chunks)",
			len(x.flows)+1, units.HumanSize(need), units.HumanSize(x.limit))
	}
	return nil
}

// complete marks expanded flow i done, appends the flows it releases to
// out, frees its slot, and returns the COLL node whose expansion it
// ended (-1 if none).
func (x *expansions) complete(i int32, out []int32) ([]int32, int32) {
	slot := i - x.base
	d := &x.flows[slot]
	if x.waiting[slot] != 0 {
		panic(fmt.Sprintf("analytical: expanded flow %d completed twice or before its deps", d.ID))
	}
	x.waiting[slot] = -1
	set := &x.sets[d.set]
	if !d.hidden {
		set.slots[d.ID-set.idBase] = 0
	}
	if d.early > 0 {
		out = x.satisfy(d.early-1, out)
	}
	for _, e := range d.succ {
		if e < 0 {
			continue // released early
		}
		out = x.satisfy(e>>1, out)
	}
	x.free = append(x.free, slot)
	x.inFlight--
	if set.left--; set.left > 0 {
		return out, -1
	}
	x.free2 = append(x.free2, d.set)
	set.p, set.slots = nil, set.slots[:0] // all 0 again: every flow finished
	return out, set.coll
}

// releaseEarly satisfies, before expanded flow i completes, its
// dependants that send from its source (DAG.ReleaseEarly with the
// engine's sameSrc rule, decided when they were made) and appends those
// it makes ready to out.
func (x *expansions) releaseEarly(i int32, out []int32) []int32 {
	d := &x.flows[i-x.base]
	if d.early > 0 {
		out = x.satisfy(d.early-1, out)
		d.early = 0
	}
	if !d.moreEarly {
		return out
	}
	d.moreEarly = false
	for k, e := range d.succ {
		if e >= 0 && e&1 == 1 {
			d.succ[k] = -1
			out = x.satisfy(e>>1, out)
		}
	}
	return out
}

// satisfy counts one dep of the flow in slot s done; out gets it when it
// was the last.
func (x *expansions) satisfy(s int32, out []int32) []int32 {
	w := &x.waiting[s]
	if *w--; *w == 0 {
		out = append(out, s+x.base)
	}
	return out
}
