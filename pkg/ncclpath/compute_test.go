package ncclpath

import (
	"reflect"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// TestBottleneckIsMinOverLinks: a path's bandwidth is its slowest link.
//
//	CPU0 ──24── SW0 ──24── GPU0
//	             └───6──── NICa ──12.5── NIC0 (100 Gb/s port)
func TestBottleneckIsMinOverLinks(t *testing.T) {
	s := NewSystem("chain")
	c := s.AddCPU(cpuOn(amdRome, 0))
	sw := s.AddPCI(c, "0000:10:00.0", 24)
	gpuAt(s, sw, 0, 80, 24)
	nicAt(s, sw, 0, 6, 100000, true)
	r := mustCompute(t, s, Options{})
	// GPU0→SW0→NICa→NIC0: min(24, 6, 100000/8000=12.5) = 6; one switch: PIX.
	want(t, "GPU0→NIC0", r.GPUToNIC[0][0], PathPIX, 6, 3, []string{"PCI/0000:10:00.0", "PCI/0000:80:00.0", "NIC0"})
	want(t, "NIC0→GPU0", r.NICToGPU[0][0], PathPIX, 6, 3, []string{"PCI/0000:80:00.0", "PCI/0000:10:00.0", "GPU0"})
	// A GPU to itself is LOC at NCCL's "infinite" 5000 GB/s.
	want(t, "GPU0→GPU0", r.GPUToGPU[0][0], PathLOC, LocBW, 0, []string{})
}

// TestPCIePathTypes uses the pcie-2s template, drawn in templates.go:
//
//	CPU0 ── PLX0 ─┬─ SW0: GPU0 GPU1 NIC0
//	              └─ SW1: GPU2 GPU3
//	CPU1 ─┬─ SW2: GPU4 GPU5 NIC1
//	      └─ SW3: GPU6 GPU7
//
// every PCIe link 24 GB/s (Gen4 x16), NIC ports 25 GB/s, CPU0–CPU1 Intel
// Ice Lake = SKL class = 10 GB/s.
func TestPCIePathTypes(t *testing.T) {
	s, err := Template("pcie-2s")
	if err != nil {
		t.Fatal(err)
	}
	r := mustCompute(t, s, Options{})
	// One switch between them: PIX.
	want(t, "GPU0→GPU1", r.GPUToGPU[0][1], PathPIX, 24, 2, []string{"PCI/0000:11:00.0", "GPU1"})
	// SW0→PLX0 is a switch-to-switch hop: PXB.
	want(t, "GPU0→GPU2", r.GPUToGPU[0][2], PathPXB, 24, 4, []string{"PCI/0000:11:00.0", "PCI/0000:10:00.0", "PCI/0000:21:00.0", "GPU2"})
	// Through CPU1's root complex: PHB.
	want(t, "GPU4→GPU6", r.GPUToGPU[4][6], PathPHB, 24, 4, []string{"PCI/0000:81:00.0", "CPU1", "PCI/0000:a1:00.0", "GPU6"})
	// GPU0 SW0 PLX0 CPU0 CPU1 SW2 GPU4: crosses the 10 GB/s socket link: SYS.
	want(t, "GPU0→GPU4", r.GPUToGPU[0][4], PathSYS, 10, 6, nil)
	// To the NICs: PIX (same switch), PXB (via PLX0), PHB, SYS.
	want(t, "GPU0→NIC0", r.GPUToNIC[0][0], PathPIX, 24, 3, nil)
	want(t, "GPU2→NIC0", r.GPUToNIC[2][0], PathPXB, 24, 5, nil)
	want(t, "GPU6→NIC1", r.GPUToNIC[6][1], PathPHB, 24, 5, nil)
	// GPU0 SW0 PLX0 CPU0 CPU1 SW2 NICa NIC1: 7 hops at 10 GB/s. No PXN:
	// the candidate proxy GPU4 is not NVLink-connected to GPU0.
	want(t, "GPU0→NIC1", r.GPUToNIC[0][1], PathSYS, 10, 7, nil)
	if r.GPUToNIC[0][1].Via != -1 {
		t.Errorf("GPU0→NIC1 via GPU%d, want no PXN proxy", r.GPUToNIC[0][1].Via)
	}
	// 2.27 default P2P level is PXB (Intel): PIX/PXB pairs yes, PHB/SYS no.
	for _, c := range []struct {
		a, b int
		ok   bool
	}{{0, 1, true}, {0, 2, true}, {4, 6, false}, {0, 4, false}} {
		if got := r.P2P[c.a][c.b].OK; got != c.ok {
			t.Errorf("P2P[%d][%d] = %v, want %v", c.a, c.b, got, c.ok)
		}
	}
	// GDR level PXB: PIX and PXB NICs yes, PHB and SYS no (SM 89 ≥ 80: reads too).
	for _, c := range []struct {
		g, n int
		ok   bool
	}{{0, 0, true}, {2, 0, true}, {6, 1, false}, {0, 1, false}} {
		if got := r.GDR[c.g][c.n]; got != (GDR{c.ok, c.ok}) {
			t.Errorf("GDR[%d][%d] = %+v, want read=write=%v", c.g, c.n, got, c.ok)
		}
	}
	// Each GPU's best NIC: highest bandwidth, then best type. GPU0–3 reach
	// NIC0 at 24 (NIC1 at 10); GPU4–7 reach NIC1 at 24.
	for g, n := range []int{0, 0, 0, 0, 1, 1, 1, 1} {
		if len(r.GPUNICs[g]) != 1 || r.GPUNICs[g][0] != n {
			t.Errorf("GPUNICs[%d] = %v, want [%d]", g, r.GPUNICs[g], n)
		}
	}
	// NIC0's local GPUs are GPU0 and GPU1 (PIX); GPU0 picks NIC0 on channel 0.
	if r.NICLocalGPU[0] != 0 || r.NICLocalGPU[1] != 4 {
		t.Errorf("NICLocalGPU = %v, want [0 4]", r.NICLocalGPU)
	}
}

// ruleServer is drawn so that the three BFS update rules disagree on the
// path from GPU1 to GPU0:
//
//	  ┌──40── NVS ──40──┐
//	GPU0 ─────20──────── GPU1      (direct NVLink, each way)
//	  └──48── SW0 ──48──┘
//	           │48
//	         CPU0 (AMD)
//
// Candidates: direct NVLink (1 hop, NVL, 20), through the NVSwitch (2 hops,
// NVL, 40), through the PCIe switch (2 hops, PIX, 48).
func ruleServer() *System {
	s := NewSystem("rules")
	c := s.AddCPU(cpuOn(amdRome, 0))
	sw := s.AddPCI(c, "0000:10:00.0", 48)
	g0 := gpuAt(s, sw, 0, 80, 48)
	g1 := gpuAt(s, sw, 1, 80, 48)
	nvs := s.AddNVSwitch()
	s.AddLink(g0, nvs, LinkNVL, 40)
	s.AddLink(g1, nvs, LinkNVL, 40)
	s.AddLinkOneWay(g0, g1, LinkNVL, 20)
	s.AddLinkOneWay(g1, g0, LinkNVL, 20)
	return s
}

func TestUpdateRulesDisagree(t *testing.T) {
	for _, c := range []struct {
		version string
		typ     PathType
		bw      float64
		hops    int
		route   []string
		read    bool
	}{
		// ≤2.7 (the seed): keep whatever has the larger bottleneck. The BFS
		// from GPU0 first reaches GPU1 directly (20), then at level 2 through
		// NVS (40 > 20: replace), then through SW0 (48 > 40: replace).
		{"2.7", PathPIX, 48, 2, []string{"PCI/0000:10:00.0", "GPU0"}, false},
		// 2.8–2.29: a path is replaced only by one that is not longer; the
		// 1-hop direct link is never replaced by a 2-hop one.
		{"2.27", PathNVL, 20, 1, []string{"GPU0"}, true},
		{"2.19", PathNVL, 20, 1, []string{"GPU0"}, true},
		// 2.30: best type first (NVL beats PIX), then bandwidth (40 > 20).
		{"2.30", PathNVL, 40, 2, []string{"NVS", "GPU0"}, true},
	} {
		t.Run(c.version, func(t *testing.T) {
			r := mustCompute(t, ruleServer(), Options{Version: c.version})
			want(t, "GPU1→GPU0", r.GPUToGPU[1][0], c.typ, c.bw, c.hops, c.route)
			// P2P read needs an NVL path between two SM 80 GPUs.
			if got := r.P2P[1][0]; !got.OK || got.Read != c.read {
				t.Errorf("P2P[1][0] = %+v, want ok, read=%v", got, c.read)
			}
		})
	}
}

// nvbServer: three GPUs on one PCIe switch, NVLinks only GPU0–GPU1 and
// GPU1–GPU2 (40 GB/s each way), no GPU0–GPU2 NVLink.
//
//	GPU0 ═40═ GPU1 ═40═ GPU2
//	  └──24──── SW0 ────24─┘   (GPU1 also on SW0), SW0 ─24─ CPU0
func nvbServer() *System {
	s := NewSystem("nvb")
	c := s.AddCPU(cpuOn(amdRome, 0))
	sw := s.AddPCI(c, "0000:10:00.0", 24)
	g := []int{gpuAt(s, sw, 0, 90, 24), gpuAt(s, sw, 1, 90, 24), gpuAt(s, sw, 2, 90, 24)}
	s.AddLink(g[0], g[1], LinkNVL, 40)
	s.AddLink(g[1], g[2], LinkNVL, 40)
	return s
}

func TestNVB(t *testing.T) {
	// BFS from GPU2: level 1 reaches GPU1 (NVL, 40) and SW0 (PIX, 24). At
	// level 2 GPU1 may relay over NVLink (its path has 1 hop): GPU0 gets
	// NVL+NVL through a GPU = NVB at 40; SW0's offer (PIX, 24) is not
	// better. So GPU0→GPU2 is NVB/40/2 via GPU1.
	r := mustCompute(t, nvbServer(), Options{})
	want(t, "GPU0→GPU2", r.GPUToGPU[0][2], PathNVB, 40, 2, []string{"GPU1", "GPU2"})
	if via := r.GPUToGPU[0][2].Via; via != 1 {
		t.Errorf("NVB via = %d, want GPU1", via)
	}
	// NVB ≤ PXB (AMD, 3 GPUs): P2P allowed.
	if !r.P2P[0][2].OK {
		t.Error("P2P over NVB refused")
	}
	// NCCL_NVB_DISABLE=1: GPUs never relay, the PCIe switch wins.
	r = mustCompute(t, nvbServer(), Options{NVBDisable: true})
	want(t, "GPU0→GPU2 (NVB disabled)", r.GPUToGPU[0][2], PathPIX, 24, 2, []string{"PCI/0000:10:00.0", "GPU2"})
	// ≤2.7 has no GPU relaying at all.
	r = mustCompute(t, nvbServer(), Options{Version: "2.7"})
	want(t, "GPU0→GPU2 (2.7)", r.GPUToGPU[0][2], PathPIX, 24, 2, nil)
}

// p2pServer: a PHB pair and a SYS pair.
//
//	CPU0 ─┬─ SW0 ─ GPU0
//	      └─ SW1 ─ GPU1        GPU0–GPU1 PHB
//	CPU1 ─── SW2 ─ GPU2        GPU0–GPU2 SYS
//
// With gpus == 2 only GPU0 and GPU2 exist (one SYS pair).
func p2pServer(cpu CPUInfo, gpus int) *System {
	s := NewSystem("p2p")
	c0 := s.AddCPU(cpuOn(cpu, 0))
	c1 := s.AddCPU(cpuOn(cpu, 1))
	gpuAt(s, s.AddPCI(c0, "0000:10:00.0", 24), 0, 80, 24)
	if gpus == 3 {
		gpuAt(s, s.AddPCI(c0, "0000:20:00.0", 24), 1, 80, 24)
	}
	gpuAt(s, s.AddPCI(c1, "0000:30:00.0", 24), 2, 80, 24)
	return s
}

func TestP2PDefaultLevels(t *testing.T) {
	for _, c := range []struct {
		name       string
		cpu        CPUInfo
		gpus       int
		opt        Options
		phb, sys   bool // P2P for the PHB pair and for the SYS pair
		sysOnlyRun bool
	}{
		// 2.23+: PXB everywhere, SYS for AMD with at most 2 GPUs.
		{"2.27 Intel", intelSKL, 3, Options{}, false, false, false},
		{"2.27 AMD 3 GPUs", amdRome, 3, Options{}, false, false, false},
		{"2.27 AMD 2 GPUs", amdRome, 2, Options{}, false, true, true},
		{"2.27 ARM", armGrace, 3, Options{}, false, false, false},
		// 2.8–2.22: SYS, lowered to PXB for ARM, Intel and Zhaoxin.
		{"2.19 AMD", amdRome, 3, Options{Version: "2.19"}, true, true, false},
		{"2.19 Intel", intelSKL, 3, Options{Version: "2.19"}, false, false, false},
		{"2.19 Zhaoxin", zhaoxinKX, 3, Options{Version: "2.19"}, false, false, false},
		{"2.19 ARM", armGrace, 3, Options{Version: "2.19"}, false, false, false},
		// ≤2.7 (the seed): SYS; ARM and Broadwell PXB; later Intel PHB.
		{"2.7 Intel SKL", intelSKL, 3, Options{Version: "2.7"}, true, false, false},
		{"2.7 Intel BDW", intelBDW, 3, Options{Version: "2.7"}, false, false, false},
		{"2.7 AMD", amdRome, 3, Options{Version: "2.7"}, true, true, false},
		// User overrides.
		{"NCCL_P2P_LEVEL=SYS", intelSKL, 3, Options{P2PLevel: "SYS"}, true, true, false},
		{"NCCL_P2P_LEVEL=PHB", intelSKL, 3, Options{P2PLevel: "PHB"}, true, false, false},
		{"NCCL_P2P_LEVEL=3 (legacy PHB)", intelSKL, 3, Options{P2PLevel: "3"}, true, false, false},
		{"NCCL_P2P_DISABLE beats LEVEL", amdRome, 2, Options{P2PDisable: true, P2PLevel: "SYS"}, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mustCompute(t, p2pServer(c.cpu, c.gpus), c.opt)
			last := len(r.GPUs) - 1
			if !c.sysOnlyRun {
				if got := r.P2P[0][1].OK; got != c.phb {
					t.Errorf("PHB pair P2P = %v, want %v", got, c.phb)
				}
			}
			if got := r.P2P[0][last].OK; got != c.sys {
				t.Errorf("SYS pair P2P = %v, want %v", got, c.sys)
			}
		})
	}
}

