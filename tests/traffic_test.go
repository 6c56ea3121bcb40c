package tests

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// htsim's incast shape through the fluid model: 15 hosts send 1 MiB each
// into host 0 of a k=4 fat-tree (one GPU per server, 400 Gbps NICs, 500 ns
// links). They share its NIC fairly, so all finish sending together at
// 15 x 1 MiB / 400 Gbps, and each arrives one path latency later: 2 hops
// from host 1 (same edge switch), 4 from hosts 2-3 (same pod), 6 from the
// other pods.
func TestHtsimIncast(t *testing.T) {
	tp := mustRun(t, nil, "topogen", "--family", "fat-tree", "--gpus", "16", "--gpus-per-server", "1", "--fat-tree-k", "4")
	st := mustRun(t, tp, "simccl-decompose", "--from-htsim", "examples/htsim/incast16.cm")
	rows, _ := readTrace(t, mustRun(t, st, "flowsim-analytical", "--model", "fluid"))
	drain := 15 * (1 << 20) * 8 / 400e9 * 1e9 // ns
	n := 0
	for _, r := range rows {
		if r.SizeBytes == 0 {
			continue
		}
		n++
		hops := 6.0
		switch {
		case r.Src == 1:
			hops = 2
		case r.Src < 4:
			hops = 4
		}
		if want := math.Round(drain + hops*500); r.Dst != 0 || float64(r.EndNs) != want {
			t.Errorf("flow %d from %d to %d ends at %d ns, want %.0f", r.FlowID, r.Src, r.Dst, r.EndNs, want)
		}
	}
	if n != 15 {
		t.Fatalf("%d flows, want 15", n)
	}
}

// A synthetic pattern runs through the packet backend and every byte
// offered arrives: the trace's flows are the pattern's messages.
func TestPatternThroughPacket(t *testing.T) {
	tp := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	args := []string{"--pattern", "uniform", "--msg-size", "64KiB", "--rate", "50%", "--duration", "20us", "--seed", "4"}
	st := mustRun(t, tp, "simccl-decompose", args...)
	if again := mustRun(t, tp, "simccl-decompose", args...); !bytes.Equal(st, again) {
		t.Fatal("two runs of one seed wrote different streams")
	}
	rows, _ := readTrace(t, mustRun(t, st, "flowsim-packet", "--conf", "examples/conf/default.conf"))
	var msgs, bytes int64
	for _, r := range rows {
		if r.SizeBytes > 0 {
			msgs++
			bytes += r.SizeBytes
			if r.StartNs >= 20000 {
				t.Errorf("flow %d starts at %d ns, after the 20 us the pattern injects", r.FlowID, r.StartNs)
			}
		}
	}
	// 16 GPUs x 50% x 400 Gbps x 20 us / 64 KiB = 122 messages expected.
	if want := 16 * 0.5 * 400e9 * 20e-6 / 8 / 65536; math.Abs(float64(msgs)-want) > 5*math.Sqrt(want) || bytes != msgs*65536 {
		t.Errorf("%d messages, %d bytes; expected about %.0f of 64 KiB", msgs, bytes, want)
	}
}

func TestTrafficRefuses(t *testing.T) {
	tp := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--pattern", "uniform", "--msg-size", "1KiB", "--rate", "150%", "--duration", "1ms"}, []string{"--rate", "at most 100%"}},
		{[]string{"--pattern", "uniform", "--msg-size", "1KiB"}, []string{"--duration must be positive"}},
		{[]string{"--pattern", "incast", "--msg-size", "1KiB", "--duration", "1ms", "--fan-in", "20"}, []string{"--fan-in 20", "1 to 15 senders"}},
		{[]string{"--pattern", "uniform", "--msg-size", "1KiB", "--duration", "1ms", "--op", "allreduce"}, []string{"replace --workload and --op"}},
	} {
		oneLineError(t, run(t, tp, "simccl-decompose", c.args...), 2, c.want...)
	}
	bad := filepath.Join(t.TempDir(), "bad.cm")
	if err := os.WriteFile(bad, []byte("Nodes 4\nConnections 1\n0->1 id 1 start 0 size 10 colour 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oneLineError(t, run(t, tp, "simccl-decompose", "--from-htsim", bad), 1, "bad.cm: line 3, field colour", "unknown connection attribute")
}

// The example matrices are what examples/htsim/gen_cm.py writes.
func TestHtsimGenerator(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: the generator is not checked")
	}
	for file, args := range map[string][]string{
		"permutation16.cm":    {"permutation", "16", "1048576", "7"},
		"incast16.cm":         {"incast", "16", "15", "1048576"},
		"alltoall_serial8.cm": {"alltoall-serial", "8", "65536"},
	} {
		out, err := exec.Command(py, append([]string{"../examples/htsim/gen_cm.py"}, args...)...).Output()
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "examples", "htsim", file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, want) {
			t.Errorf("gen_cm.py %v differs from %s", args, file)
		}
	}
}

