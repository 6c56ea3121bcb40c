package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Issue 31, "nonsense accepted by the config and workload readers": each
// input below once ran (exit 0) as something it did not say. Each must
// now stop with one line naming where the nonsense is.
func TestReadersRefuseNonsense(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--gpus", "16")
	flows := mustRun(t, topo, "simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dupConf := write("dup.conf", "CC_MODE 1\nBUFFER_SIZE 16\nCC_MODE 3\n")
	const layer = "1\nl -1 5 ALLREDUCE 1024 1 NONE 0 1 ALLREDUCE 2048 1\n"
	tp0 := write("tp0.txt", "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 0 pp: 1\n"+layer)
	vpp0 := write("vpp0.txt", "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 vpp: 0\n"+layer)
	ga2 := write("ga2.txt", "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ga: 2 ga: 4\n"+layer)
	for _, c := range []struct {
		name  string
		stdin []byte
		code  int
		prog  string
		args  []string
		want  []string
	}{
		{"RED NaN", flows, 1, "flowsim-packet", []string{"--set", "KMAX_MAP=1 400000000000 NaN"}, []string{"KMAX_MAP", "not a positive rate and a value"}},
		{"PMAX above 1", flows, 1, "flowsim-packet", []string{"--set", "PMAX_MAP=1 1e9 1.5"}, []string{"PMAX_MAP", "outside [0,1]"}},
		{"KMIN above KMAX", flows, 1, "flowsim-packet", []string{"--set", "KMIN_MAP=1 1e9 5000"}, []string{"KMIN_MAP", "above KMAX_MAP"}},
		{"underscore CC_MODE", flows, 1, "flowsim-packet", []string{"--set", "CC_MODE=1_0"}, []string{"CC_MODE", `"1_0" is not a number`}},
		{"underscore QPs", flows, 1, "flowsim-packet", []string{"--set", "QPS_PER_CONNECTION=1_0"}, []string{"QPS_PER_CONNECTION", `"1_0"`}},
		{"0 B buffer", flows, 1, "flowsim-packet", []string{"--set", "BUFFER_SIZE=1e-320"}, []string{"BUFFER_SIZE", "rounds to 0 bytes"}},
		{"duplicate --set", flows, 1, "flowsim-packet", []string{"--set", "PAUSE_TIME=5", "--set", "PAUSE_TIME=10"}, []string{"--set PAUSE_TIME=5 and --set PAUSE_TIME=10"}},
		{"duplicate conf key", flows, 1, "flowsim-packet", []string{"--conf", dupConf}, []string{"dup.conf: line 3, key CC_MODE", "first on line 1"}},
		{"tp 0", topo, 1, "simccl-decompose", []string{"--workload", tp0}, []string{"tp0.txt: line 1, field model_parallel_NPU_group"}},
		{"vpp 0", topo, 1, "simccl-decompose", []string{"--workload", vpp0}, []string{"vpp0.txt: line 1, field vpp"}},
		{"ga twice", topo, 1, "simccl-decompose", []string{"--workload", ga2}, []string{"ga2.txt: line 1, field ga: given twice", "ga: 2 then ga: 4"}},
		// A pattern that sends nothing is a command-line mistake (exit 2,
		// as --duration 0 is), named by its flags.
		{"1ps pattern", topo, 2, "simccl-decompose", []string{"--pattern", "uniform", "--msg-size", "1MB", "--duration", "1ps"}, []string{"--duration 1ps", "generates no message"}},
		{"thin pattern", topo, 2, "simccl-decompose", []string{"--pattern", "permutation", "--msg-size", "1MB", "--duration", "1ms", "--rate", "1e-300"}, []string{"--rate 1e-298%", "generates no message"}},
		{"short incast", topo, 2, "simccl-decompose", []string{"--pattern", "incast", "--fan-in", "15", "--msg-size", "2MB", "--duration", "1us"}, []string{"generates no message"}},
		{"empty stream analytical", topo, 1, "flowsim-analytical", nil, []string{"no flows, only a topology", "simccl-decompose"}},
		{"empty stream packet", topo, 1, "flowsim-packet", nil, []string{"no flows, only a topology", "simccl-decompose"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.stdin, c.prog, c.args...)
			oneLineError(t, r, c.code, c.want...)
			if len(r.stdout) != 0 {
				t.Errorf("wrote %d bytes to stdout", len(r.stdout))
			}
		})
	}
}

