package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/ncclpath"
)

// rawStream is a stream split into records, bodies kept as bytes.
type rawStream struct {
	header stream.Header
	kinds  []string
	bodies [][]byte
	counts map[string]int64
}

func readRaw(t *testing.T, data []byte) *rawStream {
	t.Helper()
	r, err := stream.NewReader(bytes.NewReader(data), "out")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawStream{header: r.Header}
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raw, err := r.Raw()
		if err != nil {
			t.Fatal(err)
		}
		s.kinds = append(s.kinds, kind)
		s.bodies = append(s.bodies, append([]byte(nil), raw...))
	}
	s.counts = r.Counts()
	return s
}

// decodeOne reads one record of a raw stream with the stream's own decoder.
func decodeOne[T any](t *testing.T, kind string, body []byte, get func(*stream.Reader) (T, error)) T {
	t.Helper()
	v, err := stream.DecodeRaw(kind, body, "record", 0, get)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (s *rawStream) index(kind string) []int {
	var out []int
	for i, k := range s.kinds {
		if k == kind {
			out = append(out, i)
		}
	}
	return out
}

// topogen | ncclpath adds exactly one paths record right after the
// topology, which passes through byte for byte, and fixes the trailer.
func TestNcclpathStream(t *testing.T) {
	in := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "32", "--gpu-type", "A100")
	out := mustRun(t, in, "ncclpath")
	a, b := readRaw(t, in), readRaw(t, out)
	if !strings.HasPrefix(b.header.Producer, "ncclpath ") {
		t.Errorf("producer %q", b.header.Producer)
	}
	if want := []string{stream.KindTopology, stream.KindPaths}; !reflect.DeepEqual(b.kinds, want) {
		t.Fatalf("records %v, want %v", b.kinds, want)
	}
	if !bytes.Equal(a.bodies[0], b.bodies[0]) {
		t.Error("topology record changed")
	}
	ta := decodeOne(t, stream.KindTopology, a.bodies[0], (*stream.Reader).Topology)
	tb := decodeOne(t, stream.KindTopology, b.bodies[0], (*stream.Reader).Topology)
	if !reflect.DeepEqual(ta, tb) {
		t.Error("topology content changed")
	}
	want := map[string]int64{stream.KindTopology: 1, stream.KindPaths: 1}
	if !reflect.DeepEqual(a.counts, map[string]int64{stream.KindTopology: 1}) || !reflect.DeepEqual(b.counts, want) {
		t.Errorf("counts in %v, out %v", a.counts, b.counts)
	}
	p := decodeOne(t, stream.KindPaths, b.bodies[1], (*stream.Reader).Paths)
	// One record covers the four identical servers.
	if p.Template != "dgx-a100" || !p.AllServers || len(p.Servers) != 0 || p.GPUs != 8 || p.NICs != 8 ||
		len(p.Entries) != 8*7+2*8*8 || len(p.GPUNICs) != 8 || len(p.PXN) == 0 || p.NCCLVersion != "2.27" {
		t.Errorf("paths record: template %q all %v servers %v, %d GPUs, %d NICs, %d entries, %d PXN, NCCL %s",
			p.Template, p.AllServers, p.Servers, p.GPUs, p.NICs, len(p.Entries), len(p.PXN), p.NCCLVersion)
	}

	// A second pass replaces the record instead of adding one.
	again := readRaw(t, mustRun(t, out, "ncclpath", "--pxn-disable"))
	if len(again.index(stream.KindPaths)) != 1 || again.counts[stream.KindPaths] != 1 {
		t.Fatalf("second ncclpath: records %v", again.kinds)
	}
	if q := decodeOne(t, stream.KindPaths, again.bodies[1], (*stream.Reader).Paths); len(q.PXN) != 0 {
		t.Errorf("--pxn-disable left %d PXN proxies", len(q.PXN))
	}
}

// Records ncclpath does not consume pass through unchanged and in order.
func TestNcclpathPassThrough(t *testing.T) {
	in := mustRun(t, nil, "topogen", "--gpus", "16")
	dec := mustRun(t, in, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "tp", "--tp", "8")
	a, b := readRaw(t, dec), readRaw(t, mustRun(t, dec, "ncclpath"))
	if len(b.kinds) != len(a.kinds)+1 || b.kinds[1] != stream.KindPaths {
		t.Fatalf("%d records in, %d out, second %q", len(a.kinds), len(b.kinds), b.kinds[1])
	}
	for i := range a.kinds {
		j := i
		if i > 0 {
			j = i + 1
		}
		if a.kinds[i] != b.kinds[j] || !bytes.Equal(a.bodies[i], b.bodies[j]) {
			t.Fatalf("record %d (%s) changed", i, a.kinds[i])
		}
	}
	for k, n := range a.counts {
		if b.counts[k] != n {
			t.Errorf("%s: %d in, %d out", k, n, b.counts[k])
		}
	}
}

