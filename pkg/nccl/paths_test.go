package nccl

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
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
		// 400 Gbps NICs from topogen's Spectrum-X, an A100's link to it
		// capped at what its PCIe Gen4 x16 carries (28.3 GB/s,
		// topo.GPUSpec.PCIeCarriesGBps); PCIe Gen4 (24) and Gen5 (48) as
		// NCCL counts them bound the GPU→NIC paths.
		if m.NICGBps != map[string]float64{"A100": 28.3, "H100": 50}[c.gpu] || m.GPUNICGBps != map[string]float64{"A100": 24, "H100": 48}[c.gpu] {
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

// OCI BM.GPU4.8 (examples/servers/oci-bm-gpu4.8.xml): 16 x 100G RoCE
// ports, two dual-port cards on each PCIe switch with its two A100s, on
// topogen's fabric of one 200G link a GPU. NCCL sees 16 NICs of 12.5 GB/s
// (nicPortGBps), so its search (NCCL 2.19 search.cc, sm80 inter ladder
// 48, 30, 28, 24, 20, 18, 15, 12, ...) starts at 12 (the GPU-NIC path's
// 12.5) and fits one channel a port each way: a ring graph of 16 x 12
// GB/s, no duplication (bwIntra < 25). The tree graph keeps its 16
// channels and raises its intra bandwidth (pass 2, "increase bwIntra for
// trees") to 15, not 18: 16 x 18 = 288 GB/s exceeds a GPU's 240 of
// NVLink. Its model then carries more than the ring (tuning.cc, 2
// nodes, bw = bwIntra): tree Simple min(16 x 15 x 0.92, 16 x 23.6) =
// 220.8 GB/s bus, LL128 220.8 x 120/128 = 207, ring Simple 16 x 12 = 192.
// With one 200G NIC a GPU (dgx-a100) the same search gives 8 x 24 and a
// tree of 8 x 30 whose 188.8 (capped at 8 x 23.6) stays under the ring.
func TestModelFromPathsOCITwoPortsAGPU(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "servers", "oci-bm-gpu4.8.xml"))
	if err != nil {
		t.Fatal(err)
	}
	m, tp := xmlModel(t, "oci-bm-gpu4.8.xml", string(b))
	if m.NICs != 16 || m.NICGBps != 12.5 || m.GPUNICGBps != 12.5 {
		t.Fatalf("OCI model: %d NICs of %g GB/s, GPU-NIC path %g, want 16 of 12.5, 12.5", m.NICs, m.NICGBps, m.GPUNICGBps)
	}
	m.AMDCPU = true
	dgx, err := ModelFromPaths(pathsFor(t, "dgx-a100", ncclpath.Options{}), tp)
	if err != nil {
		t.Fatal(err)
	}
	dgx.AMDCPU = true
	for _, c := range []struct {
		m                                 ServerModel
		ringCh, treeCh                    int
		ringBw, treeIntra                 float64
		ringSimple, treeSimple, treeLL128 float64
		big                               Algo
	}{
		{m, 16, 16, 12, 15, 192, 220.8, 207, AlgoTree},
		{dgx, 8, 8, 24, 30, 192, 188.8, 160, AlgoRing},
	} {
		tu := NewTuner(c.m, 16, 2)
		tu.RaiseTreeIntra()
		r, g := tu.Ring, tu.TreeGraph
		if r.NChannels != c.ringCh || r.BwIntra != c.ringBw || r.BwInter != c.ringBw {
			t.Errorf("%s: ring graph %d x %g/%g, want %d x %g", c.m.Name, r.NChannels, r.BwIntra, r.BwInter, c.ringCh, c.ringBw)
		}
		if g.NChannels != c.treeCh || g.BwIntra != c.treeIntra || g.BwInter != c.ringBw {
			t.Errorf("%s: tree graph %d x %g/%g, want %d x %g/%g", c.m.Name, g.NChannels, g.BwIntra, g.BwInter, c.treeCh, c.treeIntra, c.ringBw)
		}
		for _, b := range []struct {
			a    Algo
			p    Proto
			want float64
		}{{AlgoRing, Simple, c.ringSimple}, {AlgoTree, Simple, c.treeSimple}, {AlgoTree, LL128, c.treeLL128}} {
			if got := tu.BusBw(AllReduce, b.a, b.p); math.Abs(got-b.want) > 1e-6*b.want {
				t.Errorf("%s: %v %v bus bandwidth %g GB/s, want %g", c.m.Name, b.a, b.p, got, b.want)
			}
		}
		// 4 GiB, where OCI's NCCL 2.19 run moved 219-238 GB/s of busbw,
		// above the 200 a ring carries through 16 x 100G: a tree.
		if a, _, _, err := tu.Select(AllReduce, 4<<30); err != nil || a != c.big {
			t.Errorf("%s: 4 GiB AllReduce takes %v (%v), want %v", c.m.Name, a, err, c.big)
		}
	}
}

// A server dump with NICs no GPU uses (a storage or management NIC under
// each CPU, as NCCL_TOPO_DUMP_FILE writes them) splits no GPU's wire: on
// dgx-a100 plus two such 200G NICs, on a fabric of one 200G link a GPU,
// the NICs stay at 25 GB/s and the GPU-NIC path at 24 (the PCIe Gen4
// bound), as without them.
func TestModelFromPathsStorageNICsSplitNothing(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "servers", "dgx-a100.xml"))
	if err != nil {
		t.Fatal(err)
	}
	storage := func(i int) string {
		return fmt.Sprintf(`    <pci busid="0000:%x0:00.0" class="0x020000" vendor="0x15b3" device="0x101b" subsystem_vendor="0x15b3" subsystem_device="0x0007" link_speed="16.0 GT/s PCIe" link_width="16">
      <nic>
        <net name="mlx5_%d" dev="%d" speed="200000" port="1" latency="0.000000" guid="0x1c34da0300a1b2d%d" maxconn="131072" gdr="1"/>
      </nic>
    </pci>
`, 2+8*i, 8+i, 8+i, i)
	}
	xml := string(b) // one under each of its two CPUs
	first, last := strings.Index(xml, "  </cpu>"), strings.LastIndex(xml, "  </cpu>")
	xml = xml[:first] + storage(0) + xml[first:last] + storage(1) + xml[last:]
	if m, _ := xmlModel(t, "dgx-a100-storage.xml", xml); m.NICs != 10 || m.NICGBps != 25 || m.GPUNICGBps != 24 {
		t.Errorf("dgx-a100 with two storage NICs: %d NICs of %g GB/s, GPU-NIC path %g; want 10 of 25, 24", m.NICs, m.NICGBps, m.GPUNICGBps)
	}
}

// xmlModel is the server model of NCCL topology XML xml (named name) on a
// fabric of 2 x 8 A100s with one 200G link a GPU, and that fabric.
func xmlModel(t *testing.T, name, xml string) (ServerModel, *topo.Topology) {
	t.Helper()
	sys, err := ncclpath.ParseXML(strings.NewReader(xml), name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ncclpath.Compute(sys, ncclpath.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tp, _, err := topo.Generate(topo.Params{Family: topo.SpectrumX, GPUs: 16, GPUType: "A100", NICBW: 200e9})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ModelFromPaths(res.StreamPaths(nil), tp)
	if err != nil {
		t.Fatal(err)
	}
	return m, tp
}
