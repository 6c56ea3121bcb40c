package stream

import "encoding/binary"

// The fast path decodes the common, well-formed case straight from the
// buffered input: a record frame whose kind is one of the known names
// (no string allocation), and a flow record that fits in the buffer. Any
// surprise (an unusual encoding, a record split across the buffer's end,
// a wrong type) returns false without consuming anything, and the strict
// decoder then reads the same bytes and reports the located error.

// Flows first: nearly every record is one.
var knownKinds = []string{KindFlow, KindHeader, KindTopology, KindPaths, KindGroup, KindCollective, KindTrailer}

// fastFrame reads "[2-array, fixstr kind]" when the kind is a known one.
func (r *Reader) fastFrame() (string, bool) {
	b, _ := r.br.Peek(2 + 10)
	if len(b) < 3 || b[0] != 0x92 || b[1]&0xe0 != 0xa0 {
		return "", false
	}
	n := int(b[1] & 0x1f)
	if len(b) < 2+n {
		return "", false
	}
	name := b[2 : 2+n]
	for _, k := range knownKinds {
		if string(name) == k {
			r.br.Discard(2 + n)
			return k, true
		}
	}
	return "", false
}

// fastFlow decodes a flow body positioned at the reader; ok is false
// when the strict path must do it.
func (r *Reader) fastFlow(f *Flow) bool {
	// A flow is a few dozen bytes; one with many deps may not fit, and then
	// the strict path reads it.
	b, _ := r.br.Peek(max(512, r.br.Buffered()))
	if len(b) == 0 {
		return false
	}
	n := int(b[0]) - 0x90
	if n != 10 && n != 11 {
		return false // pace_ps (12 fields) takes the strict path
	}
	p := 1
	var ok bool
	var v [5]int64
	for i := range v {
		if v[i], p, ok = fastInt(b, p); !ok {
			return false
		}
	}
	nd, p, ok := fastArrayLen(b, p)
	if !ok {
		return false
	}
	if need := p + 9*nd + 64; need > len(b) && nd > 15 {
		// A join's thousands of deps (a 2048-GPU AllToAll's, 4094 each)
		// took the strict path, 20% (0.31 of 1.54 s) of the decoder's CPU
		// there: peek far enough for the longest encoding of them all.
		b, _ = r.br.Peek(min(need, r.br.Size()))
	}
	deps := f.Deps[:0]
	for i := 0; i < nd; i++ {
		var d int64
		if d, p, ok = fastInt(b, p); !ok {
			return false
		}
		deps = append(deps, d)
	}
	var ch, ck, cc int64
	if ch, p, ok = fastInt(b, p); !ok {
		return false
	}
	if ck, p, ok = fastInt(b, p); !ok {
		return false
	}
	if cc, p, ok = fastInt(b, p); !ok {
		return false
	}
	if p >= len(b) || b[p]&0xe0 != 0xa0 {
		return false
	}
	sl := int(b[p] & 0x1f)
	p++
	if p+sl > len(b) {
		return false
	}
	conn := b[p : p+sl]
	p += sl
	var delay int64
	if n == 11 {
		if delay, p, ok = fastInt(b, p); !ok {
			return false
		}
	}
	fits := func(x int64) bool { return x >= -1<<31 && x <= 1<<31-1 }
	if !fits(v[2]) || !fits(v[3]) || !fits(ch) || !fits(ck) || !fits(cc) || v[4] < 0 || delay < 0 {
		return false // let the strict path name the field
	}
	*f = Flow{ID: v[0], Collective: v[1], Src: int32(v[2]), Dst: int32(v[3]), Size: v[4], Deps: deps,
		Channel: int32(ch), Chunk: int32(ck), ChunkCount: int32(cc), ConnType: internConn(conn), DelayPs: delay}
	r.br.Discard(p)
	return true
}

var connNames = []string{ConnRing, ConnTree, ConnNVLS, ConnPXNInit, ConnNet, ConnPXNFinal, ConnA2A, ConnP2P, ConnMSCCL, ConnDelay}

// internConn returns the constant for a known connection type, so flows do
// not allocate a string each.
func internConn(b []byte) string {
	for _, c := range connNames {
		if string(b) == c {
			return c
		}
	}
	return string(b)
}

// fastArrayLen reads a msgpack array header at b[p].
func fastArrayLen(b []byte, p int) (int, int, bool) {
	if p >= len(b) {
		return 0, p, false
	}
	c := b[p]
	var need int
	switch {
	case c&0xf0 == 0x90:
		return int(c & 0x0f), p + 1, true
	case c == 0xdc:
		need = 2
	case c == 0xdd:
		need = 4
	default:
		return 0, p, false
	}
	if p+1+need > len(b) {
		return 0, p, false
	}
	n := 0
	for _, x := range b[p+1 : p+1+need] {
		n = n<<8 | int(x)
	}
	return n, p + 1 + need, true
}

// fastInt reads a msgpack integer at b[p]. (A loop over the bytes of the
// wider encodings was 4.5% of micro's instructions at SIMULATOR_STOP_TIME=1ps.)
func fastInt(b []byte, p int) (int64, int, bool) {
	if p >= len(b) {
		return 0, p, false
	}
	c := b[p]
	switch {
	case c <= 0x7f:
		return int64(c), p + 1, true
	case c >= 0xe0:
		return int64(int8(c)), p + 1, true
	}
	q := b[p+1:]
	switch {
	case (c == 0xcc || c == 0xd0) && len(q) >= 1:
		if c == 0xd0 {
			return int64(int8(q[0])), p + 2, true
		}
		return int64(q[0]), p + 2, true
	case (c == 0xcd || c == 0xd1) && len(q) >= 2:
		u := binary.BigEndian.Uint16(q)
		if c == 0xd1 {
			return int64(int16(u)), p + 3, true
		}
		return int64(u), p + 3, true
	case (c == 0xce || c == 0xd2) && len(q) >= 4:
		u := binary.BigEndian.Uint32(q)
		if c == 0xd2 {
			return int64(int32(u)), p + 5, true
		}
		return int64(u), p + 5, true
	case (c == 0xcf || c == 0xd3) && len(q) >= 8:
		u := binary.BigEndian.Uint64(q)
		if c == 0xcf && u > 1<<63-1 {
			return 0, p, false
		}
		return int64(u), p + 9, true
	}
	return 0, p, false
}
