package route

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

func gen(t testing.TB, p topo.Params) *topo.Topology {
	t.Helper()
	tp, _, err := topo.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func router(t testing.TB, tp *topo.Topology) *Router {
	t.Helper()
	r, err := New(tp)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func path(t testing.TB, r *Router, src, dst int32, h uint64) []DirLink {
	t.Helper()
	p, err := r.Path(src, dst, h)
	if err != nil {
		t.Fatal(err)
	}
	checkWalk(t, r, p, src, dst)
	return p
}

// checkWalk asserts p is a walk from src to dst that forwards only through
// switches.
func checkWalk(t testing.TB, r *Router, p []DirLink, src, dst int32) {
	t.Helper()
	v := src
	for k, d := range p {
		if r.From(d) != v {
			t.Fatalf("%d->%d: hop %d leaves %d, walk is at %d", src, dst, k, r.From(d), v)
		}
		v = r.To(d)
		if k < len(p)-1 && v < r.g {
			t.Fatalf("%d->%d: GPU %d forwards", src, dst, v)
		}
	}
	if v != dst {
		t.Fatalf("%d->%d: path ends at %d", src, dst, v)
	}
}

// hops is a reference BFS distance where GPUs other than src and dst do not
// forward, and same-server pairs use only NVLink when they can.
func hops(tp *topo.Topology, src, dst int32) int {
	adj := topo.BuildAdjacency(tp)
	sameServer := tp.Nodes[src].Server == tp.Nodes[dst].Server
	for _, nvOnly := range []bool{sameServer, false} {
		dist := map[int32]int{src: 0}
		q := []int32{src}
		for len(q) > 0 {
			v := q[0]
			q = q[1:]
			if v == dst {
				return dist[v]
			}
			if v != src && int(v) < tp.GPUs {
				continue
			}
			for _, li := range adj.Links[adj.Start[v]:adj.Start[v+1]] {
				if nvOnly && tp.Links[li].Kind != stream.LinkNVLink {
					continue
				}
				o := topo.Other(tp, li, v)
				if _, ok := dist[o]; !ok {
					dist[o] = dist[v] + 1
					q = append(q, o)
				}
			}
		}
	}
	return -1
}

// Every family: random pairs get a valid walk of the shortest length.
func TestShortestOnEveryFamily(t *testing.T) {
	for _, p := range []topo.Params{
		{Family: topo.SpectrumX, GPUs: 1024},
		{Family: topo.HPNSinglePlane, GPUs: 2048},
		{Family: topo.HPNDualPlane, GPUs: 2048},
		{Family: topo.DCNSingleToR, GPUs: 256},
		{Family: topo.DCNDualToR, GPUs: 512},
		{Family: topo.FatTree, K: 8, Oversub: 2},
		{Family: topo.Dragonfly, GPUs: 72, GPUsPerServer: 1, RoutersPerGroup: 4, TerminalsPerRouter: 2, GlobalPerRouter: 2},
	} {
		tp := gen(t, p)
		r := router(t, tp)
		rng := rand.New(rand.NewPCG(7, uint64(len(p.Family))))
		for k := 0; k < 60; k++ {
			src, dst := rng.Int32N(int32(tp.GPUs)), rng.Int32N(int32(tp.GPUs))
			h := rng.Uint64()
			pa := path(t, r, src, dst, h)
			if again := path(t, r, src, dst, h); !slices.Equal(pa, again) { // may come from the cache
				t.Fatalf("%s: %d->%d: %v then %v", p.Family, src, dst, pa, again)
			}
			if src == dst {
				if len(pa) != 0 {
					t.Fatalf("%s: self path %v", p.Family, pa)
				}
				continue
			}
			if want := hops(tp, src, dst); len(pa) != want {
				t.Fatalf("%s: %d->%d takes %d hops, shortest is %d", p.Family, src, dst, len(pa), want)
			}
		}
	}
}

// Same server: NVLink through the NVSwitch, also on DCN+ dual ToR where
// GPU-ASW-GPU is just as short.
func TestSameServerNVLink(t *testing.T) {
	for _, fam := range []string{topo.SpectrumX, topo.DCNDualToR, topo.DCNSingleToR} {
		tp := gen(t, topo.Params{Family: fam, GPUs: 64})
		r := router(t, tp)
		for h := uint64(0); h < 20; h++ {
			pa := path(t, r, 1, 6, h)
			if len(pa) != 2 {
				t.Fatalf("%s: same-server path has %d hops", fam, len(pa))
			}
			for _, d := range pa {
				if tp.Links[d.Link()].Kind != stream.LinkNVLink {
					t.Fatalf("%s: same-server path uses a %s link", fam, tp.Links[d.Link()].Kind)
				}
			}
			if nvs := tp.Nodes[r.To(pa[0])]; nvs.Kind != stream.NodeNVSwitch || nvs.Server != 0 {
				t.Fatalf("%s: goes through %+v", fam, nvs)
			}
		}
	}
}

// Spectrum-X, 1024 GPUs: same rail stays under the rail's ASW (2 hops);
// rail 1 to rail 2 goes up to a PSW. ECMP over the 64 PSWs is a function of
// the hash only and spreads evenly.
func TestECMP(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 1024})
	r := router(t, tp)
	if pa := path(t, r, 3, 8*40+3, 1); len(pa) != 2 || tp.Nodes[r.To(pa[0])].Role != topo.RoleASW {
		t.Fatalf("same-rail path %v", pa)
	}
	perPSW := map[int32]int{}
	const flows = 6400
	for id := int64(0); id < flows; id++ {
		h := FlowHash(1, 8*9+2, id, 1)
		pa := path(t, r, 1, 8*9+2, h)
		if len(pa) != 4 || tp.Nodes[r.To(pa[1])].Role != topo.RolePSW {
			t.Fatalf("cross-rail path %v", pa)
		}
		again := path(t, r, 1, 8*9+2, h)
		for k := range pa {
			if pa[k] != again[k] {
				t.Fatal("same hash, different path")
			}
		}
		perPSW[r.To(pa[1])]++
	}
	if len(perPSW) != 64 {
		t.Fatalf("flows used %d of 64 PSWs", len(perPSW))
	}
	for psw, n := range perPSW {
		// 100 expected per PSW; a binomial(6400, 1/64) stays well within 60..140.
		if n < 60 || n > 140 {
			t.Errorf("PSW %d carries %d of %d flows", psw, n, flows)
		}
	}
	// The seed changes the choice.
	same := 0
	for id := int64(0); id < 200; id++ {
		a := path(t, r, 1, 8*9+2, FlowHash(1, 8*9+2, id, 1))
		b := path(t, r, 1, 8*9+2, FlowHash(1, 8*9+2, id, 2))
		if a[1] == b[1] {
			same++
		}
	}
	if same > 20 {
		t.Errorf("seeds 1 and 2 agree on %d of 200 uplinks", same)
	}
}

