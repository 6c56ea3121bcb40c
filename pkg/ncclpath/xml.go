package ncclpath

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/fabricsim/fabricsim/internal/xmltree"
)

// XMLError locates a problem in a topology XML file.
type XMLError = xmltree.Error

// topoDoc is NCCL's topology XML; real dumps hold a few hundred elements.
var topoDoc = xmltree.Doc{Root: "system", Kind: "an NCCL topology XML file", MaxElements: 20000}

// ParseXML reads a topology in NCCL's XML format (NCCL_TOPO_FILE, or what
// NCCL_TOPO_DUMP_FILE wrote) and returns the System it describes. name
// labels errors ("server.xml: line 12: <gpu> missing attribute "sm"") and,
// without directory and ".xml", names the System.
//
// It follows NCCL's reading: a <pci> element's class decides what it is
// (0x03… GPU, 0x02… NIC, anything else a switch or bridge), its link_speed
// and link_width give the bandwidth to its parent, a GPU without a rank and
// a <net> without a dev are ignored, ports of one NIC (same bus id but the
// function) merge into one adapter, and NVLinks to NVSwitches fold into one
// NVSwitch node. Unknown elements are errors; unknown attributes are ignored.
func ParseXML(r io.Reader, name string) (*System, error) {
	root, err := topoDoc.Read(r, name)
	if err != nil {
		return nil, err
	}
	sysName := strings.TrimSuffix(filepath.Base(name), ".xml")
	p := &xmlParser{sys: NewSystem(sysName), byBus: map[uint64]int{}, nicByBus: map[uint64]int{},
		ranks: map[int]int{}, devs: map[int]int{}, netDevs: map[int]int{}, numas: map[int]bool{}}
	if err := p.system(root); err != nil {
		return nil, err
	}
	if err := p.sys.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return p.sys, nil
}

type xmlParser struct {
	sys      *System
	byBus    map[uint64]int // bus id → GPU or PCI node
	nicByBus map[uint64]int // bus id with function 0 → NIC node
	ranks    map[int]int    // rank → line of its <gpu>
	devs     map[int]int    // GPU dev (NVML index, one per GPU) → line of its <gpu>
	netDevs  map[int]int    // net dev (the plugin's index) → line of its <net>
	numas    map[int]bool
	gpus     []xmlGPU
	pcilinks []xmlPCILink
}

type xmlGPU struct {
	elem *xmltree.Elem
	node int
	cpu  int
}

type xmlPCILink struct {
	elem *xmltree.Elem
	node int
}

func (p *xmlParser) unexpected(e *xmltree.Elem) error {
	switch e.Name {
	case "gpu":
		return e.Errorf("has no PCI parent: a <gpu> must sit inside the <pci> element of its device (class 0x03xxxx), not inside <%s>", e.Parent.Name)
	case "net":
		return e.Errorf("must sit inside a <nic>, not inside <%s>", e.Parent.Name)
	case "nvlink", "c2c":
		return e.Errorf("must sit inside a <gpu>, not inside <%s>", e.Parent.Name)
	case "system", "cpu", "pci", "nic", "pcilink":
		return e.Errorf("is not allowed inside <%s>", e.Parent.Name)
	}
	return e.Errorf("is not an NCCL topology element (inside <%s>)", e.Parent.Name)
}

// flag reads a 0/1 attribute as NCCL does: any non-zero integer is true.
func flag(e *xmltree.Elem, name string, required bool) (bool, error) {
	n, err := e.Int(name, required, 0)
	return n != 0, err
}

// busKey turns "0000:07:00.0" into a number, as NCCL's busIdToInt64 does,
// so that "07:00.0" and "0000:07:00.0" name the same device.
func busKey(s string) (uint64, bool) {
	var v uint64
	digits := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		case c == ':' || c == '.':
			continue
		default:
			return 0, false
		}
		digits++
		if digits > 16 {
			return 0, false
		}
		v = v<<4 | d
	}
	return v, digits > 0
}

