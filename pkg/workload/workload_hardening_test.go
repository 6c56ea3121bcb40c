package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Workload headers that once ran as something else (issue 31): a
// parallel size of 0 became 1, a key given twice kept the last, a NaN
// compute time passed the range check.
func TestWorkloadHeaderRefusesNonsense(t *testing.T) {
	const layer = "1\nl -1 5 ALLREDUCE 1024 1 NONE 0 1 ALLREDUCE 2048 1\n"
	for _, c := range []struct{ header, want string }{
		{"model_parallel_NPU_group: 0", "line 1, field model_parallel_NPU_group: 0: a parallel size is at least 1"},
		{"model_parallel_NPU_group: 2 ep: 0", "line 1, field ep: 0"},
		{"pp: 0 ga: 2", "line 1, field pp: 0"},
		{"vpp: 0", "line 1, field vpp: 0"},
		{"ga: 0", "line 1, field ga: 0"},
		{"pp: -2", "line 1, field pp"},
		{"ga: 4 pp: 1 ga: 8", `line 1, field ga: given twice in the header (ga: 4 then ga: 8)`},
		{"model_parallel_NPU_group: 2 model_parallel_NPU_group: 4", "line 1, field model_parallel_NPU_group: given twice"},
		{"pp_comm: 1024 pp_comm: 2048", "line 1, field pp_comm: given twice"},
	} {
		text := "HYBRID_TRANSFORMER_FWD_IN_BCKWD " + c.header + "\n" + layer
		if _, err := Read(strings.NewReader(text), "w.txt"); err == nil || !strings.Contains(err.Error(), "w.txt: "+c.want) {
			t.Errorf("%q: %v, want %q", c.header, err, c.want)
		}
	}
	for _, compute := range []string{"NaN", "1_0", "0x10p0", "Inf"} {
		text := "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1\n1\nl -1 " + compute + " ALLREDUCE 1024 1 NONE 0 1 NONE 0 1\n"
		if _, err := Read(strings.NewReader(text), "w.txt"); err == nil || !strings.Contains(err.Error(), "w.txt: line 3, field fwd_compute") {
			t.Errorf("fwd_compute %s: %v", compute, err)
		}
	}
	// What a valid header sets is still read as written.
	w, err := Read(strings.NewReader("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 ga: 3 checkpoints: 0\n"+layer), "w.txt")
	if err != nil || w.TP != 2 || w.AICB.GA != 3 {
		t.Errorf("valid header: %v %+v", err, w)
	}
}

