package ncclpath

import (
	"errors"
	"fmt"
)

// System is one server as NCCL models it: CPUs (NUMA domains), PCIe
// switches, GPUs, NIC adapters and their network ports, at most one NVSwitch
// node (NCCL folds every NVSwitch chip into one), and the links between
// them. It describes hardware only: link bandwidths that depend on the NCCL
// version (NVLink per-link speed, inter-socket links) are derived by Compute,
// which never modifies the System, so one System may be shared.
//
// Build one with a template, ParseXML, or NewSystem and the Add methods.
// The Add methods record the first misuse and Validate (or Compute) reports
// it, so building code need not check every call.
type System struct {
	Name  string
	Nodes []Node
	Links []Link
	// Warnings are what ParseXML took as NCCL does though the file did
	// not say it (a port with no speed), for the command to print.
	Warnings []string

	count [numKinds]int
	err   error
}

// Node is one vertex. Index numbers the nodes of each kind from 0 in the
// order they were added, which is the order NCCL would number them.
type Node struct {
	Kind   NodeKind
	Index  int
	BusID  string // PCI bus id of a GPU, PCI switch or NIC adapter
	Parent int    // Nodes index of the PCI parent (CPU or switch; a NET's NIC), -1 for none

	CPU CPUInfo // Kind CPU
	GPU GPUInfo // Kind GPU
	Net NetInfo // Kind NET
}

// CPUInfo describes a CPU node: one NUMA domain and its PCIe root complex.
type CPUInfo struct {
	NUMA     int
	Arch     CPUArch
	Vendor   CPUVendor
	FamilyID int // CPUID family, decimal (Intel 6, AMD Zen 23/25, Zhaoxin 7)
	ModelID  int // CPUID model, decimal (143 Sapphire Rapids, 207 Emerald Rapids)
}

// GPUInfo describes a GPU.
type GPUInfo struct {
	Dev  int  // CUDA/NVML device index; chooses the GPU's NIC
	Rank int  // NCCL rank
	SM   int  // compute capability ×10: 80 A100, 90 H100, 100 B200
	GDR  bool // GPUDirect RDMA supported
	// Container groups GPUs that share /dev/shm. GPUs in different
	// containers can neither use P2P nor SHM, so NCCL sees them as reachable
	// only through the network and trims them.
	Container int
}

// NetInfo describes a network port (a NET node).
type NetInfo struct {
	Name      string  // e.g. mlx5_0
	Dev       int     // network plugin device index
	SpeedMbps float64 // link speed in Mb/s; ≤0 means 10000 as in NCCL
	Port      int
	GDR       bool    // GPUDirect RDMA supported by the NIC
	LatencyUs float64 // informative
}

// Link joins two nodes. NCCL keeps one directed link per direction; Link
// stands for both unless OneWay.
type Link struct {
	A, B int // Nodes indices
	Type LinkType
	// BW is the bandwidth per direction in GB/s. For NVLinks added with a
	// count (NVLinks > 0) it is left 0 and Compute derives it from A's SM
	// version and the NCCL version.
	BW      float64
	NVLinks int
	OneWay  bool // only A→B (a GPU→GPU NVLink: each GPU declares its own side)
}

// NewSystem returns an empty System.
func NewSystem(name string) *System { return &System{Name: name} }

func (s *System) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *System) add(n Node) int {
	n.Index = s.count[n.Kind]
	s.count[n.Kind]++
	s.Nodes = append(s.Nodes, n)
	return len(s.Nodes) - 1
}

func (s *System) valid(i int) bool { return i >= 0 && i < len(s.Nodes) }

// Count returns the number of nodes of a kind.
func (s *System) Count(k NodeKind) int {
	n := 0
	for i := range s.Nodes {
		if s.Nodes[i].Kind == k {
			n++
		}
	}
	return n
}

// Node returns the i-th node of kind k (i counts from 0 within the kind).
func (s *System) Node(k NodeKind, i int) *Node {
	for j := range s.Nodes {
		if s.Nodes[j].Kind == k && s.Nodes[j].Index == i {
			return &s.Nodes[j]
		}
	}
	return nil
}

// AddCPU adds a CPU node (a NUMA domain) and returns its Nodes index.
func (s *System) AddCPU(c CPUInfo) int {
	return s.add(Node{Kind: CPU, Parent: -1, CPU: c})
}

// AddPCI adds a PCIe switch (or bridge) below parent, a CPU or PCI node,
// with a link of bw GB/s (see PCIeBW), and returns its Nodes index.
func (s *System) AddPCI(parent int, busID string, bw float64) int {
	i := s.add(Node{Kind: PCI, BusID: busID, Parent: parent})
	s.pciLink(i, parent, bw)
	return i
}

