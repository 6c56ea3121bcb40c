package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// soloSlowdowns runs merged and each job's solo stream on flowsim-analytical
// args and returns fctstats --iteration --solo's slowdown per job (JSON),
// checked against the iterations it reports.
func soloSlowdowns(t *testing.T, a, b, merged []byte, args ...string) map[string]float64 {
	t.Helper()
	dir := t.TempDir()
	paths := map[string][]byte{"ab.parquet": merged, "a.parquet": a, "b.parquet": b}
	for name, st := range paths {
		p := filepath.Join(dir, name)
		mustRun(t, st, "flowsim-analytical", append([]string{"-o", p}, args...)...)
	}
	out := mustRun(t, nil, "fctstats", "--iteration", "--format", "json", "--solo", "a="+filepath.Join(dir, "a.parquet"),
		"--solo", "b="+filepath.Join(dir, "b.parquet"), filepath.Join(dir, "ab.parquet"))
	got := map[string]float64{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var it struct {
			Job             string  `json:"job"`
			IterationNs     int64   `json:"iteration_ns"`
			SoloIterationNs int64   `json:"solo_iteration_ns"`
			Slowdown        float64 `json:"slowdown"`
		}
		if err := dec.Decode(&it); err != nil {
			t.Fatal(err)
		}
		if it.SoloIterationNs <= 0 || it.Slowdown != float64(it.IterationNs)/float64(it.SoloIterationNs) {
			t.Errorf("job %s: iteration %d ns, solo %d ns, slowdown %g", it.Job, it.IterationNs, it.SoloIterationNs, it.Slowdown)
		}
		got[it.Job] = it.Slowdown
	}
	if len(got) != 2 {
		t.Fatalf("slowdowns of %d jobs, want 2: %s", len(got), out)
	}
	return got
}

// fctstats --solo: two identical jobs on disjoint pods of a non-blocking
// fat-tree run as alone (slowdown 1 within 0.5%, fluid and busbw); on the
// servers of a 4:1 fat-tree's edges, interleaved, they share the thin
// uplinks and each is slower than alone (fluid).
func TestSoloSlowdown(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128")
	a, b, merged := mergeJobs(t, tp, "0-15", "64-79")
	for _, m := range []string{"fluid", "busbw"} {
		for job, s := range soloSlowdowns(t, a, b, merged, "--model", m) {
			t.Logf("disjoint pods, %s: job %s slowdown %.5f", m, job, s)
			if s < 0.995 || s > 1.005 {
				t.Errorf("disjoint pods, %s: job %s slowdown %.5f, want 1 within 0.5%%", m, job, s)
			}
		}
	}
	tp = mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "8", "--gpus", "128", "--oversubscription", "4")
	a, b, merged = mergeJobs(t, tp, "0-7,16-23", "8-15,24-31")
	for job, s := range soloSlowdowns(t, a, b, merged, "--model", "fluid") {
		t.Logf("shared 4:1 uplinks: job %s slowdown %.4f", job, s)
		if s <= 1 {
			t.Errorf("shared 4:1 uplinks: job %s slowdown %.4f, want > 1", job, s)
		}
	}
}

