package tests

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// fileCompute is SimAI's "total comp" of a workload file: the sum of every
// line's forward, input-gradient and weight-gradient compute (ns).
func fileCompute(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var sum int64
	for n := 0; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		if n < 2 || len(fs) < 11 {
			continue
		}
		for _, col := range []int{2, 5, 8} {
			v, err := strconv.ParseInt(fs[col], 10, 64)
			if err != nil {
				t.Fatalf("%s line %d: %v", path, n+1, err)
			}
			sum += v
		}
	}
	return sum
}

// SimAI's own 9216-GPU example at collective granularity: one rank per
// pipeline stage (12), each computing exactly the file's total compute, as
// SimAI reports it; the pipeline and the report run in seconds.
func TestCollectiveGranularitySimAIExample(t *testing.T) {
	const wl = "examples/workloads/simai_workload_analytical.txt"
	st := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "9216"), "simccl-decompose", "--workload", wl, "--granularity", "collective")
	it := iterationReport(t, mustRun(t, st, "flowsim-analytical", "--model", "busbw"))
	want := fileCompute(t, wl)
	if len(it.Ranks) != 12 || !it.PerStage {
		t.Fatalf("%d ranks (one per stage: %v), want one per stage (12)", len(it.Ranks), it.PerStage)
	}
	for i, r := range it.Ranks {
		if r.Rank != int32(i*768) || r.Stage != int32(i) {
			t.Errorf("rank %d stage %d, want rank %d of stage %d", r.Rank, r.Stage, i*768, i)
		}
		if math.Abs(float64(r.ComputeNs-want)) > 0.01*float64(want) {
			t.Errorf("stage %d computes %d ns, the file %d", r.Stage, r.ComputeNs, want)
		}
		if r.ExposedPP <= 0 {
			t.Errorf("stage %d: no exposed PP time with 48 MiB activations", r.Stage)
		}
	}
	if it.IterationNs <= want {
		t.Errorf("iteration %d ns, shorter than the compute %d", it.IterationNs, want)
	}
	oneLineError(t, run(t, st, "phyrun"), 1, "collective-granularity stream", "phyrun needs flows")
}

// Collective and flow granularity agree: the SimAI micro benchmark on 128
// GPUs within 5%, the pipeline's closed form within 1%, and backends that
// need flows refuse the collective stream.
func TestCollectiveGranularityAgrees(t *testing.T) {
	topo128 := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "128")
	end := func(tr []byte) int64 {
		rows, _ := readTrace(t, tr)
		var first, last int64 = math.MaxInt64, 0
		for _, r := range rows {
			first, last = min(first, r.StartNs), max(last, r.EndNs)
		}
		return last - first
	}
	var ends [2]int64
	for i, g := range []string{"flow", "collective"} {
		st := mustRun(t, topo128, "simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "16", "--granularity", g)
		ends[i] = end(mustRun(t, st, "flowsim-analytical", "--model", "busbw"))
		if g == "collective" {
			oneLineError(t, run(t, st, "flowsim-packet"), 1, "collective-granularity stream", "flowsim-packet needs flows")
		}
	}
	if math.Abs(float64(ends[1]-ends[0])) > 0.05*float64(ends[0]) {
		t.Errorf("micro on 128 GPUs: collective granularity %d ns, flow granularity %d ns", ends[1], ends[0])
	}
	// AICB GPT-13B (tp 8) on 16 GPUs: 1.8 M flows against 92 nodes.
	topo16 := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	const gpt = "examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt"
	for i, g := range []string{"flow", "collective"} {
		ends[i] = end(mustRun(t, mustRun(t, topo16, "simccl-decompose", "--workload", gpt, "--granularity", g), "flowsim-analytical", "--model", "busbw"))
	}
	if math.Abs(float64(ends[1]-ends[0])) > 0.05*float64(ends[0]) {
		t.Errorf("GPT-13B on 16 GPUs: collective granularity %d ns, flow granularity %d ns", ends[1], ends[0])
	}
	st := mustRun(t, topo16, "simccl-decompose", "--workload", "examples/workloads/pipeline_pp4_ga8.txt", "--granularity", "collective")
	it := iterationReport(t, mustRun(t, st, "flowsim-analytical", "--model", "busbw"))
	const p, m, F, B = 4, 8, 400e6, 800e6
	bad := streamWithFlows(t, topo128, nil, nil, func(emit func(*stream.Flow)) {
		emit(&stream.Flow{ID: 0, Collective: -1, Src: 0, Dst: 1, Size: 1024, Channel: -1, ChunkCount: 1, ConnType: stream.ConnColl, DelayPs: 1000})
	})
	oneLineError(t, run(t, bad, "flowsim-analytical", "--model", "busbw"), 1, "record", "field src", "a COLL node sits on one GPU")
	if want := m*(F+B) + (p-1)*(F+B); len(it.Ranks) != p || math.Abs(float64(it.IterationNs)-want) > 0.01*want {
		t.Errorf("pipeline at collective granularity: %d ranks, iteration %d ns, closed form %.0f", len(it.Ranks), it.IterationNs, want)
	}
}

