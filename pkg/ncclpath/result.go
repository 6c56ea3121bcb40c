package ncclpath

import (
	"fmt"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// Result is what NCCL knows about a server's paths after ncclTopoComputePaths
// and trimming. GPU and NIC indices refer to Result.GPUs and Result.NICs
// (after trimming); "NIC" means a network port, NCCL's NET node. Matrices
// are indexed [source][destination].
type Result struct {
	Server      string    `json:"server"`
	NCCLVersion string    `json:"nccl_version"`
	GPUs        []GPUDesc `json:"gpus"`
	NICs        []NICDesc `json:"nics"`

	GPUToGPU [][]Path `json:"gpu_to_gpu"`
	GPUToNIC [][]Path `json:"gpu_to_nic"`
	NICToGPU [][]Path `json:"nic_to_gpu"`
	NICToNIC [][]Path `json:"nic_to_nic"`

	P2P [][]P2P `json:"p2p"` // [src GPU][dst GPU]
	GDR [][]GDR `json:"gdr"` // [GPU][NIC]

	// GPUNICs[g] are the NICs GPU g uses channel by channel: channel c uses
	// GPUNICs[g][c % len(GPUNICs[g])] (ncclTopoGetLocalNet).
	GPUNICs [][]int `json:"gpu_nics"`
	// NICLocalGPU[n] is the GPU NCCL considers local to NIC n (the PXN
	// proxy candidate), -1 if none.
	NICLocalGPU []int `json:"nic_local_gpu"`
	// TrimmedGPUs are the System GPU indices removed by trimming.
	TrimmedGPUs []int `json:"trimmed_gpus,omitempty"`
}

// GPUDesc identifies a GPU of a Result.
type GPUDesc struct {
	Index    int    `json:"index"` // index among the System's GPUs
	BusID    string `json:"busid"`
	Rank     int    `json:"rank"`
	Dev      int    `json:"dev"`
	SM       int    `json:"sm"`
	LocalCPU int    `json:"local_cpu"` // CPU index NCCL detours through
}

// NICDesc identifies a NIC (network port) of a Result.
type NICDesc struct {
	Index     int     `json:"index"` // index among the System's NET nodes
	Name      string  `json:"name"`
	Dev       int     `json:"dev"`
	BusID     string  `json:"busid"` // the adapter's PCI bus id
	SpeedGbps float64 `json:"speed_gbps"`
	Port      int     `json:"port"`
	GDR       bool    `json:"gdr"`
}

// Path is a path NCCL chose between two endpoints.
type Path struct {
	Type PathType `json:"type"`
	BW   float64  `json:"bw_gbps"` // bottleneck bandwidth in GB/s
	Hops int      `json:"hops"`
	// Via is the GPU relaying the traffic: the intermediate of an NVB path
	// or the proxy of a PXN path (a Result.GPUs index), -1 if none.
	Via int `json:"via"`
	// Route lists the nodes after the source, ending at the destination:
	// GPU3, NIC1, CPU0, NVS, PCI/<busid> (switches and NIC adapters).
	Route []string `json:"route"`
}

func (p Path) String() string {
	return fmt.Sprintf("%s/%.1f/%d", p.Type, p.BW, p.Hops)
}

// GDR holds GPUDirect RDMA verdicts for a GPU/NIC pair.
type GDR struct {
	Read  bool `json:"read"`  // sends: the NIC reads GPU memory
	Write bool `json:"write"` // receives: the NIC writes GPU memory
}

func (c *computer) result() *Result {
	gpus, nets := c.nodes[GPU], c.nodes[NET]
	G, N := len(gpus), len(nets)
	r := &Result{Server: c.sys.Name, NCCLVersion: c.p.ver.String()}

	labels := make([]string, c.nn)
	for g := range labels {
		// Indices after trimming, as Result.GPUs and Result.NICs count.
		labels[g] = nodeLabel(&c.sys.Nodes[c.sysIdx[g]], int(c.kidx[g]))
	}
	// One backing array for every route keeps allocations few.
	total := 0
	for _, a := range gpus {
		for _, b := range gpus {
			total += int(c.at(b, a).count)
		}
		for _, n := range nets {
			total += int(c.at(n, a).count) + int(c.at(a, n).count)
		}
	}
	for _, a := range nets {
		for _, b := range nets {
			total += int(c.at(b, a).count)
		}
	}
	routes := make([]string, 0, total)
	mk := func(base, src int32) Path {
		p := c.at(base, src)
		start := len(routes)
		for _, x := range c.route(p) {
			routes = append(routes, labels[x])
		}
		via := -1
		if p.typ == PathPXN || p.typ == PathNVB {
			if g := c.firstGPU(p); g >= 0 {
				via = int(c.kidx[g])
			}
		}
		return Path{Type: p.typ, BW: p.bw, Hops: int(p.count), Via: via, Route: routes[start:len(routes):len(routes)]}
	}
	matrix := func(rows, cols int) [][]Path {
		m := make([][]Path, rows)
		cells := make([]Path, rows*cols)
		for i := range m {
			m[i] = cells[i*cols : (i+1)*cols : (i+1)*cols]
		}
		return m
	}

	r.GPUs = make([]GPUDesc, G)
	for i, g := range gpus {
		n := &c.sys.Nodes[c.sysIdx[g]]
		r.GPUs[i] = GPUDesc{Index: n.Index, BusID: n.BusID, Rank: n.GPU.Rank, Dev: n.GPU.Dev, SM: n.GPU.SM,
			LocalCPU: int(c.kidx[c.localCPU[i]])}
	}
	r.NICs = make([]NICDesc, N)
	for i, x := range nets {
		n := &c.sys.Nodes[c.sysIdx[x]]
		d := NICDesc{Index: n.Index, Name: n.Net.Name, Dev: n.Net.Dev, SpeedGbps: netBW(n.Net.SpeedMbps) * 8,
			Port: n.Net.Port, GDR: n.Net.GDR}
		if n.Parent >= 0 {
			d.BusID = c.sys.Nodes[n.Parent].BusID
		}
		r.NICs[i] = d
	}

	r.GPUToGPU = matrix(G, G)
	r.P2P = make([][]P2P, G)
	for i, a := range gpus {
		r.P2P[i] = c.p2p[i*G : (i+1)*G : (i+1)*G]
		for j, b := range gpus {
			r.GPUToGPU[i][j] = mk(b, a)
		}
	}
	r.GPUToNIC, r.NICToGPU, r.NICToNIC = matrix(G, N), matrix(N, G), matrix(N, N)
	r.GDR = make([][]GDR, G)
	r.GPUNICs = make([][]int, G)
	gdr := make([]GDR, G*N)
	for i, g := range gpus {
		r.GDR[i] = gdr[i*N : (i+1)*N : (i+1)*N]
		for j, n := range nets {
			r.GPUToNIC[i][j] = mk(n, g)
			r.NICToGPU[j][i] = mk(g, n)
			r.GDR[i][j] = GDR{Read: c.checkGDR(g, n, true), Write: c.checkGDR(g, n, false)}
		}
		if N > 0 {
			if pl := c.planFor(g, nil); len(pl.nets) > 0 {
				k := min(pl.period, c.p.maxChannels)
				r.GPUNICs[i] = make([]int, k)
				for ch := range k {
					r.GPUNICs[i][ch] = int(c.kidx[pl.at(ch)])
				}
			}
		}
	}
	for i, a := range nets {
		for j, b := range nets {
			r.NICToNIC[i][j] = mk(b, a)
		}
	}
	r.NICLocalGPU = make([]int, N)
	for j, n := range nets {
		r.NICLocalGPU[j] = -1
		if g := c.localGPU(n); g >= 0 {
			r.NICLocalGPU[j] = int(c.kidx[g])
		}
	}
	for i, d := range c.trimmed {
		if d {
			r.TrimmedGPUs = append(r.TrimmedGPUs, i)
		}
	}
	return r
}

// Matrix returns a table like nvidia-smi topo -m: a header row and one row
// per GPU then per NIC, with the row as the source and the column as the
// destination (NCCL's paths are directed: PXN rewrites only GPU→NIC). A
// cell is the path type, or type/bandwidth such as "NVL/240.0" when withBW;
// the diagonal is "X".
func (r *Result) Matrix(withBW bool) [][]string {
	G, N := len(r.GPUs), len(r.NICs)
	names := make([]string, 0, G+N)
	for i := range G {
		names = append(names, fmt.Sprintf("GPU%d", i))
	}
	for i := range N {
		names = append(names, fmt.Sprintf("NIC%d", i))
	}
	rows := make([][]string, 0, G+N+1)
	rows = append(rows, append([]string{""}, names...))
	cell := func(p Path) string {
		if withBW {
			return fmt.Sprintf("%s/%.1f", p.Type, p.BW)
		}
		return p.Type.String()
	}
	for i := range G + N {
		row := make([]string, 0, G+N+1)
		row = append(row, names[i])
		for j := range G + N {
			var p Path
			switch {
			case i == j:
				row = append(row, "X")
				continue
			case i < G && j < G:
				p = r.GPUToGPU[i][j]
			case i < G:
				p = r.GPUToNIC[i][j-G]
			case j < G:
				p = r.NICToGPU[i-G][j]
			default:
				p = r.NICToNIC[i-G][j-G]
			}
			row = append(row, cell(p))
		}
		rows = append(rows, row)
	}
	return rows
}

// MatrixText renders Matrix as aligned text followed by a NIC legend.
func (r *Result) MatrixText(withBW bool) string {
	rows := r.Matrix(withBW)
	width := 0
	for _, row := range rows {
		for _, c := range row {
			width = max(width, len(c))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for j, c := range row {
			if j > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if j < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width-len(c)))
			}
		}
		b.WriteByte('\n')
	}
	if len(r.NICs) > 0 {
		b.WriteString("\nNIC Legend:\n")
		for i, n := range r.NICs {
			fmt.Fprintf(&b, "  NIC%d: %s\n", i, n.Name)
		}
	}
	return b.String()
}

