// Package roofline holds what the compute models assume of a GPU: its
// dense tensor peak and the HBM bandwidth that feeds it, per topogen GPU
// type. Chakra COMP nodes without a duration and the serving simulator's
// iterations are both priced from it.
package roofline

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Roof is one GPU's compute roof.
type Roof struct {
	PeakFLOPs float64 // dense BF16/FP16 tensor FLOP/s
	HBMBps    float64 // HBM bytes/s
}

// ByGPU holds the datasheet figures per topogen GPU type, dense (no
// sparsity) BF16 tensor-core peak and HBM bandwidth of the SXM part:
//
//   - A100 SXM 80GB: 312 TFLOP/s, 2,039 GB/s (NVIDIA A100 datasheet)
//   - A800 SXM 80GB: 312 TFLOP/s, 2,039 GB/s (NVIDIA A800 datasheet)
//   - H100 SXM: 989 TFLOP/s, 3,350 GB/s (NVIDIA H100 datasheet; 1,979 is with sparsity)
//   - H800 SXM: 989 TFLOP/s, 3,350 GB/s (NVIDIA H800 datasheet)
//   - H20: 148 TFLOP/s, 4,000 GB/s (NVIDIA H20 datasheet)
//   - B200: 2,250 TFLOP/s, 8,000 GB/s (NVIDIA DGX B200 datasheet, per GPU)
//
// They are inputs, not measurements: real kernels reach a share of them,
// so a roofline time is a lower bound; the programs' --peak-tflops and
// --hbm-bw set derated figures.
var ByGPU = map[string]Roof{
	"A100": {312e12, 2039e9},
	"A800": {312e12, 2039e9},
	"H100": {989e12, 3350e9},
	"H800": {989e12, 3350e9},
	"H20":  {148e12, 4000e9},
	"B200": {2250e12, 8000e9},
}

// For returns the roof of a GPU type.
func For(gpuType string) (Roof, error) {
	r, ok := ByGPU[gpuType]
	if !ok {
		return Roof{}, fmt.Errorf("no roofline for GPU type %q (known: %s); give --peak-tflops and --hbm-bw",
			gpuType, strings.Join(slices.Sorted(maps.Keys(ByGPU)), ", "))
	}
	return r, nil
}

// Seconds is the roofline time of work of flops FLOPs that moves bytes
// bytes through HBM: max(flops / peak, bytes / bandwidth), ASTRA-sim's
// roofline (astra-sim/system/Roofline.cc get_perf: performance
// min(bandwidth x intensity, peak) at intensity flops / bytes) written so
// that pure compute or pure memory work also gets a time.
func (r Roof) Seconds(flops, bytes float64) float64 {
	return max(flops/r.PeakFLOPs, bytes/r.HBMBps)
}
