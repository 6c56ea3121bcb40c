package dag

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type fl struct {
	id   int64
	deps []int64
}

func build(t testing.TB, flows []fl) (*DAG, error) {
	t.Helper()
	b := NewBuilder(len(flows))
	for _, f := range flows {
		if err := b.Add(f.id, f.deps); err != nil {
			t.Fatal(err)
		}
	}
	return b.Build()
}

// run completes ready flows first-in first-out and returns ids in order.
func run(d *DAG) []int64 {
	order, _ := runDone(d)
	return order
}

// runDone is run, with the number of flows its Run counted done.
func runDone(d *DAG) ([]int64, int) {
	r := d.NewRun()
	queue := slices.Clone(d.Ready())
	var order []int64
	for h := 0; h < len(queue); h++ {
		order = append(order, d.ID(queue[h]))
		queue = r.Complete(queue[h], queue)
	}
	return order, r.Done()
}

func TestReleaseOrder(t *testing.T) {
	// Deps named before and after the flow itself, sparse ids (map or
	// table lookup), a diamond and a duplicate dep.
	for _, ids := range [][]int64{{0, 1, 2, 3, 4}, {10, 11, 12, 13, 14}, {1e12, 5, -7, 99, 3e15}} {
		a, b, c, dd, e := ids[0], ids[1], ids[2], ids[3], ids[4]
		d, err := build(t, []fl{
			{dd, []int64{b, c}}, // waits on flows that come later
			{b, []int64{a}},
			{c, []int64{a, a}}, // a listed twice: released once, after a
			{a, nil},
			{e, nil},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := run(d); !slices.Equal(got, []int64{a, e, b, c, dd}) {
			t.Errorf("ids %v: order %v", ids, got)
		}
		// A second Run of the same DAG starts afresh.
		got, done := runDone(d)
		if !slices.Equal(got, []int64{a, e, b, c, dd}) {
			t.Errorf("ids %v: order of a second run %v", ids, got)
		}
		if done != 5 || d.Len() != 5 {
			t.Errorf("done %d of %d", done, d.Len())
		}
		if i, ok := d.Index(c); !ok || d.ID(i) != c || len(d.Deps(i)) != 2 {
			t.Errorf("Index(%d) = %d %v", c, i, ok)
		}
		if _, ok := d.Index(12345678); ok {
			t.Error("Index of a missing id")
		}
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		flows []fl
		id    int64
		field string
		msg   string
	}{
		{"missing dep", []fl{{0, nil}, {1, []int64{0, 7}}}, 1, "deps", "dep 7 names no flow"},
		{"missing dep sparse", []fl{{100, nil}, {5e9, []int64{42}}}, 5e9, "deps", "dep 42 names no flow"},
		{"duplicate id", []fl{{3, nil}, {4, nil}, {3, nil}}, 3, "id", "duplicate id"},
		{"self loop", []fl{{0, nil}, {1, []int64{1}}}, 1, "deps", "dependency cycle 1 waits on 1"},
		{"cycle", []fl{{0, nil}, {1, []int64{0, 3}}, {2, []int64{1}}, {3, []int64{2}}, {4, []int64{3}}}, 1, "deps", "cycle 1 waits on 3 waits on 2 waits on 1 (4 flows can never start)"},
	} {
		_, err := build(t, c.flows)
		var de *Error
		if !errors.As(err, &de) {
			t.Fatalf("%s: error %v, want *Error", c.name, err)
		}
		if de.FlowID != c.id || de.Field != c.field || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %q (flow %d, field %s), want flow %d field %s containing %q", c.name, err, de.FlowID, de.Field, c.id, c.field, c.msg)
		}
	}
}

// A chain of 1M flows listed in reverse with every flow waiting on the next
// one in the input: exercises the non-ordered id path at scale.
func TestLargeChain(t *testing.T) {
	const n = 1 << 20
	b := NewBuilder(n)
	for i := n - 1; i >= 0; i-- {
		// Two deps per flow: 2M dep ids span the Builder's chunks.
		var deps []int64
		if i > 0 {
			deps = []int64{int64(i - 1)}
		}
		if i > 1 {
			deps = append(deps, int64(i-2))
		}
		b.Add(int64(i), deps)
	}
	start := time.Now()
	d, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	order := run(d)
	if len(order) != n || order[0] != 0 || order[n-1] != n-1 {
		t.Fatalf("ran %d flows", len(order))
	}
	for _, i := range []int32{1, depChunk / 2, depChunk/2 + 1, n - 1} { // flow id n-1-i was added i-th
		id := d.ID(i)
		if deps := d.Deps(i); id > 1 && (len(deps) != 2 || d.ID(deps[0]) != id-1 || d.ID(deps[1]) != id-2) {
			t.Errorf("flow %d: deps %v", id, deps)
		}
	}
	t.Logf("1M-flow chain: build and run in %v", time.Since(start))
}

func BenchmarkBuildAndRun(b *testing.B) {
	const n = 1 << 20
	for i := 0; i < b.N; i++ {
		bl := NewBuilder(n)
		dep := make([]int64, 1)
		for k := 0; k < n; k++ {
			if k >= 1024 {
				dep[0] = int64(k - 1024)
				bl.Add(int64(k), dep)
			} else {
				bl.Add(int64(k), nil)
			}
		}
		d, err := bl.Build()
		if err != nil {
			b.Fatal(err)
		}
		run(d)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "flows/s")
}

// ReleaseEarly lets chosen dependants go before their dep completes; the
// dep's completion then releases only the rest, each exactly once.
func TestReleaseEarly(t *testing.T) {
	b := NewBuilder(4)
	b.Add(0, nil)
	b.Add(1, []int64{0})    // released early
	b.Add(2, []int64{0})    // waits for completion
	b.Add(3, []int64{0, 1}) // needs 1 too
	d, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	r := d.NewRun()
	got := r.ReleaseEarly(0, func(s int32) bool { return s == 1 || s == 3 }, nil)
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("early release gave %v, want [1]", got)
	}
	if got = r.Complete(1, nil); len(got) != 1 || got[0] != 3 {
		t.Fatalf("completing 1 released %v, want [3]", got)
	}
	if got = r.Complete(0, nil); len(got) != 1 || got[0] != 2 {
		t.Fatalf("completing 0 released %v, want [2] only", got)
	}
	if _, stuck := r.Stuck(); !stuck || r.IsDone(2) || !r.IsDone(1) {
		t.Errorf("flow 2 should be the one left: stuck %v, 2 done %v, 1 done %v", stuck, r.IsDone(2), r.IsDone(1))
	}
	// A second Run of the same DAG knows nothing of the first's.
	if got = d.NewRun().Complete(0, nil); len(got) != 2 {
		t.Fatalf("in a new run, completing 0 released %v, want 1 and 2", got)
	}
}

