package serve

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// fatTree16 is a k=4 fat-tree of two 8-GPU servers, 100 Gbps NICs, 400
// Gbps between switches, 500 ns a link: GPUs 0-7 and 8-15 sit in
// different pods, 6 links apart (3 us).
func fatTree16(t *testing.T) (*topo.Topology, *route.Router) {
	t.Helper()
	tp, _, err := topo.Generate(topo.Params{Family: "fat-tree", GPUs: 16, GPUsPerServer: 8, NICBW: 100e9})
	if err != nil {
		t.Fatal(err)
	}
	r, err := route.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	return tp, r
}

// runNet drains the flows and returns each owner's arrival time.
func runNet(t *testing.T, n *network) map[int]des.Time {
	t.Helper()
	got := map[int]des.Time{}
	for steps := 0; ; steps++ {
		at := n.next()
		if at == des.Never {
			return got
		}
		if steps > 100 {
			t.Fatal("flows never drain")
		}
		n.advance(at)
		n.drained(func(owner int, at des.Time) { got[owner] = at })
	}
}

// Max-min by hand: flows A 0->8, B 1->8, D 2->8 share GPU 8's 100 Gbps
// downlink (33.3 Gbps each); C 0->9 shares GPU 0's uplink with A only, so
// it takes the 66.7 Gbps A leaves. With S bytes for A, B, D and 3S for C,
// and T = S x 8 / 100 Gbps: A, B, D drain at 3T; C has sent 2S by then
// and its last S goes at the full 100 Gbps: 4T. Each arrives 3 us later.
func TestNetworkMaxMin(t *testing.T) {
	_, r := fatTree16(t)
	n := newNetwork(r)
	const S = 12_500_000 // T = 1 ms
	T := des.Millisecond
	path := func(a, b int32) []route.DirLink {
		p, err := r.Path(a, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	n.add(0, path(0, 8), S)
	n.add(1, path(1, 8), S)
	n.add(2, path(2, 8), S)
	n.add(3, path(0, 9), 3*S)
	n.next()
	for i, want := range []float64{100e9 / 3, 100e9 / 3, 100e9 / 3, 200e9 / 3} {
		if got := n.flows[i].rate; got < want*(1-1e-12) || got > want*(1+1e-12) {
			t.Errorf("flow %d: %g bit/s, want %g", i, got, want)
		}
	}
	got := runNet(t, n)
	lat := 3 * des.Microsecond
	for owner, want := range map[int]des.Time{0: 3*T + lat, 1: 3*T + lat, 2: 3*T + lat, 3: 4*T + lat} {
		if d := got[owner] - want; d < -2 || d > 2 {
			t.Errorf("flow %d arrived at %v, want %v", owner, got[owner], want)
		}
	}
}
