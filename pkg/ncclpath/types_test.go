package ncclpath

import (
	"encoding/json"
	"testing"
)

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]PathType{
		"LOC": PathLOC, "NVL": PathNVL, "NVB": PathNVB, "C2C": PathC2C, "PIX": PathPIX, "PXB": PathPXB,
		"P2C": PathP2C, "PXN": PathPXN, "PHB": PathPHB, "SYS": PathSYS,
		// Legacy numbers: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 SYS, higher SYS.
		"0": PathLOC, "1": PathPIX, "2": PathPXB, "3": PathPHB, "4": PathSYS, "5": PathSYS, "99": PathSYS,
	} {
		got, err := ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// NET and DIS are not levels; NCCL compares names case-sensitively.
	for _, in := range []string{"NET", "DIS", "pxb", "", "high"} {
		if _, err := ParseLevel(in); err == nil {
			t.Errorf("ParseLevel(%q) accepted", in)
		}
	}
}

func TestPathTypeNames(t *testing.T) {
	// The 2.27 order of the enumeration.
	for i, n := range []string{"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"} {
		if PathType(i).String() != n {
			t.Errorf("PathType(%d) = %s, want %s", i, PathType(i), n)
		}
		if p, err := ParsePathType(n); err != nil || p != PathType(i) {
			t.Errorf("ParsePathType(%s) = %v, %v", n, p, err)
		}
	}
	b, err := json.Marshal(Path{Type: PathPXN, BW: 24, Hops: 5, Via: 2})
	if err != nil || string(b) != `{"type":"PXN","bw_gbps":24,"hops":5,"via":2,"route":null}` {
		t.Errorf("JSON %s %v", b, err)
	}
}

func TestPCIeBW(t *testing.T) {
	for _, c := range []struct {
		speed string
		width int
		want  float64
	}{
		{"8.0 GT/s PCIe", 16, 12}, // Gen3 x16 = 16*60/80
		{"8 GT/s", 16, 12},
		{"16.0 GT/s PCIe", 16, 24},
		{"32.0 GT/s PCIe", 16, 48},
		{"64.0 GT/s PCIe", 16, 96},
		{"5 GT/s", 4, 1.5},      // 4*30/80
		{"2.5 GT/s", 1, 0.1875}, // 15/80
		{"", 16, 12},            // unknown speed counts as Gen3
		{"Unknown", 0, 12},      // 0 lanes count as 16
	} {
		if got := PCIeBW(c.speed, c.width); !near(got, c.want) {
			t.Errorf("PCIeBW(%q, %d) = %g, want %g", c.speed, c.width, got, c.want)
		}
	}
}

func TestBandwidthConstants(t *testing.T) {
	v := func(s string) Version { x, _ := ParseVersion(s); return x }
	for _, c := range []struct {
		sm   int
		ver  string
		want float64
	}{
		{100, "2.27", 40.1}, {100, "2.26", 40.0}, {90, "2.27", 20.6}, {90, "2.19", 20.0},
		{86, "2.27", 12}, {80, "2.27", 20}, {70, "2.27", 20}, {60, "2.27", 18}, {50, "2.27", 20},
	} {
		if got := NVLinkBW(c.sm, v(c.ver)); got != c.want {
			t.Errorf("NVLinkBW(%d, %s) = %g, want %g", c.sm, c.ver, got, c.want)
		}
	}
	for _, c := range []struct {
		cpu  CPUInfo
		ver  string
		want float64
	}{
		{amdRome, "2.27", 16},
		{intelBDW, "2.27", 6},
		{intelSKL, "2.27", 10},
		{CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 143}, "2.27", 22},
		{CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 143}, "2.25", 10},
		{CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 207}, "2.27", 40},
		{CPUInfo{Arch: ArchX86, Vendor: VendorZhaoxin, FamilyID: 7, ModelID: 0x5B}, "2.27", 9},
		{zhaoxinKX, "2.27", 6},
		{armGrace, "2.27", 6},
		{CPUInfo{Arch: ArchPower}, "2.27", 32},
		{CPUInfo{}, "2.27", LocBW},
	} {
		if got := interCPUBW(c.cpu, v(c.ver)); got != c.want {
			t.Errorf("interCPUBW(%+v, %s) = %g, want %g", c.cpu, c.ver, got, c.want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{"2.27": {2, 27}, "2.27.7": {2, 27}, "v2.27.7-1": {2, 27}, "2.7": {2, 7}, "2.30.7-1": {2, 30}} {
		if got, err := ParseVersion(in); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "2", "3.0", "2.x", "2.27.7.1", "-2.1"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) accepted", in)
		}
	}
}

func TestMirrorBits(t *testing.T) {
	// Reverse the low log2(pow2) bits: for 4, 0→0, 1→2, 2→1, 3→3.
	for val, want := range []int{0, 2, 1, 3} {
		if got := mirrorBits(val, 4); got != want {
			t.Errorf("mirrorBits(%d, 4) = %d, want %d", val, got, want)
		}
	}
	if got := mirrorBits(1, 8); got != 4 {
		t.Errorf("mirrorBits(1, 8) = %d, want 4", got)
	}
	if got := mirrorBits(3, 1); got != 0 {
		t.Errorf("mirrorBits(3, 1) = %d, want 0", got)
	}
}

func TestOptionsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	o, err := OptionsFromEnv(env(map[string]string{
		"NCCL_P2P_LEVEL": "NVL", "NCCL_NET_GDR_LEVEL": "2", "NCCL_NET_GDR_READ": "0",
		"NCCL_PXN_DISABLE": "1", "NCCL_NVB_DISABLE": "2", "NCCL_PXN_C2C": "1", "NCCL_NET_GDR_C2C": "0",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Options{P2PLevel: "NVL", GDRLevel: "2", GDRRead: Off, PXNDisable: true, NVBDisable: true, PXNC2C: On, GDRC2C: Off}
	if o != want {
		t.Errorf("got %+v, want %+v", o, want)
	}
	// NCCL tests NCCL_P2P_DISABLE and NCCL_PXN_DISABLE for == 1 only, and a
	// negative NCCL_NET_GDR_READ means auto.
	o, err = OptionsFromEnv(env(map[string]string{"NCCL_P2P_DISABLE": "2", "NCCL_PXN_DISABLE": "0", "NCCL_NET_GDR_READ": "-2"}))
	if err != nil || o != (Options{}) {
		t.Errorf("got %+v, %v; want defaults", o, err)
	}
	o, _ = OptionsFromEnv(env(map[string]string{"NCCL_P2P_DISABLE": "1"}))
	if !o.P2PDisable {
		t.Error("NCCL_P2P_DISABLE=1 ignored")
	}
	for k, v := range map[string]string{"NCCL_P2P_LEVEL": "pxb", "NCCL_NET_GDR_LEVEL": "near", "NCCL_PXN_DISABLE": "yes"} {
		if _, err := OptionsFromEnv(env(map[string]string{k: v})); err == nil {
			t.Errorf("%s=%s accepted", k, v)
		}
	}
	if _, err := OptionsFromEnv(nil); err != nil {
		t.Errorf("process environment: %v", err)
	}
}
