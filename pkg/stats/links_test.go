package stats

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/internal/handtraces"
)

// twoTier: a 2-tier fabric's loads over a 1 ms run (internal/handtraces).
func twoTier() (links.Meta, []links.Row) { return handtraces.TwoTierLinks() }

func TestLinkLoads(t *testing.T) {
	m, rows := twoTier()
	ll := AnalyzeLinks("two.parquet", m, rows, 4)
	if ll.Links != 12 || ll.Rows != len(rows) || ll.Bytes != 4*2_500_000+625_000+4*2_500_000+1_250_000 {
		t.Errorf("links %d, rows %d, bytes %d", ll.Links, ll.Rows, ll.Bytes)
	}
	// Per tier and group type, host side first, by hand.
	want := []TierLoad{
		{Tier: "gpu-edge", GroupType: "all", Links: 4, Bytes: 5_625_000, Share: 1, UtilMean: 0.1125, UtilMax: 0.15, UtilTierMean: 0.1125},
		{Tier: "gpu-edge", GroupType: "EP", Links: 1, Bytes: 625_000, Share: 0.625 / 5.625, UtilMean: 0.05, UtilMax: 0.05, UtilTierMean: 0.0125},
		{Tier: "gpu-edge", GroupType: "DP", Links: 4, Bytes: 5_000_000, Share: 5 / 5.625, UtilMean: 0.1, UtilMax: 0.1, UtilTierMean: 0.1},
		{Tier: "edge-gpu", GroupType: "all", Links: 4, Bytes: 5_000_000, Share: 1, UtilMean: 0.1, UtilMax: 0.1, UtilTierMean: 0.1},
		{Tier: "edge-gpu", GroupType: "DP", Links: 4, Bytes: 5_000_000, Share: 1, UtilMean: 0.1, UtilMax: 0.1, UtilTierMean: 0.1},
		{Tier: "edge-agg", GroupType: "all", Links: 2, Bytes: 6_250_000, Share: 1, UtilMean: 0.25, UtilMax: 0.3, UtilTierMean: 0.25},
		{Tier: "edge-agg", GroupType: "EP", Links: 1, Bytes: 1_250_000, Share: 0.2, UtilMean: 0.1, UtilMax: 0.1, UtilTierMean: 0.05},
		{Tier: "edge-agg", GroupType: "DP", Links: 2, Bytes: 5_000_000, Share: 0.8, UtilMean: 0.2, UtilMax: 0.2, UtilTierMean: 0.2},
		{Tier: "agg-edge", GroupType: "all", Links: 2, Bytes: 5_000_000, Share: 1, UtilMean: 0.2, UtilMax: 0.2, UtilTierMean: 0.2},
		{Tier: "agg-edge", GroupType: "DP", Links: 2, Bytes: 5_000_000, Share: 1, UtilMean: 0.2, UtilMax: 0.2, UtilTierMean: 0.2},
	}
	if len(ll.Tiers) != len(want) {
		t.Fatalf("%d tier rows, want %d: %+v", len(ll.Tiers), len(want), ll.Tiers)
	}
	for i, w := range want {
		g := ll.Tiers[i]
		if g.Tier != w.Tier || g.GroupType != w.GroupType || g.Links != w.Links || g.Bytes != w.Bytes ||
			!near(g.Share, w.Share) || !near(g.UtilMean, w.UtilMean) || !near(g.UtilMax, w.UtilMax) || !near(g.UtilTierMean, w.UtilTierMean) {
			t.Errorf("tier row %d: got %+v\nwant %+v", i, g, w)
		}
		if g.BusyNs != links.BusyNs(g.Bytes, 100e9) {
			t.Errorf("tier row %d: busy %d ns for %d bytes", i, g.BusyNs, g.Bytes)
		}
	}
	// The hottest four: edge 4's uplink (30%), then the three 20% links
	// of 2.5 MB in link and source order, then nothing of the 15% NIC.
	type top struct {
		label string
		util  float64
		mix   string
	}
	wantTop := []top{
		{"edge 4 -> agg 6", 0.3, "DP allreduce 67%, EP alltoall 33%"},
		{"agg 6 -> edge 4", 0.2, "DP allreduce 100%"},
		{"edge 5 -> agg 6", 0.2, "DP allreduce 100%"},
		{"agg 6 -> edge 5", 0.2, "DP allreduce 100%"},
	}
	if len(ll.Top) != len(wantTop) {
		t.Fatalf("%d top links, want %d", len(ll.Top), len(wantTop))
	}
	for i, w := range wantTop {
		l := &ll.Top[i]
		if l.Label() != w.label || !near(l.Utilization, w.util) || l.Mix != w.mix {
			t.Errorf("top %d: %s %v %q, want %s %v %q", i, l.Label(), l.Utilization, l.Mix, w.label, w.util, w.mix)
		}
	}
	if all := AnalyzeLinks("x", m, rows, 0); len(all.Top) != 12 || all.Top[4].Label() != "gpu 0 -> edge 4" {
		t.Errorf("--top 0 lists %d links, the fifth %s", len(all.Top), all.Top[4].Label())
	}

	var text bytes.Buffer
	ll.WriteText(&text)
	out := text.String()
	for _, s := range []string{
		"two.parquet: link loads of analytical-fluid, ecmp routing, flow granularity, fat-tree 4 GPUs: makespan 1.00 ms, 12 directed links carried 20.9 MiB (14 rows)",
		"  gpu-edge  nic     all        4  5.36 MiB               11.25       15.00\n" +
			"                      EP       1   610 KiB    11%         5.00        5.00\n" +
			"                      DP       4  4.77 MiB    89%        10.00       10.00\n" +
			"  edge-gpu  nic     DP         4  4.77 MiB               10.00       10.00\n",
		"  1  edge-agg     4  edge 4 -> agg 6   100 Gbps  3.58 MiB   30.00  DP allreduce 67%, EP alltoall 33%\n" +
			"  2  agg-edge     4  agg 6 -> edge 4   100 Gbps  2.38 MiB   20.00  DP allreduce 100%\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("text report lacks %q:\n%s", s, out)
		}
	}
	if strings.Index(out, "gpu-edge") > strings.Index(out, "edge-agg") || strings.Index(out, "edge-agg") > strings.Index(out, "agg-edge") {
		t.Errorf("tiers not host side first:\n%s", out)
	}
	// CSV and JSON carry the same figures in raw units.
	dt, err := ll.DataTable(TableTiers)
	if err != nil {
		t.Fatal(err)
	}
	var csv bytes.Buffer
	if err := dt.WriteCSV(&csv); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	if lines[0] != "source,tier,src_role,dst_role,kind,group_type,links,bytes,busy_ns,share,util_mean,util_max,util_tier_mean" || len(lines) != len(want)+1 {
		t.Errorf("tiers CSV:\n%s", csv.String())
	}
	dt, _ = ll.DataTable(TableTop)
	csv.Reset()
	dt.WriteCSV(&csv)
	if !strings.Contains(csv.String(), "\n"+`two.parquet,4,4,6,edge,agg,edge-agg,fabric,1e+11,3750000,300000,0.30000000000000004,"DP allreduce 67%, EP alltoall 33%"`+"\n") {
		t.Errorf("top CSV:\n%s", csv.String())
	}
	js, _ := json.Marshal(ll)
	if !strings.Contains(string(js), `"parts":[{"group_type":"DP","op":"allreduce","bytes":2500000,"busy_ns":200000,"utilization":0.2},{"group_type":"EP"`) {
		t.Errorf("JSON: %s", js)
	}
}
