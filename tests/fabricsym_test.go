package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// flowsim-analytical --expand (fluid) runs one group of a COLL node for
// all its sibling groups when each keeps to links of its own across
// servers (pkg/expand/fabricsym.go): an EP AllToAll on Spectrum-X, each
// group on its rails. Exact, so on by default: every trace row and every
// per-link load is the run of every group's (--no-symmetry), and most
// flows are not run. The same for one MoE layer of SimAI's 9216-GPU
// example at 128 GPUs in 2 pipeline stages: a stage's transfer overlaps
// the next stage's EP AllToAlls on its first group's GPUs (that group runs
// for itself, the second stands for the other two), and the DP_EP rings
// may overlap the TP and EP collectives on every GPU (all their groups
// run): 7% of the flows are not run.
func TestFabricSymmetry(t *testing.T) {
	t.Parallel()
	sx := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "128")
	dir := t.TempDir()
	// SimAI's example's first 16 lines on 128 GPUs in 2 stages.
	w := simaiExample16(t, 16, 2, 2, 128)
	notRun := regexp.MustCompile(`expanded into (\d+) flows.*; (\d+) of them not run: in (\d+) COLL nodes`)
	for _, c := range []struct {
		what string
		args []string
		frac float64 // of the flows at least not run
	}{
		{"EP AllToAll", []string{"--op", "alltoall", "--size", "64MiB", "--group", "ep", "--tp", "2", "--ep", "16"}, 0.8},
		{"MoE layer, 2 stages", []string{"--workload", w}, 0.05},
	} {
		st := mustRun(t, sx, "simccl-decompose", append(c.args, "--granularity", "collective")...)
		var out [2][]byte
		var loads [2][]byte
		for k, args := range [][]string{nil, {"--no-symmetry"}} {
			path := filepath.Join(dir, fmt.Sprintf("loads%d.csv", k))
			r := run(t, st, "flowsim-analytical", append([]string{"--expand", "--link-loads", path}, args...)...)
			if r.code != 0 {
				t.Fatalf("%s %v: exit %d: %s", c.what, args, r.code, r.stderr)
			}
			out[k] = r.stdout
			var err error
			if loads[k], err = os.ReadFile(path); err != nil {
				t.Fatal(err)
			}
			m := notRun.FindSubmatch(r.stderr)
			if k == 1 {
				if m != nil {
					t.Errorf("%s --no-symmetry: %s", c.what, r.stderr)
				}
				continue
			}
			if m == nil {
				t.Errorf("%s: no group stood for its siblings: %s", c.what, r.stderr)
				continue
			}
			total, _ := strconv.Atoi(string(m[1]))
			n, _ := strconv.Atoi(string(m[2]))
			if float64(n) < c.frac*float64(total) || n >= total {
				t.Errorf("%s: %d of %d flows not run, want at least %.0f%%", c.what, n, total, 100*c.frac)
			}
		}
		sameRows(t, c.what, out[0], out[1])
		if string(loads[0]) != string(loads[1]) || len(loads[0]) < 1000 {
			t.Errorf("%s: per-link loads differ from --no-symmetry's (%d and %d bytes)", c.what, len(loads[0]), len(loads[1]))
		}
	}
}

// simaiExample16 writes SimAI's 9216-GPU example's header, reshaped (tp 2
// with ep, pp, ga and gpus), and its first 16 lines (embedding, one
// attention block and one MoE layer) into a workload file, and returns
// its path.
func simaiExample16(t *testing.T, ep, pp, ga, gpus int) string {
	t.Helper()
	w := filepath.Join(t.TempDir(), "moe.txt")
	head := fmt.Sprintf("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: %d pp: %d vpp: 1 ga: %d all_gpus: %d checkpoints: 0 checkpoint_initiates: 0 pp_comm 50331648\n16\n", ep, pp, ga, gpus)
	if err := os.WriteFile(w, append([]byte(head), firstLines(t, "examples/workloads/simai_workload_analytical.txt", 2, 16)...), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// firstLines is lines from (1-based) of file, n of them.
func firstLines(t *testing.T, file string, from, n int) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", file)) // the programs run from the repository's root
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	line := 1
	for _, b := range data {
		if line > from && line <= from+n {
			out = append(out, b)
		}
		if b == '\n' {
			line++
		}
	}
	return out
}
