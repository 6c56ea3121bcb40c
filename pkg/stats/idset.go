package stats

// idSet remembers flow ids to refuse a trace that repeats one (a row
// written twice would count as two flows and twice the bytes). Backends
// number flows densely from 0, so a bitset holds them in n/8 bytes; ids
// outside its range go to a map.
type idSet struct {
	bits  []uint64
	other map[int64]struct{}
}

// denseIDs bounds the bitset: 2^30 ids, 128 MiB at most.
const denseIDs = 1 << 30

// add records id and reports whether it was new.
func (s *idSet) add(id int64) bool {
	if id >= 0 && id < denseIDs {
		w, b := id>>6, uint64(1)<<(id&63)
		if int(w) >= len(s.bits) {
			n := max(2*len(s.bits), int(w)+1, 1024)
			s.bits = append(s.bits, make([]uint64, n-len(s.bits))...)
		}
		if s.bits[w]&b != 0 {
			return false
		}
		s.bits[w] |= b
		return true
	}
	if s.other == nil {
		s.other = map[int64]struct{}{}
	}
	if _, ok := s.other[id]; ok {
		return false
	}
	s.other[id] = struct{}{}
	return true
}