// Entries lists every ordered GPU↔GPU pair (src ≠ dst), then every GPU→NIC
// and NIC→GPU pair.
func (r *Result) Entries() []stream.PathEntry {
	G, N := len(r.GPUs), len(r.NICs)
	out := make([]stream.PathEntry, 0, G*(G-1)+2*G*N)
	entry := func(srcKind string, src int, dstKind string, dst int, p Path) stream.PathEntry {
		return stream.PathEntry{SrcKind: srcKind, Src: int32(src), DstKind: dstKind, Dst: int32(dst),
			Type: p.Type.String(), BWGBps: p.BW, Hops: int32(p.Hops), Via: int32(p.Via)}
	}
	for i := range G {
		for j := range G {
			if i == j {
				continue
			}
			e := entry(stream.EndpointGPU, i, stream.EndpointGPU, j, r.GPUToGPU[i][j])
			e.P2P, e.P2PRead = r.P2P[i][j].OK, r.P2P[i][j].Read
			out = append(out, e)
		}
	}
	for i := range G {
		for j := range N {
			e := entry(stream.EndpointGPU, i, stream.EndpointNIC, j, r.GPUToNIC[i][j])
			e.GDR = r.GDR[i][j].Read
			out = append(out, e)
		}
	}
	for j := range N {
		for i := range G {
			e := entry(stream.EndpointNIC, j, stream.EndpointGPU, i, r.NICToGPU[j][i])
			e.GDR = r.GDR[i][j].Write
			out = append(out, e)
		}
	}
	return out
}

