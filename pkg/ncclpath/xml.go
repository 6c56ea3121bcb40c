package ncclpath

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// XMLError locates a problem in a topology XML file.
type XMLError struct {
	File string
	Line int
	Elem string // element name without brackets, "" for syntax errors
	Msg  string
}

func (e *XMLError) Error() string {
	s := fmt.Sprintf("%s: line %d: ", e.File, e.Line)
	if e.Elem != "" {
		s += "<" + e.Elem + "> "
	}
	return s + e.Msg
}

// Limits that keep hostile input cheap; real dumps are far below them.
const (
	maxXMLDepth    = 64
	maxXMLElements = 20000
)

type xmlElem struct {
	name   string
	line   int
	attrs  []xml.Attr
	kids   []*xmlElem
	parent *xmlElem
}

func (e *xmlElem) attr(name string) (string, bool) {
	for _, a := range e.attrs {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

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
	root, err := readXMLTree(r, name)
	if err != nil {
		return nil, err
	}
	sysName := strings.TrimSuffix(filepath.Base(name), ".xml")
	p := &xmlParser{file: name, sys: NewSystem(sysName), byBus: map[uint64]int{}, nicByBus: map[uint64]int{},
		ranks: map[int]int{}, numas: map[int]bool{}}
	if err := p.system(root); err != nil {
		return nil, err
	}
	if err := p.sys.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return p.sys, nil
}

// readXMLTree parses the document into elements with their line numbers.
func readXMLTree(r io.Reader, file string) (*xmlElem, error) {
	d := xml.NewDecoder(r)
	var root, cur *xmlElem
	n := 0
	depth := 0
	for {
		// The end of the previous token is where this one starts, so its line
		// is the line of the tag we are about to read.
		line, _ := d.InputPos()
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return nil, &XMLError{File: file, Line: se.Line, Msg: "malformed XML: " + se.Msg}
			}
			l, _ := d.InputPos()
			return nil, &XMLError{File: file, Line: l, Msg: "malformed XML: " + err.Error()}
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n++
			depth++
			if n > maxXMLElements {
				return nil, &XMLError{File: file, Line: line, Elem: t.Name.Local, Msg: fmt.Sprintf("too many elements (more than %d)", maxXMLElements)}
			}
			if depth > maxXMLDepth {
				return nil, &XMLError{File: file, Line: line, Elem: t.Name.Local, Msg: fmt.Sprintf("nested more than %d levels deep", maxXMLDepth)}
			}
			e := &xmlElem{name: t.Name.Local, line: line, attrs: t.Attr, parent: cur}
			if cur == nil {
				if root != nil {
					return nil, &XMLError{File: file, Line: line, Elem: e.name, Msg: "after the end of <system>: a file holds one <system>"}
				}
				root = e
			} else {
				cur.kids = append(cur.kids, e)
			}
			cur = e
		case xml.EndElement:
			depth--
			if cur != nil {
				cur = cur.parent
			}
		}
	}
	if root == nil {
		return nil, &XMLError{File: file, Line: 1, Msg: "no <system> element (is this an NCCL topology XML file?)"}
	}
	if root.name != "system" {
		return nil, &XMLError{File: file, Line: root.line, Elem: root.name, Msg: "is not <system>: an NCCL topology file starts with <system version=\"1\">"}
	}
	return root, nil
}

type xmlParser struct {
	file     string
	sys      *System
	byBus    map[uint64]int // bus id → GPU or PCI node
	nicByBus map[uint64]int // bus id with function 0 → NIC node
	ranks    map[int]int    // rank → line of its <gpu>
	numas    map[int]bool
	gpus     []xmlGPU
	pcilinks []xmlPCILink
}

type xmlGPU struct {
	elem *xmlElem
	node int
	cpu  int
}

type xmlPCILink struct {
	elem *xmlElem
	node int
}

func (p *xmlParser) errf(e *xmlElem, format string, args ...any) error {
	return &XMLError{File: p.file, Line: e.line, Elem: e.name, Msg: fmt.Sprintf(format, args...)}
}

func (p *xmlParser) unexpected(e *xmlElem) error {
	switch e.name {
	case "gpu":
		return p.errf(e, "has no PCI parent: a <gpu> must sit inside the <pci> element of its device (class 0x03xxxx), not inside <%s>", e.parent.name)
	case "net":
		return p.errf(e, "must sit inside a <nic>, not inside <%s>", e.parent.name)
	case "nvlink", "c2c":
		return p.errf(e, "must sit inside a <gpu>, not inside <%s>", e.parent.name)
	case "system", "cpu", "pci", "nic", "pcilink":
		return p.errf(e, "is not allowed inside <%s>", e.parent.name)
	}
	return p.errf(e, "is not an NCCL topology element (inside <%s>)", e.parent.name)
}

