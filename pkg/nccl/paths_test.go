package nccl

import (
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/ncclpath"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// pathsFor computes a built-in template's paths record as ncclpath writes it.
func pathsFor(t *testing.T, template string, opt ncclpath.Options) *stream.Paths {
	t.Helper()
	sys, err := ncclpath.Template(template)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ncclpath.Compute(sys, opt)
	if err != nil {
		t.Fatal(err)
	}
	return res.StreamPaths(nil)
}

func modelFromPaths(t *testing.T, template, gpu string, opt ncclpath.Options) ServerModel {
	t.Helper()
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: gpu})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ModelFromPaths(pathsFor(t, template, opt), tp)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The paths-derived models must give the search NCCL's worked results
// (see TestSearchWorkedExamples) and agree with the topology fallback on
// the SXM servers it was written for.
func TestModelFromPathsWorkedExamples(t *testing.T) {
	for _, c := range []struct {
		template, gpu string
		ch            int
		bw, nvlink    float64
	}{{"dgx-a100", "A100", 12, 20, 240}, {"dgx-h100", "H100", 12, 30, 18 * 20.6}} {
		m := modelFromPaths(t, c.template, c.gpu, ncclpath.Options{})
		if g := search(m, 1, false); g.NChannels != c.ch || g.BwIntra != c.bw {
			t.Errorf("%s: %d channels x %g GB/s, want %d x %g", c.template, g.NChannels, g.BwIntra, c.ch, c.bw)
		}
		if m.IntraType != ncclpath.PathNVL || !m.NVSwitch || m.InterType != ncclpath.PathPIX || !m.PXN || m.NICs != 8 || m.GPUs != 8 {
			t.Errorf("%s: %+v", c.template, m)
		}
		if d := m.NVLinkGBps - c.nvlink; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: NVLink %g GB/s, want %g", c.template, m.NVLinkGBps, c.nvlink)
		}
		if m.NVLS != (m.CC >= 90) {
			t.Errorf("%s: NVLS %v with CC %d", c.template, m.NVLS, m.CC)
		}
		// 400 Gbps NICs from topogen's Spectrum-X; PCIe Gen4 (24) and Gen5 (48) bound the GPU→NIC paths.
		if m.NICGBps != 50 || m.GPUNICGBps != map[string]float64{"A100": 24, "H100": 48}[c.gpu] {
			t.Errorf("%s: NIC %g GB/s, GPU→NIC %g GB/s", c.template, m.NICGBps, m.GPUNICGBps)
		}
		// The record knows the NIC shares the GPU's PCIe switch (PIX) where
		// the fallback assumes PXB; channels and speeds agree.
		top := topologyModel(t, topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: c.gpu})
		for _, nn := range []int{1, 2} {
			a, b := search(m, nn, false), search(top, nn, false)
			if a.NChannels != b.NChannels || a.BwIntra != b.BwIntra || a.BwInter != b.BwInter {
				t.Errorf("%s, %d nodes: paths give %+v, topology %+v", c.template, nn, a, b)
			}
		}
	}
}

func TestModelFromPathsPCIe(t *testing.T) {
	m := modelFromPaths(t, "pcie-2s", "A100", ncclpath.Options{})
	if m.IntraType != ncclpath.PathSYS || m.NVSwitch || m.NVLS || m.NVLinkGBps != 0 || m.PXN || m.NICs != 2 {
		t.Errorf("pcie-2s: %+v", m)
	}
	if m.InterType < ncclpath.PathPIX || m.InterType > ncclpath.PathSYS || m.GPUGPUGBps <= 0 {
		t.Errorf("pcie-2s: inter %s, GPU-GPU %g GB/s", m.InterType, m.GPUGPUGBps)
	}
	if g := search(m, 1, false); g.NChannels < 1 || g.BwIntra > m.GPUGPUGBps {
		t.Errorf("pcie-2s search: %+v", g)
	}
}

// NCCL_PXN_DISABLE leaves no proxy, so the model has no PXN; H800's eight
// NVLinks show in the NVLink bandwidth.
func TestModelFromPathsOptions(t *testing.T) {
	if m := modelFromPaths(t, "dgx-h100", "H100", ncclpath.Options{PXNDisable: true}); m.PXN {
		t.Error("PXN with NCCL_PXN_DISABLE")
	}
	if m := modelFromPaths(t, "hgx-h800", "H800", ncclpath.Options{}); m.NVLinkGBps < 164.7 || m.NVLinkGBps > 164.9 {
		t.Errorf("H800 NVLink %g GB/s, want 8 x 20.6", m.NVLinkGBps)
	}
}

func TestModelFromPathsErrors(t *testing.T) {
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "H100"})
	if err != nil {
		t.Fatal(err)
	}
	p := pathsFor(t, "dgx-h100", ncclpath.Options{})
	for name, c := range map[string]struct {
		mut  func(p *stream.Paths, t *stream.Topology)
		want string
	}{
		"gpu count":  {func(p *stream.Paths, t *stream.Topology) { p.GPUs = 4 }, "4 GPUs per server, the topology has 8"},
		"gpu type":   {func(p *stream.Paths, t *stream.Topology) { t.GPUType = "V100" }, `unknown GPU type "V100"`},
		"path type":  {func(p *stream.Paths, t *stream.Topology) { p.Entries[3].Type = "XYZ" }, "entries[3].type"},
		"range":      {func(p *stream.Paths, t *stream.Topology) { p.Entries[0].Dst = 99 }, "entries[0]: endpoint"},
		"gpu_nics":   {func(p *stream.Paths, t *stream.Topology) { p.GPUNICs[2] = []int32{42} }, "gpu_nics[2]"},
		"no entries": {func(p *stream.Paths, t *stream.Topology) { p.Entries = nil }, "no GPU0→GPU1 entry"},
	} {
		pc, tc := *p, *tp
		pc.Entries = append([]stream.PathEntry(nil), p.Entries...)
		pc.GPUNICs = append([][]int32(nil), p.GPUNICs...)
		c.mut(&pc, &tc)
		if _, err := ModelFromPaths(&pc, &tc); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
	}
}

// topologyModel is the server model of a generated fabric, with no paths
// record.
func topologyModel(t *testing.T, p topo.Params) ServerModel {
	t.Helper()
	tp, _, err := topo.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ModelFromTopology(tp)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
