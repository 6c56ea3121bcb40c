package topo

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/units"
)

// Family names (topogen --family).
const (
	SpectrumX      = "spectrum-x"
	HPNSinglePlane = "hpn-single-plane"
	HPNDualPlane   = "hpn-dual-plane"
	DCNSingleToR   = "dcn-single-tor"
	DCNDualToR     = "dcn-dual-tor"
	FatTree        = "fat-tree"
	Dragonfly      = "dragonfly"
)

// Ways a fat-tree is oversubscribed (topogen --oversubscribe-by).
const (
	// OversubHosts puts Oversub*k/2 GPU NICs on each edge switch, which
	// keeps its k/2 uplinks: more servers share an edge as the ratio rises.
	OversubHosts = "hosts"
	// OversubUplinks keeps k/2 GPU NICs on each edge switch and thins its
	// uplinks to round((k/2)/Oversub), at least 1: hosts per edge stay fixed,
	// so fabrics of different ratios compare like for like.
	OversubUplinks = "uplinks"
)

// OversubModes lists the fat-tree oversubscription modes, default first.
var OversubModes = []string{OversubHosts, OversubUplinks}

// Families lists every generator in the order topogen documents them.
var Families = []string{SpectrumX, HPNSinglePlane, HPNDualPlane, DCNSingleToR, DCNDualToR, FatTree, Dragonfly}

// Limits of a generated fabric. Generate refuses, before building
// anything, a fabric beyond any of them, naming what it would build. They
// hold every family at 131,072 GPUs with SimAI's defaults (at most 11,004
// network switches, for the balanced dragonfly, and 638,976 links, for
// hpn-single-plane) with room for other shapes, and keep topogen under a
// few seconds and a few hundred MB.
const (
	MaxGPUs     = 131072
	MaxSwitches = 16384   // network switches (leaves, spines, cores, routers)
	MaxLinks    = 1 << 21 // NVLinks, NIC links and fabric links
)

// Link ranges topogen accepts, from its flags and in SimAI files: the
// stream contract's (stream.MinLinkBps), which every reader checks.
const (
	MinLinkBps       = stream.MinLinkBps
	MaxLinkBps       = stream.MaxLinkBps
	MaxLinkLatencyPs = stream.MaxLinkLatencyPs
)

// CheckLinkBW says whether a link bandwidth in bit/s is within range.
func CheckLinkBW(bps float64) error {
	if !(bps >= MinLinkBps && bps <= MaxLinkBps) {
		return fmt.Errorf("%.4g bit/s is outside %s to %s", bps, units.FormatBandwidth(MinLinkBps), units.FormatBandwidth(MaxLinkBps))
	}
	return nil
}

// CheckLinkLatency says whether a link latency in ps is within range.
func CheckLinkLatency(ps int64) error {
	if ps < 0 || ps > MaxLinkLatencyPs {
		return fmt.Errorf("%s is outside 0 to %s", units.FormatDuration(ps), units.FormatDuration(MaxLinkLatencyPs))
	}
	return nil
}

// ZeroLatency in a Params latency asks for links without latency: 0 takes
// the default there, as every zero in Params does.
const ZeroLatency = -1

