package serve

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Roofline is what the compute model assumes of one GPU: an iteration
// takes max(FLOPs / (TP x PeakFLOPs), bytes / (TP x HBMBps)) over its
// replica's tensor-parallel ranks (pipeline stages run one after another
// for one batch, so PP does not divide it).
type Roofline struct {
	PeakFLOPs float64 // dense BF16/FP16 tensor FLOP/s
	HBMBps    float64 // HBM bytes/s
}

// Rooflines are the datasheet figures per topogen GPU type: dense
// (no sparsity) BF16 tensor-core peak and HBM bandwidth of the SXM part:
//
//   - A100 SXM 80GB: 312 TFLOP/s, 2,039 GB/s (NVIDIA A100 datasheet)
//   - A800 SXM 80GB: 312 TFLOP/s, 2,039 GB/s (NVIDIA A800 datasheet)
//   - H100 SXM: 989 TFLOP/s, 3,350 GB/s (NVIDIA H100 datasheet; 1,979 is with sparsity)
//   - H800 SXM: 989 TFLOP/s, 3,350 GB/s (NVIDIA H800 datasheet)
//   - H20: 148 TFLOP/s, 4,000 GB/s (NVIDIA H20 datasheet)
//   - B200: 2,250 TFLOP/s, 8,000 GB/s (NVIDIA DGX B200 datasheet, per GPU)
//
// These are peaks: real kernels reach a fraction of them, so a roofline
// run is a lower bound on compute time; --peak-tflops and --hbm-bw set
// derated figures.
var Rooflines = map[string]Roofline{
	"A100": {312e12, 2039e9},
	"A800": {312e12, 2039e9},
	"H100": {989e12, 3350e9},
	"H800": {989e12, 3350e9},
	"H20":  {148e12, 4000e9},
	"B200": {2250e12, 8000e9},
}

// RooflineFor returns the roofline of a GPU type.
func RooflineFor(gpuType string) (Roofline, error) {
	r, ok := Rooflines[gpuType]
	if !ok {
		return Roofline{}, fmt.Errorf("no roofline for GPU type %q (known: %s); give --peak-tflops and --hbm-bw",
			gpuType, strings.Join(slices.Sorted(maps.Keys(Rooflines)), ", "))
	}
	return r, nil
}

// Time is the roofline time in seconds of work w on tp GPUs.
func (r Roofline) Time(w Work, tp int) float64 {
	return max(w.FLOPs/(float64(tp)*r.PeakFLOPs), w.Bytes/(float64(tp)*r.HBMBps))
}
