// Package dag is the dependency executor every backend shares: it releases
// a flow (or delay node) once all of its deps are done.
//
// Flows carry arbitrary int64 ids and may name deps that appear later in the
// input. Build resolves ids to dense int32 indexes (the order flows were
// added), checks that every dep names a flow and that no cycle can leave a
// flow waiting forever, so a backend learns of bad input before it simulates
// anything. After that, Complete is a few array operations per successor.
package dag

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"

	"github.com/fabricsim/fabricsim/internal/grow"
)

// Error locates a problem in the DAG: the flow's id and its index (the
// order it was added, which is its position among the stream's flows).
type Error struct {
	FlowID int64
	Index  int32
	Field  string // "id" or "deps"
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("flow %d: %s", e.FlowID, e.Msg) }

// Builder collects flows one by one without keeping their dep slices.
type Builder struct {
	// ids is nil while they are 0, 1, 2, ... (ordered): the index is the
	// id, and the stream's flows keep their ids anyway (8 bytes a flow).
	ids     []int64
	n       int
	depOff  []int32   // deps of flow i are the depOff[i]..depOff[i+1]-th dep ids
	depIDs  [][]int64 // in chunks of depChunk: growing never copies them
	nDeps   int
	ordered bool // ids so far are 0, 1, 2, ...
}

// depChunk is the size of a chunk of dep ids (8 MiB). Chunks spare the
// copies (and, on sandboxed kernels, the page faults) a doubling slice of
// tens of millions of ids costs.
const depChunk = 1 << 20

func (b *Builder) depID(k int32) int64 { return b.depIDs[k/depChunk][k%depChunk] }

// NewBuilder returns a Builder with room for n flows.
func NewBuilder(n int) *Builder {
	return &Builder{depOff: append(make([]int32, 0, n+1), 0), ordered: true}
}

// Add appends a flow; deps is copied. The flow's index is the number of
// flows added before it.
func (b *Builder) Add(id int64, deps []int64) error {
	if b.n >= math.MaxInt32 || b.nDeps+len(deps) >= math.MaxInt32 {
		return &Error{FlowID: id, Index: int32(b.n), Msg: "too many flows or deps (limit 2^31)"}
	}
	if b.ordered && id != int64(b.n) {
		b.ordered = false
		b.ids = make([]int64, b.n, max(2*b.n, 64))
		for i := range b.ids {
			b.ids[i] = int64(i)
		}
	}
	if !b.ordered {
		b.ids = grow.Append(b.ids, id)
	}
	b.n++
	for len(deps) > 0 {
		last := len(b.depIDs) - 1
		switch {
		case last < 0:
			b.depIDs = append(b.depIDs, make([]int64, 0, 256))
			last = 0
		case len(b.depIDs[last]) < cap(b.depIDs[last]):
		case cap(b.depIDs[last]) < depChunk: // the first chunk doubles up to depChunk
			c := make([]int64, len(b.depIDs[last]), min(2*cap(b.depIDs[last]), depChunk))
			copy(c, b.depIDs[last])
			b.depIDs[last] = c
		default:
			b.depIDs = append(b.depIDs, make([]int64, 0, depChunk))
			last++
		}
		c := b.depIDs[last]
		n := min(len(deps), cap(c)-len(c))
		b.depIDs[last] = append(c, deps[:n]...)
		deps = deps[n:]
		b.nDeps += n
	}
	b.depOff = grow.Append(b.depOff, int32(b.nDeps))
	return nil
}

// Len is the number of flows added.
func (b *Builder) Len() int { return b.n }

// DAG is the resolved dependency graph. It is never written once built:
// an execution's state lives in a Run (NewRun), so that several runs, of
// one backend or of several, may execute the same DAG one after another.
type DAG struct {
	ids     []int64 // nil when flow i's id is i
	n       int
	lookup  idIndex
	depOff  []int32
	deps    []int32 // dep indexes, parallel to the input's dep lists
	succOff []int32 // successors of i are succ[succOff[i]:succOff[i+1]]
	succ    []int32
	ready   []int32 // initial ready set
}