// Ids 0, 1, 2, ... are not stored; an id out of that order keeps them all.
func TestOrderedIDs(t *testing.T) {
	for _, last := range []int64{3, 100} {
		b := NewBuilder(0)
		for id := int64(0); id < 3; id++ {
			if err := b.Add(id, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Add(last, []int64{1}); err != nil {
			t.Fatal(err)
		}
		d, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if (d.ids == nil) != (last == 3) || d.Len() != 4 {
			t.Fatalf("last id %d: ids stored %v, %d flows", last, d.ids != nil, d.Len())
		}
		for i, want := range []int64{0, 1, 2, last} {
			if d.ID(int32(i)) != want {
				t.Fatalf("last id %d: ID(%d) = %d", last, i, d.ID(int32(i)))
			}
			if j, ok := d.Index(want); !ok || j != int32(i) {
				t.Fatalf("last id %d: Index(%d) = %d, %v", last, want, j, ok)
			}
		}
	}
}

// TestConcurrent completes flows from one goroutine, then, once
// Concurrent, two chains from two goroutines at once: every flow counts
// once, and each chain is released in order.
func TestConcurrent(t *testing.T) {
	const n = 1000 // flows per chain: chain c is ids c, c+2, c+4, ...
	var flows []fl
	for i := int64(0); i < 2*n; i++ {
		var deps []int64
		if i >= 2 {
			deps = []int64{i - 2}
		}
		flows = append(flows, fl{i, deps})
	}
	d, err := build(t, flows)
	if err != nil {
		t.Fatal(err)
	}
	r := d.NewRun()
	next := [2]int32{}
	for c := range next {
		next[c] = r.Complete(int32(c), nil)[0] // one goroutine: the chains' heads
	}
	r.Concurrent()
	var wg sync.WaitGroup
	for c := range next {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, k := next[c], 1; ; k++ {
				if want := int32(c + 2*k); i != want {
					t.Errorf("chain %d released %d, want %d", c, i, want)
					return
				}
				out := r.Complete(i, nil)
				if len(out) == 0 {
					return
				}
				i = out[0]
			}
		}()
	}
	wg.Wait()
	if r.Done() != 2*n {
		t.Errorf("done %d, want %d", r.Done(), 2*n)
	}
	if _, stuck := r.Stuck(); stuck {
		t.Error("a flow left undone")
	}
}
