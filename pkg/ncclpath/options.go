package ncclpath

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Version is an NCCL major.minor version.
type Version struct{ Major, Minor int }

// DefaultVersion is the NCCL version whose behaviour Compute reproduces when
// Options.Version is empty.
var DefaultVersion = Version{2, 27}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

func (v Version) atLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// ParseVersion parses "2.27", "2.27.7", "2.27.7-1" or "v2.27.7-1". Only
// major version 2 exists; the patch level never changes path computation.
func ParseVersion(s string) (Version, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexByte(t, '-'); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("invalid NCCL version %q: want MAJOR.MINOR such as 2.27", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("invalid NCCL version %q: want MAJOR.MINOR such as 2.27", s)
		}
		n[i] = v
	}
	if n[0] != 2 {
		return Version{}, fmt.Errorf("unsupported NCCL version %q: only 2.x has this path model", s)
	}
	return Version{n[0], n[1]}, nil
}

// Toggle is a setting that NCCL leaves on "auto" unless the user sets it.
type Toggle int8

// Toggle values; the zero value is Auto.
const (
	Auto Toggle = iota
	Off
	On
)

// Options are the NCCL settings that change path computation. The zero
// value is NCCL's default behaviour for DefaultVersion.
type Options struct {
	// Version is the NCCL version to reproduce ("2.19", "2.27.7-1", …); empty
	// means DefaultVersion. The BFS update rule, default P2P level, PXN and
	// GDR rules and some bandwidth constants depend on it.
	Version string

	// P2PLevel is NCCL_P2P_LEVEL: the worst GPU↔GPU path type that may use
	// P2P (LOC…SYS or a legacy number); empty means NCCL's default for the
	// CPU. P2PDisable is NCCL_P2P_DISABLE=1 and wins over P2PLevel.
	P2PLevel   string
	P2PDisable bool

	// GDRLevel is NCCL_NET_GDR_LEVEL, the worst GPU↔NIC path type that may
	// use GPUDirect RDMA; empty means PXB (P2C from 2.30).
	GDRLevel string
	// GDRRead is NCCL_NET_GDR_READ: GPUDirect for sends (the NIC reads GPU
	// memory). Auto enables it for SM ≥ 80, and below that only when the GPU
	// has an NVLink peer or is alone.
	GDRRead Toggle
	// GDRC2C is NCCL_NET_GDR_C2C: count a P2C GPU↔NIC path as C2C for GDR
	// (Auto: on from 2.27).
	GDRC2C Toggle

	// PXNDisable is NCCL_PXN_DISABLE=1: no sends through a peer GPU's NIC.
	PXNDisable bool
	// PXNC2C is NCCL_PXN_C2C: a peer reaching the NIC through P2C may relay
	// (Auto: on from 2.28).
	PXNC2C Toggle
	// NVBDisable is NCCL_NVB_DISABLE=1: GPUs never relay GPU↔GPU traffic.
	NVBDisable bool

	// Rank is the rank whose GPU domain survives trimming (GPUs that cannot
	// reach it other than through the network are removed). If no GPU has
	// this rank, the first GPU's domain is kept, as NCCL does.
	Rank int
	// NRanks is the communicator size, 0 if unknown. When the GPUs left after
	// trimming are the whole communicator, NCCL removes the NICs.
	NRanks int
}

// profile is Options resolved against a version: every rule Compute needs.
type profile struct {
	ver Version

	rule        updateRule
	gpuTransit  bool // NVB: a GPU may relay NVLink traffic (2.8+)
	legacyPXB   bool // ≤2.7: PXB is "a PCI hop on a path longer than 3 hops"
	p2pDefault  p2pDefaultRule
	p2pUser     PathType
	hasP2PUser  bool
	gdrLevel    PathType
	gdrRead     Toggle
	gdrReadAll  bool // ≤2.7: the NVLink-peer condition applies to every SM
	gdrC2CMap   bool // 2.26–2.29: a P2C distance counts as C2C for GDR
	gdrBelowPHB bool // 2.21+: GDR detours only for paths better than PHB
	c2cLinks    bool // 2.26+: <c2c> links exist
	p2c         bool // 2.27+: C2C+PHB merges into P2C
	p2cLocal    bool // 2.30: the P2C lowering only for the GPU's local NICs
	pxn         bool
	pxnC2C      bool
	pxnWorse    PathType // PXN replaces a path whose type is above this
	pxnPeerGDR  bool     // 2.30: the relay GPU must have GDR to the NIC
	nvbDisable  bool
	maxChannels int
}

type updateRule uint8

const (
	// ruleBottleneck (≤2.7, the seed's rule): replace a path whenever the new
	// one has a strictly larger bottleneck bandwidth.
	ruleBottleneck updateRule = iota
	// ruleHopsThenBW (2.8–2.29): replace only with a path that is not longer
	// in hops and has strictly larger bandwidth — fewest hops first.
	ruleHopsThenBW
	// ruleTypeBWHops (2.30): better type, then higher bandwidth, then fewer hops.
	ruleTypeBWHops
)

type p2pDefaultRule uint8

const (
	p2pLegacy            p2pDefaultRule = iota // ≤2.7: SYS; ARM and Intel Broadwell PXB; other Intel PHB
	p2pSysExceptIntelARM                       // 2.8–2.22: SYS; ARM, Intel and Zhaoxin PXB
	p2pPXBExceptSmallAMD                       // 2.23+: PXB; AMD with ≤2 GPUs SYS
)

