package ncclpath

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestTemplateNames(t *testing.T) {
	want := []string{"dgx-a100", "dgx-b200", "dgx-h100", "hgx-a800", "hgx-h800", "pcie-2s"}
	if got := TemplateNames(); !slices.Equal(got, want) {
		t.Errorf("TemplateNames = %v, want %v", got, want)
	}
	for _, n := range want {
		s, err := Template(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		if s.Count(GPU) != 8 {
			t.Errorf("%s: %d GPUs", n, s.Count(GPU))
		}
	}
	if _, err := Template("dgx-z9"); err == nil || !strings.Contains(err.Error(), "dgx-a100") {
		t.Errorf("unknown template error = %v, want the list of names", err)
	}
}

func TestTemplateForGPU(t *testing.T) {
	for in, want := range map[string]string{
		"A100": "dgx-a100", "a100-sxm4-80gb": "dgx-a100", "A800": "hgx-a800",
		"H100": "dgx-h100", "NVIDIA H100 80GB HBM3": "dgx-h100", "H20": "dgx-h100", "H200": "dgx-h100",
		"H800": "hgx-h800", "B200": "dgx-b200", "L40S": "pcie-2s",
	} {
		got, err := TemplateForGPU(in)
		if err != nil || got != want {
			t.Errorf("TemplateForGPU(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "V100", "H2", "GB200"} {
		if got, err := TemplateForGPU(in); err == nil {
			t.Errorf("TemplateForGPU(%q) = %q, want an error", in, got)
		}
	}
}

// The NVSwitch templates share one drawing (templates.go):
//
//	CPU0 ─┬─ SW0: GPU0 GPU1 NIC0 NIC1      CPU1 ─┬─ SW2: GPU4 GPU5 NIC4 NIC5
//	      └─ SW1: GPU2 GPU3 NIC2 NIC3            └─ SW3: GPU6 GPU7 NIC6 NIC7
//	every GPU ═ NVS
//
// with per template: PCIe bw P (x16), NVLink bw V = links × per-link bw,
// inter-socket S, port bw N = speed/8000.
func TestNVSwitchTemplates(t *testing.T) {
	for _, c := range []struct {
		name    string
		version string
		pcie    float64 // Gen4 x16 = 16*120/80 = 24; Gen5 x16 = 16*240/80 = 48
		nvl     float64
		sys     float64
		read    bool // P2P read only for SM 80
	}{
		{"dgx-a100", "", 24, 12 * 20.0, 16, true},      // AMD inter-socket 16
		{"dgx-h100", "", 48, 18 * 20.6, 22, false},     // Sapphire Rapids 22 (2.26+)
		{"dgx-h100", "2.19", 48, 18 * 20.0, 10, false}, // Hopper links were 20.0 and SPR counted as SKL (10) then
		{"hgx-a800", "", 24, 8 * 20.0, 10, true},       // Ice Lake counts as Skylake (10)
		{"hgx-h800", "", 48, 8 * 20.6, 22, false},
		{"dgx-b200", "", 48, 18 * 40.1, 40, false},     // Emerald Rapids 40
		{"dgx-b200", "2.25", 48, 18 * 40.0, 10, false}, // Blackwell links 40.0 before 2.27
	} {
		t.Run(c.name+"/"+c.version, func(t *testing.T) {
			s, _ := Template(c.name)
			r := mustCompute(t, s, Options{Version: c.version})
			if len(r.NICs) != 8 {
				t.Fatalf("%d NICs", len(r.NICs))
			}
			// GPU0 NVS GPU7: NVL at the GPU–NVSwitch bandwidth.
			want(t, "GPU0→GPU7", r.GPUToGPU[0][7], PathNVL, c.nvl, 2, []string{"NVS", "GPU7"})
			if r.P2P[0][7] != (P2P{OK: true, Read: c.read}) {
				t.Errorf("P2P[0][7] = %+v", r.P2P[0][7])
			}
			// Same switch: SW0, NICa0, NIC0 — PIX at min(P, P, N) = P.
			want(t, "GPU0→NIC0", r.GPUToNIC[0][0], PathPIX, c.pcie, 3, nil)
			// Other switch, same socket: GPU0's own path is PHB (worse than
			// PXN) and NIC2's local GPU is GPU2 (PIX), one NVLink away: PXN
			// through GPU2 at min(V, P) = P, 2 + 3 hops.
			want(t, "GPU0→NIC2", r.GPUToNIC[0][2], PathPXN, c.pcie, 5, nil)
			if r.GPUToNIC[0][2].Via != 2 {
				t.Errorf("GPU0→NIC2 PXN proxy = GPU%d, want GPU2", r.GPUToNIC[0][2].Via)
			}
			// Other socket: PXN through GPU4 likewise.
			want(t, "GPU0→NIC4", r.GPUToNIC[0][4], PathPXN, c.pcie, 5, nil)
			// Receives are not relayed: NICa0, SW0, CPU0, SW1, GPU2 = PHB; and
			// NICa0, SW0, CPU0, CPU1, SW2, GPU4 = SYS at min(P, S).
			want(t, "NIC0→GPU2", r.NICToGPU[0][2], PathPHB, c.pcie, 5, nil)
			want(t, "NIC0→GPU4", r.NICToGPU[0][4], PathSYS, min(c.pcie, c.sys), 6, nil)
			// GDR everywhere: PIX directly, or through a PIX proxy.
			for g := range 8 {
				for n := range 8 {
					if r.GDR[g][n] != (GDR{true, true}) {
						t.Fatalf("GDR[%d][%d] = %+v", g, n, r.GDR[g][n])
					}
				}
			}
			// Local NICs of GPU0 are NIC0 and NIC1 (PIX; the PXN ones are
			// worse at equal bandwidth); two of them for two local GPUs, dev
			// mirrored on one bit: each GPU g gets NIC g.
			for g := range 8 {
				if !slices.Equal(r.GPUNICs[g], []int{g}) || r.NICLocalGPU[g] != g {
					t.Errorf("GPU%d NICs %v, NIC%d local GPU %d", g, r.GPUNICs[g], g, r.NICLocalGPU[g])
				}
			}
		})
	}
}

func TestMatrix(t *testing.T) {
	s, _ := Template("pcie-2s")
	r := mustCompute(t, s, Options{})
	m := r.Matrix(false)
	if len(m) != 11 || len(m[0]) != 11 {
		t.Fatalf("matrix is %dx%d, want 11x11 (header + 8 GPUs + 2 NICs)", len(m), len(m[0]))
	}
	if !slices.Equal(m[0], []string{"", "GPU0", "GPU1", "GPU2", "GPU3", "GPU4", "GPU5", "GPU6", "GPU7", "NIC0", "NIC1"}) {
		t.Errorf("header %v", m[0])
	}
	// Row GPU0 (see TestPCIePathTypes for the derivation).
	if want := []string{"GPU0", "X", "PIX", "PXB", "PXB", "SYS", "SYS", "SYS", "SYS", "PIX", "SYS"}; !slices.Equal(m[1], want) {
		t.Errorf("GPU0 row %v, want %v", m[1], want)
	}
	// Row NIC1: NICa1, SW2, GPU4 PIX; NICa1, SW2, CPU1, SW3, GPU6 PHB;
	// to NIC0 across the sockets SYS.
	if want := []string{"NIC1", "SYS", "SYS", "SYS", "SYS", "PIX", "PIX", "PHB", "PHB", "SYS", "X"}; !slices.Equal(m[10], want) {
		t.Errorf("NIC1 row %v, want %v", m[10], want)
	}
	mb := r.Matrix(true)
	if mb[1][2] != "PIX/24.0" || mb[1][5] != "SYS/10.0" {
		t.Errorf("with bandwidth: %q %q", mb[1][2], mb[1][5])
	}
	txt := r.MatrixText(false)
	if !strings.Contains(txt, "NIC1: mlx5_1") || !strings.HasPrefix(strings.Split(txt, "\n")[1], "GPU0  X") {
		t.Errorf("MatrixText:\n%s", txt)
	}
}

func TestReportAndEntries(t *testing.T) {
	s, _ := Template("dgx-a100")
	r := mustCompute(t, s, Options{})
	es := r.Entries()
	// 8×7 GPU pairs + 8×8 GPU→NIC + 8×8 NIC→GPU.
	if len(es) != 56+64+64 {
		t.Fatalf("%d entries", len(es))
	}
	first := es[0]
	if first.SrcKind != "gpu" || first.Src != 0 || first.Dst != 1 || first.Type != PathNVL.String() || !first.P2P || !first.P2PRead {
		t.Errorf("first entry %+v", first)
	}
	rep := r.Report()
	if len(rep.PXN) != 48 { // each GPU relays to the 6 NICs off its switch
		t.Errorf("%d PXN proxies, want 48", len(rep.PXN))
	}
	js, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(js), `"type":"PXN"`) || !strings.Contains(string(js), `"matrix":[["","GPU0"`) {
		t.Errorf("JSON report: %v %.200s", err, js)
	}
	sp := r.StreamPaths(nil)
	if !sp.AllServers || sp.GPUs != 8 || sp.NICs != 8 || len(sp.Entries) != len(es) || sp.Entries[0].Type != "NVL" {
		t.Errorf("stream record %+v", sp)
	}
	if sp := r.StreamPaths([]int32{3, 4}); sp.AllServers || !slices.Equal(sp.Servers, []int32{3, 4}) {
		t.Errorf("servers %v all=%v", sp.Servers, sp.AllServers)
	}
}

// The example XML describes the dgx-a100 template; both must give the
// same answers.
func TestExampleXMLMatchesTemplate(t *testing.T) {
	f, err := os.Open("../../examples/servers/dgx-a100.xml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, err := ParseXML(f, "dgx-a100.xml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []NodeKind{GPU, PCI, NVS, CPU, NIC, NET} {
		if want := []int{8, 4, 1, 2, 8, 8}[k]; x.Count(k) != want {
			t.Errorf("%d %s nodes, want %d", x.Count(k), k, want)
		}
	}
	tpl, _ := Template("dgx-a100")
	for _, v := range []string{"", "2.19", "2.30"} {
		a := mustCompute(t, x, Options{Version: v})
		b := mustCompute(t, tpl, Options{Version: v})
		if !reflect.DeepEqual(a, b) {
			t.Errorf("version %q: XML and template differ:\n%s\nvs\n%s", v, a.MatrixText(true), b.MatrixText(true))
		}
	}
}
