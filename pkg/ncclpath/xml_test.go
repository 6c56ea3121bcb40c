package ncclpath

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func parse(t *testing.T, doc string) *System {
	t.Helper()
	s, err := ParseXML(strings.NewReader(doc), "server.xml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseXMLFeatures(t *testing.T) {
	// Drawn as NCCL builds it:
	//   CPU0 (Intel SPR) ── bridge 10 (Gen3 x8 = 8*60/80 = 6) ── GPU 11 (Gen4 x16 = 24)
	//                                                      ├─ GPU 12 (no rank: ignored)
	//                                                      └─ NIC 0c.0 + 0c.1 (two ports, one adapter, Gen4 x16)
	//   CPU0 ── <nic> directly (LocBW) ── mlx5_2, plus a <net> without dev (ignored)
	//   CPU1 ── bridge 80 (link_width 0 → 16 lanes, no speed → Gen3: 12) ── GPU 81 (Gen1 "2.5 GT/s" x1 = 15/80)
	//   GPU 11 ═2 NVLinks═> GPU 81 (one way), GPU 81 ═1═> GPU 11, GPU 11 ═6═> NVSwitch, c2c 2×50000 MB/s
	doc := `<?xml version="1.0"?>
<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="8.0 GT/s PCIe" link_width="8">
      <pci busid="0000:11:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1">
          <nvlink target="0000:81:00.0" count="2" tclass="0x030200"/>
          <nvlink target="0000:c1:00.0" count="6" tclass="0x068000"/>
          <c2c bw="50000" count="2"/>
        </gpu>
      </pci>
      <pci busid="0000:12:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="5" sm="90" gdr="1"/>
      </pci>
      <pci busid="0000:0c:00.0" class="0x020700" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_0" dev="0" speed="400000" port="1" gdr="1"/></nic>
      </pci>
      <pci busid="0000:0c:00.1" class="0x020700" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_1" dev="1" speed="400000" port="2" gdr="1"/></nic>
      </pci>
    </pci>
    <nic>
      <net name="mlx5_2" dev="2" speed="100000"/>
      <net name="eth9"/>
    </nic>
  </cpu>
  <cpu numaid="1" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="80:00.0" class="0x060400" link_width="0">
      <pci busid="0000:81:00.0" class="0x030000" link_speed="2.5 GT/s" link_width="1">
        <gpu dev="1" sm="90" rank="1" gdr="0">
          <nvlink target="11:00.0" count="1" tclass="0x030200"/>
        </gpu>
      </pci>
    </pci>
  </cpu>
</system>
`
	s := parse(t, doc)
	if s.Name != "server" {
		t.Errorf("name %q", s.Name)
	}
	// The GPU without a rank is said to be ignored (naming its line and bus),
	// and nothing else is.
	if want := "server.xml: line 13: <gpu> busid 0000:12:00.0 has no rank attribute: ignored"; len(s.Warnings) != 1 || !strings.HasPrefix(s.Warnings[0], want) {
		t.Errorf("warnings %q, want one %q...", s.Warnings, want)
	}
	for k, n := range map[NodeKind]int{CPU: 2, PCI: 2, GPU: 2, NIC: 2, NET: 3, NVS: 1} {
		if s.Count(k) != n {
			t.Errorf("%d %s nodes, want %d", s.Count(k), k, n)
		}
	}
	g1 := s.Node(GPU, 1)
	if g1.GPU != (GPUInfo{Dev: 1, Rank: 1, SM: 90}) || g1.BusID != "0000:81:00.0" {
		t.Errorf("GPU1 = %+v", g1)
	}
	if c := s.Node(CPU, 0).CPU; c.Vendor != VendorIntel || c.model() != modelSRP {
		t.Errorf("CPU0 = %+v", c)
	}
	if n := s.Node(NET, 1).Net; n.Name != "mlx5_1" || n.Port != 2 || n.SpeedMbps != 400000 || !n.GDR {
		t.Errorf("NET1 = %+v", n)
	}
	// Both ports hang off the same adapter.
	if s.Node(NET, 0).Parent != s.Node(NET, 1).Parent {
		t.Error("ports of one NIC were not merged")
	}
	linkBW := func(a, b *Node, typ LinkType) float64 {
		for _, l := range s.Links {
			if s.Nodes[l.A].Kind == a.Kind && s.Nodes[l.A].Index == a.Index &&
				s.Nodes[l.B].Kind == b.Kind && s.Nodes[l.B].Index == b.Index && l.Type == typ {
				if l.NVLinks > 0 {
					return float64(l.NVLinks)
				}
				return l.BW
			}
		}
		return -1
	}
	gpu0, gpu1 := s.Node(GPU, 0), s.Node(GPU, 1)
	for _, c := range []struct {
		what string
		got  float64
		want float64
	}{
		{"bridge10–CPU0", linkBW(s.Node(PCI, 0), s.Node(CPU, 0), LinkPCI), 6},
		{"GPU0–bridge10", linkBW(gpu0, s.Node(PCI, 0), LinkPCI), 24},
		{"NIC0–bridge10", linkBW(s.Node(NIC, 0), s.Node(PCI, 0), LinkPCI), 24},
		{"NIC1–CPU0", linkBW(s.Node(NIC, 1), s.Node(CPU, 0), LinkPCI), LocBW},
		{"NIC1–NET2 (100 Gb/s)", linkBW(s.Node(NIC, 1), s.Node(NET, 2), LinkNET), 12.5},
		{"bridge80–CPU1", linkBW(s.Node(PCI, 1), s.Node(CPU, 1), LinkPCI), 12},
		{"GPU1–bridge80", linkBW(gpu1, s.Node(PCI, 1), LinkPCI), 15.0 / 80},
		{"GPU0→GPU1 links", linkBW(gpu0, gpu1, LinkNVL), 2},
		{"GPU1→GPU0 links", linkBW(gpu1, gpu0, LinkNVL), 1},
		{"GPU0→NVS links", linkBW(gpu0, s.Node(NVS, 0), LinkNVL), 6},
		{"GPU0–CPU0 C2C", linkBW(gpu0, s.Node(CPU, 0), LinkC2C), 100},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %g, want %g", c.what, c.got, c.want)
		}
	}
	// Compute works on it. GPU1 has gdr=0: no GDR for it.
	r := mustCompute(t, s, Options{})
	if r.GDR[1][0] != (GDR{}) {
		t.Errorf("GDR for a gdr=0 GPU: %+v", r.GDR[1][0])
	}
	// NCCL measures a path with the links leaving its destination (the BFS
	// grows from the destination): GPU1→GPU0 uses GPU0's 2 links (2 × 20.6
	// at SM 90), GPU0→GPU1 uses GPU1's single link.
	want(t, "GPU1→GPU0", r.GPUToGPU[1][0], PathNVL, 41.2, 1, nil)
	want(t, "GPU0→GPU1", r.GPUToGPU[0][1], PathNVL, 20.6, 1, nil)
}

