package analytical

import (
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/fabricsim/fabricsim/internal/prefetch"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// The fluid solver keeps the max-min fair rates of the sending flows on
// directed links and recomputes them once per simulated instant at which
// flows start or stop sending.
//
// Recomputation is incremental but exact. Progressive filling raises all
// rates together and freezes the flows of each link as it saturates, so
// the allocation is built in increasing rate levels. Removing a flow of rate
// r changes nothing below level r (the flow was still growing there and
// crossed no saturated link), and adding a flow changes nothing below its
// new rate, which is at least min over its links of capacity / flows (the
// classic max-min lower bound). With theta the smallest of those levels in
// this instant, flows below theta keep their rates; the others are re-solved
// by progressive filling on the residual capacities, and only those
// connected to the changed links through flows at or above theta, since the
// rest form sub-problems that did not change. In a ring step or a
// rail-local transfer that is a handful of flows; in a large mixed workload
// it is the fast flows near the change.
//
// Remaining bits are tracked per flow at the time its rate last changed; a
// flow whose rate comes out unchanged keeps its scheduled drain event, so a
// flow alone on its path drains at exactly start + size*8/bottleneck, the
// busbw time. A changed rate bumps the slot's generation, which turns the
// old drain event stale. A drain that moves later is not pushed at once:
// the slot's earlier event, when it pops, pushes it with the calendar
// number it was given (schedule), so a flow slowed down by each of
// several flows joining its links costs one push, in the same order.
//
// Memory: a solve reads every flow of each link it takes in for its mark
// and rate (hot, 16 bytes a flow), and only its members' slots, whose
// fields sit in cache lines by use (192 bytes a slot, plus its path).
// Below scanSolve links it orders them by scan rather than a heap.
//
// A sprayed flow (route.Spray, route.Adaptive) crosses many links, each with the share w
// of its bytes that the even split puts there: at rate r it uses r*w of
// that link. Progressive filling then weighs each flow's claim on a link by
// its w, so the link saturates at level resid/sum(w), and the bound above
// becomes capacity / sum(w) >= capacity / flows. Unsprayed flows have w 1
// everywhere and cost nothing extra: each link's entries carry their
// weights (1 unless sprayed), and the links' sums of them (wsum) exist
// only once a sprayed flow has been added.
type fluid struct {
	q     *des.Calendar
	slots []slot
	// hot parallels slots: what a solve reads of every flow on a link it
	// takes in, most of which keep their rates, packed apart from the
	// rest of the slot so that those reads stay in cache.
	hot   []slotHot
	free  []int32
	flows [][]entry // per directed link: the slots sending over it
	cap   []float64 // per directed link, bit/s
	// wsum, once a sprayed flow came: each link's sum of its entries'
	// weights (adaptive routing reads it per hop); nil until then.
	wsum []float64
	// caps, once a flow with soft entries came (approx-lockstep,
	// lockstep.go), parallels flows: what a soft entry's load is held to.
	caps [][]float64

	// pending changes of this instant
	seeds []route.DirLink // links whose set of flows changed
	added []int32
	theta float64 // smallest rate removed this instant

	// scratch of update, reused
	epoch     uint64
	linkMark  []uint64 // == epoch: link is in the sub-problem
	local     []int32  // per directed link: its position in links
	links     []route.DirLink
	resid     []float64
	count     []int32   // unfrozen flows on the link
	weight    []float64 // their weights' sum (count when none is sprayed)
	heap      []hent    // links by fair share: those with unfrozen flows, and stale ones (update)
	hpos      []int32   // per sub-problem link: its place in heap, -1: none
	members   []int32
	touched   []int32 // links a frozen link's flows cross, to re-place in the heap
	isTouched []bool  // per sub-problem link: in touched (all false between uses)
	stack     []route.DirLink

	recomputes uint64
	holds      uint64 // drains schedule held back (tests)
	// inexact: a merged flow was limited by a link only some of its
	// channels' flows cross (chanmerge.go): they would not have run at
	// one rate.
	inexact  bool
	inexacts uint64 // solves that found it so
	// noteFlows: keep in inexactFlows the merged flows found so, until
	// the engine takes them (exact merging's reruns, RunResults).
	noteFlows    bool
	inexactFlows []int32
	verify       func() // tests: called after every update

	// Private links (busbw): each collective gets its own copy of every
	// directed link it uses, so its flows share links among themselves
	// but never with another collective's. Copies are made on first use
	// and recycled once no flow uses them, at the end of the instant.
	private bool
	realCap []float64 // per real directed link
	copies  map[linkCopy]route.DirLink
	owner   []linkCopy // per copy: whose copy of which link
	spare   []route.DirLink
	emptied []route.DirLink
	scratch []route.DirLink
}

// linkCopy names a collective's private copy of a directed link.
type linkCopy struct {
	coll int64
	link route.DirLink
}

// entry is a slot sending over a link: k is the link's index in the
// slot's path, so that a removal that moves the entry fixes its pos
// without searching the path for the link, and w its weight there, read
// with the entry instead of from a list of its own.
type entry struct {
	id, k int32
	w     float32 // the slot's signed weight there (slot.signed)
}

// slotHot is a slot's part read for every flow of a link in a solve.
type slotHot struct {
	mark uint64
	rate float64 // bit/s; 0 until the first update after add
}

type slot struct {
	// The first cache line: what a solve reads of its members.
	path []route.DirLink
	w    []float32 // share of the bytes on path[k] (sprayed), nil: all 1
	next float64   // rate found by the current update
	// full: merged channels' flows (chanmerge.go), how many (0: not
	// merged); a link they all cross has that weight.
	full float32
	soft bool // some entry is soft (lockstep.go)
	live bool
	// The drain event (schedule): carry is the generation of the slot's
	// earliest event still in the calendar (-1: none), due its time. A
	// drain that moves later than due is held (drainAt, numbered drainSeq)
	// and pushed when that event pops, instead of at every slowdown.
	held bool
	// The second: what a changed rate reads and writes.
	gen   int64   // bumped at every reschedule and at removal; never reset
	bits  float64 // bits left to send at time at
	at    des.Time
	carry int64
	due   des.Time
	flow  int32
	_     [20]byte
	// The third: the drain's and the removal's.
	pos      []int32 // index of this slot in flows[path[k]]
	drainAt  des.Time
	drainSeq uint64
	lat      des.Time
	ideal    des.Time
	_        [8]byte // 192 bytes: a slot starts a cache line
}

func newFluid(r *route.Router, q *des.Calendar) *fluid {
	n := r.DirLinks()
	f := &fluid{q: q, flows: make([][]entry, n), cap: make([]float64, n),
		linkMark: make([]uint64, n), local: make([]int32, n), theta: math.Inf(1)}
	for d := range f.cap {
		f.cap[d] = r.Bandwidth(route.DirLink(d))
	}
	return f
}

// newPrivateFluid is the solver of the busbw model: the same max-min
// sharing, over per-collective copies of the links.
func newPrivateFluid(r *route.Router, q *des.Calendar) *fluid {
	f := newFluid(r, q)
	f.private, f.realCap, f.copies = true, f.cap, map[linkCopy]route.DirLink{}
	f.flows, f.cap, f.linkMark, f.local = nil, nil, nil, nil
	return f
}

// privatePath maps a path onto collective coll's copies of its links (the
// result is valid until the next call).
func (f *fluid) privatePath(coll int64, path []route.DirLink) []route.DirLink {
	f.scratch = f.scratch[:0]
	for _, l := range path {
		k := linkCopy{coll, l}
		c, ok := f.copies[k]
		if !ok {
			if n := len(f.spare); n > 0 {
				c = f.spare[n-1]
				f.spare = f.spare[:n-1]
				f.owner[c] = k
			} else {
				c = route.DirLink(len(f.cap))
				f.flows = append(f.flows, nil)
				if f.wsum != nil {
					f.wsum = append(f.wsum, 0)
				}
				f.cap = append(f.cap, 0)
				f.linkMark = append(f.linkMark, 0)
				f.local = append(f.local, 0)
				f.owner = append(f.owner, k)
			}
			f.cap[c] = f.realCap[l]
			f.copies[k] = c
		}
		f.scratch = append(f.scratch, c)
	}
	return f.scratch
}

// crowdedSolve is how many flows busbw re-solves at most when flows only
// finish: collectives other than huge AllToAlls have a few dozen per link.
const crowdedSolve = 4096

// recycle frees the copies left without flows this instant; update has
// run, so nothing refers to them any more.
func (f *fluid) recycle() {
	for _, c := range f.emptied {
		if len(f.flows[c]) == 0 {
			if k := f.owner[c]; f.copies[k] == c {
				delete(f.copies, k)
				f.spare = append(f.spare, c)
			}
		}
	}
	f.emptied = f.emptied[:0]
}

// add starts sending flow i over path (copied) now; w, when not nil, is
// the share of its bytes each link of path carries (a sprayed flow).
func (f *fluid) add(i int32, path []route.DirLink, w []float32, size int64, lat, ideal, now des.Time) int32 {
	var id int32
	if n := len(f.free); n > 0 {
		id = f.free[n-1]
		f.free = f.free[:n-1]
		if n > 1 { // the next flow added takes that one: start loading it
			prefetch.Value(&f.slots[f.free[n-2]])
		}
	} else {
		id = int32(len(f.slots))
		f.slots = append(f.slots, slot{})
		f.hot = append(f.hot, slotHot{})
	}
	s := &f.slots[id]
	f.hot[id].rate = 0
	s.flow, s.bits, s.at, s.lat, s.ideal, s.live, s.full = i, float64(size)*8, now, lat, ideal, true, 0
	s.held, s.carry = false, -1
	s.path = append(s.path[:0], path...)
	s.w = s.w[:0]
	if w != nil {
		s.w = append(s.w, w...)
		if f.wsum == nil {
			f.weigh()
		}
	}
	s.pos = s.pos[:0]
	s.soft = f.hasSoft(w)
	for k, l := range path {
		s.pos = append(s.pos, int32(len(f.flows[l])))
		f.flows[l] = append(f.flows[l], entry{id, int32(k), s.signed(k)})
		if f.wsum != nil {
			f.wsum[l] += float64(s.weight(k))
		}
		if f.caps != nil {
			f.caps[l] = append(f.caps[l], math.Inf(1))
		}
	}
	f.added = append(f.added, id)
	return id
}

// weigh starts keeping the links' sums of weights (the first sprayed
// flow); every entry so far weighs 1.
func (f *fluid) weigh() {
	f.wsum = make([]float64, len(f.flows))
	for l, list := range f.flows {
		f.wsum[l] = float64(len(list))
	}
}

// weight is the slot's share of its bytes on path[k].
func (s *slot) weight(k int) float32 {
	if len(s.w) == 0 {
		return 1
	}
	return abs32(s.w[k])
}

// entryWeight is the weight of entry p of link l's flows.
func (f *fluid) entryWeight(l route.DirLink, p int) float64 {
	if f.wsum == nil {
		return 1
	}
	return float64(abs32(f.flows[l][p].w))
}

// claims is what link l's flows claim of it per unit of rate: their
// count, or their weights' sum when that is more (lockstep flows weigh
// as many flows as cross the link; sprayed ones weigh less than one).
func (f *fluid) claims(l route.DirLink) float64 {
	n := float64(len(f.flows[l]))
	if f.wsum != nil {
		return max(n, f.wsum[l])
	}
	return n
}

// load is how many flows, weighted, send over link l per bit/s of it: what
// adaptive routing steers away from.
func (f *fluid) load(l route.DirLink) float64 {
	if f.wsum == nil {
		return float64(len(f.flows[l])) / f.cap[l]
	}
	return f.wsum[l] / f.cap[l]
}

// remove stops slot id (its bits are sent) and frees it.
func (f *fluid) remove(id int32) {
	s := &f.slots[id]
	f.theta = min(f.theta, f.hot[id].rate)
	if s.soft {
		f.theta = min(f.theta, f.softLevel(s))
	}
	for k, l := range s.path {
		list := f.flows[l]
		p := s.pos[k]
		if f.wsum != nil {
			f.wsum[l] -= float64(abs32(list[p].w))
			if len(list) == 1 {
				f.wsum[l] = 0 // no drift left on an idle link
			}
		}
		last := list[len(list)-1]
		list[p] = last
		f.flows[l] = list[:len(list)-1]
		if f.caps != nil {
			cs := f.caps[l]
			cs[p] = cs[len(cs)-1]
			f.caps[l] = cs[:len(cs)-1]
		}
		if f.private && len(list) == 1 {
			f.emptied = append(f.emptied, l)
		}
		if last.id != id {
			f.slots[last.id].pos[last.k] = p
		}
		f.seeds = append(f.seeds, l)
	}
	s.gen++
	s.live, s.held = false, false // a held drain's carrier pops as stale
	f.free = append(f.free, id)
}

// update re-solves the rates affected by this instant's adds and removes
// and reschedules the drains of flows whose rate changed.
func (f *fluid) update(now des.Time) {
	if f.private {
		defer f.recycle()
	}
	if len(f.added) == 0 && len(f.seeds) == 0 {
		return
	}
	f.recomputes++
	if f.alone() {
		return
	}
	theta := f.theta
	for _, id := range f.added {
		for _, l := range f.slots[id].path {
			theta = f.fillBound(l, theta)
			f.seeds = append(f.seeds, l)
		}
	}
	// A margin below theta: re-solving a few more flows is always exact,
	// fixing a flow whose level rounding put just under theta would not be.
	thr := theta * (1 - 1e-9)
	f.epoch += 2 // epoch: in the sub-problem; epoch+1: rate fixed (freezeUnit)
	in := f.epoch
	f.members, f.links = f.members[:0], f.links[:0]
	f.resid, f.count, f.weight = f.resid[:0], f.count[:0], f.weight[:0]
	f.stack = append(f.stack[:0], f.seeds...)
	for len(f.stack) > 0 {
		if f.private && len(f.added) == 0 && len(f.members) > crowdedSolve {
			// busbw: a finish among thousands of a collective's flows (a
			// large AllToAll) hands its share on at the next start instead;
			// the allocation stays feasible, if no longer max-min, and the
			// collective costs one solve instead of one per finish. The
			// marks set so far belong to this epoch and expire with it.
			f.seeds, f.theta = f.seeds[:0], math.Inf(1)
			return
		}
		l := f.stack[len(f.stack)-1]
		f.stack = f.stack[:len(f.stack)-1]
		if f.linkMark[l] == in {
			continue
		}
		f.linkMark[l] = in
		f.local[l] = int32(len(f.links))
		f.links = append(f.links, l)
		resid, n, wsum := f.cap[l], int32(0), 0.0
		if f.wsum == nil {
			// Every entry weighs 1 (nothing sprayed, soft or merged):
			// the same sums, without the weights' lookups.
			for _, en := range f.flows[l] {
				id := en.id
				h := &f.hot[id]
				switch {
				case h.mark == in:
					n++
				case h.rate == 0 || h.rate >= thr:
					h.mark = in
					f.members = append(f.members, id)
					n++
					for _, l2 := range f.slots[id].path {
						if f.linkMark[l2] != in {
							f.stack = append(f.stack, l2)
						}
					}
				default:
					resid -= h.rate
				}
			}
			f.resid = append(f.resid, resid)
			f.count = append(f.count, n)
			f.weight = append(f.weight, float64(n))
			continue
		}
		for p, en := range f.flows[l] {
			id := en.id
			h := &f.hot[id]
			switch {
			case h.mark == in:
				n++
				wsum += float64(abs32(en.w))
			case h.rate == 0 || h.rate >= thr:
				h.mark = in
				s := &f.slots[id]
				f.members = append(f.members, id)
				n++
				wsum += float64(abs32(en.w))
				if s.soft {
					f.uncap(s)
				}
				for _, l2 := range s.path {
					if f.linkMark[l2] != in {
						f.stack = append(f.stack, l2)
					}
				}
			case f.caps != nil && en.w < 0:
				resid -= min(h.rate, f.caps[l][p]) * float64(abs32(en.w))
			default:
				resid -= h.rate * float64(abs32(en.w))
			}
		}
		f.resid = append(f.resid, resid)
		f.count = append(f.count, n)
		f.weight = append(f.weight, wsum)
	}
	f.seeds, f.added, f.theta = f.seeds[:0], f.added[:0], math.Inf(1)
	// A member whose rate changes has its second line read and written
	// after the filling: start loading it now, so that the filling's work
	// hides the wait.
	for _, id := range f.members {
		prefetch.Line(unsafe.Pointer(&f.slots[id].gen))
	}

	// Progressive filling over the sub-problem's links.
	nl := len(f.links)
	f.hpos = slices.Grow(f.hpos[:0], nl)[:nl]
	if len(f.isTouched) < nl {
		f.isTouched = make([]bool, max(nl, 2*len(f.isTouched)))
	}
	f.heap = f.heap[:0]
	for j := 0; j < nl; j++ {
		if f.count[j] == 0 {
			f.hpos[j] = -1
			continue
		}
		f.hpos[j] = int32(len(f.heap))
		f.heap = append(f.heap, mkHent(f.resid[j]/f.weight[j], f.links[j], int32(j)))
	}
	// A sub-problem of a few dozen links (a ring step's change on a
	// fat-tree: two NICs and their uplinks) takes its links in the same
	// (share, link) order by a scan of an unordered list, which costs less
	// than keeping a heap in order through every touched link's change.
	small := len(f.heap) <= scanSolve
	if !small {
		for j := len(f.heap)/2 - 1; j >= 0; j-- {
			f.down(j)
		}
	}
	// The filling ends when every member is frozen: the links left then
	// have no flow to fix. A large sub-problem's links left without one
	// before (a ring's uplinks, once the NICs froze its flows) stay in the
	// heap as they were, and are skipped if they come up before the end;
	// most do not, and dropping each would have cost a heap fix.
	unfrozen := len(f.members)
	for len(f.heap) > 0 && unfrozen > 0 {
		var top hent
		if small {
			top = f.popMin()
		} else {
			top = f.pop()
		}
		j, l := top.j, top.l
		if f.count[j] == 0 {
			continue
		}
		// Rounding can leave a share a hair under zero; a flow still gets
		// a sliver of the link rather than stalling forever.
		level := max(top.share(), 1e-9*f.cap[l])
		// The flows frozen here take their level off their other links in
		// the same order as ever; each touched link's share is recomputed
		// and its heap place fixed once, after the last of them (nothing
		// pops meanwhile, and the pop order is the total order of (share,
		// link), whatever the heap's shape): a link crossed by several of
		// them, as the channels of a ring share a NIC, moved in the heap
		// once per flow.
		f.touched = f.touched[:0]
		if f.wsum == nil {
			unfrozen -= f.freezeUnit(l, level)
		} else {
			unfrozen -= f.freezeWeighted(l, level)
		}
		f.count[j] = 0
		for _, k := range f.touched {
			f.isTouched[k] = false
			if f.count[k] == 0 { // no flow left to fix there
				if small {
					f.cut(int(f.hpos[k]))
				}
				continue
			}
			f.heap[f.hpos[k]].key = shareKey(f.share(k))
			if !small {
				f.fix(int(f.hpos[k]))
			}
		}
	}

	for _, id := range f.members {
		s, h := &f.slots[id], &f.hot[id]
		r := s.next
		switch {
		case h.rate == 0:
			h.rate = r
		case math.Abs(r-h.rate) <= 1e-12*h.rate:
			continue // unchanged: keep the scheduled drain
		default:
			s.bits = max(s.bits-h.rate*float64(now-s.at)*1e-12, 0)
			s.at, h.rate = now, r
		}
		f.schedule(id, s, now.Add(des.FromSeconds(s.bits/h.rate)))
	}
	if f.verify != nil {
		f.verify()
	}
}

// fillRounds is how many times fillBound raises its level: each round
// costs a pass over the link's flows and the bound is valid after any.
const fillRounds = 4

// fillFlows is the most flows a link fillBound refines has.
const fillFlows = 16

// fillBound lowers theta to a lower bound on the level at which link l
// saturates in this instant's filling, which bounds the rate of a flow
// added on it from below. Progressive filling up to level x leaves every
// flow whose rate is below x where it was (the induction of the doc
// comment at the top), so l's load at x is the sum of min(rate, x) over
// its flows, x for each new one; the level is the x at which that load
// reaches capacity. Each round solves for x with the flows under the last
// x fixed at their rates: the load is at most capacity there, so x only
// rises and stays below the saturation level. It starts at cap / claims,
// the classic bound, which it replaces: with the slower flows of a
// crowded link limited elsewhere, it is several times higher, and every
// flow between the two would have been re-solved. Links with weighted
// entries keep the classic bound. A bound at or above theta leaves it as
// it is, so the rounds stop there: many flows added at once cost a
// division each once one of them has brought theta down.
func (f *fluid) fillBound(l route.DirLink, theta float64) float64 {
	x := f.cap[l] / f.claims(l)
	if x >= theta {
		return theta
	}
	if f.wsum != nil || len(f.flows[l]) > fillFlows {
		return x
	}
	for range fillRounds {
		fixed, free := 0.0, 0
		for _, en := range f.flows[l] {
			if r := f.hot[en.id].rate; r != 0 && r < x {
				fixed += r
			} else {
				free++
			}
		}
		next := (f.cap[l] - fixed) / float64(free)
		if !(next > x) {
			break
		}
		if x = next; x >= theta {
			return theta
		}
	}
	return x
}

// share is sub-problem link k's fair share of what is left of it.
// Entries of weight 1 (no weights kept) leave weight at the count, so the
// count gives the same quotient without keeping weight in step.
func (f *fluid) share(k int32) float64 {
	if f.wsum == nil {
		return f.resid[k] / float64(f.count[k])
	}
	return f.resid[k] / f.weight[k]
}

// freezeUnit fixes at level the unfrozen members sending over link l when
// every entry weighs 1 (freezeWeighted's loop without the weights, soft
// entries or merged flows, none of which exist then), takes level off
// their other links and notes those in touched. It returns how many it
// fixed.
func (f *fluid) freezeUnit(l route.DirLink, level float64) int {
	in, frozen, n := f.epoch, f.epoch+1, 0
	for _, en := range f.flows[l] {
		h := &f.hot[en.id]
		if h.mark != in {
			continue
		}
		h.mark = frozen
		n++
		s := &f.slots[en.id]
		s.next = level
		for _, l2 := range s.path {
			if l2 == l {
				continue
			}
			k := f.local[l2]
			f.resid[k] -= level
			f.count[k]--
			f.touch(k)
		}
	}
	return n
}

// touch notes sub-problem link k, whose share a frozen flow changed, in
// touched, once, if it is in the heap.
func (f *fluid) touch(k int32) {
	if f.hpos[k] >= 0 && !f.isTouched[k] {
		f.isTouched[k] = true
		f.touched = append(f.touched, k)
	}
}

// freezeWeighted is freezeUnit for entries with weights: a flow's claim
// on a link is its level times its weight there; a soft entry is capped
// at level instead; a merged flow limited where only some of its
// channels' flows cross is noted (found).
func (f *fluid) freezeWeighted(l route.DirLink, level float64) int {
	in, frozen, n := f.epoch, f.epoch+1, 0
	for p, en := range f.flows[l] {
		id := en.id
		h := &f.hot[id]
		if h.mark != in {
			continue
		}
		s := &f.slots[id]
		if s.soft && en.w < 0 {
			f.caps[l][p] = level // not limited here: its load is
			continue
		}
		if s.full > 0 && en.w != s.full && !f.tiedFull(s, level) {
			f.found(s.flow)
		}
		h.mark = frozen
		n++
		s.next = level
		for k2, l2 := range s.path {
			if l2 == l {
				continue
			}
			k := f.local[l2]
			w := float64(s.weight(k2))
			f.resid[k] -= level * w
			f.weight[k] -= w
			f.count[k]--
			f.touch(k)
		}
	}
	return n
}

// alone handles, without a solve, the common instants of a pipelined
// collective: flows that stopped on links nobody else uses, and at most one
// new flow that is alone on every link of its path (its rate is then its
// bottleneck bandwidth, exactly as busbw). It reports whether it did.
func (f *fluid) alone() bool {
	if len(f.added) > 1 {
		return false
	}
	for _, l := range f.seeds {
		if len(f.flows[l]) > 0 {
			return false
		}
	}
	if len(f.added) == 1 {
		id := f.added[0]
		s := &f.slots[id]
		r, rFull := math.Inf(1), math.Inf(1)
		for k, l := range s.path {
			if len(f.flows[l]) > 1 {
				return false
			}
			if s.signed(k) > 0 {
				r = min(r, f.cap[l]/float64(s.weight(k)))
				if s.full > 0 && s.weight(k) == s.full {
					rFull = min(rFull, f.cap[l]/float64(s.weight(k)))
				}
			}
		}
		if s.full > 0 && r < rFull {
			f.found(s.flow)
		}
		f.hot[id].rate = r
		f.schedule(id, s, s.at.Add(des.FromSeconds(s.bits/r)))
	}
	f.seeds, f.added, f.theta = f.seeds[:0], f.added[:0], math.Inf(1)
	if f.verify != nil {
		f.verify()
	}
	return true
}

// holdDrains: schedule holds later drains (tests turn it off to compare).
var holdDrains = true

// schedule moves slot id's drain to at. An event of the slot's that pops
// before at (a drain that moved later) carries it: at is given its
// calendar number now and pushed as that event pops (repush), so it pops
// where a push now would have, and a flow slowed down several times in a
// row costs one push instead of one each.
func (f *fluid) schedule(id int32, s *slot, at des.Time) {
	s.gen++
	if s.carry >= 0 && at > s.due && holdDrains {
		s.held, s.drainAt, s.drainSeq = true, at, f.q.Reserve()
		f.holds++
		return
	}
	f.q.Push(at, evDrained, id, s.gen)
	s.held, s.carry, s.due = false, s.gen, at
}

// repush handles a popped drain event of generation gen that is no
// longer slot id's drain: when it carries a held drain, the drain goes
// into the calendar.
func (f *fluid) repush(id int32, gen int64) {
	s := &f.slots[id]
	if !s.held || s.carry != gen {
		return
	}
	f.q.PushSeq(s.drainAt, s.drainSeq, evDrained, id, s.gen)
	s.held, s.carry, s.due = false, s.gen, s.drainAt
}

// --- binary heap of sub-problem links by fair share, ties by link id ---

// hent is a heap entry: sub-problem link j (links[j] is l) and its fair
// share, kept with it so that ordering reads no other array. The share
// is kept as key, its bits mapped so that unsigned order is the floats'
// order (shares are never NaN nor -0), and (key, l) is compared as one
// 128-bit number: no branch to mispredict at each level of the heap.
type hent struct {
	key uint64
	l   route.DirLink
	j   int32
}

func mkHent(share float64, l route.DirLink, j int32) hent {
	return hent{shareKey(share), l, j}
}

// shareKey maps a float's bits to an unsigned number in the same order:
// a negative float's bits all flip, a positive one's sign bit is set.
func shareKey(x float64) uint64 {
	u := math.Float64bits(x)
	return u ^ (uint64(int64(u)>>63) | 1<<63)
}

// share is the entry's share, exactly.
func (a hent) share() float64 {
	u := a.key
	return math.Float64frombits(u ^ (uint64(int64(^u)>>63) | 1<<63))
}

// lt is 1 when a comes before b in (share, link) order, else 0.
func (a hent) lt(b hent) int {
	_, borrow := bits.Sub64(uint64(uint32(a.l)), uint64(uint32(b.l)), 0)
	_, borrow = bits.Sub64(a.key, b.key, borrow)
	return int(borrow)
}

func (a hent) less(b hent) bool { return a.lt(b) != 0 }

// The sifts move a hole rather than swap entries: each entry moved is
// written, and its place noted, once.

// down sifts entry i down and reports whether it moved.
func (f *fluid) down(i int) bool {
	h, hpos := f.heap, f.hpos
	x, i0 := h[i], i
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) {
			c += h[c+1].lt(h[c])
		}
		if !h[c].less(x) {
			break
		}
		h[i] = h[c]
		hpos[h[i].j] = int32(i)
		i = c
	}
	h[i] = x
	hpos[x.j] = int32(i)
	return i != i0
}

