package des

import (
	"math/bits"
)

// Calendar is an event queue for dense, near-future events, as a packet
// simulator makes: a timing wheel of buckets and a heap for events beyond
// the wheel's horizon. Its pop order is exactly Queue's, (At, push order),
// at a near-constant cost per event where a heap of tens of thousands of
// pending events pays a logarithm.
//
// A bucket is an unordered list until the cursor reaches it, then sorted
// once and popped from the front: a packet simulator schedules almost
// everything a link's latency or a packet's serialization ahead, so a
// push is an append and a pop an index step. Kept as small heaps, the
// buckets of a 1024-GPU AllReduce (about 30 events each) took a fifth of
// its event loop's CPU profile in sifting.
type Calendar struct {
	shift   uint // bucket width is 1<<shift ps
	mask    int64
	buckets [][]Event
	bits    []uint64 // non-empty buckets
	cur     int64    // absolute bucket number of the cursor
	// active is the absolute number of the sorted bucket being popped
	// (-1: none), head its next event (events before head are popped).
	// Events pushed into it since it was sorted are late: lateNew as
	// pushed (lateMin the index of its first by (At, number)), and late
	// from lateHead on sorted, lateNew merged into it when its first is
	// due (absorbLate).
	active int64
	head   int
	// act is the sorted bucket being popped (nil: none), and its events
	// run[head:] (run is a prefix of act) come before every late and far
	// event and are not its last: PopBefore pops them without looking
	// further (refast). A slice, not act's length: PopBefore's index needs
	// no bounds check.
	act      []Event
	run      []Event
	late     []Event
	lateHead int
	lateNew  []Event
	lateMin  int
	lateTmp  []Event // the merge's output, swapped with late
	far      Queue   // events beyond the horizon (keeps its own order by seq)
	seq      uint64
	inWheel  int // events in the buckets
	// spare holds emptied bucket arrays by capacity class (spare[k] has
	// capacity 2^k): a bucket that grew to hundreds of events hands its
	// array back when it empties, so the wheel holds about what is pending
	// now, not each bucket's peak (buckets are busy in turn, so the sum
	// of their peaks is many times what is ever pending at once).
	spare [][][]Event
	// scratch holds the left half of a merge (sortEvents).
	scratch []Event
	// slot sort's scratch (slotSort): the chains' heads by slot (all zero
	// between calls), each event's next in its chain, its group and key,
	// the groups, and the sorted output when it is copied back.
	slotHead []int32
	slotNext []int32
	slotKey  []uint32
	slotGs   slotGroupSet
	slotOut  []Event
	// Bucket width (retune): pops and buckets visited since the last
	// look, and the narrowest width (the one asked for).
	pops, visits int64
	minShift     uint
	moving       []Event // scratch of rescale
	popped       Event   // the last event popBefore popped (PopBefore)
}

// The width adapts to the run (retune). A bucket is worth its cost (the
// scan to it, its sort, a cache line or two) when it holds a few events:
// a sparse run, such as a PFC incast's handful of links busy for
// milliseconds, popped 1.25 events a bucket of 1 ns, and 8 ns buckets
// took a fifth off its CPU time, while they slowed dense runs, whose
// 1 ns buckets already hold 60 to 200 events. Every retuneVisits buckets
// (or retuneVisits*widenBelow events, which wide buckets of a dense run
// pop in few visits) the width is doubled as often as it takes for
// widenBelow events a bucket, up to maxWiden doublings, or halved (never
// below the width asked for) for at most narrowAbove. The order popped is (At,
// number) at any width.
const (
	retuneVisits = 1 << 12
	widenBelow   = 8
	narrowAbove  = 64
	maxWiden     = 6
)

// A widened wheel (rescale) spans up to 2^wideHorizon times the horizon
// asked for, with at least minWheel buckets (one word of the bitmap at
// least, which nextBucket's scan steps by).
const (
	wideHorizon = 2
	minWheel    = 256
)

// keepCap is the largest bucket array an emptied bucket keeps.
const keepCap = 16

// NewCalendar returns a calendar with 2^logBuckets buckets of 2^shift ps.
// Buckets start with room for a few events carved from one slab, so the
// wheel does not allocate as it first turns.
func NewCalendar(shift uint, logBuckets uint) *Calendar {
	const slot = 8
	nb := 1 << logBuckets
	c := &Calendar{shift: shift, minShift: shift, mask: int64(nb - 1), buckets: make([][]Event, nb), bits: make([]uint64, max(nb/64, 1)), active: -1}
	slab := make([]Event, nb*slot)
	for i := range c.buckets {
		c.buckets[i] = slab[i*slot : i*slot : (i+1)*slot]
	}
	return c
}

