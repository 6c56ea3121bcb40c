package ncclpath

import (
	"fmt"
	"slices"
	"testing"
)

// Shared helpers for the hand-drawn servers of the tests. Every expected
// value in the tests is derived by hand in comments from the drawing next
// to it; none was produced by running the code.

var (
	amdRome   = CPUInfo{Arch: ArchX86, Vendor: VendorAMD, FamilyID: 23, ModelID: 49}      // inter-socket 16 GB/s
	intelSKL  = CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 85}     // Skylake-SP: 10 GB/s
	intelBDW  = CPUInfo{Arch: ArchX86, Vendor: VendorIntel, FamilyID: 6, ModelID: 79}     // Broadwell: 6 GB/s
	armGrace  = CPUInfo{Arch: ArchARM}                                                    // 6 GB/s
	zhaoxinKX = CPUInfo{Arch: ArchX86, Vendor: VendorZhaoxin, FamilyID: 7, ModelID: 0x3B} // 6 GB/s
)

func cpuOn(c CPUInfo, numa int) CPUInfo { c.NUMA = numa; return c }

// gpuAt adds GPU number i (dev = rank = i) below parent.
func gpuAt(s *System, parent int, i, sm int, bw float64) int {
	return s.AddGPU(parent, fmt.Sprintf("0000:%02x:00.0", 0x40+i), bw, GPUInfo{Dev: i, Rank: i, SM: sm, GDR: true})
}

// nicAt adds a NIC adapter with one port below parent and returns the port.
func nicAt(s *System, parent int, i int, bw, mbps float64, gdr bool) int {
	nic := s.AddNIC(parent, fmt.Sprintf("0000:%02x:00.0", 0x80+i), bw)
	return s.AddNet(nic, NetInfo{Name: fmt.Sprintf("mlx5_%d", i), Dev: i, SpeedMbps: mbps, Port: 1, GDR: gdr})
}

func mustCompute(t *testing.T, s *System, o Options) *Result {
	t.Helper()
	r, err := Compute(s, o)
	if err != nil {
		t.Fatalf("Compute(%s, %+v): %v", s.Name, o, err)
	}
	return r
}

// want checks a path's type, bandwidth, hop count and (when route is not
// nil) its route.
func want(t *testing.T, what string, got Path, typ PathType, bw float64, hops int, route []string) {
	t.Helper()
	if got.Type != typ || !near(got.BW, bw) || got.Hops != hops {
		t.Errorf("%s = %s/%.2f/%d hops, want %s/%.2f/%d hops (route %v)", what, got.Type, got.BW, got.Hops, typ, bw, hops, got.Route)
	}
	if route != nil && !slices.Equal(got.Route, route) {
		t.Errorf("%s route = %v, want %v", what, got.Route, route)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
