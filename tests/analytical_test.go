package tests

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/formats/trace"
)

// streamWithFlows forwards every record of a topogen stream and appends groups,
// collectives and flows, as simccl-decompose will.
func streamWithFlows(t testing.TB, topoStream []byte, groups []stream.Group, colls []stream.Collective, flows func(emit func(*stream.Flow))) []byte {
	t.Helper()
	var buf bytes.Buffer
	writeStreamWithFlows(t, &buf, topoStream, groups, colls, flows)
	return buf.Bytes()
}

// writeStreamWithFlows is streamWithFlows writing to out.
func writeStreamWithFlows(t testing.TB, out io.Writer, topoStream []byte, groups []stream.Group, colls []stream.Collective, flows func(emit func(*stream.Flow))) {
	t.Helper()
	r, err := stream.NewReader(bytes.NewReader(topoStream), "topogen")
	if err != nil {
		t.Fatal(err)
	}
	w, err := stream.NewWriter(out, "test")
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Forward(r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range groups {
		w.Group(&groups[i])
	}
	for i := range colls {
		w.Collective(&colls[i])
	}
	flows(func(f *stream.Flow) {
		if err := w.Flow(f); err != nil {
			t.Fatal(err)
		}
	})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// ringAllReduceFlows emits a ring AllReduce over ranks: 2(n-1) steps of size/n bytes;
// rank k's step-s send waits for its step s-1 receive and its own step s-1
// send. Ids are step*n + k.
func ringAllReduceFlows(ranks []int32, size int64, coll int64) func(emit func(*stream.Flow)) {
	return func(emit func(*stream.Flow)) {
		n := len(ranks)
		steps := 2 * (n - 1)
		f := stream.Flow{Collective: coll, Size: size / int64(n), ChunkCount: int32(steps), ConnType: stream.ConnRing}
		deps := make([]int64, 2)
		for s := 0; s < steps; s++ {
			for k := 0; k < n; k++ {
				f.ID, f.Src, f.Dst, f.Chunk = int64(s*n+k), ranks[k], ranks[(k+1)%n], int32(s)
				f.Deps = nil
				if s > 0 {
					deps[0], deps[1] = int64((s-1)*n+(k-1+n)%n), int64((s-1)*n+k)
					f.Deps = deps
				}
				emit(&f)
			}
		}
	}
}

// checkTraceConservation: every flow exactly once, bytes preserved.
func checkTraceConservation(t *testing.T, rows []trace.Row, flows int, bytes int64) {
	t.Helper()
	seen := map[int64]bool{}
	var sum int64
	for _, r := range rows {
		if seen[r.FlowID] {
			t.Fatalf("flow %d twice in the trace", r.FlowID)
		}
		seen[r.FlowID] = true
		sum += r.SizeBytes
		if r.FctNs != r.EndNs-r.StartNs || r.FctNs < 0 {
			t.Fatalf("row %+v", r)
		}
	}
	if len(rows) != flows || sum != bytes {
		t.Fatalf("trace: %d rows, %d bytes; input: %d flows, %d bytes", len(rows), sum, flows, bytes)
	}
}

// A ring AllReduce of 64 MiB over rail 0 of 16 servers of a 128-GPU
// Spectrum-X (400 Gbit/s NICs, 1 us GPU-ASW-GPU latency) is contention free:
// 2(n-1)/n * S*8/B + 2(n-1) * 1 us = 2516.5824 + 30 us = 2546.5824 us.
func TestAnalyticalRingClosedForm(t *testing.T) {
	topoStream := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "128")
	var ranks []int32
	for k := int32(0); k < 16; k++ {
		ranks = append(ranks, 8*k)
	}
	const size = 64 << 20
	in := streamWithFlows(t, topoStream,
		[]stream.Group{{ID: 0, Type: "DP", Ranks: ranks}},
		[]stream.Collective{{ID: 0, Op: "allreduce", Size: size, Group: 0, Algorithm: "ring", Protocol: "simple", Channels: 1}},
		ringAllReduceFlows(ranks, size, 0))
	const closedNs = 2546582.4
	flows, bytes := 2*15*16, int64(2*15*16*(size/16))
	for _, model := range []string{"fluid", "busbw"} {
		r := run(t, in, "flowsim-analytical", "--model", model)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", model, r.code, r.stderr)
		}
		rows, meta := readTrace(t, r.stdout)
		checkTraceConservation(t, rows, flows, bytes)
		var end int64
		for _, row := range rows {
			end = max(end, row.EndNs)
			if row.Op != "allreduce" || row.GroupType != "DP" || row.NRanks != 16 || row.ConnType != "RING" {
				t.Fatalf("row %+v", row)
			}
		}
		// The simulation is exact but for ps rounding per step (tens of ps
		// in all, see pkg/analytical), and the trace rounds to ns.
		if math.Abs(float64(end)-closedNs) > 1 {
			t.Errorf("%s: AllReduce ends at %d ns, closed form %.1f ns", model, end, closedNs)
		}
		if meta.Backend != "analytical-"+model || meta.Topology.GPUs != 128 || meta.Topology.Family != "spectrum-x" || meta.Topology.Hash == "" {
			t.Errorf("meta %+v", meta)
		}
		if !oneSummaryLine(r.stderr, "flowsim-analytical: "+model+": 480 flows") {
			t.Errorf("summary: %q", r.stderr)
		}
	}
}