// GrowFar makes room for n more events beyond the wheel's horizon (see
// Queue.Grow).
func (c *Calendar) GrowFar(n int) { c.far.Grow(n) }

// Pushed is the number of events pushed with Push so far.
func (c *Calendar) Pushed() uint64 { return c.seq }

// Len is the number of pending events.
func (c *Calendar) Len() int { return c.inWheel + c.far.Len() }

// Push schedules an event. Events must not be earlier than the last popped
// one (a discrete-event simulation never schedules into its past).
func (c *Calendar) Push(at Time, kind uint16, target int32, arg int64) {
	c.push(at, c.seq, kind, target, arg)
	c.seq++
}

// Reserve takes the number the next Push would give its event, for the
// caller to push that event later with PushSeq: it then pops exactly where
// it would have had it been pushed now (Pushed counts it).
func (c *Calendar) Reserve() uint64 {
	c.seq++
	return c.seq - 1
}

// PushSeq schedules an event with a number of the caller's, in place of
// the push order among events of one time: a backend that numbers its
// events itself (so that it can hold many future ones in compact lists of
// its own, one of each in the calendar at a time, or order ties in a way
// that does not depend on push order) pops them by (At, number). It does
// not mix with Push, whose numbers are the push count, except with a
// number that count gave out (Reserve).
func (c *Calendar) PushSeq(at Time, seq uint64, kind uint16, target int32, arg int64) {
	// The common case inline: a later bucket of the wheel, not the one
	// being popped, with room left (a push cost about 100 instructions
	// through push's general path).
	// (shift&63 and one unsigned comparison for 0 < d <= mask: the
	// shift's guard and a branch less.)
	b := int64(at) >> (c.shift & 63)
	if d := b - c.cur; uint64(d-1) < uint64(c.mask) && b != c.active {
		i := b & c.mask
		if h := &c.buckets[i]; len(*h) < cap(*h) {
			// Resliced in place: only the length is stored (storing the
			// slice took three stores and a write-barrier check).
			n := len(*h)
			*h = (*h)[:n+1]
			// Field by field: a composite literal was built on the stack
			// and copied in 16-byte loads that its narrow stores could
			// not forward to (a tenth of the mixed 128-GPU case's profile).
			e := &(*h)[n]
			e.At, e.seq, e.Kind, e.Target, e.Arg = at, seq, kind, target, arg
			if n == 0 {
				// A bucket's bit is set while it holds events (emptied
				// and rescale clear it): only its first push sets it,
				// about 7 instructions less for each of the others.
				c.bits[i>>6] |= 1 << (i & 63)
			}
			c.inWheel++
			return
		}
	}
	c.push(at, seq, kind, target, arg)
}

// push takes the event's fields, not an Event: a struct of five fields
// lives in memory, and copying it from there in 16-byte loads just after
// its narrow stores stalled every push (see PushSeq).
func (c *Calendar) push(at Time, seq uint64, kind uint16, target int32, arg int64) {
	b := int64(at) >> c.shift
	if b < c.cur {
		b = c.cur // not earlier than the cursor's bucket (equal-time pushes)
	}
	if b-c.cur > c.mask {
		c.far.pushEvent(Event{At: at, seq: seq, Kind: kind, Target: target, Arg: arg})
		return
	}
	c.inWheel++
	if b == c.active {
		// Into the sorted bucket being popped (an equal-time push, or
		// one a few ps ahead): a small heap beside it, not an insertion
		// that could move a huge bucket's tail at every push.
		c.pushLate(Event{At: at, seq: seq, Kind: kind, Target: target, Arg: arg})
		return
	}
	i := b & c.mask
	h := c.buckets[i]
	n := len(h)
	if n == cap(h) {
		h = c.grow(h)
	}
	h = h[:n+1]
	e := &h[n]
	e.At, e.seq, e.Kind, e.Target, e.Arg = at, seq, kind, target, arg
	c.buckets[i] = h
	c.bits[i>>6] |= 1 << (i & 63)
}

