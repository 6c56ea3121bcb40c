package tests

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

type dagStream struct {
	topo   *stream.Topology
	groups []*stream.Group
	colls  []*stream.Collective
	flows  []stream.Flow
	counts map[string]int64
}

func readDAG(t *testing.T, data []byte) *dagStream {
	t.Helper()
	r, err := stream.NewReader(bytes.NewReader(data), "out")
	if err != nil {
		t.Fatal(err)
	}
	d := &dagStream{}
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch kind {
		case stream.KindTopology:
			d.topo, err = r.Topology()
		case stream.KindGroup:
			var g *stream.Group
			g, err = r.Group()
			d.groups = append(d.groups, g)
		case stream.KindCollective:
			var c *stream.Collective
			c, err = r.Collective()
			d.colls = append(d.colls, c)
		case stream.KindFlow:
			var f stream.Flow
			err = r.Flow(&f)
			f.Deps = append([]int64(nil), f.Deps...)
			d.flows = append(d.flows, f)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	d.counts = r.Counts()
	// The DAG invariant every backend relies on: deps name earlier flows.
	ids := map[int64]bool{}
	for _, f := range d.flows {
		for _, dep := range f.Deps {
			if !ids[dep] {
				t.Fatalf("flow %d depends on %d, which is not an earlier flow", f.ID, dep)
			}
		}
		ids[f.ID] = true
	}
	return d
}

func TestDecomposeAllReduce(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100")
	out := mustRun(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8",
		"--algo", "ring", "--proto", "simple", "--channels", "4")
	d := readDAG(t, out)
	if d.topo == nil || d.topo.GPUs != 16 || len(d.groups) != 8 || len(d.colls) != 8 {
		t.Fatalf("topology %v, %d groups, %d collectives", d.topo != nil, len(d.groups), len(d.colls))
	}
	sent := map[int32]int64{}
	for _, f := range d.flows {
		if f.ConnType != stream.ConnDelay {
			sent[f.Src] += f.Size
		}
	}
	// DP groups of 2 ranks: ring AllReduce sends 2(n-1)/n x size = 64 MiB each.
	for r := int32(0); r < 16; r++ {
		if sent[r] != 64<<20 {
			t.Errorf("rank %d sent %d bytes, want %d", r, sent[r], 64<<20)
		}
	}
	c := d.colls[0]
	if c.Algorithm != "ring" || c.Protocol != "simple" || c.Channels != 4 || c.PredictedPs <= 0 {
		t.Errorf("collective %+v", c)
	}
}

// wireBytes is what a collective puts on the wire in total, by hand, for
// the plans these workloads get on one or two servers: a ring AllReduce
// sends 2(n-1) times the data around (twice that with LL's flag words),
// NVLS moves S + S/n up and down per GPU at Hopper's 0.85 NVLS efficiency
// (each flow rounds up a byte at most), an AllToAll moves the (n-1)/n that
// leaves each rank (PXN adds no hop when each server holds one rank of the
// group).
func wireBytes(t *testing.T, c *stream.Collective, n int64) int64 {
	t.Helper()
	switch {
	case c.Op == "allreduce" && c.Algorithm == "ring" && c.Protocol == "ll":
		return 4 * (n - 1) * c.Size
	case c.Protocol != "simple":
	case c.Op == "allreduce" && c.Algorithm == "ring":
		return 2 * (n - 1) * c.Size
	case c.Op == "allreduce" && c.Algorithm == "nvls":
		return int64(float64(2*(n+1)*c.Size) / 0.85)
	case c.Op == "alltoall" && (c.Algorithm == "direct" || c.Algorithm == "pxn" && n == 2):
		return (n - 1) * c.Size
	}
	t.Fatalf("no closed form for %+v", c)
	return 0
}

func TestDecomposeWorkloads(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	micro := []string{"--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "2"}
	type totals struct{ flows, wire int64 }
	var microByLabel map[string]totals
	for _, args := range [][]string{
		micro,
		{"--workload", "examples/workloads/simai_microAllReduce.txt"},
		{"--workload", "examples/workloads/simai_microAllReduce.txt", "--selector", "simai"},
	} {
		d := readDAG(t, mustRun(t, topoOut, "simccl-decompose", args...))
		if len(d.colls) == 0 {
			t.Fatalf("%v: no collectives", args)
		}
		// Every collective's transfers carry its algorithm's bytes.
		per := map[int64]totals{}
		for _, f := range d.flows {
			if f.ConnType != stream.ConnDelay {
				x := per[f.Collective]
				x.flows++
				x.wire += f.Size
				per[f.Collective] = x
			}
		}
		byLabel := map[string]totals{}
		for _, c := range d.colls {
			if c.Op == stream.OpCompute {
				continue
			}
			if got, want := per[c.ID].wire, wireBytes(t, c, int64(len(d.groups[c.Group].Ranks))); got < want || got > want+per[c.ID].flows {
				t.Errorf("%v: collective %+v: %d bytes on the wire, want %d", args, c, got, want)
			}
			x := byLabel[c.Label]
			x.flows += per[c.ID].flows
			x.wire += per[c.ID].wire
			byLabel[c.Label] = x
		}
		if microByLabel == nil {
			microByLabel = byLabel
		}
	}
	// The summary's rows count the stream's transfers of their collectives,
	// and its total is theirs (delay and join nodes are not transfers).
	sum := string(mustRun(t, topoOut, "simccl-decompose", append(micro, "--summary")...))
	for _, want := range []string{"algorithm", "predicted", "ring", "alltoall", "\ntransport: h100-ib (auto: H100)"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	var all, rows totals
	for _, x := range microByLabel {
		all.flows += x.flows
		all.wire += x.wire
	}
	for _, line := range strings.Split(strings.TrimSpace(sum), "\n")[1:] {
		f := strings.Fields(line)
		var got totals
		var err error
		switch {
		case f[0] == "transport:":
			if want := "transport: h100-ib (auto: H100)"; line != want {
				t.Errorf("summary's last line %q, want %q", line, want)
			}
		case f[0] == "total" && len(f) >= 4:
			got.flows, err = strconv.ParseInt(f[3], 10, 64)
			if got.flows != all.flows || rows.flows != all.flows {
				t.Errorf("summary total of %d flows, rows add up to %d, the stream has %d:\n%s", got.flows, rows.flows, all.flows, sum)
			}
			if len(f) != 5 || f[4] != strconv.FormatInt(all.wire, 10) {
				t.Errorf("summary total %q, want %d wire bytes", line, all.wire)
			}
		case len(f) >= 12 && f[5] == "x":
			got.flows, _ = strconv.ParseInt(f[10], 10, 64)
			got.wire, err = strconv.ParseInt(f[11], 10, 64)
			if want := microByLabel[f[0]]; got != want {
				t.Errorf("summary row %q: %+v, the stream has %+v", line, got, want)
			}
			rows.flows += got.flows
			rows.wire += got.wire
		default:
			t.Fatalf("summary line %q", line)
		}
		if err != nil {
			t.Fatalf("summary line %q: %v", line, err)
		}
	}
	// MSCCL: the ring XML on 8 A100s yields its 8 x 14 sends.
	a100 := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "8", "--gpu-type", "A100")
	d := readDAG(t, mustRun(t, a100, "simccl-decompose", "--op", "allreduce", "--size", "8MiB", "--group", "tp", "--tp", "8",
		"--msccl", "examples/msccl/ring_allreduce_8.xml"))
	n := 0
	for _, f := range d.flows {
		if f.ConnType == stream.ConnMSCCL {
			n++
		}
	}
	if c := d.colls[0]; n != 112 || c.Algorithm != "msccl" || c.Protocol != "simple" || c.PredictedPs < 0 {
		t.Fatalf("%d MSCCL flows, collective %+v", n, c)
	}
}

func TestDecomposeErrors(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	dir := t.TempDir()
	bad := dir + "/bad.txt"
	os.WriteFile(bad, []byte("1 ALLREDUCE 64MiB DP\n1 ALLREDUCE lots DP\n"), 0o644)
	oneLineError(t, run(t, topoOut, "simccl-decompose", "--workload", bad), 1, "bad.txt: line 2, field size")
	oneLineError(t, run(t, topoOut, "simccl-decompose", "--op", "allscatter", "--size", "1MiB"), 1, "unknown operation")
	oneLineError(t, run(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--tp", "3"), 1, "does not divide the 16 GPUs")
	oneLineError(t, run(t, topoOut, "simccl-decompose", "--op", "allgather", "--size", "1MiB", "--algo", "tree"), 1, "not available")
	xml := dir + "/m.xml"
	os.WriteFile(xml, []byte(`<algo name="x" coll="allreduce" ngpus="2" nchannels="1" nchunksperloop="2">
<gpu id="0"><tb id="0" send="1" recv="1" chan="0"><step s="0" type="s" cnt="1" depid="0" deps="3"/></tb></gpu>
<gpu id="1"><tb id="0" send="0" recv="0" chan="0"><step s="0" type="r" cnt="1" depid="-1" deps="-1"/></tb></gpu></algo>`), 0o644)
	oneLineError(t, run(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--msccl", xml), 1, "m.xml: line 2: <step> depends on step 3")
	oneLineError(t, run(t, []byte("junk"), "simccl-decompose", "--op", "allreduce", "--size", "1MiB"), 1, "<stdin>: record 0")
	oneLineError(t, run(t, topoOut, "simccl-decompose"), 2, "nothing to decompose")
	// nccl-tests' sweep: each bad part names the flag.
	sweep := func(v string, more ...string) result {
		return run(t, topoOut, "simccl-decompose", append([]string{"--op", "allreduce", "--group", "tp", "--tp", "8", "--sweep", v}, more...)...)
	}
	oneLineError(t, sweep("1MiB:8:2"), 1, "--sweep", "MIN 1MiB is larger than MAX 8B")
	oneLineError(t, sweep("8:1MiB:1"), 1, "--sweep", "factor 1 must be at least 2")
	oneLineError(t, sweep("8:1MiB:0"), 1, "--sweep", "factor 0 must be at least 2")
	oneLineError(t, sweep("6:1MiB:2"), 1, "--sweep", "size 6 is not a multiple of the 4-byte element", "--dtype float")
	oneLineError(t, sweep("4:1MiB:2", "--dtype", "double"), 1, "--sweep", "size 4 is not a multiple of the 8-byte element")
	oneLineError(t, run(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "6"), 1, "--size 6 is not a multiple of the 4-byte float element")
	oneLineError(t, run(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "8", "--dtype", "quad"), 2, "--dtype")
	oneLineError(t, sweep("8:64:2", "--size", "8"), 2, "either --size or --sweep")
}

// A sweep through the analytical backend: one collective per size, in
// order, each starting after the previous one has ended everywhere; the
// 0-byte and 1-rank collectives are no-ops with zero time, and a note says so.
func TestDecomposeSweep(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "8", "--gpu-type", "A100")
	r := run(t, topoOut, "simccl-decompose", "--op", "allgather", "--group", "tp", "--tp", "8", "--sweep", "16:64KiB:4")
	if r.code != 0 || !strings.Contains(string(r.stderr), "note: 1 of 7 collectives move nothing") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	d := readDAG(t, r.stdout)
	want := []int64{0, 64, 256, 1024, 4096, 16384, 65536}
	if len(d.colls) != len(want) {
		t.Fatalf("%d collectives, want %d", len(d.colls), len(want))
	}
	for i, c := range d.colls {
		if c.Size != want[i] || c.Op != "allgather" {
			t.Errorf("collective %d: %s of %d bytes, want allgather of %d", i, c.Op, c.Size, want[i])
		}
	}
	rows, _ := readTrace(t, mustRun(t, r.stdout, "flowsim-analytical"))
	first, last := collSpans(rows)
	if first[0] != last[0] {
		t.Errorf("the 0-byte collective takes %d ns", last[0]-first[0])
	}
	for i := int64(1); i < int64(len(want)); i++ {
		if first[i] < last[i-1] {
			t.Errorf("collective %d starts at %d ns, before %d ended at %d ns", i, first[i], i-1, last[i-1])
		}
	}
	one := run(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "dp", "--tp", "8")
	if one.code != 0 || !strings.Contains(string(one.stderr), "note: 8 of 8 collectives move nothing") {
		t.Errorf("1-rank groups: exit %d, stderr %q", one.code, one.stderr)
	}
}

// A size flag given as 0 (or less) is refused instead of silently taking
// the default (--tp 0 ran as --tp 1, --channels 0 and -2 as no override);
// left out, it still takes the default, and a real count is honoured.
func TestDecomposeZeroCounts(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--gpus", "16")
	base := []string{"--op", "allreduce", "--size", "1MiB"}
	for _, flag := range []string{"--tp", "--dp", "--pp", "--ep", "--channels"} {
		oneLineError(t, run(t, topoOut, "simccl-decompose", append(base, flag, "0")...), 1, "simccl-decompose: "+flag+" 0 must be at least 1 (leave it out for the default)")
	}
	oneLineError(t, run(t, topoOut, "simccl-decompose", append(base, "--channels=-2")...), 1, "--channels -2 must be at least 1")
	w := []string{"--workload", "examples/workloads/pipeline_pp4_ga8.txt"}
	oneLineError(t, run(t, topoOut, "simccl-decompose", append(w, "--ga", "0")...), 1, "--ga 0 must be at least 1")
	oneLineError(t, run(t, topoOut, "simccl-decompose", append(w, "--vpp", "0")...), 1, "--vpp 0 must be at least 1")

	// Left out: 16 GPUs as tp 1 x dp 16; given: each ring AllReduce takes
	// exactly the channels asked for.
	d := readDAG(t, mustRun(t, topoOut, "simccl-decompose", append(base, "--algo", "ring")...))
	if len(d.colls) != 1 || len(d.groups) == 0 || len(d.groups[0].Ranks) != 16 {
		t.Fatalf("defaults: %d collectives, groups %v", len(d.colls), d.groups)
	}
	for _, ch := range []int{1, 3} {
		d := readDAG(t, mustRun(t, topoOut, "simccl-decompose", append(base, "--algo", "ring", "--channels", strconv.Itoa(ch))...))
		if d.colls[0].Channels != ch {
			t.Errorf("--channels %d: the collective has %d channels", ch, d.colls[0].Channels)
		}
	}
}

// --summary honours -o: the table goes to the file, nothing to stdout (it
// once went to stdout and -o was ignored).
func TestDecomposeSummaryToFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "summary.txt")
	stdout := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "16"), "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "tp", "--tp", "8", "--summary", "-o", out)
	b, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(b, []byte("2 collectives")) || len(stdout) != 0 {
		t.Fatalf("file %q (%v), stdout %q", b, err, stdout)
	}
}