// detourServer: two A100s on one switch and on the NVSwitch.
//
//	CPU0 ─24─ SW0 ─24─ GPU0, GPU1;  GPU0 ═240═ NVS ═240═ GPU1
func detourServer() *System {
	s := NewSystem("detour")
	c := s.AddCPU(cpuOn(amdRome, 0))
	sw := s.AddPCI(c, "0000:10:00.0", 24)
	g0, g1 := gpuAt(s, sw, 0, 80, 24), gpuAt(s, sw, 1, 80, 24)
	nvs := s.AddNVSwitch()
	s.AddLink(g0, nvs, LinkNVL, 240)
	s.AddLink(g1, nvs, LinkNVL, 240)
	return s
}

func TestP2PRefusedDetoursThroughCPU(t *testing.T) {
	r := mustCompute(t, detourServer(), Options{})
	want(t, "GPU0→GPU1", r.GPUToGPU[0][1], PathNVL, 240, 2, []string{"NVS", "GPU1"})
	if r.P2P[0][1] != (P2P{OK: true, Read: true}) {
		t.Errorf("P2P = %+v, want ok with read (A100 NVLink)", r.P2P[0][1])
	}
	// P2P disabled: GPU0→CPU0 (SW0, CPU0: PHB, 24) then CPU0→GPU1 (SW0,
	// GPU1: PHB, 24) — 4 hops, PHB, 24 instead of the NVLink.
	r = mustCompute(t, detourServer(), Options{P2PDisable: true})
	want(t, "GPU0→GPU1 (P2P disabled)", r.GPUToGPU[0][1], PathPHB, 24, 4,
		[]string{"PCI/0000:10:00.0", "CPU0", "PCI/0000:10:00.0", "GPU1"})
	if r.P2P[0][1] != (P2P{}) {
		t.Errorf("P2P = %+v, want refused", r.P2P[0][1])
	}
	// NCCL_P2P_LEVEL=LOC is the same as disabling.
	r = mustCompute(t, detourServer(), Options{P2PLevel: "LOC"})
	want(t, "GPU0→GPU1 (level LOC)", r.GPUToGPU[0][1], PathPHB, 24, 4, nil)
}