// Params configures a generator. Zero values take the family's default
// (SimAI's gen_Topo_Template.py defaults for the five SimAI families).
type Params struct {
	Family              string
	GPUs                int
	GPUsPerServer       int     // default 8
	NVSwitchesPerServer int     // default 1 (0 when a server holds one GPU)
	GPUType             string  // default H100
	NICBW               float64 // bit/s; default per family
	NVLinkBW            float64 // bit/s; default per GPU type
	NVLinkLatencyPs     int64   // default 25 ns; ZeroLatency for none
	NICLatencyPs        int64   // default 500 ns; ZeroLatency for none
	SwitchBW            float64 // switch-to-switch bit/s; default 400 Gbps
	SwitchLatencyPs     int64   // default 500 ns; ZeroLatency for none
	ErrorRate           float64 // per link
	NICNetwork          string  // NetIB, NetRoCE, NetEFA; "" says none (the params leave nic_network out)

	// SimAI families.
	NICsPerASW int // NICs on one ASW (SimAI -npa): 64, or 128 for HPN and DCN+ dual ToR
	PSWs       int // PSW count (SimAI -psn): 64 Spectrum-X, 120 HPN, 8 DCN+
	ASWPerPSW  int // ASW-facing ports of a PSW (SimAI -app): 64, 240 (120 dual plane), 8

	// Fat-tree.
	K         int     // switch radix (even); default: smallest that fits the GPUs
	Oversub   float64 // edge downlink:uplink ratio; default 1
	OversubBy string  // how Oversub is made: OversubHosts (default, "" too) or OversubUplinks

	// Dragonfly (1D, as CODES models it).
	RoutersPerGroup    int // a
	TerminalsPerRouter int // p
	GlobalPerRouter    int // h
	Groups             int // g; default a*h+1 (one global link per group pair)
}

// family holds what differs between SimAI's five generators.
type family struct {
	gpus       int     // default GPU count
	nicBW      float64 // default NIC bandwidth
	nicsPerASW int
	psws       int
	aswPerPSW  int
	rail       bool // GPU i of a server → the ASW of rail i
	tors       int  // NICs per GPU / ASW sets (1 or 2)
	dualPlane  bool // ToR set k → PSW plane k only
}

var simaiFamilies = map[string]family{
	SpectrumX:      {gpus: 4096, nicBW: 400e9, nicsPerASW: 64, psws: 64, aswPerPSW: 64, rail: true, tors: 1},
	HPNSinglePlane: {gpus: 15360, nicBW: 200e9, nicsPerASW: 128, psws: 120, aswPerPSW: 240, rail: true, tors: 2},
	HPNDualPlane:   {gpus: 15360, nicBW: 200e9, nicsPerASW: 128, psws: 120, aswPerPSW: 120, rail: true, tors: 2, dualPlane: true},
	DCNSingleToR:   {gpus: 512, nicBW: 400e9, nicsPerASW: 64, psws: 8, aswPerPSW: 8, tors: 1},
	DCNDualToR:     {gpus: 512, nicBW: 200e9, nicsPerASW: 128, psws: 8, aswPerPSW: 8, tors: 2},
}

// RailOptimized reports whether a family wires GPU i of every server to
// the leaf of rail i.
func RailOptimized(familyName string) bool { return simaiFamilies[familyName].rail }

// SimAIFamily reports whether a family is one of SimAI's five, the ones
// --nics-per-asw, --psw and --asw-per-psw shape.
func SimAIFamily(familyName string) bool {
	_, ok := simaiFamilies[familyName]
	return ok
}

// NICsPerGPU is the number of NIC links each GPU has in a family.
func NICsPerGPU(familyName string) int {
	if f, ok := simaiFamilies[familyName]; ok {
		return f.tors
	}
	return 1
}

// Generate builds a family's fabric. Notes are human-readable remarks for
// stderr (counts derived because the defaults did not fit, for instance).
func Generate(p Params) (*Topology, []string, error) {
	var notes []string
	if err := fillCommon(&p); err != nil {
		return nil, nil, err
	}
	b := newBuilder(p)
	var err error
	if f, ok := simaiFamilies[p.Family]; ok {
		notes, err = b.simai(f)
	} else {
		switch p.Family {
		case FatTree:
			notes, err = b.fatTree()
		case Dragonfly:
			notes, err = b.dragonfly()
		default:
			err = fmt.Errorf("unknown family %q (one of %s)", p.Family, strings.Join(Families, ", "))
		}
	}
	if err != nil {
		return nil, nil, err
	}
	t := b.t
	if err := Validate(t); err != nil {
		return nil, nil, fmt.Errorf("internal: generated %s fails validation: %v", p.Family, err)
	}
	if err := CheckNICLinks(t, NICsPerGPU(p.Family)); err != nil {
		return nil, nil, fmt.Errorf("internal: %v", err)
	}
	if d, err := Diameter(t); err != nil {
		return nil, nil, fmt.Errorf("internal: %v", err)
	} else {
		t.Params["diameter_hops"] = strconv.Itoa(d)
	}
	return t, notes, nil
}