// pushLate puts e among the late events of the bucket being popped.
//
// Unsorted until the first of them is due, then sorted at once and
// merged with those left: at an instant of a symmetric fabric the ports
// of a hundred GPUs each push a serialization's end a quarter nanosecond
// ahead (an ACK's), which a heap took in and gave out at 9% of SimAI's
// micro AllReduce's CPU.
func (c *Calendar) pushLate(e Event) {
	if n := len(c.run); c.head < n && less(&e, &c.run[n-1]) {
		c.run = c.run[:c.head+before(c.run[c.head:], &e)]
	}
	c.lateNew = append(c.lateNew, e)
	if n := len(c.lateNew) - 1; n > 0 && less(&c.lateNew[n], &c.lateNew[c.lateMin]) {
		c.lateMin = n
	} else if n == 0 {
		c.lateMin = 0
	}
}

// lateLen is the number of late events.
func (c *Calendar) lateLen() int { return len(c.late) - c.lateHead + len(c.lateNew) }

// lateTop is the first late event, nil when there is none.
func (c *Calendar) lateTop() *Event {
	if len(c.lateNew) > 0 {
		return c.lateMerged()
	}
	if c.lateHead < len(c.late) {
		return &c.late[c.lateHead]
	}
	return nil
}

// lateMerged is lateTop when lateNew holds events.
func (c *Calendar) lateMerged() *Event {
	if c.lateHead == len(c.late) || less(&c.lateNew[c.lateMin], &c.late[c.lateHead]) {
		c.absorbLate()
	}
	return &c.late[c.lateHead]
}

// absorbLate sorts lateNew into late.
func (c *Calendar) absorbLate() {
	c.sortEvents(c.lateNew)
	if c.lateHead == len(c.late) {
		c.late, c.lateNew, c.lateHead = c.lateNew, c.late[:0], 0
		return
	}
	a, b := c.late[c.lateHead:], c.lateNew
	m := c.lateTmp[:0]
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if less(&b[j], &a[i]) {
			m = append(m, b[j])
			j++
		} else {
			m = append(m, a[i])
			i++
		}
	}
	m = append(append(m, a[i:]...), b[j:]...)
	c.lateTmp, c.late, c.lateNew, c.lateHead = c.late[:0], m, c.lateNew[:0], 0
}

// latePop drops the first late event (lateTop's).
func (c *Calendar) latePop() {
	if c.lateHead++; c.lateHead == len(c.late) {
		c.late, c.lateHead = c.late[:0], 0
	}
}

// lateTake hands every late event to h (unordered) and empties them.
func (c *Calendar) lateTake(h []Event) []Event {
	h = append(append(h, c.late[c.lateHead:]...), c.lateNew...)
	c.late, c.lateHead, c.lateNew = c.late[:0], 0, c.lateNew[:0]
	return h
}

// sortRun is the length of the stretches mergeSort sorts by insertion
// before merging them.
const sortRun = 16

// sortEvents sorts a bucket by (At, number): as a slot sort where its
// numbers allow (slotSort), else by insertion while that moves few events,
// then as a merge sort. A bucket filled in push order is
// nearly sorted (each event pushed a link's latency or a packet's
// serialization after the one that made it): insertion alone took a
// 1024-GPU AllReduce's event loop a tenth less time than pdqsort.
// Numbered by maker, the exact ties of a symmetric fabric arrive as runs,
// one per maker, in an order unrelated to their numbers (a GPT-13B
// iteration's buckets held runs of 16, reversed): insertion alone then
// moves many events per event popped, so past a budget of moves the rest
// is merge-sorted, whose moves grow as n log n.
func (c *Calendar) sortEvents(h []Event) {
	c.sortBucket(h, false)
}

// sortBucket sorts h as sortEvents does and returns it, in another array
// of its capacity class when own (h is a bucket's array; it is released).
func (c *Calendar) sortBucket(h []Event, own bool) []Event {
	// A bucket in order as far as its middle was filled in push order
	// (TIE_ORDER push): insertion finishes it for a comparison or two an
	// event, where the slot sort's passes cost more. A bucket of ties
	// numbered by maker is out of order within its first few events.
	k := 1
	for k < len(h) && !less(&h[k], &h[k-1]) {
		k++
	}
	if k == len(h) {
		return h
	}
	if len(h) >= slotMin && k < len(h)/2 {
		if h, ok := c.slotSort(h, own); ok {
			return h
		}
	}
	c.sortOld(h)
	return h
}

// sortOld sorts h by insertion and merging (sortEvents).
func (c *Calendar) sortOld(h []Event) {
	if len(h) > 2*sortRun {
		// Merges of runs already in order cost one comparison each, so
		// a sorted bucket costs what insertion would; an unsorted one is
		// spared insertion's pass up to its budget (tie-heavy buckets of
		// symmetric fabrics: 180 events each in SimAI's micro AllReduce
		// on 128 GPUs). Both sorts are stable: the order is the same.
		c.mergeSort(h)
		return
	}
	if k := insertionSort(h, 2*len(h)); k < len(h) {
		c.mergeSort(h[k:])
		c.merge(h, k)
	}
}