// matrixRows parses --matrix output into cells by row and column name.
func matrixRows(t *testing.T, out []byte) map[string]map[string]string {
	t.Helper()
	lines := strings.Split(string(out), "\n")
	head := strings.Fields(lines[0])
	m := map[string]map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(head)+1 {
			break // the legends
		}
		m[f[0]] = map[string]string{}
		for j, c := range f[1:] {
			m[f[0]][head[j]] = c
		}
	}
	if len(m) != len(head) {
		t.Fatalf("%d rows for %d columns:\n%s", len(m), len(head), out)
	}
	return m
}

func TestNcclpathMatrixH100(t *testing.T) {
	out := mustRun(t, nil, "ncclpath", "--server", "dgx-h100", "--matrix")
	m := matrixRows(t, out)
	for a := range 8 {
		for b := range 8 {
			if a != b && m[gpu(a)][gpu(b)] != "NVL" {
				t.Errorf("%s→%s: %s, want NVL", gpu(a), gpu(b), m[gpu(a)][gpu(b)])
			}
		}
	}
	// GPU0 shares a PCIe switch with NIC0 and NIC1; the other NICs it
	// reaches through the GPU next to them (PXN). The reverse direction
	// knows no PXN: NIC2 reaches GPU0 through the CPU, NIC4 across sockets.
	for _, c := range []struct{ row, col, want string }{
		{"GPU0", "NIC0", "PIX"}, {"GPU0", "NIC1", "PIX"}, {"GPU0", "NIC2", "PXN"}, {"GPU0", "NIC7", "PXN"},
		{"GPU7", "NIC6", "PIX"}, {"NIC2", "GPU0", "PHB"}, {"NIC4", "GPU0", "SYS"},
	} {
		if got := m[c.row][c.col]; got != c.want {
			t.Errorf("%s→%s: %s, want %s", c.row, c.col, got, c.want)
		}
	}
	if !strings.Contains(string(out), "NIC0: mlx5_0") || !strings.Contains(string(out), "PXN  = ") {
		t.Errorf("legends missing:\n%s", out)
	}
	// NVLink at 18 x 20.6 GB/s, PCIe Gen5 x16 to the NIC.
	bwOut := mustRun(t, nil, "ncclpath", "--server", "dgx-h100", "--matrix", "--bw")
	// The legend gives the cells' unit.
	if !strings.Contains(string(bwOut), "TYPE/BW = the path type and its bandwidth in GB/s") {
		t.Errorf("--bw legend without the bandwidth's unit:\n%s", bwOut)
	}
	bw := matrixRows(t, bwOut)
	if bw["GPU0"]["GPU1"] != "NVL/370.8" || bw["GPU0"]["NIC0"] != "PIX/48.0" {
		t.Errorf("bandwidths: GPU0→GPU1 %s, GPU0→NIC0 %s", bw["GPU0"]["GPU1"], bw["GPU0"]["NIC0"])
	}
	// The same table when the topology's GPU type picks the server.
	in := mustRun(t, nil, "topogen", "--gpus", "16", "--gpu-type", "H100")
	if piped := mustRun(t, in, "ncclpath", "--matrix"); !bytes.Equal(piped, out) {
		t.Errorf("matrix from the H100 topology differs:\n%s", piped)
	}
	// The environment and the flags that override it.
	t.Setenv("NCCL_PXN_DISABLE", "1")
	if got := matrixRows(t, mustRun(t, nil, "ncclpath", "--server", "dgx-h100", "--matrix"))["GPU0"]["NIC4"]; got != "SYS" {
		t.Errorf("NCCL_PXN_DISABLE=1: GPU0→NIC4 %s, want SYS", got)
	}
	if got := matrixRows(t, mustRun(t, nil, "ncclpath", "--server", "dgx-h100", "--matrix", "--no-pxn-disable"))["GPU0"]["NIC4"]; got != "PXN" {
		t.Errorf("--no-pxn-disable: GPU0→NIC4 %s, want PXN", got)
	}
}

func gpu(i int) string { return "GPU" + string(rune('0'+i)) }

