package ncclpath

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The built-in servers. Each is NCCL's view of the machine: a CPU node per
// socket (real machines may expose more NUMA domains; two keeps the
// inter-socket behaviour without the noise), PCIe switches as NCCL sees
// them after flattening Broadcom two-level switches, and one NVSwitch node.
var templates = map[string]func() *System{
	// DGX A100: 2× AMD EPYC 7742 (Rome), four PCIe Gen4 switches each with
	// two A100s and two HDR 200 Gb/s NICs, 12 NVLinks per GPU to six
	// NVSwitches (240 GB/s).
	"dgx-a100": func() *System {
		return nvswitchServer(serverSpec{
			name: "dgx-a100", cpu: CPUInfo{Arch: ArchX86, Vendor: VendorAMD, FamilyID: 23, ModelID: 49},
			pcie: "16.0 GT/s PCIe", sm: 80, nvlinks: []int{2, 2, 2, 2, 2, 2}, nicMbps: 200000,
		})
	},
	// HGX A800: the export A100 keeps 8 of the 12 NVLinks (400 GB/s
	// bidirectional, 160 GB/s as NCCL counts them); typical HGX A800
	// servers carry two Intel Xeon Ice Lake CPUs, PCIe Gen4 switches with
	// two GPUs and two 200 Gb/s NICs each.
	"hgx-a800": func() *System {
		return nvswitchServer(serverSpec{
			name: "hgx-a800", cpu: CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 106},
			pcie: "16.0 GT/s PCIe", sm: 80, nvlinks: []int{2, 2, 1, 1, 1, 1}, nicMbps: 200000,
		})
	},
	// DGX H100: 2× Intel Xeon 8480C (Sapphire Rapids), four PCIe Gen5
	// switches each with two H100s and two ConnectX-7 400 Gb/s NICs, 18
	// NVLinks per GPU to four NVSwitches (5+5+4+4).
	"dgx-h100": func() *System {
		return nvswitchServer(serverSpec{
			name: "dgx-h100", cpu: CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 143},
			pcie: "32.0 GT/s PCIe", sm: 90, nvlinks: []int{5, 5, 4, 4}, nicMbps: 400000,
		})
	},
	// HGX H800: as dgx-h100, but the H800 keeps 8 of the 18 NVLinks
	// (400 GB/s bidirectional instead of 900).
	"hgx-h800": func() *System {
		return nvswitchServer(serverSpec{
			name: "hgx-h800", cpu: CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 143},
			pcie: "32.0 GT/s PCIe", sm: 90, nvlinks: []int{2, 2, 2, 2}, nicMbps: 400000,
		})
	},
	// DGX B200: 2× Intel Xeon 8570 (Emerald Rapids), PCIe Gen5 switches with
	// two B200s and two ConnectX-7 400 Gb/s NICs each, 18 NVLink-5 links per
	// GPU (721.8 GB/s with 2.27's 40.1 GB/s per link).
	"dgx-b200": func() *System {
		return nvswitchServer(serverSpec{
			name: "dgx-b200", cpu: CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 207},
			pcie: "32.0 GT/s PCIe", sm: 100, nvlinks: []int{9, 9}, nicMbps: 400000,
		})
	},
	"pcie-2s": pcie2s,
}

// gpuTemplates maps GPU model names to templates.
var gpuTemplates = map[string]string{
	"A100": "dgx-a100",
	"A800": "hgx-a800",
	"H100": "dgx-h100",
	"H200": "dgx-h100", // Hopper with the H100's 18 NVLinks
	"H20":  "dgx-h100", // the H20 keeps all 18 NVLinks (900 GB/s), unlike the H800
	"H800": "hgx-h800",
	"B200": "dgx-b200",
	"L40S": "pcie-2s",
	"L40":  "pcie-2s",
	"L20":  "pcie-2s",
}

// TemplateNames lists the built-in server templates, sorted.
func TemplateNames() []string {
	return slices.Sorted(maps.Keys(templates))
}

// Template returns a fresh copy of a built-in server.
func Template(name string) (*System, error) {
	f, ok := templates[name]
	if !ok {
		return nil, fmt.Errorf("unknown server template %q (known: %s)", name, strings.Join(TemplateNames(), ", "))
	}
	return f(), nil
}

// TemplateForGPU returns the template for a GPU type such as "A100",
// "H100-SXM5-80GB" or "NVIDIA H800": the leading model name decides,
// case-insensitively.
func TemplateForGPU(gpuType string) (string, error) {
	s := strings.ToUpper(strings.TrimSpace(gpuType))
	s = strings.TrimPrefix(s, "NVIDIA ")
	end := 0
	for end < len(s) && (s[end] >= 'A' && s[end] <= 'Z' || s[end] >= '0' && s[end] <= '9') {
		end++
	}
	if name, ok := gpuTemplates[s[:end]]; ok {
		return name, nil
	}
	known := slices.Sorted(maps.Keys(gpuTemplates))
	return "", fmt.Errorf("no server template for GPU type %q (known: %s)", gpuType, strings.Join(known, ", "))
}

