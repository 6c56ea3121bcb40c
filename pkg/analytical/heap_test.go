package analytical

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/route"
)

// shareKey keeps the floats' order, sign included, and share() undoes it
// exactly: the heap compares keys where the solver compared shares.
func TestShareKeyOrder(t *testing.T) {
	xs := []float64{math.Inf(-1), -1e300, -2.5, -1, -math.SmallestNonzeroFloat64, 0,
		math.SmallestNonzeroFloat64, 1e-9, 1, 1 + 1e-16, 2.5, 4e11, 1e300, math.Inf(1)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		xs = append(xs, (rng.Float64()-0.3)*math.Pow(10, float64(rng.IntN(40)-20)))
	}
	for _, a := range xs {
		if got := (hent{key: shareKey(a)}).share(); got != a {
			t.Fatalf("share(shareKey(%g)) = %g", a, got)
		}
		for _, b := range xs {
			if (shareKey(a) < shareKey(b)) != (a < b) {
				t.Fatalf("shareKey order of %g, %g differs from theirs", a, b)
			}
		}
	}
}

// Whatever the heap's shape, the links come out in the total order of
// (share, link), as a sort gives them: the solver's results depend on that
// order only. Shares repeat (ties broken by link) and change as links are
// touched, as in update: some grow, some are left without flows (in the
// heap they stay, skipped when they come out; in the scan's list, below
// scanSolve links, they are cut). Half the trials take the scan's list.
func TestHeapPopsInShareLinkOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		scan := trial%2 == 1
		n := 1 + rng.IntN(300)
		if scan {
			n = 1 + rng.IntN(scanSolve)
		}
		f := &fluid{hpos: make([]int32, n)}
		share := make([]float64, n)
		stale := make([]bool, n)
		for j := range n {
			share[j] = float64(rng.IntN(8)) - 0.5 // ties, and a negative one
			if rng.IntN(4) == 0 {
				share[j] = rng.Float64() * 100
			}
			f.hpos[j] = int32(len(f.heap))
			f.heap = append(f.heap, mkHent(share[j], route.DirLink(rng.IntN(1<<20)*n+j), int32(j)))
		}
		if !scan {
			for j := len(f.heap)/2 - 1; j >= 0; j-- {
				f.down(j)
			}
		}
		for popped := 0; len(f.heap) > 0; {
			// What a sort puts first among the links still with flows.
			var want []hent
			for _, e := range f.heap {
				if !stale[e.j] {
					want = append(want, e)
				}
			}
			slices.SortFunc(want, func(a, b hent) int {
				if a.less(b) {
					return -1
				}
				return 1
			})
			var top hent
			if scan {
				top = f.popMin()
			} else {
				top = f.pop()
			}
			if f.hpos[top.j] != -1 {
				t.Fatalf("trial %d: link %d out, still placed at %d", trial, top.j, f.hpos[top.j])
			}
			if stale[top.j] {
				continue
			}
			if top != want[0] {
				t.Fatalf("trial %d, pop %d: got share %g link %d, want share %g link %d", trial, popped, top.share(), top.l, want[0].share(), want[0].l)
			}
			popped++
			// Touch a few links: their shares grow, or they lose their flows.
			for range rng.IntN(4) {
				j := rng.IntN(n)
				i := int(f.hpos[j])
				if i < 0 || stale[j] {
					continue
				}
				if rng.IntN(3) == 0 {
					if scan {
						f.cut(i)
					}
					stale[j] = true
					continue
				}
				share[j] += float64(rng.IntN(3))
				f.heap[i].key = shareKey(share[j])
				if !scan {
					f.fix(i)
				}
			}
			for i, e := range f.heap {
				if int(f.hpos[e.j]) != i {
					t.Fatalf("trial %d: hpos of link %d is %d, it sits at %d", trial, e.j, f.hpos[e.j], i)
				}
			}
		}
	}
}