func TestParseXMLPCILink(t *testing.T) {
	// Two switches under CPU0 joined by Broadcom peer links: GPU0 reaches
	// GPU1 over the LocBW peer link, switch to switch = PXB, 3 hops, instead
	// of PHB through the CPU (4 hops).
	doc := `<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
      <pcilink target="0000:20:00.0"/>
      <pci busid="0000:11:00.0" class="0x030200" link_speed="16.0 GT/s PCIe"><gpu dev="0" sm="80" rank="0" gdr="1"/></pci>
    </pci>
    <pci busid="0000:20:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
      <pcilink target="0000:10:00.0"/>
      <pcilink target="0000:99:00.0"/>
      <pci busid="0000:21:00.0" class="0x030200" link_speed="16.0 GT/s PCIe"><gpu dev="1" sm="80" rank="1" gdr="1"/></pci>
    </pci>
  </cpu>
</system>`
	r := mustCompute(t, parse(t, doc), Options{})
	want(t, "GPU0→GPU1", r.GPUToGPU[0][1], PathPXB, 24, 3, []string{"PCI/0000:10:00.0", "PCI/0000:20:00.0", "GPU1"})
}

func TestParseXMLErrors(t *testing.T) {
	const head = `<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
`
	const tail = `    </pci>
  </cpu>
</system>
`
	gpu := func(inner string) string { return head + inner + tail } // inner starts on line 4
	for _, c := range []struct {
		name, doc, want string
	}{
		{"missing sm", gpu(`      <pci busid="0000:11:00.0" class="0x030200">
        <gpu dev="0" rank="0" gdr="1"/>
      </pci>
`), `server.xml: line 5: <gpu> missing attribute "sm"`},
		{"unknown link type", gpu(`      <pci busid="0000:11:00.0" class="0x030200">
        <gpu dev="0" sm="80" rank="0" gdr="1">
          <xgmi target="0000:12:00.0" count="2"/>
        </gpu>
      </pci>
`), `server.xml: line 6: <xgmi> is not a GPU link type (want <nvlink> or <c2c>)`},
		{"gpu without PCI parent", `<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
    <gpu dev="0" sm="80" rank="0" gdr="1"/>
  </cpu>
</system>`, `server.xml: line 3: <gpu> has no PCI parent`},
		{"gpu in a switch", gpu(`      <gpu dev="0" sm="80" rank="0" gdr="1"/>
`), `server.xml: line 4: <gpu> is inside <pci busid="0000:10:00.0" class="0x060400">, which is not a GPU device class`},
		{"bad integer", gpu(`      <pci busid="0000:11:00.0" class="0x030200">
        <gpu dev="zero" sm="80" rank="0" gdr="1"/>
      </pci>
`), `server.xml: line 5: <gpu> attribute "dev": "zero" is not an integer`},
		{"duplicate rank", gpu(`      <pci busid="0000:11:00.0" class="0x030200"><gpu dev="0" sm="80" rank="3" gdr="1"/></pci>
      <pci busid="0000:12:00.0" class="0x030200"><gpu dev="1" sm="80" rank="3" gdr="1"/></pci>
`), `server.xml: line 5: <gpu> rank 3 is already used by the <gpu> on line 4`},
		{"duplicate dev", gpu(`      <pci busid="0000:11:00.0" class="0x030200"><gpu dev="0" sm="80" rank="0" gdr="1"/></pci>
      <pci busid="0000:12:00.0" class="0x030200"><gpu dev="0" sm="80" rank="1" gdr="1"/></pci>
`), `server.xml: line 5: <gpu> dev 0 is already used by the <gpu> on line 4`},
		{"duplicate net dev", gpu(`      <pci busid="0000:11:00.0" class="0x020000"><nic><net name="mlx5_0" dev="0" speed="200000"/></nic></pci>
      <pci busid="0000:12:00.0" class="0x020000"><nic>
        <net name="mlx5_1" dev="0" speed="200000"/>
      </nic></pci>
`), `server.xml: line 6: <net> dev 0 is already used by the <net> on line 4`},
		{"nvlink to nowhere", gpu(`      <pci busid="0000:11:00.0" class="0x030200">
        <gpu dev="0" sm="80" rank="0" gdr="1"><nvlink target="0000:77:00.0" count="2" tclass="0x030200"/></gpu>
      </pci>
`), `server.xml: line 5: <nvlink> target "0000:77:00.0" is not a GPU of this file`},
		{"nvlink without count", gpu(`      <pci busid="0000:11:00.0" class="0x030200">
        <gpu dev="0" sm="80" rank="0" gdr="1"><nvlink target="0000:c1:00.0"/></gpu>
      </pci>
`), `server.xml: line 5: <nvlink> missing attribute "count"`},
		{"missing busid", gpu(`      <pci class="0x030200"/>
`), `server.xml: line 4: <pci> missing attribute "busid"`},
		{"bad busid", gpu(`      <pci busid="slot 3" class="0x060400"/>
`), `server.xml: line 4: <pci> attribute "busid": "slot 3" is not a PCI bus id`},
		{"nic in a GPU device", gpu(`      <pci busid="0000:11:00.0" class="0x030200">
        <nic/>
      </pci>
`), `server.xml: line 5: <nic> is not allowed inside the <pci> of a GPU (busid 0000:11:00.0)`},
		{"gpu in a NIC device", gpu(`      <pci busid="0000:12:00.0" class="0x020000">
        <nic><net name="mlx5_0" dev="0"/></nic>
        <gpu dev="0" sm="80" rank="0" gdr="1"/>
      </pci>
`), `server.xml: line 6: <gpu> is not allowed inside the <pci> of a NIC (busid 0000:12:00.0)`},
		{"net outside nic", gpu(`      <net name="mlx5_0" dev="0"/>
`), `server.xml: line 4: <net> must sit inside a <nic>`},
		{"unknown element", `<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
    <nvme busid="0000:01:00.0"/>
  </cpu>
</system>`, `server.xml: line 3: <nvme> is not an NCCL topology element (inside <cpu>)`},
		{"bad arch", `<system version="1">
  <cpu numaid="0" arch="riscv64"/>
</system>`, `server.xml: line 2: <cpu> attribute "arch": "riscv64" is not x86_64, arm64 or ppc64`},
		{"missing numaid", `<system>
  <cpu arch="arm64"/>
</system>`, `server.xml: line 2: <cpu> missing attribute "numaid"`},
		{"x86 without vendor", `<system>
  <cpu numaid="0" arch="x86_64"/>
</system>`, `server.xml: line 2: <cpu> missing attribute "vendor"`},
		{"version 2", `<system version="2"/>`, `server.xml: line 1: <system> version "2" is not supported`},
		{"wrong root", `<graphs version="1"/>`, `server.xml: line 1: <graphs> is not <system>`},
		{"empty", ``, `server.xml: line 1: no <system> element`},
		{"two roots", `<system/>
<system/>`, `server.xml: line 2: <system> after the end of <system>`},
		{"malformed", `<system version="1">
  <cpu numaid="0" arch="arm64">
</system>`, `server.xml: line 3: malformed XML:`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseXML(strings.NewReader(c.doc), "server.xml")
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error\n  %s\nwant prefix\n  %s", err, c.want)
			}
		})
	}
}