// AlibabaHPN dual ToR: each GPU has two NIC links and spreads its flows over
// both.
func TestDualToRSpread(t *testing.T) {
	for _, fam := range []string{topo.HPNSinglePlane, topo.HPNDualPlane} {
		tp := gen(t, topo.Params{Family: fam, GPUs: 2048})
		r := router(t, tp)
		nic := map[int32]int{}
		for id := int64(0); id < 1000; id++ {
			pa := path(t, r, 5, 1024+5+8*3, FlowHash(5, 1024+5+8*3, id, 1))
			if tp.Links[pa[0].Link()].Kind != stream.LinkNIC {
				t.Fatalf("%s: first hop is %s", fam, tp.Links[pa[0].Link()].Kind)
			}
			nic[pa[0].Link()]++
		}
		if len(nic) != 2 {
			t.Fatalf("%s: flows leave by %d NIC links, want 2", fam, len(nic))
		}
		for l, n := range nic {
			if n < 400 {
				t.Errorf("%s: NIC link %d carries %d of 1000 flows", fam, l, n)
			}
		}
	}
}

// NVLS flows go between a GPU and its server's NVSwitch: one NVLink hop
// either way. Other switch endpoints route along shortest paths too.
func TestSwitchEndpoints(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 64, NVSwitchesPerServer: 2})
	r := router(t, tp)
	nvs := int32(64 + 2*3) // the first NVSwitch of server 3
	spread := map[int32]int{}
	for h := uint64(0); h < 200; h++ {
		for _, ends := range [][2]int32{{26, nvs}, {nvs, 29}} {
			pa := path(t, r, ends[0], ends[1], h)
			if len(pa) != 1 || tp.Links[pa[0].Link()].Kind != stream.LinkNVLink {
				t.Fatalf("%v: path %v", ends, pa)
			}
		}
		// GPU 1 to GPU 2 spreads over the server's two NVSwitches.
		spread[r.To(path(t, r, 1, 2, h)[0])]++
	}
	if len(spread) != 2 {
		t.Errorf("same-server flows use NVSwitches %v, want both", spread)
	}
	var psw int32 = -1
	for i, n := range tp.Nodes {
		if n.Role == topo.RolePSW {
			psw = int32(i)
			break
		}
	}
	for _, ends := range [][2]int32{{psw, 9}, {9, psw}, {nvs, psw}} {
		if ends[0] == nvs {
			if _, err := r.Path(ends[0], ends[1], 1); err == nil {
				t.Errorf("NVSwitch to PSW: routed through a GPU")
			}
			continue
		}
		pa := path(t, r, ends[0], ends[1], 1)
		if len(pa) != 2 {
			t.Errorf("%v: %d hops, want 2 (through the rail's ASW)", ends, len(pa))
		}
	}
}