// The slot sort (slotSort): a backend that numbers events by maker (its
// number's bits from slotShift up, slotBits of them, the maker, XOR a hash
// of the time; below them the maker's count; above them a class such as
// the event's delay: pkg/packet's Sim.seq) fills a bucket with few groups
// of one time and one class, each holding up to a few hundred makers in a
// narrow range of keys.
const (
	slotMin    = 16 // smaller buckets sort by insertion
	slotGroups = 8
	slotShift  = 24
	slotBits   = 23
	slotMask   = 1<<slotBits - 1
)

// slotSort sorts h by (At, number) as a pigeonhole sort when its events
// fall in at most slotGroups groups of equal time and equal number bits
// above slotShift+slotBits, whose keys (the slotBits above slotShift)
// span few slots, and whose events of one group and key stand in h in
// the order of their numbers; it reports false, h untouched, otherwise.
// The sorted events are in h, or, when own (h is a bucket's array), in
// another array of h's capacity class, which h then joins.
//
// Numbered by maker, the ties of a symmetric fabric come in the makers'
// order at the instant that made them, a permutation (XOR of two hashes)
// of their order at this one: runs of one maker's events, 2.5 events long
// on average in SimAI's micro AllReduce, which insertion and merging
// sorted in a sixth of its instructions. Here each event's number is read
// twice and the event moved once, whatever the permutation: 93-99% of the
// events of SimAI's three 128-GPU cases sort so, and their runs take 7-8%
// fewer instructions.
func (c *Calendar) slotSort(h []Event, own bool) ([]Event, bool) {
	n := len(h)
	var gBase [slotGroups]int
	if cap(c.slotKey) < n {
		c.slotKey = make([]uint32, n)
		c.slotNext = make([]int32, n)
	}
	gs := &c.slotGs
	key := c.slotKey[:n]
	if !gs.keys(h, key) {
		return h, false
	}
	ng := gs.n
	gAt, gHi, gLo, gMax := &gs.at, &gs.hi, &gs.lo, &gs.max
	// The groups in order, each a range of slots from its smallest key.
	var ord [slotGroups]uint8
	for i := range ng {
		j := i
		for ; j > 0 && (gAt[i] < gAt[ord[j-1]] || gAt[i] == gAt[ord[j-1]] && gHi[i] < gHi[ord[j-1]]); j-- {
			ord[j] = ord[j-1]
		}
		ord[j] = uint8(i)
	}
	total := 0
	for _, o := range ord[:ng] {
		gBase[o] = total - int(gLo[o])
		if total += int(gMax[o]-gLo[o]) + 1; total > 4*n+64 {
			return h, false
		}
	}
	if cap(c.slotHead) < total {
		c.slotHead = make([]int32, total)
	}
	head, next := c.slotHead[:total], c.slotNext[:n]
	if !slotChain(h, key, head, next, &gBase) {
		clear(head)
		return h, false
	}
	// Into an array of h's capacity class, which h then joins (a bucket's
	// own), or through the scratch and back.
	// (A bucket array that append grew past a power of two is copied back.)
	var out []Event
	if own = own && cap(h) >= keepCap; own {
		if out = c.take(bits.Len(uint(cap(h))) - 1); cap(out) < n {
			c.release(out)
			own = false
		}
	}
	if !own {
		if cap(c.slotOut) < n {
			c.slotOut = make([]Event, n)
		}
		out = c.slotOut
	}
	out = out[:n]
	slotGather(out, h, head, next)
	if own {
		c.release(h)
		return out, true
	}
	copy(h, out)
	return h, true
}

// slotChain chains each event of h to its slot's (key's) list, from the
// back, so that each list is in h's order (head holds an index plus one,
// 0 for none; next an index, -1 for none); that order must be the
// numbers' (a maker's count grows as it pushes), else it reports false.
// (The three passes of slotSort are functions of their own: in one, the
// loops' counters did not stay in registers.)
func slotChain(h []Event, key []uint32, head, next []int32, gBase *[slotGroups]int) bool {
	next = next[:len(h)]
	key = key[:len(h)]
	for i := len(h) - 1; i >= 0; i-- {
		k := key[i]
		s := gBase[k>>slotBits&(slotGroups-1)] + int(k&slotMask)
		j := head[s]
		if j != 0 && h[j-1].seq < h[i].seq {
			return false
		}
		next[i], head[s] = j-1, int32(i+1)
	}
	return true
}

