package packet

// pairTable holds the surrogate's predictions for the transfers it runs
// without queue pairs, by source, destination and NIC port choice. Up to
// densePairNodes nodes a (source, destination) slot leads to the pair's
// first prediction, which nearly every transfer of the pair shares: in a
// saturated surrogate's steady state the map lookup it replaces took a
// quarter of the time. Other port choices, and larger fabrics, use the
// map.
type pairTable struct {
	n     int32   // nodes when dense, else 0
	slot  []int32 // src*n+dst: index+1 in first
	first []pairEntry
	more  map[uint64]*pairPrediction // by pairKey
}

type pairEntry struct {
	port int32
	pp   pairPrediction
}

// densePairNodes bounds the dense slots (4 MiB of them).
const densePairNodes = 1024

func newPairTable(nodes int) pairTable {
	t := pairTable{more: map[uint64]*pairPrediction{}}
	if nodes <= densePairNodes {
		t.n = int32(nodes)
		t.slot = make([]int32, nodes*nodes)
	}
	return t
}

// get returns the prediction in place (read only, valid until the next
// put or reset): copied out, its 64 bytes were a tenth of a bypassed
// message's cost.
func (t *pairTable) get(src, dst int32, port int) (*pairPrediction, bool) {
	if t.n > 0 {
		if k := t.slot[src*t.n+dst]; k > 0 && t.first[k-1].port == int32(port) {
			return &t.first[k-1].pp, true
		}
	}
	pp, ok := t.more[pairKey(src, dst, port)]
	return pp, ok
}

func (t *pairTable) put(src, dst int32, port int, pp pairPrediction) {
	if t.n > 0 {
		if k := &t.slot[src*t.n+dst]; *k == 0 {
			t.first = append(t.first, pairEntry{port: int32(port), pp: pp})
			*k = int32(len(t.first))
			return
		}
	}
	t.more[pairKey(src, dst, port)] = &pp
}

// reset forgets every prediction (a failed link, a new surrogate opening).
func (t *pairTable) reset() {
	clear(t.slot)
	t.first = t.first[:0]
	clear(t.more)
}
