package analytical

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// The fault specs: any text yields a fault on a link of the topology or an
// error, never a panic; what parses names a real link, a time that is not
// negative and a positive finite factor.
func FuzzParseLinkFault(f *testing.F) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.FatTree, K: 4, GPUsPerServer: 1})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"0-16@2ms", "16-0", "0-16=0.5", "16-24@0s", "0-99@1us", "a-b", "-1-16=2", "0-16=1e400", "0-16@-1ns", " 0 - 16 @ 3us", "0-16=NaN", "0-16=0.5@2ms", "0-16=2@-1us"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := ParseLinkDown(tp, s); err == nil {
			if d.Link < 0 || int(d.Link) >= len(tp.Links) || d.At < 0 {
				t.Errorf("%q: %+v", s, d)
			}
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error of several lines: %v", s, err)
		}
		if l, err := ParseLinkScale(tp, s); err == nil {
			if l.Link < 0 || int(l.Link) >= len(tp.Links) || !(l.Factor > 0) || math.IsInf(l.Factor, 0) || l.At < 0 {
				t.Errorf("%q: %+v", s, l)
			}
		}
	})
}

// The incremental solver against a from-scratch solution after every
// update while links fail and change speed under random traffic: an edge
// uplink of a 2:1 fat-tree fails at 50 us (its flows move to the other
// uplink with what they have left), another drops to 0.3 of its bandwidth
// at 150 us and comes back at 300 us. Every routing policy, fluid; under
// busbw (per-collective copies) no link carries more than its capacity.
func TestFluidFaultsMatchFullRecompute(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.FatTree, K: 4, Oversub: 2, GPUsPerServer: 1})
	var up []string // edge uplinks, "A-B"
	for _, l := range tp.Links {
		if tp.Nodes[l.A].Role == topo.RoleEdge && tp.Nodes[l.B].Role == topo.RoleAgg {
			up = append(up, fmt.Sprintf("%d-%d", l.A, l.B))
		}
	}
	if len(up) < 4 {
		t.Fatalf("%d edge uplinks", len(up))
	}
	down, err := ParseLinkDown(tp, up[0]+"@50us")
	if err != nil {
		t.Fatal(err)
	}
	var scales []LinkScale
	for _, s := range []string{up[3] + "=0.3@150us", up[3] + "=1@300us"} {
		l, err := ParseLinkScale(tp, s)
		if err != nil {
			t.Fatal(err)
		}
		scales = append(scales, l)
	}
	faults := &Faults{Down: []LinkDown{down}, Scale: scales}
	g := int32(tp.GPUs)
	rng := rand.New(rand.NewPCG(11, uint64(g)))
	flows := randomDAG(rng, g, 300, func() int64 { return 1 + rng.Int64N(8*MiB) })
	for _, routing := range []route.Policy{route.ECMP, route.Spray, route.Adaptive} {
		checks, worst := 0, 0.0
		verify := func(f *fluid) {
			checks++
			for id, want := range referenceRates(f) {
				if d := math.Abs(f.hot[id].rate-want) / want; d > worst {
					worst = d
				}
			}
		}
		in := mustRead(t, tp, flows)
		_, res := simulate(t, in, Options{Model: Fluid, Routing: routing, Faults: faults, verify: verify})
		if worst > 1e-9 || checks < 100 {
			t.Errorf("%s: incremental rates differ from a full recompute by %.3g (relative) over %d updates", routing, worst, checks)
		}
		if res.End < 300*des.Microsecond {
			t.Errorf("%s: the run ended at %s, before the last fault", routing, res.End)
		}
	}
	checks := 0
	verify := func(f *fluid) {
		checks++
		load := map[route.DirLink]float64{}
		for i := range f.slots {
			if s := &f.slots[i]; s.live {
				for k, l := range s.path {
					load[l] += f.hot[i].rate * float64(s.weight(k))
				}
			}
		}
		for l, r := range load {
			if r > f.cap[l]*(1+1e-9) {
				t.Fatalf("busbw: link copy %d carries %.6g bit/s, capacity %.6g", l, r, f.cap[l])
			}
		}
	}
	simulate(t, mustRead(t, tp, flows), Options{Model: Busbw, Faults: faults, verify: verify})
	if checks == 0 {
		t.Fatal("busbw: no update checked")
	}
}