// gdrServer is pcie-2s (see TestPCIePathTypes).
func TestGDRLevelAndDetour(t *testing.T) {
	s, _ := Template("pcie-2s")
	// NCCL_NET_GDR_LEVEL=PIX refuses GPU2↔NIC0 (PXB): both directions go
	// through GPU2's CPU. GPU2→CPU0 = SW1, PLX0, CPU0 (3 hops, PHB, 24);
	// CPU0→NIC0 = PLX0, SW0, NICa, NIC0 (4 hops, PHB, min(24, 25) = 24).
	r := mustCompute(t, s, Options{GDRLevel: "PIX"})
	want(t, "GPU2→NIC0", r.GPUToNIC[2][0], PathPHB, 24, 7, []string{
		"PCI/0000:21:00.0", "PCI/0000:10:00.0", "CPU0", "PCI/0000:10:00.0", "PCI/0000:11:00.0", "PCI/0000:15:00.0", "NIC0"})
	want(t, "NIC0→GPU2", r.NICToGPU[0][2], PathPHB, 24, 7, []string{
		"PCI/0000:15:00.0", "PCI/0000:11:00.0", "PCI/0000:10:00.0", "CPU0", "PCI/0000:10:00.0", "PCI/0000:21:00.0", "GPU2"})
	if r.GDR[2][0] != (GDR{}) {
		t.Errorf("GDR[2][0] = %+v, want refused", r.GDR[2][0])
	}
	// GPU0↔NIC0 is PIX: still allowed, path unchanged.
	want(t, "GPU0→NIC0", r.GPUToNIC[0][0], PathPIX, 24, 3, nil)
	if r.GDR[0][0] != (GDR{true, true}) {
		t.Errorf("GDR[0][0] = %+v, want allowed", r.GDR[0][0])
	}
	// NCCL_NET_GDR_LEVEL=SYS allows even the PHB pair GPU6↔NIC1.
	r = mustCompute(t, s, Options{GDRLevel: "SYS"})
	if r.GDR[6][1] != (GDR{true, true}) {
		t.Errorf("GDR[6][1] with level SYS = %+v, want allowed", r.GDR[6][1])
	}
}