// up sifts entry i up.
func (f *fluid) up(i int) {
	h, hpos := f.heap, f.hpos
	x := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !x.less(h[p]) {
			break
		}
		h[i] = h[p]
		hpos[h[i].j] = int32(i)
		i = p
	}
	h[i] = x
	hpos[x.j] = int32(i)
}

// fix re-places entry i after its share changed.
func (f *fluid) fix(i int) {
	if !f.down(i) {
		f.up(i)
	}
}

// pop takes the first entry out. The hole it leaves goes down the smaller
// children to a leaf, and the last entry sifts up from there: it belongs
// near the bottom, so that costs one comparison a level, not two.
func (f *fluid) pop() hent {
	h, hpos := f.heap, f.hpos
	top := h[0]
	hpos[top.j] = -1
	n := len(h) - 1
	last := h[n]
	h = h[:n]
	f.heap = h
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n {
			c += h[c+1].lt(h[c])
		}
		h[i] = h[c]
		hpos[h[i].j] = int32(i)
		i = c
	}
	h[i] = last
	f.up(i)
	return top
}

// scanSolve is the most links whose next saturating one update finds
// by a scan (popMin) rather than a heap.
const scanSolve = 48

// popMin takes out of the unordered list f.heap the link that comes first
// in the heap's order (share, then link id: a total order, so the list's
// order does not matter).
func (f *fluid) popMin() hent {
	h := f.heap
	// The first so far, chosen by masks rather than branches.
	bk, bl, b := h[0].key, uint64(uint32(h[0].l)), 0
	for i := 1; i < len(h); i++ {
		e := h[i]
		el := uint64(uint32(e.l))
		_, borrow := bits.Sub64(el, bl, 0)
		_, borrow = bits.Sub64(e.key, bk, borrow)
		m := -borrow // all ones when e comes first
		bk ^= (bk ^ e.key) & m
		bl ^= (bl ^ el) & m
		b ^= (b ^ i) & int(m)
	}
	top := h[b]
	f.cut(b)
	return top
}

// cut takes entry i out of the unordered list f.heap.
func (f *fluid) cut(i int) {
	h := f.heap
	n := len(h) - 1
	j := h[i].j
	h[i] = h[n]
	f.hpos[h[i].j] = int32(i)
	f.heap = h[:n]
	f.hpos[j] = -1
}

// found records that merged flow i was found inexact in this solve.
func (f *fluid) found(i int32) {
	if f.noteFlows {
		f.inexactFlows = append(f.inexactFlows, i)
	}
	f.inexact = true
	f.inexacts++
}

// tiedFull reports whether merged slot s, frozen at level on a link only
// some of its channels' flows cross, has a link they all cross that
// saturates at the same level: then each of them is limited there too.
func (f *fluid) tiedFull(s *slot, level float64) bool {
	for k, l := range s.path {
		if s.weight(k) != s.full || f.linkMark[l] != f.epoch {
			continue
		}
		j := f.local[l]
		if f.weight[j] > 0 && math.Abs(f.resid[j]/f.weight[j]-level) <= 1e-9*level {
			return true
		}
	}
	return false
}