func oneSummaryLine(b []byte, prefix string) bool {
	return bytes.HasPrefix(b, []byte(prefix)) && bytes.Count(b, []byte("\n")) == 1
}

// N -> 1 incast through a file argument and --out x.parquet: 7 senders
// share the destination's 400 Gbit/s NIC, so all end at 7 * 1 MiB*8/B + 1 us
// = 146.80064 + 1 us; busbw would say 21.97 us. Same seed, same bytes.
func TestAnalyticalIncastParquet(t *testing.T) {
	topoStream := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "64")
	in := streamWithFlows(t, topoStream, nil, nil, func(emit func(*stream.Flow)) {
		for k := int32(1); k <= 7; k++ {
			emit(&stream.Flow{ID: int64(k), Collective: -1, Src: 8 * k, Dst: 0, Size: 1 << 20, ConnType: stream.ConnP2P})
		}
	})
	dir := t.TempDir()
	src := filepath.Join(dir, "incast.stream")
	if err := os.WriteFile(src, in, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run.parquet")
	mustRun(t, nil, "flowsim-analytical", "--out", out, "--seed", "7", src)
	r, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := trace.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	checkTraceConservation(t, rows, 7, 7<<20)
	for _, row := range rows {
		if row.EndNs != 147801 || row.IdealFctNs != 21972 {
			t.Errorf("incast row %+v", row)
		}
	}
	if p := r.Meta().Params; p["model"] != "fluid" || p["seed"] == nil {
		t.Errorf("params %v", p)
	}
	a := mustRun(t, in, "flowsim-analytical", "--seed", "3")
	b := mustRun(t, in, "flowsim-analytical", "--seed", "3")
	if !bytes.Equal(a, b) {
		t.Error("two runs with the same seed differ")
	}
}

// The real pipeline: topogen | simccl-decompose | flowsim-analytical. Every
// flow of the decomposer's stream comes out once with its bytes, and since
// a fluid flow never runs faster than its bottleneck, no flow ends earlier
// under fluid than under busbw.
func TestAnalyticalAfterDecompose(t *testing.T) {
	topoStream := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "64")
	flowStream := mustRun(t, topoStream, "simccl-decompose", "--op", "allreduce", "--size", "16MiB", "--group", "dp", "--tp", "8")
	d := readDAG(t, flowStream)
	flows, size := len(d.flows), int64(0)
	for _, f := range d.flows {
		if f.ConnType != stream.ConnDelay {
			size += f.Size
		}
	}
	if flows == 0 {
		t.Fatal("the decomposer wrote no flows")
	}
	end := map[string]map[int64]int64{}
	for _, model := range []string{"busbw", "fluid"} {
		rows, _ := readTrace(t, mustRun(t, flowStream, "flowsim-analytical", "--model", model))
		checkTraceConservation(t, rows, flows, size)
		end[model] = map[int64]int64{}
		for _, row := range rows {
			end[model][row.FlowID] = row.EndNs
			if row.Op != "allreduce" || row.GroupType != "DP" {
				t.Fatalf("%s: row %+v", model, row)
			}
		}
	}
	for id, e := range end["fluid"] {
		if e < end["busbw"][id] {
			t.Fatalf("flow %d ends at %d ns under fluid, %d ns under busbw", id, e, end["busbw"][id])
		}
	}
}