func TestLatencyBottleneck(t *testing.T) {
	tp := gen(t, topo.Params{Family: topo.SpectrumX, GPUs: 1024, NICBW: 100e9})
	r := router(t, tp)
	// Cross rail: NIC 500ns + ASW-PSW 500ns + PSW-ASW 500ns + NIC 500ns; bottleneck the 100G NIC.
	pa := path(t, r, 0, 9, 1)
	if lat := r.Latency(pa); lat != 2000*des.Nanosecond {
		t.Errorf("latency %v", lat)
	}
	if bw := r.Bottleneck(pa); bw != 100e9 {
		t.Errorf("bottleneck %g", bw)
	}
	// NVLink: 2 x 25 ns, 18 x 20.6 GB/s (H100).
	pa = path(t, r, 0, 1, 1)
	if r.Latency(pa) != 50*des.Nanosecond || r.Bottleneck(pa) != 18*20.6*8e9 {
		t.Errorf("nvlink latency %v bottleneck %g", r.Latency(pa), r.Bottleneck(pa))
	}
}

func TestErrors(t *testing.T) {
	// Two GPUs on two switches with nothing between them.
	tp := &topo.Topology{GPUs: 2, GPUsPerServer: 1, GPUType: "H100", Nodes: []stream.Node{
		{ID: 0, Kind: "gpu", Server: 0}, {ID: 1, Kind: "gpu", Server: 1},
		{ID: 2, Kind: "switch", Server: -1}, {ID: 3, Kind: "switch", Server: -1},
	}, Links: []stream.Link{
		{A: 0, B: 2, BWbps: 1e9, Kind: "nic"}, {A: 1, B: 3, BWbps: 1e9, Kind: "nic"},
	}}
	r := router(t, tp)
	if _, err := r.Path(0, 1, 0); err == nil || !strings.Contains(err.Error(), "no path from GPU 0 to GPU 1") {
		t.Errorf("unreachable: %v", err)
	}
	if _, err := r.Path(0, 5, 0); err == nil || !strings.Contains(err.Error(), "dst 5 is not a node of the topology") {
		t.Errorf("bad GPU: %v", err)
	}
	// One switch holding every GPU (only GPU neighbours) still routes.
	tp.Links[1].B = 2
	r = router(t, tp)
	if p := path(t, r, 0, 1, 0); len(p) != 2 {
		t.Errorf("single-switch path %v", p)
	}
}

