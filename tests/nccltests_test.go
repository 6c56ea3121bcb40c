package tests

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
	"github.com/fabricsim/fabricsim/pkg/stats"
)

// collSpans is each collective's first start and last end in a trace (ns).
func collSpans(rows []trace.Row) (first, last map[int64]int64) {
	first, last = map[int64]int64{}, map[int64]int64{}
	for _, r := range rows {
		if r.CollectiveID < 0 {
			continue
		}
		if f, ok := first[r.CollectiveID]; !ok || r.StartNs < f {
			first[r.CollectiveID] = r.StartNs
		}
		last[r.CollectiveID] = max(last[r.CollectiveID], r.EndNs)
	}
	return first, last
}

// collTimes is each collective's time from a trace: last end minus first
// start of its rows, in ns.
func collTimes(rows []trace.Row) map[int64]int64 {
	first, last := collSpans(rows)
	out := map[int64]int64{}
	for id, f := range first {
		out[id] = last[id] - f
	}
	return out
}

// busFactor is nccl-tests' bus bandwidth factor.
func busFactor(op string, n int) float64 {
	switch op {
	case "allreduce":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "reducescatter", "alltoall":
		return float64(n-1) / float64(n)
	}
	return 1
}

// busbw in GB/s of size bytes in ns.
func busbw(op string, n int, size, ns int64) float64 {
	return float64(size) / float64(ns) * busFactor(op, n)
}

