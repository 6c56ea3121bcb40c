package tests

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

type iterationJSON struct {
	IterationNs  int64 `json:"iteration_ns"`
	CriticalRank int32 `json:"critical_rank"`
	PerStage     bool  `json:"one_rank_per_stage"`
	Ranks        []struct {
		Rank        int32 `json:"rank"`
		Stage       int32 `json:"stage"`
		ComputeNs   int64 `json:"compute_ns"`
		ExposedDP   int64 `json:"exposed_dp_ns"`
		ExposedTP   int64 `json:"exposed_tp_ns"`
		ExposedPP   int64 `json:"exposed_pp_ns"`
		ExposedNs   int64 `json:"exposed_ns"`
		BubbleNs    int64 `json:"bubble_ns"`
		IterationNs int64 `json:"iteration_ns"`
	} `json:"ranks"`
	Layers []struct {
		Layer        int32 `json:"layer"`
		FwdComputeNs int64 `json:"fwd_compute_ns"`
		FwdCommNs    int64 `json:"fwd_comm_ns"`
		FwdExposedNs int64 `json:"fwd_exposed_ns"`
	} `json:"layers"`
}

func iterationReport(t *testing.T, trace []byte) iterationJSON {
	t.Helper()
	return iterationOf(t, mustRun(t, trace, "fctstats", "--iteration", "--format", "json"))
}

// iterationOf decodes fctstats --iteration --format json's report and
// checks that each rank's parts add up to the iteration.
func iterationOf(t *testing.T, report []byte) iterationJSON {
	t.Helper()
	var it iterationJSON
	if err := json.Unmarshal(report, &it); err != nil {
		t.Fatal(err)
	}
	for _, r := range it.Ranks {
		if r.ComputeNs+r.ExposedNs+r.BubbleNs != it.IterationNs || r.IterationNs != it.IterationNs {
			t.Errorf("rank %d: compute %d + exposed %d + bubble %d != iteration %d", r.Rank, r.ComputeNs, r.ExposedNs, r.BubbleNs, it.IterationNs)
		}
	}
	return it
}

// fctstats --iteration on Megatron's pipeline against the closed forms
// (see TestPipelineClosedForms): every rank computes m(F + B) and waits
// (p − 1)(F + B)/v, in bubble and in the (tiny) PP transfers.
func TestIterationReportPipeline(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	const p, m, F, B = 4, 8, 400e6, 800e6 // ns
	for _, v := range []int{1, 2} {
		st := mustRun(t, topoOut, "simccl-decompose", "--workload", "examples/workloads/pipeline_pp4_ga8.txt", "--vpp", itoa(v))
		tr := mustRun(t, st, "flowsim-analytical")
		rows, _ := readTrace(t, tr)
		var first, last int64 = math.MaxInt64, 0
		for _, r := range rows {
			first, last = min(first, r.StartNs), max(last, r.EndNs)
		}
		it := iterationReport(t, tr)
		if it.IterationNs != last-first || len(it.Ranks) != 16 {
			t.Fatalf("vpp %d: iteration %d ns over %d ranks, trace spans %d ns", v, it.IterationNs, len(it.Ranks), last-first)
		}
		bubble := (p - 1) * (F + B) / float64(v)
		stages := map[int32]int{}
		for _, r := range it.Ranks {
			stages[r.Stage]++
			if r.ComputeNs != int64(m*(F+B)) {
				t.Errorf("vpp %d: rank %d computes %d ns, want %d", v, r.Rank, r.ComputeNs, int64(m*(F+B)))
			}
			if w := float64(r.BubbleNs + r.ExposedPP); math.Abs(w-bubble) > 0.01*bubble || r.ExposedDP+r.ExposedTP != 0 {
				t.Errorf("vpp %d: rank %d waits %.0f ns (PP %d, DP %d, TP %d), bubble %.0f", v, r.Rank, w, r.ExposedPP, r.ExposedDP, r.ExposedTP, bubble)
			}
		}
		if len(stages) != p {
			t.Errorf("vpp %d: stages %v", v, stages)
		}
	}
}

