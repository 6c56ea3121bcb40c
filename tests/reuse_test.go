package tests

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/fabricsim/fabricsim/formats/trace"
)

// flowsim-analytical --expand --reuse: a group standing for its siblings
// (fabric symmetry) that ran the same collective alone on its links
// before takes the time it took then instead of running again
// (pkg/expand/reuse.go). SimAI's example's first 16 lines on 128 GPUs in
// 4 stages, 4 microbatches: its EP AllToAlls and TP collectives repeat per
// microbatch and direction, and a stage's pipeline transfers overlap its
// first group's collectives, among them an EP AllToAll whose TP AllToAll
// came after it: that group must not stand for the others (the symmetry
// check missed that overlap before: the time it took while the transfer
// slowed it, 21% more, was then reused in an AllToAll nothing slowed, and
// the rows differ). Every row is the run of every group's
// (--no-symmetry); rows ending in the same picosecond may come in another
// order. With --link-loads nothing is reused (its loads are its flows').
func TestReuseExact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := simaiExample16(t, 16, 4, 4, 128)
	st := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "128"), "simccl-decompose", "--workload", w, "--granularity", "collective")
	reused := regexp.MustCompile(`expanded into (\d+) flows.* (\d+) flows of a group standing for its siblings not run either: in (\d+) COLL nodes`)
	all := run(t, st, "flowsim-analytical", "--expand", "--no-symmetry")
	re := run(t, st, "flowsim-analytical", "--expand", "--reuse")
	if all.code != 0 || re.code != 0 {
		t.Fatalf("exit %d, %d: %s %s", all.code, re.code, all.stderr, re.stderr)
	}
	m := reused.FindSubmatch(re.stderr)
	if m == nil {
		t.Fatalf("nothing reused: %s", re.stderr)
	}
	total, _ := strconv.Atoi(string(m[1]))
	n, _ := strconv.Atoi(string(m[2]))
	if nodes, _ := strconv.Atoi(string(m[3])); nodes < 10 || n <= 0 || n >= total {
		t.Errorf("%d flows of %d in %d COLL nodes reused: %s", n, total, nodes, re.stderr)
	}
	byID := func(out []byte) []trace.Row {
		rows, _ := readTrace(t, out)
		slices.SortFunc(rows, func(a, b trace.Row) int { return int(a.FlowID - b.FlowID) })
		return rows
	}
	a, b := byID(re.stdout), byID(all.stdout)
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%d rows reused, %d with --no-symmetry", len(a), len(b))
	}
	for i := range a {
		if a[i].FlowID != b[i].FlowID || a[i].StartNs != b[i].StartNs || a[i].EndNs != b[i].EndNs {
			t.Fatalf("flow %d: %d-%d ns reused, %d-%d ns with --no-symmetry", a[i].FlowID, a[i].StartNs, a[i].EndNs, b[i].StartNs, b[i].EndNs)
		}
	}
	if r := run(t, st, "flowsim-analytical", "--expand", "--reuse", "--link-loads", filepath.Join(dir, "loads.csv")); r.code != 0 || reused.Match(r.stderr) {
		t.Errorf("--reuse --link-loads: exit %d, reused: %s", r.code, r.stderr)
	}
}
