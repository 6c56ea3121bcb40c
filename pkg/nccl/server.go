package nccl

import (
	"fmt"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/ncclpath"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// ServerModel is what the tuning model needs to know about one server, as
// NCCL sees it after its path computation: bandwidths in GB/s (NCCL's
// 1 GB = 1e9 B), worst path types inside the server and to the NICs.
type ServerModel struct {
	Name       string
	CC         int // compute capability x10: 80 Ampere, 90 Hopper, 100 Blackwell
	GPUs       int
	NICs       int     // NIC ports usable by NCCL on one server
	NICGBps    float64 // per NIC
	NVLinkGBps float64 // NVLink bandwidth of one GPU (0 when the server has none)
	NVSwitch   bool
	IntraType  ncclpath.PathType // worst GPU-GPU path
	InterType  ncclpath.PathType // worst GPU-NIC path
	GPUGPUGBps float64           // GPU-GPU path bandwidth
	GPUNICGBps float64           // GPU-NIC path bandwidth
	AMDCPU     bool              // NCCL's network overhead doubles on AMD hosts
	PXN        bool              // a GPU may use a peer's NIC over NVLink
	NVLS       bool              // NVLink SHARP (NVSwitch multicast) available
}

// ModelFromTopology derives a server model from the topology alone, for
// streams that did not pass through ncclpath: an SXM server whose GPUs sit
// with their NIC behind one PCIe switch (PXB), NVLink through NVSwitch at
// the rate the topology's NVLinks have (topogen's default is the GPU
// type's usable rate, topo.GPUSpecs).
func ModelFromTopology(t *stream.Topology) (ServerModel, error) {
	f, ok := topo.GPUSpecs[t.GPUType]
	if !ok {
		return ServerModel{}, fmt.Errorf("topology: unknown GPU type %q", t.GPUType)
	}
	m := ServerModel{Name: "from-topology", CC: f.CC, GPUs: t.GPUsPerServer, IntraType: ncclpath.PathNVL, InterType: ncclpath.PathPXB}
	m.NICs, m.NICGBps = topologyNICs(t)
	if nvl := topologyNVLink(t); nvl > 0 && t.GPUsPerServer > 1 {
		m.NVSwitch = true
		m.NVLinkGBps = nvl
		m.GPUGPUGBps = m.NVLinkGBps
	} else {
		m.IntraType = ncclpath.PathPHB
		m.GPUGPUGBps = f.PCIeGBps
	}
	m.GPUNICGBps = min(f.PCIeGBps, m.NICGBps)
	if m.NICs == 0 {
		m.GPUNICGBps = 0
	}
	m.PXN = m.NVSwitch
	m.NVLS = m.NVSwitch && m.CC >= 90 && m.GPUs > 2
	return m, nil
}
