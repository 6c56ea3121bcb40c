package tests

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// mutatedTopology is topogen's 16-GPU stream with its topology record
// changed by mutate (and nothing else in the stream).
func mutatedTopology(t *testing.T, mutate func(*stream.Topology)) []byte {
	t.Helper()
	r, err := stream.NewReader(bytes.NewReader(mustRun(t, nil, "topogen", "--gpus", "16")), "topogen")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := stream.NewWriter(&buf, "test")
	if err != nil {
		t.Fatal(err)
	}
	for {
		kind, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if kind != stream.KindTopology {
			if err := w.Forward(r); err != nil {
				t.Fatal(err)
			}
			continue
		}
		tp, err := r.Topology()
		if err != nil {
			t.Fatal(err)
		}
		mutate(tp)
		if err := w.Topology(tp); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Issue 13's bad inputs, one row each: every program refuses them with one
// line naming what is wrong (exit 1 for bad input, 2 for usage), no panic,
// within 10 s and 1 GB. The cases that need files write them to a temporary
// directory first.
func TestBadInputsRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	topo16 := mustRun(t, nil, "topogen", "--gpus", "16")
	flows := mustRun(t, topo16, "simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "tp", "--tp", "8")
	trace := mustRun(t, flows, "flowsim-analytical")
	badTopo := func(m func(*stream.Topology)) []byte { return mutatedTopology(t, m) }
	decompose := []string{"simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "tp", "--tp", "8"}
	cases := []struct {
		name  string
		stdin []byte
		args  []string
		code  int
		want  []string
	}{
		// Topology records every consumer gets checked by the shared reader.
		{"gpus -1", badTopo(func(tp *stream.Topology) { tp.GPUs = -1 }), decompose, 1, []string{"gpus"}},
		{"gpus 1e9", badTopo(func(tp *stream.Topology) { tp.GPUs = 1e9 }), decompose, 1, []string{"nodes"}},
		{"NaN bandwidth", badTopo(func(tp *stream.Topology) { tp.Links[0].BWbps = math.NaN() }), decompose, 1, []string{"links[0]", "bandwidth"}},
		{"zero bandwidth", badTopo(func(tp *stream.Topology) { tp.Links[3].BWbps = 0 }), []string{"ncclpath"}, 1, []string{"links[3]", "bandwidth"}},
		{"link to a missing node", badTopo(func(tp *stream.Topology) { tp.Links[1].B = 9999 }), decompose, 1, []string{"links[1]"}},
		{"unknown gpu_type", badTopo(func(tp *stream.Topology) { tp.GPUType = "V100" }), decompose, 1, []string{"record 1 (topology)", "GPU type", "V100"}},
		{"link at 1 bit/s", badTopo(func(tp *stream.Topology) { tp.Links[2].BWbps = 1 }), []string{"flowsim-analytical"}, 1, []string{"links[2].bw_bps", "10 Mbps"}},
		{"link latency 2^62 ps", badTopo(func(tp *stream.Topology) { tp.Links[2].LatencyPs = 1 << 62 }), []string{"flowsim-packet"}, 1, []string{"links[2].latency_ps", "1 s"}},
		{"unknown gpu_type (analytical)", badTopo(func(tp *stream.Topology) { tp.GPUType = "Z9" }), []string{"flowsim-analytical"}, 1, []string{"gpu_type"}},
		{"link error rate 1", badTopo(func(tp *stream.Topology) { tp.Links[0].ErrorRate = 1 }), []string{"flowsim-packet"}, 1, []string{"links[0].error_rate"}},
		// topogen sizes and flags.
		{"topogen 10M GPUs", nil, []string{"topogen", "--gpus", "10000000"}, 1, []string{"GPUs"}},
		{"topogen k 100000", nil, []string{"topogen", "--family", "fat-tree", "--fat-tree-k", "100000"}, 1, []string{"fat-tree"}},
		{"topogen unitless bandwidth", nil, []string{"topogen", "--nic-bw", "400"}, 1, []string{"--nic-bw"}},
		{"topogen zero GPUs", nil, []string{"topogen", "--gpus", "0"}, 1, []string{"--gpus"}},
		{"topogen tiny NIC", nil, []string{"topogen", "--nic-bw", "1e-30Gbps"}, 1, []string{"--nic-bw"}},
		// A flag of another family would be ignored: the fabric would not be the one asked for.
		{"fat-tree flag on spectrum-x", nil, []string{"topogen", "--family", "spectrum-x", "--fat-tree-k", "4"}, 2, []string{"--fat-tree-k applies to fat-tree"}},
		{"SimAI flag on a fat-tree", nil, []string{"topogen", "--family", "fat-tree", "--gpus", "16", "--psw", "4"}, 2, []string{"--psw applies to the SimAI families"}},
		{"oversubscription on a dragonfly", nil, []string{"topogen", "--family", "dragonfly", "--oversubscription", "2"}, 2, []string{"--oversubscription applies to fat-tree"}},
		{"dragonfly flag on hpn", nil, []string{"topogen", "--family", "hpn-single-plane", "--groups", "3"}, 2, []string{"--groups applies to dragonfly"}},
		// Decomposition sizes and counts.
		{"size overflow", topo16, []string{"simccl-decompose", "--op", "allreduce", "--size", "1152921504606846976", "--group", "tp", "--tp", "8"}, 1, []string{"1152921504606846976 bytes"}},
		{"size 0", topo16, []string{"simccl-decompose", "--op", "allreduce", "--size", "0", "--group", "tp", "--tp", "8"}, 1, []string{"--size 0"}}, // a bad value exits 1, as --size -5 does (DESIGN.md; 2 until stop 54)
		{"size beyond int64", topo16, []string{"simccl-decompose", "--op", "allreduce", "--size", "9223372036854775807", "--group", "tp", "--tp", "8"}, 1, []string{"--size", "above 4EiB"}},
		{"AS_GPU_TYPE unknown", topo16, append([]string{"env", "AS_GPU_TYPE=V100"}, decompose...), 1, []string{"AS_GPU_TYPE", "V100"}},
		{"transfer to itself", streamWithFlows(t, topo16, nil, nil, func(emit func(*stream.Flow)) {
			emit(&stream.Flow{ID: 0, Collective: -1, Src: 3, Dst: 3, Size: 1 << 20, Channel: -1, ConnType: stream.ConnP2P})
		}), []string{"phyrun"}, 1, []string{"record 2", "field dst", "to itself"}},
		{"tp 0", topo16, []string{"simccl-decompose", "--op", "allreduce", "--size", "1MiB", "--group", "tp", "--tp", "0"}, 1, []string{"--tp"}},
		// A whole collective (collective granularity) is priced and reported by its record.
		{"COLL flow without its collective record", streamWithFlows(t, topo16, nil, nil, func(emit func(*stream.Flow)) {
			emit(&stream.Flow{ID: 0, Collective: 7, Src: 0, Dst: 0, Size: 1 << 20, Channel: -1, ChunkCount: 1, ConnType: stream.ConnColl, DelayPs: 1e6})
		}), []string{"flowsim-analytical"}, 1, []string{"record 2", "collective", "no collective record"}},
		// A COLL expanded into flows (flowsim-analytical --expand) needs a cut it can use.
		{"cut with a negative chunk", collWithCut(t, topo16, &stream.Cut{ChunkBytes: -1}), []string{"flowsim-analytical", "--expand"}, 1, []string{"field cut.chunk_bytes", "out of range"}},
		{"ring cut without a chunk size", collWithCut(t, topo16, &stream.Cut{}), []string{"flowsim-analytical", "--expand"}, 1, []string{"field collective", "no chunk size"}},
		// Backend configuration.
		{"CC key out of range", flows, []string{"flowsim-packet", "--set", "PINT_PROB=1.5"}, 1, []string{"PINT_PROB", "outside [0,1]"}},
		{"PAUSE_TIME 0", flows, []string{"flowsim-packet", "--set", "PAUSE_TIME=0"}, 1, []string{"PAUSE_TIME"}},
		{"PAUSE_TIME 10 ps", flows, []string{"flowsim-packet", "--set", "PAUSE_TIME=0.00001"}, 1, []string{"PAUSE_TIME", "outside [0.1,1e6]"}},
		{"LINK_DOWN node beyond int32", flows, []string{"flowsim-packet", "--set", "LINK_DOWN=20000 4294967314 18"}, 1, []string{"LINK_DOWN", "4294967314"}},
		{"LINK_DOWN in 108 days", flows, []string{"flowsim-packet", "--set", "LINK_DOWN=9300000000000000 0 18"}, 1, []string{"LINK_DOWN", "9300000000000000"}},
		{"ROUTING unknown", flows, []string{"flowsim-packet", "--set", "ROUTING=valiant"}, 1, []string{"ROUTING", "valiant"}},
		{"TRANSPORT unknown", flows, []string{"flowsim-packet", "--set", "TRANSPORT=irn"}, 1, []string{"TRANSPORT"}},
		{"PFC_MODE unknown", flows, []string{"flowsim-packet", "--set", "PFC_MODE=queue"}, 1, []string{"PFC_MODE"}},
		{"port PFC thresholds crossed", flows, []string{"flowsim-packet", "--set", "PFC_MODE=port", "--set", "PFC_PORT_HIGH_KB=10", "--set", "PFC_PORT_LOW_KB=20"}, 1, []string{"PFC_PORT_LOW_KB"}},
		{"unknown conf key", flows, []string{"flowsim-packet", "--conf", write("bad.conf", "CC_MODE 1\nNO_SUCH_KEY 3\n")}, 1, []string{"bad.conf", "line 2", "NO_SUCH_KEY"}},
		// Traces and statistics.
		{"trace with bytes after EOS", append(append([]byte{}, trace...), 1, 2, 3), []string{"fctstats"}, 1, []string{"after"}},
		{"trace cut before EOS", trace[:len(trace)-8], []string{"fctstats"}, 1, []string{"end-of-stream"}},
		{"not a trace", []byte("hello\n"), []string{"fctstats"}, 1, []string{"fctstats"}},
		{"SimAI workload with a bad line", topo16, []string{"simccl-decompose", "--workload", write("w.txt", "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 16 checkpoints: 0 checkpoint_initiates: 0\n1\nlayer0 -1 x\n")}, 1, []string{"w.txt"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args, env := c.args, []string(nil)
			for args[0] == "env" {
				env, args = append(env, args[1]), args[2:]
			}
			r := runEnv(t, env, c.stdin, args[0], args[1:]...)
			var self syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &self)
			if r.maxRSSKB > 1<<20 && r.maxRSSKB > self.Maxrss {
				t.Errorf("peaked at %d MB", r.maxRSSKB>>10)
			}
			oneLineError(t, r, c.code, c.want...)
			if !strings.HasPrefix(string(r.stderr), args[0]+": ") {
				t.Errorf("stderr does not start with the program's name: %s", r.stderr)
			}
		})
	}
}

// collWithCut is a one-COLL stream (a 2-rank ring AllReduce on GPUs 0 and
// 8) whose collective record carries cut.
func collWithCut(t *testing.T, topoStream []byte, cut *stream.Cut) []byte {
	return streamWithFlows(t, topoStream, []stream.Group{{ID: 0, Type: "DP", Ranks: []int32{0, 8}}},
		[]stream.Collective{{ID: 0, Op: "allreduce", Size: 1 << 20, Group: 0, Algorithm: "ring", Protocol: "simple", Channels: 2,
			PredictedPs: 1e6, Layer: -1, Microbatch: -1, Stage: -1, Cut: cut}},
		func(emit func(*stream.Flow)) {
			emit(&stream.Flow{ID: 0, Collective: 0, Src: 0, Dst: 0, Size: 1 << 20, Channel: -1, ChunkCount: 1, ConnType: stream.ConnColl, DelayPs: 1e6})
		})
}