// gdrReadServer: CPU0 ─24─ SW0 ─24─ GPU0, GPU1 (SM sm), NICa ─ NIC0 (200G),
// optionally an NVLink GPU0═40═GPU1, faster than the 24 GB/s PCIe route so
// that every update rule picks it.
func gdrReadServer(sm int, nvlink, nicGDR bool) *System {
	s := NewSystem("gdrread")
	c := s.AddCPU(cpuOn(amdRome, 0))
	sw := s.AddPCI(c, "0000:10:00.0", 24)
	g0, g1 := gpuAt(s, sw, 0, sm, 24), gpuAt(s, sw, 1, sm, 24)
	nicAt(s, sw, 0, 24, 200000, nicGDR)
	if nvlink {
		s.AddLink(g0, g1, LinkNVL, 40)
	}
	return s
}

func TestGDRRead(t *testing.T) {
	for _, c := range []struct {
		name   string
		sm     int
		nvlink bool
		opt    Options
		read   bool
	}{
		// Auto: SM ≥ 80 reads over GDR; below that only with an NVLink peer
		// (GPU0→GPU1 is then NVL), to keep PCIe free for peer traffic.
		{"SM80", 80, false, Options{}, true},
		{"SM70 no NVLink", 70, false, Options{}, false},
		{"SM70 NVLink peer", 70, true, Options{}, true},
		{"NCCL_NET_GDR_READ=0", 80, false, Options{GDRRead: Off}, false},
		{"NCCL_NET_GDR_READ=1", 70, false, Options{GDRRead: On}, true},
		// ≤2.7 (the seed) applies the NVLink condition to every SM.
		{"2.7 SM80 no NVLink", 80, false, Options{Version: "2.7"}, false},
		{"2.7 SM80 NVLink peer", 80, true, Options{Version: "2.7"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mustCompute(t, gdrReadServer(c.sm, c.nvlink, true), c.opt)
			// GPU0→NIC0 is PIX: writes (receives) are always allowed here.
			if got := r.GDR[0][0]; got != (GDR{Read: c.read, Write: true}) {
				t.Errorf("GDR[0][0] = %+v, want read=%v write=true", got, c.read)
			}
		})
	}
}

