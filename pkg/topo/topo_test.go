package topo

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

func gen(t *testing.T, p Params) *Topology {
	t.Helper()
	topo, _, err := Generate(p)
	if err != nil {
		t.Fatalf("%+v: %v", p, err)
	}
	return topo
}

func countRoles(t *Topology) map[string]int {
	m := map[string]int{}
	for _, n := range t.Nodes {
		m[n.Role]++
	}
	return m
}

func countLinks(t *Topology) map[string]int {
	m := map[string]int{}
	for _, l := range t.Links {
		m[l.Kind]++
	}
	return m
}

// The expected counts below follow from each family's wiring rules with
// SimAI's defaults (8 GPUs and 1 NVSwitch per server):
//
//	spectrum-x:  segment = 64 NICs/ASW x 8 rails = 512 GPUs; ASW = 8*seg; PSW = 64; fabric = ASW*PSW
//	hpn-single:  segment = 128 x 8 = 1024 GPUs; ASW = 2 ToR sets x 8 rails x seg; PSW = 120; fabric = ASW*120
//	hpn-dual:    as hpn-single but each ToR set reaches its plane's 60 PSWs; fabric = ASW*60
//	dcn-single:  segment = 64 GPUs on 1 ASW; PSW = 8; fabric = ASW*8
//	dcn-dual:    segment = 128 GPUs on 2 ASWs (one per ToR set); fabric = ASW*8
//	fat-tree:    k with k^3/4 = GPUs; k^2/2 edge, k^2/2 agg, k^2/4 core; fabric = k^3/4 + k^3/4
//	dragonfly:   balanced a=2p=2h; routers a*g; local g*a(a-1)/2; global g*a*h/2
//
// NVLink links = GPUs (one NVSwitch per server), NIC links = GPUs * NICs per GPU.
func TestClosedFormCounts(t *testing.T) {
	type want struct {
		asw, psw, edge, agg, core, router, nic, fabric int
	}
	ceil := func(a, b int) int { return (a + b - 1) / b }
	expect := func(fam string, G int) want {
		switch fam {
		case SpectrumX:
			seg := ceil(G, 512)
			return want{asw: 8 * seg, psw: 64, nic: G, fabric: 8 * seg * 64}
		case HPNSinglePlane:
			seg := ceil(G, 1024)
			return want{asw: 16 * seg, psw: 120, nic: 2 * G, fabric: 16 * seg * 120}
		case HPNDualPlane:
			seg := ceil(G, 1024)
			return want{asw: 16 * seg, psw: 120, nic: 2 * G, fabric: 16 * seg * 60}
		case DCNSingleToR:
			seg := ceil(G, 64)
			return want{asw: seg, psw: 8, nic: G, fabric: seg * 8}
		case DCNDualToR:
			seg := ceil(G, 128)
			return want{asw: 2 * seg, psw: 8, nic: 2 * G, fabric: 2 * seg * 8}
		case FatTree:
			k := map[int]int{16: 4, 128: 8, 1024: 16}[G]
			return want{edge: k * k / 2, agg: k * k / 2, core: k * k / 4, nic: G, fabric: k * k * k / 2}
		case Dragonfly:
			// (a, h, groups): 16 GPUs fit p=2 with 2 groups; 128 need p=3 and
			// 10 groups (the fewest >= 128/18 whose g-1 divides a*h=18); 1024
			// need p=4 and 33 groups (g-1 = 32 divides a*h = 32).
			c := map[int][3]int{16: {4, 2, 2}, 128: {6, 3, 10}, 1024: {8, 4, 33}}[G]
			a, h, g := c[0], c[1], c[2]
			return want{router: a * g, nic: G, fabric: g*a*(a-1)/2 + g*a*h/2}
		}
		panic(fam)
	}
	for _, fam := range Families {
		for _, G := range []int{16, 128, 1024} {
			topo := gen(t, Params{Family: fam, GPUs: G})
			w := expect(fam, G)
			r, l := countRoles(topo), countLinks(topo)
			got := want{asw: r[RoleASW], psw: r[RolePSW], edge: r[RoleEdge], agg: r[RoleAgg], core: r[RoleCore],
				router: r[RoleRouter], nic: l[stream.LinkNIC], fabric: l[stream.LinkFabric]}
			if got != w {
				t.Errorf("%s/%d: got %+v, want %+v", fam, G, got, w)
			}
			if r[RoleGPU] != G || r[RoleNVSwitch] != G/8 || l[stream.LinkNVLink] != G {
				t.Errorf("%s/%d: %d GPUs, %d NVSwitches, %d NVLinks", fam, G, r[RoleGPU], r[RoleNVSwitch], l[stream.LinkNVLink])
			}
			if err := CheckNICLinks(topo, NICsPerGPU(fam)); err != nil {
				t.Errorf("%s/%d: %v", fam, G, err)
			}
		}
	}
}