// PFC_PORT_* keys do nothing under PFC_MODE priority: the run goes on,
// with one warning.
func TestPortKeysWarnUnderPriority(t *testing.T) {
	topo := mustRun(t, nil, "topogen", "--gpus", "16")
	flows := mustRun(t, topo, "simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8")
	r := run(t, flows, "flowsim-packet", "--set", "PFC_PORT_HIGH_KB=200", "--set", "PFC_PORT_LOW_KB=100", "--out", filepath.Join(t.TempDir(), "x.parquet"))
	if r.code != 0 || strings.Count(string(r.stderr), "ignored under PFC_MODE priority") != 1 {
		t.Errorf("exit %d, stderr %s", r.code, r.stderr)
	}
}

// simccl-decompose once died with Go's "fatal error: out of memory" and
// a goroutine dump on workloads it accepted. Under a memory budget
// (FABRICSIM_MEMORY, as the backends take it) they are now refused in
// seconds with one line giving the estimate, the budget and the way out,
// while a big workload that fits still runs.
func TestDecomposeMemoryGuard(t *testing.T) {
	topo16 := mustRun(t, nil, "topogen", "--gpus", "16")
	dir := t.TempDir()
	layers := func(name string, n int, line string) string {
		var b strings.Builder
		b.WriteString("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 16\n")
		b.WriteString(strconv.Itoa(n) + "\n")
		for i := 0; i < n; i++ {
			b.WriteString(line)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	budget := []string{"FABRICSIM_MEMORY=1GiB"}
	refused := func(name string, code int, args []string, want ...string) {
		t.Run(name, func(t *testing.T) {
			env, budgetKB := budget, int64(1<<20)
			if name == "50k layers of two AllReduces" {
				env, budgetKB = []string{"FABRICSIM_MEMORY=256MiB"}, 256<<10
			}
			r := runEnv(t, env, topo16, "simccl-decompose", args...)
			oneLineError(t, r, code, want...)
			// Refused before building: the process stays within the budget
			// the work would exceed (a clock would measure the machine's
			// load, not where the refusal happens). A child's peak below
			// this process's own is the kernel's charge at exec.
			var self syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &self)
			if r.maxRSSKB > budgetKB && r.maxRSSKB > self.Maxrss {
				t.Errorf("refused after peaking at %d MB, beyond the budget: the check ran after building", r.maxRSSKB>>10)
			}
		})
	}
	refused("ga 100000", 2, []string{"--workload", "examples/workloads/pipeline_pp4_ga8.txt", "--ga", "100000"},
		"--ga:", "6000000 steps", "beyond the 1GiB", "FABRICSIM_MEMORY", "lower --ga")
	// The schedule fits; its 650,000 Colls (one per TP and DP group of
	// each AllReduce) do not.
	const arLine = "l -1 100 ALLREDUCE 1048576 100 NONE 0 100 ALLREDUCE 1048576 100\n"
	refused("50k layers of two AllReduces", 1, []string{"--workload", layers("ar50k.txt", 50_000, arLine)},
		"650000 collectives", "beyond the 256MiB", "FABRICSIM_MEMORY", "--granularity collective")
	if !testing.Short() {
		refused("200k layers of two AllReduces", 1, []string{"--workload", layers("ar200k.txt", 200_000, arLine)},
			"2600000 collectives", "beyond the 1GiB", "FABRICSIM_MEMORY", "--granularity collective")
		compute := layers("compute2m.txt", 2_000_000, "l -1 100 NONE 0 100 NONE 0 100 NONE 0 100\n")
		refused("2M compute-only layers", 1, []string{"--workload", compute},
			"compute2m.txt: line 2, field layers", "6000000 steps", "beyond the 1GiB", "simulate fewer layers")
	}

	// SimAI's 9216-GPU example at collective granularity holds about
	// 160 MB: well within the same budget, it runs.
	topo9216 := mustRun(t, nil, "topogen", "--gpus", "9216")
	r := runEnv(t, budget, topo9216, "simccl-decompose", "--workload", "examples/workloads/simai_workload_analytical.txt", "--granularity", "collective")
	if r.code != 0 || len(r.stdout) < 1<<20 {
		t.Fatalf("9216-GPU example: exit %d, %d bytes: %s", r.code, len(r.stdout), r.stderr)
	}
}
