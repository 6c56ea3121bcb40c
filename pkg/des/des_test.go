package des

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestOrderAndTies(t *testing.T) {
	var q Queue
	// Pushed out of order; equal times must come out in push order.
	q.Push(30, 1, 0, 0)
	q.Push(10, 1, 1, 0)
	q.Push(20, 1, 2, 0)
	q.Push(10, 1, 3, 0)
	q.Push(10, 1, 4, 0)
	q.Push(0, 1, 5, 0)
	var got []int32
	for q.Len() > 0 {
		got = append(got, q.Pop().Target)
	}
	if want := []int32{5, 1, 3, 4, 2, 0}; !slices.Equal(got, want) {
		t.Fatalf("pop order %v, want %v", got, want)
	}
	if q.PeekTime() != Never {
		t.Fatal("empty queue must peek Never")
	}
}

// Against a stable sort of random events, including many equal times and
// interleaved pushes and pops.
func TestRandomAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q Queue
	type ev struct {
		at  Time
		seq int
	}
	var pending []ev
	seq := 0
	var now Time
	for round := 0; round < 2000; round++ {
		for k := rng.IntN(8); k > 0; k-- {
			at := now + Time(rng.IntN(20))
			q.Push(at, 0, int32(seq), int64(seq))
			pending = append(pending, ev{at, seq})
			seq++
		}
		for k := rng.IntN(8); k > 0 && q.Len() > 0; k-- {
			slices.SortStableFunc(pending, func(a, b ev) int { return int(a.at - b.at) })
			e := q.Pop()
			if want := pending[0]; e.At != want.at || int(e.Target) != want.seq || e.Seq() != uint64(want.seq) {
				t.Fatalf("round %d: popped (%d, %d), want (%d, %d)", round, e.At, e.Target, want.at, want.seq)
			}
			pending = pending[1:]
			now = e.At
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	q := NewQueue(0)
	for i := 0; i < 4096; i++ { // warm up to the peak length
		q.Push(Time(i), 0, 0, 0)
	}
	for q.Len() > 0 {
		q.Pop()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 1000; i++ {
			q.Push(Time(rng.IntN(1e6)), 1, int32(i), 0)
		}
		for q.Len() > 0 {
			q.Pop()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 1000 push/pop, want 0", allocs)
	}
}

func TestTimeHelpers(t *testing.T) {
	for _, c := range []struct {
		t  Time
		ns int64
		s  string
	}{
		{1499, 1, "1.499ns"}, {1500, 2, "1.5ns"}, {-1500, -2, "-1.5ns"}, {999, 1, "999ps"},
		{3 * Millisecond, 3_000_000, "3ms"}, {1500 * Microsecond, 1_500_000, "1.5ms"}, {2 * Second, 2e9, "2s"},
	} {
		if c.t.Ns() != c.ns || c.t.String() != c.s {
			t.Errorf("%d ps: Ns %d String %q, want %d %q", int64(c.t), c.t.Ns(), c.t.String(), c.ns, c.s)
		}
	}
	// 1 MiB at 400 Gbit/s: 8388608 bit / 4e11 bit/s = 20.97152 us.
	if got := TransferTime(1<<20, 400e9); got != 20_971_520 {
		t.Errorf("TransferTime(1MiB, 400Gbps) = %d ps, want 20971520", got)
	}
	if TransferTime(0, 1) != 0 || FromSeconds(1e30) != Never || FromSeconds(math.NaN()) != Never {
		t.Error("TransferTime(0) or FromSeconds saturation")
	}
	if Never.Ns() != int64(Never)/1000+1 || Time(5).Add(Never) != Never || Time(5).Add(7) != 12 {
		t.Error("Ns or Add at the edge of the range")
	}
}

// BenchmarkQueue pushes and pops in steady state with 10k pending events,
// the shape of a large simulation; it reports events/s and allocations.
func BenchmarkQueue(b *testing.B) {
	q := NewQueue(1 << 14)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 10000; i++ {
		q.Push(Time(rng.IntN(1e6)), 0, int32(i), 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		e := q.Pop()
		q.Push(e.At+Time(rng.IntN(1e6)), e.Kind, e.Target, e.Arg)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// A lower bound stays one in ns: rounding each end of an interval on its
// own can shorten it by a nanosecond, and the bound must not then exceed it.
func TestBoundNs(t *testing.T) {
	for _, c := range []struct {
		d, start, end Time
		want          int64
	}{
		{2081_600, 448_400, 2530_000, 2082}, // 448..2530: room for the nearest
		{2081_600, 448_600, 2530_200, 2081}, // 449..2530 reads 2081: capped
		{2081_000, 448_400, 2529_400, 2081}, // both round alike
		{5000_000, 0, 4000_000, 5000},       // above the interval: no bound, as is
	} {
		if got := BoundNs(c.d, c.start, c.end); got != c.want {
			t.Errorf("BoundNs(%d, %d, %d) = %d, want %d", c.d, c.start, c.end, got, c.want)
		}
	}
}