func TestGDRUnsupportedNICDetours(t *testing.T) {
	// The NIC has no GDR: GPU0↔NIC0 (PIX, 3 hops) goes through CPU0:
	// GPU0→CPU0 = SW0, CPU0 (PHB, 24); CPU0→NIC0 = SW0, NICa, NIC0 (PHB,
	// min(24, 25) = 24).
	r := mustCompute(t, gdrReadServer(80, false, false), Options{})
	want(t, "GPU0→NIC0", r.GPUToNIC[0][0], PathPHB, 24, 5,
		[]string{"PCI/0000:10:00.0", "CPU0", "PCI/0000:10:00.0", "PCI/0000:80:00.0", "NIC0"})
	want(t, "NIC0→GPU0", r.NICToGPU[0][0], PathPHB, 24, 5,
		[]string{"PCI/0000:80:00.0", "PCI/0000:10:00.0", "CPU0", "PCI/0000:10:00.0", "GPU0"})
	if r.GDR[0][0] != (GDR{}) {
		t.Errorf("GDR = %+v, want refused", r.GDR[0][0])
	}
}

// pxnServer: GPU0 and NIC0 share SW0 on CPU0; GPU1 sits on CPU1; both GPUs
// on the NVSwitch.
//
//	CPU0 ─24─ SW0 ─24─ GPU0 ═240═ NVS ═240═ GPU1 ─24─ SW1 ─24─ CPU1
//	           └─24─ NICa ─25─ NIC0                CPU0 ─16─ CPU1 (AMD)
//
// slow makes GPU1 a second GPU on SW0 with a 6 GB/s link instead.
func pxnServer(slow bool) *System {
	s := NewSystem("pxn")
	c0 := s.AddCPU(cpuOn(amdRome, 0))
	c1 := s.AddCPU(cpuOn(amdRome, 1))
	sw0 := s.AddPCI(c0, "0000:10:00.0", 24)
	g0 := gpuAt(s, sw0, 0, 90, 24)
	var g1 int
	if slow {
		g1 = gpuAt(s, sw0, 1, 90, 6)
	} else {
		g1 = gpuAt(s, s.AddPCI(c1, "0000:30:00.0", 24), 1, 90, 24)
	}
	nicAt(s, sw0, 0, 24, 200000, true)
	nvs := s.AddNVSwitch()
	s.AddLink(g0, nvs, LinkNVL, 240)
	s.AddLink(g1, nvs, LinkNVL, 240)
	return s
}