// slotGather moves h's events to out slot by slot, each slot's along its
// list, and empties the slots. The loop runs over out, with the slot's
// list as its state: out[k] and, with next as long as h, next[i] need no
// bounds check (a loop over the slots checked three an event).
//
//go:noinline
func slotGather(out, h []Event, head, next []int32) {
	next = next[:len(h)]
	s, i := 0, int32(-1)
	for k := range out {
		for i < 0 {
			i = head[s] - 1
			s++
		}
		out[k] = h[i]
		i = next[i]
	}
	clear(head[:s]) // those after the last event's are empty
}

// keys packs each event's group and key (group<<slotBits | key) into
// key, and reports false past slotGroups groups. The inner loop runs
// over a stretch of one group with its fields in locals, the outer one
// (a call, to find) from group to group: with the call inside the one
// loop, the index and the number were spilled at every event.
//
//go:noinline
func (gs *slotGroupSet) keys(h []Event, key []uint32) bool {
	key = key[:len(h)]
	gs.n = 0
	for i := 0; i < len(h); {
		at, hi := h[i].At, h[i].seq>>(slotShift+slotBits)
		g := gs.find(at, hi, h[i].seq>>slotShift&slotMask)
		if g < 0 {
			return false
		}
		g &= slotGroups - 1
		lo, top := gs.lo[g], gs.max[g]
		for ; i < len(h); i++ {
			e := &h[i]
			if e.At != at || e.seq>>(slotShift+slotBits) != hi {
				break
			}
			x := e.seq >> slotShift & slotMask
			lo, top = min(lo, x), max(top, x)
			key[i] = uint32(g)<<slotBits | uint32(x)
		}
		gs.lo[g], gs.max[g] = lo, top
	}
	return true
}

// slotGroupSet is slotSort's groups: each one's time, number bits above
// the key, and smallest and largest key.
type slotGroupSet struct {
	n           int
	at          [slotGroups]Time
	hi, lo, max [slotGroups]uint64
}

// find returns the group of time at and high bits hi, made with key x
// (its range so far) if new; -1 when there is no room for another.
//
//go:noinline
func (gs *slotGroupSet) find(at Time, hi, x uint64) int {
	for g := range gs.n {
		if gs.at[g] == at && gs.hi[g] == hi {
			return g
		}
	}
	g := gs.n
	if g == slotGroups {
		return -1
	}
	gs.n++
	gs.at[g], gs.hi[g], gs.lo[g], gs.max[g] = at, hi, x, x
	return g
}

// mergeSort sorts h as runs of sortRun sorted by insertion, merged.
func (c *Calendar) mergeSort(h []Event) {
	n := len(h)
	for lo := 0; lo < n; lo += sortRun {
		insertionSort(h[lo:min(lo+sortRun, n)], n*n)
	}
	for w := sortRun; w < n; w *= 2 {
		for lo := 0; lo+w < n; lo += 2 * w {
			c.merge(h[lo:min(lo+2*w, n)], w)
		}
	}
}

// insertionSort sorts h by insertion until it has moved more than budget
// events; it returns how many of h's first events are sorted (len(h) when
// all are).
func insertionSort(h []Event, budget int) int {
	for i := 1; i < len(h); i++ {
		e := h[i]
		j := i
		for j > 0 && less(&e, &h[j-1]) {
			h[j] = h[j-1]
			j--
		}
		h[j] = e
		if budget -= i - j; budget < 0 {
			return i + 1
		}
	}
	return len(h)
}

// merge merges h's sorted halves h[:mid] and h[mid:] in place, through
// the calendar's scratch array: the left half's events that come before
// the right's first and the right's that come after the left's last stay
// where they are.
func (c *Calendar) merge(h []Event, mid int) {
	if !less(&h[mid], &h[mid-1]) {
		return // already in order
	}
	lo, hi := 0, len(h)
	for lo < mid && !less(&h[mid], &h[lo]) {
		lo++
	}
	for hi > mid && !less(&h[hi-1], &h[mid-1]) {
		hi--
	}
	if lo == mid || hi == mid {
		return // already in order
	}
	c.scratch = append(c.scratch[:0], h[lo:mid]...)
	a, i, j, k := c.scratch, 0, mid, lo
	for i < len(a) && j < hi {
		if less(&h[j], &a[i]) {
			h[k] = h[j]
			j++
		} else {
			h[k] = a[i]
			i++
		}
		k++
	}
	copy(h[k:], a[i:]) // what is left of the right half is in place
}

