package packet

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// Every (source, destination, port choice) gets back what was put for it,
// dense or not, a second port choice of a pair included; reset forgets all.
func TestPairTable(t *testing.T) {
	for _, nodes := range []int{8, densePairNodes + 1} {
		tb := newPairTable(nodes)
		want := map[[3]int]int64{}
		for src := int32(0); src < 8; src++ {
			for dst := int32(0); dst < 8; dst++ {
				for _, port := range []int{-1, 3} {
					v := int64(src*100+dst*10) + int64(port)
					tb.put(src, dst, port, pairPrediction{data: v})
					want[[3]int{int(src), int(dst), port}] = v
				}
			}
		}
		for k, v := range want {
			if pp, ok := tb.get(int32(k[0]), int32(k[1]), k[2]); !ok || pp.data != v {
				t.Fatalf("%d nodes: %v gave %v, %v; want %d", nodes, k, pp.data, ok, v)
			}
		}
		if _, ok := tb.get(1, 2, 5); ok {
			t.Fatalf("%d nodes: a port choice never put was found", nodes)
		}
		tb.reset()
		if _, ok := tb.get(1, 2, -1); ok {
			t.Fatalf("%d nodes: found after reset", nodes)
		}
		tb.put(1, 2, 3, pairPrediction{data: 7})
		if pp, ok := tb.get(1, 2, 3); !ok || pp.data != 7 {
			t.Fatalf("%d nodes: after reset, put then get gave %v, %v", nodes, pp.data, ok)
		}
	}
}

// An entry is one cache line: the surrogate reads the table at random,
// once per message, and an entry across two lines missed twice.
func TestPairEntryOneLine(t *testing.T) {
	if n := unsafe.Sizeof(pairEntry{}); n != 64 {
		t.Fatalf("pairEntry takes %d bytes; want 64", n)
	}
}

// sortZombies orders as the calendar pops (time, then number), ties in
// time included, whatever the spread of the times.
func TestSortZombies(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	var tmp []zombieDue
	for _, c := range []struct {
		n      int
		spread int64
	}{{0, 1}, {1, 1}, {2, 1}, {300, 4}, {5000, 1 << 12}, {5000, 1 << 40}, {5000, 1 << 62}} {
		z := make([]zombieDue, c.n)
		for k := range z {
			z[k] = zombieDue{at: 1_000 + rng.Int64N(c.spread), seq: rng.Uint64(), pi: int32(k)}
		}
		want := slices.Clone(z)
		slices.SortFunc(want, func(a, b zombieDue) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) })
		var got []zombieDue
		got, tmp = sortZombies(z, tmp)
		if !slices.Equal(got, want) {
			t.Fatalf("%d deliveries over %d ps: sorted wrong", c.n, c.spread)
		}
	}
}