// Rail wiring: GPU i of every server reaches the ASW of rail i; the DCN+
// families put a whole segment on one ASW (per ToR set).
func TestWiring(t *testing.T) {
	topo := gen(t, Params{Family: SpectrumX, GPUs: 1024})
	// Node ids: 1024 GPUs, 128 NVSwitches, ASWs from 1152 (segment 0: 1152..1159).
	for _, l := range topo.Links {
		if l.Kind != stream.LinkNIC {
			continue
		}
		g := int(l.A)
		wantASW := 1152 + (g/512)*8 + g%8
		if int(l.B) != wantASW {
			t.Fatalf("GPU %d wired to %d, want ASW %d", g, l.B, wantASW)
		}
	}
	dual := gen(t, Params{Family: HPNDualPlane, GPUs: 2048})
	// 2 segments: ASW set A 2304..2319, set B 2320..2335, PSW plane A 2336..2395, plane B 2396..2455.
	for _, l := range dual.Links {
		if l.Kind != stream.LinkFabric {
			continue
		}
		setB := l.A >= 2320
		planeB := l.B >= 2396
		if setB != planeB {
			t.Fatalf("dual plane: ASW %d linked to PSW %d across planes", l.A, l.B)
		}
	}
	dcn := gen(t, Params{Family: DCNDualToR, GPUs: 256})
	for _, l := range dcn.Links {
		if l.Kind == stream.LinkNIC {
			seg := int(l.A) / 128
			if a, b := 256+32+seg, 256+32+2+seg; int(l.B) != a && int(l.B) != b {
				t.Fatalf("GPU %d on %d, want ASW %d or %d", l.A, l.B, a, b)
			}
		}
	}
}

// Dragonfly of seed 003: 72 nodes, 2 per router, 4 routers per group, 9
// groups, 2 global channels per router; one global link per pair of groups.
func TestDragonfly72(t *testing.T) {
	topo := gen(t, Params{Family: Dragonfly, GPUs: 72, GPUsPerServer: 1, RoutersPerGroup: 4, TerminalsPerRouter: 2, GlobalPerRouter: 2, Groups: 9})
	first := 72
	group := func(v int32) int { return (int(v) - first) / 4 }
	pairs := map[[2]int]int{}
	local, global := make([]int, 36), make([]int, 36)
	for _, l := range topo.Links {
		if l.Kind != stream.LinkFabric {
			continue
		}
		ga, gb := group(l.A), group(l.B)
		if ga == gb {
			local[int(l.A)-first]++
			local[int(l.B)-first]++
			continue
		}
		global[int(l.A)-first]++
		global[int(l.B)-first]++
		if ga > gb {
			ga, gb = gb, ga
		}
		pairs[[2]int{ga, gb}]++
	}
	if len(pairs) != 36 { // C(9,2)
		t.Fatalf("%d group pairs linked, want 36", len(pairs))
	}
	for p, n := range pairs {
		if n != 1 {
			t.Fatalf("groups %v share %d global links", p, n)
		}
	}
	for r := range local {
		if local[r] != 3 || global[r] != 2 {
			t.Fatalf("router %d: %d local, %d global links; want 3 and 2", r, local[r], global[r])
		}
	}
	// Longest shortest path: terminal, local, global, local, terminal.
	if d, err := Diameter(topo); err != nil || d != 5 {
		t.Fatalf("diameter %d, %v; want 5", d, err)
	}
}