// AddGPU adds a GPU below parent (a PCI switch or CPU) with a PCIe link of
// bw GB/s and returns its Nodes index.
func (s *System) AddGPU(parent int, busID string, bw float64, g GPUInfo) int {
	i := s.add(Node{Kind: GPU, BusID: busID, Parent: parent, GPU: g})
	s.pciLink(i, parent, bw)
	return i
}

// AddNIC adds a NIC adapter below parent with a PCIe link of bw GB/s (NCCL
// uses LocBW for a NIC placed directly under a CPU) and returns its Nodes
// index. Add its ports with AddNet.
func (s *System) AddNIC(parent int, busID string, bw float64) int {
	i := s.add(Node{Kind: NIC, BusID: busID, Parent: parent})
	s.pciLink(i, parent, bw)
	return i
}

func (s *System) pciLink(child, parent int, bw float64) {
	if !s.valid(parent) || (s.Nodes[parent].Kind != CPU && s.Nodes[parent].Kind != PCI) {
		n := s.Nodes[child]
		s.fail(fmt.Errorf("%s %s: parent must be a CPU or PCI switch", n.Kind, n.BusID))
		return
	}
	s.AddLink(child, parent, LinkPCI, bw)
}

// AddNet adds a network port to a NIC adapter, joined by a NET link of
// speed/8000 GB/s, and returns its Nodes index.
func (s *System) AddNet(nic int, n NetInfo) int {
	i := s.add(Node{Kind: NET, Parent: nic, Net: n})
	if !s.valid(nic) || s.Nodes[nic].Kind != NIC {
		s.fail(fmt.Errorf("NET %s: parent must be a NIC", n.Name))
		return i
	}
	s.AddLink(nic, i, LinkNET, netBW(n.SpeedMbps))
	return i
}

func netBW(mbps float64) float64 {
	if mbps <= 0 {
		mbps = 10000
	}
	return mbps / 8000
}

// AddNVSwitch returns the NVSwitch node, adding it on first use.
func (s *System) AddNVSwitch() int {
	for i := range s.Nodes {
		if s.Nodes[i].Kind == NVS {
			return i
		}
	}
	return s.add(Node{Kind: NVS, Parent: -1})
}

// AddNVLink adds count NVLinks from a GPU to target: another GPU (one way;
// the peer declares its own side), the NVSwitch or a CPU (both ways).
// Compute derives the bandwidth from the GPU's SM and the NCCL version.
func (s *System) AddNVLink(gpu, target, count int) {
	if !s.valid(gpu) || s.Nodes[gpu].Kind != GPU || !s.valid(target) {
		s.fail(errors.New("AddNVLink: needs a GPU and a target node"))
		return
	}
	if count <= 0 {
		return
	}
	l := Link{A: gpu, B: target, Type: LinkNVL, NVLinks: count}
	switch s.Nodes[target].Kind {
	case GPU:
		l.OneWay = true
	case NVS, CPU:
	default:
		s.fail(fmt.Errorf("GPU %s: NVLink target must be a GPU, the NVSwitch or a CPU, not %s", s.Nodes[gpu].BusID, s.Nodes[target].Kind))
		return
	}
	s.Links = append(s.Links, l)
}

// AddC2C adds a Grace chip-to-chip link of bw GB/s between a GPU and a CPU.
func (s *System) AddC2C(gpu, cpu int, bw float64) {
	if !s.valid(gpu) || !s.valid(cpu) || s.Nodes[gpu].Kind != GPU || s.Nodes[cpu].Kind != CPU {
		s.fail(errors.New("AddC2C: needs a GPU and a CPU"))
		return
	}
	s.AddLink(gpu, cpu, LinkC2C, bw)
}

// AddLink adds a link of bw GB/s in both directions.
func (s *System) AddLink(a, b int, t LinkType, bw float64) {
	s.addLink(Link{A: a, B: b, Type: t, BW: bw})
}

// AddLinkOneWay adds a link of bw GB/s from a to b only.
func (s *System) AddLinkOneWay(a, b int, t LinkType, bw float64) {
	s.addLink(Link{A: a, B: b, Type: t, BW: bw, OneWay: true})
}

func (s *System) addLink(l Link) {
	if !s.valid(l.A) || !s.valid(l.B) || l.A == l.B {
		s.fail(fmt.Errorf("link %d-%d: invalid endpoints", l.A, l.B))
		return
	}
	if !(l.BW > 0) || l.BW > 1e9 {
		s.fail(fmt.Errorf("link %s-%s: bandwidth %g GB/s is not positive", s.label(l.A), s.label(l.B), l.BW))
		return
	}
	s.Links = append(s.Links, l)
}

func (s *System) label(i int) string {
	if !s.valid(i) {
		return fmt.Sprint(i)
	}
	return nodeLabel(&s.Nodes[i], s.Nodes[i].Index)
}

