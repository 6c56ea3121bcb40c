package topo

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// Oversubscription by uplinks, against hand computation. A k-ary tree holds
// G = k*(k/2)^2 GPUs whatever R (k=8: 128, k=16: 1024), each edge switch k/2
// of them, and gets u = (k/2)/R uplinks to aggs 0..u-1 of its pod. Fabric
// links: k*(k/2) edges x u + k*(k/2) aggs x k/2 cores. The bisection cuts
// pods 0..k/2-1 from the rest; each side leaves through its k*(k/2)/2 edge
// switches' u uplinks (the cores above offer k/2 pods x k/2 aggs x k/2, at
// least as many), so k^2/4 x u x 400 Gbps.
func TestFatTreeByUplinks(t *testing.T) {
	cases := []struct {
		k      int
		r      float64
		u      int
		fabric int
		bis    float64
	}{
		{8, 1, 4, 32*4 + 128, 16 * 4 * 400e9},    // 256 links, 25.6 Tbps
		{8, 2, 2, 32*2 + 128, 16 * 2 * 400e9},    // 192, 12.8 Tbps
		{8, 4, 1, 32*1 + 128, 16 * 1 * 400e9},    // 160, 6.4 Tbps
		{16, 1, 8, 128*8 + 1024, 64 * 8 * 400e9}, // 2048, 204.8 Tbps
		{16, 2, 4, 128*4 + 1024, 64 * 4 * 400e9}, // 1536, 102.4 Tbps
		{16, 4, 2, 128*2 + 1024, 64 * 2 * 400e9}, // 1280, 51.2 Tbps
	}
	prevBis := map[int]float64{}
	for _, c := range cases {
		about := "k=" + strconv.Itoa(c.k) + " " + strconv.FormatFloat(c.r, 'g', -1, 64) + ":1 by uplinks"
		topo, notes, err := Generate(Params{Family: FatTree, K: c.k, Oversub: c.r, OversubBy: OversubUplinks})
		if err != nil {
			t.Fatalf("%s: %v", about, err)
		}
		if len(notes) != 0 {
			t.Errorf("%s: notes %q, the ratio is exact", about, notes)
		}
		half := c.k / 2
		G := c.k * half * half
		if topo.GPUs != G {
			t.Fatalf("%s: %d GPUs, want %d", about, topo.GPUs, G)
		}
		l := countLinks(topo)
		if l[stream.LinkNIC] != G || l[stream.LinkNVLink] != G || l[stream.LinkFabric] != c.fabric || len(l) != 3 {
			t.Errorf("%s: links %v, want %d nic, %d nvlink, %d fabric", about, l, G, G, c.fabric)
		}
		r := countRoles(topo)
		if r[RoleEdge] != c.k*half || r[RoleAgg] != c.k*half || r[RoleCore] != half*half {
			t.Errorf("%s: roles %v, those of the k-ary tree", about, r)
		}
		// Every edge switch: k/2 GPU NICs and u uplinks, to aggs 0..u-1 of its pod.
		firstEdge := G + G/8
		firstAgg := firstEdge + c.k*half
		nics := map[int]int{}
		ups := map[int][]int{}
		for _, ln := range topo.Links {
			a, b := int(ln.A), int(ln.B)
			switch {
			case ln.Kind == stream.LinkNIC:
				nics[b]++
			case a >= firstEdge && a < firstAgg:
				ups[a] = append(ups[a], b)
			}
		}
		for e := firstEdge; e < firstAgg; e++ {
			if nics[e] != half {
				t.Errorf("%s: edge %d has %d GPU NICs, want %d", about, e, nics[e], half)
			}
			pod := (e - firstEdge) / half
			if len(ups[e]) != c.u {
				t.Fatalf("%s: edge %d has %d uplinks, want %d", about, e, len(ups[e]), c.u)
			}
			for j, agg := range ups[e] {
				if want := firstAgg + pod*half + j; agg != want {
					t.Errorf("%s: edge %d uplink %d to %d, want agg %d", about, e, j, agg, want)
				}
			}
		}
		for key, want := range map[string]string{"oversubscribe_by": "uplinks", "gpus_per_edge": strconv.Itoa(half),
			"uplinks_per_edge": strconv.Itoa(c.u), "k": strconv.Itoa(c.k), "diameter_hops": "6"} {
			if topo.Params[key] != want {
				t.Errorf("%s: params[%s] = %q, want %q", about, key, topo.Params[key], want)
			}
		}
		bis := Bisection(topo)
		if math.Abs(bis-c.bis) > 1e-9*c.bis {
			t.Errorf("%s: bisection %g, want %g", about, bis, c.bis)
		}
		if prev, ok := prevBis[c.k]; ok && !(bis < prev) {
			t.Errorf("%s: bisection %g does not fall from %g", about, bis, prev)
		}
		prevBis[c.k] = bis
		for _, ts := range Tiers(topo) {
			if ts.Role == RoleEdge && (ts.Oversubscription() != c.r || ts.Populated != c.k*half || ts.GPUNICs != [2]int{half, half} || ts.Up != [2]int{c.u, c.u}) {
				t.Errorf("%s: edge tier %+v, oversub %g", about, ts, ts.Oversubscription())
			}
		}
		// SimAI's text format carries it as any other fabric.
		var buf bytes.Buffer
		if err := WriteSimAI(&buf, topo); err != nil {
			t.Fatal(err)
		}
		back, err := ReadSimAI(&buf, "ft")
		if err != nil || len(back.Links) != len(topo.Links) || Bisection(back) != bis {
			t.Errorf("%s: SimAI round trip: %v", about, err)
		}
	}
}