// Every workload the project ships or refers to still loads.
func TestShippedWorkloadsLoad(t *testing.T) {
	var files []string
	for _, g := range []string{"../../examples/workloads/*.txt", "../../../shared/refs/simai/*.txt", "../../../shared/refs/aicb/*.txt"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	if len(files) < 8 {
		t.Fatalf("only %d workload files", len(files))
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Read(f, name)
		f.Close()
		if err != nil {
			t.Errorf("%v", err)
		}
	}
}

// The memory guard counts a schedule without building it; the count must
// be what building makes, or its estimate is of something else.
func TestScheduleCountIsBuilt(t *testing.T) {
	for _, c := range []struct {
		file        string
		pp, ga, vpp int
	}{
		{"../../examples/workloads/pipeline_pp4_ga8.txt", 4, 8, 1},
		{"../../examples/workloads/pipeline_pp4_ga8.txt", 2, 6, 2},
		{"../../examples/workloads/simai_workload_analytical.txt", 12, 24, 8},
		{"../../examples/workloads/aicb_G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt", 1, 3, 1},
	} {
		f, err := os.Open(c.file)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Read(f, c.file)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		steps, err := w.AICB.Schedule(c.pp, c.ga, c.vpp)
		if err != nil {
			t.Fatal(err)
		}
		if _, n, err := w.AICB.build(c.pp, c.ga, c.vpp, true); err != nil || n != int64(len(steps)) {
			t.Errorf("%s pp %d ga %d vpp %d: counted %d steps, built %d (%v)", c.file, c.pp, c.ga, c.vpp, n, len(steps), err)
		}
	}
}

// A schedule past the limit is refused before it is built, with the
// estimate; one within it is built.
func TestScheduleLimit(t *testing.T) {
	f, err := os.Open("../../examples/workloads/pipeline_pp4_ga8.txt")
	if err != nil {
		t.Fatal(err)
	}
	w, err := Read(f, "p.txt")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// 100,000 microbatches: 6 M steps, 4.2 GB at StepBytes.
	_, err = w.AICB.ScheduleLimit(4, 100000, 1, 1<<30)
	if err == nil || !strings.Contains(err.Error(), "6000000 steps") || !strings.Contains(err.Error(), "beyond the 1GiB") || !strings.Contains(err.Error(), "FABRICSIM_MEMORY") {
		t.Errorf("ga 100000 within 1 GiB: %v", err)
	}
	if steps, err := w.AICB.ScheduleLimit(4, 8, 1, 1<<30); err != nil || len(steps) != 480 {
		t.Errorf("ga 8 within 1 GiB: %d steps, %v", len(steps), err)
	}
}

// A file whose lines and the fewest steps they make are past the limit is
// refused while it is read (before its layers are held), with the file's
// whole count; at what its schedule takes it is read and scheduled (the
// early check counts steps as the schedule's does, so it never refuses
// what the schedule would take).
func TestReadLimitRefusesLayersEarly(t *testing.T) {
	// 100 compute-only lines on 2 stages: each stage runs each line's
	// forward, input- and weight-gradient compute, 3 x 100 steps, and
	// hands over one activation and one gradient (send and wait): 604.
	var b strings.Builder
	b.WriteString("HYBRID_TRANSFORMER_FWD_IN_BCKWD pp: 2 ga: 1\n100\n")
	for i := 0; i < 100; i++ {
		b.WriteString("l -1 5 NONE 0 5 NONE 0 5 NONE 0 1\n")
	}
	w, err := ReadLimit(strings.NewReader(b.String()), "c.txt", 604*StepBytes)
	if err != nil || len(w.Steps) != 604 {
		t.Fatalf("at the limit: %v", err)
	}
	_, err = ReadLimit(strings.NewReader(b.String()), "c.txt", 600*StepBytes-1)
	if err == nil || !strings.Contains(err.Error(), "c.txt: line 2, field layers: 100 lines on 2 stages make at least 600 steps") || !strings.Contains(err.Error(), "simulate fewer layers") {
		t.Errorf("one byte short: %v", err)
	}
}

// The early refusal's bound never exceeds the schedule it stands for:
// on every shipped SimAI/AICB workload the fewest steps counted line by
// line are at most the steps scheduled.
func TestMinStepsBoundsSchedule(t *testing.T) {
	paths, _ := filepath.Glob("../../examples/workloads/*.txt")
	checked := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		w, err := Read(f, p)
		f.Close()
		if err != nil || w.AICB == nil {
			continue
		}
		var lo int64
		for k := range w.AICB.Layers {
			lo += w.AICB.minSteps(&w.AICB.Layers[k], k)
		}
		if lo == 0 || lo > int64(len(w.Steps)) {
			t.Errorf("%s: bound %d, %d steps scheduled", p, lo, len(w.Steps))
		}
		t.Logf("%s: bound %d of %d steps", filepath.Base(p), lo, len(w.Steps))
		checked++
	}
	if checked < 5 {
		t.Errorf("%d SimAI/AICB workloads checked, want the shipped ones", checked)
	}
}

// minSteps counts, per stage, a line's forward and input- and
// weight-gradient compute, its forward collective, and from the second
// line on its input-gradient collective and wait (the first line's has
// nothing before it to wait on): hand-counted lines on 2 stages.
func TestMinStepsHandCounted(t *testing.T) {
	m := &AICB{PP: 2}
	for _, c := range []struct {
		L    Layer
		k    int
		want int64
	}{
		{Layer{Fwd: 5, IG: 5, WG: 5}, 1, 2 * 3},
		{Layer{Fwd: 5, HasFwd: true, IG: 5, HasIG: true, WG: 5}, 0, 2 * 4},
		{Layer{Fwd: 5, HasFwd: true, IG: 5, HasIG: true, WG: 5}, 3, 2 * 6},
		{Layer{HasFwd: true}, 2, 2 * 1},
	} {
		if got := m.minSteps(&c.L, c.k); got != c.want {
			t.Errorf("minSteps(%+v, line %d) = %d, want %d", c.L, c.k, got, c.want)
		}
	}
	if got := (&AICB{PP: 2, Policy: "MICRO"}).minSteps(&Layer{HasWG: true, Fwd: 5}, 1); got != 1 {
		t.Errorf("MICRO: minSteps = %d, want 1 (its weight-gradient collective once)", got)
	}
}

// A micro-format line with a bad count or a field missing is reported as
// a micro line, not read as a SimAI header whose keys make no sense.
func TestMicroLineErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"1 allreduce 1MiB\n", "w.txt: line 1: 3 fields, expected 4: <passes> <OP> <size> <GROUP>"},
		{"x allreduce 1MiB TP\n", `w.txt: line 1, field passes: "x" is not a positive count`},
		{"allreduce 1MiB TP\n", "w.txt: line 1"}, // no count, no op second: read as a header
		{"2 AllReduce 1MiB TP 7\n", "w.txt: line 1: 5 fields, expected 4"},
	} {
		if _, err := Read(strings.NewReader(c.text), "w.txt"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
	w, err := Read(strings.NewReader("2 allreduce 1MiB TP\n"), "w.txt")
	if err != nil || len(w.Steps) != 2 || w.Steps[0].Size != 1<<20 {
		t.Errorf("valid micro line: %v %+v", err, w)
	}
}