func TestAnalyticalBadInput(t *testing.T) {
	topoStream := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	flows := func(fs ...stream.Flow) []byte {
		return streamWithFlows(t, topoStream, nil, nil, func(emit func(*stream.Flow)) {
			for i := range fs {
				emit(&fs[i])
			}
		})
	}
	f := func(id int64, src, dst int32, deps ...int64) stream.Flow {
		return stream.Flow{ID: id, Src: src, Dst: dst, Size: 100, Deps: deps, ConnType: stream.ConnP2P}
	}
	var empty bytes.Buffer
	w, _ := stream.NewWriter(&empty, "test")
	w.Close()

	oneLineError(t, run(t, flows(f(0, 0, 1), f(1, 0, 99)), "flowsim-analytical"), 1, "record 3 (flow), field dst", "99 is not a GPU (0..15) or an NVSwitch")
	oneLineError(t, run(t, flows(f(0, 0, 1), f(1, 0, 2, 5)), "flowsim-analytical"), 1, "record 3 (flow), field deps", "flow 1: dep 5 names no flow")
	oneLineError(t, run(t, flows(f(0, 0, 1, 1), f(1, 0, 2, 0)), "flowsim-analytical"), 1, "field deps", "dependency cycle")
	oneLineError(t, run(t, empty.Bytes(), "flowsim-analytical"), 1, "no topology record")
	oneLineError(t, run(t, []byte("not a stream"), "flowsim-analytical"), 1, "<stdin>")
	oneLineError(t, run(t, topoStream[:len(topoStream)/2], "flowsim-analytical"), 1, "<stdin>")
	oneLineError(t, run(t, topoStream, "flowsim-analytical", "--out", "x.csv"), 2, "unknown trace extension")
	oneLineError(t, run(t, topoStream, "flowsim-analytical", "--model", "packet"), 2, "--model")
	oneLineError(t, run(t, nil, "flowsim-analytical", "/no/such/file"), 1, "/no/such/file")
}

// SimAI's AS_SEND_LAT carries over: every transfer starts that much later
// in both backends, and its FCT includes it.
func TestSendLatency(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "100Gbps")
	in := mustRun(t, topoOut, "simccl-decompose", "--op", "sendrecv", "--size", "1MiB", "--group", "dp", "--tp", "8", "--no-launch-latency")
	for _, prog := range []string{"flowsim-analytical", "flowsim-packet"} {
		base, _ := readTrace(t, mustRun(t, in, prog))
		lat, _ := readTrace(t, mustRun(t, in, prog, "--send-lat", "3us"))
		for i := range base {
			if base[i].SizeBytes == 0 {
				continue
			}
			if d := lat[i].FctNs - base[i].FctNs; d != 3000 {
				t.Fatalf("%s: flow %d FCT grew by %d ns with a 3 us send latency, want 3000", prog, base[i].FlowID, d)
			}
		}
	}
}

