package packet

import "slices"

// seqSet holds, per queue pair, a sorted set of packet sequence numbers:
// the packets a receiver placed beyond its next expected byte (per-packet
// routing, TRANSPORT sack), or the packets a sender knows were SACKed.
// Most pairs have none, so the lists live in a map and are recycled.
type seqSet struct {
	of   map[int32][]int64
	free [][]int64
}

func newSeqSet() *seqSet { return &seqSet{of: map[int32][]int64{}} }

// add records seq for queue pair qi; false when it was already there.
func (o *seqSet) add(qi int32, seq int64) bool {
	l, ok := o.of[qi]
	if !ok && len(o.free) > 0 {
		l = o.free[len(o.free)-1]
		o.free = o.free[:len(o.free)-1]
	}
	i, found := slices.BinarySearch(l, seq)
	if found {
		return false
	}
	o.of[qi] = slices.Insert(l, i, seq)
	return true
}

// advance moves next over the packets held contiguously after it (each
// pay bytes, the last one up to size), drops what it passed, and returns
// the new next.
func (o *seqSet) advance(qi int32, next, pay, size int64) int64 {
	l := o.of[qi]
	k := 0
	for ; k < len(l) && l[k] <= next; k++ {
		if l[k] == next {
			next += min(pay, size-next)
		}
	}
	o.dropFront(qi, l, k)
	return next
}

// trim drops queue pair qi's entries below the given sequence.
func (o *seqSet) trim(qi int32, below int64) {
	l := o.of[qi]
	k, _ := slices.BinarySearch(l, below)
	o.dropFront(qi, l, k)
}

// dropFront removes queue pair qi's first k entries, recycling an emptied list.
func (o *seqSet) dropFront(qi int32, l []int64, k int) {
	if k == 0 {
		return
	}
	if l = l[:copy(l, l[k:])]; len(l) == 0 {
		o.free = append(o.free, l)
		delete(o.of, qi)
		return
	}
	o.of[qi] = l
}

// clear forgets queue pair qi's entries (the pair is done or reused).
func (o *seqSet) clear(qi int32) {
	if l, ok := o.of[qi]; ok {
		o.free = append(o.free, l[:0])
		delete(o.of, qi)
	}
}
