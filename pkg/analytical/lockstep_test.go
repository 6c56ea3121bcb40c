package analytical

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// Soft entries (approx-lockstep at the representative's rate): flows on a
// fat-tree with ECMP paths, each with up to three members whose links off
// its own path are soft, added and removed at random. After every solve
// no link carries more than its capacity (a soft entry's load held to its
// cap), every flow sends, and none sends below the max-min bound over its
// own links (capacity over the weights claiming it).
func TestSoftEntriesStayWithinCapacity(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, Oversub: 2, GPUsPerServer: 1})
	r, err := route.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	f := newFluid(r, des.NewCalendar(calShift, calLog))
	rng := rand.New(rand.NewPCG(1, 2))
	g := int32(tp.GPUs)
	pair := func() (int32, int32) {
		a := rng.Int32N(g)
		return a, (a + 1 + rng.Int32N(g-1)) % g
	}
	check := func(step int) {
		softSeen := false
		for l, list := range f.flows {
			load := 0.0
			for p, en := range list {
				w := float64(f.entryWeight(route.DirLink(l), p))
				if f.wsum != nil && en.w < 0 {
					softSeen = true
					load += min(f.hot[en.id].rate, f.caps[l][p]) * w
				} else {
					load += f.hot[en.id].rate * w
				}
			}
			if load > f.cap[l]*(1+1e-9) {
				t.Fatalf("step %d: link %d carries %.6g bit/s, capacity %.6g", step, l, load, f.cap[l])
			}
		}
		for i := range f.slots {
			s := &f.slots[i]
			if !s.live {
				continue
			}
			bound := math.Inf(1)
			for k, l := range s.path {
				if s.signed(k) > 0 {
					bound = min(bound, f.cap[l]/f.claims(l))
				}
			}
			if r := f.hot[i].rate; !(r > 0) || r < bound*(1-1e-9) {
				t.Fatalf("step %d: slot %d sends at %.6g bit/s, below its bound %.6g", step, i, r, bound)
			}
		}
		if step > 100 && !softSeen {
			t.Fatalf("step %d: no soft entry in flight", step)
		}
		checkEntries(t, f, step)
	}
	var live []int32
	for step := 0; step < 600; step++ {
		if len(live) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(live))
			f.remove(live[k])
			live = slices.Delete(live, k, k+1)
		} else {
			weights := map[route.DirLink]float32{}
			src, dst := pair()
			path, err := r.AppendPathPort(nil, src, dst, rng.Uint64(), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range path {
				weights[l]++
			}
			soft := map[route.DirLink]float32{}
			for m := rng.IntN(4); m > 0; m-- {
				src, dst := pair()
				p, err := r.AppendPathPort(nil, src, dst, rng.Uint64(), 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range p {
					if _, own := weights[l]; own {
						weights[l]++
					} else {
						soft[l]++
					}
				}
			}
			var links []route.DirLink
			var w []float32
			for l := range weights {
				links = append(links, l)
			}
			for l := range soft {
				links = append(links, l)
			}
			slices.Sort(links)
			for _, l := range links {
				if x, own := weights[l]; own {
					w = append(w, x)
				} else {
					w = append(w, -soft[l])
				}
			}
			f.add(int32(step), links, w, 1<<20, 0, 0, 0)
			for i := range f.slots { // the slot add took
				if f.slots[i].live && f.slots[i].flow == int32(step) {
					live = append(live, int32(i))
				}
			}
		}
		f.update(des.Time(step))
		check(step)
	}
}

// checkEntries checks the solver's bookkeeping after a step: each live
// slot's pos finds, on every link of its path, an entry naming the slot,
// the link's index in its path and its signed weight there; no other
// entry is left; and each link's wsum is its entries' weights' sum.
func checkEntries(t *testing.T, f *fluid, step int) {
	t.Helper()
	entries := 0
	for i := range f.slots {
		s := &f.slots[i]
		if !s.live {
			continue
		}
		for k, l := range s.path {
			entries++
			if p := int(s.pos[k]); p >= len(f.flows[l]) || f.flows[l][p] != (entry{int32(i), int32(k), s.signed(k)}) {
				t.Fatalf("step %d: slot %d's pos[%d] = %d on link %d does not find its entry", step, i, k, p, l)
			}
		}
	}
	for l, list := range f.flows {
		entries -= len(list)
		if f.wsum == nil {
			continue
		}
		sum := 0.0
		for _, en := range list {
			sum += float64(abs32(en.w))
		}
		if math.Abs(sum-f.wsum[l]) > 1e-6*max(1, sum) {
			t.Fatalf("step %d: link %d's wsum %g, its entries weigh %g", step, l, f.wsum[l], sum)
		}
	}
	if entries != 0 {
		t.Fatalf("step %d: %d entries more than the live slots' paths", step, -entries)
	}
}
