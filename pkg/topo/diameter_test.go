package topo

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// bfsDiameter is the definition, computed the slow way: a breadth-first
// search from every GPU in which only non-GPU nodes forward.
func bfsDiameter(t *Topology) (int, bool) {
	adj := BuildAdjacency(t)
	n, G := len(t.Nodes), t.GPUs
	dist := make([]int, n)
	worst := 0
	for g := 0; g < G; g++ {
		for i := range dist {
			dist[i] = -1
		}
		dist[g] = 0
		q := []int32{int32(g)}
		for len(q) > 0 {
			v := q[0]
			q = q[1:]
			if int(v) < G && int(v) != g {
				continue // GPUs do not forward
			}
			for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
				if o := Other(t, li, v); dist[o] < 0 {
					dist[o] = dist[v] + 1
					q = append(q, o)
				}
			}
		}
		for h := 0; h < G; h++ {
			if dist[h] < 0 {
				return 0, false
			}
			worst = max(worst, dist[h])
		}
	}
	return worst, true
}

// Diameter against breadth-first search on every family, on shapes where
// the server shortcut through the NVSwitch matters (one NIC per leaf, one
// server), on fabrics with links removed at random and on GPUs linked
// directly to each other.
func TestDiameterAgainstBFS(t *testing.T) {
	shapes := []Params{
		{Family: SpectrumX, GPUs: 16},
		{Family: SpectrumX, GPUs: 1024},
		{Family: SpectrumX, GPUs: 8},
		{Family: SpectrumX, GPUs: 32, NICsPerASW: 1},
		{Family: SpectrumX, GPUs: 16, GPUsPerServer: 1},
		{Family: HPNSinglePlane, GPUs: 64, NICsPerASW: 2},
		{Family: HPNDualPlane, GPUs: 64, NICsPerASW: 2, PSWs: 4},
		{Family: DCNSingleToR, GPUs: 128},
		{Family: DCNDualToR, GPUs: 48, NICsPerASW: 8},
		{Family: DCNSingleToR, GPUs: 16, NICsPerASW: 1},
		{Family: FatTree, GPUs: 16, GPUsPerServer: 1},
		{Family: FatTree, GPUs: 64, GPUsPerServer: 2, K: 6, Oversub: 2},
		{Family: FatTree, GPUs: 48, GPUsPerServer: 2, K: 6, Oversub: 2, OversubBy: OversubUplinks}, // aggs 2 of each pod idle
		{Family: Dragonfly, GPUs: 72, GPUsPerServer: 1, RoutersPerGroup: 4, TerminalsPerRouter: 2, GlobalPerRouter: 2},
		{Family: Dragonfly, GPUs: 40, GPUsPerServer: 2},
	}
	rng := rand.New(rand.NewPCG(13, 1))
	for _, p := range shapes {
		base := gen(t, p)
		check := func(about string, topo *Topology) {
			t.Helper()
			want, ok := bfsDiameter(topo)
			got, err := Diameter(topo)
			if ok != (err == nil) || got != want {
				t.Errorf("%s %d GPUs (%s): Diameter %d, %v; breadth-first search %d, connected %v", p.Family, topo.GPUs, about, got, err, want, ok)
			}
		}
		check("as built", base)
		for trial := 0; trial < 6; trial++ {
			topo := *base
			topo.Links = nil
			for _, l := range base.Links {
				if rng.IntN(40) != 0 {
					topo.Links = append(topo.Links, l)
				}
			}
			for k := rng.IntN(3); k > 0; k-- { // direct GPU links
				a, b := rng.IntN(topo.GPUs), rng.IntN(topo.GPUs)
				if a != b {
					topo.Links = append(topo.Links, stream.Link{A: int32(a), B: int32(b), BWbps: 1e9, Kind: stream.LinkPCIe})
				}
			}
			check("links removed and added", &topo)
		}
	}
	// Every pair directly linked: 1 hop.
	full := &Topology{GPUs: 3, GPUsPerServer: 3, Nodes: []stream.Node{{ID: 0, Kind: stream.NodeGPU}, {ID: 1, Kind: stream.NodeGPU}, {ID: 2, Kind: stream.NodeGPU}},
		Links: []stream.Link{{A: 0, B: 1}, {A: 1, B: 2}, {A: 0, B: 2}}}
	if d, err := Diameter(full); d != 1 || err != nil {
		t.Errorf("3 GPUs linked pairwise: diameter %d, %v; want 1", d, err)
	}
}

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// Beyond the limits Generate refuses before allocating the fabric; at the
// limit the diameter of 131,072 GPUs allocates tens of MB, not GPUs² bits
// (its bitsets took 600 MB before).
func TestSizeLimits(t *testing.T) {
	refused := []Params{
		{Family: SpectrumX, GPUs: 10_000_000},
		{Family: FatTree, K: 100_000},
		{Family: FatTree, Oversub: 1e9},
		{Family: FatTree, K: 8, Oversub: 1e300},
		{Family: Dragonfly, RoutersPerGroup: 100_000, TerminalsPerRouter: 2, GlobalPerRouter: 2},
		{Family: Dragonfly, RoutersPerGroup: 1 << 40, TerminalsPerRouter: 1 << 40, GlobalPerRouter: 1 << 40},
		{Family: DCNSingleToR, GPUs: MaxGPUs, NICsPerASW: 1},
		{Family: SpectrumX, NVSwitchesPerServer: 1 << 50},
		{Family: HPNDualPlane, PSWs: 1 << 40},
	}
	for _, p := range refused {
		var err error
		if n := allocated(func() { _, _, err = Generate(p) }); n > 1<<20 {
			t.Errorf("%+v: allocated %d bytes before refusing", p, n)
		}
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("%+v: %v, want a limit error", p, err)
		}
	}
	for _, fam := range []string{SpectrumX, HPNSinglePlane, FatTree, Dragonfly} {
		topo := gen(t, Params{Family: fam, GPUs: MaxGPUs})
		var d int
		var err error
		if n := allocated(func() { d, err = Diameter(topo) }); n > 128<<20 {
			t.Errorf("%s at %d GPUs: the diameter allocated %d MB", fam, MaxGPUs, n>>20)
		}
		if want := map[string]int{FatTree: 6, Dragonfly: 5}[fam]; err != nil || d != max(want, 4) {
			t.Errorf("%s at %d GPUs: diameter %d, %v", fam, MaxGPUs, d, err)
		}
	}
}