// reference reads the top busbw of a published curve in examples/reference.
func reference(t *testing.T, name string) float64 {
	t.Helper()
	ref, err := stats.ReadReference(filepath.Join("..", "examples", "reference", name))
	if err != nil {
		t.Fatal(err)
	}
	return ref.Rows[len(ref.Rows)-1].BusbwGBps
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

// nccl-tests' sweep on one server through every simulator, against NCCL's
// own model (the predicted time simccl-decompose records, with the model's
// latencies alone: --transport preset=none; the calibrated default is
// held to measured sweeps in transport_test.go) and published
// measurements: at 2 KiB every backend's time is the model's latency within
// 10%; at 512 MiB (on the plateau: 2 GiB took four times the packets'
// time) the bus bandwidth is the model's within 5% and the published
// plateau within 10%; packet and fluid agree within 5% at the small and the
// large sizes. (Between them, where each channel's step is a packet or two,
// packet serves the channels' packets in turn so that one channel's step
// latency overlaps another's transfer, and finishes up to a quarter sooner
// than fluid and NCCL's additive model: logged, not asserted.)
func TestNCCLTestsSweep(t *testing.T) {
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	type backend struct {
		name string
		args []string
	}
	backends := []backend{{"busbw", []string{"flowsim-analytical", "--model", "busbw"}},
		{"fluid", []string{"flowsim-analytical", "--model", "fluid"}}, {"packet", []string{"flowsim-packet"}}}
	for _, c := range []struct {
		gpu, op, algo string
		ref           string // published plateau, "" if none
	}{
		{"A100", "allreduce", "ring", ""},
		{"H100", "allreduce", "nvls", "dgx-h100_allreduce-nvls_plateau_nccl-tests-212.csv"},
		{"H100", "allgather", "ring", "dgx-h100_ring_plateau_nccl-tests-212.csv"},
		{"H800", "allreduce", "nvls", "hgx-h800_allreduce-nvls_plateau_nccl-1374.csv"},
	} {
		name := c.gpu + " " + c.op
		topoOut := mustRun(t, nil, "topogen", "--gpus", "8", "--gpu-type", c.gpu)
		in := mustRun(t, mustRun(t, topoOut, "ncclpath"), "simccl-decompose", "--op", c.op, "--group", "tp", "--tp", "8", "--sweep", "2KiB:512MiB:8", "--transport", "preset=none")
		d := readDAG(t, in)
		top := d.colls[len(d.colls)-1]
		if top.Size != 512<<20 || top.Algorithm != c.algo {
			t.Fatalf("%s: top of the sweep is %d bytes by %s, want 512 MiB by %s", name, top.Size, top.Algorithm, c.algo)
		}
		model := busbw(c.op, 8, top.Size, top.PredictedPs/1000)
		if c.ref != "" {
			if pub := reference(t, c.ref); !within(model, pub, 0.10) {
				t.Errorf("%s: the model's plateau %.1f GB/s is not within 10%% of the published %.0f", name, model, pub)
			}
		}
		times := map[string]map[int64]int64{}
		for _, b := range backends {
			rows, _ := readTrace(t, mustRun(t, in, b.args[0], b.args[1:]...))
			times[b.name] = collTimes(rows)
			small, big := d.colls[0], top
			if got, want := float64(times[b.name][small.ID]), float64(small.PredictedPs)/1000; !within(got, want, 0.10) {
				t.Errorf("%s, %s: 2 KiB takes %.2f us, the model's latency %.2f us", name, b.name, got/1e3, want/1e3)
			}
			got := busbw(c.op, 8, big.Size, times[b.name][big.ID])
			t.Logf("%s, %s: %.1f GB/s at %d bytes, the model's %.1f", name, b.name, got, big.Size, model)
			if !within(got, model, 0.05) {
				t.Errorf("%s, %s: plateau %.1f GB/s, the model's %.1f", name, b.name, got, model)
			}
			if c.ref != "" {
				if pub := reference(t, c.ref); !within(got, pub, 0.10) {
					t.Errorf("%s, %s: plateau %.1f GB/s, published %.0f", name, b.name, got, pub)
				}
			}
		}
		for _, co := range d.colls {
			p, f := float64(times["packet"][co.ID]), float64(times["fluid"][co.ID])
			if co.Size <= 32<<10 || co.Size >= 8<<20 {
				if !within(p, f, 0.05) {
					t.Errorf("%s at %d bytes: packet %.2f us, fluid %.2f us", name, co.Size, p/1e3, f/1e3)
				}
			} else {
				t.Logf("%s at %d bytes: packet %.2f us, fluid %.2f us (%+.0f%%)", name, co.Size, p/1e3, f/1e3, 100*(p/f-1))
			}
		}
	}
}

// Across servers, each tree channel enters and leaves a server through the
// GPU of one rail, so every NIC carries tree traffic and the NICs of a
// server carry the same bytes; the simulated time is the model's within
// 20% (128 A100s, 100 Gbit/s NICs: 16 channels over 8 NICs; NCCL's model
// latencies alone, preset=none).
func TestTreeAcrossServers(t *testing.T) {
	t.Parallel()
	in := mustRun(t, mustRun(t, mustRun(t, nil, "topogen", "--gpus", "128", "--gpu-type", "A100", "--nic-bw", "100Gbps"), "ncclpath"),
		"simccl-decompose", "--op", "allreduce", "--size", "16MiB", "--group", "dp", "--tp", "1", "--transport", "preset=none")
	d := readDAG(t, in)
	if co := d.colls[0]; co.Algorithm != "tree" || co.Channels != 16 {
		t.Fatalf("the model picks %s with %d channels, want tree with 16", co.Algorithm, co.Channels)
	}
	tx := make([]int64, 128)
	for _, f := range d.flows {
		if f.ConnType == stream.ConnTree && f.Src/8 != f.Dst/8 {
			tx[f.Src] += f.Size
		}
	}
	for s := 0; s < 16; s++ {
		lo, hi := tx[8*s], tx[8*s]
		for _, b := range tx[8*s : 8*s+8] {
			lo, hi = min(lo, b), max(hi, b)
		}
		if lo == 0 || float64(hi) > 1.1*float64(lo) {
			t.Errorf("server %d: bytes its NICs send to other servers %v, want every NIC within 10%%", s, tx[8*s:8*s+8])
		}
	}
	want := float64(d.colls[0].PredictedPs) / 1000
	for _, m := range []string{"busbw", "fluid"} {
		rows, _ := readTrace(t, mustRun(t, in, "flowsim-analytical", "--model", m))
		if got := float64(collTimes(rows)[0]); !within(got, want, 0.20) {
			t.Errorf("%s: tree takes %.1f us, the model %.1f us", m, got/1e3, want/1e3)
		}
	}
	// At 4 KiB the tree takes the model's latency in every backend (within
	// 10%), and packet and fluid agree within 5%: later chunks on a
	// connection leave as soon as the ones before have, as NCCL posts them.
	small := mustRun(t, mustRun(t, mustRun(t, nil, "topogen", "--gpus", "128", "--gpu-type", "A100", "--nic-bw", "100Gbps"), "ncclpath"),
		"simccl-decompose", "--op", "allreduce", "--size", "4KiB", "--group", "dp", "--tp", "1", "--transport", "preset=none")
	lat := float64(readDAG(t, small).colls[0].PredictedPs) / 1000
	got := map[string]float64{}
	for _, b := range [][]string{{"flowsim-analytical", "--model", "busbw"}, {"flowsim-analytical"}, {"flowsim-packet"}} {
		rows, _ := readTrace(t, mustRun(t, small, b[0], b[1:]...))
		got[strings.Join(b, " ")] = float64(collTimes(rows)[0])
		if g := float64(collTimes(rows)[0]); !within(g, lat, 0.10) {
			t.Errorf("%v: 4 KiB tree takes %.2f us, the model's latency %.2f us", b, g/1e3, lat/1e3)
		}
	}
	if p, f := got["flowsim-packet"], got["flowsim-analytical"]; !within(p, f, 0.05) {
		t.Errorf("4 KiB tree: packet %.2f us, fluid %.2f us", p/1e3, f/1e3)
	}
}

// A dual-homed NIC spreads its queue pairs over both ports, so a ring with
// one GPU per server reaches 90% of the two 200 Gbit/s ports together
// (45 GB/s bus bandwidth) on HPN and DCN+ dual-ToR fabrics (NCCL's model
// latencies; the transport's Simple slices, in series with each step's
// bytes, leave 44.1 GB/s).
func TestDualToRRing(t *testing.T) {
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	for _, fam := range []string{"hpn-single-plane", "dcn-dual-tor"} {
		in := mustRun(t, mustRun(t, nil, "topogen", "--family", fam, "--gpus", "64", "--gpu-type", "H100", "--nic-bw", "200Gbps"),
			"simccl-decompose", "--op", "allreduce", "--size", "128MiB", "--group", "dp", "--tp", "8", "--algo", "ring", "--transport", "preset=none")
		for _, b := range [][]string{{"flowsim-analytical"}, {"flowsim-packet"}} {
			rows, _ := readTrace(t, mustRun(t, in, b[0], b[1:]...))
			worst := math.Inf(1)
			for _, ns := range collTimes(rows) {
				worst = min(worst, busbw("allreduce", 8, 128<<20, ns))
			}
			if worst < 45 {
				t.Errorf("%s, %s: ring bus bandwidth %.1f GB/s, want at least 45 (90%% of 2 x 200 Gbit/s)", fam, b[0], worst)
			}
			t.Logf("%s, %s: ring bus bandwidth %.1f GB/s", fam, b[0], worst)
		}
	}
}

// No backend moves bytes faster than the links allow: over each
// collective, what a GPU sends (receives) fits its NVLink and NIC links'
// capacity for the collective's duration, and what the NVSwitch sends a GPU
// fits that GPU's NVLink. Checked on one server (ring, NVLS) and on 16
// servers (tree and ring through the NICs), for every simulator.
func TestNoBackendBeyondLinks(t *testing.T) {
	t.Parallel() // a heavy end-to-end test: make test runs two at a time
	for _, c := range []struct{ topo, decomp []string }{
		{[]string{"--gpus", "8", "--gpu-type", "H100"}, []string{"--op", "allreduce", "--group", "tp", "--tp", "8", "--sweep", "1MiB:1GiB:32"}},
		{[]string{"--gpus", "8", "--gpu-type", "A100"}, []string{"--op", "allgather", "--group", "tp", "--tp", "8", "--sweep", "1MiB:1GiB:32"}},
		{[]string{"--gpus", "128", "--gpu-type", "A100", "--nic-bw", "100Gbps"}, []string{"--op", "allreduce", "--group", "dp", "--tp", "1", "--sweep", "1MiB:64MiB:8"}},
	} {
		topoOut := mustRun(t, nil, "topogen", c.topo...)
		top := readTopology(t, topoOut)
		capOut := make([]float64, len(top.Nodes)) // bytes/ns a node can send
		capIn := make([]float64, len(top.Nodes))
		for _, l := range top.Links {
			capOut[l.A] += l.BWbps / 8e9
			capOut[l.B] += l.BWbps / 8e9
			capIn[l.A] += l.BWbps / 8e9
			capIn[l.B] += l.BWbps / 8e9
		}
		nvl := map[[2]int32]float64{} // NVSwitch -> GPU
		for _, l := range top.Links {
			if l.Kind == stream.LinkNVLink {
				nvl[[2]int32{l.B, l.A}] += l.BWbps / 8e9
			}
		}
		in := mustRun(t, topoOut, "simccl-decompose", c.decomp...)
		for _, be := range [][]string{{"flowsim-analytical", "--model", "busbw"}, {"flowsim-analytical"}, {"flowsim-packet"}} {
			type key struct {
				coll int64
				node int32
			}
			sent, recv, sw := map[key]int64{}, map[key]int64{}, map[[3]int64]int64{}
			first, last := map[int64]int64{}, map[int64]int64{}
			eachRow(t, mustRun(t, in, be[0], be[1:]...), func(r *trace.Row) {
				if r.CollectiveID < 0 {
					return
				}
				// collTimes's spans, a row at a time.
				if f, ok := first[r.CollectiveID]; !ok || r.StartNs < f {
					first[r.CollectiveID] = r.StartNs
				}
				last[r.CollectiveID] = max(last[r.CollectiveID], r.EndNs)
				if r.SizeBytes == 0 {
					return
				}
				sent[key{r.CollectiveID, r.Src}] += r.SizeBytes
				recv[key{r.CollectiveID, r.Dst}] += r.SizeBytes
				if r.Src >= int32(top.GPUs) {
					sw[[3]int64{r.CollectiveID, int64(r.Src), int64(r.Dst)}] += r.SizeBytes
				}
			})
			times := map[int64]int64{}
			for id, f := range first {
				times[id] = last[id] - f
			}
			for k, b := range sent {
				if ns := float64(times[k.coll]); float64(b) > capOut[k.node]*ns*(1+1e-6) {
					t.Errorf("%v, %v: node %d sends %d bytes in collective %d's %.0f ns, beyond its links' %.1f GB/s", c.topo, be, k.node, b, k.coll, ns, capOut[k.node])
				}
			}
			for k, b := range recv {
				if ns := float64(times[k.coll]); float64(b) > capIn[k.node]*ns*(1+1e-6) {
					t.Errorf("%v, %v: node %d receives %d bytes in collective %d's %.0f ns, beyond its links' %.1f GB/s", c.topo, be, k.node, b, k.coll, ns, capIn[k.node])
				}
			}
			for k, n := range sw {
				if ns, bw := float64(times[k[0]]), nvl[[2]int32{int32(k[1]), int32(k[2])}]; float64(n) > bw*ns*(1+1e-6) {
					t.Errorf("%v, %v: NVSwitch %d sends GPU %d %d bytes in %.0f ns, beyond its %.1f GB/s NVLink", c.topo, be, k[1], k[2], n, ns, bw)
				}
			}
		}
	}
}

// fctstats --format nccl-tests on a trace whose times are chosen by hand:
// nccl-tests' columns and numbers, its average bus bandwidth line, a 0-byte
// no-op as zeros; and the bus bandwidth plot with a reference curve, in PNG
// and SVG.
func TestFctstatsNCCLTests(t *testing.T) {
	dir := t.TempDir()
	var rows []trace.Row
	add := func(coll, size int64, op string, n int32, start, end int64) {
		rows = append(rows, trace.Row{FlowID: int64(len(rows)), CollectiveID: coll, Src: 0, Dst: 1, SizeBytes: size / 8, StartNs: start, EndNs: end,
			FctNs: end - start, IdealFctNs: end - start, ConnType: "RING", Op: op, Algorithm: "ring", GroupType: "TP", CollSizeBytes: size, NRanks: n})
	}
	add(0, 0, "allgather", 8, 0, 0)
	add(1, 1<<20, "allgather", 8, 100, 20_100)                // 20 us: algbw 52.43, busbw 45.88
	add(2, 1<<30, "allgather", 8, 30_000, 30_000+5_000_000)   // 5000 us: algbw 214.75, busbw 187.90
	add(3, 16<<30, "allgather", 8, 6_000_000, 6_000_000+70e6) // 70000 us: algbw 245.43, busbw 214.75
	path := filepath.Join(dir, "run.parquet")
	writeTraceFile(t, path, rows)
	out := string(mustRun(t, nil, "fctstats", "--format", "nccl-tests", path))
	want := []string{
		"           0             0     float    none      -1     0.00    0.00    0.00    N/A",
		"     1048576         32768     float    none      -1    20.00   52.43   45.88    N/A",
		"  1073741824      33554432     float    none      -1   5000.0  214.75  187.90    N/A",
		" 17179869184     536870912     float    none      -1    70000  245.43  214.75    N/A",
		"# Avg bus bandwidth    : 112.132 ",
	}
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("nccl-tests output lacks %q:\n%s", w, out)
		}
	}
	// The average is nccl-tests': the mean of the rows' busbw, zeros
	// included: (0 + 45.8752 + 187.9048 + 214.7484) / 4 = 112.132.
	out = string(mustRun(t, nil, "fctstats", "--format", "nccl-tests", "--dtype", "half", path))
	if !strings.Contains(out, "     1048576         65536      half") {
		t.Errorf("--dtype half: count column\n%s", out)
	}
	ref := filepath.Join(dir, "ref.csv")
	os.WriteFile(ref, []byte("# label: published\nsize_bytes,time_us,algbw_gbps,busbw_gbps\n1048576,20,52,45\n1073741824,5000,215,188\n"), 0o644)
	for _, ext := range []string{"png", "svg"} {
		plot := filepath.Join(dir, "busbw."+ext)
		mustRun(t, nil, "fctstats", "--format", "nccl-tests", path, "--plot", plot, "--reference", ref)
		if st, err := os.Stat(plot); err != nil || st.Size() < 1000 {
			t.Errorf("%s plot: %v", ext, err)
		}
	}
	os.WriteFile(ref, []byte("size_bytes,time_us,algbw_gbps,busbw_gbps\n1048576,20,fast,45\n"), 0o644)
	oneLineError(t, run(t, nil, "fctstats", "--format", "nccl-tests", path, "--plot", filepath.Join(dir, "x.png"), "--reference", ref), 1, "ref.csv: line 2, field algbw_gbps")
	oneLineError(t, run(t, nil, "fctstats", path, "--reference", ref), 2, "--reference")
	oneLineError(t, run(t, nil, "fctstats", "--format", "nccl-tests", "--dtype", "quad", path), 2, "--dtype")
}
