package des

import (
	"cmp"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// The calendar pops exactly what the heap pops, for random schedules that
// mix near events (same bucket, next buckets), equal times and events far
// beyond the wheel's horizon.
func TestCalendarMatchesQueue(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		c := NewCalendar(4, 6) // 16 ps buckets, 64 of them: a 1 ns horizon
		var q Queue
		now := Time(0)
		for step := 0; step < 20000; step++ {
			if q.Len() == 0 || rng.IntN(3) > 0 {
				var d Time
				switch rng.IntN(4) {
				case 0:
					d = 0
				case 1:
					d = Time(rng.IntN(40))
				case 2:
					d = Time(rng.IntN(2000))
				default:
					d = Time(rng.IntN(1 << 20))
				}
				k, tg, a := uint16(rng.IntN(9)), int32(rng.IntN(100)), int64(step)
				q.Push(now+d, k, tg, a)
				c.Push(now+d, k, tg, a)
				continue
			}
			if q.PeekTime() != c.PeekTime() {
				t.Fatalf("seed %d step %d: peek %d vs %d", seed, step, q.PeekTime(), c.PeekTime())
			}
			if at, seq, ok := c.PeekSeq(); !ok || at != q.h[0].At || seq != q.h[0].seq {
				t.Fatalf("seed %d step %d: PeekSeq gave (%d, %d, %v), the heap's head is (%d, %d)", seed, step, at, seq, ok, q.h[0].At, q.h[0].seq)
			}
			k, tg, ok := c.PeekNear()
			farFirst := ok && c.far.Len() > 0 && less(&c.far.h[0], c.first(c.active))
			var near Event
			nearOK := false
			if e := c.NearHead(); e != nil {
				near, nearOK = *e, true
			}
			noLate := c.lateLen() == 0
			if noLate && nearOK != ok {
				t.Fatalf("seed %d step %d: NearHead gave an event: %v, PeekNear: %v", seed, step, nearOK, ok)
			}
			a, b := q.Pop(), c.Pop()
			// Without late events, NearHead is PeekNear's event.
			if nearOK && noLate && !farFirst && b != near {
				t.Fatalf("seed %d step %d: NearHead said %+v, Pop gave %+v", seed, step, near, b)
			}
			// The cursor's bucket holds the wheel's earliest events, so
			// its head is next unless the far heap's is earlier.
			if ok && !farFirst && (b.Kind != k || b.Target != tg) {
				t.Fatalf("seed %d step %d: PeekNear said kind %d target %d, Pop gave %+v", seed, step, k, tg, b)
			}
			if a != b {
				t.Fatalf("seed %d step %d: heap popped %+v, calendar %+v", seed, step, a, b)
			}
			now = a.At
		}
		for q.Len() > 0 {
			if a, b := q.Pop(), c.Pop(); a != b {
				t.Fatalf("seed %d drain: %+v vs %+v", seed, a, b)
			}
		}
		if c.Len() != 0 {
			t.Fatalf("calendar holds %d events after the heap drained", c.Len())
		}
	}
}

func BenchmarkCalendar(b *testing.B) {
	c := NewCalendar(10, 16)
	rng := rand.New(rand.NewPCG(1, 2))
	now := Time(0)
	for i := 0; i < 50000; i++ {
		c.Push(Time(rng.IntN(2_000_000)), 0, 0, 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := c.Pop()
		now = e.At
		c.Push(now+Time(500_000+rng.IntN(1_500_000)), 0, 0, 0)
	}
}

// An event pushed late with its own number pops where it would have had
// it been pushed at once: a heap given every event at once is the
// reference.
func TestCalendarReservedSeq(t *testing.T) {
	for seed := uint64(0); seed < 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		c := NewCalendar(4, 6)
		var q Queue
		type held struct {
			at  Time
			seq uint64
			tg  int32
		}
		var later []held
		for i := 0; i < 3000; i++ {
			at := Time(rng.IntN(8)) * 100 // few distinct times: many ties
			if rng.IntN(2) == 0 {
				c.PushSeq(at, uint64(i), 1, int32(i), 0)
			} else {
				later = append(later, held{at, uint64(i), int32(i)})
			}
			q.Push(at, 1, int32(i), 0)
		}
		rng.Shuffle(len(later), func(i, j int) { later[i], later[j] = later[j], later[i] })
		for _, h := range later {
			c.PushSeq(h.at, h.seq, 1, h.tg, 0)
		}
		for q.Len() > 0 {
			a, b := q.Pop(), c.Pop()
			if a.At != b.At || a.Target != b.Target {
				t.Fatalf("seed %d: heap popped %d@%d, calendar %d@%d", seed, a.Target, a.At, b.Target, b.At)
			}
		}
	}
}