func FuzzParseXML(f *testing.F) {
	// The seed corpus lives in testdata/fuzz/FuzzParseXML; add the example.
	if b, err := os.ReadFile(filepath.Join("..", "..", "examples", "servers", "dgx-a100.xml")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseXML(bytes.NewReader(data), "fuzz.xml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.xml: ") {
				t.Errorf("error does not name the file: %v", err)
			}
			return
		}
		for _, o := range []Options{{}, {Version: "2.7"}, {Version: "2.30", P2PDisable: true}} {
			r, err := Compute(s, o)
			if err != nil {
				continue // e.g. a GPU that reaches no CPU: reported, not a panic
			}
			r.Matrix(true)
			r.Entries()
		}
	})
}

// A port that reports no speed (NCCL: "some NICs define speed = -1") is
// taken as 10 Gb/s, as NCCL does; that is said, naming the line, since a
// 400G NIC then prices its paths 40 times too slow. It used to be silent.
func TestParseXMLNoSpeedWarns(t *testing.T) {
	doc := func(speed string) string {
		return `<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
    <pci busid="0000:11:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="0" sm="80" rank="0" gdr="1"/></pci>
    <pci busid="0000:12:00.0" class="0x020000" link_speed="16.0 GT/s PCIe" link_width="16"><nic>
      <net name="mlx5_0" dev="0"` + speed + `/>
    </nic></pci>
  </cpu>
</system>`
	}
	for _, c := range []struct{ speed, want string }{
		{` speed="-1"`, `server.xml: line 5: <net> speed -1 Mb/s (mlx5_0): taken as 10 Gb/s`},
		{``, `server.xml: line 5: <net> speed 0 Mb/s (mlx5_0): taken as 10 Gb/s`},
		{` speed="400000"`, ``},
	} {
		s := parse(t, doc(c.speed))
		got := strings.Join(s.Warnings, "\n")
		if (c.want == "") != (got == "") || !strings.HasPrefix(got, c.want) {
			t.Errorf("speed%s: warnings %q, want %q...", c.speed, got, c.want)
		}
		bw := map[bool]float64{true: 1.25, false: 50} // GB/s: NCCL's 10 Gb/s, or the 400 Gb/s given
		nets := 0
		for _, l := range s.Links {
			if l.Type == LinkNET {
				nets++
				if !near(l.BW, bw[c.want != ""]) {
					t.Errorf("speed%s: NIC-NET %g GB/s, want %g", c.speed, l.BW, bw[c.want != ""])
				}
			}
		}
		if nets == 0 {
			t.Errorf("speed%s: no NET link", c.speed)
		}
	}
}