// Bisection and diameter against hand computation.
func TestBisectionAndDiameter(t *testing.T) {
	cases := []struct {
		p     Params
		bis   float64
		diam  int
		about string
	}{
		// 16 GPUs, 2 servers: each rail's ASW joins the servers; the cut is
		// server 0's 8 NICs at 400G.
		{Params{Family: SpectrumX, GPUs: 16}, 8 * 400e9, 4, "two servers, one segment"},
		// 1024 GPUs, 2 segments of 512: servers 0-63 are segment 0; each of its
		// 8 ASWs has 64 NICs (25.6T) below and 64 PSW links (25.6T) above.
		{Params{Family: SpectrumX, GPUs: 1024}, 512 * 400e9, 4, "two segments"},
		// DCN+ 128 GPUs: 64 per ASW, 8 uplinks of 400G each: 3.2T.
		{Params{Family: DCNSingleToR, GPUs: 128}, 8 * 400e9, 4, "oversubscribed 8:1"},
		// Non-blocking k=4 fat-tree, 16 hosts at 400G: half of them, 8 x 400G.
		{Params{Family: FatTree, GPUs: 16, GPUsPerServer: 1}, 8 * 400e9, 6, "k=4"},
		// 2:1 oversubscribed k=4 fat-tree, 32 hosts: pods 0-1 hold hosts 0-15
		// and leave through their 4 aggs' 2 core links each: 8 x 400G.
		{Params{Family: FatTree, GPUs: 32, GPUsPerServer: 1, K: 4, Oversub: 2}, 8 * 400e9, 6, "k=4 2:1"},
	}
	for _, c := range cases {
		topo := gen(t, c.p)
		if b := Bisection(topo); b < c.bis*(1-1e-9) || b > c.bis*(1+1e-9) {
			t.Errorf("%s: bisection %g, want %g", c.about, b, c.bis)
		}
		if d, err := Diameter(topo); err != nil || d != c.diam {
			t.Errorf("%s: diameter %d (%v), want %d", c.about, d, err, c.diam)
		}
	}
	// Oversubscription of a 2:1 fat-tree edge tier is 2.
	topo := gen(t, Params{Family: FatTree, GPUs: 32, GPUsPerServer: 1, K: 4, Oversub: 2})
	for _, ts := range Tiers(topo) {
		want := map[string]float64{RoleEdge: 2, RoleAgg: 1, RoleCore: 0}[ts.Role]
		if ts.Oversubscription() != want {
			t.Errorf("tier %s oversubscription %g, want %g", ts.Role, ts.Oversubscription(), want)
		}
	}
}

func TestUnreachableAndNICChecks(t *testing.T) {
	topo := gen(t, Params{Family: SpectrumX, GPUs: 16})
	// Drop GPU 3's NIC link: it still reaches its server mates over NVLink
	// but nobody on the other server.
	var links []stream.Link
	for _, l := range topo.Links {
		if !(l.A == 3 && l.Kind == stream.LinkNIC) {
			links = append(links, l)
		}
	}
	topo.Links = links
	if _, err := Diameter(topo); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("want a reachability error, got %v", err)
	}
	if err := CheckNICLinks(topo, 1); err == nil || !strings.Contains(err.Error(), "GPU 3 has 0 NIC links") {
		t.Fatalf("want a NIC count error, got %v", err)
	}
}