// Bad --solo: a job the mix lacks, a solo trace without it, a spec without
// its trace: exit 1 naming the spec; without --iteration, exit 2.
func TestSoloBadInput(t *testing.T) {
	t.Parallel()
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--fat-tree-k", "4", "--gpus", "16", "--gpus-per-server", "1")
	w := "examples/workloads/aicb_L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1_A100.txt"
	dir := t.TempDir()
	mix := filepath.Join(dir, "ab.parquet")
	solo := filepath.Join(dir, "a.parquet")
	a := mustRun(t, tp, "simccl-decompose", "--workload", w, "--dp", "2", "--place", "0-3", "--job", "a", "--granularity", "collective")
	b := mustRun(t, tp, "simccl-decompose", "--workload", w, "--dp", "2", "--place", "8-11", "--job", "b", "--granularity", "collective")
	pa, pb := filepath.Join(dir, "a.stream"), filepath.Join(dir, "b.stream")
	for p, s := range map[string][]byte{pa: a, pb: b} {
		if err := os.WriteFile(p, s, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, mustRun(t, nil, "simccl-decompose", "--merge", pa+","+pb), "flowsim-analytical", "-o", mix)
	mustRun(t, a, "flowsim-analytical", "-o", solo)
	// The slowdown table: one row for job a, its two iterations and their ratio.
	tab := string(mustRun(t, nil, "fctstats", "--iteration", "--solo", "a="+solo, "--format", "csv", "--table", "slowdown", "--param", "case=x", mix))
	lines := strings.Split(strings.TrimSpace(tab), "\n")
	if len(lines) != 2 || lines[0] != "source,job,iteration_ns,solo_iteration_ns,slowdown,solo_source,case" {
		t.Fatalf("slowdown table:\n%s", tab)
	}
	f := strings.Split(lines[1], ",")
	it, _ := strconv.ParseInt(f[2], 10, 64)
	so, _ := strconv.ParseInt(f[3], 10, 64)
	sd, _ := strconv.ParseFloat(f[4], 64)
	if f[1] != "a" || so <= 0 || sd != float64(it)/float64(so) || f[6] != "x" {
		t.Errorf("slowdown row %q", lines[1])
	}
	// Its Parquet form names the solo run among its sources (review r7b).
	pq := filepath.Join(dir, "s.parquet")
	mustRun(t, nil, "fctstats", "--iteration", "--solo", "a="+solo, "--format", "parquet", "--table", "slowdown", "-o", pq, mix)
	if src, _ := openParquet(t, pq).Lookup("fabricsim.sources"); src != `["`+mix+`","`+solo+`"]` {
		t.Errorf("slowdown table's fabricsim.sources %s", src)
	}
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--table", "slowdown", mix), 2, "--solo")
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--solo", "c="+solo, mix), 1, "--solo c=", `no job "c"`)
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--solo", "b="+solo, mix), 1, "--solo b=", `no iteration of job "b"`)
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--solo", "a", mix), 1, "JOB=TRACE")
	oneLineError(t, run(t, nil, "fctstats", "--solo", "a="+solo, mix), 2, "--iteration")
}

// pipelines/multijob (make -C pipelines/multijob): four jobs placed packed
// own their edge switches and pods, so on both fabrics each runs as alone
// (slowdown 1 within 0.5%); spread over the 4:1 tree's edge switches they
// share its uplinks and some job is slower. Each point's table has a row
// per job and the gather writes the table and the picture.
func TestMultijobPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 20 simulations of 1024 GPUs (make test-long)")
	}
	out := t.TempDir()
	cmd := exec.Command("make", "-s", "-C", "pipelines/multijob", "OUT="+out, "BIN="+binDir)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make: %v\n%s", err, b)
	}
	for _, f := range []string{"multijob.parquet", "multijob.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	worst := map[string]float64{}
	for _, pt := range []string{"1to1-packed", "1to1-spread", "4to1-packed", "4to1-spread"} {
		b, err := os.ReadFile(filepath.Join(out, "points", pt+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 5 {
			t.Fatalf("%s: %d rows, want a header and 4 jobs", pt, len(lines))
		}
		for _, l := range lines[1:] {
			sd, err := strconv.ParseFloat(strings.Split(l, ",")[4], 64)
			if err != nil {
				t.Fatal(err)
			}
			worst[pt] = max(worst[pt], sd)
			if strings.HasSuffix(pt, "packed") && (sd < 0.995 || sd > 1.005) {
				t.Errorf("%s: %s: want slowdown 1 within 0.5%%", pt, l)
			}
		}
	}
	t.Logf("worst slowdown per point: %v", worst)
	if worst["4to1-spread"] <= 1.005 {
		t.Errorf("4:1 spread: worst slowdown %.4f, want a job slowed by the shared uplinks", worst["4to1-spread"])
	}
}
