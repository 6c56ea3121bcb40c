package tests

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/fabricsim/fabricsim/formats/links"
)

// tierBytes reads a per-link load file into bytes by tier and group type.
func tierBytes(t *testing.T, path string) (links.Meta, map[[2]string]float64) {
	t.Helper()
	m, rows, err := links.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]float64{}
	for _, r := range rows {
		out[[2]string{r.Tier, r.GroupType}] += float64(r.Bytes)
		if r.Utilization > 1+1e-9 {
			t.Errorf("%s: link %d %s carries %.3f of the run's time", path, r.Link, r.Tier, r.Utilization)
		}
	}
	return m, out
}

// The per-link loads of a COLL node are its collective's traffic: on a
// 128-GPU fat-tree the micro workload's TP, DP and EP collectives put the
// same bytes on every tier at collective granularity as their flows do at
// flow granularity (the decomposition's chunks round a few KiB), under ecmp
// and spray; no link is busier than the run is long. Expanded, the TP
// collectives' mirrored groups are counted from their traffic too.
func TestLinkLoadsAgreeAcrossGranularities(t *testing.T) {
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	dir := t.TempDir()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128")
	streams := map[string][]byte{}
	for _, g := range []string{"flow", "collective"} {
		streams[g] = mustRun(t, tp, "simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "16", "--granularity", g)
	}
	// A fat-tree's paths between two GPUs all cross the same tiers, so the
	// flows' tier bytes do not depend on the routing (ecmp's and spray's
	// are the same to the byte). The flows' ecmp run is 6 s of CPU, 60% of
	// the test: make test compares ecmp's collective and expanded runs with
	// spray's flows, make test-long runs ecmp's flows too. tierBytes' check
	// that no link is busier than the run is long thus sees a flow run
	// (spray's) in make test, and ecmp's flows only in make test-long.
	var sprayFlows map[[2]string]float64
	for _, routing := range []string{"spray", "ecmp"} {
		runs := map[string]map[[2]string]float64{}
		for _, c := range []struct {
			name, stream string
			args         []string
		}{{"flow", "flow", nil}, {"collective", "collective", nil}, {"expanded", "collective", []string{"--expand"}}} {
			if c.name == "flow" && sprayFlows != nil && testing.Short() {
				runs["flow"] = sprayFlows
				continue
			}
			path := filepath.Join(dir, routing+"-"+c.name+".parquet")
			mustRun(t, streams[c.stream], "flowsim-analytical", append([]string{"--routing", routing, "--link-loads", path}, c.args...)...)
			m, b := tierBytes(t, path)
			if m.Granularity != c.name || m.Routing != routing || m.MakespanNs <= 0 {
				t.Errorf("%s: metadata %+v", path, m)
			}
			runs[c.name] = b
			if c.name == "flow" && routing == "spray" {
				sprayFlows = b
			}
		}
		want := runs["flow"]
		for _, k := range [][2]string{{"gpu-nvswitch", "TP"}, {"gpu-edge", "DP"}, {"gpu-edge", "EP"}, {"edge-agg", "DP"}, {"agg-core", "EP"}, {"core-agg", "DP"}} {
			if want[k] == 0 {
				t.Errorf("%s: no %s bytes on %s at flow granularity", routing, k[1], k[0])
			}
		}
		for _, g := range []string{"collective", "expanded"} {
			got := runs[g]
			if len(got) != len(want) {
				t.Errorf("%s %s: %d tier and group pairs, flow granularity %d", routing, g, len(got), len(want))
			}
			for k, w := range want {
				if math.Abs(got[k]-w) > 1e-5*w {
					t.Errorf("%s %s: %s %s carries %.0f bytes, %.0f at flow granularity", routing, g, k[1], k[0], got[k], w)
				}
			}
		}
	}
	oneLineError(t, run(t, streams["flow"], "flowsim-analytical", "--link-loads", filepath.Join(dir, "x.txt")), 2, "--link-loads")
}