// A ratio that does not give a whole number of uplinks is rounded, at least
// one uplink, and a note states the real ratio; a bad mode is refused.
func TestFatTreeByUplinksRounding(t *testing.T) {
	for _, c := range []struct {
		k    int
		r    float64
		u    int
		note string
	}{
		{16, 3, 3, "gets 3 uplinks (round(8/3), at least 1), a real ratio of 2.67:1"},
		{8, 16, 1, "gets 1 uplink (round(4/16), at least 1), a real ratio of 4:1"},
		{16, 1.5, 5, "a real ratio of 1.6:1"},
	} {
		topo, notes, err := Generate(Params{Family: FatTree, K: c.k, Oversub: c.r, OversubBy: OversubUplinks})
		if err != nil {
			t.Fatal(err)
		}
		if topo.Params["uplinks_per_edge"] != strconv.Itoa(c.u) || len(notes) != 1 || !strings.Contains(notes[0], c.note) {
			t.Errorf("k=%d %g:1: %s uplinks, notes %q; want %d and %q", c.k, c.r, topo.Params["uplinks_per_edge"], notes, c.u, c.note)
		}
	}
	// Without --fat-tree-k the radix is the smallest holding the GPUs at
	// k/2 per edge: 1000 GPUs need k=16 (1024), whatever the ratio.
	_, notes, err := Generate(Params{Family: FatTree, GPUs: 1000, Oversub: 4, OversubBy: OversubUplinks})
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "k=16 (smallest even k holding 1000 GPUs at 4:1 by uplinks)") {
		t.Errorf("notes %q, %v", notes, err)
	}
	if _, _, err := Generate(Params{Family: FatTree, K: 8, GPUs: 136, OversubBy: OversubUplinks, Oversub: 2}); err == nil || !strings.Contains(err.Error(), "exceeds a k=8 fat-tree's 128 GPU ports") {
		t.Errorf("136 GPUs on a k=8 tree by uplinks: %v", err)
	}
	if _, _, err := Generate(Params{Family: FatTree, OversubBy: "links"}); err == nil || err.Error() != `--oversubscribe-by "links" must be hosts or uplinks` {
		t.Errorf("bad mode: %v", err)
	}
}

// Oversubscription by hosts (the default, spelt out or not) builds what it
// built before --oversubscribe-by: fabric hashes and parameters pinned from
// the generator as it was.
func TestFatTreeByHostsUnchanged(t *testing.T) {
	for _, c := range []struct {
		p       Params
		hash    string
		perEdge string
	}{
		{Params{Family: FatTree, GPUs: 16, GPUsPerServer: 1}, "249025dc536afc71", "2"},
		{Params{Family: FatTree, K: 8, Oversub: 2}, "569cf033133e6269", "8"},
		{Params{Family: FatTree, K: 16, GPUs: 128}, "0a3d97dfed7f2e18", "8"},
		{Params{Family: FatTree, K: 16, GPUs: 1024, Oversub: 4}, "20696c817f587f7b", "32"},
		{Params{Family: FatTree, K: 6, GPUs: 64, GPUsPerServer: 2, Oversub: 1.5}, "cee3ca2bf41efd55", "5"},
		{Params{Family: FatTree}, "8742409d2f841154", "4"},
	} {
		for _, by := range []string{"", OversubHosts} {
			p := c.p
			p.OversubBy = by
			topo := gen(t, p)
			if h := Hash(topo); h != c.hash {
				t.Errorf("%+v: hash %s, want %s", p, h, c.hash)
			}
			if topo.Params["gpus_per_edge"] != c.perEdge || len(topo.Params) != 15 {
				t.Errorf("%+v: params %v, want gpus_per_edge %s and the 15 keys of before", p, topo.Params, c.perEdge)
			}
		}
	}
}