// nodeLabel names a node in routes and messages (GPU3, NIC1 for a network
// port, CPU0, NVS, PCI/<busid>); idx is its index among its kind.
func nodeLabel(n *Node, idx int) string {
	switch n.Kind {
	case GPU, CPU:
		return fmt.Sprintf("%s%d", n.Kind, idx)
	case NET:
		return fmt.Sprintf("NIC%d", idx)
	case NVS:
		return "NVS"
	}
	if n.BusID != "" {
		return "PCI/" + n.BusID
	}
	return fmt.Sprintf("%s%d", n.Kind, idx)
}

// Limits NCCL enforces (NCCL_TOPO_MAX_NODES in 2.27); they also keep
// hostile input from making Compute slow.
const maxNodesPerKind = 576

// Validate checks the System: consistent nodes and links, every GPU and NIC
// below a CPU, unique GPU ranks, sane attributes.
func (s *System) Validate() error {
	if s == nil {
		return errors.New("nil System")
	}
	if s.err != nil {
		return s.err
	}
	var count [numKinds]int
	ranks := map[int]int{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.Kind >= numKinds {
			return fmt.Errorf("node %d: invalid kind %d", i, n.Kind)
		}
		if n.Index != count[n.Kind] {
			return fmt.Errorf("node %d (%s): Index %d, expected %d", i, n.Kind, n.Index, count[n.Kind])
		}
		count[n.Kind]++
		if count[n.Kind] > maxNodesPerKind {
			return fmt.Errorf("more than %d %s nodes", maxNodesPerKind, n.Kind)
		}
		switch n.Kind {
		case GPU:
			if n.GPU.Dev < 0 || n.GPU.Dev > 1<<20 {
				return fmt.Errorf("%s: invalid dev %d", s.label(i), n.GPU.Dev)
			}
			if n.GPU.SM <= 0 {
				return fmt.Errorf("%s: invalid sm %d", s.label(i), n.GPU.SM)
			}
			if j, dup := ranks[n.GPU.Rank]; dup {
				return fmt.Errorf("%s and %s both have rank %d", s.label(j), s.label(i), n.GPU.Rank)
			}
			ranks[n.GPU.Rank] = i
			if err := s.checkAncestry(i); err != nil {
				return err
			}
		case NIC:
			if err := s.checkAncestry(i); err != nil {
				return err
			}
		case NET:
			if !s.valid(n.Parent) || s.Nodes[n.Parent].Kind != NIC {
				return fmt.Errorf("%s: parent must be a NIC", s.label(i))
			}
		case NVS:
			if count[NVS] > 1 {
				return errors.New("more than one NVSwitch node: NCCL folds all NVSwitches into one")
			}
		}
	}
	for _, l := range s.Links {
		if !s.valid(l.A) || !s.valid(l.B) || l.A == l.B {
			return fmt.Errorf("link %d-%d: invalid endpoints", l.A, l.B)
		}
		if l.NVLinks > 0 {
			if l.Type != LinkNVL || s.Nodes[l.A].Kind != GPU {
				return fmt.Errorf("link %s-%s: an NVLink count needs an NVL link from a GPU", s.label(l.A), s.label(l.B))
			}
		} else if !(l.BW > 0) {
			return fmt.Errorf("link %s-%s: bandwidth %g GB/s is not positive", s.label(l.A), s.label(l.B), l.BW)
		}
		switch l.Type {
		case LinkSYS:
			// Compute joins every CPU pair itself; an explicit SYS link only
			// overrides that bandwidth, so it must join two CPUs.
			if s.Nodes[l.A].Kind != CPU || s.Nodes[l.B].Kind != CPU {
				return fmt.Errorf("link %s-%s: a SYS link joins two CPUs", s.label(l.A), s.label(l.B))
			}
		case LinkLOC, LinkNVL, LinkC2C, LinkPCI, LinkNET:
		default:
			return fmt.Errorf("link %s-%s: unknown link type %d", s.label(l.A), s.label(l.B), l.Type)
		}
	}
	return nil
}

// checkAncestry makes sure node i hangs below a CPU through PCI parents.
func (s *System) checkAncestry(i int) error {
	j := s.Nodes[i].Parent
	for steps := 0; ; steps++ {
		if !s.valid(j) || steps > len(s.Nodes) {
			return fmt.Errorf("%s has no PCI parent leading to a CPU", s.label(i))
		}
		switch s.Nodes[j].Kind {
		case CPU:
			return nil
		case PCI:
			j = s.Nodes[j].Parent
		default:
			return fmt.Errorf("%s: parent %s is not a CPU or PCI switch", s.label(i), s.label(j))
		}
	}
}