// A workload with TP, DP and PP communication: the report's identity
// holds per rank, blocking TP collectives are wholly exposed, the DP
// gradients left running at the end are exposed; the SimAI layout reads
// back and compares to the trace as 1; the Chrome trace and the plot are
// written; misuse is refused.
func TestIterationReportFormats(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wl := filepath.Join(dir, "w.txt")
	line := "attention_layer\t-1\t2000000\tALLREDUCE\t1048576\t2000000\tALLREDUCE\t1048576\t2000000\tALLREDUCE\t16777216\t100\n"
	if err := os.WriteFile(wl, []byte("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 pp: 2 ga: 4 vpp: 1 pp_comm: 1048576\n4\n"+
		strings.Repeat(line, 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	tr := mustRun(t, mustRun(t, topoOut, "simccl-decompose", "--workload", wl), "flowsim-analytical")
	it := iterationReport(t, tr)
	if len(it.Ranks) != 16 {
		t.Fatalf("%d ranks", len(it.Ranks))
	}
	var tpTotal int64
	for _, l := range it.Layers {
		if l.FwdCommNs <= 0 || l.FwdExposedNs != l.FwdCommNs {
			t.Errorf("layer %d: forward TP AllReduce %d ns, exposed %d ns: a blocking collective is wholly exposed", l.Layer, l.FwdCommNs, l.FwdExposedNs)
		}
		// The four lines are AICB's per-microbatch copies (ga 4): each
		// microbatch runs one of them.
		if l.FwdComputeNs != 2000000 {
			t.Errorf("layer %d: forward compute %d ns, want one microbatch's 2 ms", l.Layer, l.FwdComputeNs)
		}
		tpTotal += l.FwdExposedNs
	}
	crit := it.Ranks[it.CriticalRank]
	if crit.ExposedDP <= 0 || crit.ExposedTP < tpTotal {
		t.Errorf("critical rank %d: exposed DP %d, TP %d (forward alone %d)", crit.Rank, crit.ExposedDP, crit.ExposedTP, tpTotal)
	}

	path := filepath.Join(dir, "run.parquet")
	mustRun(t, mustRun(t, topoOut, "simccl-decompose", "--workload", wl), "flowsim-analytical", "--out", path)
	e2e := mustRun(t, nil, "fctstats", "--iteration", path, "--format", "simai-e2e")
	lines := strings.Split(string(e2e), "\n")
	if !strings.HasPrefix(lines[0], "File name, Expose DP comm, Expose DP_EP comm, Expose TP comm, Expose_EP_comm, Expose_PP_comm, bubble time") ||
		!strings.HasPrefix(lines[2], "layer_name,run,fwd compute,wg compute,ig compute,") || len(lines) != 3+4+1 {
		t.Fatalf("EndToEnd.csv:\n%s", e2e)
	}
	e2ePath := filepath.Join(dir, "EndToEnd.csv")
	if err := os.WriteFile(e2ePath, e2e, 0o644); err != nil {
		t.Fatal(err)
	}
	var cmp struct {
		Summary []struct {
			Column string   `json:"column"`
			Theirs float64  `json:"theirs_us"`
			Ratio  *float64 `json:"ratio"`
		} `json:"summary"`
		Layers []struct {
			Rows          int     `json:"rows_theirs"`
			ComputeOurs   float64 `json:"compute_ours_us"`
			ComputeTheirs float64 `json:"compute_theirs_us"`
			CommOurs      float64 `json:"comm_ours_us"`
			CommTheirs    float64 `json:"comm_theirs_us"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(mustRun(t, nil, "fctstats", "--iteration", "--compare", path, e2ePath, "--format", "json"), &cmp); err != nil {
		t.Fatal(err)
	}
	for _, s := range cmp.Summary {
		// SimAI's file holds whole µs: ratios are 1 to within that.
		if s.Theirs >= 100 && (s.Ratio == nil || math.Abs(*s.Ratio-1) > 0.01) {
			t.Errorf("%s: ratio %v against our own EndToEnd.csv", s.Column, s.Ratio)
		}
	}
	// Each of the file's rows rounds three times and three comm values
	// to whole µs.
	if l := cmp.Layers; len(l) != 1 || l[0].Rows != 4 || math.Abs(l[0].ComputeOurs-l[0].ComputeTheirs) > 1.5*4 ||
		math.Abs(l[0].CommOurs-l[0].CommTheirs) > 1.5*4 || l[0].CommOurs <= 0 {
		t.Errorf("layers %+v", cmp.Layers)
	}

	var chrome struct {
		TraceEvents []struct {
			Ph  string `json:"ph"`
			Cat string `json:"cat"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(mustRun(t, nil, "fctstats", path, "--format", "chrome-trace"), &chrome); err != nil {
		t.Fatal(err)
	}
	rows, _ := readTrace(t, tr)
	computeRows := 0
	for _, r := range rows {
		if r.Op == stream.OpCompute {
			computeRows++
		}
	}
	got := 0
	for _, e := range chrome.TraceEvents {
		if e.Ph == "X" && e.Cat == "compute" {
			got++
		}
	}
	if got != computeRows {
		t.Errorf("chrome trace: %d compute slices for %d compute rows", got, computeRows)
	}

	// The per-flow table for pandas: one CSV row per trace row.
	flowsCSV := mustRun(t, nil, "fctstats", path, "--format", "csv", "--table", "flows")
	if n := bytes.Count(flowsCSV, []byte("\n")); n != len(rows)+1 || !bytes.HasPrefix(flowsCSV, []byte("source,flow_id,")) {
		t.Errorf("--table flows: %d lines for %d rows", n, len(rows))
	}

	png := filepath.Join(dir, "it.png")
	mustRun(t, nil, "fctstats", "--iteration", path, "--plot", png)
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("plot: %v", err)
	}

	single := mustRun(t, mustRun(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--tp", "8"), "flowsim-analytical")
	oneLineError(t, run(t, single, "fctstats", "--iteration"), 1, "no compute rows")
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "formats/trace/testdata/flows-v1.parquet"), 1, "flows-v1.parquet: a fabricsim.flows/v1 trace has no layer")
	pq := filepath.Join(dir, "layers.parquet")
	mustRun(t, nil, "fctstats", "--iteration", path, "--format", "parquet", "--table", "layers", "--out", pq)
	if b, err := os.ReadFile(pq); err != nil || !bytes.HasPrefix(b, []byte("PAR1")) {
		t.Errorf("parquet layers table: %v", err)
	}
	oneLineError(t, run(t, nil, "fctstats", path, "--table", "layers", "--format", "csv"), 2, "--iteration")
	oneLineError(t, run(t, nil, "fctstats", path, path, "--format", "simai-e2e"), 2, "one file")
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(e2e), "\n", "\nnot a row\n", 3)), 0o644); err != nil {
		t.Fatal(err)
	}
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--compare", path, bad), 1, "bad.csv: line")
	// A missing EndToEnd.csv is named as any input is, not as "open PATH".
	r := run(t, nil, "fctstats", "--iteration", "--compare", path, filepath.Join(dir, "none.csv"))
	if oneLineError(t, r, 1, "none.csv: no such file"); bytes.Contains(r.stderr, []byte("open ")) {
		t.Errorf("stderr names the system call: %s", r.stderr)
	}
}