// Reserve mixes with Push: events reserved in push order, some given
// several numbers of which only the last is pushed, pop as a queue given
// each at its reservation (the fluid solver holds a drain that moved later
// until an earlier event of its flow pops, then pushes it so).
func TestCalendarReserve(t *testing.T) {
	for seed := uint64(0); seed < 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		c := NewCalendar(4, 6)
		var q Queue
		type held struct {
			at  Time
			seq uint64
			tg  int32
		}
		var later []held
		now := Time(0)
		for i := 0; i < 3000; i++ {
			at := now + Time(rng.IntN(8))*100 // few distinct times: many ties
			switch rng.IntN(3) {
			case 0:
				c.Push(at, 1, int32(i), 0)
				q.Push(at, 1, int32(i), 0)
			case 1: // a number taken for nothing: a superseded drain
				c.Reserve()
				q.seq++
			default:
				later = append(later, held{at, c.Reserve(), int32(i)})
				q.Push(at, 1, int32(i), 0)
			}
			if rng.IntN(50) == 0 { // push what is held, then pop a little
				for _, h := range later {
					c.PushSeq(h.at, h.seq, 1, h.tg, 0)
				}
				later = later[:0]
				for k := rng.IntN(20); k > 0 && q.Len() > 0; k-- {
					a, b := q.Pop(), c.Pop()
					if a.At != b.At || a.Target != b.Target {
						t.Fatalf("seed %d: queue popped %d@%d, calendar %d@%d", seed, a.Target, a.At, b.Target, b.At)
					}
					now = a.At
				}
			}
		}
		for _, h := range later {
			c.PushSeq(h.at, h.seq, 1, h.tg, 0)
		}
		if c.Pushed() != q.seq {
			t.Fatalf("seed %d: Pushed %d, want %d", seed, c.Pushed(), q.seq)
		}
		for q.Len() > 0 {
			a, b := q.Pop(), c.Pop()
			if a.At != b.At || a.Target != b.Target {
				t.Fatalf("seed %d: queue popped %d@%d, calendar %d@%d", seed, a.Target, a.At, b.Target, b.At)
			}
		}
	}
}

// A wave of events moving through the wheel (each bucket fills with a
// hundred events, then empties) must leave the calendar holding about the
// pending events' worth of arrays, not each bucket's peak.
func TestCalendarReleasesEmptiedBuckets(t *testing.T) {
	const buckets, burst = 1024, 100
	c := NewCalendar(4, 10)
	peak := 0
	for now := Time(0); now < 16*4*buckets; now += 16 {
		for k := range burst {
			c.Push(now+16*8, 1, int32(k), 0)
		}
		peak = max(peak, c.Len())
		for c.Len() > 0 && c.PeekTime() <= now {
			c.Pop()
		}
	}
	held := 0
	for _, b := range c.buckets {
		held += cap(b)
	}
	for _, class := range c.spare {
		for _, b := range class {
			held += cap(b)
		}
	}
	if bound := buckets*keepCap + 4*peak; held > bound {
		t.Errorf("calendar holds arrays for %d events after a peak of %d pending; want at most %d", held, peak, bound)
	}
}

// GrowFar makes room once: a million start times pushed beyond the
// horizon afterwards never move the far heap's array (each growth copied
// it, a quarter of a traffic pattern's event loop), and still pop in order.
func TestCalendarGrowFar(t *testing.T) {
	c := NewCalendar(10, 14)
	const n = 1 << 20
	c.GrowFar(n)
	if cap(c.far.h) < n {
		t.Fatalf("room for %d events after GrowFar(%d)", cap(c.far.h), n)
	}
	first := &c.far.h[:1][0]
	for i := range n {
		c.Push(Time(1e9+i*1000), 1, int32(i), 0) // 1 ms on: beyond the 16 us wheel
	}
	if &c.far.h[0] != first {
		t.Fatal("the far heap was reallocated after GrowFar")
	}
	for i := range n {
		if e := c.Pop(); e.Target != int32(i) {
			t.Fatalf("pop %d: target %d", i, e.Target)
		}
	}
}