func (o Options) profile() (*profile, error) {
	v := DefaultVersion
	if o.Version != "" {
		var err error
		if v, err = ParseVersion(o.Version); err != nil {
			return nil, err
		}
	}
	p := &profile{ver: v, gdrRead: o.GDRRead, nvbDisable: o.NVBDisable}
	switch {
	case !v.atLeast(2, 8):
		p.rule, p.legacyPXB, p.gdrReadAll = ruleBottleneck, true, true
	case !v.atLeast(2, 30):
		p.rule, p.gpuTransit = ruleHopsThenBW, true
	default:
		p.rule, p.gpuTransit = ruleTypeBWHops, true
	}
	switch {
	case !v.atLeast(2, 8):
		p.p2pDefault = p2pLegacy
	case !v.atLeast(2, 23):
		p.p2pDefault = p2pSysExceptIntelARM
	default:
		p.p2pDefault = p2pPXBExceptSmallAMD
	}
	if o.P2PDisable {
		p.p2pUser, p.hasP2PUser = PathLOC, true
	} else if o.P2PLevel != "" {
		l, err := ParseLevel(o.P2PLevel)
		if err != nil {
			return nil, fmt.Errorf("NCCL_P2P_LEVEL: %v", err)
		}
		p.p2pUser, p.hasP2PUser = l, true
	}
	p.c2cLinks = v.atLeast(2, 26)
	p.p2c = v.atLeast(2, 27)
	p.p2cLocal = v.atLeast(2, 30)
	gdrC2C := o.GDRC2C == On || (o.GDRC2C == Auto && v.atLeast(2, 27))
	p.gdrC2CMap = gdrC2C && v.atLeast(2, 26) && !v.atLeast(2, 30)
	p.gdrLevel = PathPXB
	if v.atLeast(2, 30) && gdrC2C {
		p.gdrLevel = PathP2C
	}
	if o.GDRLevel != "" {
		l, err := ParseLevel(o.GDRLevel)
		if err != nil {
			return nil, fmt.Errorf("NCCL_NET_GDR_LEVEL: %v", err)
		}
		p.gdrLevel = l
	}
	p.gdrBelowPHB = v.atLeast(2, 21)
	p.pxn = v.atLeast(2, 12) && !o.PXNDisable
	switch o.PXNC2C {
	case On:
		p.pxnC2C = true
	case Auto:
		p.pxnC2C = v.atLeast(2, 28)
	}
	p.pxnWorse = PathPXB
	if v.atLeast(2, 27) {
		p.pxnWorse = PathPXN
	}
	p.pxnPeerGDR = v.atLeast(2, 30)
	p.maxChannels = 32
	if v.atLeast(2, 25) {
		p.maxChannels = 64
	}
	return p, nil
}

// Validate checks the options without computing anything.
func (o Options) Validate() error {
	_, err := o.profile()
	return err
}

// OptionsFromEnv fills Options from NCCL's environment variables the way NCCL
// reads them: NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, NCCL_NET_GDR_LEVEL,
// NCCL_NET_GDR_READ, NCCL_NET_GDR_C2C, NCCL_PXN_DISABLE, NCCL_PXN_C2C and
// NCCL_NVB_DISABLE. lookup is os.LookupEnv when nil. Unlike NCCL, which
// ignores a value it cannot parse, it returns an error naming the variable,
// so a typo does not silently simulate something else. Version, Rank and
// NRanks are not environment settings and stay zero.
func OptionsFromEnv(lookup func(string) (string, bool)) (Options, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var o Options
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		return strings.TrimSpace(v), ok && strings.TrimSpace(v) != ""
	}
	// NCCL_*_DISABLE and the integer parameters are read with strtol/strtoll.
	num := func(name string) (int64, bool, error) {
		s, ok := get(name)
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s=%q: not an integer", name, s)
		}
		return n, true, nil
	}
	// NCCL tests NCCL_P2P_DISABLE and NCCL_PXN_DISABLE for == 1 but
	// NCCL_NVB_DISABLE for != 0; mirror each.
	flag := func(name string, exactlyOne bool) (bool, error) {
		n, ok, err := num(name)
		if exactlyOne {
			return ok && n == 1, err
		}
		return ok && n != 0, err
	}
	// Only NCCL_NET_GDR_READ has an "auto" value (negative); the C2C
	// parameters are plain booleans where any non-zero value means on.
	toggle := func(name string, negativeIsAuto bool) (Toggle, error) {
		n, ok, err := num(name)
		switch {
		case err != nil || !ok:
			return Auto, err
		case n == 0:
			return Off, nil
		case n < 0 && negativeIsAuto:
			return Auto, nil
		}
		return On, nil
	}
	var err error
	if o.P2PDisable, err = flag("NCCL_P2P_DISABLE", true); err != nil {
		return o, err
	}
	if s, ok := get("NCCL_P2P_LEVEL"); ok {
		if _, err := ParseLevel(s); err != nil {
			return o, fmt.Errorf("NCCL_P2P_LEVEL: %v", err)
		}
		o.P2PLevel = s
	}
	if s, ok := get("NCCL_NET_GDR_LEVEL"); ok {
		if _, err := ParseLevel(s); err != nil {
			return o, fmt.Errorf("NCCL_NET_GDR_LEVEL: %v", err)
		}
		o.GDRLevel = s
	}
	if o.GDRRead, err = toggle("NCCL_NET_GDR_READ", true); err != nil {
		return o, err
	}
	if o.GDRC2C, err = toggle("NCCL_NET_GDR_C2C", false); err != nil {
		return o, err
	}
	if o.PXNDisable, err = flag("NCCL_PXN_DISABLE", true); err != nil {
		return o, err
	}
	if o.PXNC2C, err = toggle("NCCL_PXN_C2C", false); err != nil {
		return o, err
	}
	if o.NVBDisable, err = flag("NCCL_NVB_DISABLE", false); err != nil {
		return o, err
	}
	return o, nil
}