func BenchmarkPath(b *testing.B) {
	tp := gen(b, topo.Params{Family: topo.HPNDualPlane, GPUs: 15360})
	r := router(b, tp)
	buf := make([]DirLink, 0, 8)
	rng := rand.New(rand.NewPCG(1, 1))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		src, dst := rng.Int32N(15360), rng.Int32N(15360)
		var err error
		if buf, err = r.AppendPath(buf[:0], src, dst, uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// A failed link is avoided from then on: when a GPU's NVLink fails, its
// same-server traffic takes the network instead; failing its only NIC too
// makes it unreachable.
func TestFail(t *testing.T) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: 16})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(tp)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := r.Path(0, 1, 7)
	if len(p) != 2 || tp.Links[p[0].Link()].Kind != "nvlink" {
		t.Fatalf("same-server path %v is not NVLink", p)
	}
	nv := p[0].Link()
	if err := r.Fail(nv); err != nil {
		t.Fatal(err)
	}
	p, err = r.Path(0, 1, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range p {
		if d.Link() == nv {
			t.Fatalf("path %v uses the failed link", p)
		}
	}
	if len(p) != 4 { // NIC -> rail-0 ASW -> PSW -> rail-1 ASW -> GPU 1
		t.Fatalf("detour has %d hops, want 4", len(p))
	}
	for li, l := range tp.Links {
		if (l.A == 0 || l.B == 0) && l.Kind == "nic" {
			r.Fail(int32(li))
		}
	}
	if _, err := r.Path(0, 9, 1); err == nil {
		t.Fatal("GPU 0 reachable with all its links failed")
	}
	// The NVLink failed first stays failed through the later failures.
	if p, err := r.Path(0, 1, 7); err == nil {
		t.Fatalf("GPU 0 reaches GPU 1 over %v with all its links failed", p)
	}
}

// A dual-homed NIC: the port a flow asks for picks its first hop among the
// GPU's two NIC links (port mod 2), whatever the hash; without a port the
// hash picks. Beyond the first hop routing is unchanged.
func TestPathPort(t *testing.T) {
	for _, fam := range []string{topo.HPNSinglePlane, topo.DCNDualToR} {
		tp := gen(t, topo.Params{Family: fam, GPUs: 64})
		r := router(t, tp)
		first := map[int]map[DirLink]bool{}
		for port := 0; port < 4; port++ {
			first[port%2] = map[DirLink]bool{}
		}
		for h := uint64(0); h < 64; h++ {
			for port := 0; port < 4; port++ {
				p, err := r.AppendPathPort(nil, 0, 40, h, port)
				if err != nil {
					t.Fatal(err)
				}
				first[port%2][p[0]] = true
			}
		}
		if len(first[0]) != 1 || len(first[1]) != 1 {
			t.Fatalf("%s: first hops by port %v, want one link per port", fam, first)
		}
		var a, b DirLink
		for l := range first[0] {
			a = l
		}
		for l := range first[1] {
			b = l
		}
		if a == b || tp.Links[a.Link()].Kind != stream.LinkNIC || tp.Links[b.Link()].Kind != stream.LinkNIC {
			t.Fatalf("%s: ports 0 and 1 leave on links %d and %d, want the GPU's two NIC links", fam, a.Link(), b.Link())
		}
		hashed := map[DirLink]bool{}
		for h := uint64(0); h < 64; h++ {
			p, _ := r.AppendPathPort(nil, 0, 40, h, -1)
			hashed[p[0]] = true
		}
		if len(hashed) != 2 {
			t.Errorf("%s: hashed first hops %v, want both ports", fam, hashed)
		}
	}
}

