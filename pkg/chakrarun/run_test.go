package chakrarun

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/chakra"
	"github.com/fabricsim/fabricsim/pkg/collective"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/roofline"
	"github.com/fabricsim/fabricsim/pkg/topo"
	"github.com/fabricsim/fabricsim/pkg/workload"
)

type collect struct{ flows []stream.Flow }

func (c *collect) Flow(f *stream.Flow) error {
	g := *f
	g.Deps = append([]int64(nil), f.Deps...)
	c.flows = append(c.flows, g)
	return nil
}

func decomposer(t testing.TB, p topo.Params, l func(gpus int) workload.Layout) *collective.Decomposer {
	t.Helper()
	tp, _, err := topo.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := nccl.ModelFromTopology(tp)
	if err != nil {
		t.Fatal(err)
	}
	fab := collective.FabricOf(tp)
	pl, err := collective.NewPlanner(m, fab, collective.Options{Selector: "nccl", LaunchLatency: true, MaxChunks: 16})
	if err != nil {
		t.Fatal(err)
	}
	d, err := collective.NewDecomposer(fab, l(tp.GPUs), pl)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runChakra plans and emits the traces at prefix on d.
func runChakra(t *testing.T, d *collective.Decomposer, prefix, groupFile string) (*Run, []stream.Flow) {
	t.Helper()
	traces, err := chakra.ReadPrefix(prefix)
	if err != nil {
		t.Fatal(err)
	}
	var g *chakra.Groups
	if groupFile != "" {
		f, err := os.Open(groupFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if g, err = chakra.ReadGroups(f, groupFile, len(traces)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Plan(traces, g, d)
	if err != nil {
		t.Fatal(err)
	}
	c := &collect{}
	if err := r.Emit(collective.NewEmitter(c)); err != nil {
		t.Fatal(err)
	}
	return r, c.flows
}

// TestRoundTrip: a SimAI workload written as Chakra and read back gives
// the same groups, collectives and flows as the workload decomposed
// directly. Only the SimAI bookkeeping of a collective record (layer,
// phase, microbatch, stage), which Chakra has no place for, is left out.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		file                string
		gpus, tp, pp, ep, n int
	}{
		{"pipeline_pp4_ga8.txt", 16, 1, 4, 1, 0},
		{"aicb_L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1_A100.txt", 16, 2, 1, 1, 0},
		{"simai_microAllReduce.txt", 8, 8, 1, 1, 0},
		{"micro_allreduce.txt", 16, 8, 1, 1, 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("../../examples/workloads", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			w, err := workload.Read(f, tc.file)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			p := topo.Params{Family: "spectrum-x", GPUs: tc.gpus}
			layout := func(g int) workload.Layout {
				l, err := workload.NewLayout(g, tc.tp, 0, tc.pp, tc.ep)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			d := decomposer(t, p, layout)
			colls, err := d.Prepare(w)
			if err != nil {
				t.Fatal(err)
			}
			want := &collect{}
			if err := d.Emit(w, colls, collective.NewEmitter(want)); err != nil {
				t.Fatal(err)
			}
			prefix := filepath.Join(t.TempDir(), "w")
			if _, err := WriteWorkload(w, d.Layout, prefix); err != nil {
				t.Fatal(err)
			}
			d2 := decomposer(t, p, func(g int) workload.Layout { l, _ := workload.NewLayout(g, 1, g, 1, 1); return l })
			r, got := runChakra(t, d2, prefix, GroupsFile(prefix))
			if !reflect.DeepEqual(r.Groups, d.Groups()) {
				t.Fatalf("groups differ:\n got %v\nwant %v", r.Groups, d.Groups())
			}
			if len(r.Colls) != len(colls) {
				t.Fatalf("%d collective records, want %d", len(r.Colls), len(colls))
			}
			for i := range colls {
				a, b := r.Colls[i].Rec, colls[i].Rec
				b.Layer, b.LayerName, b.Phase, b.Microbatch, b.Stage = a.Layer, a.LayerName, a.Phase, a.Microbatch, a.Stage
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("collective %d:\n got %+v\nwant %+v", i, a, b)
				}
			}
			if len(got) != len(want.flows) {
				t.Fatalf("%d flows, want %d", len(got), len(want.flows))
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], want.flows[i]) {
					t.Fatalf("flow %d:\n got %+v\nwant %+v", i, got[i], want.flows[i])
				}
			}
			t.Logf("%d collectives, %d flows identical", len(colls), len(got))
		})
	}
}

// FuzzPlan: two ranks' traces, whatever they hold, plan and emit or fail
// with an error; never a panic.
func FuzzPlan(f *testing.F) {
	d := decomposer(f, topo.Params{Family: "fat-tree", GPUs: 4, GPUsPerServer: 1}, func(g int) workload.Layout { l, _ := workload.NewLayout(g, 1, g, 1, 1); return l })
	for _, p := range []string{"custom_ring_allreduce_8npus_1MB/custom_allreduce.", "microbenchmarks/all_reduce/4npus_1MB/all_reduce."} {
		a, err := os.ReadFile("../../tests/testdata/chakra/" + p + "0.et")
		if err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile("../../tests/testdata/chakra/" + p + "1.et")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(a, b)
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var traces []*chakra.Trace
		for i, data := range [][]byte{a, b} {
			tr, err := chakra.Read(bytes.NewReader(data), "r"+strconv.Itoa(i)+".et")
			if err != nil {
				return
			}
			traces = append(traces, tr)
		}
		r, err := Plan(traces, nil, d)
		if err != nil {
			return
		}
		_ = r.Emit(collective.NewEmitter(&collect{}))
	})
}

// The roofline by hand: on an H100 (989 TFLOP/s, 3350 GB/s) 989e9 FLOPs
// on 1 GB take 1 ms of compute and 298.5 us of memory (compute-bound: 1
// ms); on 6.7 GB they take 2 ms of memory (memory-bound); a node with a
// duration keeps it, one with neither num_ops nor tensor_size stays 0.
func TestRoofline(t *testing.T) {
	tr := &chakra.Trace{File: "r.0.et", Nodes: []chakra.Node{
		{ID: 1, Kind: chakra.Comp, NumOps: 989e9, TensorSize: 1e9},
		{ID: 2, Kind: chakra.Comp, NumOps: 989e9, TensorSize: 6.7e9},
		{ID: 3, Kind: chakra.Comp, NumOps: 989e9, TensorSize: 1e9, DurationMicros: 5},
		{ID: 4, Kind: chakra.Comp},
		{ID: 5, Kind: chakra.Coll, NumOps: 989e9, TensorSize: 1e9},
	}}
	n, err := ApplyRoofline([]*chakra.Trace{tr}, func() (Roofline, error) { return roofline.ByGPU["H100"], nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{1e9, 2e9, 5e6, 0, 0} // ps
	for i, w := range want {
		if got := tr.Nodes[i].DurationPicos(); got != w {
			t.Errorf("node %d: %d ps, want %d", tr.Nodes[i].ID, got, w)
		}
	}
	if n != 2 {
		t.Errorf("%d nodes took the roofline, want 2", n)
	}
	_, err = ApplyRoofline([]*chakra.Trace{{File: "x.0.et", Nodes: []chakra.Node{{Index: 1, ID: 7, Kind: chakra.Comp, NumOps: 1}}}},
		func() (Roofline, error) { return Roofline{}, errors.New("no figures") })
	if err == nil || !strings.Contains(err.Error(), "x.0.et: record 1 (node id 7), field duration_micros: no figures") {
		t.Errorf("error %v", err)
	}
}
