package route

import (
	"math"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/topo"
)

func spread(t *testing.T, r *Router, src, dst int32, bytes float64) map[DirLink]float64 {
	t.Helper()
	load := map[DirLink]float64{}
	if err := r.Spread(src, dst, bytes, func(d DirLink, b float64) { load[d] += b }); err != nil {
		t.Fatal(err)
	}
	return load
}

// On a k=4 fat-tree a transfer between pods has 4 shortest paths: half of
// it on each of the source edge's two uplinks, a quarter on each core
// link, and all of it on the end links.
func TestSpreadFatTreeClosedForm(t *testing.T) {
	r := router(t, gen(t, topo.Params{Family: "fat-tree", GPUs: 16, GPUsPerServer: 1, K: 4}))
	load := spread(t, r, 0, 15, 1)
	count := map[float64]int{}
	total := 0.0
	for _, b := range load {
		count[b]++
		total += b
	}
	if want := map[float64]int{1: 2, 0.5: 4, 0.25: 8}; len(count) != len(want) || count[1] != 2 || count[0.5] != 4 || count[0.25] != 8 {
		t.Fatalf("link shares %v, want %v (ends, edge-agg, agg-core-agg)", count, want)
	}
	if total != 6 {
		t.Fatalf("bytes x hops = %g, want 6 (every shortest path has 6 hops)", total)
	}
}

// Spread is the mean of Path over hashes: on Spectrum-X (rail-optimized,
// 64 spines) and a 2:1 fat-tree, the hash-averaged load of every link
// matches the even split within sampling noise.
func TestSpreadIsHashMean(t *testing.T) {
	for _, p := range []topo.Params{
		{Family: "spectrum-x", GPUs: 128},
		{Family: "fat-tree", GPUs: 128, Oversub: 2},
	} {
		r := router(t, gen(t, p))
		for _, pair := range [][2]int32{{0, 9}, {3, 120}, {0, 5}, {17, 64}} {
			want := spread(t, r, pair[0], pair[1], 1)
			const n = 1 << 14
			got := map[DirLink]float64{}
			for h := uint64(0); h < n; h++ {
				for _, d := range path(t, r, pair[0], pair[1], FlowHash(pair[0], pair[1], int64(h), 1)) {
					got[d] += 1.0 / n
				}
			}
			for d, w := range want {
				// Binomial noise of n samples: 5 sigma.
				if tol := 5 * math.Sqrt(w*(1-w)/n); math.Abs(got[d]-w) > tol+1e-12 {
					t.Errorf("%s %v link %d: hash mean %.4f, spread %.4f", p.Family, pair, d, got[d], w)
				}
			}
			for d := range got {
				if _, ok := want[d]; !ok {
					t.Errorf("%s %v: paths use link %d, spread does not", p.Family, pair, d)
				}
			}
		}
	}
}

// NextHops offers, hop by hop, exactly the shortest paths: on a k=4
// fat-tree between pods 2 aggregation uplinks at the edge, 2 core links at
// the aggregation switch, then one way down; walking every choice reaches
// the 4 paths, whose links are the ones Spread loads.
func TestNextHopsFatTree(t *testing.T) {
	tp := gen(t, topo.Params{Family: "fat-tree", GPUs: 16, GPUsPerServer: 1, K: 4})
	r := router(t, tp)
	first := path(t, r, 0, 15, 1)[0]
	var counts []int
	seen := map[DirLink]bool{first: true}
	paths := 0
	var walk func(v int32, dist int)
	walk = func(v int32, dist int) {
		next := r.NextHops(nil, v, 15, dist)
		if len(counts) < 6-dist {
			counts = append(counts, len(next))
		}
		for _, d := range next {
			seen[d] = true
			o := topo.Other(tp, d.Link(), v)
			if dist == 1 {
				if o != 15 {
					t.Fatalf("last hop ends at node %d, not GPU 15", o)
				}
				paths++
				continue
			}
			walk(o, dist-1)
		}
	}
	walk(topo.Other(tp, first.Link(), 0), 5)
	if paths != 4 || len(counts) != 5 || counts[0] != 2 || counts[1] != 2 || counts[2] != 1 || counts[3] != 1 || counts[4] != 1 {
		t.Fatalf("%d paths, choices per hop %v; want 4 paths, [2 2 1 1 1]", paths, counts)
	}
	want := spread(t, r, 0, 15, 1)
	if len(seen) != len(want) {
		t.Fatalf("NextHops reaches %d links, Spread loads %d", len(seen), len(want))
	}
	for d := range want {
		if !seen[d] {
			t.Errorf("link %d carries Spread's load but NextHops never offers it", d)
		}
	}
}

// A Spreader's sums are Spread's, transfer by transfer summed: on
// fabrics with one attachment switch a GPU (rail-optimized Spectrum-X, a
// fat-tree, HPN's dual-plane) and two (dual-ToR), for every pair among
// some GPUs (same server, same leaf, across the fabric) and a switch at
// either end (the same error where Spread finds no path), added in two batches flushed apart.
func TestSpreaderIsSpreadSum(t *testing.T) {
	for _, p := range []topo.Params{
		{Family: topo.SpectrumX, GPUs: 128},
		{Family: topo.FatTree, GPUs: 128, Oversub: 2},
		{Family: topo.HPNDualPlane, GPUs: 128},
		{Family: topo.DCNDualToR, GPUs: 64},
		{Family: topo.Dragonfly, GPUs: 64},
	} {
		tp := gen(t, p)
		r := router(t, tp)
		want, got := map[DirLink]float64{}, map[DirLink]float64{}
		sp := r.NewSpreader()
		add := func(d DirLink, b float64) { got[d] += b }
		ends := []int32{0, 1, 7, 8, 9, 17, 40, 63, int32(tp.GPUs), int32(len(tp.Nodes) - 1)}
		for i, a := range ends {
			for j, b := range ends {
				if a >= int32(tp.GPUs) && b >= int32(tp.GPUs) {
					continue // Spread takes a GPU at one end at least
				}
				bytes := float64(1000 + 37*i + 5*j)
				err := r.Spread(a, b, bytes, func(d DirLink, x float64) { want[d] += x })
				if e := sp.Add(a, b, bytes, add); (e == nil) != (err == nil) {
					t.Fatalf("%s: %d to %d: Spread says %v, Add %v", p.Family, a, b, err, e)
				}
			}
			if i == len(ends)/2 {
				if err := sp.Flush(add); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := sp.Flush(add); err != nil {
			t.Fatal(err)
		}
		for d := range DirLink(r.DirLinks()) {
			if math.Abs(got[d]-want[d]) > 1e-9*(1+want[d]) {
				t.Errorf("%s: link %d carries %.6f, Spread's sum %.6f", p.Family, d, got[d], want[d])
			}
		}
		if len(want) == 0 {
			t.Fatalf("%s: nothing spread", p.Family)
		}
	}
}