func fillCommon(p *Params) error {
	if _, ok := simaiFamilies[p.Family]; !ok && p.Family != FatTree && p.Family != Dragonfly {
		return fmt.Errorf("unknown family %q (one of %s)", p.Family, strings.Join(Families, ", "))
	}
	if p.GPUType == "" {
		p.GPUType = "H100"
	}
	spec, ok := GPUSpecs[p.GPUType]
	if !ok {
		return fmt.Errorf("unknown GPU type %q (one of %s)", p.GPUType, strings.Join(GPUTypeNames(), ", "))
	}
	if p.NICNetwork != "" {
		if err := CheckNICNetwork(p.NICNetwork); err != nil {
			return fmt.Errorf("--nic-network %w", err)
		}
	}
	if p.GPUsPerServer == 0 {
		p.GPUsPerServer = 8
	}
	if p.GPUsPerServer < 0 {
		return fmt.Errorf("--gpus-per-server %d must be positive", p.GPUsPerServer)
	}
	if p.NVSwitchesPerServer == 0 && p.GPUsPerServer > 1 {
		p.NVSwitchesPerServer = 1
	}
	if p.NVSwitchesPerServer < 0 {
		return fmt.Errorf("--nvswitches-per-server %d must not be negative", p.NVSwitchesPerServer)
	}
	if p.NVLinkBW == 0 {
		p.NVLinkBW = spec.NVLinkBps()
	}
	for _, l := range []struct {
		v   *int64
		def int64
	}{{&p.NVLinkLatencyPs, 25_000}, {&p.NICLatencyPs, 500_000}, {&p.SwitchLatencyPs, 500_000}} {
		switch *l.v {
		case 0:
			*l.v = l.def
		case ZeroLatency:
			*l.v = 0
		}
	}
	if p.SwitchBW == 0 {
		p.SwitchBW = 400e9
	}
	for _, bw := range []struct {
		name string
		v    float64
	}{{"--nic-bw", p.NICBW}, {"--nvlink-bw", p.NVLinkBW}, {"--switch-bw", p.SwitchBW}} {
		if bw.v == 0 && bw.name == "--nic-bw" {
			continue // the family's default
		}
		if err := CheckLinkBW(bw.v); err != nil {
			return fmt.Errorf("%s: %v", bw.name, err)
		}
	}
	for _, lat := range []struct {
		name string
		v    int64
	}{{"--nvlink-latency", p.NVLinkLatencyPs}, {"--nic-latency", p.NICLatencyPs}, {"--switch-latency", p.SwitchLatencyPs}} {
		if err := CheckLinkLatency(lat.v); err != nil {
			return fmt.Errorf("%s: %v", lat.name, err)
		}
	}
	if !(p.ErrorRate >= 0 && p.ErrorRate < 1) {
		return fmt.Errorf("--error-rate %g must be in [0,1)", p.ErrorRate)
	}
	if p.GPUs < 0 {
		return fmt.Errorf("--gpus %d must be positive", p.GPUs)
	}
	if p.GPUs > MaxGPUs {
		return fmt.Errorf("--gpus %d is beyond topogen's limit of %d GPUs", p.GPUs, MaxGPUs)
	}
	if p.GPUsPerServer > MaxGPUs {
		return fmt.Errorf("--gpus-per-server %d is beyond topogen's limit of %d GPUs", p.GPUsPerServer, MaxGPUs)
	}
	return nil
}