// A bucket is sorted when the cursor reaches it (or PeekTime looks at
// it); events pushed into it afterwards, and into an earlier bucket after
// PeekTime sorted a later one, still pop in (At, push order). A bucket of
// 100k events at three times with equal-time pushes while it drains is
// the backend shape that an insertion into the sorted bucket would make
// quadratic: such pushes wait beside it (checked).
func TestCalendarSortedBucket(t *testing.T) {
	c := NewCalendar(4, 6)
	var q Queue
	push := func(at Time, tg int32) { c.Push(at, 1, tg, 0); q.Push(at, 1, tg, 0) }
	const n = 100_000
	for i := range n {
		push(Time(100+i%3), int32(i))
	}
	push(600, -1)
	if c.PeekTime() != 100 {
		t.Fatalf("PeekTime %d, want 100", c.PeekTime())
	}
	for i := 0; q.Len() > 0; i++ {
		if i%2 == 0 && i < n {
			push(c.PeekTime(), int32(n+i)) // into the sorted bucket
			if i == 0 && (c.lateLen() != 1 || len(c.buckets[c.active&c.mask]) != n) {
				// Not beside it: an insertion moves the bucket's tail.
				t.Fatalf("a push into the sorted bucket went into it (%d late, %d in the bucket)", c.lateLen(), len(c.buckets[c.active&c.mask]))
			}
		}
		a, b := q.Pop(), c.Pop()
		if a != b {
			t.Fatalf("pop %d: heap %+v, calendar %+v", i, a, b)
		}
	}
	// PeekTime sorts the bucket at 600; then an earlier bucket fills and
	// the one at 600 gets a late event: both still pop in order.
	push(600, 1)
	push(600, 2)
	if c.PeekTime() != 600 {
		t.Fatal("PeekTime")
	}
	push(600, 3)
	push(500, 4)
	push(600, 5)
	for q.Len() > 0 {
		if a, b := q.Pop(), c.Pop(); a != b {
			t.Fatalf("heap %+v, calendar %+v", a, b)
		}
	}
	if c.Len() != 0 || c.lateLen() != 0 {
		t.Fatalf("%d events (%d late) left", c.Len(), c.lateLen())
	}
}