func TestPXN(t *testing.T) {
	// Without PXN, GPU1→NIC0 = SW1, CPU1, CPU0, SW0, NICa, NIC0: SYS at
	// min(24, 24, 16, 24, 24, 25) = 16.
	r := mustCompute(t, pxnServer(false), Options{PXNDisable: true})
	want(t, "GPU1→NIC0 (PXN off)", r.GPUToNIC[1][0], PathSYS, 16, 6, nil)
	if r.GDR[1][0] != (GDR{}) {
		t.Errorf("GDR[1][0] without PXN = %+v, want refused (SYS)", r.GDR[1][0])
	}
	// With PXN: NIC0's local GPU is GPU0 (PIX, 24). GPU0 reaches NIC0 by
	// PIX ≤ PXB, GPU1 by NVL through NVS, and GPU1's own path is SYS (worse
	// than PXN). So GPU1 sends through GPU0: NVS, GPU0 (240) + SW0, NICa,
	// NIC0 (24) = PXN/24/5. GDR uses GPU0's distance (PIX): allowed.
	r = mustCompute(t, pxnServer(false), Options{})
	want(t, "GPU1→NIC0", r.GPUToNIC[1][0], PathPXN, 24, 5, []string{"NVS", "GPU0", "PCI/0000:10:00.0", "PCI/0000:80:00.0", "NIC0"})
	if r.GPUToNIC[1][0].Via != 0 {
		t.Errorf("PXN proxy = GPU%d, want GPU0", r.GPUToNIC[1][0].Via)
	}
	if r.GDR[1][0] != (GDR{true, true}) {
		t.Errorf("GDR[1][0] with PXN = %+v, want allowed through the proxy", r.GDR[1][0])
	}
	// Only sends are relayed: NIC0→GPU1 keeps its SYS path.
	want(t, "NIC0→GPU1", r.NICToGPU[0][1], PathSYS, 16, 6, nil)
	// GPU0 is NIC0's local GPU: never its own proxy.
	want(t, "GPU0→NIC0", r.GPUToNIC[0][0], PathPIX, 24, 3, nil)
	if got := r.Proxies(); len(got) != 1 || got[0] != (stream.PXNProxy{GPU: 1, NIC: 0, Proxy: 0}) {
		t.Errorf("Proxies = %+v", got)
	}
	// PXN appeared in 2.12: 2.11 keeps the SYS path.
	r = mustCompute(t, pxnServer(false), Options{Version: "2.11"})
	want(t, "GPU1→NIC0 (2.11)", r.GPUToNIC[1][0], PathSYS, 16, 6, nil)

	// Same switch, but GPU1's own link is 6 GB/s: GPU1→NIC0 is PIX at 6,
	// not worse than PXN, yet GPU0 reaches the NIC faster (24 > 6), so
	// PXN still applies: min(240, 24) = 24.
	r = mustCompute(t, pxnServer(true), Options{PXNDisable: true})
	want(t, "slow GPU1→NIC0 (PXN off)", r.GPUToNIC[1][0], PathPIX, 6, 3, nil)
	r = mustCompute(t, pxnServer(true), Options{})
	want(t, "slow GPU1→NIC0", r.GPUToNIC[1][0], PathPXN, 24, 5, nil)
}

// graceServer: a Grace-Hopper style GPU with a C2C link to its CPU.
//
//	CPU0 (ARM) ══C2C 450══ GPU0 (SM 90)       GPU0 also on CPU0 by PCIe 48
//	    └─48─ SW0 ─48─ NICa ─50─ NIC0 (400G)
func graceServer() *System {
	s := NewSystem("grace")
	c := s.AddCPU(cpuOn(armGrace, 0))
	g := gpuAt(s, c, 0, 90, 48)
	s.AddC2C(g, c, 450)
	sw := s.AddPCI(c, "0000:10:00.0", 48)
	nicAt(s, sw, 0, 48, 400000, true)
	return s
}