// grow returns a full bucket's events in an array of twice its capacity
// (at least keepCap), a spare one when there is one.
func (c *Calendar) grow(h []Event) []Event {
	n := append(c.take(bits.Len(uint(max(2*cap(h), keepCap)))-1), h...)
	if cap(h) >= keepCap {
		// Also keepCap's own class: an emptied bucket is left with none
		// and takes one back when it fills again (it made a new one at
		// every refill, 48 allocations per 1000 events in steady state).
		c.release(h)
	}
	return n
}

// take returns an empty array of capacity 2^k, a spare one when there is
// one.
func (c *Calendar) take(k int) []Event {
	if k < len(c.spare) && len(c.spare[k]) > 0 {
		last := len(c.spare[k]) - 1
		n := c.spare[k][last]
		c.spare[k] = c.spare[k][:last]
		return n
	}
	return make([]Event, 0, 1<<k)
}

// release keeps an array of capacity 2^k, k >= log2(keepCap), for reuse.
func (c *Calendar) release(h []Event) {
	k := bits.Len(uint(cap(h))) - 1
	for len(c.spare) <= k {
		c.spare = append(c.spare, nil)
	}
	c.spare[k] = append(c.spare[k], h[:0])
}

// nextBucket finds the first non-empty bucket at or after the cursor.
func (c *Calendar) nextBucket() int64 {
	nb := c.mask + 1
	i := c.cur & c.mask
	for scanned := int64(0); scanned < nb; {
		w := c.bits[i>>6] >> (i & 63)
		if w != 0 {
			step := int64(bits.TrailingZeros64(w))
			return c.cur + scanned + step
		}
		adv := 64 - (i & 63)
		scanned += adv
		i = (i + adv) & c.mask
	}
	return -1
}

// first sorts the wheel's earliest non-empty bucket, b, unless it is
// the one being popped, and returns its next event.
func (c *Calendar) first(b int64) *Event {
	h := c.buckets[b&c.mask]
	if b != c.active {
		if c.active >= 0 && c.lateLen() > 0 {
			// Sorted by PeekTime, and an earlier bucket filled since:
			// nothing was popped from it, it takes its late events back.
			i := c.active & c.mask
			c.buckets[i] = c.lateTake(c.buckets[i])
		}
		h = c.sortBucket(h, true)
		c.buckets[b&c.mask] = h
		c.active, c.head, c.act, c.run = b, 0, h, nil
	}
	if len(c.late)|len(c.lateNew) != 0 { // most calls find none: no call
		if t := c.lateTop(); t != nil && (c.head == len(h) || less(t, &h[c.head])) {
			return t
		}
	}
	return &h[c.head]
}

// Pop removes and returns the earliest event. It panics when empty.
func (c *Calendar) Pop() Event {
	if c.Len() == 0 {
		panic("des: Pop from an empty calendar")
	}
	return *c.PopBefore(Never)
}

// PopBefore removes the earliest event if it is before end and returns
// it, valid until the next pop (pushes leave it be); nil when there is
// none (a window of a partitioned simulation is over, or its horizon
// reached). Inlined: most events come from the sorted bucket being popped
// with nothing to check (refast), which took a packet run's loop about 50
// instructions an event through popBefore; returned by pointer, not as a
// 32-byte value the loop copied twice through the stack (17 instructions
// an event).
func (c *Calendar) PopBefore(end Time) *Event {
	if r, i := c.run, uint(c.head); i < uint(len(r)) {
		top := &r[i]
		if top.At >= end {
			return nil
		}
		c.head++
		c.inWheel--
		c.pops++
		return top
	}
	return c.popBefore(end)
}

// popBefore is PopBefore's general case: the event it pops is copied to
// c.popped, as the array it was in may be handed to another bucket (an
// emptied bucket's, the late events') before the next pop. One pass:
// peeking first and then popping scanned for the bucket twice, a tenth of
// a partitioned run.
func (c *Calendar) popBefore(end Time) *Event {
	e, ok := c.popSlow(end)
	if !ok {
		return nil
	}
	c.popped = e
	return &c.popped
}

