package topo

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// GPUSpec is what fabricsim assumes of a GPU type's scale-up side. Each
// GPU reaches its server's NVSwitches over NVLinks links; the usable rate
// of a link is NCCL's per-link figure (topo.h, the bandwidth NCCL's graph
// search and tuning model spend), which published nccl-tests plateaus
// bear out: 8xA100 AllReduce measures about 230 GB/s of bus bandwidth
// against 12 x 20 = 240 GB/s (the raw NVLink 3 rate is 25 GB/s a link,
// 300 GB/s a GPU). Sources, per type:
//
//   - A100 SXM: 12 NVLink 3 links (600 GB/s bidirectional, NVIDIA A100
//     datasheet), NCCL SM80_NVLINK_BW 20 GB/s a link: 240 GB/s.
//   - A800 SXM: the export A100 with 8 of the 12 links (400 GB/s
//     bidirectional, NVIDIA A800 datasheet): 160 GB/s.
//   - H100 SXM: 18 NVLink 4 links (900 GB/s bidirectional, H100
//     datasheet), NCCL SM90_NVLINK_BW 20.6 GB/s (NCCL 2.20+): 370.8 GB/s.
//   - H800 SXM: the export H100 with 8 links (400 GB/s bidirectional):
//     164.8 GB/s.
//   - H20: Hopper with all 18 links (900 GB/s, H20 datasheet): 370.8 GB/s.
//   - B200: 18 NVLink 5 links (1.8 TB/s bidirectional, B200 datasheet),
//     NCCL SM100_NVLINK_BW 40.1 GB/s (NCCL 2.27): 721.8 GB/s.
//
// PCIeGBps is the GPU's PCIe link as NCCL counts it (Gen4 x16 24 GB/s,
// Gen5 x16 48 GB/s).
//
// PCIeCarriesGBps is what that link carries each way when it binds below a
// NIC rate topogen offers (0: it does not, and NIC links are not capped).
// Gen4 x16 (A100, A800): 16 GT/s x 16 lanes x 128/130 = 31.5 GB/s, of
// which 256-byte TLPs with a 3-dword header and no ECRC carry 89.8%
// (Intel AN 708, "Throughput for Posted Writes"): 28.3 GB/s, 226.4 Gb/s.
// That is above a 200G NIC (25 GB/s; ConnectX-6 HDR reaches its line rate
// on Gen4 x16), so every calibrated A100 sweep (200G and below, one NIC
// a GPU) is unaffected, and below 400G, which an A100 cannot feed. Where
// a GPU has two NIC ports (HPN dual-plane, DCN dual-ToR, HPN single-plane:
// 2 x 200G) the link is split, 113.2 Gb/s a port, and A100 runs there
// move (2 x 8 AllReduce 256 MiB: 2458 us, 2141 uncapped). Gen5 x16 by the
// same count carries 56.6 GB/s: above 400G, below 800G; Hopper and
// Blackwell are not capped yet (800G on them is open).
type GPUSpec struct {
	CC              int     // compute capability x10: 80 Ampere, 90 Hopper, 100 Blackwell
	NVLinks         int     // NVLink links per GPU
	LinkGBps        float64 // usable bandwidth of one link, GB/s per direction
	PCIeGBps        float64
	PCIeCarriesGBps float64
}

// NVLinkBps is the GPU's usable NVLink bandwidth per direction in bit/s:
// topogen's default GPU to NVSwitch link rate.
func (s GPUSpec) NVLinkBps() float64 { return float64(s.NVLinks) * s.LinkGBps * 8e9 }

// NICLinkBps is the rate of each of a GPU's n NIC links at a NIC rate of
// nicBps: the NIC's, or the GPU's PCIe link shared by the n when that
// carries less (every byte to or from the network crosses it).
func (s GPUSpec) NICLinkBps(nicBps float64, n int) float64 {
	if s.PCIeCarriesGBps == 0 {
		return nicBps
	}
	return min(nicBps, s.PCIeCarriesGBps*8e9/float64(n))
}

// pcieGen4x16Carries is GPUSpec.PCIeCarriesGBps of a Gen4 x16 link:
// 16 GT/s x 16 x 128/130 / 8 bits x 0.898 = 28.29, to 0.1 GB/s.
const pcieGen4x16Carries = 28.3

// GPUSpecs lists the GPU types topogen knows.
var GPUSpecs = map[string]GPUSpec{
	"A100": {CC: 80, NVLinks: 12, LinkGBps: 20, PCIeGBps: 24, PCIeCarriesGBps: pcieGen4x16Carries},
	"A800": {CC: 80, NVLinks: 8, LinkGBps: 20, PCIeGBps: 24, PCIeCarriesGBps: pcieGen4x16Carries},
	"H100": {CC: 90, NVLinks: 18, LinkGBps: 20.6, PCIeGBps: 48},
	"H800": {CC: 90, NVLinks: 8, LinkGBps: 20.6, PCIeGBps: 48},
	"H20":  {CC: 90, NVLinks: 18, LinkGBps: 20.6, PCIeGBps: 48},
	"B200": {CC: 100, NVLinks: 18, LinkGBps: 40.1, PCIeGBps: 48},
}

// GPUTypeNames lists the known GPU types, sorted.
func GPUTypeNames() []string { return slices.Sorted(maps.Keys(GPUSpecs)) }

// A NIC's network, as the topology's params say it (`nic_network`): it
// chooses the calibrated transport preset (collective.PresetFor), because
// NCCL's per-step network costs differ by transport: InfiniBand's verbs
// with adaptive routing's extra completion message, RoCE's verbs without
// it (NCCL enables adaptive routing only on an InfiniBand link layer,
// net_ib.cc), AWS EFA's libfabric plugin (aws-ofi-nccl).
const (
	NetIB   = "ib"
	NetRoCE = "roce"
	NetEFA  = "efa"
)

// NICNetworks lists the networks a topology may name.
var NICNetworks = []string{NetIB, NetRoCE, NetEFA}

// NICNetwork is the network the topology's params name ("" when they name
// none), or an error naming the param.
func NICNetwork(t *Topology) (string, error) {
	v, ok := t.Params[ParamNICNetwork]
	if !ok {
		return "", nil
	}
	if err := CheckNICNetwork(v); err != nil {
		return "", fmt.Errorf("params %s: %w", ParamNICNetwork, err)
	}
	return v, nil
}

// CheckNICNetwork refuses a network not in NICNetworks.
func CheckNICNetwork(v string) error {
	if slices.Contains(NICNetworks, v) {
		return nil
	}
	return fmt.Errorf("%q must be one of %s", v, strings.Join(NICNetworks, ", "))
}

// ParamNICNetwork is the topology param that names the NICs' network.
const ParamNICNetwork = "nic_network"

// ParamNICLinkBW is the topology param giving each GPU's NIC link rate
// where the GPU's PCIe link caps it below nic_bw (GPUSpec.NICLinkBps);
// absent where it does not.
const ParamNICLinkBW = "nic_link_bw"

// ParamSimAIEnv is the topology param holding SimAI's variables (AS_*)
// that were set where topogen ran (cli.SimAIEnv); absent when none was.
const ParamSimAIEnv = "simai_env"