func TestNcclpathMatrixPCIe(t *testing.T) {
	out := mustRun(t, nil, "ncclpath", "--server", "pcie-2s", "--matrix")
	m := matrixRows(t, out)
	seen := map[string]bool{}
	for _, row := range m {
		for _, c := range row {
			seen[c] = true
		}
	}
	for _, want := range []string{"PIX", "PXB", "PHB", "SYS"} {
		if !seen[want] {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	if seen["NVL"] || m["GPU0"]["GPU4"] != "SYS" || m["GPU0"]["GPU2"] != "PXB" || m["GPU4"]["GPU6"] != "PHB" {
		t.Errorf("pcie-2s matrix:\n%s", out)
	}
	// An empty pipe on stdin is no topology, not an error.
	if piped := mustRun(t, []byte{}, "ncclpath", "--server", "pcie-2s", "--matrix"); !bytes.Equal(piped, out) {
		t.Errorf("with an empty stdin:\n%s", piped)
	}
}

func TestNcclpathJSON(t *testing.T) {
	out := mustRun(t, nil, "ncclpath", "--server", "dgx-a100", "--json")
	var rep ncclpath.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if rep.Server != "dgx-a100" || len(rep.GPUs) != 8 || len(rep.NICs) != 8 || len(rep.Entries) != 8*7+2*8*8 ||
		len(rep.GPUNICs) != 8 || len(rep.PXN) == 0 || len(rep.Matrix) != 17 || rep.Matrix[1][2] != "NVL/240.0" {
		t.Errorf("report: server %q, %d GPUs, %d NICs, %d entries, matrix %v", rep.Server, len(rep.GPUs), len(rep.NICs), len(rep.Entries), rep.Matrix[:2])
	}
	// The XML twin of the template describes the same server.
	var x ncclpath.Report
	if err := json.Unmarshal(mustRun(t, nil, "ncclpath", "--server-xml", "examples/servers/dgx-a100.xml", "--json"), &x); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x.Matrix, rep.Matrix) {
		t.Errorf("examples/servers/dgx-a100.xml differs from the template:\n%v\n%v", x.Matrix, rep.Matrix)
	}
}

// simccl-decompose builds its server model from the paths record.
func TestNcclpathDecompose(t *testing.T) {
	in := mustRun(t, nil, "topogen", "--gpus", "16")
	args := []string{"--op", "allreduce", "--size", "64MiB", "--group", "tp", "--tp", "8"}
	sum := string(mustRun(t, mustRun(t, in, "ncclpath"), "simccl-decompose", append(args, "--summary")...))
	if !strings.Contains(sum, "allreduce") || !strings.Contains(sum, "nvls") {
		t.Errorf("summary on dgx-h100 paths:\n%s", sum)
	}
	// The same H100 fabric with PCIe-only servers: no NVLS, a PCIe ring.
	pcie := string(mustRun(t, mustRun(t, in, "ncclpath", "--server", "pcie-2s"), "simccl-decompose", append(args, "--summary")...))
	if strings.Contains(pcie, "nvls") || !strings.Contains(pcie, "ring") {
		t.Errorf("summary on pcie-2s paths:\n%s", pcie)
	}
	// The record stays in the decomposed stream, after the topology.
	d := readRaw(t, mustRun(t, mustRun(t, in, "ncclpath"), "simccl-decompose", args...))
	if d.kinds[0] != stream.KindTopology || d.kinds[1] != stream.KindPaths || d.counts[stream.KindPaths] != 1 || d.counts[stream.KindFlow] == 0 {
		t.Errorf("decomposed stream: %v", d.counts)
	}
}

func TestNcclpathErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "server.xml")
	if err := os.WriteFile(bad, []byte("<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\">\n    <gpu dev=\"0\"/>\n  </cpu>\n</system>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oneLineError(t, run(t, nil, "ncclpath", "--server-xml", bad, "--matrix"), 1, bad, "line 3", "<gpu>")
	oneLineError(t, run(t, nil, "ncclpath", "--server", "nope", "--matrix"), 1, `"nope"`, "dgx-a100", "dgx-h100", "hgx-h800", "pcie-2s", "dgx-b200")

	in := mustRun(t, nil, "topogen", "--gpus", "16", "--gpus-per-server", "4")
	oneLineError(t, run(t, in, "ncclpath", "-o", os.DevNull), 1, "dgx-h100 has 8 GPUs", "4 GPUs per server")
	oneLineError(t, run(t, in, "ncclpath", "--server", "pcie-2s", "--matrix"), 1, "pcie-2s has 8 GPUs", "4 GPUs per server")
	h := mustRun(t, nil, "topogen", "--gpus", "16")
	oneLineError(t, run(t, h[:len(h)/2], "ncclpath", "-o", os.DevNull), 1, "<stdin>: record 1 (topology)")

	oneLineError(t, run(t, nil, "ncclpath", "--server", "dgx-h100", "--matrix", "--json"), 2)
	oneLineError(t, run(t, nil, "ncclpath", "--server", "dgx-h100", "--server-xml", bad, "--matrix"), 2)
	oneLineError(t, run(t, nil, "ncclpath", "--server", "dgx-h100", "--matrix", "--p2p-level", "FOO"), 2, "--p2p-level")
	oneLineError(t, run(t, nil, "ncclpath", "--server", "dgx-h100", "--json", "--nccl-version", "3.0"), 2, "--nccl-version")
	t.Setenv("NCCL_P2P_LEVEL", "BOGUS")
	oneLineError(t, run(t, nil, "ncclpath", "--server", "dgx-h100", "--matrix"), 1, "NCCL_P2P_LEVEL")
}