// In steady state the calendar allocates nothing per event: buckets grow
// past keepCap and empty again, and their arrays go round the spares.
func TestCalendarZeroAllocs(t *testing.T) {
	c := NewCalendar(10, 10) // 1024 buckets of 1.024 ns
	rng := rand.New(rand.NewPCG(7, 8))
	now := Time(0)
	step := func() {
		e := c.Pop()
		now = e.At
		c.Push(now+Time(rng.IntN(1_000_000)), 0, 0, 0) // within the wheel
		if rng.IntN(4) == 0 {
			c.Push(now, 0, 0, 0) // into the bucket being popped
			c.Pop()
		}
	}
	for i := 0; i < 20000; i++ { // about 20 a bucket, often past keepCap
		c.Push(Time(rng.IntN(1_000_000)), 0, 0, 0)
	}
	for range 200_000 {
		step()
	}
	if allocs := testing.AllocsPerRun(100, func() {
		for range 1000 {
			step()
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per 1000 steps, want 0", allocs)
	}
}

// PopBefore pops what Pop would while it is before the end, from the
// wheel and from beyond its horizon, and leaves the rest.
func TestCalendarPopBefore(t *testing.T) {
	c := NewCalendar(4, 6) // 16 ps buckets, a 1 ns horizon
	for _, at := range []Time{5, 40, 40, 3000, 90} {
		c.Push(at, 0, int32(at), 0)
	}
	var got []Time
	for {
		e := c.PopBefore(1000)
		if e == nil {
			break
		}
		got = append(got, e.At)
	}
	if len(got) != 4 || got[0] != 5 || got[1] != 40 || got[2] != 40 || got[3] != 90 || c.Len() != 1 {
		t.Fatalf("popped %v before 1000 ps, %d left", got, c.Len())
	}
	if e := c.PopBefore(3000); e != nil {
		t.Fatal("popped the event at 3000 ps before 3000 ps")
	}
	if e := c.PopBefore(3001); e == nil || e.At != 3000 || c.Len() != 0 {
		t.Fatalf("PopBefore(3001): %v, %d left", e, c.Len())
	}
	if e := c.PopBefore(Never); e != nil {
		t.Fatal("popped from an empty calendar")
	}
}

// The event PopBefore returns stays as popped until the next pop, whatever
// is pushed meanwhile (a handler's pushes): late events into the bucket
// being popped, and, after its last event, events into a bucket that
// grows into the array the emptied one handed back.
func TestCalendarPoppedStays(t *testing.T) {
	c := NewCalendar(10, 4) // 1024 ps buckets, 16 of them
	for i := range 40 {
		c.Push(Time(1024+20*i), 0, int32(i), 0)
	}
	last := Time(0)
	for k := 0; c.Len() > 0; k++ {
		e := c.PopBefore(Never)
		want := *e
		switch {
		case k < 5:
			c.Push(e.At+1, 1, -1, 0)
		case e.Target == 39:
			for j := range 40 {
				c.Push(4*1024+Time(j), 2, -1, 0)
			}
		}
		if *e != want || e.At < last {
			t.Fatalf("pop %d: %+v after pushes, popped as %+v (last time %d)", k, *e, want, last)
		}
		last = e.At
	}
}

// The run of a sorted bucket that PopBefore pops without checks stops at
// the end asked for, at a late event pushed into it and before its last
// event, and the events still pop in time order.
func TestCalendarFastRun(t *testing.T) {
	c := NewCalendar(10, 4) // 1024 ps buckets, 16 of them
	var want []Time
	for i := range 100 {
		at := Time(1024 + 5*i) // all in bucket 1
		c.Push(at, 0, int32(i), 0)
		want = append(want, at)
	}
	var got []Time
	pop := func(end Time) bool {
		e := c.PopBefore(end)
		if e != nil {
			got = append(got, e.At)
		}
		return e != nil
	}
	pop(Never)
	if len(c.run) != len(want)-1 || c.head != 1 {
		t.Fatalf("after the bucket's first pop: head %d, run to %d; want 1 and %d", c.head, len(c.run), len(want)-1)
	}
	for pop(1024 + 5*50) {
	}
	if len(got) != 50 || c.Len() != 50 {
		t.Fatalf("PopBefore(%d) popped %d events, left %d; want 50 and 50", 1024+5*50, len(got), c.Len())
	}
	late := Time(1024 + 5*60 + 1)
	c.Push(late, 0, -1, 0)
	want = append(want, late)
	slices.Sort(want)
	if len(c.run) != 61 {
		t.Fatalf("a late event at %d ps cut the run at %d, want 61", late, len(c.run))
	}
	for pop(Never) {
	}
	if !slices.Equal(got, want) || c.Len() != 0 {
		t.Fatalf("popped %v, want %v (%d left)", got, want, c.Len())
	}
}

// Late events left when every event of their bucket is popped take its
// place (relate): they pop in order, and through the unchecked run.
func TestCalendarRelate(t *testing.T) {
	c := NewCalendar(10, 4) // 1024 ps buckets, 16 of them
	for i := range 10 {
		c.Push(1024, 0, int32(i), 0) // ties, each pushing one late event
	}
	var got []int32
	fast := 0
	for c.Len() > 0 {
		unchecked := c.head < len(c.run)
		e := c.PopBefore(Never)
		if unchecked && e.Target >= 100 {
			fast++
		}
		got = append(got, e.Target)
		if e.Target < 10 {
			c.Push(1024+250, 0, e.Target+100, 0)
		}
	}
	var want []int32
	for i := range int32(10) {
		want = append(want, i)
	}
	for i := range int32(10) {
		want = append(want, 100+i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
	// Nine moved into the bucket after its last pop (the tenth was pushed
	// then), the first eight of them popped without checks.
	if fast != 8 {
		t.Fatalf("%d late events popped without checks, want 8", fast)
	}
}

// Buckets numbered by the caller pop in (At, number) order however their
// events arrive: sorted, reversed runs (as makers' runs of simultaneous
// events arrive), random, or nearly sorted, for sizes either side of
// sortEvents' run length and its insertion budget.
func TestCalendarSortsNumberedBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{1, 2, 15, 16, 17, 31, 32, 33, 64, 100, 255, 256, 600, 5000} {
		for shape := range 4 {
			c := NewCalendar(10, 8) // one bucket holds times 1024 to 2047
			var want []Event
			for i := range n {
				var seq uint64
				switch shape {
				case 0:
					seq = uint64(i)
				case 1: // runs of 16, the runs in reverse
					seq = uint64((n/16-i/16)<<8 | i%16)
				case 2:
					seq = rng.Uint64()
				default: // sorted but for neighbours swapped
					seq = uint64(i ^ rng.IntN(2))
				}
				at := Time(1024 + rng.IntN(3)) // mostly exact ties
				seq = seq<<8 | uint64(i&0xff)  // unique
				c.PushSeq(at, seq, 1, int32(i), 0)
				want = append(want, Event{At: at, seq: seq, Kind: 1, Target: int32(i)})
			}
			slices.SortFunc(want, func(a, b Event) int {
				return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.seq, b.seq))
			})
			for i, w := range want {
				if e := c.Pop(); e != w {
					t.Fatalf("%d events, shape %d: pop %d is %+v, want %+v", n, shape, i, e, w)
				}
			}
		}
	}
}

// The buckets widen through a sparse stretch (events microseconds apart,
// about one a bucket) and narrow again through a dense one (hundreds of
// events a bucket), and at every width the calendar pops exactly what
// the heap pops.
func TestCalendarRetunes(t *testing.T) {
	c := NewCalendar(10, 10)
	var q Queue
	rng := rand.New(rand.NewPCG(5, 6))
	now := Time(0)
	widest := c.shift
	for phase := range 4 {
		sparse := phase%2 == 0
		for range 300_000 {
			for q.Len() < 64 || (!sparse && q.Len() < 4096 && rng.IntN(2) == 0) {
				d := Time(rng.IntN(4096)) // dense: a few ns ahead, many ties
				if sparse {
					d = Time(rng.IntN(2_000_000)) // up to 2 us, past a 1 us horizon
				}
				k, tg := uint16(rng.IntN(9)), int32(rng.IntN(100))
				q.Push(now+d, k, tg, 0)
				c.Push(now+d, k, tg, 0)
			}
			a, b := q.Pop(), c.Pop()
			if a != b {
				t.Fatalf("phase %d (sparse %v, shift %d): heap popped %+v, calendar %+v", phase, sparse, c.shift, a, b)
			}
			now = a.At
		}
		widest = max(widest, c.shift)
		// Wider buckets, fewer of them: past wideHorizon doublings the
		// horizon stays put, down to minWheel buckets.
		w := int(c.shift - c.minShift)
		if h, want := (c.mask+1)<<c.shift, int64(max(1024>>max(0, w-wideHorizon), minWheel))<<c.shift; h != want {
			t.Fatalf("phase %d: buckets of 2^%d ps span %d ps, want %d", phase, c.shift, h, want)
		}
		if sparse && c.shift == c.minShift {
			t.Fatalf("phase %d: a sparse run left the buckets at 2^%d ps", phase, c.shift)
		}
		if !sparse && c.shift != c.minShift {
			t.Fatalf("phase %d: a dense run left the buckets at 2^%d ps, want 2^%d", phase, c.shift, c.minShift)
		}
	}
	t.Logf("widest buckets 2^%d ps", widest)
}

// Events pushed into the bucket being popped (late: at the instant being
// popped or a few ps ahead), numbered out of push order as a backend that
// numbers its own events does, pop as the heap pops them: in batches that
// are merged with the late events left, and back into their bucket when
// PeekTime sorted a later one first.
func TestCalendarLateEvents(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		c := NewCalendar(10, 4) // 1024 ps buckets, 16 of them
		var q Queue
		used := map[uint64]bool{}
		push := func(at Time) {
			seq := rng.Uint64() >> 1
			for used[seq] {
				seq = rng.Uint64() >> 1
			}
			used[seq] = true
			c.PushSeq(at, seq, 1, int32(len(used)), 0)
			q.pushEvent(Event{At: at, seq: seq, Kind: 1, Target: int32(len(used))})
		}
		for range 200 {
			push(Time(1024 + rng.IntN(1024)))
		}
		now := Time(0)
		for step := 0; q.Len() > 0; step++ {
			if step < 5000 {
				for range rng.IntN(4) {
					// Into the bucket being popped, mostly, or the next.
					push(now + Time(rng.IntN(3)*rng.IntN(700)))
				}
				if rng.IntN(50) == 0 {
					c.PeekTime()
				}
			}
			a, b := q.Pop(), c.Pop()
			if a != b {
				t.Fatalf("seed %d step %d: heap popped %+v, calendar %+v", seed, step, a, b)
			}
			now = a.At
		}
		if c.Len() != 0 || c.lateLen() != 0 {
			t.Fatalf("seed %d: %d events (%d late) left", seed, c.Len(), c.lateLen())
		}
	}
}