func TestInvalidParams(t *testing.T) {
	cases := map[string]Params{
		"not a multiple of": {Family: SpectrumX, GPUs: 12},
		"unknown family":    {Family: "torus"},
		"unknown GPU type":  {Family: SpectrumX, GPUType: "V100"},
		"--nic-bw: -1 bit/s is outside 10Mbps to 1000Tbps":       {Family: SpectrumX, NICBW: -1},
		"--switch-bw: 1e+30 bit/s is outside 10Mbps to 1000Tbps": {Family: FatTree, SwitchBW: 1e30},
		"--nvlink-bw: 1e-21 bit/s is outside":                    {Family: SpectrumX, NVLinkBW: 1e-21},
		"--nic-latency: 2s is outside 0 to 1s":                   {Family: SpectrumX, NICLatencyPs: 2e12},
		"must be even":                                           {Family: FatTree, K: 5, GPUs: 16},
		"divide evenly":                                          {Family: Dragonfly, RoutersPerGroup: 4, TerminalsPerRouter: 2, GlobalPerRouter: 2, Groups: 8},
		"exceeds":                                                {Family: FatTree, K: 4, GPUs: 64},
		"more than --asw-per-psw":                                {Family: DCNSingleToR, GPUs: 1024, ASWPerPSW: 8},
		`--nic-network "IB" must be one of ib, roce, efa`:        {Family: SpectrumX, GPUs: 16, NICNetwork: "IB"},
	}
	for want, p := range cases {
		if _, _, err := Generate(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want it to say %q", p, err, want)
		}
	}
}

// Where SimAI's generator gives up (DCN+ beyond 512 GPUs), the counts are
// derived and a note says so.
func TestDerivedCountsNote(t *testing.T) {
	_, notes, err := Generate(Params{Family: DCNSingleToR, GPUs: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "--asw-per-psw 16") {
		t.Fatalf("notes %q", notes)
	}
}

// SimAI's own generator output for 16 H100s is reproduced byte for byte
// given SimAI's NVLink rate (2880 Gbps; topogen's default is the usable
// 18 x 20.6 GB/s), and every family round-trips export -> import -> export.
func TestSimAIFormat(t *testing.T) {
	ref, err := os.ReadFile("../../examples/topologies/Spectrum-X_16g_8gps_400Gbps_H100")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteSimAI(&buf, gen(t, Params{Family: SpectrumX, GPUs: 16, NVLinkBW: 2880e9})); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), ref) {
		t.Fatalf("export differs from SimAI's generator output")
	}
	for _, fam := range Families {
		topo := gen(t, Params{Family: fam, GPUs: 128, GPUType: "A100", ErrorRate: 0.001})
		var a, b bytes.Buffer
		if err := WriteSimAI(&a, topo); err != nil {
			t.Fatal(err)
		}
		back, err := ReadSimAI(bytes.NewReader(a.Bytes()), "mem")
		if err != nil {
			t.Fatalf("%s: %v", fam, err)
		}
		if err := WriteSimAI(&b, back); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("%s: round trip differs", fam)
		}
		if back.GPUs != topo.GPUs || len(back.Links) != len(topo.Links) {
			t.Fatalf("%s: import lost nodes or links", fam)
		}
		for i, l := range back.Links {
			if l != topo.Links[i] {
				t.Fatalf("%s: link %d: %+v != %+v", fam, i, l, topo.Links[i])
			}
		}
		for i, n := range back.Nodes {
			if n.Kind != topo.Nodes[i].Kind {
				t.Fatalf("%s: node %d kind %s != %s", fam, i, n.Kind, topo.Nodes[i].Kind)
			}
		}
	}
}