// A connection's key is one id for all its transfers, never a transfer's
// own (those are not negative), and differs by channel.
func TestHashKey(t *testing.T) {
	for _, name := range HashKeyNames {
		k, err := ParseHashKey(name)
		if err != nil || k.String() != name {
			t.Errorf("ParseHashKey(%q) = %v, %v", name, k, err)
		}
	}
	if _, err := ParseHashKey("qp"); err == nil {
		t.Error("ParseHashKey(qp) took it")
	}
	if KeyTransfer.ID(7, 3) != 7 || KeyConnection.ID(7, 3) != KeyConnection.ID(9, 3) {
		t.Error("the transfer key must hash the transfer, the connection key the channel")
	}
	for ch := int32(-1); ch < 4; ch++ {
		if KeyConnection.ID(0, ch) >= 0 || KeyConnection.ID(0, ch) == KeyConnection.ID(0, ch+1) {
			t.Errorf("channel %d: connection id %d", ch, KeyConnection.ID(0, ch))
		}
	}
}

// firstHops' best is the shortest walk that forwards only through
// switches, found by breadth-first search: on Spectrum-X H100 servers
// (NVSwitches, each a switch with only its server's GPUs as neighbours),
// on a single-ToR and HPN's dual-plane fabric, and by hand on a switch
// with only GPU neighbours of two servers, for GPU pairs on one server
// and on others.
func TestFirstHopsShortest(t *testing.T) {
	// Two servers of two GPUs, each GPU on its server's NVSwitch (4, 5)
	// and all on one switch without uplinks (6).
	small := &topo.Topology{GPUs: 4, GPUsPerServer: 2, GPUType: "H100", Nodes: []stream.Node{
		{ID: 0, Kind: "gpu", Server: 0}, {ID: 1, Kind: "gpu", Server: 0},
		{ID: 2, Kind: "gpu", Server: 1}, {ID: 3, Kind: "gpu", Server: 1},
		{ID: 4, Kind: "switch", Server: 0}, {ID: 5, Kind: "switch", Server: 1}, {ID: 6, Kind: "switch", Server: -1},
	}, Links: []stream.Link{
		{A: 0, B: 4, BWbps: 1e9, Kind: "nvlink"}, {A: 1, B: 4, BWbps: 1e9, Kind: "nvlink"},
		{A: 2, B: 5, BWbps: 1e9, Kind: "nvlink"}, {A: 3, B: 5, BWbps: 1e9, Kind: "nvlink"},
		{A: 0, B: 6, BWbps: 1e9, Kind: "nic"}, {A: 1, B: 6, BWbps: 1e9, Kind: "nic"},
		{A: 2, B: 6, BWbps: 1e9, Kind: "nic"}, {A: 3, B: 6, BWbps: 1e9, Kind: "nic"},
	}}
	for _, p := range []topo.Params{
		{Family: topo.SpectrumX, GPUs: 32, GPUType: "H100"},
		{Family: topo.DCNSingleToR, GPUs: 16},
		{Family: topo.HPNDualPlane, GPUs: 32},
		{Family: "by hand"},
	} {
		tp := small
		if p.Family != "by hand" {
			tp = gen(t, p)
		}
		r := router(t, tp)
		leafOnly := 0
		for _, l := range r.leafOnly {
			if l {
				leafOnly++
			}
		}
		if leafOnly == 0 {
			t.Fatalf("%s: no switch with only GPU neighbours", p.Family)
		}
		for src := int32(0); src < r.g; src++ {
			dist := bfsGPU(r, src)
			for dst := int32(0); dst < r.g; dst++ {
				if dst == src {
					continue
				}
				best, _, err := r.firstHops(src, dst)
				if err != nil || best != dist[dst] {
					t.Fatalf("%s: %d->%d: first hops' best %d (%v), shortest walk %d", p.Family, src, dst, best, err, dist[dst])
				}
			}
		}
	}
}

// bfsGPU is each node's hop count from GPU src along walks that forward
// only through switches.
func bfsGPU(r *Router, src int32) []int {
	dist := make([]int, len(r.t.Nodes))
	for i := range dist {
		dist[i] = -1
	}
	dist[src] = 0
	queue := []int32{src}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if v != src && v < r.g {
			continue // GPUs do not forward
		}
		for _, li := range r.links(v) {
			if o := topo.Other(r.t, li, v); dist[o] < 0 {
				dist[o] = dist[v] + 1
				queue = append(queue, o)
			}
		}
	}
	return dist
}
