package chakrarun

import (
	"fmt"
	"math"

	"github.com/fabricsim/fabricsim/pkg/chakra"
)

// Roofline is a GPU's compute roof: its peak rate and the memory
// bandwidth that feeds it.
type Roofline struct {
	PeakFlops float64 // FLOP/s
	MemBps    float64 // bytes/s
}

// Rooflines are the GPU types' dense BF16 tensor-core peaks and HBM
// bandwidths from NVIDIA's datasheets (SXM parts; A100 and A800 the 80 GB
// ones; B200 per GPU of an HGX B200; H20 NVIDIA's announced figures).
// They are inputs, not measurements: a kernel reaches a share of them,
// which --roofline-tflops and --roofline-mem-gbps set.
var Rooflines = map[string]Roofline{
	"A100": {312e12, 2039e9},
	"A800": {312e12, 2039e9},
	"H100": {989e12, 3350e9},
	"H800": {989e12, 3350e9},
	"H20":  {148e12, 4000e9},
	"B200": {2250e12, 8000e9},
}

// Picos is a node's time under the roofline as ASTRA-sim computes it
// (astra-sim/workload/Workload.cc, issue_comp, and
// astra-sim/system/Roofline.cc, get_perf): operational intensity
// num_ops / tensor_size, performance min(bandwidth x intensity, peak),
// time num_ops / performance; that is max(num_ops / peak, tensor_size /
// bandwidth), which also gives a node without num_ops (a pure memory
// operation) or without tensor_size a time, where ASTRA-sim divides by 0.
func (r Roofline) Picos(numOps, tensorSize int64) int64 {
	s := max(float64(numOps)/r.PeakFlops, float64(tensorSize)/r.MemBps)
	return int64(math.Round(s * 1e12))
}

// ApplyRoofline gives every COMP node without a duration (no
// duration_micros, or 0, and no fabricsim.duration_ps) but with num_ops or
// tensor_size its roofline time; roof is called once, when the first such
// node is met, and may refuse. It returns how many nodes took it.
func ApplyRoofline(traces []*chakra.Trace, roof func() (Roofline, error)) (int, error) {
	var r *Roofline
	n := 0
	for _, t := range traces {
		for i := range t.Nodes {
			nd := &t.Nodes[i]
			if nd.Kind != chakra.Comp || nd.DurationPicos() > 0 || (nd.NumOps <= 0 && nd.TensorSize <= 0) {
				continue
			}
			if r == nil {
				rf, err := roof()
				if err != nil {
					return 0, &chakra.Error{File: t.File, Record: nd.Index, NodeID: &nd.ID, Field: "duration_micros", Err: err}
				}
				if rf.PeakFlops <= 0 || rf.MemBps <= 0 || math.IsInf(rf.PeakFlops, 0) || math.IsInf(rf.MemBps, 0) {
					return 0, fmt.Errorf("roofline %+v: peak and bandwidth must be positive", rf)
				}
				r = &rf
			}
			nd.DurationPs = r.Picos(max(nd.NumOps, 0), max(nd.TensorSize, 0))
			n++
		}
	}
	return n, nil
}
