package tests

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// Megatron's pipeline schedules against their closed forms. The workload
// has 4 stages of 4 layers, each layer 100 ms forward, 100 ms input gradient
// and 100 ms weight gradient (F = 0.4 s, B = 0.8 s per stage and microbatch)
// and 8 microbatches handing on 1 KiB activations (negligible). 1F1B takes
// (m + p - 1)(F + B) and leaves every stage idle for the bubble
// (p - 1)(F + B); interleaving v chunks divides the bubble by v.
func TestPipelineClosedForms(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	const p, m, F, B = 4, 8, 400e6, 800e6 // ns
	for _, v := range []int{1, 2, 4} {
		st := mustRun(t, topoOut, "simccl-decompose", "--workload", "examples/workloads/pipeline_pp4_ga8.txt", "--vpp", itoa(v))
		rows, _ := readTrace(t, mustRun(t, st, "flowsim-analytical"))
		var end int64
		compute := map[int32]int64{}
		transfers := 0
		for _, r := range rows {
			end = max(end, r.EndNs)
			if r.Op == stream.OpCompute {
				compute[r.Src] += r.FctNs
			}
			if r.GroupType == "PP" && r.SizeBytes > 0 {
				transfers++
				if r.SizeBytes != 1024 {
					t.Errorf("vpp %d: PP transfer of %d bytes, want pp_comm 1024", v, r.SizeBytes)
				}
			}
		}
		bubble := (p - 1) * (F + B) / float64(v)
		if want := m*(F+B) + bubble; math.Abs(float64(end)-want) > 0.01*want {
			t.Errorf("vpp %d: iteration %d ns, closed form %.0f", v, end, want)
		}
		if len(compute) != 16 {
			t.Fatalf("vpp %d: compute on %d ranks, want 16", v, len(compute))
		}
		for r, c := range compute {
			if c != int64(m*(F+B)) {
				t.Errorf("vpp %d: rank %d computes %d ns, want %d", v, r, c, int64(m*(F+B)))
			}
			if idle := float64(end - c); math.Abs(idle-bubble) > 0.01*bubble {
				t.Errorf("vpp %d: rank %d idle %.0f ns, bubble %.0f", v, r, idle, bubble)
			}
		}
		// Each of the 4 pipelines (one per DP rank) hands every microbatch
		// across the p*v - 1 virtual stage boundaries, both ways.
		if want := 4 * m * 2 * (p*v - 1); transfers != want {
			t.Errorf("vpp %d: %d PP transfers, want %d", v, transfers, want)
		}
	}
}