type serverSpec struct {
	name    string
	cpu     CPUInfo
	pcie    string // link speed of every PCIe link (x16)
	sm      int
	nvlinks []int // NVLinks from each GPU to each NVSwitch chip
	nicMbps float64
}

// nvswitchServer builds the common 8-GPU NVSwitch layout: two sockets, two
// PCIe switches per socket, each switch with two GPUs and two single-port
// NICs, GPUs and NICs numbered in switch order.
func nvswitchServer(sp serverSpec) *System {
	s := NewSystem(sp.name)
	bw := PCIeBW(sp.pcie, 16)
	var gpus []int
	for sock := range 2 {
		cpu := sp.cpu
		cpu.NUMA = sock
		c := s.AddCPU(cpu)
		for sw := range 2 {
			k := sock*2 + sw // switch number 0..3
			p := s.AddPCI(c, fmt.Sprintf("0000:%02x:00.0", switchBus[k]), bw)
			for j := range 2 {
				g := 2*k + j
				gpus = append(gpus, s.AddGPU(p, fmt.Sprintf("0000:%02x:00.0", gpuBus[g]), bw,
					GPUInfo{Dev: g, Rank: g, SM: sp.sm, GDR: true}))
			}
			for j := range 2 {
				n := 2*k + j
				nic := s.AddNIC(p, fmt.Sprintf("0000:%02x:00.0", nicBus[n]), bw)
				s.AddNet(nic, NetInfo{Name: fmt.Sprintf("mlx5_%d", n), Dev: n, SpeedMbps: sp.nicMbps, Port: 1, GDR: true})
			}
		}
	}
	total := 0
	for _, n := range sp.nvlinks {
		total += n
	}
	nvs := s.AddNVSwitch()
	for _, g := range gpus {
		// NCCL sums the links to every NVSwitch chip into one GPU–NVS link.
		s.AddNVLink(g, nvs, total)
	}
	return s
}

// Illustrative bus ids, in the style of a DGX A100 dump.
var (
	switchBus = [4]int{0x03, 0x43, 0x83, 0xb3}
	gpuBus    = [8]int{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}
	nicBus    = [8]int{0x0c, 0x12, 0x4b, 0x54, 0x8d, 0x94, 0xba, 0xcc}
)

// pcie2s is a PCIe-only two-socket server with eight L40S-class GPUs (SM
// 89, Gen4 x16) and two 200 Gb/s NICs on 2× Intel Xeon (Ice Lake, 10 GB/s
// UPI as NCCL counts it). The sockets are deliberately built differently so
// that every PCIe path type occurs:
//
//	CPU0 ── PLX0 ─┬─ SW0: GPU0 GPU1 NIC0     GPU0–GPU1 PIX, GPU0–GPU2 PXB
//	              └─ SW1: GPU2 GPU3
//	CPU1 ─┬─ SW2: GPU4 GPU5 NIC1             GPU4–GPU6 PHB (two root ports)
//	      └─ SW3: GPU6 GPU7                  GPU0–GPU4 SYS
func pcie2s() *System {
	s := NewSystem("pcie-2s")
	bw := PCIeBW("16.0 GT/s PCIe", 16)
	cpu := CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 106}
	cpu.NUMA = 0
	c0 := s.AddCPU(cpu)
	cpu.NUMA = 1
	c1 := s.AddCPU(cpu)
	plx0 := s.AddPCI(c0, "0000:10:00.0", bw)
	sw := [4]int{
		s.AddPCI(plx0, "0000:11:00.0", bw),
		s.AddPCI(plx0, "0000:21:00.0", bw),
		s.AddPCI(c1, "0000:81:00.0", bw),
		s.AddPCI(c1, "0000:a1:00.0", bw),
	}
	for g := range 8 {
		s.AddGPU(sw[g/2], fmt.Sprintf("0000:%02x:00.0", [4]int{0x12, 0x22, 0x82, 0xa2}[g/2]+g%2), bw,
			GPUInfo{Dev: g, Rank: g, SM: 89, GDR: true})
	}
	for n, p := range [2]int{sw[0], sw[2]} {
		nic := s.AddNIC(p, fmt.Sprintf("0000:%02x:00.0", [2]int{0x15, 0x85}[n]), bw)
		s.AddNet(nic, NetInfo{Name: fmt.Sprintf("mlx5_%d", n), Dev: n, SpeedMbps: 200000, Port: 1, GDR: true})
	}
	return s
}
