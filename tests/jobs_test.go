package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/links"
	"github.com/fabricsim/fabricsim/formats/stream"
)

// jobIterations is each job's iteration time (ns) in fctstats --iteration
// --format json of a trace.
func jobIterations(t *testing.T, tr []byte) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	dec := json.NewDecoder(bytes.NewReader(mustRun(t, tr, "fctstats", "--iteration", "--format", "json")))
	for dec.More() {
		var it struct {
			Job         string `json:"job"`
			IterationNs int64  `json:"iteration_ns"`
		}
		if err := dec.Decode(&it); err != nil {
			t.Fatal(err)
		}
		out[it.Job] = it.IterationNs
	}
	return out
}

// mergeJobs decomposes the GPT-13B AICB iteration (tp 8, dp 2) at
// collective granularity as jobs a and b placed on topology tp, b
// starting at 1 ms, and returns the solo streams and their merge.
func mergeJobs(t *testing.T, tp []byte, placeA, placeB string) (a, b, merged []byte) {
	t.Helper()
	dir := t.TempDir()
	w := "examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt"
	args := []string{"--workload", w, "--dp", "2", "--granularity", "collective"}
	a = mustRun(t, tp, "simccl-decompose", append([]string{"--place", placeA, "--job", "a"}, args...)...)
	b = mustRun(t, tp, "simccl-decompose", append([]string{"--place", placeB, "--job", "b", "--job-start", "1ms"}, args...)...)
	pa, pb := filepath.Join(dir, "a.stream"), filepath.Join(dir, "b.stream")
	for p, s := range map[string][]byte{pa: a, pb: b} {
		if err := os.WriteFile(p, s, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	merged = mustRun(t, nil, "simccl-decompose", "--merge", pa+","+pb)
	return a, b, merged
}

// Two identical jobs on disjoint pods of a non-blocking fat-tree each take
// their solo iteration (within 0.5%; fluid and busbw at collective
// granularity), b from its 1 ms start; every row of the merged trace
// carries its job, and the merged stream's ids are disjoint.
func TestIterationJobsDisjointPods(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128")
	a, b, merged := mergeJobs(t, tp, "0-15", "64-79")

	rs := readRaw(t, merged)
	seen := map[string]map[int64]bool{stream.KindGroup: {}, stream.KindCollective: {}}
	var jobs []string
	for i, kind := range rs.kinds {
		switch kind {
		case stream.KindJob:
			jobs = append(jobs, decodeOne(t, kind, rs.bodies[i], (*stream.Reader).Job).Name)
		case stream.KindGroup:
			id := decodeOne(t, kind, rs.bodies[i], (*stream.Reader).Group).ID
			if seen[kind][id] {
				t.Fatalf("group id %d twice", id)
			}
			seen[kind][id] = true
		case stream.KindCollective:
			id := decodeOne(t, kind, rs.bodies[i], (*stream.Reader).Collective).ID
			if seen[kind][id] {
				t.Fatalf("collective id %d twice", id)
			}
			seen[kind][id] = true
		}
	}
	if len(jobs) != 2 || jobs[0] != "a" || jobs[1] != "b" {
		t.Fatalf("job records %v", jobs)
	}

	for _, m := range []string{"fluid", "busbw"} {
		tr := mustRun(t, merged, "flowsim-analytical", "--model", m)
		rows := rowsOf(t, tr)
		per := map[string]int{}
		for _, r := range rows {
			per[r.Job]++
		}
		soloA := jobIterations(t, mustRun(t, a, "flowsim-analytical", "--model", m))["a"]
		soloB := jobIterations(t, mustRun(t, b, "flowsim-analytical", "--model", m))["b"]
		got := jobIterations(t, tr)
		t.Logf("%s: a %d ns (solo %d), b %d ns (solo %d); rows per job %v", m, got["a"], soloA, got["b"], soloB, per)
		if per[""] != 0 || per["a"] == 0 || per["b"] != per["a"]+1 { // b's start node
			t.Errorf("%s: rows per job %v", m, per)
		}
		for job, solo := range map[string]int64{"a": soloA, "b": soloB} {
			if g := got[job]; solo == 0 || g < solo*995/1000 || g > solo*1005/1000 {
				t.Errorf("%s: job %s takes %d ns beside the other, %d ns alone: want within 0.5%%", m, job, g, solo)
			}
		}
	}
}

// The same jobs interleaved on the servers of a 4:1 fat-tree's edge
// switches share the thin uplinks: each is slower than alone (fluid;
// busbw has no contention).
func TestIterationJobsSharedUplinks(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128", "--oversubscription", "4")
	a, b, merged := mergeJobs(t, tp, "0-7,16-23", "8-15,24-31")
	got := jobIterations(t, mustRun(t, merged, "flowsim-analytical", "--model", "fluid"))
	soloA := jobIterations(t, mustRun(t, a, "flowsim-analytical", "--model", "fluid"))["a"]
	soloB := jobIterations(t, mustRun(t, b, "flowsim-analytical", "--model", "fluid"))["b"]
	t.Logf("a %d ns (solo %d), b %d ns (solo %d)", got["a"], soloA, got["b"], soloB)
	if got["a"] <= soloA || got["b"] <= soloB {
		t.Errorf("sharing 4:1 uplinks: a %d ns (solo %d), b %d ns (solo %d): want each slower", got["a"], soloA, got["b"], soloB)
	}
}

// Bad merges: one line naming the file and field (exit 1); flag misuse
// exit 2.
func TestDecomposeMergeBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tp := mustRun(t, nil, "topogen", "--gpus", "32")
	op := []string{"--op", "allreduce", "--size", "16MiB", "--group", "dp", "--tp", "8", "--dp", "2"}
	write := func(name string, s []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, s, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	x := write("x.stream", mustRun(t, tp, "simccl-decompose", append([]string{"--place", "0-15", "--job", "x"}, op...)...))
	y := write("y.stream", mustRun(t, tp, "simccl-decompose", append([]string{"--place", "8-23", "--job", "y"}, op...)...))
	x2 := write("x2.stream", mustRun(t, tp, "simccl-decompose", append([]string{"--place", "16-31", "--job", "x"}, op...)...))
	z := write("z.stream", mustRun(t, tp, "simccl-decompose", append([]string{"--place", "16-31", "--job", "z"}, op...)...))
	other := write("o.stream", mustRun(t, mustRun(t, nil, "topogen", "--gpus", "64"), "simccl-decompose", append([]string{"--place", "16-31"}, op...)...))
	xz := write("xz.stream", mustRun(t, nil, "simccl-decompose", "--merge", x+","+z))
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--merge", x + "," + y}, 1, []string{"y.stream", `job "y"`, "GPU 8", `job "x"`}},
		{[]string{"--merge", x + "," + x2}, 1, []string{"x2.stream", `name "x"`}},
		{[]string{"--merge", x + "," + other}, 1, []string{"o.stream", "topology"}},
		{[]string{"--merge", xz + "," + y}, 1, []string{"xz.stream", "merged stream"}},
		{[]string{"--merge", x}, 2, []string{"--merge"}},
		{[]string{"--merge", x + "," + z, "--op", "allreduce"}, 2, []string{"--merge"}},
	} {
		oneLineError(t, run(t, nil, "simccl-decompose", c.args...), c.code, c.want...)
	}
	oneLineError(t, run(t, tp, "simccl-decompose", append([]string{"--job-start", "1ms"}, op...)...), 2, "--job-start")
	oneLineError(t, run(t, tp, "simccl-decompose", append([]string{"--job", "a\tb"}, op...)...), 1, "--job")
}

// jobMakespans is each job's makespan from its start (ns), fctstats
// --format json's jobs.
func jobMakespans(t *testing.T, tr []byte) map[string]int64 {
	t.Helper()
	var run struct {
		Jobs []struct {
			Job        string `json:"job"`
			MakespanNs int64  `json:"makespan_ns"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(mustRun(t, tr, "fctstats", "--format", "json"), &run); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, j := range run.Jobs {
		out[j.Job] = j.MakespanNs
	}
	return out
}

// At flow granularity through packets (and fluid), two DP AllReduce jobs
// on the two segments' servers of a rail-optimized fabric each take
// their solo time, the second from its 50 us start.
func TestPacketJobsDisjoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tp := mustRun(t, nil, "topogen", "--gpus", "32")
	op := []string{"--op", "allreduce", "--size", "16MiB", "--group", "dp", "--tp", "8", "--dp", "2"}
	x := mustRun(t, tp, "simccl-decompose", append([]string{"--place", "0-15", "--job", "x"}, op...)...)
	y := mustRun(t, tp, "simccl-decompose", append([]string{"--place", "16-31", "--job", "y", "--job-start", "50us"}, op...)...)
	px, py := filepath.Join(dir, "x.stream"), filepath.Join(dir, "y.stream")
	for p, s := range map[string][]byte{px: x, py: y} {
		if err := os.WriteFile(p, s, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	merged := mustRun(t, nil, "simccl-decompose", "--merge", px, "--merge", py)
	for _, be := range [][]string{{"flowsim-packet"}, {"flowsim-analytical", "--model", "fluid"}} {
		got := jobMakespans(t, mustRun(t, merged, be[0], be[1:]...))
		soloX := jobMakespans(t, mustRun(t, x, be[0], be[1:]...))["x"]
		soloY := jobMakespans(t, mustRun(t, y, be[0], be[1:]...))["y"]
		t.Logf("%v: x %d ns (solo %d), y %d ns (solo %d)", be, got["x"], soloX, got["y"], soloY)
		for job, solo := range map[string]int64{"x": soloX, "y": soloY} {
			if g := got[job]; solo == 0 || g < solo*995/1000 || g > solo*1005/1000 {
				t.Errorf("%v: job %s takes %d ns beside the other, %d ns alone: want within 0.5%%", be, job, g, solo)
			}
		}
	}
}

// jobLinkBytes runs flowsim-analytical --link-loads on s and reads the
// file back: bytes per directed link (link, src) and job.
func jobLinkBytes(t *testing.T, s []byte, path string) map[[2]int32]map[string]int64 {
	t.Helper()
	mustRun(t, s, "flowsim-analytical", "--model", "fluid", "--link-loads", path)
	_, rows, err := links.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]int32]map[string]int64{}
	for _, r := range rows {
		k := [2]int32{r.Link, r.Src}
		if out[k] == nil {
			out[k] = map[string]int64{}
		}
		out[k][r.Job] += r.Bytes
	}
	return out
}

// The per-link load file names the job of each link's bytes: merged on a
// 4:1 fat-tree, a and b share some uplink, and each job's bytes per link
// are its bytes as run alone (within a few bytes of rounding per row);
// no direction is busy longer than the run; on disjoint pods no link
// carries two jobs. fctstats --links lists the
// jobs sharing each of the hottest links.
func TestLinkLoadsJobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128", "--oversubscription", "4")
	a, b, merged := mergeJobs(t, tp, "0-7,16-23", "8-15,24-31")
	got := jobLinkBytes(t, merged, filepath.Join(dir, "merged.parquet"))
	shared := 0
	for k, jobs := range got {
		if len(jobs) > 1 {
			shared++
		}
		if _, ok := jobs[""]; ok {
			t.Errorf("link %d from %d: bytes of no job in a merged stream", k[0], k[1])
		}
	}
	if shared == 0 {
		t.Errorf("no link carries both jobs on a shared 4:1 fat-tree")
	}
	// Sharing never puts more through a link than it carries: each
	// direction's bytes take at most the run's makespan at its rate.
	_, rows, err := links.Read(filepath.Join(dir, "merged.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	busy := map[[2]int32]float64{}
	for _, r := range rows {
		busy[[2]int32{r.Link, r.Src}] += r.Utilization
	}
	for k, u := range busy {
		if u > 1+1e-6 {
			t.Errorf("link %d from %d: busy %.4f of the run: more bytes than its bandwidth carries", k[0], k[1], u)
		}
	}
	for job, solo := range map[string][]byte{"a": a, "b": b} {
		alone := jobLinkBytes(t, solo, filepath.Join(dir, job+".parquet"))
		for k := range got {
			if _, ok := alone[k]; !ok {
				alone[k] = map[string]int64{}
			}
		}
		for k, jobs := range alone {
			if d := got[k][job] - jobs[job]; d < -16 || d > 16 {
				t.Errorf("job %s, link %d from %d: %d bytes merged, %d alone", job, k[0], k[1], got[k][job], jobs[job])
			}
		}
	}
	out := string(mustRun(t, nil, "fctstats", "--links", filepath.Join(dir, "merged.parquet"), "--top", "200"))
	if !strings.Contains(out, "jobs a, b") {
		t.Errorf("fctstats --links names no link shared by a and b:\n%s", out)
	}

	tp = mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128")
	_, _, merged = mergeJobs(t, tp, "0-15", "64-79")
	for k, jobs := range jobLinkBytes(t, merged, filepath.Join(dir, "disjoint.parquet")) {
		if len(jobs) > 1 {
			t.Errorf("disjoint pods: link %d from %d carries %v", k[0], k[1], jobs)
		}
	}
}