func summaryText(t *testing.T, p Params) string {
	t.Helper()
	s, err := Summarize(gen(t, p))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// tierLine is a tier's line and the per-switch line under it, joined by " / ".
func tierLine(t *testing.T, text, role string) string {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i, line := range lines[:len(lines)-1] {
		if strings.HasPrefix(line, "tier "+role+" ") {
			return line + " / " + strings.TrimSpace(lines[i+1])
		}
	}
	t.Fatalf("no tier %s in:\n%s", role, text)
	return ""
}

// --summary counts only the switches with GPUs below them: a k=16 tree of
// 128 GPUs fills 16 of its 128 edges (8 GPUs each, 1:1), it printed
// "oversub 0.125:1"; 9216 GPUs at 4:1 on k=48 fill 96 of 1152 edges (96
// GPUs each under 24 uplinks, 4:1), it printed "oversub 0.333:1".
func TestSummaryCountsPopulatedSwitches(t *testing.T) {
	for _, c := range []struct {
		p    Params
		want map[string][]string // tier or "fat-tree" line -> contents
	}{
		{Params{Family: FatTree, K: 16, GPUs: 128}, map[string][]string{
			"fat-tree": {"k=16, 1:1 asked, oversubscribed by hosts: 8 GPU NICs and 8 uplinks per edge switch"},
			"edge":     {"128 switches (16 with GPUs), 51.2 Tbps down, 51.2 Tbps up, oversub 1:1 / per switch  8 GPU NICs, 8 up"},
			"agg":      {"128 switches (16 with GPUs), 51.2 Tbps down, 51.2 Tbps up, oversub 1:1 / per switch  8 down, 8 up"},
			"core":     {"64 switches, 51.2 Tbps down, -, top tier / per switch  2 down"},
		}},
		{Params{Family: FatTree, K: 48, GPUs: 9216, Oversub: 4}, map[string][]string{
			"fat-tree": {"oversubscribed by hosts: 96 GPU NICs and 24 uplinks per edge switch"},
			"edge":     {"1152 switches (96 with GPUs), 3.686 Pbps down, 921.6 Tbps up, oversub 4:1 / per switch  96 GPU NICs, 24 up"},
			"agg":      {"1152 switches (96 with GPUs)", "oversub 1:1"},
		}},
		{Params{Family: FatTree, K: 16, GPUs: 1024, Oversub: 4, OversubBy: OversubUplinks}, map[string][]string{
			"fat-tree": {"k=16, 4:1 asked, oversubscribed by uplinks: 8 GPU NICs and 2 uplinks per edge switch"},
			"edge":     {"128 switches, 409.6 Tbps down, 102.4 Tbps up, oversub 4:1 / per switch  8 GPU NICs, 2 up"},
			"agg":      {"128 switches (32 with GPUs), 102.4 Tbps down, 102.4 Tbps up, oversub 1:1 / per switch  8 down, 8 up"},
			"core":     {"64 switches (16 with GPUs), 102.4 Tbps down, -, top tier / per switch  16 down"},
		}},
		// Other families: every leaf of a full fabric holds GPUs; a leaf
		// of a partial segment is as oversubscribed as its links make it;
		// dragonfly routers beyond the last GPU are empty.
		{Params{Family: SpectrumX, GPUs: 1024}, map[string][]string{
			"asw": {"16 switches, 409.6 Tbps down, 409.6 Tbps up, oversub 1:1 / per switch  64 GPU NICs, 64 up"},
			"psw": {"64 switches, 409.6 Tbps down, -, top tier / per switch  16 down"},
		}},
		// 32 GPUs on a fabric built for thousands: 16 times more up than
		// down, which "oversub 0.0625:1" did not say.
		{Params{Family: SpectrumX, GPUs: 32}, map[string][]string{
			"asw": {"12.8 Tbps down, 204.8 Tbps up, not oversubscribed (down:up 1:16) / per switch"},
		}},
		{Params{Family: HPNDualPlane, GPUs: 1024}, map[string][]string{
			"asw": {"16 switches, 409.6 Tbps down, 384 Tbps up, oversub 1.07:1 / per switch  128 GPU NICs, 60 up"},
		}},
		{Params{Family: DCNSingleToR, GPUs: 128}, map[string][]string{
			"asw": {"2 switches, 51.2 Tbps down, 6.4 Tbps up, oversub 8:1 / per switch  64 GPU NICs, 8 up"},
		}},
		{Params{Family: Dragonfly, GPUs: 1024}, map[string][]string{
			"router": {"264 switches (256 with GPUs), 409.6 Tbps down, 1.126 Pbps lateral, not oversubscribed (down:lateral 1:2.75) / per switch  4 GPU NICs, 11 lateral"},
		}},
	} {
		text := summaryText(t, c.p)
		for key, wants := range c.want {
			line := ""
			if key == "fat-tree" {
				for _, l := range strings.Split(text, "\n") {
					if strings.HasPrefix(l, "fat-tree ") {
						line = l
					}
				}
			} else {
				line = tierLine(t, text, key)
			}
			for _, w := range wants {
				if !strings.Contains(line, w) {
					t.Errorf("%s %d GPUs: %s line %q lacks %q", c.p.Family, c.p.GPUs, key, line, w)
				}
			}
		}
		if c.p.Family != FatTree && strings.Contains(text, "fat-tree ") {
			t.Errorf("%s: summary has a fat-tree line:\n%s", c.p.Family, text)
		}
	}
}

// Two servers are one per half: "server 0 to server 1", not "servers 0-0
// to 1-1".
func TestSummaryBisectionHalves(t *testing.T) {
	for gpus, want := range map[int]string{16: "(server 0 to server 1)", 64: "(servers 0-3 to servers 4-7)"} {
		if text := summaryText(t, Params{Family: SpectrumX, GPUs: gpus}); !strings.Contains(text, want) {
			t.Errorf("%d GPUs: bisection not %q:\n%s", gpus, want, text)
		}
	}
}
