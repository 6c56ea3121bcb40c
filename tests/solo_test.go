package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--solo", "c="+solo, mix), 1, "--solo c=", `no job "c"`)
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--solo", "b="+solo, mix), 1, "--solo b=", `no iteration of job "b"`)
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--solo", "a", mix), 1, "JOB=TRACE")
	oneLineError(t, run(t, nil, "fctstats", "--solo", "a="+solo, mix), 2, "--iteration")
}
