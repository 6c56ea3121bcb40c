package nccl

import (
	"testing"

	"github.com/fabricsim/fabricsim/pkg/topo"
)

// NCCL's own worked numbers for the search (NCCL_FACTS section 3.2).
func TestSearchWorkedExamples(t *testing.T) {
	for _, c := range []struct {
		gpu string
		ch  int
		bw  float64
	}{{"A100", 12, 20}, {"H100", 12, 30}} {
		g := search(topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 8, GPUType: c.gpu}), 1, false)
		if g.NChannels != c.ch || g.BwIntra != c.bw {
			t.Errorf("%s: %d channels x %g GB/s, want %d x %g", c.gpu, g.NChannels, g.BwIntra, c.ch, c.bw)
		}
	}
}
