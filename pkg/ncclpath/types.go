package ncclpath

import (
	"fmt"
	"strconv"
	"strings"
)

// NodeKind is the kind of a vertex of a server graph, in NCCL's order
// (GPU, PCI, NVS, CPU, NIC, NET).
type NodeKind uint8

// Node kinds. A NIC is the PCI adapter; a NET is one of its ports, the
// device NCCL's network plugin exposes. Paths are computed to and from NETs;
// the public API calls a NET a "NIC", as nvidia-smi topo -m does.
const (
	GPU NodeKind = iota
	PCI
	NVS
	CPU
	NIC
	NET
	numKinds
)

var kindNames = [numKinds]string{"GPU", "PCI", "NVS", "CPU", "NIC", "NET"}

func (k NodeKind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("NodeKind(%d)", uint8(k))
}

// LinkType is the type of a link. The values are NCCL 2.27's, which are
// aligned with PathType so that a path can start from "type = link type".
type LinkType uint8

// Link types.
const (
	LinkLOC LinkType = 0  // local: Broadcom switch peer links (pcilink)
	LinkNVL LinkType = 1  // NVLink (GPU–GPU, GPU–NVSwitch, GPU–POWER CPU)
	LinkC2C LinkType = 3  // Grace chip-to-chip GPU–CPU link
	LinkPCI LinkType = 4  // PCIe
	LinkSYS LinkType = 9  // inter-socket link (QPI/UPI/xGMI)
	LinkNET LinkType = 10 // NIC adapter to its network port
)

func (t LinkType) String() string {
	switch t {
	case LinkLOC:
		return "LOC"
	case LinkNVL:
		return "NVL"
	case LinkC2C:
		return "C2C"
	case LinkPCI:
		return "PCI"
	case LinkSYS:
		return "SYS"
	case LinkNET:
		return "NET"
	}
	return fmt.Sprintf("LinkType(%d)", uint8(t))
}

// PathType classifies a path; a larger value is a worse path. The order is
// NCCL 2.27's. Older versions lack some types (C2C, P2C, NVB, PXN) but order
// the others the same way, so one enumeration serves every version.
type PathType uint8

// Path types.
const (
	PathLOC PathType = iota // a node to itself
	PathNVL                 // NVLink, directly or through NVSwitch
	PathNVB                 // NVLink through one intermediate GPU
	PathC2C                 // GPU to its CPU over chip-to-chip (Grace)
	PathPIX                 // at most one PCIe switch
	PathPXB                 // several PCIe switches, no host bridge
	PathP2C                 // GPU –C2C– CPU –PCIe– NIC (2.27+)
	PathPXN                 // GPU –NVLink– peer GPU –PCIe– NIC
	PathPHB                 // through a PCIe host bridge (CPU root complex)
	PathSYS                 // across the inter-socket link
	PathNET                 // through the network
	PathDIS                 // disconnected
	numPathTypes
)

var pathNames = [numPathTypes]string{"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"}

func (t PathType) String() string {
	if t < numPathTypes {
		return pathNames[t]
	}
	return fmt.Sprintf("PathType(%d)", uint8(t))
}

// MarshalText makes JSON show path types by name.
func (t PathType) MarshalText() ([]byte, error) {
	if t >= numPathTypes {
		return nil, fmt.Errorf("invalid path type %d", uint8(t))
	}
	return []byte(pathNames[t]), nil
}