// popSlow is popBefore by value.
func (c *Calendar) popSlow(end Time) (e Event, ok bool) {
	if c.active >= 0 && c.active == c.cur {
		// The sorted bucket being popped is the wheel's first (nothing
		// can be pushed before the cursor): its head, unless a late or a
		// far event comes first, without the scan for it and its re-check.
		i := c.active & c.mask
		h := c.buckets[i]
		var top *Event // not nil: an emptied bucket is no longer active
		var lt *Event
		if len(c.late)|len(c.lateNew) != 0 { // most pops find none: no call
			lt = c.lateTop()
		}
		late := lt != nil && (c.head == len(h) || less(lt, &h[c.head]))
		if late {
			top = lt
		} else {
			top = &h[c.head]
		}
		if c.far.Len() == 0 || !less(&c.far.h[0], top) {
			if top.At >= end {
				return Event{}, false
			}
			e = *top
			c.inWheel--
			c.pops++
			if late {
				c.latePop()
			} else {
				c.head++
			}
			c.settle(i, h)
			return e, true
		}
	}
	if c.inWheel == 0 {
		return c.popFarBefore(end)
	}
	if c.visits++; c.visits == retuneVisits || c.pops >= retuneVisits*widenBelow {
		if c.retune(); c.inWheel == 0 {
			return c.popFarBefore(end) // all beyond a narrower wheel
		}
	}
	b := c.nextBucket()
	top := c.first(b)
	if c.far.Len() > 0 && less(&c.far.h[0], top) {
		return c.popFarBefore(end)
	}
	if top.At >= end {
		return Event{}, false
	}
	e = *top
	c.cur = b
	c.inWheel--
	c.pops++
	i := b & c.mask
	h := c.buckets[i]
	if c.head < len(h) && top == &h[c.head] {
		c.head++
	} else {
		c.latePop()
	}
	c.settle(i, h)
	return e, true
}

// settle follows a pop from bucket i, h, the active one, or from its
// late events: the bucket is retired when nothing is left of it, its late
// events take its place when only they are left (relate), and the run
// PopBefore pops without checks is set again.
func (c *Calendar) settle(i int64, h []Event) {
	if c.head == len(h) {
		if c.lateLen() == 0 {
			c.emptied(i, h)
			return
		}
		c.relate(i, h)
	}
	c.refast()
}

// relate moves the late events of bucket i, h, every event of which is
// popped, into its array in their order, to be popped as its events are,
// mostly without checks (refast). In SimAI's micro AllReduce on 128 GPUs
// a ninth of the events are late and 95% of them come after every event
// of their bucket (a serialization's end a quarter nanosecond after the
// instant that made it): popped from the late list, each took popBefore's
// general path.
func (c *Calendar) relate(i int64, h []Event) {
	if len(c.lateNew) > 0 {
		c.absorbLate() // every late event, lateNew's too, sorted into late
	}
	l := c.late[c.lateHead:]
	if cap(h) < len(l) {
		if cap(h) >= keepCap {
			c.release(h)
		}
		h = c.take(bits.Len(uint(len(l) - 1)))
	}
	h = append(h[:0], l...)
	c.late, c.lateHead = c.late[:0], 0
	c.buckets[i], c.act, c.head = h, h, 0
}

// refast sets how many of the active bucket's next events PopBefore pops
// without checks: those before its last (whose pop empties the bucket),
// before the first late event and before the far heap's first.
func (c *Calendar) refast() {
	n := len(c.act) - 1
	if c.head >= n {
		c.run = nil
		return
	}
	if t := c.lateTop(); t != nil {
		n = c.head + before(c.act[c.head:n], t)
	}
	if c.far.Len() > 0 {
		n = c.head + before(c.act[c.head:n], &c.far.h[0])
	}
	c.run = c.act[:n]
}

