package workload

import (
	"maps"
	"os"
	"strings"
	"testing"
)

func readModel(t *testing.T, path string) *Workload {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := Read(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// SimAI's 9216-GPU example is AICB's layout: 6 iteration-level lines, the
// stage's 74 lines once per microbatch (ga 24: embedding, 8 layers of
// attention_column, attention_row and 7 MoE lines, final_column), then 7
// lines (cross entropy, optimizer). vpp 8 puts one layer in each chunk.
func TestAICBLayout(t *testing.T) {
	w := readModel(t, "../../examples/workloads/simai_workload_analytical.txt")
	m := w.AICB
	if m.PP != 12 || m.VPP != 8 || m.GA != 24 || m.EP != 16 || m.TP != 2 || m.PPComm != 50331648 || m.AllGPUs != 9216 {
		t.Fatalf("header %+v", *m)
	}
	pre, post, blocks := m.split()
	if pre != [2]int{0, 6} || post != [2]int{6 + 24*74, 1789} || len(blocks) != 24 || blocks[1] != [2]int{80, 154} {
		t.Fatalf("pre %v post %v blocks %d %v", pre, post, len(blocks), blocks[:2])
	}
	if st := m.layerStarts(blocks[0][0], blocks[0][1]); len(st) != 8 || st[0] != 6 || st[1] != 6+1+9 {
		t.Fatalf("layer starts %v", st)
	}
	// Each of the 24 microbatches runs its own copy: every line of the
	// blocks is computed once, on every stage.
	fwd := map[int32]int{}
	for _, s := range w.Steps {
		if s.ComputePs > 0 && s.Phase == "fwd" && s.Stage == 0 {
			fwd[s.Layer]++
		}
	}
	for k := 6; k < 6+24*74; k++ {
		if m.Layers[k].Fwd > 0 && fwd[int32(k)] != 1 {
			t.Fatalf("line %d forward computed %d times on stage 0", k, fwd[int32(k)])
		}
	}
}

// A file without ga copies is one microbatch's layers, run by each.
func TestRepeatedMicrobatch(t *testing.T) {
	w := readModel(t, "../../examples/workloads/pipeline_pp4_ga8.txt")
	per := map[int32]int{}
	for _, s := range w.Steps {
		if s.ComputePs > 0 && s.Phase == "fwd" && s.Stage == 2 {
			per[s.Microbatch]++
		}
	}
	if len(per) != 8 || per[0] != 4 || per[7] != 4 {
		t.Fatalf("forward computes per microbatch on stage 2: %v", per)
	}
}

// A --ga other than the header's runs the file's microbatches, again from
// the first when there are more: AICB's ga 2 file (an iteration line, two
// copies of a two-line microbatch, an iteration line) at --ga 4 computes
// each copy's lines twice and the iteration lines once. (Cut by --ga's 4
// instead, the file held no copies and every line ran 4 times.)
func TestGAOverrideRunsFileCopies(t *testing.T) {
	const file = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ga: 2\n6\n" +
		"grad_norm -1 1000 NONE 0 1000 NONE 0 1000 NONE 0 100\n" +
		"attention_layer -1 1000 NONE 0 1000 NONE 0 1000 NONE 0 100\n" +
		"mlp_layer -1 1000 NONE 0 1000 NONE 0 1000 NONE 0 100\n" +
		"attention_layer -1 1000 NONE 0 1000 NONE 0 1000 NONE 0 100\n" +
		"mlp_layer -1 1000 NONE 0 1000 NONE 0 1000 NONE 0 100\n" +
		"optimizer1 -1 1000 NONE 0 1000 NONE 0 1000 NONE 0 100\n"
	w, err := Read(strings.NewReader(file), "ga2.txt")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := w.AICB.Schedule(1, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	fwd := map[int32]int{}
	for _, s := range steps {
		if s.ComputePs > 0 && s.Phase == "fwd" {
			fwd[s.Layer]++
		}
	}
	if want := map[int32]int{0: 1, 1: 2, 2: 2, 3: 2, 4: 2, 5: 1}; !maps.Equal(fwd, want) {
		t.Fatalf("forward computes per line %v, want %v", fwd, want)
	}
}

// Megatron's orders: every microbatch passes forward and backward through
// every chunk once, a backward after its forward.
func TestPipelineOrder(t *testing.T) {
	for _, c := range []struct{ p, m, v int }{{4, 8, 1}, {4, 8, 2}, {4, 4, 2}, {2, 6, 3}, {1, 3, 1}} {
		for s := 0; s < c.p; s++ {
			seen := map[unit]int{}
			for i, u := range pipelineOrder(s, c.p, c.m, c.v) {
				if _, dup := seen[u]; dup {
					t.Fatalf("%+v stage %d: %+v twice", c, s, u)
				}
				if !u.fwd {
					if j, ok := seen[unit{u.mb, u.chunk, true}]; !ok || j > i {
						t.Fatalf("%+v stage %d: backward %+v before its forward", c, s, u)
					}
				}
				seen[u] = i
			}
			if len(seen) != 2*c.m*c.v {
				t.Fatalf("%+v stage %d: %d passes, want %d", c, s, len(seen), 2*c.m*c.v)
			}
		}
	}
}

// An AICB built in code has GA 0 (Read defaults it to 1): it is one
// microbatch's file, run --ga times, as a header's ga of 1 is.
func TestScheduleZeroGAIsOneCopy(t *testing.T) {
	m := &AICB{PP: 1, VPP: 1, Layers: []Layer{{Name: "attention_layer", Fwd: 5, HasFwd: true}}}
	steps, err := m.Schedule(1, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	mbs := map[int32]bool{}
	for _, s := range steps {
		if s.Microbatch >= 0 {
			mbs[s.Microbatch] = true
		}
	}
	if len(mbs) != 2 {
		t.Errorf("GA 0 at --ga 2: %d microbatches %v, want 2", len(mbs), mbs)
	}
}
