package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// A program that cannot finish writing its output file (here: the
// file-size limit, as a full disk would) exits 1 and leaves nothing under
// the file's name: no partial trace whose footer makes it look complete,
// no stream or text cut short.
func TestNoPartialOutput(t *testing.T) {
	t.Parallel()
	topo := mustRun(t, nil, "topogen", "--gpus", "16")
	st := mustRun(t, topo, "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8")
	trace := mustRun(t, st, "flowsim-analytical")
	for _, c := range []struct {
		name  string
		stdin []byte
		args  []string // the output file is $OUT
	}{
		{"topogen stream", nil, []string{"topogen", "--gpus", "1024", "-o", "$OUT"}},
		{"topogen simai", nil, []string{"topogen", "--gpus", "1024", "--format", "simai", "-o", "$OUT"}},
		{"ncclpath", topo, []string{"ncclpath", "-o", "$OUT"}},
		{"simccl-decompose", topo, []string{"simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8", "-o", "$OUT"}},
		{"flowsim-analytical", st, []string{"flowsim-analytical", "-o", "$OUT.parquet"}},
		{"flowsim-packet", st, []string{"flowsim-packet", "-o", "$OUT.parquet"}},
		{"flowsim-packet --simai-fct", st, []string{"flowsim-packet", "--simai-fct", "$OUT"}},
		{"phyrun", st, []string{"phyrun", "-o", "$OUT.parquet"}},
		{"fctstats csv", trace, []string{"fctstats", "--table", "flows", "--format", "csv", "-o", "$OUT"}},
		{"fctstats plot", trace, []string{"fctstats", "--plot", "$OUT.svg"}},
	} {
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		bin, err := filepath.Abs(filepath.Join(binDir, c.args[0]))
		if err != nil {
			t.Fatal(err)
		}
		args := make([]string, len(c.args)-1)
		for i, a := range c.args[1:] {
			args[i] = strings.ReplaceAll(a, "$OUT", out)
		}
		cmd := exec.Command("bash", append([]string{"-c", `ulimit -f 4; exec "$@"`, "bash", bin}, args...)...) // 4 KiB
		cmd.Dir = ".."
		cmd.Stdin = bytes.NewReader(c.stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err = cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !bytes.Contains(stderr.Bytes(), []byte("file too large")) {
			t.Errorf("%s: %v, stderr %q", c.name, err, stderr.String())
		}
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("%s left %s behind", c.name, left[0].Name())
		}
	}
}

// A write that fails onto a device (a full disk's /dev/full) is an error,
// and the program never removes the node: a failed write once deleted the
// machine's /dev/full. The test makes its own full device.
func TestFailedWriteKeepsTheDevice(t *testing.T) {
	st := mustRun(t, mustRun(t, nil, "topogen", "--gpus", "16"), "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8")
	trace := mustRun(t, st, "flowsim-analytical")
	for _, c := range []struct {
		stdin []byte
		args  []string // the device is $DEV
	}{
		{st, []string{"flowsim-analytical", "-o", "$DEV.arrows"}},
		{st, []string{"flowsim-packet", "-o", "$DEV.parquet"}},
		{st, []string{"phyrun", "-o", "$DEV.arrow"}},
		{trace, []string{"fctstats", "--table", "flows", "--format", "csv", "-o", "$DEV"}},
		{trace, []string{"fctstats", "--plot", "$DEV.svg"}},
		{nil, []string{"topogen", "--gpus", "16", "-o", "$DEV"}},
	} {
		dev := filepath.Join(t.TempDir(), "full")
		args := make([]string, len(c.args)-1)
		for i, a := range c.args[1:] {
			args[i] = strings.ReplaceAll(a, "$DEV", dev)
			if a != args[i] {
				dev = args[i]
			}
		}
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|7); err != nil { // /dev/full is char 1,7
			t.Skip("cannot make a device node here (not root?):", err)
		}
		r := run(t, c.stdin, c.args[0], args...)
		oneLineError(t, r, 1, c.args[0]+":", "no space left on device")
		if st, err := os.Stat(dev); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Errorf("%s removed the device it failed to write: %v", c.args[0], err)
		}
	}
}