func (p *xmlParser) busID(e *xmltree.Elem, name string) (string, uint64, error) {
	s, err := e.Str(name)
	if err != nil {
		return "", 0, err
	}
	k, ok := busKey(s)
	if !ok {
		return "", 0, e.Errorf("attribute %q: %q is not a PCI bus id like 0000:07:00.0", name, s)
	}
	return strings.ToLower(s), k, nil
}

func (p *xmlParser) system(e *xmltree.Elem) error {
	if v, ok := e.Attr("version"); ok && strings.TrimSpace(v) != "1" {
		return e.Errorf("version %q is not supported (NCCL topology files are version 1)", v)
	}
	for _, k := range e.Kids {
		if k.Name != "cpu" {
			return p.unexpected(k)
		}
		if err := p.cpu(k); err != nil {
			return err
		}
	}
	for _, g := range p.gpus {
		if err := p.gpuLinks(g); err != nil {
			return err
		}
	}
	for _, l := range p.pcilinks {
		_, key, err := p.busID(l.elem, "target")
		if err != nil {
			return err
		}
		// A peer port missing from the file is not an error: dumps drop
		// branches without GPUs or NICs.
		if t, ok := p.byBus[key]; ok && p.sys.Nodes[t].Kind == PCI && t != l.node {
			p.sys.AddLinkOneWay(l.node, t, LinkLOC, LocBW)
		}
	}
	return nil
}