func TestSimAIBadLines(t *testing.T) {
	good := "20 8 2 2 4 H100\n16 17 18 19 \n0 16 2880Gbps 0.000025ms 0\n8 17 2880Gbps 0.000025ms 0\n0 18 400Gbps 0.0005ms 0\n18 19 400Gbps 0.0005ms 0\n"
	// 20 nodes = 16 GPUs + 2 NVS + 2 switches: structurally fine.
	if _, err := ReadSimAI(strings.NewReader(good), "t.txt"); err != nil {
		t.Fatalf("good file: %v", err)
	}
	cases := []struct{ text, want string }{
		{"", "t.txt: line 1"},
		{"20 8 2 2\n", "t.txt: line 1: header has 4 fields"},
		{"20 8 x 2 4 H100\n", "line 1, field nvswitches"},
		{"20 8 2 2 4 V100\n", "line 1, field gpu_type"},
		{"20 7 2 2 4 H100\n", "field gpus_per_server"},
		{"20 8 2 2 4 H100\n16 17 18\n", "line 2, field switch ids"},
		{strings.Replace(good, "0 18 400Gbps", "0 18 fastGbps", 1), "t.txt: line 5, field bandwidth"},
		{strings.Replace(good, "0 18 400Gbps 0.0005ms", "0 18 400Gbps 0.0005", 1), "line 5, field latency"},
		{strings.Replace(good, "18 19 400Gbps 0.0005ms 0", "18 99 400Gbps 0.0005ms 0", 1), "line 6, field dst"},
		{strings.Replace(good, "18 19 400Gbps 0.0005ms 0", "18 19 400Gbps 0.0005ms 2", 1), "line 6, field error_rate"},
		{strings.Replace(good, "18 19 400Gbps 0.0005ms 0\n", "18 19 400Gbps\n", 1), "line 6: link has 3 fields"},
		{strings.Replace(good, "18 19 400Gbps 0.0005ms 0\n", "", 1), "announces 4 links, the file has 3"},
		{good + "1 2 1Gbps 1ns 0\n", "line 7: more links"},
	}
	for _, c := range cases {
		_, err := ReadSimAI(strings.NewReader(c.text), "t.txt")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}

// The stream carries the topology unchanged.
func TestTopologyThroughStream(t *testing.T) {
	topo := gen(t, Params{Family: HPNDualPlane, GPUs: 1024})
	var buf bytes.Buffer
	w, _ := stream.NewWriter(&buf, "test")
	w.Topology(topo)
	w.Close()
	r, err := stream.NewReader(&buf, "mem")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	back, err := r.Topology()
	if err != nil {
		t.Fatal(err)
	}
	if Hash(back) != Hash(topo) || back.Params["psw"] != "120" {
		t.Fatal("topology changed through the stream")
	}
}

// A topology's nic_network param is one of the networks or left out; any
// other value is refused, naming the param.
func TestValidateNICNetwork(t *testing.T) {
	top := gen(t, Params{Family: SpectrumX, GPUs: 16, NICNetwork: NetRoCE})
	if net, err := NICNetwork(top); net != NetRoCE || err != nil || Validate(top) != nil {
		t.Errorf("roce: %q, %v, %v", net, err, Validate(top))
	}
	top.Params[ParamNICNetwork] = "ethernet"
	if err := Validate(top); err == nil || !strings.Contains(err.Error(), `params nic_network: "ethernet" must be one of`) {
		t.Errorf("nic_network ethernet: %v", err)
	}
	delete(top.Params, ParamNICNetwork)
	if net, err := NICNetwork(top); net != "" || err != nil {
		t.Errorf("no nic_network: %q, %v", net, err)
	}
}

func FuzzReadSimAI(f *testing.F) {
	if b, err := os.ReadFile("../../examples/topologies/Spectrum-X_16g_8gps_400Gbps_H100"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("20 8 2 2 4 H100\n16 17 18 19 \n0 16 2880Gbps 0.000025ms 0\n8 17 2880Gbps 0.000025ms 0\n0 18 400Gbps 0.0005ms 0\n18 19 400Gbps 0.0005ms 0\n"))
	f.Add([]byte("3 1 0 1 2 A100\n2\n0 2 100Gbps 1us 0\n1 2 100Gbps 1us 0\n"))
	// Lines that must be refused: bandwidths out of range or NaN, a latency
	// of 1e30 ms, an unknown GPU type, an error rate of 1, a duplicate of
	// the switch list, a link count that does not match.
	for _, bad := range []string{
		"3 1 0 1 2 A100\n2\n0 2 1e-30Gbps 1us 0\n1 2 100Gbps 1us 0\n",
		"3 1 0 1 2 A100\n2\n0 2 NaNGbps 1us 0\n1 2 100Gbps 1us 0\n",
		"3 1 0 1 2 A100\n2\n0 2 100Gbps 1e30ms 0\n1 2 100Gbps 1us 0\n",
		"3 1 0 1 2 V100\n2\n0 2 100Gbps 1us 0\n1 2 100Gbps 1us 0\n",
		"3 1 0 1 2 A100\n2\n0 2 100Gbps 1us 1\n1 2 100Gbps 1us 0\n",
		"3 1 0 1 2 A100\n2 2\n0 2 100Gbps 1us 0\n1 2 100Gbps 1us 0\n",
		"3 1 0 1 3 A100\n2\n0 2 100Gbps 1us 0\n1 2 100Gbps 1us 0\n",
	} {
		f.Add([]byte(bad))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := ReadSimAI(bytes.NewReader(data), "fuzz")
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "fuzz: line ") {
				t.Fatalf("error not a single located line: %q", err)
			}
			return
		}
		if err := Validate(topo); err != nil {
			t.Fatalf("accepted an invalid topology: %v", err)
		}
	})
}