// Run is one execution of a DAG: which flows are done and which deps
// they still wait on. A backend makes one per simulation.
type Run struct {
	d *DAG
	// nodes is per flow what Complete reads and writes, in one place:
	// flows complete in simulated-time order, which the input's order
	// need not follow (a pattern lists each source's messages in turn),
	// so each array Complete touched cost a cache miss a flow.
	nodes []node
	early []bool // per successor edge: released by ReleaseEarly
	// done counts completions from one goroutine; once Concurrent,
	// nDone counts them instead, atomically: a partitioned simulation
	// completes flows from several goroutines (each flow's own state is
	// touched by one at a time). An atomic add is a barrier that waits
	// out the cache miss on the flow's node, which an ordinary add
	// overlaps with the work that follows.
	done       int64
	concurrent bool
	nDone      atomic.Int64
}

// node is a flow's state in a Run with its successors: the successor
// itself when it has one (a delay node releasing its message, a step of a
// chain), which spares reading the successor list.
type node struct {
	waiting int32 // deps not yet done; -1 once the flow is done
	nSucc   int32
	succ    int32 // the successor when nSucc == 1, else the first's index in DAG.succ
}

// idIndex maps ids to indexes: identity when ids are 0..N-1 in order, a
// dense offset table when they span a small range, a map otherwise.
type idIndex struct {
	kind  uint8 // 0 identity, 1 table, 2 map
	base  int64
	table []int32 // -1 for an unused id
	m     map[int64]int32
}

func (x *idIndex) get(id int64) (int32, bool) {
	switch x.kind {
	case 0:
		if id >= 0 && id < x.base {
			return int32(id), true
		}
		return 0, false
	case 1:
		o := id - x.base
		if o < 0 || o >= int64(len(x.table)) || x.table[o] < 0 {
			return 0, false
		}
		return x.table[o], true
	}
	i, ok := x.m[id]
	return i, ok
}

