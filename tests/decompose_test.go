package tests

import (
	"bytes"
	"io"
	"os"
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

func TestDecomposeWorkloads(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	for _, args := range [][]string{
		{"--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "2"},
		{"--workload", "examples/workloads/simai_microAllReduce.txt"},
		{"--workload", "examples/workloads/simai_microAllReduce.txt", "--selector", "simai"},
	} {
		d := readDAG(t, mustRun(t, topoOut, "simccl-decompose", args...))
		if len(d.flows) == 0 || len(d.colls) == 0 {
			t.Fatalf("%v: no flows", args)
		}
	}
	sum := string(mustRun(t, topoOut, "simccl-decompose", "--workload", "examples/workloads/micro_allreduce.txt", "--tp", "8", "--ep", "2", "--summary"))
	for _, want := range []string{"algorithm", "predicted", "nvls", "alltoall"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
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
}
