package serve

import "github.com/fabricsim/fabricsim/pkg/roofline"

// Roofline is what the compute model assumes of one GPU (pkg/roofline):
// an iteration takes max(FLOPs / (TP x peak), bytes / (TP x HBM)) over its
// replica's tensor-parallel ranks (pipeline stages run one after another
// for one batch, so PP does not divide it).
type Roofline = roofline.Roof

// iterationSeconds is the roofline time in seconds of work w on tp GPUs.
func iterationSeconds(r Roofline, w Work, tp int) float64 {
	return r.Seconds(w.FLOPs/float64(tp), w.Bytes/float64(tp))
}
