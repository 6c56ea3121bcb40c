package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/fabricsim/fabricsim/formats/monitor"
	"github.com/fabricsim/fabricsim/formats/simaifct"
	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/units"
)

func microStream(t *testing.T) []byte {
	topoOut := mustRun(t, nil, "topogen", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "100Gbps")
	return mustRun(t, topoOut, "simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "2")
}

// Every flow of the input is in the trace, its bytes delivered; the same
// input and seed give the same trace bytes; a different seed still
// delivers everything.
func TestPacketPipeline(t *testing.T) {
	t.Parallel()
	in := microStream(t)
	d := readDAG(t, in)
	out := mustRun(t, in, "flowsim-packet", "--conf", "examples/conf/default.conf")
	rows, meta := readTrace(t, out)
	if meta.Backend != "packet" || len(rows) != len(d.flows) {
		t.Fatalf("backend %q, %d rows for %d flows", meta.Backend, len(rows), len(d.flows))
	}
	var inBytes, outBytes int64
	for _, f := range d.flows {
		if f.ConnType != "DELAY" {
			inBytes += f.Size
		}
	}
	seen := map[int64]bool{}
	for _, r := range rows {
		outBytes += r.SizeBytes
		seen[r.FlowID] = true
		if r.EndNs < r.StartNs || r.FctNs != r.EndNs-r.StartNs {
			t.Fatalf("row %+v: inconsistent times", r)
		}
	}
	if inBytes != outBytes || len(seen) != len(d.flows) {
		t.Fatalf("trace holds %d bytes in %d flows, input %d bytes in %d flows", outBytes, len(seen), inBytes, len(d.flows))
	}
	again := mustRun(t, in, "flowsim-packet", "--conf", "examples/conf/default.conf")
	if !bytes.Equal(out, again) {
		t.Fatal("same input and seed gave different trace bytes")
	}
	// SimAI's shipped SimAI.conf is accepted as is and means the defaults.
	if simai := mustRun(t, in, "flowsim-packet", "--conf", "examples/conf/SimAI.conf"); !bytes.Equal(out, simai) {
		t.Fatal("SimAI.conf and the default configuration differ")
	}
}

// The monitors and SimAI's fct.txt agree with the run: every sampled rate
// belongs to a flow of the trace and stays within its queue pair's line
// rate (the first hop: NVLink inside a server, the NIC across servers);
// each fct.txt line is its transfer's trace row with the clock started
// after the send latency.
func TestPacketOutputs(t *testing.T) {
	in := microStream(t)
	tp := readDAG(t, in).topo
	dir := t.TempDir()
	fct := filepath.Join(dir, "fct.txt")
	mon := filepath.Join(dir, "mon")
	const sendLatNs = 2000
	mustRun(t, in, "flowsim-packet", "--out", filepath.Join(dir, "run.parquet"), "--simai-fct", fct, "--monitor-dir", mon,
		"--send-lat", "2us", "--set", "QP_MON_INTERVAL=10", "--set", "QLEN_MON_INTERVAL=10", "--set", "BW_MON_INTERVAL=10")
	tr, err := trace.Open(filepath.Join(dir, "run.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := trace.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(fct)
	lines, err := simaifct.ReadAll(simaifct.NewReader(f, fct))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var transfers []trace.Row
	byID := map[int64]trace.Row{}
	for _, r := range rows {
		byID[r.FlowID] = r
		if r.ConnType != "DELAY" {
			transfers = append(transfers, r)
		}
	}
	if len(lines) != len(transfers) {
		t.Fatalf("fct.txt has %d lines for %d transfers", len(lines), len(transfers))
	}
	for i, l := range lines {
		r := transfers[i]
		// Times are truncated to ns separately, so the FCTs may differ by 1 ns.
		if l.SrcNode != r.Src || l.DstNode != r.Dst || l.SizeBytes != r.SizeBytes || l.StartNs != r.StartNs+sendLatNs ||
			l.FctNs < r.FctNs-sendLatNs-1 || l.FctNs > r.FctNs-sendLatNs+1 || l.StandaloneFctNs != r.IdealFctNs {
			t.Fatalf("fct.txt line %d %+v does not match flow %+v with a %d ns send latency", i+1, l, r, sendLatNs)
		}
	}
	lineRate := func(src, dst int32) float64 {
		kind := stream.LinkNIC
		if tp.Nodes[src].Server == tp.Nodes[dst].Server {
			kind = stream.LinkNVLink
		}
		for _, l := range tp.Links {
			if (l.A == src || l.B == src) && l.Kind == kind {
				return l.BWbps
			}
		}
		t.Fatalf("node %d has no %s link", src, kind)
		return 0
	}
	rates, err := parquet.ReadFile[monitor.Rate](filepath.Join(mon, "qp_rate.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rates) == 0 {
		t.Fatal("qp_rate.parquet has no rows")
	}
	for _, q := range rates {
		r, ok := byID[q.FlowID]
		if !ok || r.Src != q.Src || r.Dst != q.Dst || q.TimeNs < r.StartNs || q.TimeNs > r.EndNs {
			t.Fatalf("rate sample %+v is not of a flow running then (%+v)", q, r)
		}
		if lr := lineRate(q.Src, q.Dst); q.RateBps <= 0 || q.RateBps > lr || q.WinB <= 0 {
			t.Fatalf("rate sample %+v: outside (0, %g] bit/s or no window", q, lr)
		}
	}
	for _, name := range []string{"qlen", "host_bw", "cnp", "pfc"} {
		b, err := os.ReadFile(filepath.Join(mon, name+".parquet"))
		if err != nil || !bytes.HasPrefix(b, []byte("PAR1")) {
			t.Fatalf("monitor %s: %v", name, err)
		}
	}
}

// The analytical fluid model and the packet backend agree within 5% on an
// uncongested ring AllReduce (one flow per link per step).
func TestPacketMatchesFluid(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "100Gbps")
	in := mustRun(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "1",
		"--algo", "ring", "--proto", "simple", "--channels", "1", "--pxn", "on")
	span := func(rows []trace.Row) int64 {
		var end int64
		for _, r := range rows {
			end = max(end, r.EndNs)
		}
		return end
	}
	fr, _ := readTrace(t, mustRun(t, in, "flowsim-analytical", "--model", "fluid"))
	pr, _ := readTrace(t, mustRun(t, in, "flowsim-packet"))
	f, p := span(fr), span(pr)
	if d := float64(p-f) / float64(f); d < -0.05 || d > 0.05 {
		t.Fatalf("ring AllReduce: packet %d ns, fluid %d ns (%.1f%% apart)", p, f, 100*d)
	}
}

func TestPacketErrors(t *testing.T) {
	in := microStream(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "bad.conf")
	os.WriteFile(conf, []byte("CC_MODE 1\nKMAX_MAP 2 100 x\n"), 0o644)
	oneLineError(t, run(t, in, "flowsim-packet", "--conf", conf), 1, "bad.conf: line 2, key KMAX_MAP")
	oneLineError(t, run(t, in, "flowsim-packet", "--set", "NO_SUCH_KEY=3"), 1, "NO_SUCH_KEY", "unknown key")
	oneLineError(t, run(t, in, "flowsim-packet", "--set", "CC_MODE=4"), 1, "CC_MODE 4")
	oneLineError(t, run(t, []byte("junk"), "flowsim-packet"), 1, "<stdin>: record 0")
	r := run(t, in, "flowsim-packet", "--out", filepath.Join(dir, "x.csv"))
	if r.code != 2 || !strings.Contains(string(r.stderr), "x.csv") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

// Hybrid simulation from the command line: a surrogate window delivers
// every flow, deterministically, and bad windows are usage errors.
func TestPacketSurrogate(t *testing.T) {
	t.Parallel()
	in := microStream(t)
	a := mustRun(t, in, "flowsim-packet", "--surrogate", "100us:400us")
	b := mustRun(t, in, "flowsim-packet", "--surrogate", "100us:400us")
	if !bytes.Equal(a, b) {
		t.Fatal("surrogate runs with the same seed differ")
	}
	rows, meta := readTrace(t, a)
	if len(rows) != len(readDAG(t, in).flows) || meta.Params["surrogate"] != "100us:400us" {
		t.Fatalf("%d rows, params %v", len(rows), meta.Params)
	}
	for _, bad := range [][]string{{"--surrogate", "5ms:1ms"}, {"--surrogate", "1ms"}, {"--surrogate-lite"}} {
		r := run(t, in, "flowsim-packet", bad...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d: %s", bad, r.code, r.stderr)
		}
	}
}

// --surrogate auto on seed 003's dragonfly at half load, where the fabric
// has a steady state: the surrogate opens after three steady windows of
// 50 us, well before the traffic ends, and closes within two windows of
// the moment the traffic stops (1 ms, as decomposed: the transfers in
// progress fall to none), saying why. Every flow finishes, the trace records
// the switches, and the run takes fewer events than the packet-level one.
func TestPacketSurrogateAuto(t *testing.T) {
	t.Parallel()
	topoOut := mustRun(t, nil, "topogen", "--family", "dragonfly", "--gpus", "72", "--gpus-per-server", "1", "--routers-per-group", "4",
		"--terminals-per-router", "2", "--global-per-router", "2", "--switch-bw", "16Gbps", "--nic-bw", "16Gbps")
	in := mustRun(t, topoOut, "simccl-decompose", "--pattern", "uniform", "--msg-size", "1KiB", "--rate", "50%", "--duration", "1ms", "--seed", "1")
	conf := []string{"--conf", "examples/conf/default.conf", "--set", "PACKET_PAYLOAD_SIZE=4096"}
	hf := run(t, in, "flowsim-packet", conf...)
	r := run(t, in, "flowsim-packet", append(conf, "--surrogate", "auto", "--surrogate-window", "50us")...)
	if r.code != 0 || hf.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	opened := regexp.MustCompile(`surrogate opened at ([0-9.]+us): steady for 3 windows of 50us`).FindSubmatch(r.stderr)
	closed := regexp.MustCompile(`surrogate closed at ([0-9.]+(?:us|ms)): transfers in progress -[0-9]+%`).FindSubmatch(r.stderr)
	if opened == nil || closed == nil {
		t.Fatalf("no switches reported:\n%s", r.stderr)
	}
	on, _ := units.ParseDuration(string(opened[1]))
	off, _ := units.ParseDuration(string(closed[1]))
	if us := int64(des.Microsecond); on < 150*us || on > 500*us || off < 1000*us || off > 1100*us {
		t.Errorf("opened at %s, closed at %s: want 150us-500us and 1ms-1.1ms", opened[1], closed[1])
	}
	rows, meta := readTrace(t, r.stdout)
	if len(rows) != len(readDAG(t, in).flows) {
		t.Errorf("%d rows for %d flows", len(rows), len(readDAG(t, in).flows))
	}
	if sw := meta.Params["surrogate_switches"]; sw != "on "+string(opened[1])+", off "+string(closed[1]) {
		t.Errorf("metadata surrogate_switches %q", sw)
	}
	events := func(stderr []byte) int {
		m := regexp.MustCompile(`(\d+) events`).FindSubmatch(stderr)
		if m == nil {
			t.Fatalf("no event count in %s", stderr)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	if a, b := events(r.stderr), events(hf.stderr); a >= b*2/3 {
		t.Errorf("%d events with the surrogate, %d without: want a third fewer at least", a, b)
	}
	for _, bad := range [][]string{{"--surrogate-window", "50us"}, {"--surrogate", "auto", "--surrogate-track", "1ms"},
		{"--surrogate", "1ms:2ms", "--surrogate-window", "50us"}, {"--surrogate", "auto", "--surrogate-window", "1ns"}} {
		if r := run(t, in, "flowsim-packet", bad...); r.code != 2 {
			t.Errorf("%v: exit %d: %s", bad, r.code, r.stderr)
		}
	}
}

// --threads: the fabric cut into parts run in parallel windows writes the
// very bytes the single event loop writes, with two parts, three or five, on one
// thread or two, under DCQCN and HPCC, with ECMP and per-packet routing;
// what the partitioned loop cannot run is refused in one line.
func TestPacketThreads(t *testing.T) {
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	tp := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "32")
	st := mustRun(t, tp, "simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8")
	single := mustRun(t, st, "flowsim-packet")
	// Five parts of four servers: the cut follows the flows' load, not
	// whole servers (the NVLinks of a server whose GPUs send each other
	// something stay whole).
	for _, args := range [][]string{{"--threads", "2"}, {"--partitions", "1"}, {"--partitions", "3", "--threads", "1"}, {"--partitions", "3", "--threads", "2"}, {"--partitions", "5", "--threads", "2"}} {
		if out := mustRun(t, st, "flowsim-packet", args...); !bytes.Equal(out, single) {
			t.Fatalf("%v wrote another trace than the single loop", args)
		}
	}
	// HPCC, whose INT records cross parts with their packets, and the
	// per-packet routings, whose switches choose in every part.
	for _, set := range []string{"CC_MODE=3", "ROUTING=spray", "ROUTING=adaptive"} {
		one := mustRun(t, st, "flowsim-packet", "--set", set)
		if out := mustRun(t, st, "flowsim-packet", "--set", set, "--threads", "2"); !bytes.Equal(out, one) {
			t.Fatalf("%s: --threads 2 wrote another trace than the single loop", set)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--threads", "3", "--partitions", "2"}, "more than the 2 parts"},
		{[]string{"--threads", "0"}, "--threads 0"},
		{[]string{"--threads", "2", "--set", "PFC_MODE=port"}, "PFC_MODE port"},
		{[]string{"--partitions", "65"}, "outside 2 to 64"},
		{[]string{"--partitions", "0"}, "--partitions 0"},
	} {
		r := run(t, st, "flowsim-packet", c.args...)
		if r.code == 0 || !strings.Contains(string(r.stderr), c.want) || bytes.Count(bytes.TrimSpace(r.stderr), []byte("\n")) > 0 {
			t.Errorf("%v: exit %d, %q: want one line naming %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
