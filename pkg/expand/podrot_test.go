package expand_test

import (
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/pkg/expand"
	"github.com/fabricsim/fabricsim/pkg/route"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// The pod rotation by hand on a k=8 fat-tree of 128 GPUs, 4 a server:
// 8 pods of 4 edges, one server an edge, so the rotation moves GPU index l
// to l+1 and pods by 8/4 = 2, i.e. servers by 8 (32 GPUs).
func TestPodRotation(t *testing.T) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.FatTree, K: 8, GPUs: 128, GPUsPerServer: 4, GPUType: "A100"})
	if err != nil {
		t.Fatal(err)
	}
	rot, err := expand.NewPodRotation(tp)
	if err != nil {
		t.Fatal(err)
	}
	if rot.Order != 4 {
		t.Fatalf("order %d, want 4 (GPUs per server)", rot.Order)
	}
	// The NIC link of GPU r, leaving it.
	nic := func(r int32) route.DirLink {
		for li, l := range tp.Links {
			if l.Kind == "nic" && (l.A == r || l.B == r) {
				if l.A == r {
					return route.DirLink(2 * li)
				}
				return route.DirLink(2*li + 1)
			}
		}
		t.Fatalf("GPU %d has no NIC", r)
		return 0
	}
	// GPU 0's orbit: GPU 0 of server 0, 1 of server 8, 2 of 16, 3 of 24.
	for _, r := range []int32{0, 32 + 1, 64 + 2, 96 + 3} {
		if c := rot.Canon(nic(r)); c != nic(0) {
			t.Errorf("GPU %d's NIC link stands for link %d, want GPU 0's (%d)", r, c, nic(0))
		}
	}
	for _, r := range []int32{1, 32, 4, 36} { // other orbits
		if c := rot.Canon(nic(r)); c == nic(0) {
			t.Errorf("GPU %d's NIC link in GPU 0's orbit", r)
		}
	}
	// Every orbit has 4 links: each first link stands for 4.
	count := map[route.DirLink]int{}
	for d := range 2 * len(tp.Links) {
		count[rot.Canon(route.DirLink(d))]++
	}
	for c, n := range count {
		if n != 4 {
			t.Errorf("link %d stands for %d links, want 4", c, n)
		}
	}
	group := func(l int32, first int32) []int32 { // GPU l of every server, from server first on
		var g []int32
		for k := range int32(32) {
			g = append(g, 4*((first+k)%32)+l)
		}
		return g
	}
	for _, c := range []struct {
		name   string
		groups [][]int32
		want   bool
	}{
		{"one DP ring a GPU index", [][]int32{group(0, 0), group(1, 0), group(2, 0), group(3, 0)}, true},
		{"in another order", [][]int32{group(0, 0), group(3, 0), group(1, 0), group(2, 0)}, true},
		{"rank orders rotated", [][]int32{group(0, 0), group(1, 5), group(2, 0), group(3, 17)}, true},
		{"three groups", [][]int32{group(0, 0), group(1, 0), group(2, 0)}, false},
		{"a GPU index twice", [][]int32{group(0, 0), group(1, 0), group(1, 3), group(3, 0)}, false},
		{"a rank order not a rotation", [][]int32{group(0, 0), group(1, 0), group(2, 0), append(group(3, 0)[1:2:2], group(3, 0)[0])}, false},
	} {
		if got := expand.ImagesOf(rot, c.groups, tp.GPUs); got != c.want {
			t.Errorf("%s: images %v, want %v", c.name, got, c.want)
		}
	}
	// Half the pods empty: the 4 with GPUs rotate by 1, the others stay.
	half, _, err := topo.Generate(topo.Params{Family: topo.FatTree, K: 8, GPUs: 64, GPUsPerServer: 4, GPUType: "A100"})
	if err != nil {
		t.Fatal(err)
	}
	if rot, err := expand.NewPodRotation(half); err != nil || rot.Order != 4 {
		t.Errorf("k=8, 64 GPUs: %v", err)
	}
	for _, c := range []struct {
		p   topo.Params
		why string
	}{
		{topo.Params{Family: topo.FatTree, K: 8, GPUs: 96, GPUsPerServer: 4, GPUType: "A100"}, "6 pods with GPUs"}, // not a multiple of 4
		{topo.Params{Family: topo.FatTree, K: 8, GPUs: 128, GPUType: "A100"}, "no image"},                          // 8 GPUs a server, on two edges
		{topo.Params{Family: topo.FatTree, K: 4, GPUs: 16, GPUsPerServer: 4, GPUType: "A100"}, "no image"},         // a server on two edges
		{topo.Params{Family: topo.SpectrumX, GPUs: 128, GPUType: "A100", NICsPerASW: 4}, ""},                       // any error
	} {
		tp, _, err := topo.Generate(c.p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := expand.NewPodRotation(tp); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s %d GPUs k=%d: %v, want an error with %q", c.p.Family, c.p.GPUs, c.p.K, err, c.why)
		}
	}
}