// A --ga the file was not written with adds microbatches of the file's
// own: the 4 layers of a file without ga (one microbatch, as AICB writes
// a ga 1 run) repeat their name, and --ga 2 or 4 once cut them into 2 or
// 4 pieces, so that more microbatches took less compute and a shorter
// iteration (GPT-13B on pp 4: 1251 ms at --ga 1, 519 at --ga 8). Each
// microbatch runs all 4 layers: (m + p - 1)(F + B), m(F + B) of compute.
func TestGAOverrideAddsMicrobatches(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	w := writeWorkload(t, "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 pp: 4 vpp: 1 pp_comm: 1024", "examples/workloads/pipeline_pp4_ga8.txt")
	const p, F, B = 4, 400e6, 800e6 // ns
	for _, m := range []int{1, 2, 4} {
		rows, _ := readTrace(t, mustRun(t, mustRun(t, topoOut, "simccl-decompose", "--workload", w, "--ga", itoa(m)), "flowsim-analytical"))
		var end, compute int64
		for _, r := range rows {
			end = max(end, r.EndNs)
			if r.Op == stream.OpCompute && r.Src == 0 {
				compute += r.FctNs
			}
		}
		if want := float64(m) * (F + B); math.Abs(float64(compute)-want) > 1e-6*want {
			t.Errorf("--ga %d: rank 0 computes %d ns, want %.0f (every microbatch all 4 layers)", m, compute, want)
		}
		if want := float64(m+p-1) * (F + B); math.Abs(float64(end)-want) > 0.01*want {
			t.Errorf("--ga %d: iteration %d ns, closed form %.0f", m, end, want)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// writeWorkload copies a workload from the repository with another header
// line and returns the copy's absolute path.
func writeWorkload(t *testing.T, header, from string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", from))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(b), "\n", 2)
	path := filepath.Join(t.TempDir(), "w.txt")
	if err := os.WriteFile(path, []byte(header+"\n"+lines[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bad schedule headers are refused naming the header field or the flag.
func TestPipelineBadHeaders(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	w := "examples/workloads/pipeline_pp4_ga8.txt"
	for _, c := range []struct {
		header string
		want   []string
	}{
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 pp: 3 ga: 8 pp_comm: 1024", []string{"line 1, field pp", "do not divide the topology's 16 GPUs"}},
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 pp: 4 ga: 0 pp_comm: 1024", []string{"line 1, field ga"}},
		// tp and ep from the header were refused naming neither file nor field
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 3 pp: 1 ga: 8 pp_comm: 1024", []string{"line 1, field model_parallel_NPU_group", "tp 3 x pp 1 does not divide the topology's 16 GPUs"}},
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 3 pp: 4 ga: 8 pp_comm: 1024", []string{"line 1, field ep", "ep 3 does not divide dp 4"}},
		{"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 pp: 4 ga: 8 vpp: 3 pp_comm: 1024", []string{"line 1, field vpp", "do not divide the 4 layers"}},
	} {
		path := writeWorkload(t, c.header, w)
		oneLineError(t, run(t, topoOut, "simccl-decompose", "--workload", path), 1, c.want...)
	}
	oneLineError(t, run(t, topoOut, "simccl-decompose", "--workload", w, "--vpp", "3"), 2, "--vpp")
	// The header's tp 8 divides the 16 GPUs; --pp 3 is what does not fit,
	// so the header's field is not blamed.
	r := run(t, topoOut, "simccl-decompose", "--workload", writeWorkload(t, "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 pp: 1 ga: 8 pp_comm: 1024", w), "--pp", "3")
	oneLineError(t, r, 1, "tp 8 x pp 3 does not divide the 16 GPUs")
	if strings.Contains(string(r.stderr), "model_parallel_NPU_group") {
		t.Errorf("--pp 3 with the header's tp 8 on 16 GPUs blames the header: %s", r.stderr)
	}
}

// A missing file named by a flag is reported as any input is (PATH: no
// such file or directory), not through the system call ("open PATH: ..."):
// ncclpath's server XML and simccl-serve's model, request trace and
// compute table.
func TestMissingFlagFilesNamed(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	topo := mustRun(t, nil, "topogen", "--gpus", "16", "--gpu-type", "H100")
	model := "examples/models/llama-3-8b.json"
	for _, c := range []struct {
		in   []byte
		args []string
	}{
		{topo, []string{"ncclpath", "--server-xml", none}},
		{topo, []string{"simccl-serve", "--model", none, "--prefill", "1:tp=8", "--decode", "1:tp=8"}},
		{topo, []string{"simccl-serve", "--model", model, "--trace", none, "--prefill", "1:tp=8", "--decode", "1:tp=8"}},
		{topo, []string{"simccl-serve", "--model", model, "--compute-table", none, "--prefill", "1:tp=8", "--decode", "1:tp=8"}},
	} {
		r := run(t, c.in, c.args[0], c.args[1:]...)
		oneLineError(t, r, 1, none+": no such file or directory")
		if strings.Contains(string(r.stderr), "open "+none) {
			t.Errorf("%v: %s", c.args, r.stderr)
		}
	}
}

// A server XML whose GPUs are of another generation than the topology's
// (sm 80 A100s under an H100 topology) is run as the server says, as NCCL
// reads the machine, with a warning naming both; a matching one warns of
// nothing.
func TestNcclpathGPUGenerationWarns(t *testing.T) {
	for _, c := range []struct {
		gpu  string
		warn bool
	}{{"H100", true}, {"A100", false}} {
		r := run(t, mustRun(t, nil, "topogen", "--gpus", "16", "--gpu-type", c.gpu), "ncclpath", "--server-xml", "examples/servers/dgx-a100.xml")
		warned := strings.Contains(string(r.stderr), "has sm 80 GPUs but the topology's are "+c.gpu+" (sm 90)")
		if r.code != 0 || warned != c.warn || !c.warn && len(r.stderr) > 0 {
			t.Errorf("%s topology on dgx-a100.xml: exit %d, stderr %q, want a warning: %v", c.gpu, r.code, r.stderr, c.warn)
		}
	}
}
