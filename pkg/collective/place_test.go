package collective

import (
	"slices"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

func TestParsePlacement(t *testing.T) {
	p, err := ParsePlacement("0-2, 8,10-11")
	if err != nil || !slices.Equal(p.GPUs, []int32{0, 1, 2, 8, 10, 11}) || p.Policy != "" {
		t.Fatalf("list: %+v, %v", p, err)
	}
	for _, s := range []string{PlacePacked, PlaceSpread, PlaceRailAligned, PlaceRandom} {
		if p, err := ParsePlacement(s); err != nil || p.Policy != s {
			t.Errorf("%s: %+v, %v", s, p, err)
		}
	}
	for _, bad := range []string{"", "tight", "3-1", "-1", "1-", "a-b", "0-1,,2", "0-99999999"} {
		if _, err := ParsePlacement(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// A placed layout's groups are the GPUs of its ranks; stages and
// representatives are counted in job ranks.
func TestLayoutPlaced(t *testing.T) {
	l, err := workload.NewLayout(16, 8, 0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	place := make([]int32, 16)
	for r := range place {
		place[r] = int32(16 + r) // servers 2-3 of 4
	}
	pl, err := l.Placed(place, 32)
	if err != nil {
		t.Fatal(err)
	}
	dp, _ := pl.Groups(DP)
	if len(dp) != 8 || !slices.Equal(dp[0], []int32{16, 24}) || !slices.Equal(dp[7], []int32{23, 31}) {
		t.Errorf("DP groups %v", dp)
	}
	if pl.GPU(3) != 19 || pl.Rank(19) != 3 || pl.Rank(3) != -1 {
		t.Errorf("GPU(3) %d, Rank(19) %d, Rank(3) %d", pl.GPU(3), pl.Rank(19), pl.Rank(3))
	}
	// The identity keeps the layout unplaced (packed streams unchanged).
	id := make([]int32, 16)
	for r := range id {
		id[r] = int32(r)
	}
	if pl, err := l.Placed(id, 32); err != nil || pl.Place != nil {
		t.Errorf("identity: %v, %v", pl.Place, err)
	}
	for _, bad := range [][]int32{{0, 1}, append(slices.Repeat([]int32{0}, 15), 1), append(id[:15:15], 32)} {
		if _, err := l.Placed(bad, 32); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// spread puts consecutive servers under different leaves, across pods
// first; rail-aligned and packed on a fabric of equal leaves agree.
func TestPlacePolicies(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.FatTree, GPUs: 128, K: 8, Oversub: 4, GPUType: "H100"})
	leaves := leavesOf(s.topo)
	leafOf, podOf := map[int]int32{}, map[int]int32{}
	for _, l := range leaves {
		for _, sv := range l.servers {
			leafOf[sv], podOf[sv] = l.id, l.pod
		}
	}
	gpus, err := Placement{Policy: PlaceSpread}.Resolve(s.topo, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	var servers []int
	for i := 0; i < len(gpus); i += 8 {
		servers = append(servers, int(gpus[i])/8)
		for l := range 8 {
			if gpus[i+l] != gpus[i]+int32(l) {
				t.Fatalf("spread: server's GPUs out of local order: %v", gpus[i:i+8])
			}
		}
	}
	for i := 1; i < len(servers); i++ {
		a, b := servers[i-1], servers[i]
		if leafOf[a] == leafOf[b] || podOf[a] == podOf[b] {
			t.Errorf("spread: servers %d and %d share leaf %d / pod %d", a, b, leafOf[a], podOf[a])
		}
	}
	for _, p := range []string{PlacePacked, PlaceRailAligned} {
		g, err := Placement{Policy: p}.Resolve(s.topo, 20, 1)
		if err != nil || len(g) != 20 || g[0] != 0 || g[19] != 19 {
			t.Errorf("%s: %v, %v", p, g, err)
		}
	}
	r1, _ := Placement{Policy: PlaceRandom}.Resolve(s.topo, 64, 7)
	r2, _ := Placement{Policy: PlaceRandom}.Resolve(s.topo, 64, 7)
	r3, _ := Placement{Policy: PlaceRandom}.Resolve(s.topo, 64, 8)
	if !slices.Equal(r1, r2) || slices.Equal(r1, r3) || workload.CheckPlacement(r1, 128) != nil {
		t.Errorf("random: seed 7 %v / %v, seed 8 %v", r1, r2, r3)
	}
	if _, err := (Placement{Policy: PlaceSpread}).Resolve(s.topo, 129, 1); err == nil {
		t.Error("129 ranks on 128 GPUs: accepted")
	}
}

// KeepTP refuses a TP group across servers.
func TestKeepTP(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "H100"})
	l, _ := workload.NewLayout(16, 8, 0, 1, 1)
	for _, c := range []struct {
		first int32
		ok    bool
	}{{0, true}, {8, true}, {4, false}} {
		place := make([]int32, 16)
		for r := range place {
			place[r] = c.first + int32(r)
		}
		pl, err := l.Placed(place, 32)
		if err != nil {
			t.Fatal(err)
		}
		if err := KeepTP(pl, s.fab); (err == nil) != c.ok {
			t.Errorf("job from GPU %d: KeepTP %v", c.first, err)
		}
	}
}

// A job on part of a server: rings relay through PXN only via its own
// GPUs, and every flow stays on its GPUs and their NVSwitches.
func TestDecomposePlacedPartialServers(t *testing.T) {
	s := newSetup(t, topo.Params{Family: topo.SpectrumX, GPUs: 32, GPUType: "H100"})
	l, _ := workload.NewLayout(8, 1, 0, 1, 1)
	place := []int32{0, 1, 2, 3, 12, 13, 14, 15} // half of server 0, half of server 1
	pl, err := l.Placed(place, 32)
	if err != nil {
		t.Fatal(err)
	}
	c, colls := s.run(t, Options{Algo: "ring", PXN: "on"}, pl, one(Step{Op: AllReduce, Size: 8 << 20, Group: DP}))
	if len(colls) != 1 || !slices.Equal(colls[0].Ranks, place) {
		t.Fatalf("collectives %+v", colls)
	}
	for _, f := range c.flows {
		for _, n := range []int32{f.Src, f.Dst} {
			if n < 32 && !slices.Contains(place, n) || n >= 32 && s.topo.Nodes[n].Server > 1 {
				t.Fatalf("flow %d (%s) touches node %d off the job", f.ID, f.ConnType, n)
			}
		}
	}
	if !slices.ContainsFunc(c.flows, func(f stream.Flow) bool { return f.ConnType == stream.ConnPXNInit }) {
		t.Log("no PXN relay (ring crossed on rail)")
	}
}
