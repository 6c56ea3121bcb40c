package nccl

import (
	"fmt"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/ncclpath"
	"github.com/fabricsim/fabricsim/pkg/topo"
)

// ccByGPU covers the GPU types ncclpath has templates for but topogen
// does not (PCIe parts and the H200), so a paths record for them still
// yields a compute capability.
var ccByGPU = map[string]int{"H200": 90, "L40S": 89, "L40": 89, "L20": 89}

// gpuCC returns the compute capability ×10 of a GPU type: the paths record
// does not carry the SM, so the topology's GPU type decides.
func gpuCC(gpuType string) (int, bool) {
	s := strings.ToUpper(strings.TrimSpace(gpuType))
	if f, ok := topo.GPUSpecs[s]; ok {
		return f.CC, true
	}
	cc, ok := ccByGPU[s]
	return cc, ok
}

// ModelFromPaths derives the server model from ncclpath's paths record,
// i.e. from the path types and bandwidths NCCL itself would compute for the
// server, instead of ModelFromTopology's fixed assumptions. The topology
// supplies what the record does not carry: the GPU type (compute
// capability) and the NIC port speed the fabric gives each server.
func ModelFromPaths(p *stream.Paths, t *stream.Topology) (ServerModel, error) {
	var m ServerModel
	if p == nil || t == nil {
		return m, fmt.Errorf("paths: need both the paths and the topology record")
	}
	cc, ok := gpuCC(t.GPUType)
	if !ok {
		return m, fmt.Errorf("topology: unknown GPU type %q", t.GPUType)
	}
	if p.GPUs != t.GPUsPerServer {
		return m, fmt.Errorf("paths %q: %d GPUs per server, the topology has %d", p.Template, p.GPUs, t.GPUsPerServer)
	}
	G, N := p.GPUs, p.NICs
	m = ServerModel{Name: p.Template, CC: cc, GPUs: G, NICs: N, IntraType: ncclpath.PathLOC, InterType: ncclpath.PathDIS}

	// Index the entries with their parsed types; the record lists each
	// ordered pair once.
	type entry struct {
		e *stream.PathEntry
		t ncclpath.PathType
	}
	count := map[string]int{stream.EndpointGPU: G, stream.EndpointNIC: N}
	gg := make([]entry, G*G)
	gn := make([]entry, G*N)
	for i := range p.Entries {
		e := &p.Entries[i]
		ns, okS := count[e.SrcKind]
		nd, okD := count[e.DstKind]
		if !okS || !okD || e.Src < 0 || int(e.Src) >= ns || e.Dst < 0 || int(e.Dst) >= nd {
			return m, fmt.Errorf("paths %q: entries[%d]: endpoint %s %d → %s %d out of range (%d GPUs, %d NICs)",
				p.Template, i, e.SrcKind, e.Src, e.DstKind, e.Dst, G, N)
		}
		pt, err := ncclpath.ParsePathType(e.Type)
		if err != nil {
			return m, fmt.Errorf("paths %q: entries[%d].type: %v", p.Template, i, err)
		}
		switch {
		case e.SrcKind == stream.EndpointGPU && e.DstKind == stream.EndpointGPU:
			gg[int(e.Src)*G+int(e.Dst)] = entry{e, pt}
		case e.SrcKind == stream.EndpointGPU:
			gn[int(e.Src)*N+int(e.Dst)] = entry{e, pt}
		}
	}

	// GPU↔GPU: the worst type bounds every ring (each ring visits every
	// GPU), its slowest path the per-channel speed. NVLink paths two hops
	// long without a relaying GPU go through an NVSwitch; the fastest NVL
	// path of each GPU is the NVLink bandwidth NCCL's search spends.
	nvl := -1.0
	for a := range G {
		best := 0.0
		for b := range G {
			if a == b {
				continue
			}
			e, pt := gg[a*G+b].e, gg[a*G+b].t
			if e == nil {
				return m, fmt.Errorf("paths %q: no GPU%d→GPU%d entry", p.Template, a, b)
			}
			switch {
			case pt > m.IntraType:
				m.IntraType, m.GPUGPUGBps = pt, e.BWGBps
			case pt == m.IntraType:
				m.GPUGPUGBps = min(m.GPUGPUGBps, e.BWGBps)
			}
			if pt == ncclpath.PathNVL {
				best = max(best, e.BWGBps)
				if e.Hops >= 2 && e.Via < 0 {
					m.NVSwitch = true
				}
			}
		}
		if best > 0 && (nvl < 0 || best < nvl) {
			nvl = best
		}
	}
	if nvl > 0 {
		m.NVLinkGBps = nvl
	}

	// GPU→NIC: NCCL's search ties each GPU to the NICs ncclTopoGetLocalNet
	// gives it (gpu_nics), so those paths, PXN and GDR detours included,
	// bound the inter-node channels; far NICs never enter a graph.
	first := true
	for g := range G {
		var nics []int32
		if g < len(p.GPUNICs) {
			nics = p.GPUNICs[g]
		}
		if len(nics) == 0 { // no choice recorded: the GPU's best NIC
			bestN, bestT, bestBW := int32(-1), ncclpath.PathDIS, 0.0
			for n := range N {
				if x := gn[g*N+n]; x.e != nil && (x.t < bestT || x.t == bestT && x.e.BWGBps > bestBW) {
					bestN, bestT, bestBW = int32(n), x.t, x.e.BWGBps
				}
			}
			if bestN >= 0 {
				nics = []int32{bestN}
			}
		}
		for _, n := range nics {
			if n < 0 || int(n) >= N || gn[g*N+int(n)].e == nil {
				return m, fmt.Errorf("paths %q: gpu_nics[%d]: no GPU%d→NIC%d entry", p.Template, g, g, n)
			}
			e, pt := gn[g*N+int(n)].e, gn[g*N+int(n)].t
			switch {
			case first || pt > m.InterType:
				m.InterType, m.GPUNICGBps, first = pt, e.BWGBps, false
			case pt == m.InterType:
				m.GPUNICGBps = min(m.GPUNICGBps, e.BWGBps)
			}
		}
	}

	// The NIC port speed is the fabric's: the record has no speed field,
	// and its template may assume faster NICs than the topology wires.
	m.NICGBps = nicPortGBps(t, p)
	if m.NICGBps == 0 {
		m.NICGBps = m.GPUNICGBps // no NIC links: the path bound is all we know
	}
	if N == 0 || m.NICGBps == 0 {
		m.GPUNICGBps = 0
	} else {
		m.GPUNICGBps = min(m.GPUNICGBps, m.NICGBps)
	}

	m.PXN = len(p.PXN) > 0
	for i := range p.Entries {
		if p.Entries[i].Type == "PXN" {
			m.PXN = true
		}
	}
	// NVLS needs NVSwitch multicast (Hopper on) and an NVSwitch node in the
	// topology for its flows to go through.
	m.NVLS = m.NVSwitch && m.CC >= 90 && G > 2 && t.NVSwitchesPerServer > 0
	return m, nil
}

