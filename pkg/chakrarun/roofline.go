package chakrarun

import (
	"fmt"
	"math"

	"github.com/fabricsim/fabricsim/pkg/chakra"
	"github.com/fabricsim/fabricsim/pkg/roofline"
)

// Roofline is a GPU's compute roof (pkg/roofline).
type Roofline = roofline.Roof

// picos is a node's time under the roofline as ASTRA-sim computes it
// (astra-sim/workload/Workload.cc, issue_comp, and
// astra-sim/system/Roofline.cc, get_perf): operational intensity
// num_ops / tensor_size, performance min(bandwidth x intensity, peak),
// time num_ops / performance; that is max(num_ops / peak, tensor_size /
// bandwidth), which also gives a node without num_ops (a pure memory
// operation) or without tensor_size a time, where ASTRA-sim divides by 0.
func picos(r Roofline, numOps, tensorSize int64) int64 {
	return int64(math.Round(r.Seconds(float64(numOps), float64(tensorSize)) * 1e12))
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
				if rf.PeakFLOPs <= 0 || rf.HBMBps <= 0 || math.IsInf(rf.PeakFLOPs, 0) || math.IsInf(rf.HBMBps, 0) {
					return 0, fmt.Errorf("roofline %+v: peak and bandwidth must be positive", rf)
				}
				r = &rf
			}
			nd.DurationPs = picos(*r, max(nd.NumOps, 0), max(nd.TensorSize, 0))
			n++
		}
	}
	return n, nil
}