// Build resolves the Builder's flows into a DAG. It fails on a duplicate id,
// a dep naming no flow, and on a dependency cycle (naming a flow on it).
// The Builder must not be used afterwards.
func (b *Builder) Build() (*DAG, error) {
	n := b.n
	d := &DAG{ids: b.ids, n: n, depOff: b.depOff}
	if err := d.index(b.ordered); err != nil {
		return nil, err
	}
	d.deps = make([]int32, b.nDeps)
	waiting := make([]int32, n)
	d.succOff = make([]int32, n+1)
	// Deps that all name earlier flows (as every producer here writes
	// them) cannot close a cycle: the stream's order is then a
	// topological one, and Kahn's pass is not needed.
	backward := true
	for i := 0; i < n; i++ {
		for k := d.depOff[i]; k < d.depOff[i+1]; k++ {
			id := b.depID(k)
			j, ok := d.lookup.get(id)
			if !ok {
				return nil, &Error{FlowID: d.ID(int32(i)), Index: int32(i), Field: "deps", Msg: fmt.Sprintf("dep %d names no flow in the stream", id)}
			}
			d.deps[k] = j
			d.succOff[j+1]++
			backward = backward && int(j) < i
		}
		waiting[i] = d.depOff[i+1] - d.depOff[i]
	}
	b.depIDs = nil
	for i := 0; i < n; i++ {
		d.succOff[i+1] += d.succOff[i]
	}
	d.succ = make([]int32, len(d.deps))
	fill := make([]int32, n)
	copy(fill, d.succOff[:n])
	for i := 0; i < n; i++ {
		for _, j := range d.deps[d.depOff[i]:d.depOff[i+1]] {
			d.succ[fill[j]] = int32(i)
			fill[j]++
		}
	}
	for i := 0; i < n; i++ {
		if waiting[i] == 0 {
			d.ready = append(d.ready, int32(i))
		}
	}
	if backward {
		return d, nil
	}
	if err := d.checkAcyclic(waiting); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *DAG) index(ordered bool) error {
	n := d.n
	if ordered {
		d.lookup = idIndex{kind: 0, base: int64(n)}
		return nil
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, id := range d.ids {
		lo, hi = min(lo, id), max(hi, id)
	}
	dup := func(i int, id int64, j int32) error {
		return &Error{FlowID: id, Index: int32(i), Field: "id", Msg: fmt.Sprintf("duplicate id (also flow #%d in the stream)", j)}
	}
	// A table costs 4 bytes per id in the range; use it while that stays
	// within a few times the flows themselves.
	if n > 0 && hi-lo >= 0 && hi-lo < 4*int64(n)+1024 {
		t := make([]int32, hi-lo+1)
		for i := range t {
			t[i] = -1
		}
		for i, id := range d.ids {
			if j := t[id-lo]; j >= 0 {
				return dup(i, id, j)
			}
			t[id-lo] = int32(i)
		}
		d.lookup = idIndex{kind: 1, base: lo, table: t}
		return nil
	}
	m := make(map[int64]int32, n)
	for i, id := range d.ids {
		if j, ok := m[id]; ok {
			return dup(i, id, j)
		}
		m[id] = int32(i)
	}
	d.lookup = idIndex{kind: 2, m: m}
	return nil
}

// checkAcyclic runs Kahn's algorithm on the wait counts (wait, which it
// consumes). Flows left over wait on a cycle; it reports one flow on the
// cycle with the cycle itself.
func (d *DAG) checkAcyclic(wait []int32) error {
	n := d.n
	queue := make([]int32, 0, n)
	queue = append(queue, d.ready...)
	for h := 0; h < len(queue); h++ {
		i := queue[h]
		for _, s := range d.succ[d.succOff[i]:d.succOff[i+1]] {
			if wait[s]--; wait[s] == 0 {
				queue = append(queue, s)
			}
		}
	}
	if len(queue) == n {
		return nil
	}
	// Walk from a stuck flow through stuck deps until a flow repeats: every
	// stuck flow has a stuck dep, so the walk must close a cycle.
	var start int32
	for i := 0; i < n; i++ {
		if wait[i] > 0 {
			start = int32(i)
			break
		}
	}
	seen := map[int32]int{}
	var walk []int32
	for v := start; ; {
		if k, ok := seen[v]; ok {
			walk = walk[k:]
			break
		}
		seen[v] = len(walk)
		walk = append(walk, v)
		for _, p := range d.deps[d.depOff[v]:d.depOff[v+1]] {
			if wait[p] > 0 {
				v = p
				break
			}
		}
	}
	var sb strings.Builder
	for k, v := range walk {
		if k == 8 {
			sb.WriteString("...")
			break
		}
		fmt.Fprintf(&sb, "%d waits on ", d.ID(v))
	}
	first := walk[0]
	if len(walk) <= 8 {
		fmt.Fprint(&sb, d.ID(first))
	}
	return &Error{FlowID: d.ID(first), Index: first, Field: "deps",
		Msg: fmt.Sprintf("never becomes ready: dependency cycle %s (%d flows can never start)", sb.String(), n-len(queue))}
}

// NewRun starts an execution of the DAG: no flow done, the flows of Ready
// ready.
func (d *DAG) NewRun() *Run {
	r := &Run{d: d, nodes: make([]node, d.n)}
	for i := range r.nodes {
		lo, hi := d.succOff[i], d.succOff[i+1]
		nd := node{waiting: d.depOff[i+1] - d.depOff[i], nSucc: hi - lo, succ: lo}
		if hi-lo == 1 {
			nd.succ = d.succ[lo]
		}
		r.nodes[i] = nd
	}
	return r
}

// DAG is the graph r executes.
func (r *Run) DAG() *DAG { return r.d }

// Len is the number of flows.
func (r *Run) Len() int { return r.d.n }

// PrepareEarly allocates ReleaseEarly's per-edge state now, so that
// goroutines releasing different flows' dependants never allocate it at
// once.
func (r *Run) PrepareEarly() {
	if r.early == nil {
		r.early = make([]bool, len(r.d.succ))
	}
}

// Len is the number of flows.
func (d *DAG) Len() int { return d.n }

// ID is flow i's id.
func (d *DAG) ID(i int32) int64 {
	if d.ids == nil {
		return int64(i)
	}
	return d.ids[i]
}

// Index finds a flow by id.
func (d *DAG) Index(id int64) (int32, bool) { return d.lookup.get(id) }

// Deps are flow i's dep indexes (do not modify).
func (d *DAG) Deps(i int32) []int32 { return d.deps[d.depOff[i]:d.depOff[i+1]] }

// Ready is the initial ready set (flows without deps), in input order.
func (d *DAG) Ready() []int32 { return d.ready }

// Complete marks flow i done and appends the flows it releases (in the
// order their records appear in the input) to out. Completing a flow twice
// or one that was not ready panics: that is a backend bug, not bad input.
func (r *Run) Complete(i int32, out []int32) []int32 {
	d := r.d
	nd := &r.nodes[i]
	if nd.waiting != 0 {
		panic(fmt.Sprintf("dag: flow %d completed twice or before its deps", d.ID(i)))
	}
	nd.waiting = -1
	if r.concurrent {
		r.nDone.Add(1)
	} else {
		r.done++
	}
	if r.early != nil {
		return r.completeLate(i, out)
	}
	switch nd.nSucc {
	case 0:
		return out
	case 1:
		s := nd.succ
		if r.nodes[s].waiting--; r.nodes[s].waiting == 0 {
			out = append(out, s)
		}
		return out
	}
	for _, s := range d.succ[nd.succ : nd.succ+nd.nSucc] {
		if r.nodes[s].waiting--; r.nodes[s].waiting == 0 {
			out = append(out, s)
		}
	}
	return out
}

// completeLate is Complete's release once ReleaseEarly may have released
// some of flow i's dependants already.
func (r *Run) completeLate(i int32, out []int32) []int32 {
	d := r.d
	for k := d.succOff[i]; k < d.succOff[i+1]; k++ {
		if r.early[k] {
			continue // released already by ReleaseEarly
		}
		s := d.succ[k]
		if r.nodes[s].waiting--; r.nodes[s].waiting == 0 {
			out = append(out, s)
		}
	}
	return out
}

// ReleaseEarly satisfies, before flow i completes, its dependants that
// pass keep, and appends those it makes ready to out; Complete(i) later
// releases only the others. A packet backend uses it for receive
// completion: a receiver forwards data as soon as it has landed, while the
// sender's own next step waits for the last ACK.
func (r *Run) ReleaseEarly(i int32, keep func(s int32) bool, out []int32) []int32 {
	d := r.d
	if r.nodes[i].waiting != 0 {
		panic(fmt.Sprintf("dag: flow %d released before it started or after it completed", d.ID(i)))
	}
	if r.nodes[i].nSucc == 0 {
		// Nothing waits on it: its offsets, a cache miss for a flow at
		// random (a packet backend's receive completions), go unread.
		return out
	}
	r.PrepareEarly()
	for k := d.succOff[i]; k < d.succOff[i+1]; k++ {
		s := d.succ[k]
		if r.early[k] || !keep(s) {
			continue
		}
		r.early[k] = true
		if r.nodes[s].waiting--; r.nodes[s].waiting == 0 {
			out = append(out, s)
		}
	}
	return out
}

// Dependants is the number of flows that wait on flow i.
func (d *DAG) Dependants(i int32) int { return int(d.succOff[i+1] - d.succOff[i]) }

// Dependants is the number of flows that wait on flow i, read from the
// run's record of i, which completing i reads anyway.
func (r *Run) Dependants(i int32) int { return int(r.nodes[i].nSucc) }

// Done is the number of flows completed.
func (r *Run) Done() int { return int(r.done + r.nDone.Load()) }

// Concurrent lets goroutines complete (and release early) different flows
// at once from now on; call it before they start.
func (r *Run) Concurrent() {
	r.PrepareEarly()
	r.concurrent = true
}

// IsDone reports whether flow i completed.
func (r *Run) IsDone(i int32) bool { return r.nodes[i].waiting < 0 }

// Stuck returns a flow that was never completed, for a deadlock message
// from a backend that stopped early; ok is false when every flow is done.
func (r *Run) Stuck() (i int32, ok bool) {
	for k := range r.nodes {
		if r.nodes[k].waiting >= 0 {
			return int32(k), true
		}
	}
	return 0, false
}
