// Package des is the discrete-event core shared by fabricsim's backends:
// simulated time in integer picoseconds and an event queue with
// deterministic tie-breaking.
//
// Events are small value types kept in a calendar (a timing wheel of
// buckets, a 4-ary heap beyond its horizon), so Push and Pop allocate
// nothing once the arrays have grown to the peak queue length.
// Backends dispatch on Event.Kind in a switch: no interfaces or closures in
// the inner loop.
package des

import (
	"math"
	"slices"
	"strconv"
)

// Time is simulated time in picoseconds. int64 picoseconds reach 106 days,
// far beyond any collective.
type Time int64

// Units of Time.
const (
	Picosecond  Time = 1
	Nanosecond  Time = 1000
	Microsecond Time = 1000 * Nanosecond
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// Never is a time after every event; use it for "not scheduled".
const Never Time = math.MaxInt64

// Add returns t + d for d >= 0, saturating at Never instead of wrapping
// around, so absurd inputs (a delay of 2^63 ps) cannot schedule into the
// past.
func (t Time) Add(d Time) Time {
	if d > Never-t {
		return Never
	}
	return t + d
}

// Ns converts to nanoseconds for traces, rounding half away from zero so a
// 1500 ps flow reads 2 ns rather than 1.
func (t Time) Ns() int64 {
	q, r := int64(t/1000), int64(t%1000)
	switch {
	case r >= 500:
		q++
	case r <= -500:
		q--
	}
	return q
}

// BoundNs is d, a lower bound on the interval start..end (an ideal FCT),
// in nanoseconds: to nearest as Ns, but never above the interval's length
// in rounded ends when d is not above it in ps, so that rounding each end
// on its own cannot read as a slowdown below 1.
func BoundNs(d, start, end Time) int64 {
	ns := d.Ns()
	if d <= end-start {
		ns = min(ns, end.Ns()-start.Ns())
	}
	return ns
}

// Seconds converts to float seconds (for summaries and rates).
func (t Time) Seconds() float64 { return float64(t) * 1e-12 }

// FromSeconds converts float seconds to the nearest picosecond, saturating
// at Never (also for NaN, which only a zero rate could produce).
func FromSeconds(s float64) Time {
	ps := math.Round(s * 1e12)
	if !(ps < math.MaxInt64) {
		return Never
	}
	return Time(ps)
}

// TransferTime is the time to push size bytes through bps bit/s, rounded
// to the nearest picosecond. Every backend uses it so that the same bytes
// at the same rate take exactly the same time everywhere.
func TransferTime(size int64, bps float64) Time {
	if size <= 0 {
		return 0
	}
	return FromSeconds(float64(size) * 8 / bps)
}

// String prints the time with a unit chosen for reading: 1.5us, 3.2ms.
func (t Time) String() string {
	a := t
	if a < 0 {
		a = -a
	}
	var unit string
	var div float64
	switch {
	case a >= Second:
		unit, div = "s", float64(Second)
	case a >= Millisecond:
		unit, div = "ms", float64(Millisecond)
	case a >= Microsecond:
		unit, div = "us", float64(Microsecond)
	case a >= Nanosecond:
		unit, div = "ns", float64(Nanosecond)
	default:
		return strconv.FormatInt(int64(t), 10) + "ps"
	}
	return strconv.FormatFloat(float64(t)/div, 'g', 6, 64) + unit
}

// Event is one scheduled happening. Kind, Target and Arg are the backend's:
// typically Kind selects the handler, Target a flow or link index, and Arg
// a version number for lazy cancellation or a payload.
type Event struct {
	At     Time
	seq    uint64 // insertion order: equal times pop first-in first-out
	Kind   uint16
	Target int32
	Arg    int64
}

// Seq is the event's insertion number within its queue.
func (e *Event) Seq() uint64 { return e.seq }

// Queue is a priority queue of events ordered by (At, insertion order), so
// a run is deterministic whatever the heap's internal layout. The zero
// value is ready to use. (Backends use Calendar, which keeps one for its
// events beyond the horizon.)
type Queue struct {
	h   []Event
	seq uint64
}

// NewQueue returns a queue with room for capacity events before it grows.
func NewQueue(capacity int) *Queue { return &Queue{h: make([]Event, 0, capacity)} }

// Len is the number of pending events.
func (q *Queue) Len() int { return len(q.h) }

func less(a, b *Event) bool {
	return a.At < b.At || (a.At == b.At && a.seq < b.seq)
}

// Push schedules an event.
func (q *Queue) Push(at Time, kind uint16, target int32, arg int64) {
	q.pushEvent(Event{At: at, seq: q.seq, Kind: kind, Target: target, Arg: arg})
	q.seq++
}

// Grow makes room for n more events without reallocating: a backend
// that is about to push millions at once (a traffic pattern's start
// times, all released at time 0) spares the heap's repeated growth, which
// took a quarter of such a run's event loop.
func (q *Queue) Grow(n int) { q.h = slices.Grow(q.h, n) }

// pushEvent inserts an event whose seq is already set.
func (q *Queue) pushEvent(e Event) {
	q.h = heapPush(q.h, e)
}

// PeekTime is the time of the next event, or Never when the queue is empty.
func (q *Queue) PeekTime() Time {
	if len(q.h) > 0 {
		return q.h[0].At
	}
	return Never
}

// Pop removes and returns the earliest event (the first pushed among equal
// times). It panics on an empty queue: callers check Len or PeekTime.
func (q *Queue) Pop() Event {
	top := q.h[0]
	q.h = heapPop(q.h)
	return top
}

// --- 4-ary min-heap of events by (At, seq), shared by the queue and the
// calendar's late events. Sifting moves a hole instead of swapping. ---

// heapPush adds e to heap h.
func heapPush(h []Event, e Event) []Event {
	h = append(h, Event{})
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !less(&e, &h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	// Field by field: e was just stored to the stack in narrow pieces,
	// which a 16-byte copy cannot read until they reach the cache.
	d := &h[i]
	d.At, d.seq, d.Kind, d.Target, d.Arg = e.At, e.seq, e.Kind, e.Target, e.Arg
	return h
}

// heapPop removes the root of the non-empty heap h.
func heapPop(h []Event) []Event {
	n := len(h) - 1
	if n > 0 {
		heapDown(h[:n], &h[n])
	}
	return h[:n]
}

// heapDown replaces the root of the non-empty heap h by *e and sifts it
// down; e must not point into h. (By pointer: with the event passed by
// value, the since-removed BenchmarkLane took 27 ns/op instead of 23.)
func heapDown(h []Event, e *Event) {
	n := len(h)
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		// Smallest of up to four children.
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if less(&h[j], &h[m]) {
				m = j
			}
		}
		if !less(&h[m], e) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = *e
}