// topologyNICs counts the GPUs of server 0 with a NIC and gives the NIC
// bandwidth of the best-connected one in GB/s, summing a GPU's NIC links so
// that a dual-homed NIC (two ports to two ToRs) counts as the one adapter
// NCCL sees.
func topologyNICs(t *stream.Topology) (nics int, gbps float64) {
	per := make([]float64, t.GPUsPerServer)
	for i := range t.Links {
		l := &t.Links[i]
		if l.Kind != stream.LinkNIC {
			continue
		}
		for _, end := range [2]int32{l.A, l.B} {
			if end >= 0 && int(end) < t.GPUsPerServer {
				per[end] += l.BWbps
			}
		}
	}
	best := 0.0
	for _, bps := range per {
		if bps > 0 {
			nics++
		}
		best = max(best, bps)
	}
	return nics, best / 8e9
}

// nicPortGBps is the speed of one of the NICs NCCL sees on a server: the
// fabric's NIC rate a GPU, split over the NICs the GPU uses (the paths'
// gpu_nics, one list a GPU whenever the server has NICs). OCI BM.GPU4.8
// has 16 x 100G RoCE ports, two on each GPU's PCIe switch, where topogen
// gives each GPU one 200G link: NCCL's search budgets channels per NIC at
// the port speed (search.cc: a channel takes its bandwidth off each NET
// link it crosses), so 16 ports of 12.5 GB/s are not 16 of 25. NICs no GPU
// uses (storage, management) split nothing.
func nicPortGBps(t *stream.Topology, p *stream.Paths) float64 {
	_, gbps := topologyNICs(t)
	ports := 1
	for _, l := range p.GPUNICs {
		ports = max(ports, distinct(l))
	}
	return gbps / float64(ports)
}

// distinct counts the different values of l.
func distinct(l []int32) int {
	seen := map[int32]bool{}
	for _, v := range l {
		seen[v] = true
	}
	return len(seen)
}

// topologyNVLink is GPU 0's NVLink bandwidth in GB/s: the sum of its links
// to its server's NVSwitches (0 without NVSwitches).
func topologyNVLink(t *stream.Topology) float64 {
	bps := 0.0
	for i := range t.Links {
		if l := &t.Links[i]; l.Kind == stream.LinkNVLink && (l.A == 0 || l.B == 0) {
			bps += l.BWbps
		}
	}
	return bps / 8e9
}

// PathsOf returns the record that describes server s, nil if none does.
// The tuning model treats every server alike, so callers pass server 0.
func PathsOf(recs []*stream.Paths, s int32) *stream.Paths {
	for _, p := range recs {
		if p.AllServers {
			return p
		}
		for _, x := range p.Servers {
			if x == s {
				return p
			}
		}
	}
	return nil
}
