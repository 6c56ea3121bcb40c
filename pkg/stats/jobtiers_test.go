package stats

import (
	"strings"
	"testing"
)

// The two-tier fabric's loads with the DP AllReduce as job a and the EP
// AllToAll as job b (by hand, 1 ms run, 100 Gbps links): on gpu-edge a
// puts 1.25 MB (10%) on each of the 4 loaded links, b 625 kB (5%) on gpu 0's,
// which they share; on edge-agg a 2.5 MB (20%) on both, b 1.25 MB (10%) on
// edge 4's. Each job's part of a tier's mean is its busy share over the
// tier's loaded links, and the jobs' parts add up to the tier's mean.
func TestJobTierLoads(t *testing.T) {
	m, rows := twoTier()
	for i := range rows {
		rows[i].Job = map[string]string{"DP": "a", "EP": "b"}[rows[i].GroupType]
	}
	ll := AnalyzeLinks("jobs.parquet", m, rows, 2)
	want := []JobTierLoad{
		{Job: "a", Tier: "gpu-edge", Links: 4, Shared: 1, Bytes: 5_000_000, UtilTierMean: 0.1, UtilMax: 0.1},
		{Job: "b", Tier: "gpu-edge", Links: 1, Shared: 1, Bytes: 625_000, UtilTierMean: 0.0125, UtilMax: 0.05},
		{Job: "a", Tier: "edge-gpu", Links: 4, Bytes: 5_000_000, UtilTierMean: 0.1, UtilMax: 0.1},
		{Job: "b", Tier: "edge-gpu"},
		{Job: "a", Tier: "edge-agg", Links: 2, Shared: 1, Bytes: 5_000_000, UtilTierMean: 0.2, UtilMax: 0.2},
		{Job: "b", Tier: "edge-agg", Links: 1, Shared: 1, Bytes: 1_250_000, UtilTierMean: 0.05, UtilMax: 0.1},
		{Job: "a", Tier: "agg-edge", Links: 2, Bytes: 5_000_000, UtilTierMean: 0.2, UtilMax: 0.2},
		{Job: "b", Tier: "agg-edge"},
	}
	if len(ll.JobTiers) != len(want) {
		t.Fatalf("%d job-tier rows, want %d: %+v", len(ll.JobTiers), len(want), ll.JobTiers)
	}
	sum := map[string]float64{}
	for i, w := range want {
		g := ll.JobTiers[i]
		if g.Job != w.Job || g.Tier != w.Tier || g.Links != w.Links || g.Shared != w.Shared || g.Bytes != w.Bytes ||
			!near(g.UtilTierMean, w.UtilTierMean) || !near(g.UtilMax, w.UtilMax) {
			t.Errorf("row %d: got %+v\nwant %+v", i, g, w)
		}
		sum[g.Tier] += g.UtilTierMean
	}
	for _, tl := range ll.Tiers {
		if tl.GroupType == GroupAll && !near(sum[tl.Tier], tl.UtilMean) {
			t.Errorf("%s: jobs' parts add up to %g, the tier's mean is %g", tl.Tier, sum[tl.Tier], tl.UtilMean)
		}
	}
	// The top table names the jobs of each link; without jobs it has no
	// such column.
	var b strings.Builder
	dt, _ := ll.DataTable(TableTop)
	if err := dt.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.HasSuffix(lines[0], ",jobs,n_jobs") || !strings.HasSuffix(lines[1], ",a+b,2") || !strings.HasSuffix(lines[2], ",a,1") {
		t.Errorf("top table:\n%s", b.String())
	}
	if jt, err := ll.DataTable(TableJobs); err != nil || jt.Len() != len(want) {
		t.Errorf("jobs table: %v, want %d rows", err, len(want))
	}
	m, rows = twoTier()
	b.Reset()
	dt, _ = AnalyzeLinks("two.parquet", m, rows, 2).DataTable(TableTop)
	if err := dt.WriteCSV(&b); err != nil || strings.Contains(b.String(), "jobs") {
		t.Errorf("top table without jobs: %v\n%s", err, b.String())
	}
	if nj := AnalyzeLinks("two.parquet", m, rows, 2); nj.JobTiers != nil {
		t.Error("job-tier rows without jobs")
	} else if _, err := nj.DataTable(TableJobs); err == nil || !strings.Contains(err.Error(), "no jobs") {
		t.Errorf("jobs table of a file without jobs: %v", err)
	}
}