// An A100 reaches its NIC over PCIe Gen4 x16, which carries 28.3 GB/s
// (226.4 Gb/s, GPUSpec.PCIeCarriesGBps): a faster NIC's link is capped
// there, shared by a GPU's two ports on the dual-ToR families (113.2 each),
// and shown as nic_link_bw; a 200G NIC and a Hopper's links are not capped.
func TestNICLinkCappedByGPUPCIe(t *testing.T) {
	for _, c := range []struct {
		family, gpu string
		nic, want   float64 // Gb/s
		param       string
	}{
		{SpectrumX, "A100", 400, 226.4, "226.4Gbps"},
		{SpectrumX, "A100", 800, 226.4, "226.4Gbps"},
		{FatTree, "A800", 400, 226.4, "226.4Gbps"},
		{HPNDualPlane, "A100", 200, 113.2, "113.2Gbps"},
		{SpectrumX, "A100", 200, 200, ""},
		{SpectrumX, "H100", 800, 800, ""},
	} {
		tp := gen(t, Params{Family: c.family, GPUs: 16, GPUType: c.gpu, NICBW: c.nic * 1e9})
		for i := range tp.Links {
			if l := &tp.Links[i]; l.Kind == stream.LinkNIC && math.Abs(l.BWbps-c.want*1e9) > 1 {
				t.Fatalf("%s %s at %gG: NIC link %g Gb/s, want %g", c.family, c.gpu, c.nic, l.BWbps/1e9, c.want)
			}
		}
		if got := tp.Params[ParamNICLinkBW]; got != c.param {
			t.Errorf("%s %s at %gG: nic_link_bw %q, want %q", c.family, c.gpu, c.nic, got, c.param)
		}
		// The summary says so where the cap binds, and only there.
		s, err := Summarize(tp)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := s.Write(&b); err != nil {
			t.Fatal(err)
		}
		if said := strings.Contains(b.String(), "NIC links     "+c.param+" each"); said != (c.param != "") {
			t.Errorf("%s %s at %gG: summary says the cap: %v, want %v:\n%s", c.family, c.gpu, c.nic, said, c.param != "", b.String())
		}
	}
}