// The slot sort orders buckets numbered by maker as a packet simulator
// numbers them (a class, the maker XOR a hash of the time, the maker's
// count) exactly as a stable sort by (At, number) does, whatever order
// the makers come in; where its conditions fail (too many groups, keys
// too spread, a maker's events out of order) it declines and the merge
// sort takes the bucket.
func TestCalendarSlotSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	num := func(class, maker, count uint64) uint64 {
		return class<<(slotShift+slotBits) | maker<<slotShift | count
	}
	for _, tc := range []struct {
		name  string
		fast  bool
		build func() []Event
	}{
		{"makers XOR-permuted, runs of 5", true, func() []Event {
			var h []Event
			d := uint64(rng.IntN(256))
			for m := range uint64(128) {
				for k := range uint64(5) {
					h = append(h, Event{At: 1000, seq: num(7, 0x5a5a00|m^d, 100+k)})
				}
			}
			return h
		}},
		{"two times, two classes, interleaved", true, func() []Event {
			var h []Event
			for m := range uint64(256) {
				at := Time(1020 - 20*(m/128))
				h = append(h, Event{At: at, seq: num(m&1, 0x123400|m^0x55, uint64(rng.IntN(4)))})
			}
			// One maker's later events, after the others.
			h = append(h, Event{At: 1000, seq: num(0, 0x123400, 9)}, Event{At: 1000, seq: num(0, 0x123400, 10)})
			return h
		}},
		{"equal numbers keep their order", true, func() []Event {
			var h []Event
			for i := range 64 {
				h = append(h, Event{At: 1000, seq: num(1, uint64(63-i/2), 0), Target: int32(i)})
			}
			return h
		}},
		{"a maker's events out of order", false, func() []Event {
			var h []Event
			for m := range uint64(40) {
				h = append(h, Event{At: 1000, seq: num(0, m, 5)})
			}
			return append(h, Event{At: 1000, seq: num(0, 3, 4)})
		}},
		{"keys too spread", false, func() []Event {
			var h []Event
			for range 40 {
				h = append(h, Event{At: 1000, seq: num(0, uint64(rng.IntN(slotMask)), 0)})
			}
			return h
		}},
		{"too many times", false, func() []Event {
			var h []Event
			for i := range 40 {
				h = append(h, Event{At: Time(1000 + 40 - i), seq: num(0, 1, 0)})
			}
			return h
		}},
	} {
		for _, own := range []bool{false, true} {
			c := NewCalendar(10, 8)
			h := tc.build()
			orig := slices.Clone(h)
			if own {
				h = append(c.take(bits.Len(uint(2*len(h)))), h...)
			}
			want := slices.Clone(h)
			slices.SortStableFunc(want, func(a, b Event) int {
				return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.seq, b.seq))
			})
			_, fast := c.slotSort(slices.Clone(h), false)
			if fast != tc.fast {
				t.Errorf("%s: slot sort took it %v, want %v", tc.name, fast, tc.fast)
			}
			if got := c.sortBucket(h, own); !slices.Equal(got, want) {
				t.Errorf("%s (own %v): sorted wrongly", tc.name, own)
			}
			if own {
				// A bucket array append grew past a power of two.
				h = append(make([]Event, 0, len(orig)+len(orig)/2+1), orig...)
				if got := c.sortBucket(h, own); !slices.Equal(got, want) {
					t.Errorf("%s (capacity %d): sorted wrongly", tc.name, cap(h))
				}
			}
			if slices.ContainsFunc(c.slotHead, func(j int32) bool { return j != 0 }) {
				t.Fatalf("%s: slots left set", tc.name)
			}
		}
	}
}