func (p *xmlParser) str(e *xmlElem, name string) (string, error) {
	v, ok := e.attr(name)
	if !ok {
		return "", p.errf(e, "missing attribute %q", name)
	}
	return v, nil
}

// integer reads an integer attribute the way strtol(s, NULL, 0) would
// accept it (decimal, 0x hex); def is used when it is absent and !required.
func (p *xmlParser) integer(e *xmlElem, name string, required bool, def int) (int, error) {
	v, ok := e.attr(name)
	if !ok {
		if required {
			return 0, p.errf(e, "missing attribute %q", name)
		}
		return def, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 32)
	if err != nil {
		return 0, p.errf(e, "attribute %q: %q is not an integer", name, v)
	}
	return int(n), nil
}

func (p *xmlParser) number(e *xmlElem, name string, required bool, def float64) (float64, error) {
	v, ok := e.attr(name)
	if !ok {
		if required {
			return 0, p.errf(e, "missing attribute %q", name)
		}
		return def, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f != f || f > 1e15 || f < -1e15 {
		return 0, p.errf(e, "attribute %q: %q is not a number", name, v)
	}
	return f, nil
}

func (p *xmlParser) flag(e *xmlElem, name string, required bool) (bool, error) {
	n, err := p.integer(e, name, required, 0)
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

func (p *xmlParser) busID(e *xmlElem, name string) (string, uint64, error) {
	s, err := p.str(e, name)
	if err != nil {
		return "", 0, err
	}
	k, ok := busKey(s)
	if !ok {
		return "", 0, p.errf(e, "attribute %q: %q is not a PCI bus id like 0000:07:00.0", name, s)
	}
	return strings.ToLower(s), k, nil
}

func (p *xmlParser) system(e *xmlElem) error {
	if v, ok := e.attr("version"); ok && strings.TrimSpace(v) != "1" {
		return p.errf(e, "version %q is not supported (NCCL topology files are version 1)", v)
	}
	for _, k := range e.kids {
		if k.name != "cpu" {
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

func (p *xmlParser) cpu(e *xmlElem) error {
	numa, err := p.integer(e, "numaid", true, 0)
	if err != nil {
		return err
	}
	if p.numas[numa] {
		return p.errf(e, "numaid %d appears twice", numa)
	}
	p.numas[numa] = true
	info := CPUInfo{NUMA: numa}
	arch, err := p.str(e, "arch")
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
		return p.errf(e, "attribute \"arch\": %q is not x86_64, arm64 or ppc64", arch)
	}
	if info.Arch == ArchX86 {
		vendor, err := p.str(e, "vendor")
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
	if info.FamilyID, err = p.integer(e, "familyid", false, 0); err != nil {
		return err
	}
	if info.ModelID, err = p.integer(e, "modelid", false, 0); err != nil {
		return err
	}
	c := p.sys.AddCPU(info)
	for _, k := range e.kids {
		switch k.name {
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

func (p *xmlParser) pci(e *xmlElem, parent, cpu int) error {
	bus, key, err := p.busID(e, "busid")
	if err != nil {
		return err
	}
	class, err := p.str(e, "class")
	if err != nil {
		return err
	}
	speed, _ := e.attr("link_speed")
	width, err := p.integer(e, "link_width", false, 16)
	if err != nil {
		return err
	}
	if width < 0 || width > 64 {
		return p.errf(e, "attribute \"link_width\": %d lanes is not a PCIe width", width)
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
		return p.errf(e, "busid %s appears twice", bus)
	}
	node := p.sys.AddPCI(parent, bus, bw)
	p.byBus[key] = node
	for _, k := range e.kids {
		switch k.name {
		case "pci":
			err = p.pci(k, node, cpu)
		case "pcilink":
			p.pcilinks = append(p.pcilinks, xmlPCILink{elem: k, node: node})
		case "gpu", "nic":
			err = p.errf(k, "is inside <pci busid=%q class=%q>, which is not a %s device class", bus, class, strings.ToUpper(k.name))
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
func (p *xmlParser) deviceChild(e *xmlElem, name, bus string) (*xmlElem, error) {
	var first *xmlElem
	for _, k := range e.kids {
		if k.name != name {
			return nil, p.errf(k, "is not allowed inside the <pci> of a %s (busid %s)", strings.ToUpper(name), bus)
		}
		if first == nil {
			first = k
		}
	}
	return first, nil
}

func (p *xmlParser) gpu(e *xmlElem, parent, cpu int, bus string, key uint64, bw float64) error {
	if _, ok := e.attr("rank"); !ok {
		return nil // NCCL ignores GPUs without a rank (not part of the job)
	}
	var g GPUInfo
	var err error
	if g.Dev, err = p.integer(e, "dev", true, 0); err != nil {
		return err
	}
	if g.SM, err = p.integer(e, "sm", true, 0); err != nil {
		return err
	}
	if g.Rank, err = p.integer(e, "rank", true, 0); err != nil {
		return err
	}
	if g.GDR, err = p.flag(e, "gdr", true); err != nil {
		return err
	}
	if g.Dev < 0 {
		return p.errf(e, "attribute \"dev\": %d is negative", g.Dev)
	}
	if g.SM <= 0 {
		return p.errf(e, "attribute \"sm\": %d is not a compute capability ×10 such as 80 or 90", g.SM)
	}
	if line, dup := p.ranks[g.Rank]; dup {
		return p.errf(e, "rank %d is already used by the <gpu> on line %d", g.Rank, line)
	}
	p.ranks[g.Rank] = e.line
	if _, dup := p.byBus[key]; dup {
		return p.errf(e, "busid %s appears twice", bus)
	}
	node := p.sys.AddGPU(parent, bus, bw, g)
	p.byBus[key] = node
	p.gpus = append(p.gpus, xmlGPU{elem: e, node: node, cpu: cpu})
	return nil
}

func (p *xmlParser) nic(e *xmlElem, nic int) error {
	for _, k := range e.kids {
		if k.name != "net" {
			return p.unexpected(k)
		}
		if _, ok := k.attr("dev"); !ok {
			continue // NCCL ignores ports the plugin did not number
		}
		var n NetInfo
		var err error
		n.Name, _ = k.attr("name")
		if n.Dev, err = p.integer(k, "dev", true, 0); err != nil {
			return err
		}
		if n.SpeedMbps, err = p.number(k, "speed", false, 0); err != nil {
			return err
		}
		if n.Port, err = p.integer(k, "port", false, 0); err != nil {
			return err
		}
		if n.GDR, err = p.flag(k, "gdr", false); err != nil {
			return err
		}
		if n.LatencyUs, err = p.number(k, "latency", false, 0); err != nil {
			return err
		}
		p.sys.AddNet(nic, n)
	}
	return nil
}

// gpuLinks adds a GPU's NVLinks and C2C links once every GPU exists.
func (p *xmlParser) gpuLinks(g xmlGPU) error {
	for _, k := range g.elem.kids {
		switch k.name {
		case "nvlink":
			target, key, err := p.busID(k, "target")
			if err != nil {
				return err
			}
			count, err := p.integer(k, "count", true, 0)
			if err != nil {
				return err
			}
			if count < 0 || count > 1024 {
				return p.errf(k, "attribute \"count\": %d is not a number of links", count)
			}
			tclass, _ := k.attr("tclass")
			var to int
			switch pciClass(strings.ToLower(strings.TrimSpace(tclass))) {
			case GPU:
				t, ok := p.byBus[key]
				if !ok || p.sys.Nodes[t].Kind != GPU {
					return p.errf(k, "target %q is not a GPU of this file", target)
				}
				if t == g.node {
					return p.errf(k, "target %q is the GPU itself", target)
				}
				to = t
			case CPU:
				to = g.cpu // POWER: NVLink to the GPU's own CPU
			default:
				to = p.sys.AddNVSwitch() // every NVSwitch is one node to NCCL
			}
			p.sys.AddNVLink(g.node, to, count)
		case "c2c":
			bw, err := p.number(k, "bw", true, 0)
			if err != nil {
				return err
			}
			count, err := p.integer(k, "count", true, 0)
			if err != nil {
				return err
			}
			if bw < 0 || count < 0 {
				return p.errf(k, "negative bandwidth or count")
			}
			if bw*float64(count) > 0 {
				p.sys.AddC2C(g.node, g.cpu, bw*float64(count)/1000) // bw is MB/s per link
			}
		default:
			return p.errf(k, "is not a GPU link type (want <nvlink> or <c2c>)")
		}
	}
	return nil
}
