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
	// Two servers of 8 H100s, each GPU with a 400G NIC behind its PCIe
	// switch (path 48 GB/s, as NCCL's PCIe Gen5 x16 is): NCCL 2.28 logs
	// "Pattern 4, crossNic 2, nChannels 8, bw 48.000000/48.000000, type
	// NVL/PIX" on such a system (NV18, 8 x 400G RoCE rails, 2 x 8 ranks).
	// A channel crosses NVLink 7 times over 8 GPUs, so 8 channels at 48
	// load a GPU's NVLink (370.8 GB/s) with 336; counting 8 crossings
	// allowed only 7 and the search settled on 8 at 45.
	m := topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100", NICBW: 400e9})
	if g := search(m, 2, false); g.NChannels != 8 || g.BwIntra != 48 {
		t.Errorf("2 x 8 H100, 400G NICs: %d channels x %g GB/s, want 8 x 48", g.NChannels, g.BwIntra)
	}
}
