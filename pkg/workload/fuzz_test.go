package workload

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
		w, err := Read(strings.NewReader(string(data)), "fuzz")
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