func TestC2CAndP2C(t *testing.T) {
	// GPU0→NIC0: CPU0 (over C2C: the 450 link sorts first), SW0, NICa, NIC0:
	// PCI through the CPU makes PHB, bw min(450, 48, 48, 50) = 48. In 2.27
	// the GPU reaches its CPU by C2C and the NIC reaches it by PHB, so the
	// type is lowered to P2C, which GDR counts as C2C (NCCL_NET_GDR_C2C=1):
	// GDR allowed.
	r := mustCompute(t, graceServer(), Options{})
	want(t, "GPU0→NIC0", r.GPUToNIC[0][0], PathP2C, 48, 4, []string{"CPU0", "PCI/0000:10:00.0", "PCI/0000:80:00.0", "NIC0"})
	want(t, "NIC0→GPU0", r.NICToGPU[0][0], PathP2C, 48, 4, nil)
	if r.GDR[0][0] != (GDR{true, true}) {
		t.Errorf("GDR 2.27 = %+v, want allowed", r.GDR[0][0])
	}
	// 2.30 allows P2C through its default GDR level instead.
	r = mustCompute(t, graceServer(), Options{Version: "2.30"})
	if r.GPUToNIC[0][0].Type != PathP2C || r.GDR[0][0] != (GDR{true, true}) {
		t.Errorf("2.30: %v GDR %+v, want P2C with GDR", r.GPUToNIC[0][0], r.GDR[0][0])
	}
	// 2.26 has C2C links but no P2C: the path stays PHB and GDR is refused
	// (PHB > PXB; being PHB it is not rerouted).
	r = mustCompute(t, graceServer(), Options{Version: "2.26"})
	want(t, "GPU0→NIC0 (2.26)", r.GPUToNIC[0][0], PathPHB, 48, 4, nil)
	if r.GDR[0][0] != (GDR{}) {
		t.Errorf("GDR 2.26 = %+v, want refused", r.GDR[0][0])
	}
	// NCCL_NET_GDR_C2C=0 in 2.27: P2C > PXB refuses GDR, and since P2C is
	// better than PHB the path is rerouted through the CPU: GPU0→CPU0 (C2C,
	// 450, 1 hop) + CPU0→NIC0 (PHB, 48, 3 hops) = C2C+PHB = P2C, 48, 4 hops.
	r = mustCompute(t, graceServer(), Options{GDRC2C: Off})
	want(t, "GPU0→NIC0 (GDR_C2C=0)", r.GPUToNIC[0][0], PathP2C, 48, 4, nil)
	if r.GDR[0][0] != (GDR{}) {
		t.Errorf("GDR with GDR_C2C=0 = %+v, want refused", r.GDR[0][0])
	}
	// Before 2.26 NCCL knew no C2C link: the GPU reaches its CPU by PCIe.
	r = mustCompute(t, graceServer(), Options{Version: "2.25"})
	want(t, "GPU0→NIC0 (2.25)", r.GPUToNIC[0][0], PathPHB, 48, 4, nil)
}

// trimServer: four GPUs on one switch with a NIC; GPU0/1 in container 0,
// GPU2/3 in container 1.
func trimServer() *System {
	s := NewSystem("trim")
	c := s.AddCPU(cpuOn(amdRome, 0))
	sw := s.AddPCI(c, "0000:10:00.0", 24)
	for i := range 4 {
		s.AddGPU(sw, "", 24, GPUInfo{Dev: i, Rank: 10 + i, SM: 80, GDR: true, Container: i / 2})
	}
	nicAt(s, sw, 0, 24, 200000, true)
	return s
}

