package packet

import "github.com/fabricsim/fabricsim/pkg/cc"

// intRecords are the INT records data packets carry under an algorithm
// that uses INT (HPCC): each switch egress appends its hop, the sender's
// congestion control reads them from the acknowledgement. A packet holds
// its record's index (packet.intI, -1 when none); records are reused.
type intRecords struct {
	hops [][cc.MaxHops]cc.IntHop
	n    []uint8
	free []int32
}

// alloc returns an empty record.
func (r *intRecords) alloc() int32 {
	if k := len(r.free); k > 0 {
		i := r.free[k-1]
		r.free = r.free[:k-1]
		r.n[i] = 0
		return i
	}
	r.hops = append(r.hops, [cc.MaxHops]cc.IntHop{})
	r.n = append(r.n, 0)
	return int32(len(r.hops) - 1)
}

// release gives record i back.
func (r *intRecords) release(i int32) { r.free = append(r.free, i) }

// add appends hop h to record i, unless it is full.
func (r *intRecords) add(i int32, h cc.IntHop) {
	if n := r.n[i]; int(n) < cc.MaxHops {
		r.hops[i][n] = h
		r.n[i] = n + 1
	}
}