// before is the number of h's first events, h sorted, that come before x.
func before(h []Event, x *Event) int {
	if len(h) == 0 || less(&h[len(h)-1], x) {
		return len(h) // the far heap's first, mostly: no search
	}
	lo, hi := 0, len(h)-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if less(&h[m], x) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// retune doubles or halves the buckets' width by the events popped a
// bucket since the last look (see retuneVisits).
func (c *Calendar) retune() {
	per := float64(c.pops) / float64(c.visits)
	c.pops, c.visits = 0, 0
	shift := c.shift
	for ; per < widenBelow && shift < c.minShift+maxWiden; shift++ {
		per *= 2 // a sparse run's events a bucket grow with its width
	}
	for ; per > narrowAbove && shift > c.minShift; shift-- {
		per /= 2
	}
	if shift != c.shift {
		c.rescale(shift)
	}
}

// rescale moves the wheel's events into buckets of 2^shift ps: the
// cursor's bucket is the one its start falls in, and an event beyond the
// new horizon goes to the far heap. Events popped from the bucket being
// popped stay popped.
//
// Past wideHorizon doublings, a wider bucket means fewer of them: the
// horizon stops growing. Widened 64 times, all 2^14 buckets of a packet
// run spanned a millisecond while its events lay a few microseconds
// ahead, and the cursor swept their 4.6 MB all the same, out of cache at
// every bucket (PFC incasts on 128 hosts: 5-18% of their CPU). Kept at
// the horizon asked for, SimAI's micro AllReduce on 128 GPUs, widened
// less, sent events it had kept in the wheel to the far heap and ran 17%
// slower; four times that horizon it runs as before.
func (c *Calendar) rescale(shift uint) {
	mv := c.moving[:0]
	for w, word := range c.bits {
		for word != 0 {
			i := int64(w<<6 + bits.TrailingZeros64(word))
			word &= word - 1
			h := c.buckets[i]
			if c.active >= 0 && i == c.active&c.mask {
				mv = append(mv, h[c.head:]...)
			} else {
				mv = append(mv, h...)
			}
			c.buckets[i] = h[:0] // refilled below: releasing it allocated anew
		}
	}
	clear(c.bits)
	mv = c.lateTake(mv)
	c.cur = c.cur << c.shift >> shift
	c.shift, c.active, c.head, c.inWheel = shift, -1, 0, 0
	c.act, c.run = nil, nil
	c.mask = int64(max(len(c.buckets)>>max(0, int(shift-c.minShift)-wideHorizon), min(len(c.buckets), minWheel))) - 1
	for k := range mv {
		e := &mv[k]
		c.push(e.At, e.seq, e.Kind, e.Target, e.Arg)
	}
	c.moving = mv[:0]
}

// emptied retires bucket i, h, whose last event was just popped.
func (c *Calendar) emptied(i int64, h []Event) {
	c.bits[i>>6] &^= 1 << (i & 63)
	if cap(h) >= keepCap {
		// keepCap's own class too: a bucket kept the array it first
		// grew to, and wider buckets (retune) overflowing their slab
		// once each made one per bucket.
		c.release(h)
		c.buckets[i] = nil
	} else {
		c.buckets[i] = h[:0]
	}
	c.active, c.act, c.run = -1, nil, nil
}

// popFarBefore pops the far heap's head if there is one before end.
func (c *Calendar) popFarBefore(end Time) (Event, bool) {
	if c.far.Len() == 0 || c.far.h[0].At >= end {
		return Event{}, false
	}
	return c.popFar(), true
}

func (c *Calendar) popFar() Event {
	e := c.far.Pop()
	if b := int64(e.At) >> c.shift; b > c.cur {
		c.cur = b
	}
	return e
}

// PeekNear returns the kind and target of the event that will most likely
// pop next (the head of the sorted bucket being popped), cheaply and
// without scanning: a simulator reads ahead of its memory with it. ok is
// false when no bucket is being popped (the last pop emptied one).
func (c *Calendar) PeekNear() (kind uint16, target int32, ok bool) {
	if c.active < 0 {
		return 0, 0, false
	}
	e := c.first(c.active)
	return e.Kind, e.Target, true
}

// NearHead is the next event of the sorted bucket being popped, nil when
// there is none: the likely next pop (a late event, pushed into that
// bucket since it was sorted, may come first), as a hint to read ahead
// with, valid until the next Push or Pop. Inlined, where a call to a
// peek that looked for late events too took a packet run's loop 40
// instructions an event, as many as the pop.
func (c *Calendar) NearHead() *Event {
	if a, i := c.act, uint(c.head); i < uint(len(a)) {
		return &a[i]
	}
	return nil
}

// PeekSeq is the time and number of the next event (ok false when
// empty): a simulator holding a sorted list of its own (one head of it in
// the calendar at a time) can run the list's next entries without pushing
// and popping each, while they still come first.
func (c *Calendar) PeekSeq() (at Time, seq uint64, ok bool) {
	var top *Event
	if c.inWheel > 0 {
		b := c.active
		if b < 0 || b != c.cur {
			b = c.nextBucket()
		}
		top = c.first(b)
	}
	if c.far.Len() > 0 && (top == nil || less(&c.far.h[0], top)) {
		top = &c.far.h[0]
	}
	if top == nil {
		return 0, 0, false
	}
	return top.At, top.seq, true
}

// PeekTime is the time of the next event, or Never when empty.
func (c *Calendar) PeekTime() Time {
	t := Never
	if c.inWheel > 0 {
		t = c.first(c.nextBucket()).At
	}
	if c.far.Len() > 0 && c.far.h[0].At < t {
		t = c.far.h[0].At
	}
	return t
}