// SimAI replay: with AS_SEND_LAT set for the whole pipeline, every
// transfer's software latency is exactly that value, in place of NCCL's
// base and per-step latencies (SimAI's ns-3 SendFlow), not on top: a
// 1 MiB ring AllReduce on one 8-GPU server takes 2(n-1) send latencies,
// the bytes over the NVLink rate and each step's propagation (through the
// NVSwitch: two NVLinks).
func TestSimAIReplaySendLat(t *testing.T) {
	const n, size, sendUs = 8, 1 << 20, 3.0
	topoOut := mustRun(t, nil, "topogen", "--gpus", "8", "--gpu-type", "A100")
	var nvBps, nvLatPs float64
	for _, l := range readDAG(t, topoOut).topo.Links {
		if l.Kind == stream.LinkNVLink {
			nvBps, nvLatPs = l.BWbps, float64(l.LatencyPs)
		}
	}
	if nvBps == 0 {
		t.Fatal("no NVLink in the topology")
	}
	env := []string{"AS_SEND_LAT=3"}
	args := []string{"--op", "allreduce", "--size", "1MiB", "--group", "tp", "--tp", "8", "--algo", "ring", "--proto", "simple"}
	decomposed := runEnv(t, env, topoOut, "simccl-decompose", args...)
	if decomposed.code != 0 {
		t.Fatalf("simccl-decompose: %s", decomposed.stderr)
	}
	in := decomposed.stdout
	d := readDAG(t, in)
	for _, f := range d.flows {
		if f.Size > 0 && f.DelayPs != 3e6 {
			t.Fatalf("flow %d: step latency %d ps, want the send latency alone (3e6)", f.ID, f.DelayPs)
		}
		if f.Size == 0 && f.DelayPs != 0 {
			t.Fatalf("delay node %d of %d ps: SimAI replay has no launch latency", f.ID, f.DelayPs)
		}
	}
	steps := 2 * (n - 1)
	bytesUs := float64(steps) / n * size * 8 / nvBps * 1e6
	want := float64(steps)*sendUs + bytesUs + float64(steps)*2*nvLatPs/1e6
	if got := float64(d.colls[0].PredictedPs) / 1e6; !within(got, float64(steps)*sendUs+bytesUs, 0.02) {
		t.Errorf("predicted %.2f us, want 2(n-1) x 3 us + bytes/NVLink = %.2f", got, float64(steps)*sendUs+bytesUs)
	}
	for _, prog := range []string{"flowsim-analytical", "flowsim-packet"} {
		r := runEnv(t, env, in, prog)
		if r.code != 0 {
			t.Fatalf("%s: %s", prog, r.stderr)
		}
		rows, _ := readTrace(t, r.stdout)
		got := float64(collTimes(rows)[0]) / 1e3
		// Fluid shares the NVLink among the 24 channels' flows of a step,
		// as the closed form does; packet serializes them, so they finish
		// staggered and the next step's latencies hide all but the first
		// step's serialization: at most the closed form, at least the
		// latencies alone.
		if prog == "flowsim-analytical" && !within(got, want, 0.005) {
			t.Errorf("%s: %.3f us, want %.3f (send latencies %.0f + bytes %.2f + propagation)", prog, got, want, float64(steps)*sendUs, bytesUs)
		}
		if prog == "flowsim-packet" && (got > want*1.02 || got < float64(steps)*sendUs) {
			t.Errorf("%s: %.3f us, want between the send latencies %.0f and the closed form %.3f", prog, got, float64(steps)*sendUs, want)
		}
	}
	// The same value on a backend only says so (it is in the flows); a
	// different one is refused; on a stream decomposed without it, it adds
	// with a warning.
	if r := runEnv(t, []string{"AS_SEND_LAT=2"}, in, "flowsim-analytical"); r.code != 1 || !strings.Contains(string(r.stderr), "send_lat_ps 3000000") {
		t.Errorf("AS_SEND_LAT=2 on a stream replayed at 3 us: exit %d, %s", r.code, r.stderr)
	}
	plain := mustRun(t, topoOut, "simccl-decompose", args...)
	r := runEnv(t, env, plain, "flowsim-analytical")
	if r.code != 0 || !strings.Contains(string(r.stderr), "on top of the stream's NCCL step latencies") {
		t.Errorf("AS_SEND_LAT on a stream without it: exit %d, stderr %s", r.code, r.stderr)
	}
}