// LINK_DOWN cutting GPU 0 off mid-run: flowsim-packet finishes the rest,
// writes the whole trace with the cut-off transfers' status failed, and
// exits 1 with one line naming the first of them and the link.
func TestPacketLinkDownNoPath(t *testing.T) {
	t.Parallel()
	topoOut := mustRun(t, nil, "topogen", "--family", "spectrum-x", "--gpus", "16", "--gpu-type", "A100", "--nic-bw", "100Gbps")
	tp := readTopology(t, topoOut)
	leaf := int32(-1)
	for _, l := range tp.Links {
		if l.Kind == stream.LinkNIC && l.A == 0 {
			leaf = l.B
		} else if l.Kind == stream.LinkNIC && l.B == 0 {
			leaf = l.A
		}
	}
	st := mustRun(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8")
	out := filepath.Join(t.TempDir(), "run.parquet")
	r := run(t, st, "flowsim-packet", "--set", "LINK_DOWN=20000 0 "+strconv.Itoa(int(leaf)), "-o", out)
	oneLineError(t, r, 1, "flowsim-packet: flow", "went down and left it no path", "status failed")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := readTrace(t, data)
	d := readDAG(t, st)
	failed := 0
	for _, row := range rows {
		switch row.Status {
		case "failed":
			failed++
			if row.Src != 0 && row.Dst != 0 {
				t.Errorf("flow %d (%d -> %d) failed without touching GPU 0", row.FlowID, row.Src, row.Dst)
			}
		case "ok":
		default:
			t.Errorf("flow %d: status %q", row.FlowID, row.Status)
		}
	}
	if len(rows) != len(d.flows) || failed == 0 {
		t.Fatalf("%d rows for %d flows, %d failed", len(rows), len(d.flows), failed)
	}
	mustRun(t, nil, "fctstats", out) // every row consistent (end after start, sizes)

	// Expanded from a collective-granularity stream, the failed flows are
	// the COLL node's: its one row is failed, the error names the flow
	// within it.
	// A flow's slot is reused by later flows: at 200 us the failed
	// flows' slots once left the next ones waiting for ever.
	coll := mustRun(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "64MiB", "--group", "dp", "--tp", "8", "--granularity", "collective")
	for _, at := range []string{"20000", "200000"} {
		r = run(t, coll, "flowsim-packet", "--expand", "--set", "LINK_DOWN="+at+" 0 "+strconv.Itoa(int(leaf)), "-o", out)
		oneLineError(t, r, 1, "of COLL node 0 (expanded) failed", "went down and left it no path", "marks 1 failed flows")
		if data, err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
		if rows, _ := readTrace(t, data); len(rows) != 1 || rows[0].Status != "failed" {
			t.Errorf("expanded, link down at %s ns: rows %+v, want the COLL node's, failed", at, rows)
		}
	}
}

// A PFC deadlock (seed 003's dragonfly, a shift-8 permutation of 16 MiB
// flows, 2 MB buffers) stops the run instead of refreshing PAUSE frames
// for ever: exit 1 naming the paused cycle, and a trace of the flows that
// finished.
func TestPacketDeadlock(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--family", "dragonfly", "--gpus", "72", "--gpus-per-server", "1",
		"--routers-per-group", "4", "--terminals-per-router", "2", "--global-per-router", "2")
	st := streamWithFlows(t, topoOut, nil, nil, func(emit func(*stream.Flow)) {
		for i := int32(0); i < 72; i++ {
			emit(&stream.Flow{ID: int64(i), Collective: -1, Src: i, Dst: (i + 8) % 72, Size: 16 << 20, ConnType: stream.ConnP2P})
		}
	})
	out := filepath.Join(t.TempDir(), "run.parquet")
	oneLineError(t, run(t, st, "flowsim-packet", "--set", "BUFFER_SIZE=2", "-o", out), 1, "PFC deadlock", "in a cycle switch", "flows finished")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := readTrace(t, data)
	if len(rows) == 0 || len(rows) >= 72 {
		t.Fatalf("%d rows: want the flows that finished", len(rows))
	}
	for _, r := range rows {
		if r.EndNs < r.StartNs || r.SizeBytes != 16<<20 || r.Status != "ok" {
			t.Errorf("row %+v", r)
		}
	}
}

// A collective whose wire bytes or time would overflow 64-bit counters is
// refused up front: 2^60 bytes once went through as "0B moved, simulated
// 9.22e6 s".
func TestCollectiveSizeLimit(t *testing.T) {
	topoOut := mustRun(t, nil, "topogen", "--gpus", "16")
	oneLineError(t, run(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "1152921504606846976", "--group", "dp", "--tp", "8"), 1, "1152921504606846976 bytes", "(1 TiB)")
	mustRun(t, topoOut, "simccl-decompose", "--op", "allreduce", "--size", "1TiB", "--group", "dp", "--tp", "8", "--summary")
	// Flows written by other tools: a 2^63-1 byte flow was "-8EiB moved".
	huge := streamWithFlows(t, topoOut, nil, nil, func(emit func(*stream.Flow)) {
		emit(&stream.Flow{ID: 0, Collective: -1, Src: 0, Dst: 8, Size: 1<<63 - 1, ConnType: stream.ConnP2P})
	})
	for _, prog := range []string{"flowsim-analytical", "flowsim-packet", "phyrun"} {
		oneLineError(t, run(t, huge, prog), 1, "<stdin>: record", "field size", "(1 TiB)")
	}
}

// A training run stopped before its first compute phase ended has no
// compute rows: fctstats --iteration --allow-partial says the run stopped
// early, not (only) that the trace is not a training workload's.
func TestPartialIterationNoComputeYet(t *testing.T) {
	w := "examples/workloads/pipeline_pp4_ga8.txt"
	st := mustPipe(t, nil, []string{"topogen", "--family", "spectrum-x", "--gpus", "32"}, []string{"simccl-decompose", "--workload", w})
	out := filepath.Join(t.TempDir(), "stop.parquet")
	mustRun(t, st, "flowsim-packet", "--set", "SIMULATOR_STOP_TIME=2000000", "-o", out)
	oneLineError(t, run(t, nil, "fctstats", "--iteration", "--allow-partial", out), 1, "no compute rows", "stopped early", "flows never finished")
}
