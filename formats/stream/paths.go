package stream

import "fmt"

// Endpoint kinds of a path entry.
const (
	EndpointGPU = "gpu"
	EndpointNIC = "nic"
)

// Paths is the "paths" record written by ncclpath: NCCL's view of one server
// template's internals. Identical servers share one record, listed in
// Servers (or AllServers), so a 128-server cluster costs one record, not 128.
// GPU and NIC indices are local to the server: GPU i is the server's i-th
// GPU (local rank order), NIC j its j-th network port.
type Paths struct {
	Template    string  `msgpack:"template"`     // server template name (dgx-h100, an XML file's name, …)
	NCCLVersion string  `msgpack:"nccl_version"` // NCCL behaviour reproduced, e.g. "2.27"
	AllServers  bool    `msgpack:"all_servers"`  // every server of the topology uses this template
	Servers     []int32 `msgpack:"servers"`      // server indices using it when AllServers is false
	GPUs        int     `msgpack:"gpus"`
	NICs        int     `msgpack:"nics"`
	// Entries hold every ordered GPU↔GPU pair (src ≠ dst) and every
	// GPU→NIC and NIC→GPU pair.
	Entries []PathEntry `msgpack:"entries"`
	// GPUNICs[g] lists the NICs GPU g uses, channel by channel: channel c
	// uses GPUNICs[g][c % len(GPUNICs[g])]. Empty without NICs.
	GPUNICs [][]int32 `msgpack:"gpu_nics"`
	// PXN lists the GPU→NIC pairs NCCL sends through a proxy GPU.
	PXN []PXNProxy `msgpack:"pxn"`
}

// PathEntry is one directed path. The JSON names (ncclpath --json) are the
// stream's.
type PathEntry struct {
	SrcKind string  `msgpack:"src_kind" json:"src_kind"` // gpu | nic
	Src     int32   `msgpack:"src" json:"src"`
	DstKind string  `msgpack:"dst_kind" json:"dst_kind"` // gpu | nic
	Dst     int32   `msgpack:"dst" json:"dst"`
	Type    string  `msgpack:"type" json:"type"`       // LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS
	BWGBps  float64 `msgpack:"bw_gbps" json:"bw_gbps"` // bottleneck bandwidth, GB/s (1e9 B/s) as NCCL counts it
	Hops    int32   `msgpack:"hops" json:"hops"`
	// P2P and P2PRead: GPU→GPU only, NCCL's P2P transport and P2P read verdicts.
	P2P     bool `msgpack:"p2p" json:"p2p"`
	P2PRead bool `msgpack:"p2p_read" json:"p2p_read"`
	// GDR: GPU→NIC entries carry the send-side verdict (the NIC reads GPU
	// memory), NIC→GPU entries the receive side (the NIC writes it).
	GDR bool `msgpack:"gdr" json:"gdr"`
	// Via is the GPU relaying the traffic (the NVB intermediate or the PXN
	// proxy), -1 if none.
	Via int32 `msgpack:"via" json:"via"`
}

// PXNProxy says that GPU sends to NIC through Proxy, a GPU one NVLink hop
// away that sits close to the NIC.
type PXNProxy struct {
	GPU   int32 `msgpack:"gpu" json:"gpu"`
	NIC   int32 `msgpack:"nic" json:"nic"`
	Proxy int32 `msgpack:"proxy" json:"proxy"`
}

// Paths writes a paths record.
func (w *Writer) Paths(p *Paths) error { return w.Record(KindPaths, p) }

// Paths decodes the current paths record and checks that its indices and
// kinds are consistent, naming the offending field.
func (r *Reader) Paths() (*Paths, error) {
	if r.kind != KindPaths {
		return nil, r.errf("", fmt.Errorf("record is %q, not %q", r.kind, KindPaths))
	}
	p := &Paths{}
	if err := r.Decode(p); err != nil {
		return nil, err
	}
	if p.GPUs < 0 {
		return nil, r.Errorf("gpus", "negative count %d", p.GPUs)
	}
	if p.NICs < 0 {
		return nil, r.Errorf("nics", "negative count %d", p.NICs)
	}
	count := func(kind string) int {
		if kind == EndpointGPU {
			return p.GPUs
		}
		return p.NICs
	}
	for i, e := range p.Entries {
		for _, end := range [...]struct {
			name, kind string
			idx        int32
		}{{"src", e.SrcKind, e.Src}, {"dst", e.DstKind, e.Dst}} {
			if end.kind != EndpointGPU && end.kind != EndpointNIC {
				return nil, r.Errorf(fmt.Sprintf("entries[%d].%s_kind", i, end.name), "%q is not %q or %q", end.kind, EndpointGPU, EndpointNIC)
			}
			if end.idx < 0 || int(end.idx) >= count(end.kind) {
				return nil, r.Errorf(fmt.Sprintf("entries[%d].%s", i, end.name), "%s %d out of range (%d %ss)", end.kind, end.idx, count(end.kind), end.kind)
			}
		}
		if e.Via < -1 || int(e.Via) >= p.GPUs {
			return nil, r.Errorf(fmt.Sprintf("entries[%d].via", i), "GPU %d out of range", e.Via)
		}
	}
	if len(p.GPUNICs) > p.GPUs {
		return nil, r.Errorf("gpu_nics", "%d lists for %d GPUs", len(p.GPUNICs), p.GPUs)
	}
	for g, nics := range p.GPUNICs {
		for c, n := range nics {
			if n < 0 || int(n) >= p.NICs {
				return nil, r.Errorf(fmt.Sprintf("gpu_nics[%d][%d]", g, c), "NIC %d out of range (%d NICs)", n, p.NICs)
			}
		}
	}
	for i, x := range p.PXN {
		if x.GPU < 0 || int(x.GPU) >= p.GPUs || x.Proxy < 0 || int(x.Proxy) >= p.GPUs || x.NIC < 0 || int(x.NIC) >= p.NICs {
			return nil, r.Errorf(fmt.Sprintf("pxn[%d]", i), "index out of range (gpu %d, nic %d, proxy %d)", x.GPU, x.NIC, x.Proxy)
		}
	}
	return p, nil
}