// Proxies lists the PXN rewrites (GPU sends to NIC through Proxy, the PXN
// path's Via) in GPU, then NIC order.
func (r *Result) Proxies() []stream.PXNProxy {
	var out []stream.PXNProxy
	for g, row := range r.GPUToNIC {
		for n, p := range row {
			if p.Type == PathPXN && p.Via >= 0 {
				out = append(out, stream.PXNProxy{GPU: int32(g), NIC: int32(n), Proxy: int32(p.Via)})
			}
		}
	}
	return out
}

// Report is a flat, JSON-friendly summary of a Result (what ncclpath --json
// prints): endpoint descriptions, every pair as an Entry, NIC choices, PXN
// proxies and the topo -m style matrix with bandwidths.
type Report struct {
	Server      string             `json:"server"`
	NCCLVersion string             `json:"nccl_version"`
	GPUs        []GPUDesc          `json:"gpus"`
	NICs        []NICDesc          `json:"nics"`
	Entries     []stream.PathEntry `json:"entries"`
	GPUNICs     [][]int            `json:"gpu_nics"`
	PXN         []stream.PXNProxy  `json:"pxn"`
	Matrix      [][]string         `json:"matrix"`
	TrimmedGPUs []int              `json:"trimmed_gpus,omitempty"`
}

// Report builds the flat summary.
func (r *Result) Report() *Report {
	return &Report{Server: r.Server, NCCLVersion: r.NCCLVersion, GPUs: r.GPUs, NICs: r.NICs,
		Entries: r.Entries(), GPUNICs: r.GPUNICs, PXN: r.Proxies(), Matrix: r.Matrix(true), TrimmedGPUs: r.TrimmedGPUs}
}

// StreamPaths converts the Result into the stream's paths record for the
// servers that use this template; nil servers means all of them.
func (r *Result) StreamPaths(servers []int32) *stream.Paths {
	sp := &stream.Paths{Template: r.Server, NCCLVersion: r.NCCLVersion, GPUs: len(r.GPUs), NICs: len(r.NICs)}
	if servers == nil {
		sp.AllServers = true
	} else {
		sp.Servers = append([]int32{}, servers...)
	}
	sp.Entries = r.Entries()
	sp.GPUNICs = make([][]int32, len(r.GPUNICs))
	for g, nics := range r.GPUNICs {
		sp.GPUNICs[g] = make([]int32, len(nics))
		for c, n := range nics {
			sp.GPUNICs[g][c] = int32(n)
		}
	}
	sp.PXN = r.Proxies()
	return sp
}