// A stream larger than the memory a backend may use stops early, saying
// how much it would take and what to do instead.
func TestMemoryBudget(t *testing.T) {
	st := mustRun(t, mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "128"),
		"simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "16") // 76k flows
	t.Setenv("FABRICSIM_MEMORY", "4MiB")
	for _, prog := range []string{"flowsim-analytical", "flowsim-packet"} {
		oneLineError(t, run(t, st, prog), 1, "<stdin>: record", prog+" needs about", "beyond the 4MiB", "--granularity collective")
	}
	t.Setenv("FABRICSIM_MEMORY", "lots")
	oneLineError(t, run(t, st, "flowsim-analytical"), 1, `FABRICSIM_MEMORY="lots"`)
}

// The fluid model at collective granularity, by hand: two collectives
// spanning servers start together on one stage's representative and share
// its NICs equally: the 100 us one ends at 200 us (half speed), the 200 us
// one at 300 us (half speed, then alone). A collective inside a server at
// the same time holds NVLink, not the NICs: 150 us. busbw shares nothing.
func TestCollectiveFluidShares(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	groups := []stream.Group{{ID: 0, Type: "DP", Ranks: []int32{0, 8}}, {ID: 1, Type: "TP", Ranks: []int32{0, 1}}}
	colls := []stream.Collective{
		{ID: 0, Op: "allreduce", Size: 1 << 20, Group: 0, Algorithm: "ring", PredictedPs: 100e6, Layer: -1, Microbatch: -1, Stage: 0},
		{ID: 1, Op: "allreduce", Size: 2 << 20, Group: 0, Algorithm: "ring", PredictedPs: 200e6, Layer: -1, Microbatch: -1, Stage: 0},
		{ID: 2, Op: "allreduce", Size: 1 << 20, Group: 1, Algorithm: "ring", PredictedPs: 150e6, Layer: -1, Microbatch: -1, Stage: 0},
	}
	st := streamWithFlows(t, topoOut, groups, colls, func(emit func(*stream.Flow)) {
		for i, c := range colls {
			emit(&stream.Flow{ID: int64(i), Collective: c.ID, Src: 0, Dst: 0, Size: c.Size, Channel: -1, ChunkCount: 1,
				ConnType: stream.ConnColl, DelayPs: c.PredictedPs})
		}
	})
	for model, want := range map[string][3]int64{"fluid": {200_000, 300_000, 150_000}, "busbw": {100_000, 200_000, 150_000}} {
		rows, _ := readTrace(t, mustRun(t, st, "flowsim-analytical", "--model", model))
		for _, r := range rows {
			if r.EndNs != want[r.FlowID] || r.IdealFctNs != colls[r.FlowID].PredictedPs/1000 || r.SizeBytes != colls[r.FlowID].Size {
				t.Errorf("%s: collective %d ends at %d ns (ideal %d, %d bytes), want %d", model, r.FlowID, r.EndNs, r.IdealFctNs, r.SizeBytes, want[r.FlowID])
			}
		}
	}
}