func (p *xmlParser) cpu(e *xmltree.Elem) error {
	numa, err := e.Int("numaid", true, 0)
	if err != nil {
		return err
	}
	if p.numas[numa] {
		return e.Errorf("numaid %d appears twice", numa)
	}
	p.numas[numa] = true
	info := CPUInfo{NUMA: numa}
	arch, err := e.Str("arch")
	if err != nil {
		return err
	}
	switch arch {
	case "x86_64":
		info.Arch = ArchX86
	case "arm64":
		info.Arch = ArchARM
	case "ppc64":
		info.Arch = ArchPower
	default:
		return e.Errorf("attribute \"arch\": %q is not x86_64, arm64 or ppc64", arch)
	}
	if info.Arch == ArchX86 {
		vendor, err := e.Str("vendor")
		if err != nil {
			return err
		}
		switch strings.TrimSpace(vendor) {
		case "GenuineIntel":
			info.Vendor = VendorIntel
		case "AuthenticAMD":
			info.Vendor = VendorAMD
		case "CentaurHauls", "Shanghai":
			info.Vendor = VendorZhaoxin
		}
		// Other vendors are unknown to NCCL too; it applies its defaults.
	}
	if info.FamilyID, err = e.Int("familyid", false, 0); err != nil {
		return err
	}
	if info.ModelID, err = e.Int("modelid", false, 0); err != nil {
		return err
	}
	c := p.sys.AddCPU(info)
	for _, k := range e.Kids {
		switch k.Name {
		case "pci":
			err = p.pci(k, c, c)
		case "nic":
			// A NIC straight on the CPU: NCCL links it at LocBW.
			nic := p.sys.AddNIC(c, "", LocBW)
			err = p.nic(k, nic)
		default:
			err = p.unexpected(k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pciClass mirrors NCCL's class dictionary, matched by prefix in this order.
func pciClass(class string) NodeKind {
	switch {
	case strings.HasPrefix(class, "0x060400"):
		return PCI
	case strings.HasPrefix(class, "0x068000"):
		return NVS
	case strings.HasPrefix(class, "0x068001"):
		return CPU
	case strings.HasPrefix(class, "0x03"):
		return GPU
	case strings.HasPrefix(class, "0x02"):
		return NIC
	}
	return PCI
}

func (p *xmlParser) pci(e *xmltree.Elem, parent, cpu int) error {
	bus, key, err := p.busID(e, "busid")
	if err != nil {
		return err
	}
	class, err := e.Str("class")
	if err != nil {
		return err
	}
	speed, _ := e.Attr("link_speed")
	width, err := e.Int("link_width", false, 16)
	if err != nil {
		return err
	}
	if width < 0 || width > 64 {
		return e.Errorf("attribute \"link_width\": %d lanes is not a PCIe width", width)
	}
	bw := PCIeBW(speed, width)
	kind := pciClass(strings.ToLower(strings.TrimSpace(class)))
	switch kind {
	case GPU:
		ge, err := p.deviceChild(e, "gpu", bus)
		if err != nil {
			return err
		}
		if ge == nil {
			return nil // NCCL ignores a GPU device without a <gpu> child
		}
		return p.gpu(ge, parent, cpu, bus, key, bw)
	case NIC:
		ne, err := p.deviceChild(e, "nic", bus)
		if err != nil {
			return err
		}
		if ne == nil {
			return nil
		}
		// Ports of one adapter (functions .0, .1, …) are one NIC to NCCL.
		nicKey := key &^ 0xf
		nic, ok := p.nicByBus[nicKey]
		if !ok {
			nic = p.sys.AddNIC(parent, bus, bw)
			p.nicByBus[nicKey] = nic
		}
		return p.nic(ne, nic)
	}
	// Switches, bridges and any other device class are PCI nodes.
	if _, dup := p.byBus[key]; dup {
		return e.Errorf("busid %s appears twice", bus)
	}
	node := p.sys.AddPCI(parent, bus, bw)
	p.byBus[key] = node
	for _, k := range e.Kids {
		switch k.Name {
		case "pci":
			err = p.pci(k, node, cpu)
		case "pcilink":
			p.pcilinks = append(p.pcilinks, xmlPCILink{elem: k, node: node})
		case "gpu", "nic":
			err = k.Errorf("is inside <pci busid=%q class=%q>, which is not a %s device class", bus, class, strings.ToUpper(k.Name))
		default:
			err = p.unexpected(k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// deviceChild returns the first <name> child of a device's <pci> (NCCL
// reads that one), nil if none; any other child is an error.
func (p *xmlParser) deviceChild(e *xmltree.Elem, name, bus string) (*xmltree.Elem, error) {
	var first *xmltree.Elem
	for _, k := range e.Kids {
		if k.Name != name {
			return nil, k.Errorf("is not allowed inside the <pci> of a %s (busid %s)", strings.ToUpper(name), bus)
		}
		if first == nil {
			first = k
		}
	}
	return first, nil
}

func (p *xmlParser) gpu(e *xmltree.Elem, parent, cpu int, bus string, key uint64, bw float64) error {
	if _, ok := e.Attr("rank"); !ok {
		// NCCL ignores GPUs without a rank (not part of the job); said,
		// since the server then has a GPU fewer than the file shows.
		p.sys.Warnings = append(p.sys.Warnings, e.Errorf("busid %s has no rank attribute: ignored, as NCCL ignores a GPU outside the job", bus).Error())
		return nil
	}
	var g GPUInfo
	var err error
	if g.Dev, err = e.Int("dev", true, 0); err != nil {
		return err
	}
	if g.SM, err = e.Int("sm", true, 0); err != nil {
		return err
	}
	if g.Rank, err = e.Int("rank", true, 0); err != nil {
		return err
	}
	if g.GDR, err = flag(e, "gdr", true); err != nil {
		return err
	}
	if g.Dev < 0 {
		return e.Errorf("attribute \"dev\": %d is negative", g.Dev)
	}
	if g.SM <= 0 {
		return e.Errorf("attribute \"sm\": %d is not a compute capability ×10 such as 80 or 90", g.SM)
	}
	if err := firstUse(p.ranks, e, "rank", g.Rank); err != nil {
		return err
	}
	if err := firstUse(p.devs, e, "dev", g.Dev); err != nil {
		return err
	}
	if _, dup := p.byBus[key]; dup {
		return e.Errorf("busid %s appears twice", bus)
	}
	node := p.sys.AddGPU(parent, bus, bw, g)
	p.byBus[key] = node
	p.gpus = append(p.gpus, xmlGPU{elem: e, node: node, cpu: cpu})
	return nil
}

// firstUse records that e holds attribute attr = v, refusing a v an
// earlier element holds: NCCL numbers ranks, GPUs and net devices once
// each, and a repeat (a hand edit) silently changed the paths.
func firstUse(seen map[int]int, e *xmltree.Elem, attr string, v int) error {
	if line, dup := seen[v]; dup {
		return e.Errorf("%s %d is already used by the <%s> on line %d", attr, v, e.Name, line)
	}
	seen[v] = e.Line
	return nil
}

func (p *xmlParser) nic(e *xmltree.Elem, nic int) error {
	for _, k := range e.Kids {
		if k.Name != "net" {
			return p.unexpected(k)
		}
		if _, ok := k.Attr("dev"); !ok {
			continue // NCCL ignores ports the plugin did not number
		}
		var n NetInfo
		var err error
		n.Name, _ = k.Attr("name")
		if n.Dev, err = k.Int("dev", true, 0); err != nil {
			return err
		}
		if err := firstUse(p.netDevs, k, "dev", n.Dev); err != nil {
			return err
		}
		if n.SpeedMbps, err = k.Float("speed", false, 0); err != nil {
			return err
		}
		if n.SpeedMbps <= 0 {
			p.sys.Warnings = append(p.sys.Warnings, k.Errorf("speed %g Mb/s (%s): taken as 10 Gb/s, as NCCL takes a port that reports no speed", n.SpeedMbps, n.Name).Error())
		}
		if n.Port, err = k.Int("port", false, 0); err != nil {
			return err
		}
		if n.GDR, err = flag(k, "gdr", false); err != nil {
			return err
		}
		if n.LatencyUs, err = k.Float("latency", false, 0); err != nil {
			return err
		}
		p.sys.AddNet(nic, n)
	}
	return nil
}

// gpuLinks adds a GPU's NVLinks and C2C links once every GPU exists.
func (p *xmlParser) gpuLinks(g xmlGPU) error {
	for _, k := range g.elem.Kids {
		switch k.Name {
		case "nvlink":
			target, key, err := p.busID(k, "target")
			if err != nil {
				return err
			}
			count, err := k.Int("count", true, 0)
			if err != nil {
				return err
			}
			if count < 0 || count > 1024 {
				return k.Errorf("attribute \"count\": %d is not a number of links", count)
			}
			tclass, _ := k.Attr("tclass")
			var to int
			switch pciClass(strings.ToLower(strings.TrimSpace(tclass))) {
			case GPU:
				t, ok := p.byBus[key]
				if !ok || p.sys.Nodes[t].Kind != GPU {
					return k.Errorf("target %q is not a GPU of this file", target)
				}
				if t == g.node {
					return k.Errorf("target %q is the GPU itself", target)
				}
				to = t
			case CPU:
				to = g.cpu // POWER: NVLink to the GPU's own CPU
			default:
				to = p.sys.AddNVSwitch() // every NVSwitch is one node to NCCL
			}
			p.sys.AddNVLink(g.node, to, count)
		case "c2c":
			bw, err := k.Float("bw", true, 0)
			if err != nil {
				return err
			}
			count, err := k.Int("count", true, 0)
			if err != nil {
				return err
			}
			if bw < 0 || count < 0 {
				return k.Errorf("negative bandwidth or count")
			}
			if bw*float64(count) > 0 {
				p.sys.AddC2C(g.node, g.cpu, bw*float64(count)/1000) // bw is MB/s per link
			}
		default:
			return k.Errorf("is not a GPU link type (want <nvlink> or <c2c>)")
		}
	}
	return nil
}