// checkSize refuses a fabric beyond the limits before it is built: what
// says which fabric (its flags), the counts are what it would hold. Counts
// are float64 so that absurd flags cannot overflow them.
func (b *builder) checkSize(what string, gpus, switches, nicsPerGPU, fabricLinks float64) error {
	p := &b.p
	nvs := math.Floor(gpus/float64(p.GPUsPerServer)) * float64(p.NVSwitchesPerServer)
	links := gpus*float64(p.NVSwitchesPerServer) + gpus*nicsPerGPU + fabricLinks
	if gpus <= MaxGPUs && switches <= MaxSwitches && links <= MaxLinks {
		return nil
	}
	return fmt.Errorf("%s would build %s nodes (%s GPUs, %s NVSwitches, %s network switches) and %s links, beyond topogen's limits of %d GPUs, %d network switches and %d links",
		what, count(gpus+nvs+switches), count(gpus), count(nvs), count(switches), count(links), MaxGPUs, MaxSwitches, MaxLinks)
}

// count prints a node or link count: exact while it is, else 3 digits.
func count(v float64) string {
	if v < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// builder appends nodes and links in SimAI's id order.
type builder struct {
	p Params
	t *Topology
}

func newBuilder(p Params) *builder {
	return &builder{p: p, t: &Topology{
		Family: p.Family, GPUType: p.GPUType, GPUsPerServer: p.GPUsPerServer,
		NVSwitchesPerServer: p.NVSwitchesPerServer, Params: map[string]string{},
	}}
}

func (b *builder) node(kind, role string, server, group int32, plane int8) int32 {
	id := int32(len(b.t.Nodes))
	b.t.Nodes = append(b.t.Nodes, stream.Node{ID: id, Kind: kind, Role: role, Tier: roleTier[role], Server: server, Group: group, Plane: plane})
	return id
}

func (b *builder) link(a, c int32, bw float64, lat int64, kind string) {
	b.t.Links = append(b.t.Links, stream.Link{A: a, B: c, BWbps: bw, LatencyPs: lat, ErrorRate: b.p.ErrorRate, Kind: kind})
}

// nicLink links a GPU to its switch, one of its n NIC links, at the NIC
// rate or what the GPU's PCIe link carries of it (GPUSpec.NICLinkBps); a
// cap is shown in the params as nic_link_bw.
func (b *builder) nicLink(gpu, sw int32, n int) {
	bw := GPUSpecs[b.p.GPUType].NICLinkBps(b.p.NICBW, n)
	if bw < b.p.NICBW {
		b.t.Params[ParamNICLinkBW] = units.FormatBandwidth(bw)
	}
	b.link(gpu, sw, bw, b.p.NICLatencyPs, stream.LinkNIC)
}

// gpusAndNVSwitches adds GPUs (group filled by the caller) and each server's
// NVSwitches.
func (b *builder) gpusAndNVSwitches(gpus int, groupOf func(gpu int) int32) (firstNVS int32, err error) {
	p := b.p
	if gpus <= 0 {
		return 0, fmt.Errorf("--gpus %d must be positive", gpus)
	}
	if gpus%p.GPUsPerServer != 0 {
		return 0, fmt.Errorf("--gpus %d is not a multiple of --gpus-per-server %d", gpus, p.GPUsPerServer)
	}
	b.t.GPUs = gpus
	for g := 0; g < gpus; g++ {
		b.node(stream.NodeGPU, RoleGPU, int32(g/p.GPUsPerServer), groupOf(g), -1)
	}
	firstNVS = int32(len(b.t.Nodes))
	for s := 0; s < gpus/p.GPUsPerServer; s++ {
		for k := 0; k < p.NVSwitchesPerServer; k++ {
			b.node(stream.NodeNVSwitch, RoleNVSwitch, int32(s), groupOf(s*p.GPUsPerServer), -1)
		}
	}
	b.t.Params["gpus"] = strconv.Itoa(gpus)
	b.t.Params["gpus_per_server"] = strconv.Itoa(p.GPUsPerServer)
	b.t.Params["nvswitches_per_server"] = strconv.Itoa(p.NVSwitchesPerServer)
	b.t.Params["gpu_type"] = p.GPUType
	b.t.Params["nvlink_bw"] = units.FormatBandwidth(p.NVLinkBW)
	b.t.Params["nvlink_latency"] = units.FormatDuration(p.NVLinkLatencyPs)
	b.t.Params["nic_latency"] = units.FormatDuration(p.NICLatencyPs)
	b.t.Params["switch_bw"] = units.FormatBandwidth(p.SwitchBW)
	b.t.Params["switch_latency"] = units.FormatDuration(p.SwitchLatencyPs)
	b.t.Params["error_rate"] = strconv.FormatFloat(p.ErrorRate, 'g', -1, 64)
	if p.NICNetwork != "" {
		b.t.Params[ParamNICNetwork] = p.NICNetwork
	}
	return firstNVS, nil
}

// nvlinks connects GPU g to its server's NVSwitches.
func (b *builder) nvlinks(g int, firstNVS int32) {
	p := b.p
	base := firstNVS + int32((g/p.GPUsPerServer)*p.NVSwitchesPerServer)
	for k := 0; k < p.NVSwitchesPerServer; k++ {
		b.link(int32(g), base+int32(k), p.NVLinkBW, p.NVLinkLatencyPs, stream.LinkNVLink)
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// simai builds one of SimAI's five families with its wiring: rail-optimized
// families connect GPU i of a server to the ASW of rail i of its segment;
// DCN+ connects every GPU of a segment to the segment's ASW(s). Every ASW
// connects to every PSW (of its plane, for dual plane).
func (b *builder) simai(f family) ([]string, error) {
	p := &b.p
	var notes []string
	if p.GPUs == 0 {
		p.GPUs = f.gpus
	}
	if p.NICBW == 0 {
		p.NICBW = f.nicBW
	}
	if p.NICsPerASW == 0 {
		p.NICsPerASW = f.nicsPerASW
	}
	if p.PSWs == 0 {
		p.PSWs = f.psws
	}
	userASWPerPSW := p.ASWPerPSW != 0
	if !userASWPerPSW {
		p.ASWPerPSW = f.aswPerPSW
	}
	if p.NICsPerASW <= 0 || p.PSWs <= 0 || p.ASWPerPSW <= 0 {
		return nil, fmt.Errorf("--nics-per-asw, --psw and --asw-per-psw must be positive")
	}
	switch {
	case p.NICsPerASW > MaxGPUs:
		return nil, fmt.Errorf("--nics-per-asw %d is beyond topogen's limit of %d GPUs", p.NICsPerASW, MaxGPUs)
	case p.PSWs > MaxSwitches:
		return nil, fmt.Errorf("--psw %d is beyond topogen's limit of %d network switches", p.PSWs, MaxSwitches)
	case p.ASWPerPSW > MaxSwitches:
		return nil, fmt.Errorf("--asw-per-psw %d is beyond topogen's limit of %d network switches", p.ASWPerPSW, MaxSwitches)
	}
	if f.dualPlane && p.PSWs%2 != 0 {
		return nil, fmt.Errorf("--psw %d: a dual-plane fabric splits PSWs evenly over two planes", p.PSWs)
	}
	// One segment is the set of servers sharing a group of ASWs.
	aswPerSet := 1 // ASWs per segment per ToR set
	gpusPerSeg := p.NICsPerASW
	if f.rail {
		aswPerSet = p.GPUsPerServer
		gpusPerSeg = p.NICsPerASW * p.GPUsPerServer
	}
	segments := ceilDiv(p.GPUs, gpusPerSeg)
	aswPerSeg := aswPerSet * f.tors
	// A PSW must have a port for each ASW it connects to (per plane when the
	// ToR sets go to separate planes, across both sets otherwise).
	// SimAI's HPN single-plane check counts one ToR set only; counting both
	// is what the PSW's ports require, and still admits its 15360-GPU default.
	aswPerPSWNeeded := segments * aswPerSet
	if !f.dualPlane {
		aswPerPSWNeeded *= f.tors
	}
	if aswPerPSWNeeded > p.ASWPerPSW {
		if userASWPerPSW {
			return nil, fmt.Errorf("%d GPUs need %d segments of %d GPUs: %d ASWs per PSW, more than --asw-per-psw %d",
				p.GPUs, segments, gpusPerSeg, aswPerPSWNeeded, p.ASWPerPSW)
		}
		notes = append(notes, fmt.Sprintf("%d GPUs need %d segments of %d GPUs, beyond SimAI's default of %d ASWs per PSW (its generator stops here); using --asw-per-psw %d",
			p.GPUs, segments, gpusPerSeg, p.ASWPerPSW, aswPerPSWNeeded))
		p.ASWPerPSW = aswPerPSWNeeded
	}
	fabric := float64(segments*aswPerSeg) * float64(p.PSWs)
	if f.dualPlane {
		fabric /= 2
	}
	if err := b.checkSize(fmt.Sprintf("%s with %d GPUs, %d GPUs per segment and %d PSWs", p.Family, p.GPUs, gpusPerSeg, p.PSWs),
		float64(p.GPUs), float64(segments*aswPerSeg+p.PSWs), float64(f.tors), fabric); err != nil {
		return nil, err
	}
	firstNVS, err := b.gpusAndNVSwitches(p.GPUs, func(g int) int32 { return int32(g / gpusPerSeg) })
	if err != nil {
		return nil, err
	}
	// ASW ids: set 0 (all segments), then set 1; then PSWs (plane 0, plane 1).
	asws := segments * aswPerSet
	firstASW := make([]int32, f.tors)
	for k := 0; k < f.tors; k++ {
		firstASW[k] = int32(len(b.t.Nodes))
		plane := int8(-1)
		if f.tors == 2 {
			plane = int8(k)
		}
		for a := 0; a < asws; a++ {
			b.node(stream.NodeSwitch, RoleASW, -1, int32(a/aswPerSet), plane)
		}
	}
	firstPSW := int32(len(b.t.Nodes))
	for s := 0; s < p.PSWs; s++ {
		plane := int8(-1)
		if f.dualPlane {
			plane = int8(s / (p.PSWs / 2))
		}
		b.node(stream.NodeSwitch, RolePSW, -1, -1, plane)
	}
	for g := 0; g < p.GPUs; g++ {
		b.nvlinks(g, firstNVS)
		seg := g / gpusPerSeg
		a := seg * aswPerSet
		if f.rail {
			a += g % p.GPUsPerServer
		}
		for k := 0; k < f.tors; k++ {
			b.nicLink(int32(g), firstASW[k]+int32(a), f.tors)
		}
	}
	for k := 0; k < f.tors; k++ {
		lo, hi := 0, p.PSWs
		if f.dualPlane {
			lo, hi = k*p.PSWs/2, (k+1)*p.PSWs/2
		}
		for a := 0; a < asws; a++ {
			for s := lo; s < hi; s++ {
				b.link(firstASW[k]+int32(a), firstPSW+int32(s), p.SwitchBW, p.SwitchLatencyPs, stream.LinkFabric)
			}
		}
	}
	b.t.Params["nic_bw"] = units.FormatBandwidth(p.NICBW)
	b.t.Params["nics_per_gpu"] = strconv.Itoa(f.tors)
	b.t.Params["nics_per_asw"] = strconv.Itoa(p.NICsPerASW)
	b.t.Params["gpus_per_segment"] = strconv.Itoa(gpusPerSeg)
	b.t.Params["segments"] = strconv.Itoa(segments)
	b.t.Params["asw_per_segment"] = strconv.Itoa(aswPerSeg)
	b.t.Params["asw"] = strconv.Itoa(asws * f.tors)
	b.t.Params["psw"] = strconv.Itoa(p.PSWs)
	b.t.Params["asw_per_psw"] = strconv.Itoa(p.ASWPerPSW)
	b.t.Params["rail_optimized"] = strconv.FormatBool(f.rail)
	return notes, nil
}
