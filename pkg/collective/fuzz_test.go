package collective

import (
	"os"
	"strings"
	"testing"
)

// FuzzReadWorkload: any input parses or fails with one located line.
func FuzzReadWorkload(f *testing.F) {
	for _, p := range []string{"../../examples/workloads/simai_microAllReduce.txt", "../../examples/workloads/micro_allreduce.txt", "../../examples/workloads/pipeline_pp4_ga8.txt"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 2 pp_comm: 1024\n1\nl -1 5 ALLGATHER_EP 10 1 REDUCESCATTER 7 1 ALLREDUCE_DP_EP 9 3\n"))
	f.Add([]byte("HYBRID_TRANSFORMER_FWD_IN_BCKWD pp: 2 vpp: 2 ga: 4 pp_comm: 8\n4\nattention_layer -1 5 NONE 0 1 NONE 0 1 ALLREDUCE 9 3\nmlp_layer -1 5 ALLREDUCE 4 1 NONE 0 1 NONE 0 1\nattention_layer -1 5 NONE 0 1 NONE 0 1 ALLREDUCE 9 3\nmlp_layer -1 5 ALLREDUCE 4 1 NONE 0 1 NONE 0 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ReadWorkload(strings.NewReader(string(data)), "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz: line ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("unlocated error %q", err)
			}
			return
		}
		for _, s := range w.Steps {
			if s.Size < 0 || s.ComputePs < 0 {
				t.Fatalf("negative step %+v", s)
			}
		}
	})
}

// FuzzParseMSCCL: any XML parses or fails with a located error, and what
// parses decomposes without panicking.
func FuzzParseMSCCL(f *testing.F) {
	for _, p := range []string{"../../examples/msccl/ring_allreduce_8.xml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="2"><gpu id="0"><tb id="0" send="1" recv="1" chan="0"><step s="0" type="s" cnt="1" depid="-1" deps="-1"/></tb></gpu><gpu id="1"><tb id="0" send="0" recv="0" chan="0"><step s="0" type="r" cnt="1" depid="-1" deps="-1"/></tb></gpu></algo>`))
	// Shapes that must be refused: no GPUs, no chunks, an unknown step
	// type, a dependency on a step that does not exist.
	for _, bad := range []string{
		`<algo name="x" coll="allreduce" ngpus="-1" nchannels="1" nchunksperloop="2"></algo>`,
		`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="0"><gpu id="0"/><gpu id="1"/></algo>`,
		`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="2"><gpu id="0"><tb id="0" send="1" recv="-1" chan="0"><step s="0" type="warp" cnt="1" depid="-1" deps="-1"/></tb></gpu><gpu id="1"/></algo>`,
		`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="2"><gpu id="0"><tb id="0" send="1" recv="-1" chan="0"><step s="0" type="s" cnt="1" depid="7" deps="3"/></tb></gpu><gpu id="1"/></algo>`,
	} {
		f.Add([]byte(bad))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseMSCCL(strings.NewReader(string(data)), "fuzz.xml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.xml: ") {
				t.Fatalf("unlocated error %q", err)
			}
			return
		}
		if a.NGPUs > 64 {
			return
		}
		ranks := make([]int32, a.NGPUs)
		entry := make([][]int64, a.NGPUs)
		for i := range ranks {
			ranks[i] = int32(i)
		}
		c := newCtx(NewEmitter(&collect{}), Fabric{GPUs: a.NGPUs, GPUsPerServer: a.NGPUs}, 0, ranks, entry)
		_ = a.Emit(c, 1<<20)
	})
}