func TestTrim(t *testing.T) {
	// Across containers neither P2P nor SHM works, so those GPU pairs are
	// NET. Domains, scanning in order: GPU0 → 0, GPU1 → 0 (PIX to GPU0),
	// GPU2 → 2 (NET to GPU0 and GPU1), GPU3 → 2 (PIX to GPU2).
	for _, c := range []struct {
		name string
		opt  Options
		keep []int // System GPU indices kept
		nics int
	}{
		{"rank 12", Options{Rank: 12}, []int{2, 3}, 1},
		{"rank 10", Options{Rank: 10}, []int{0, 1}, 1},
		// No GPU has rank 0: NCCL keeps domain 0, GPU0's.
		{"unknown rank", Options{}, []int{0, 1}, 1},
		// The kept GPUs are the whole communicator: no network needed.
		{"rank 13 of 2", Options{Rank: 13, NRanks: 2}, []int{2, 3}, 0},
		{"rank 13 of 4", Options{Rank: 13, NRanks: 4}, []int{2, 3}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mustCompute(t, trimServer(), c.opt)
			if len(r.GPUs) != len(c.keep) {
				t.Fatalf("kept %d GPUs, want %v", len(r.GPUs), c.keep)
			}
			for i, g := range c.keep {
				if r.GPUs[i].Index != g {
					t.Errorf("GPU %d is System GPU %d, want %d", i, r.GPUs[i].Index, g)
				}
			}
			if len(r.TrimmedGPUs) != 4-len(c.keep) {
				t.Errorf("TrimmedGPUs = %v", r.TrimmedGPUs)
			}
			if len(r.NICs) != c.nics {
				t.Errorf("%d NICs, want %d", len(r.NICs), c.nics)
			}
			// Recomputed after trimming: the survivors see each other by PIX.
			want(t, "GPU0→GPU1", r.GPUToGPU[0][1], PathPIX, 24, 2, nil)
		})
	}
}

func TestNICChoice(t *testing.T) {
	// n GPUs and m NICs on one switch (every GPU→NIC path PIX at 24), GPU
	// devs 0..n-1 unless given.
	build := func(n, m int, devs []int) *System {
		s := NewSystem("nics")
		c := s.AddCPU(cpuOn(amdRome, 0))
		sw := s.AddPCI(c, "0000:10:00.0", 24)
		for i := range n {
			dev := i
			if devs != nil {
				dev = devs[i]
			}
			s.AddGPU(sw, "", 24, GPUInfo{Dev: dev, Rank: i, SM: 80, GDR: true})
		}
		for i := range m {
			nicAt(s, sw, i, 24, 200000, true)
		}
		return s
	}
	for _, c := range []struct {
		name       string
		gpus, nics int
		devs       []int
		want       [][]int
	}{
		// 4 NICs (a power of two) for 4 GPUs: dev mirrored on 2 bits
		// (0→0, 1→2, 2→1, 3→3); ceil(4/4) = 1 NIC each.
		{"4x4 mirrored", 4, 4, nil, [][]int{{0}, {2}, {1}, {3}}},
		// 1 GPU, 2 NICs: ceil(2/1) = 2 channels alternate NIC0, NIC1.
		{"1x2", 1, 2, nil, [][]int{{0, 1}}},
		// 2 GPUs share 1 NIC.
		{"2x1", 2, 1, nil, [][]int{{0}, {0}}},
		// 3 NICs (not a power of two), dev 5: (5 + c) % 3 = 2, 0, 1.
		{"1x3 dev 5", 1, 3, []int{5}, [][]int{{2, 0, 1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := mustCompute(t, build(c.gpus, c.nics, c.devs), Options{})
			for g, w := range c.want {
				if len(r.GPUNICs[g]) != len(w) {
					t.Fatalf("GPUNICs[%d] = %v, want %v", g, r.GPUNICs[g], w)
				}
				for i := range w {
					if r.GPUNICs[g][i] != w[i] {
						t.Errorf("GPUNICs[%d] = %v, want %v", g, r.GPUNICs[g], w)
						break
					}
				}
			}
		})
	}
}

func TestComputeErrors(t *testing.T) {
	// A GPU whose PCI parent was never attached to a CPU.
	s := NewSystem("bad")
	s.AddGPU(7, "0000:01:00.0", 24, GPUInfo{SM: 80})
	if _, err := Compute(s, Options{}); err == nil {
		t.Error("GPU without parent accepted")
	}
	// Duplicate ranks.
	s = NewSystem("dup")
	c := s.AddCPU(cpuOn(amdRome, 0))
	s.AddGPU(c, "", 24, GPUInfo{SM: 80, Rank: 1})
	s.AddGPU(c, "", 24, GPUInfo{SM: 80, Rank: 1})
	if _, err := Compute(s, Options{}); err == nil {
		t.Error("duplicate ranks accepted")
	}
	// Bad options.
	tpl, _ := Template("dgx-a100")
	for _, o := range []Options{{Version: "3.1"}, {Version: "banana"}, {P2PLevel: "pxb"}, {GDRLevel: "FAST"}} {
		if _, err := Compute(tpl, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

func TestComputeLeavesSystemAlone(t *testing.T) {
	s, _ := Template("dgx-h100")
	a := mustCompute(t, s, Options{})
	b := mustCompute(t, s, Options{})
	if fresh, _ := Template("dgx-h100"); !reflect.DeepEqual(s, fresh) {
		t.Error("Compute changed the System")
	}
	if a.MatrixText(true) != b.MatrixText(true) {
		t.Error("two Computes of one System differ")
	}
}