// SIMULATOR_STOP_TIME is a horizon the user sets: the run ends there
// (exit 0), says how many flows finished, and the trace holds exactly
// those, every one ended by then. (It used to claim a failed link had cut
// a path and write nothing.)
func TestPacketStopTime(t *testing.T) {
	tp := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	st := mustRun(t, tp, "simccl-decompose", "--pattern", "uniform", "--msg-size", "64KiB", "--duration", "50us")
	r := run(t, st, "flowsim-packet", "--conf", "examples/conf/default.conf", "--set", "SIMULATOR_STOP_TIME=20000")
	if r.code != 0 || !bytes.Contains(r.stderr, []byte("stopped at SIMULATOR_STOP_TIME (20us)")) {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rows, _ := readTrace(t, r.stdout)
	all, _ := readTrace(t, mustRun(t, st, "flowsim-packet", "--conf", "examples/conf/default.conf"))
	if len(rows) == 0 || len(rows) >= len(all) {
		t.Fatalf("%d rows stopped, %d in the full run", len(rows), len(all))
	}
	done := 0
	for _, x := range all {
		if x.EndNs <= 20000 {
			done++
		}
	}
	for _, x := range rows {
		if x.EndNs > 20000 {
			t.Errorf("flow %d ends at %d ns, after the stop time", x.FlowID, x.EndNs)
		}
	}
	if want := fmt.Sprintf("%d of %d flows finished", done, len(all)); len(rows) != done || !bytes.Contains(r.stderr, []byte(want)) {
		t.Errorf("%d rows; the full run has %d ending by 20 us; stderr %s", len(rows), done, r.stderr)
	}
}

// Issue 13's nonsense, refused naming the record and field: an unknown
// connection type, a channel below -1, AS_SEND_LAT=NaN.
func TestStreamRefusesNonsense(t *testing.T) {
	tp := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16")
	for _, c := range []struct {
		f    stream.Flow
		want []string
	}{
		{stream.Flow{ID: 0, Collective: -1, Src: 0, Dst: 1, Size: 10, ConnType: "WORMHOLE", ChunkCount: 1}, []string{"field conn_type", `"WORMHOLE" is not a connection type`}},
		{stream.Flow{ID: 0, Collective: -1, Src: 0, Dst: 1, Size: 10, ConnType: stream.ConnP2P, Channel: -2, ChunkCount: 1}, []string{"field channel", "channel -2"}},
	} {
		st := streamWithFlows(t, tp, nil, nil, func(emit func(*stream.Flow)) { f := c.f; emit(&f) })
		for _, prog := range []string{"flowsim-analytical", "flowsim-packet"} {
			oneLineError(t, run(t, st, prog), 1, c.want...)
		}
	}
	t.Setenv("AS_SEND_LAT", "NaN")
	ok := streamWithFlows(t, tp, nil, nil, func(emit func(*stream.Flow)) {
		emit(&stream.Flow{ID: 0, Collective: -1, Src: 0, Dst: 1, Size: 10, ConnType: stream.ConnP2P, ChunkCount: 1})
	})
	oneLineError(t, run(t, ok, "flowsim-analytical"), 1, `AS_SEND_LAT="NaN"`)
}