// UnmarshalText parses a path type name.
func (t *PathType) UnmarshalText(b []byte) error {
	v, err := ParsePathType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParsePathType parses a path type name (LOC … DIS), exactly as printed.
func ParsePathType(s string) (PathType, error) {
	for i, n := range pathNames {
		if s == n {
			return PathType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown path type %q (want one of %s)", s, strings.Join(pathNames[:], ", "))
}

// levelsOldToNew maps NCCL's legacy numeric levels (NCCL_P2P_LEVEL=2 etc.).
var levelsOldToNew = [...]PathType{PathLOC, PathPIX, PathPXB, PathPHB, PathSYS, PathSYS}

// ParseLevel parses a level as NCCL_P2P_LEVEL and NCCL_NET_GDR_LEVEL accept
// it: a path type name from LOC to SYS (case-sensitive, as NCCL compares
// with strcmp), or a legacy number 0–4 (5 and above mean SYS).
func ParseLevel(s string) (PathType, error) {
	for i := PathLOC; i <= PathSYS; i++ {
		if s == pathNames[i] {
			return i, nil
		}
	}
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		// NCCL uses strtol, which stops at the first non-digit.
		end := 0
		for end < len(s) && s[end] >= '0' && s[end] <= '9' {
			end++
		}
		n, err := strconv.Atoi(s[:end])
		if err != nil || n >= len(levelsOldToNew) {
			n = len(levelsOldToNew) - 1
		}
		return levelsOldToNew[n], nil
	}
	hint := ""
	if up := strings.ToUpper(s); up != s {
		if _, err := ParseLevel(up); err == nil {
			hint = fmt.Sprintf(" (NCCL matches names case-sensitively and would ignore it; use %q)", up)
		}
	}
	return 0, fmt.Errorf("invalid level %q: want one of LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or a legacy number 0-4%s", s, hint)
}

// Bandwidth constants in GB/s, as NCCL defines them (src/graph/topo.h).
const (
	LocBW        = 5000.0 // "infinite": self paths, Broadcom peer links, NIC directly on a CPU
	PCIBW        = 12.0   // PCIe Gen3 x16
	AMDBW        = 16.0   // inter-socket, AMD
	BDWQPIBW     = 6.0    // inter-socket, Intel Broadwell and older
	SKLQPIBW     = 10.0   // inter-socket, Intel Skylake-SP and later
	SRPQPIBW     = 22.0   // inter-socket, Intel Sapphire Rapids (2.26+)
	ERPQPIBW     = 40.0   // inter-socket, Intel Emerald Rapids (2.26+)
	ZPIBW        = 6.0    // inter-socket, Zhaoxin
	YongfengZPIB = 9.0    // inter-socket, Zhaoxin Yongfeng (2.20+)
	P9BW         = 32.0   // inter-socket, IBM POWER9
	ARMBW        = 6.0    // inter-socket, ARM
)

// NVLinkBW is the bandwidth of one NVLink for a GPU of the given SM version
// (compute capability ×10) under NCCL version v.
func NVLinkBW(sm int, v Version) float64 {
	switch {
	case sm >= 100:
		if v.atLeast(2, 27) {
			return 40.1
		}
		return 40.0
	case sm >= 90:
		if v.atLeast(2, 20) {
			return 20.6
		}
		return 20.0
	case sm == 86:
		return 12.0
	case sm >= 80:
		return 20.0
	case sm >= 70:
		return 20.0
	case sm >= 60:
		return 18.0
	}
	return 20.0
}

// PCIeBW is the bandwidth NCCL gives a PCIe link: lanes × per-lane rate / 80
// GB/s, where the rate comes from the link speed string ("16.0 GT/s PCIe",
// "8 GT/s", …; unknown or empty counts as Gen3) and 0 lanes count as 16.
func PCIeBW(speed string, width int) float64 {
	if width == 0 {
		width = 16
	}
	return float64(width) * float64(pciGenFactor(speed)) / 80
}

// pciGenFactor returns NCCL's per-lane rate in units of 100 Mb/s.
func pciGenFactor(speed string) int {
	f := strings.Fields(speed)
	if len(f) >= 2 && f[1] == "GT/s" {
		switch f[0] {
		case "2.5":
			return 15
		case "5", "5.0":
			return 30
		case "8", "8.0":
			return 60
		case "16", "16.0":
			return 120
		case "32", "32.0":
			return 240
		case "64", "64.0":
			return 480
		}
	}
	return 60
}

// CPUArch is a CPU architecture as NCCL's XML names it.
type CPUArch uint8

// CPU architectures.
const (
	ArchUnknown CPUArch = iota
	ArchX86
	ArchPower
	ArchARM
)

func (a CPUArch) String() string {
	switch a {
	case ArchX86:
		return "x86_64"
	case ArchPower:
		return "ppc64"
	case ArchARM:
		return "arm64"
	}
	return "unknown"
}

// CPUVendor is an x86 CPU vendor.
type CPUVendor uint8

// CPU vendors.
const (
	VendorUnknown CPUVendor = iota
	VendorIntel
	VendorAMD
	VendorZhaoxin
)

func (v CPUVendor) String() string {
	switch v {
	case VendorIntel:
		return "GenuineIntel"
	case VendorAMD:
		return "AuthenticAMD"
	case VendorZhaoxin:
		return "CentaurHauls"
	}
	return "unknown"
}

// cpuModel is NCCL's classification of a CPU model.
type cpuModel uint8

const (
	modelOther    cpuModel = iota
	modelBDW               // Intel Broadwell and older
	modelSKL               // Intel Skylake-SP .. Ice Lake
	modelSRP               // Intel Sapphire Rapids
	modelERP               // Intel Emerald Rapids and later
	modelYongfeng          // Zhaoxin Yongfeng
)

func (c CPUInfo) model() cpuModel {
	switch c.Vendor {
	case VendorIntel:
		if c.FamilyID != 6 {
			return modelBDW
		}
		switch {
		case c.ModelID >= 0xCF:
			return modelERP
		case c.ModelID >= 0x8F:
			return modelSRP
		case c.ModelID >= 0x55:
			return modelSKL
		}
		return modelBDW
	case VendorZhaoxin:
		if c.FamilyID == 7 && c.ModelID == 0x5B {
			return modelYongfeng
		}
	}
	return modelOther
}

// interCPUBW is the bandwidth NCCL gives every inter-socket link, chosen from
// the first CPU of the server.
func interCPUBW(c CPUInfo, v Version) float64 {
	switch c.Arch {
	case ArchPower:
		return P9BW
	case ArchARM:
		return ARMBW
	case ArchX86:
		switch c.Vendor {
		case VendorIntel:
			switch c.model() {
			case modelERP:
				if v.atLeast(2, 26) {
					return ERPQPIBW
				}
				return SKLQPIBW
			case modelSRP:
				if v.atLeast(2, 26) {
					return SRPQPIBW
				}
				return SKLQPIBW
			case modelSKL:
				return SKLQPIBW
			}
			return BDWQPIBW
		case VendorAMD:
			return AMDBW
		case VendorZhaoxin:
			if c.model() == modelYongfeng && v.atLeast(2, 20) {
				return YongfengZPIB
			}
			return ZPIBW
		}
	}
	return LocBW
}
