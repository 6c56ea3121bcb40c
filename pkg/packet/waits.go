package packet

import (
	"cmp"
	"slices"

	"github.com/fabricsim/fabricsim/pkg/des"
)

// Flows waiting for a time without an event each: the delay nodes
// released with the run (startList) and the transfers waiting out their
// step latency (stepLanes). Each keeps only its head in the calendar, with
// the number its own event would have had, so the order is the calendar's.

// start is a delay node released with the run (a traffic pattern's start
// time): when it ends, and the insertion number its event would have had.
type start struct {
	at   int64
	seq  uint64
	flow int32
}

// startList holds the delay nodes released with the run, by end, while
// collecting (begin) gathers them.
type startList struct {
	s       *Sim
	list    []start
	head    int
	collect bool
}

// reset empties the list, with room for n, and starts collecting.
func (sl *startList) reset(n int) {
	if cap(sl.list) < n {
		sl.list = make([]start, 0, n)
	}
	sl.list, sl.head, sl.collect = sl.list[:0], 0, true
}

// add collects delay node i ending at time at.
func (sl *startList) add(at int64, i int32) {
	sl.list = append(sl.list, start{at: at, seq: sl.s.seq(at), flow: i})
}

// queue sorts the delay nodes released with the run by end and puts
// the first in the calendar: a traffic pattern's million start times were
// a million events in the calendar's far heap, each push and pop a walk
// down it; in a list sorted as the calendar would pop them (by end, then
// number) only the head waits there.
func (sl *startList) queue() {
	slices.SortFunc(sl.list, func(a, b start) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) })
	if len(sl.list) > 0 {
		h := &sl.list[0]
		sl.s.q.PushSeq(des.Time(h.at), h.seq, evStart, 0, 0)
	}
}

// due ends the head delay node, whose event just popped.
func (sl *startList) due() {
	s := sl.s
	i := sl.pop()
	s.cur = s.flowNode(i)
	s.finishFlow(i)
}

// pop takes the head delay node, whose event just popped, and puts
// the next one in the calendar.
func (sl *startList) pop() int32 {
	i := sl.list[sl.head].flow
	sl.head++
	if sl.head < len(sl.list) {
		h := &sl.list[sl.head]
		sl.s.q.PushSeq(des.Time(h.at), h.seq, evStart, 0, 0)
	} else {
		sl.list, sl.head = sl.list[:0], 0
	}
	return i
}

// stepLane holds the flows that wait out their step latency until one
// time, in push order, each with the insertion number its own event would
// have had. Only the head is in the calendar: the flows of a collective
// released at once wait out a handful of distinct times, and an event each
// (32 bytes, in a few calendar buckets grown to millions) was the largest
// table of a 4096-GPU AllToAll.
//
// A lane holds one node's flows (its events' numbers are that node's, so
// push order is their order).
type stepLane struct {
	at   int64
	node int32
	flow []int32
	seq  []uint64
	head int
}

// laneKey finds a lane: its time and node.
type laneKey struct {
	at   int64
	node int32
}

// stepLanes are the flows waiting out their step latency, by the time it
// ends.
type stepLanes struct {
	s     *Sim
	lanes []stepLane
	at    map[laneKey]int32
	free  []int32
}

// push schedules flow f's evStepLat at time at.
func (sl *stepLanes) push(at int64, f int32) {
	s := sl.s
	seq := s.seq(at)
	key := laneKey{at, s.cur}
	k, ok := sl.at[key]
	if !ok {
		if n := len(sl.free); n > 0 {
			k = sl.free[n-1]
			sl.free = sl.free[:n-1]
		} else {
			k = int32(len(sl.lanes))
			sl.lanes = append(sl.lanes, stepLane{})
		}
		sl.lanes[k].at, sl.lanes[k].node = at, s.cur
		sl.at[key] = k
		s.q.PushSeq(des.Time(at), seq, evStepLat, k, 0)
	}
	l := &sl.lanes[k]
	l.flow = append(l.flow, f)
	l.seq = append(l.seq, seq)
}

// due opens the queue pairs of lane k's next flow, whose step latency is
// over.
func (sl *stepLanes) due(k int32) error {
	s := sl.s
	i := sl.pop(k)
	s.cur = s.flowNode(i)
	return s.nic.openQPs(i, true)
}

// pop takes the next flow of lane k, whose event just popped, and puts
// the lane's following flow in the calendar.
func (sl *stepLanes) pop(k int32) int32 {
	l := &sl.lanes[k]
	f := l.flow[l.head]
	l.head++
	if l.head < len(l.flow) {
		sl.s.q.PushSeq(des.Time(l.at), l.seq[l.head], evStepLat, k, 0)
		return f
	}
	delete(sl.at, laneKey{l.at, l.node})
	if cap(l.flow) > 1<<12 { // a big lane's arrays go back to the heap
		l.flow, l.seq = nil, nil
	}
	l.flow, l.seq, l.head = l.flow[:0], l.seq[:0], 0
	sl.free = append(sl.free, k)
	return f
}
