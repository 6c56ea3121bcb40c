package tests

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// flowsim-analytical --link-down that leaves flows no path writes a
// links file that says so, and fctstats --links reports it FAILED in
// every format: the loads are of what moved. It used to read as a whole
// run (618 MiB carried, no word of the 78 flows and 43 MiB never sent).
func TestFailedRunLinkLoads(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	var down []string
	for _, l := range readTopology(t, topoOut).Links {
		if l.A == 0 || l.B == 0 { // every link of GPU 0: it sends nothing more
			down = append(down, fmt.Sprintf("%d-%d@10us", l.A, l.B))
		}
	}
	st := mustRun(t, topoOut, "simccl-decompose", "--op", "alltoall", "--size", "16MiB", "--group", "dp", "--tp", "1")
	dir := t.TempDir()
	loads := filepath.Join(dir, "loads.parquet")
	r := run(t, st, "flowsim-analytical", "--link-down", strings.Join(down, ","), "-o", filepath.Join(dir, "t.parquet"), "--link-loads", loads)
	oneLineError(t, r, 1, "failed flows")
	var failed, undelivered int64
	if m := regexp.MustCompile(`the trace marks (\d+) failed flows \(status failed, (\d+) bytes never delivered\)`).FindSubmatch(r.stderr); m == nil {
		t.Fatalf("no failed-flow count in %q", r.stderr)
	} else {
		failed, _ = strconv.ParseInt(string(m[1]), 10, 64)
		undelivered, _ = strconv.ParseInt(string(m[2]), 10, 64)
	}
	var rep struct {
		FailedFlows      int64 `json:"failed_flows"`
		UndeliveredBytes int64 `json:"undelivered_bytes"`
	}
	if err := json.Unmarshal(mustRun(t, nil, "fctstats", "--links", loads, "--format", "json"), &rep); err != nil {
		t.Fatal(err)
	}
	if failed <= 0 || rep.FailedFlows != failed || rep.UndeliveredBytes != undelivered {
		t.Errorf("json: %+v, want the run's %d failed flows and %d bytes never delivered", rep, failed, undelivered)
	}
	if text := string(mustRun(t, nil, "fctstats", "--links", loads)); !strings.Contains(strings.SplitN(text, "\n", 2)[0], "FAILED: ") {
		t.Errorf("table headline: %q", strings.SplitN(text, "\n", 2)[0])
	}
	if csv := string(mustRun(t, nil, "fctstats", "--links", loads, "--format", "csv")); !strings.Contains(strings.SplitN(csv, "\n", 2)[0], ",failed_flows,undelivered_bytes") {
		t.Errorf("csv header: %q", strings.SplitN(csv, "\n", 2)[0])
	}
}
